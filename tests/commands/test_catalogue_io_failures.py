"""The bad-input catalogue, I/O part: a full disk or a failing write during a job, in the
audit log or under ``datasets make``. Each case gives one line naming the file and the
reason, no traceback in any log, nothing half-written, and both parties agree on how the
job ended.

A full disk is a small tmpfs mounted for the test (root on Linux); where none can be
mounted those tests are skipped, and the cases that inject the failure run anyway.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from known_files import TEST_POLICY
from loopback_pair import insecure_pair
from test_catalogue import InProcessPair, entries, job_kind, run
from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until as wait_for

from ppbn.cli import main
from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy
from ppbn.pair.loopback import free_port
from ppbn.parties.audit import AuditLog, verify_log
from ppbn.parties.client import DaemonClient
from ppbn.parties.daemon import DaemonConfig, PartyDaemon
from ppbn.proto.party_pb2 import JobInfo

NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device"


class SmallDisk:
    """A tmpfs of a few pages; ``fill`` takes what is left with a filler file, ``free`` gives it back."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / "filler"

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as out:
            for chunk in (4096, 1):
                with contextlib.suppress(OSError):
                    while True:
                        out.write(b"\0" * chunk)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture
def small_disk(tmp_path) -> SmallDisk:
    root = tmp_path / "disk"
    root.mkdir()
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("a small file system needs root on Linux (mount -t tmpfs)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(root)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield SmallDisk(root)
    subprocess.run(["umount", "-l", str(root)], capture_output=True)


class Pair(InProcessPair):
    """InProcessPair with alice's job folders (and, optionally, audit log) where the test says."""

    def __init__(self, data: Path, tmp: Path, alice_out: Path, alice_audit: Path | None) -> None:
        self.ports = {"alice": free_port(), "bob": free_port()}
        self.out = {"alice": alice_out, "bob": tmp / "out-bob"}
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
                audit_log=str(alice_audit) if role == "alice" and alice_audit else None,
            )
            self.daemons[role] = PartyDaemon(config)
            self.daemons[role].start()
        wait_for(lambda: all(d.peer_state == "ok" for d in self.daemons.values()), what="handshake")


def no_traceback(caplog) -> None:
    for record in caplog.records:
        assert record.exc_info is None and "Traceback" not in record.getMessage(), (
            record.getMessage()
        )


def outcomes(pair: InProcessPair, job_id: str) -> dict[str, tuple[str, str]]:
    """Each party's (state, error) of a job, once it ended there."""
    ended = {}
    for role, daemon in pair.daemons.items():
        job = wait_for(lambda daemon=daemon: daemon.jobs.get(job_id), what=f"{role}'s job")
        wait_for(job.done.is_set, what=f"{role}'s job to end")
        ended[role] = (JobInfo.State.Name(job.state), job.error)
    return ended


def run_job(pair: InProcessPair, kind: str) -> tuple[str, dict[str, tuple[str, str]]]:
    with pair.client("alice") as client:
        job_id = client.start(kind, {})
        client.wait(job_id, timeout_s=WAIT_S)
    return job_id, outcomes(pair, job_id)


@pytest.fixture
def full_disk_pair(small_data, tmp_path, small_disk):
    pair = Pair(small_data, tmp_path, small_disk.root / "out", tmp_path / "alice-audit.log")
    yield pair, small_disk
    pair.stop()


# -- a job's outputs on a full disk ---------------------------------------------------------
def test_a_job_output_that_does_not_fit_fails_the_job_at_both_parties(full_disk_pair, caplog):
    pair, disk = full_disk_pair

    def writes(role, channel, context):
        channel.send("x", b"1")
        channel.recv("x")
        (context.out_dir / "network.json").write_text("{" + " " * 20000 + "}")
        return {"file": str(context.out_dir / "network.json")}

    caplog.set_level(logging.INFO)
    disk.fill()
    with job_kind("writes", writes):
        job_id, ended = run_job(pair, "writes")
    alice_out = pair.out["alice"]
    assert ended["alice"] == (
        "FAILED",
        f"alice cannot write the job's files in {alice_out} ({NO_SPACE}): the job's "
        f"outputs are kept at no party; free space in {alice_out}, then run the job again",
    )
    assert ended["bob"] == (
        "FAILED",
        "peer alice aborted the job: it could not write its outputs, so no party keeps the job's outputs "
        "(details in its own log)",
    )
    no_traceback(caplog)
    assert not (alice_out / f".{job_id}.partial").exists()  # nothing half-written stays
    assert not (pair.out["bob"] / job_id / "network.json").exists()
    assert entries(pair.out["bob"]) == [job_id]


