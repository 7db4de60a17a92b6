"""The bad-input catalogue: each case gives one line naming the file, line,
column or flag at fault (exit code 2), leaves nothing half-written, and no process behind.

File cases run the CLI in this process; daemon cases run two daemons in this process
(test job kinds can be registered) or as real `ppbn party serve` processes (signals,
orphans, gRPC's own stderr).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from known_files import TEST_POLICY
from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until as wait_for

from ppbn.bn.schema import Schema
from ppbn.cli import main
from ppbn.data.datasets import make_dataset
from ppbn.data.outputs import atomic_output_dir
from ppbn.data.party_data import load_party_data
from ppbn.errors import UserError
from ppbn.jobs.base import JobKind
from ppbn.jobs.policy import LocalPolicy
from ppbn.jobs.registry import register_job, unregister_job
from ppbn.pair.loopback import LocalPair, PairFiles, free_port
from ppbn.parties.client import DaemonClient
from ppbn.parties.daemon import DaemonConfig, PartyDaemon
from ppbn.parties.pki import make_local_pki
from ppbn.parties.tls import PARTY_ROLES
from ppbn.proto import party_pb2

GRPC_CORE_LINE = re.compile(r"^[IWEDF]\d{4} \d\d:\d\d:\d\d", re.MULTILINE)


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


DAEMON_OWN_FILES = {"audit.log"}  # the daemon's audit log lives beside the job folders


def entries(folder: Path) -> list[str]:
    """Everything in a folder, hidden temporaries included (not the daemon's audit log)."""
    return sorted(p.name for p in folder.iterdir() if p.name not in DAEMON_OWN_FILES)


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process cannot create anything in (root ignores mode bits: use /sys)."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    probe = Path("/sys/ppbn-write-probe")
    try:
        probe.mkdir()
    except OSError:
        return Path("/sys")
    probe.rmdir()
    pytest.skip("running as root and /sys is writable: no unwritable folder to test with")


# -- 1. outputs: checked before any work, written aside, renamed into place ------------------


def test_reference_out_that_is_a_file_is_refused_before_loading_anything(tmp_path, capsys):
    target = tmp_path / "result.txt"
    target.write_text("keep me")
    # --data does not exist: the --out error comes first, so no work is ever lost to it
    code, err = run(
        ["reference", "--data", str(tmp_path / "nowhere"), "--out", str(target)], capsys
    )
    assert code == 2
    assert err == f"ppbn: error: --out {target}: exists and is not a folder\n"
    assert target.read_text() == "keep me" and entries(tmp_path) == ["result.txt"]


def test_reference_out_in_an_unwritable_folder(small_data, tmp_path, capsys):
    parent = unwritable_folder(tmp_path)
    target = parent / "ref"
    code, err = run(["reference", "--data", str(small_data), "--out", str(target)], capsys)
    assert code == 2
    assert re.fullmatch(
        rf"ppbn: error: --out {re.escape(str(target))}: cannot write in {re.escape(str(parent))} \(.+\)\n",
        err,
    )
    assert not target.exists()


def test_reference_out_below_a_file(small_data, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code, err = run(
        ["reference", "--data", str(small_data), "--out", str(tmp_path / "file" / "ref")], capsys
    )
    assert code == 2
    assert (
        err
        == f"ppbn: error: --out {tmp_path / 'file' / 'ref'}: {tmp_path / 'file'} is not a folder\n"
    )


def test_reference_out_is_written_whole_and_replaced_only_with_force(small_data, tmp_path, capsys):
    out = tmp_path / "ref"
    assert run(["reference", "--data", str(small_data), "--out", str(out)], capsys)[0] == 0
    assert entries(out) == ["network.bif", "network.json"] and entries(tmp_path) == ["ref"]
    (out / "notes.txt").write_text("mine")
    code, err = run(["reference", "--data", str(small_data), "--out", str(out)], capsys)
    assert code == 2
    assert (
        err
        == f"ppbn: error: --out {out}: folder exists and is not empty (choose another, or --force to replace it)\n"
    )
    assert (
        run(["reference", "--data", str(small_data), "--out", str(out), "--force"], capsys)[0] == 0
    )
    assert entries(out) == ["network.bif", "network.json"] and entries(tmp_path) == [
        "ref"
    ]  # no old files mixed in


def test_datasets_make_refuses_an_existing_target_without_force(tmp_path, capsys):
    out = tmp_path / "d"
    assert (
        run(
            ["datasets", "make", "--network", "asia", "--records", "50", "--out", str(out)], capsys
        )[0]
        == 0
    )
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, err = run(
        [
            "datasets",
            "make",
            "--network",
            "asia",
            "--records",
            "80",
            "--seed",
            "1",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 2
    assert (
        err
        == f"ppbn: error: --out {out}: folder exists and is not empty (choose another, or --force to replace it)\n"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert (
        run(
            [
                "datasets",
                "make",
                "--network",
                "asia",
                "--records",
                "80",
                "--out",
                str(out),
                "--force",
            ],
            capsys,
        )[0]
        == 0
    )
    assert len((out / "alice.csv").read_text().splitlines()) == 81 and entries(tmp_path) == ["d"]


def test_datasets_make_into_a_file(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    code, err = run(
        ["datasets", "make", "--network", "asia", "--records", "50", "--out", str(tmp_path / "f")],
        capsys,
    )
    assert (code, err) == (2, f"ppbn: error: --out {tmp_path / 'f'}: exists and is not a folder\n")


def test_a_failure_while_writing_leaves_the_old_folder_and_no_temporary(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(OSError, match="disk full"), atomic_output_dir(out) as folder:
        (folder / "half.json").write_text("{")
        raise OSError("disk full")
    assert entries(tmp_path) == ["out"] and entries(out) == []


@pytest.mark.parametrize(
    "command",
    [
        ["compare", "--network", "asia", "--records", "100", "--p", "0.2"],
        ["simulate", "--network", "asia", "--records", "100"],
        ["demo"],
    ],
)
def test_run_commands_check_out_before_any_work(command, tmp_path, capsys, monkeypatch):
    def sampled(*args, **kwargs):
        raise AssertionError("the data set was sampled before --out was checked")

    monkeypatch.setattr("ppbn.data.datasets.make_dataset", sampled)  # every run's first work
    target = tmp_path / "taken"
    target.write_text("")
    code, err = run([*command, "--out", str(target)], capsys)
    assert (code, err) == (2, f"ppbn: error: --out {target}: exists and is not a folder\n")
    assert entries(tmp_path) == ["taken"]


def test_certs_ca_into_a_file_or_an_unwritable_folder(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    code, err = run(["certs", "ca", "--out", str(tmp_path / "f")], capsys)
    assert (code, err) == (2, f"ppbn: error: --out {tmp_path / 'f'}: exists and is not a folder\n")
    assert entries(tmp_path) == ["f"]
    parent = unwritable_folder(tmp_path)
    code, err = run(["certs", "ca", "--out", str(parent / "ca")], capsys)
    assert code == 2
    assert re.fullmatch(
        rf"ppbn: error: cannot write {re.escape(str(parent / 'ca' / 'ca.key'))}: .+\n", err
    )
    assert not (parent / "ca").exists()


def test_certs_request_never_leaves_a_new_key_beside_an_old_request(tmp_path, capsys):
    out = tmp_path / "host"
    (out / "bob.csr").mkdir(parents=True)  # the request cannot be written
    (out / "bob.key").write_text("old key")
    code, err = run(
        ["certs", "request", "--role", "bob", "--host", "b.example", "--out", str(out), "--force"],
        capsys,
    )
    assert (code, err) == (
        2,
        f"ppbn: error: cannot write {out / 'bob.csr'}: it exists and is not a file\n",
    )
    assert (out / "bob.key").read_text() == "old key" and entries(out) == ["bob.csr", "bob.key"]


def test_certs_ca_writes_key_and_certificate_together_or_neither(tmp_path, capsys, monkeypatch):
    import ppbn.parties.pki as pki

    real_link = os.link

    def link_fails_for_the_certificate(src, dst, *args, **kwargs):
        if str(dst).endswith("ca.crt"):
            raise OSError(28, "No space left on device")
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(pki.os, "link", link_fails_for_the_certificate)
    code, err = run(["certs", "ca", "--out", str(tmp_path / "ca")], capsys)
    assert (code, err) == (
        2,
        f"ppbn: error: cannot write {tmp_path / 'ca' / 'ca.crt'}: No space left on device\n",
    )
    assert entries(tmp_path / "ca") == []  # no CA key without its certificate


# -- 6. CSV files: byte-order mark, rows of the wrong length ---------------------------------


def csv_schema(tmp_path: Path) -> Schema:
    schema = {
        "id_column": "record_id",
        "variables": [
            {"name": n, "owner": "alice", "states": ["x", "y"]} for n in ("a", "b", "c", "d")
        ]
        + [{"name": "z", "owner": "bob", "states": ["x", "y"]}],
    }
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    return Schema.load(str(path))


def test_a_csv_with_a_utf8_byte_order_mark_reads(tmp_path):
    schema = csv_schema(tmp_path)
    path = tmp_path / "alice.csv"
    path.write_bytes(b"\xef\xbb\xbfrecord_id,a,b,c,d\nr1,x,y,x,y\nr2,y,y,x,x\n")
    data = load_party_data(schema, "alice", path)
    assert data.ids == ("r1", "r2") and data.codes.tolist() == [[0, 1, 0, 1], [1, 1, 0, 0]]


@pytest.mark.parametrize(("row", "fields"), [("r2,y,y", 3), ("r2,y,y,x,x,y", 6)])
def test_a_row_of_the_wrong_length_is_named(tmp_path, row, fields):
    schema = csv_schema(tmp_path)
    path = tmp_path / "alice.csv"
    path.write_text(f"record_id,a,b,c,d\nr1,x,y,x,y\n{row}\nr3,x,x,x,x\n")
    with pytest.raises(UserError) as caught:
        load_party_data(schema, "alice", path)
    assert str(caught.value) == f"{path}: line 3 has {fields} fields, the header has 5"


# -- 7. gRPC's own log lines never reach stderr ------------------------------------------


def ppbn_command() -> list[str]:
    return [sys.executable, "-m", "ppbn.cli"]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}


def test_port_in_use_is_one_line_without_grpc_core_logs(small_data, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                *ppbn_command(),
                "party",
                "serve",
                "--role",
                "alice",
                "--schema",
                str(small_data / "schema.json"),
                "--data",
                str(small_data / "alice.csv"),
                "--listen",
                f"127.0.0.1:{port}",
                "--peer",
                "127.0.0.1:9",
                "--insecure",
                "--out",
                str(tmp_path / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            env=clean_env(),
        )
    assert done.returncode == 2
    assert not GRPC_CORE_LINE.search(done.stderr), done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"ppbn: error: cannot listen on 127.0.0.1:{port}: the port is in use or the address is not one of this host"
    )
    assert "Traceback" not in done.stderr


# -- 2. the daemon: --out checked at start, job folders whole, no local paths to the peer ----


def test_daemon_with_an_unwritable_out_does_not_start(small_data, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code, err = run(
        [
            "party",
            "serve",
            "--role",
            "alice",
            "--schema",
            str(small_data / "schema.json"),
            "--data",
            str(small_data / "alice.csv"),
            "--listen",
            "127.0.0.1:0",
            "--peer",
            "127.0.0.1:9",
            "--insecure",
            "--out",
            str(tmp_path / "file" / "out"),
        ],
        capsys,
    )
    assert code == 2
    assert (
        err.splitlines()[-1]
        == f"ppbn: error: --out {tmp_path / 'file' / 'out'}: cannot write job files there (Not a directory)"
    )


class InProcessPair:
    """Alice's and bob's daemons in this process (plaintext loopback, test job kinds)."""

    def __init__(self, data: Path, tmp: Path) -> None:
        self.ports = {"alice": free_port(), "bob": free_port()}
        self.out = {role: tmp / f"out-{role}" for role in self.ports}
        self.daemons = {}
        for role, peer in (("alice", "bob"), ("bob", "alice")):
            config = DaemonConfig(
                role=role,
                schema_path=str(data / "schema.json"),
                data_path=str(data / f"{role}.csv"),
                listen=f"127.0.0.1:{self.ports[role]}",
                peer=f"127.0.0.1:{self.ports[peer]}",
                insecure=True,
                out_dir=str(self.out[role]),
                timeout_s=PEER_TIMEOUT_S,
                probe_interval_s=0.2,
                policy=LocalPolicy.load(TEST_POLICY),
            )
            self.daemons[role] = PartyDaemon(config)
            self.daemons[role].start()
        wait_for(lambda: all(d.peer_state == "ok" for d in self.daemons.values()), what="handshake")

    def client(self, role: str) -> DaemonClient:
        return DaemonClient(f"127.0.0.1:{self.ports[role]}", None, insecure=True)

    def stop(self) -> None:
        for daemon in self.daemons.values():
            daemon.stop(grace_s=0.5)


@pytest.fixture
def in_process(small_data, tmp_path):
    pair = InProcessPair(small_data, tmp_path)
    yield pair
    pair.stop()


@contextlib.contextmanager
def job_kind(name: str, run_fn):
    register_job(JobKind(name, run_fn, lambda params, schema: dict(params), "test job"))
    try:
        yield
    finally:
        unregister_job(name)


def test_a_failed_job_keeps_no_network_beside_its_result_at_either_side(in_process):
    def half(role, channel, context):
        (context.out_dir / "network.json").write_text(
            '{"edges": []}'
        )  # complete, then the job fails
        if role == "alice":
            raise UserError(f"cannot read {context.out_dir}/secret-local-file")
        channel.recv("never")
        return {}

    with job_kind("half", half), in_process.client("alice") as client:
        job_id = client.start("half", {})
        outcome = client.wait(job_id, timeout_s=WAIT_S)
    assert outcome.state == "FAILED"
    bob_job = wait_for(lambda: in_process.daemons["bob"].jobs.get(job_id), what="bob's job")
    wait_for(bob_job.done.is_set, what="bob's job to end")
    assert (
        bob_job.error == "peer alice aborted the job: the job failed there (details in its own log)"
    )
    for role, out in in_process.out.items():
        assert entries(out / job_id) == ["ledger.json", "result.json", "stats.json"], role
        assert json.loads((out / job_id / "result.json").read_text())["state"] == "FAILED"
        assert entries(out) == [job_id], role  # no temporary folder left behind
    assert (
        str(in_process.out["alice"])
        not in (in_process.out["bob"] / job_id / "result.json").read_text()
    )


def test_a_successful_job_folder_appears_whole(in_process):
    seen_during_run = []

    def writes(role, channel, context):
        (context.out_dir / "network.json").write_text("{}")
        seen_during_run.append(entries(Path(in_process.out[role])))
        channel.send("x", b"1")
        channel.recv("x")
        return {"file": str(context.out_dir / "network.json")}

    with job_kind("writes", writes), in_process.client("alice") as client:
        job_id = client.start("writes", {})
        outcome = client.wait(job_id, timeout_s=WAIT_S)
    assert outcome.state == "SUCCEEDED", outcome.error
    assert all(
        names == [f".{job_id}.partial"] for names in seen_during_run
    )  # not OUT/JOB until done
    assert outcome.result == {"file": str(in_process.out["alice"] / job_id / "network.json")}
    assert outcome.out_dir == str(in_process.out["alice"] / job_id)
    wait_for(in_process.daemons["bob"].jobs[job_id].done.is_set, what="bob's job to end")
    for out in in_process.out.values():
        assert entries(out) == [job_id]
        assert entries(out / job_id) == ["ledger.json", "network.json", "result.json", "stats.json"]


# -- 5. two jobs started in the same instant, one at each daemon ----------------------------


def start_both(clients: dict[str, DaemonClient], kind: str, tag: str) -> dict[str, str]:
    """Start a job at both daemons in the same instant: {role: "started JOB" or the error}."""
    barrier = threading.Barrier(len(clients))
    outcomes: dict[str, str] = {}

    def start(role: str) -> None:
        barrier.wait(WAIT_S)
        try:
            outcomes[role] = "started " + clients[role].start(kind, {}, f"{tag}-{role}")
        except UserError as exc:
            outcomes[role] = str(exc)

    threads = [threading.Thread(target=start, args=(role,)) for role in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    return outcomes


def job_ended_everywhere(pair: InProcessPair, job_id: str) -> bool:
    return all(
        job_id in d.jobs and d.jobs[job_id].done.is_set() and d.running is None
        for d in pair.daemons.values()
    )


def test_crossing_job_starts_run_exactly_one(in_process, caplog):
    answered = threading.Event()  # both starts have their answer: the job may end

    def hold(role, channel, context):
        channel.send("hold", b"1")
        channel.recv("hold")
        deadline = time.monotonic() + WAIT_S
        while not answered.wait(0.02) and time.monotonic() < deadline:
            context.check_cancelled()  # running until the other start has met it
        return {}

    caplog.set_level(logging.INFO)
    with job_kind("hold", hold):
        clients = {role: in_process.client(role) for role in ("alice", "bob")}
        try:
            for attempt in range(20):
                answered.clear()
                outcomes = start_both(clients, "hold", f"x{attempt}")
                answered.set()
                started = [role for role, text in outcomes.items() if text.startswith("started")]
                assert len(started) == 1, (attempt, outcomes)
                loser = next(text for text in outcomes.values() if not text.startswith("started"))
                assert "busy" in loser, loser
                job_id = outcomes[started[0]].split()[1]
                wait_for(
                    lambda job_id=job_id: job_ended_everywhere(in_process, job_id),
                    what=f"job {job_id} to end",
                )
                for daemon in in_process.daemons.values():
                    assert daemon.jobs[job_id].state == party_pb2.JobInfo.SUCCEEDED
        finally:
            for client in clients.values():
                client.close()
    crossings = sum("crossed" in record.getMessage() for record in caplog.records)
    print(
        f"20 simultaneous starts: each ran exactly one job; {crossings} resolved by the nonce tie-break"
    )


# -- 3 and 4: real daemon processes: SIGKILL leaves no orphans, Ctrl-C of learn cancels -----


@pytest.fixture(scope="module")
def big_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("catalogue-big") / "asia"
    make_dataset("asia", 60000, 7, out)
    return out


@pytest.fixture
def process_pair(big_data, tmp_path):
    make_local_pki(tmp_path / "certs", PARTY_ROLES)
    files = PairFiles(
        big_data / "schema.json",
        {r: big_data / f"{r}.csv" for r in PARTY_ROLES},
        tmp_path / "certs",
        tmp_path,
    )
    policy = dataclasses.replace(LocalPolicy.load(TEST_POLICY), workers=2)
    with LocalPair(files, PEER_TIMEOUT_S, policy=policy) as pair:
        yield pair


def children(pid: int) -> set[int]:
    """Live descendants of ``pid`` (from /proc), zombies excluded."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


TABLES_JOB = {"key_bits": 1024, "max_family": 3}


@pytest.mark.slow
def test_sigkill_of_a_daemon_leaves_no_worker_or_resource_tracker(process_pair):
    with process_pair.client("alice") as client:
        client.start("tables", TABLES_JOB)
    victims: dict[str, set[int]] = {}

    def with_workers():
        for role in PARTY_ROLES:
            kids = children(process_pair.processes[role].pid)
            if len(kids) >= 2:  # workers (and the resource tracker they keep alive)
                victims[role] = kids
                return True
        return False

    wait_for(with_workers, what="worker processes")
    role, kids = next(iter(victims.items()))
    os.kill(process_pair.processes[role].pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(
        lambda: not any(alive(pid) for pid in kids),
        WAIT_S,
        f"{role}'s {len(kids)} children to exit",
    )
    print(
        f"SIGKILL of {role}: its {len(kids)} child processes were gone after {time.monotonic() - killed:.2f} s"
    )


def _start_learn_of_tables(process_pair, tmp_path) -> subprocess.Popen:
    """``ppbn learn`` of a tables job through alice, its output piped."""
    return subprocess.Popen(
        [
            *ppbn_command(),
            "learn",
            "--peer",
            process_pair.address("alice"),
            "--tls-dir",
            str(tmp_path / "certs" / "alice"),
            "--job",
            "tables",
            "--params",
            json.dumps(TABLES_JOB),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )


@pytest.mark.slow
def test_ctrl_c_of_learn_cancels_the_job_at_both_daemons(process_pair, tmp_path):
    # a test run started in the background ignores SIGINT, and an ignored signal is inherited
    # across exec; a handler is not, so the command starts with Python's own handler
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        learn = _start_learn_of_tables(process_pair, tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    first = learn.stderr.readline()
    match = re.match(r"job (\S+) \(tables\) started at alice", first)
    assert match, first
    job_id = match.group(1)
    time.sleep(1.0)
    learn.send_signal(signal.SIGINT)
    out, err = learn.communicate(timeout=WAIT_S)
    assert learn.returncode == 130, (first, out, err)
    assert (
        err.splitlines()[-1]
        == f"ppbn: interrupted; job {job_id} cancelled at alice, which told its peer to stop it too"
    )
    assert "Traceback" not in err
    for role in PARTY_ROLES:
        with process_pair.client(role) as client:
            outcome = client.wait(job_id, timeout_s=WAIT_S)
        assert outcome.state in ("CANCELLED", "FAILED"), (role, outcome.state)
    assert entries(process_pair.out_dir("alice") / job_id) == [
        "ledger.json",
        "result.json",
        "stats.json",
    ]


def test_shares_combine_out_that_is_a_folder(tmp_path, capsys):
    code, err = run(
        ["shares", "combine", "--alice", "a.json", "--bob", "b.json", "--out", str(tmp_path)],
        capsys,
    )
    assert (code, err) == (2, f"ppbn: error: --out {tmp_path}: is a folder, not a file\n")
