"""The commands README.md shows, read from the page at test time and run, so a wrong page
fails here.

Every code block of the page carries a marker, ``<!-- test: NAME -->`` on the line before
its fence (doc_blocks.py), and NAME says how the block is checked:

- quick-start: each ``make TARGET`` is a Makefile target; what ``make demo`` runs (its
  recipe, read from the Makefile) runs and must report equality with the reference.
- tour: every command is parsed by ppbn's own argument parser; the first ``TOUR_RUNS``
  run as written (the others start daemons on large data: minutes).
- two-hosts-names, -certs, -trust, -serve, -learn: the two-host recipe, for alice and for
  bob, each in its own folder as if on its own hosts. The certs and trust blocks run after
  the party's line of two-hosts-names; the peer's CA certificate is copied across as the
  page says; the fingerprint placeholder becomes the one the peer's ``certs ca`` printed;
  the host names and ``0.0.0.0`` become 127.0.0.1 and the ports free loopback ports.
  Nothing else is changed. Both daemons run in the background (own process groups, stopped
  with SIGTERM then SIGKILL however the test ends); the operator's ``ppbn learn`` must
  succeed and show the learned edges, and the files the page lists must exist.
- own-data: runs as written on a hospital.csv and lab.csv made here (id column
  ``patient``, the lab's rows in another order).

The page's ``ppbn`` is this interpreter's (a shim first on PATH); everything runs under
tmp_path, TMPDIR included.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doc_blocks import Block, blocks, marked

from ppbn.cli import build_parser
from ppbn.errors import UserError
from ppbn.pair.loopback import free_port
from ppbn.parties.client import DaemonClient

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAKEFILE = REPO / "Makefile"
NAMES = (
    "quick-start",
    "tour",
    "two-hosts-names",
    "two-hosts-certs",
    "two-hosts-trust",
    "two-hosts-serve",
    "two-hosts-learn",
    "own-data",
    "python-api",
)
TOUR_RUNS = 2  # datasets make and reference: about 10 s here
PARTIES = ("alice", "bob")
HOSTS = {"alice.example.org": "alice", "bob.example.org": "bob"}
PORTS = {"7401": "alice", "7402": "bob"}  # the page's ports -> whose daemon
ANY_ADDRESS = "0.0.0.0"
LOOPBACK = "127.0.0.1"
FINGERPRINT_PLACEHOLDER = "AB:CD:..."
COMMAND_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0


# -- running the page's commands --------------------------------------------------------------


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """The shell's environment: ``ppbn`` is this interpreter's, temporary files stay under
    tmp_path, and rich's tables are wide enough not to wrap an edge list."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "ppbn"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ppbn.cli "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    out = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    out.update(
        PATH=f"{bin_dir}{os.pathsep}{out.get('PATH', '')}",
        TMPDIR=str(tmp_path / "tmp"),
        COLUMNS="250",
    )
    return out


def shell(script: str, cwd: Path, env: dict[str, str], what: str) -> str:
    """Run ``script`` with bash (stop at the first failing command, echo each one) in its own
    process group, killed if it outlives the timeout; its output, or a failure that names the
    page's block and shows the output."""
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-xc", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        signal_group(process, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(
            f"{what}: still running after {COMMAND_TIMEOUT_S:g} s:\n{output}", pytrace=False
        )
    if process.returncode != 0:
        pytest.fail(f"{what}: exit code {process.returncode}:\n{output}", pytrace=False)
    return output


def signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def parse_only(command: str, where: str) -> argparse.Namespace:
    """``command`` (``ppbn ...``) through ppbn's own argument parser, without running it."""
    argv = shlex.split(command)
    assert argv[0] == "ppbn", f"{where}: not a ppbn command: {command}"
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            return build_parser().parse_args(argv[1:])
    except SystemExit:
        raise AssertionError(f"{where}: {command}\n{errors.getvalue()}") from None


def block(name: str) -> Block:
    return marked(README)[name]


# -- the page itself ----------------------------------------------------------------------------


def test_every_block_of_the_page_is_marked_and_known():
    found = blocks(README)
    unmarked = [b.where(README) for b in found if b.name is None]
    assert not unmarked, f"code blocks without a <!-- test: NAME --> marker: {unmarked}"
    assert sorted(marked(README)) == sorted(NAMES)


def test_every_ppbn_command_of_the_page_parses():
    """Each ``ppbn`` command (with alice's names for the two-host variables) is one that
    ppbn's argument parser accepts: a quick check of the whole page without running it."""
    names = dict(re.findall(r"(\w+)=(\S+)", party_names({"alice": 7401, "bob": 7402})["alice"]))
    for b in blocks(README):
        for command in b.commands:
            if command.startswith("ppbn "):
                expanded = re.sub(r"\$(\w+)", lambda m: names.get(m.group(1), m.group(0)), command)
                parse_only(expanded, b.where(README))


def test_doc_blocks_joins_continuations_and_drops_comments():
    from doc_blocks import commands

    text = '# a comment\nppbn a --name "x # y" \\\n  --b 1   # why\n\n   # more\nmake c'
    assert commands(text) == ['ppbn a --name "x # y" --b 1', "make c"]