def test_result_files_that_do_not_fit_fail_the_job_at_both_parties(full_disk_pair, caplog):
    """The job's own file fits; its result file does not: the parties still agree."""
    pair, disk = full_disk_pair

    def big_result(role, channel, context):
        (context.out_dir / "network.json").write_text("{}")
        if role == "alice":
            disk.fill()
        channel.send("x", b"1")
        channel.recv("x")
        return {"notes": "n" * 300_000}  # more than the whole disk

    with job_kind("big-result", big_result):
        job_id, ended = run_job(pair, "big-result")
    assert ended["alice"][0] == ended["bob"][0] == "FAILED", ended
    assert f"cannot write the job's files in {pair.out['alice']} ({NO_SPACE})" in ended["alice"][1]
    assert "could not write its outputs" in ended["bob"][1]
    no_traceback(caplog)
    assert not (pair.out["alice"] / f".{job_id}.partial").exists()
    assert entries(pair.out["bob"] / job_id) == ["ledger.json", "result.json", "stats.json"]
    assert json.loads((pair.out["bob"] / job_id / "result.json").read_text())["state"] == "FAILED"
    # space freed: the next job runs and keeps its files at both parties
    disk.free()

    def small(role, channel, context):
        (context.out_dir / "network.json").write_text("{}")
        channel.send("x", b"1")
        channel.recv("x")
        return {}

    with job_kind("small", small):
        job_id, ended = run_job(pair, "small")
    assert ended == {"alice": ("SUCCEEDED", ""), "bob": ("SUCCEEDED", "")}
    assert entries(pair.out["alice"] / job_id) == [
        "ledger.json",
        "network.json",
        "result.json",
        "stats.json",
    ]


def test_a_job_whose_reveals_cannot_be_audited_fails_at_both_parties(small_data, tmp_path, caplog):
    pair = Pair(small_data, tmp_path, tmp_path / "out-alice", None)
    try:

        def refuse(*args, **kwargs):
            raise OSError(errno.ENOSPC, NO_SPACE)

        pair.daemons["alice"].audit.revealed = refuse

        def quick(role, channel, context):
            (context.out_dir / "network.json").write_text("{}")
            channel.send("x", b"1")
            channel.recv("x")
            return {}

        with job_kind("quick", quick):
            job_id, ended = run_job(pair, "quick")
    finally:
        pair.stop()
    assert ended["alice"] == (
        "FAILED",
        "alice's audit log cannot be written (see its log): the job's outputs are kept at no party",
    )
    assert ended["bob"][0] == "FAILED" and "it could not write its audit log" in ended["bob"][1]
    no_traceback(caplog)
    for out in pair.out.values():
        assert entries(out / job_id) == ["ledger.json", "result.json", "stats.json"]


# -- the audit log on a full disk -----------------------------------------------------------
def test_a_full_disk_leaves_no_torn_audit_line_and_the_daemon_restarts(
    small_data, tmp_path, small_disk, caplog
):
    """Appends fail once the log's last page is full; the log keeps whole lines only, jobs
    are refused with one line meanwhile, and after space is freed the daemon starts."""
    out = small_disk.root / "out"
    pair = Pair(small_data, tmp_path, out, None)
    log = out / "audit.log"
    try:
        small_disk.fill()
        failures = []
        with pair.client("alice") as client:
            for number in range(40):
                try:
                    job_id = client.start("ping", {"rounds": 1}, f"p{number}")
                    client.wait(job_id, timeout_s=WAIT_S)
                except UserError as exc:
                    if "busy with another job" in str(exc):  # bob still ending the last job
                        time.sleep(0.2)
                        continue
                    failures.append(str(exc))
                    break
        assert failures and "alice's audit log cannot be written" in failures[0], failures
        data = log.read_bytes()
        assert data.endswith(b"\n")
        verify_log(data, "alice")  # whole lines only
    finally:
        pair.stop()
    no_traceback(caplog)
    assert any(
        "cannot append an event (No space left on device): no job runs until it can"
        in r.getMessage()
        for r in caplog.records
    )
    small_disk.free()
    again = Pair(small_data, tmp_path / "again", out, None)
    again.stop()
    assert verify_log(log.read_bytes(), "alice").lines >= 3


def test_a_torn_tail_is_set_aside_at_start_and_an_edit_is_still_refused(
    small_data, tmp_path, caplog
):
    out = tmp_path / "out-alice"
    pair = Pair(small_data, tmp_path, out, None)
    pair.stop()
    log = out / "audit.log"
    whole = log.read_bytes()
    lines = whole.splitlines(keepends=True)
    torn = lines[-1][:45]  # what a write cut short leaves: the start of the next line
    torn = torn.replace(b'"seq":%d' % len(lines), b'"seq":%d' % (len(lines) + 1))
    log.write_bytes(whole + torn)
    caplog.set_level(logging.WARNING)
    again = Pair(small_data, tmp_path / "again", out, None)
    again.stop()
    aside = out / "audit.log.torn-1"
    assert aside.read_bytes() == torn
    warnings = [r.getMessage() for r in caplog.records if "unfinished line" in r.getMessage()]
    assert warnings == [
        f"audit log {log} ended with an unfinished line {len(lines) + 1} ({len(torn)} bytes: a write cut short by "
        f"a crash or a full disk, not an edit): set aside as {aside}; lines 1-{len(lines)} are intact and the "
        "log goes on from there"
    ]
    assert log.read_bytes().startswith(whole) and verify_log(log.read_bytes(), "alice").lines > len(
        lines
    )
    # a changed complete line is still tampering: refused
    changed = log.read_bytes().replace(b'"event":"daemon_started"', b'"event":"daemon_startet"', 1)
    log.write_bytes(changed)
    config = replace(again.daemons["alice"].config, listen=f"127.0.0.1:{free_port()}")
    with pytest.raises(
        UserError, match=r"is broken at line 2: its prev does not match the hash of line 1"
    ):
        PartyDaemon(config).start()


def test_a_tail_that_no_write_leaves_is_refused_as_damage(tmp_path):
    log = tmp_path / "audit.log"
    first = AuditLog(log, "alice")
    first.event("daemon_started")
    first.close()
    log.write_bytes(log.read_bytes() + b'{"seq":2,"time":"yesterday"')
    with pytest.raises(
        UserError,
        match=r"line 2: is incomplete \(no newline at the end\) and is not the start of an event line",
    ):
        AuditLog(log, "alice")


# -- refused requests: the log grows at a bounded rate --------------------------------------
def test_a_peer_flooding_refused_requests_gets_a_bounded_number_of_lines(small_data, tmp_path):
    policy = LocalPolicy.load(TEST_POLICY)
    strict = replace(policy, disclosures=("owner", "shared"))
    pair = insecure_pair(small_data, tmp_path, {"alice": strict, "bob": policy})
    with pair as (_, ports), DaemonClient(f"127.0.0.1:{ports['bob']}", None, insecure=True) as bob:
        for number in range(25):
            with pytest.raises(UserError, match="disclosure"):
                bob.start("learn", {"key_bits": 1024, "disclosure": "public"}, f"flood{number}")
    events = [
        json.loads(line)
        for line in (tmp_path / "out-alice" / "audit.log").read_bytes().splitlines()
    ]
    refused = [e for e in events if e["event"] == "refused"]
    summaries = [e for e in events if e["event"] == "refused_summary"]
    assert len(refused) == 10
    assert len(summaries) == 1 and summaries[0]["count"] == 15 and summaries[0]["source"] == "bob"
    assert summaries[0]["codes"] == {"POLICY": 15}
    assert summaries[0]["note"].startswith("15 more refused requests from bob between ")
    assert events[-1]["event"] == "daemon_stopped"