# -- quick start ------------------------------------------------------------------------------------


def makefile_targets() -> dict[str, list[str]]:
    """Each Makefile target and its recipe lines."""
    targets: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in MAKEFILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t") and current is not None:
            current.append(line.strip())
            continue
        rule = re.match(r"^([A-Za-z0-9_.%/-]+)\s*:(?!=)", line)
        current = targets.setdefault(rule.group(1), []) if rule else None
    return targets


@pytest.mark.slow
def test_quick_start_targets_exist_and_make_demo_runs(tmp_path, env):
    quick = block("quick-start")
    targets = makefile_targets()
    for command in quick.commands:
        words = command.split()
        assert words[0] == "make" and len(words) == 2, f"{quick.where(README)}: {command}"
        assert words[1] in targets, f"{quick.where(README)}: no Makefile target {words[1]}"
    assert "make demo" in quick.commands
    # what `make demo` runs: its recipe, with the venv's ppbn as the ppbn on PATH
    recipe = [line.replace("$(VENV)/bin/", "") for line in targets["demo"]]
    assert recipe == ["ppbn demo"], recipe
    output = shell("\n".join(recipe), tmp_path, env, "make demo's recipe")
    assert "structure and edge order: equal to the reference" in output, output


# -- the Python API ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_python_example_runs_as_written(tmp_path):
    """The README's Python block, as written, in a fresh interpreter: a simulation whose
    secure network equals the reference, its pgmpy model and its picture."""
    import subprocess
    import sys

    code = block("python-api").text
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("True (("), done.stdout
    assert (tmp_path / "asia.png").stat().st_size > 10_000


# -- the tour ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tour_runs_its_first_commands_and_parses_the_rest(tmp_path, env):
    tour = block("tour")
    for command in tour.commands:
        parse_only(command, tour.where(README))
    output = shell("\n".join(tour.commands[:TOUR_RUNS]), tmp_path, env, tour.where(README))
    assert "P(" in output, output  # reference prints the learned CPTs


# -- two organisations on two hosts -----------------------------------------------------------------


def on_loopback(text: str, ports: dict[str, int]) -> str:
    """The page's text with its host names, any-address and ports on loopback."""
    for host in HOSTS:
        text = text.replace(host, LOOPBACK)
    text = text.replace(ANY_ADDRESS, LOOPBACK)
    for port, party in PORTS.items():
        text = re.sub(rf":{port}\b", f":{ports[party]}", text)
    return text


def party_names(ports: dict[str, int]) -> dict[str, str]:
    """Each party's line of the two-hosts-names block (PARTY=... PEER=... HOST=...)."""
    names = block("two-hosts-names")
    lines: dict[str, str] = {}
    for command in names.commands:
        party = re.search(r"\bPARTY=(\w+)", command)
        assert party, f"{names.where(README)}: no PARTY= in {command}"
        lines[party.group(1)] = on_loopback(command, ports)
    assert sorted(lines) == sorted(PARTIES), f"{names.where(README)}: {lines}"
    return lines


def start_daemon(command: str, folder: Path, env: dict[str, str]) -> subprocess.Popen:
    log = folder / "daemon.log"
    with open(log, "wb") as out:
        return subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop_daemons(processes: list[subprocess.Popen]) -> None:
    """SIGTERM every daemon's process group, then SIGKILL what outlives the grace time."""
    for process in processes:
        signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(max(deadline - time.monotonic(), 0.1))
        signal_group(process, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_GRACE_S)


def wait_ready(folder: Path, port: int, process: subprocess.Popen) -> None:
    """Until the daemon answers its party's operator and has shaken hands with its peer."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    with DaemonClient(f"{LOOPBACK}:{port}", str(folder / "op")) as client:
        while True:
            code = process.poll()
            log = folder / "daemon.log"
            assert code is None, f"{folder.name}'s daemon exited ({code}):\n{log.read_text()}"
            try:
                client.wait_ready(1.0)
                return
            except UserError as exc:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{folder.name}: {exc}\n{log.read_text()}") from None


def documented_job_files() -> tuple[str, list[str]]:
    """The output folder and the files the page says each daemon writes per job."""
    text = README.read_text(encoding="utf-8")
    said = re.search(r"Each daemon writes `([^`]+)/JOB/` \(([^)]*)\)", text)
    assert said, "README.md no longer says which files each daemon writes"
    return said.group(1), re.findall(r"`([\w.-]+\.(?:json|bif))`", said.group(2))


@pytest.mark.slow
def test_two_hosts_recipe_on_loopback(tmp_path, env):
    ports = {party: free_port() for party in PARTIES}
    names = party_names(ports)
    folders = {party: tmp_path / party for party in PARTIES}
    for folder in folders.values():
        folder.mkdir()

    # 1. each party's CA, daemon and operator certificates; the fingerprint its CA printed
    certs = block("two-hosts-certs")
    fingerprints = {}
    for party in PARTIES:
        script = "\n".join([names[party], *(on_loopback(c, ports) for c in certs.commands)])
        output = shell(script, folders[party], env, f"{certs.where(README)} as {party}")
        printed = re.search(r"^SHA-256 fingerprint: (\S+)$", output, re.MULTILINE)
        assert printed, f"{certs.where(README)} as {party}: no fingerprint printed:\n{output}"
        fingerprints[party] = printed.group(1)

    # 2. exchange the CA certificates, trust the peer's with the fingerprint read out
    trust = block("two-hosts-trust")
    assert FINGERPRINT_PLACEHOLDER in trust.text, trust.where(README)
    for party, peer in zip(PARTIES, reversed(PARTIES), strict=True):
        shutil.copy(folders[peer] / f"{peer}-ca" / "ca.crt", folders[party] / f"{peer}-ca.crt")
        commands = [
            on_loopback(c, ports).replace(FINGERPRINT_PLACEHOLDER, fingerprints[peer])
            for c in trust.commands
        ]
        output = shell(
            "\n".join([names[party], *commands]), folders[party], env, f"{trust.where(README)}"
        )
        assert "matches the pinned fingerprint" in output, output

    # 3. the same schema.json at both hosts, each party's own data
    data = tmp_path / "data"
    shell(f"ppbn datasets make --network asia --records 300 --out {data}", tmp_path, env, "data")
    for party in PARTIES:
        for name in ("schema.json", f"{party}.csv"):
            shutil.copy(data / name, folders[party] / name)

    # 4. both daemons, as written, each on its own "host"
    serve = block("two-hosts-serve")
    commands = {}
    for party in PARTIES:
        mine = [c for c in serve.commands if f"--role {party} " in c]
        assert len(mine) == 1, f"{serve.where(README)}: one serve command for {party}: {mine}"
        commands[party] = on_loopback(mine[0], ports)
        assert f"--listen {LOOPBACK}:{ports[party]}" in commands[party], commands[party]
    processes: list[subprocess.Popen] = []
    try:
        for party in PARTIES:
            processes.append(start_daemon(commands[party], folders[party], env))
        for party, process in zip(PARTIES, processes, strict=True):
            wait_ready(folders[party], ports[party], process)

        # 5. the operator's job, from alice's operator folder
        learn = block("two-hosts-learn")
        script = "\n".join(on_loopback(c, ports) for c in learn.commands)
        output = shell(script, folders["alice"], env, learn.where(README))
    finally:
        stop_daemons(processes)

    started = re.search(r"job (\S+) \(learn\) started at alice", output)
    assert started, output
    job = started.group(1)
    assert "SUCCEEDED" in output, output
    out_name, files = documented_job_files()
    assert {"network.json", "network.bif", "ledger.json", "stats.json", "result.json"} <= set(
        files
    ), files
    for party in PARTIES:
        job_dir = folders[party] / out_name / job
        missing = [name for name in files if not (job_dir / name).is_file()]
        assert not missing, f"{party}: {missing} not in {job_dir}"
        assert (folders[party] / out_name / "audit.log").is_file(), party
    edges = json.loads((folders["alice"] / out_name / job / "network.json").read_text())["edges"]
    assert edges, "no edge learned"
    for parent, child in edges:
        assert f"{parent} -> {child}" in output, (parent, child, output)


# -- your own data ------------------------------------------------------------------------------------


def write_hospital_and_lab(folder: Path, records: int = 300, seed: int = 11) -> None:
    """hospital.csv (smoker, age, cough) and lab.csv (xray, marker) of the same patients,
    the lab's rows in another order; xray depends on smoker and age, marker on xray."""
    rng = random.Random(seed)
    rows = []
    for i in range(records):
        smoker = rng.random() < 0.3
        age = rng.choice(("young", "middle", "old"))
        cough = rng.random() < (0.7 if smoker else 0.15)
        xray = rng.random() < (0.5 if smoker else 0.1) + (0.2 if age == "old" else 0.0)
        marker = rng.random() < (0.8 if xray else 0.2)
        rows.append(
            (
                f"p{i:04d}",
                "yes" if smoker else "no",
                age,
                "yes" if cough else "no",
                "abnormal" if xray else "normal",
                "high" if marker else "low",
            )
        )
    hospital = ["patient,smoker,age,cough", *(",".join(r[:4]) for r in rows)]
    lab_rows = rows[:]
    rng.shuffle(lab_rows)
    lab = ["patient,xray,marker", *(",".join((r[0], *r[4:])) for r in lab_rows)]
    (folder / "hospital.csv").write_text("\n".join(hospital) + "\n")
    (folder / "lab.csv").write_text("\n".join(lab) + "\n")


@pytest.mark.slow
def test_your_own_data_runs_as_written(tmp_path, env):
    own = block("own-data")
    write_hospital_and_lab(tmp_path)
    output = shell("\n".join(own.commands), tmp_path, env, own.where(README))
    assert json.loads((tmp_path / "mine" / "schema.json").read_text())
    assert "P(xray | smoker, age)" in output, output  # the reference's network
    assert "SUCCEEDED" in output, output
    assert "structure and edge order equal" in output, output  # simulate against the reference