# -- datasets make on a full disk -----------------------------------------------------------
def test_datasets_make_on_a_full_disk_is_one_line_and_leaves_nothing(small_disk, capsys):
    out = small_disk.root / "d"  # 256 KiB: 20,000 records do not fit
    code, err = run(
        [
            "datasets",
            "make",
            "--network",
            "asia",
            "--records",
            "20000",
            "--missing-rate",
            "0.1",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 2
    assert (
        err == f"ppbn: error: --out {out}: cannot write there ({NO_SPACE}); nothing was written\n"
    )
    assert entries(small_disk.root) == []


def test_datasets_make_on_a_full_disk_without_a_small_file_system(tmp_path, capsys, monkeypatch):
    """Without a small file system: the failure injected where the CSV is written."""
    import ppbn.data.datasets as datasets

    def full(path, *args, **kwargs):
        with open(path, "w") as half:
            half.write("record_id,")
            raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(datasets, "write_party_csv", full)
    out = tmp_path / "d"
    code, err = run(
        ["datasets", "make", "--network", "asia", "--records", "50", "--out", str(out)], capsys
    )
    assert (code, err) == (
        2,
        f"ppbn: error: --out {out}: cannot write there ({NO_SPACE}); nothing was written\n",
    )
    assert entries(tmp_path) == []


def test_audit_verify_tells_a_torn_tail_from_an_edit(tmp_path, capsys):
    log = tmp_path / "audit.log"
    writer = AuditLog(log, "alice")
    for number in range(3):
        writer.event("revealed", f"j{number}", **{"class": "edge", "count": number})
    writer.close()
    whole = log.read_bytes()
    log.write_bytes(whole + b'{"seq":4,"time":"2025-01-0')
    assert main(["audit", "verify", str(log)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"ppbn: audit log {log} ends with a torn line: line 4: is incomplete: a write cut short (by a crash "
        f"or a full disk), not an edit; lines 1-3 are intact; the daemon sets it aside as {log}.torn-N when it "
        "next starts\n"
    )
    log.write_bytes(whole.replace(b'"j1"', b'"j9"'))
    assert main(["audit", "verify", str(log)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"ppbn: audit log {log} is broken (changed or damaged): line 3: its prev does not match"
    )


# -- three parties: the miner confirms only once both parties have ---------------------------
def test_a_party_that_cannot_write_fails_a_miner_job_at_all_three(tmp_path, monkeypatch, caplog):
    from daemon_trio import Trio

    from ppbn.data.datasets import make_dataset
    from ppbn.parties.pki import make_local_pki

    world = tmp_path / "world"
    make_dataset("asia", 300, 5, world / "data")
    make_local_pki(world / "certs")
    trio = Trio(world, tmp_path, "io-failures")
    try:
        for role in ("alice", "bob", "miner"):
            trio.start(role)
        trio.wait_for_handshakes()
        bob = trio.daemons["bob"]
        real = bob.setup.files.write

        def full(job, state, *args):
            if state == JobInfo.SUCCEEDED:  # bob's outputs do not fit; alice's do
                raise OSError(errno.ENOSPC, NO_SPACE, str(job.context.out_dir / "network.json"))
            return real(job, state, *args)

        monkeypatch.setattr(bob.setup.files, "write", full)
        with trio.client("miner") as client:
            job_id = client.start("pram-miner", {"p": 0.2, "max_parents": 2})
            client.wait(job_id, timeout_s=WAIT_S)
        ended = outcomes(trio, job_id)
    finally:
        trio.stop()
    assert {role: state for role, (state, _) in ended.items()} == {
        "alice": "FAILED",
        "bob": "FAILED",
        "miner": "FAILED",
    }
    assert ended["bob"][1].startswith(
        f"bob cannot write {tmp_path / 'out-bob' / f'.{job_id}.partial' / 'network.json'}"
    )
    assert ended["miner"][1].startswith("peer bob aborted the job: it could not write its outputs")
    assert ended["alice"][1].startswith(
        "peer miner aborted the job: the other party could not write its outputs or its audit log, so no party "
        "keeps the job's outputs (details in its log)"
    )
    no_traceback(caplog)
    for role in ("alice", "bob", "miner"):
        assert not (tmp_path / f"out-{role}" / job_id / "network.json").exists(), role


# -- a real learn job, and its checkpoint key, on a full disk -------------------------------
def test_a_learn_job_on_a_full_disk_fails_at_both_and_the_next_one_runs(full_disk_pair, caplog):
    pair, disk = full_disk_pair
    params = {"key_bits": 1024, "max_parents": 1, "disclosure": "owner"}
    disk.fill()
    with pair.client("alice") as client:
        job_id = client.start("learn", params, "learn-full")
        client.wait(job_id, timeout_s=WAIT_S)
    ended = outcomes(pair, job_id)
    out = pair.out["alice"]
    assert ended["alice"] == (
        "FAILED",
        f"{out / '.checkpoints' / 'learn-full' / 'checkpoint-1.bin'}: cannot write the checkpoint: {NO_SPACE}; "
        f"free space in {out}, then run the job again",
    )
    assert ended["bob"][0] == "FAILED" and ended["bob"][1].startswith("peer alice aborted the job")
    no_traceback(caplog)
    assert list(out.iterdir()) == []  # no empty key, no half file, no job folder
    disk.free()
    with pair.client("alice") as client:
        job_id = client.start("learn", params, "learn-freed")
        client.wait(job_id, timeout_s=WAIT_S)
    assert outcomes(pair, job_id) == {"alice": ("SUCCEEDED", ""), "bob": ("SUCCEEDED", "")}
    assert (out / job_id / "network.json").is_file()
