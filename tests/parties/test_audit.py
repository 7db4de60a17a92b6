"""Issue 16, part 3: the hash-chained audit log of a real daemon run, and tampering with it.

Two real daemons (in-process, loopback, mutual TLS) run a learn job, a job refused by the
initiator's own policy and one refused by the peer's; the tests then verify alice's log,
and edit, delete, swap, insert and cut lines of copies of it: ``ppbn audit verify`` must
fail naming the line every time, and the log must hold no data value.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from adversarial.hostile import write_dataset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from known_files import TEST_POLICY
from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until as wait_for

from ppbn.cli import main
from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy
from ppbn.pair.loopback import free_port
from ppbn.parties.audit import (
    REFUSED_PER_WINDOW,
    REFUSED_WINDOW_S,
    AuditLog,
    AuditLogBroken,
    AuditLogTorn,
    genesis_hash,
    line_hash,
    verify_log,
)
from ppbn.parties.client import DaemonClient
from ppbn.parties.daemon import DaemonConfig, PartyDaemon
from ppbn.parties.pki import make_local_pki

N_RECORDS = 120


def start_pair(
    base: Path, pki: dict[str, Path], files: dict[str, Path], **alice_extra
) -> dict[str, PartyDaemon]:
    """Honest alice and bob; bob's policy keeps its CPTs (no public disclosure)."""
    policy = LocalPolicy.load(str(TEST_POLICY))
    policies = {"alice": policy, "bob": replace(policy, disclosures=("owner", "shared"))}
    ports = {"alice": free_port(), "bob": free_port()}
    daemons = {}
    for role in ("alice", "bob"):
        peer = "bob" if role == "alice" else "alice"
        config = DaemonConfig(
            role=role,
            schema_path=str(files["schema"]),
            data_path=str(files[role]),
            listen=f"127.0.0.1:{ports[role]}",
            peer=f"127.0.0.1:{ports[peer]}",
            tls_dir=str(pki[role]),
            out_dir=str(base / f"out-{role}"),
            timeout_s=PEER_TIMEOUT_S,
            probe_interval_s=0.2,
            policy=policies[role],
            **(alice_extra if role == "alice" else {}),
        )
        daemons[role] = PartyDaemon(config)
        daemons[role].start()
    wait_for(lambda: all(d.peer_state == "ok" for d in daemons.values()), what="handshake")
    return daemons


def operator(daemon: PartyDaemon, pki: dict[str, Path]) -> DaemonClient:
    return DaemonClient(f"127.0.0.1:{daemon.port}", str(pki[daemon.role]), "operator")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    return make_local_pki(tmp_path_factory.mktemp("pki"), roles=("alice", "bob"))


@pytest.fixture(scope="module")
def run(tmp_path_factory, pki) -> dict[str, object]:
    """One learn job, two refused by alice, one refused by bob; then both daemons stop."""
    base = tmp_path_factory.mktemp("audit")
    files = write_dataset(base / "data", N_RECORDS, seed=3)
    daemons = start_pair(base, pki, files)
    try:
        with operator(daemons["alice"], pki) as client:
            job = client.start(
                "learn", {"key_bits": 1024, "max_parents": 1, "disclosure": "owner"}, "learn1"
            )
            outcome = client.wait(job, timeout_s=WAIT_S)
            assert outcome.state == "SUCCEEDED", outcome.error
            with pytest.raises(UserError, match="max_parents"):
                client.start("learn", {"key_bits": 1024, "max_parents": 50}, "toomany")
            with pytest.raises(UserError, match="workers"):
                client.start("learn", {"key_bits": 1024, "workers": 64}, "workers1")
            with pytest.raises(UserError, match="disclosure"):
                client.start(
                    "learn", {"key_bits": 1024, "max_parents": 1, "disclosure": "public"}, "public1"
                )
        wait_for(lambda: daemons["bob"].running is None, WAIT_S, "bob's end of the job")
    finally:
        for daemon in daemons.values():
            daemon.stop(0.5)
    return {
        "base": base,
        "files": files,
        "log": base / "out-alice" / "audit.log",
        "bob_log": base / "out-bob" / "audit.log",
    }


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_bytes().splitlines()]


def verify(log: Path, capsys, *extra: str) -> tuple[int, str]:
    code = main(["audit", "verify", str(log), *extra])
    captured = capsys.readouterr()
    return code, (captured.out + captured.err).strip()


def tampered(run, tmp_path: Path) -> tuple[Path, list[bytes]]:
    copy = tmp_path / "audit.log"
    shutil.copyfile(run["log"], copy)
    return copy, copy.read_bytes().splitlines(keepends=True)


# -- a real run ---------------------------------------------------------------------------
def test_the_log_of_a_real_run_verifies_and_holds_every_event(run, capsys):
    code, message = verify(run["log"], capsys)
    assert code == 0, message
    assert "chain intact" in message
    for log in (run["log"], run["bob_log"]):
        assert verify(log, capsys)[0] == 0
    alice = events(run["log"])
    assert [e["seq"] for e in alice] == list(range(1, len(alice) + 1))
    assert alice[0]["prev"] == genesis_hash("alice")
    kinds = [(e["event"], e["job"]) for e in alice]
    assert kinds[0] == ("daemon_started", "") and kinds[-1] == ("daemon_stopped", "")
    for expected in [
        ("requested", "learn1"),
        ("started", "learn1"),
        ("revealed", "learn1"),
        ("finished", "learn1"),
    ]:
        assert expected in kinds
    revealed = {e["class"]: e for e in alice if e["event"] == "revealed"}
    assert {"schema", "record_count", "records_match", "k2_decision", "structure"} <= set(revealed)
    assert all(isinstance(e["count"], int) and e["count"] >= 1 for e in revealed.values())
    finished = next(e for e in alice if e["event"] == "finished")
    assert finished["bytes_sent"] > 0 and finished["bytes_received"] > 0 and finished["phases"]
    requested = next(e for e in alice if e["event"] == "requested")
    assert requested["params"]["max_parents"] == 1 and "operator of alice" in requested["by"]


def test_refusals_carry_the_code_and_the_parameter(run):
    refused = {e["job"]: e for e in events(run["log"]) if e["event"] == "refused"}
    assert (
        refused["toomany"]["code"] == "BAD_REQUEST"
        and refused["toomany"]["parameter"] == "max_parents"
    )
    assert refused["workers1"]["code"] == "POLICY" and refused["workers1"]["parameter"] == "workers"
    assert refused["toomany"]["refused_by"] == refused["workers1"]["refused_by"] == "alice"
    assert refused["public1"]["refused_by"] == "bob" and refused["public1"]["code"] == "POLICY"
    assert "disclosure" in refused["public1"]["reason"]
    bob_refused = [e for e in events(run["bob_log"]) if e["event"] == "refused"]
    assert len(bob_refused) == 1 and bob_refused[0]["parameter"] == "disclosure"
    assert bob_refused[0]["job"] == "public1" and "via alice" in bob_refused[0]["by"]


def test_no_data_value_reaches_the_log(run):
    text = run["log"].read_text() + run["bob_log"].read_text()
    for role in ("alice", "bob"):
        rows = run["files"][role].read_text().splitlines()[1:]
        for row in rows:
            assert row.split(",")[0] not in text  # record ids
    # the values the job revealed (CPT cells) stay in the job's own ledger
    ledger = json.loads((run["base"] / "out-alice" / "learn1" / "ledger.json").read_text())
    cells = [
        repr(float(x))
        for entry in ledger["entries"]
        if entry["kind"] == "parameter"
        for row in entry["value"]["cpt"]
        for x in row
    ]
    assert cells, "the job revealed no CPT: the test would check nothing"
    assert not [c for c in cells if len(c) > 6 and c in text]
    assert "-----BEGIN" not in text


def test_show_prints_one_line_per_event(run, capsys):
    assert main(["audit", "show", str(run["log"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(events(run["log"]))
    assert any(
        re.match(r"^\S+Z\s+\d+\s+finished\s+learn1\s+wall_s=\S+ bytes_sent=\d+", line)
        for line in lines
    )
    assert any(re.search(r"\s+refused\s+toomany\s+.*parameter=max_parents", line) for line in lines)


# -- tampering ------------------------------------------------------------------------------
def test_an_edited_line_is_named(run, tmp_path, capsys):
    log, lines = tampered(run, tmp_path)
    k = next(i for i, line in enumerate(lines) if b'"event":"finished"' in line)  # 0-based
    lines[k] = lines[k].replace(b'"event":"finished"', b'"event":"failed"')
    log.write_bytes(b"".join(lines))
    code, message = verify(log, capsys)
    assert code == 1 and message.count("\n") == 0
    assert f"line {k + 2}:" in message and f"line {k + 1} was changed" in message


def test_a_deleted_line_is_named(run, tmp_path, capsys):
    log, lines = tampered(run, tmp_path)
    del lines[4]
    log.write_bytes(b"".join(lines))
    code, message = verify(log, capsys)
    assert code == 1 and "line 5: has sequence number 6, expected 5" in message


def test_swapped_lines_are_named(run, tmp_path, capsys):
    log, lines = tampered(run, tmp_path)
    lines[2], lines[3] = lines[3], lines[2]
    log.write_bytes(b"".join(lines))
    code, message = verify(log, capsys)
    assert code == 1 and "line 3: has sequence number 4, expected 3" in message


def test_an_inserted_line_is_named(run, tmp_path, capsys):
    log, lines = tampered(run, tmp_path)
    lines.insert(3, lines[2])
    log.write_bytes(b"".join(lines))
    code, message = verify(log, capsys)
    assert code == 1 and "line 4: has sequence number 3, expected 4" in message


def test_a_rewritten_line_with_fixed_seq_breaks_the_next_link(run, tmp_path, capsys):
    """An attacker who renumbers after deleting a line still breaks the hash chain."""
    log, lines = tampered(run, tmp_path)
    del lines[1]
    fixed = []
    for number, line in enumerate(lines, start=1):
        entry = json.loads(line)
        entry["seq"] = number
        fixed.append(json.dumps(entry, separators=(",", ":")).encode() + b"\n")
    log.write_bytes(b"".join(fixed))
    code, message = verify(log, capsys)
    assert code == 1 and "line 2: its prev does not match the hash of line 1" in message


def test_a_cut_last_line_is_named(run, tmp_path, capsys):
    log, lines = tampered(run, tmp_path)
    lines[-1] = lines[-1][:20]
    log.write_bytes(b"".join(lines))
    code, message = verify(log, capsys)
    assert code == 1 and f"line {len(lines)}: is incomplete" in message


def test_the_signed_head_catches_changes_at_the_end(run, pki, tmp_path, capsys):
    log, lines = tampered(run, tmp_path)
    assert main(["audit", "sign", str(log), "--key", str(pki["alice"] / "alice.key")]) == 0
    capsys.readouterr()
    code, message = verify(log, capsys, "--cert", str(pki["alice"] / "alice.crt"))
    assert code == 0 and "signature valid" in message
    # a certificate of another party does not vouch for alice's head
    code, message = verify(log, capsys, "--cert", str(pki["bob"] / "bob.crt"))
    assert code == 1 and "another key" in message
    # the last line edited: only the signed head can tell
    last = json.loads(lines[-1])
    last["time"] = "2000-01-01T00:00:00.000000Z"
    edited = tmp_path / "edited.log"
    edited.write_bytes(
        b"".join(lines[:-1]) + json.dumps(last, separators=(",", ":")).encode() + b"\n"
    )
    shutil.copyfile(str(log) + ".head.sig", str(edited) + ".head.sig")
    code, message = verify(edited, capsys, "--cert", str(pki["alice"] / "alice.crt"))
    assert code == 1 and f"line {len(lines)}: differs from the signed head" in message
    # the last line removed
    shortened = tmp_path / "short.log"
    shortened.write_bytes(b"".join(lines[:-1]))
    shutil.copyfile(str(log) + ".head.sig", str(shortened) + ".head.sig")
    code, message = verify(shortened, capsys)
    assert code == 1 and "lines were removed at the end" in message


def test_unreadable_input_is_a_user_error(tmp_path, capsys):
    code, message = verify(tmp_path / "missing.log", capsys)
    assert code == 2 and "cannot read audit log" in message and message.count("\n") == 0


# -- the log as the daemon keeps it ---------------------------------------------------------
def test_reopening_continues_the_chain_and_a_second_writer_is_refused(tmp_path):
    path = tmp_path / "a" / "audit.log"
    first = AuditLog(path, "bob")
    first.event("daemon_started")
    with pytest.raises(UserError, match="in use by another process"):
        AuditLog(path, "bob")
    first.close()
    second = AuditLog(path, "bob")
    second.resumed("j1", "learn", "operator of bob", checkpoint="step 7")
    second.close()
    state = verify_log(path.read_bytes(), "bob")
    assert state.lines == 2 and state.head == line_hash(path.read_bytes().splitlines()[1])
    assert json.loads(path.read_bytes().splitlines()[1])["event"] == "resumed"
    with pytest.raises(AuditLogBroken, match="line 1: belongs to party 'bob'"):
        verify_log(path.read_bytes(), "alice")


def test_a_daemon_refuses_to_start_on_a_broken_log(run, pki, tmp_path):
    log, lines = tampered(run, tmp_path)
    del lines[2]
    log.write_bytes(b"".join(lines))
    config = DaemonConfig(
        role="alice",
        schema_path=str(run["files"]["schema"]),
        data_path=str(run["files"]["alice"]),
        listen=f"127.0.0.1:{free_port()}",
        peer=f"127.0.0.1:{free_port()}",
        tls_dir=str(pki["alice"]),
        out_dir=str(tmp_path / "out"),
        audit_log=str(log),
        policy=LocalPolicy.load(str(TEST_POLICY)),
    )
    daemon = PartyDaemon(config)
    with pytest.raises(UserError, match=r"audit log .* is broken at line 3: has sequence number 4"):
        daemon.start()
    daemon.stop(0.1)


def test_a_job_whose_request_cannot_be_logged_is_refused(pki, tmp_path):
    files = write_dataset(tmp_path / "data", N_RECORDS, seed=5)
    daemons = start_pair(tmp_path, pki, files)
    try:
        daemons["bob"].audit.close()  # as if its disk had failed
        with operator(daemons["alice"], pki) as client:
            with pytest.raises(UserError, match="peer bob aborted the job: .*internal"):
                client.start("ping", {"rounds": 1}, "unlogged")
            daemons["alice"].audit.close()
            with pytest.raises(UserError, match="alice's audit log cannot be written"):
                client.start("ping", {"rounds": 1}, "unlogged2")
        assert daemons["bob"].running is None and daemons["alice"].running is None
        assert not (tmp_path / "out-bob" / "unlogged").exists()
    finally:
        for daemon in daemons.values():
            daemon.stop(0.5)


# -- any single change before the last line is caught (property) ----------------------------
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(3, 12),
    data=st.data(),
)
def test_any_changed_byte_before_the_last_line_is_caught(tmp_path, count, data):
    path = tmp_path / f"prop-{count}.log"
    path.unlink(missing_ok=True)
    log = AuditLog(path, "alice")
    for i in range(count):
        log.event("revealed", f"job{i}", **{"class": "edge", "count": i})
    log.close()
    raw = bytearray(path.read_bytes())
    last_line_start = raw.rstrip(b"\n").rfind(b"\n") + 1
    position = data.draw(st.integers(0, last_line_start - 1), label="position")
    replacement = data.draw(st.integers(0, 255).filter(lambda b: b != raw[position]), label="byte")
    changed_line = raw[:position].count(b"\n") + 1
    raw[position] = replacement
    with pytest.raises(AuditLogBroken) as broken:
        verify_log(bytes(raw), "alice")
    assert broken.value.line <= changed_line + 1


# -- a write the disk refuses, a torn tail, refused-request floods --------------------------
def small_log(path: Path, count: int = 3) -> AuditLog:
    log = AuditLog(path, "alice")
    for i in range(count):
        log.event("revealed", f"job{i}", **{"class": "edge", "count": i})
    return log


def test_a_failed_append_leaves_no_partial_line(tmp_path, monkeypatch):
    import errno

    import ppbn.parties.audit as audit

    path = tmp_path / "audit.log"
    log = small_log(path)
    before = path.read_bytes()
    real_write_all = audit.write_all

    def half_then_full(fd: int, data: bytes) -> None:
        real_write_all(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(audit, "write_all", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        log.event("finished", "job9")
    assert path.read_bytes() == before  # cut back: no torn line
    monkeypatch.setattr(audit, "write_all", real_write_all)
    log.event("finished", "job9")
    log.close()
    assert verify_log(path.read_bytes(), "alice").lines == 4


def test_a_failed_cut_back_is_retried_before_the_next_line(tmp_path, monkeypatch):
    import errno
    import os

    import ppbn.parties.audit as audit

    path = tmp_path / "audit.log"
    log = small_log(path)
    real_write_all, real_ftruncate = audit.write_all, os.ftruncate

    def half_then_full(fd: int, data: bytes) -> None:
        real_write_all(fd, data[:10])
        raise OSError(errno.EIO, "Input/output error")

    def no_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(audit, "write_all", half_then_full)
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError):
        log.event("finished", "job9")
    monkeypatch.setattr(audit, "write_all", real_write_all)
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    log.event("finished", "job9")
    log.close()
    assert verify_log(path.read_bytes(), "alice").lines == 4


def test_every_prefix_of_the_next_line_is_a_torn_tail_not_an_edit(tmp_path):
    path = tmp_path / "audit.log"
    small_log(path, 4).close()
    lines = path.read_bytes().splitlines(keepends=True)
    intact, last = b"".join(lines[:-1]), lines[-1]
    for cut in range(1, len(last) - 1):  # the newline missing, and more
        with pytest.raises(AuditLogTorn) as torn:
            verify_log(intact + last[:cut], "alice")
        assert (
            torn.value.line == 4
            and torn.value.intact_bytes == len(intact)
            and torn.value.state.lines == 3
        )
    for garbage in (
        b"x",
        b'{"seq":9,',
        last.replace(b'"alice"', b'"mallory"')[:70],
        last[:40].replace(b"2", b"#"),
    ):
        with pytest.raises(AuditLogBroken) as broken:
            verify_log(intact + garbage, "alice")
        assert not isinstance(broken.value, AuditLogTorn), garbage


def test_a_torn_tail_is_set_aside_when_the_log_is_opened(tmp_path, caplog):
    path = tmp_path / "audit.log"
    small_log(path).close()
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"seq":4,"time":"2025-01-01T00:00')
    (tmp_path / "audit.log.torn-1").write_bytes(b"an earlier one")
    log = AuditLog(path, "alice", logging.getLogger("test-audit"))
    log.event("daemon_started")
    log.close()
    assert (tmp_path / "audit.log.torn-2").read_bytes() == b'{"seq":4,"time":"2025-01-01T00:00'
    assert path.read_bytes().startswith(whole) and verify_log(path.read_bytes(), "alice").lines == 4
    assert [r.levelname for r in caplog.records if "unfinished line 4" in r.getMessage()] == [
        "WARNING"
    ]


def test_refused_requests_are_bounded_per_source_and_summarised(tmp_path):
    path = tmp_path / "audit.log"
    now = [1000.0]
    log = AuditLog(path, "alice", clock=lambda: now[0])
    for i in range(25):
        log.refused(
            f"j{i}", "learn", f"claimed initiator {i} (via bob)", "POLICY", "no", source="bob"
        )
    for i in range(3):
        log.refused(f"o{i}", "learn", "operator of alice", "BAD_REQUEST", "no")
    assert log.lines == 13  # 10 of bob's, 3 of the operator's
    now[0] += REFUSED_WINDOW_S
    log.refused("late", "learn", "x (via bob)", "POLICY", "no", source="bob")
    log.refused("later", "learn", "x (via bob)", "BUSY", "no", source="bob")
    log.close()
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    summary = lines[13]
    assert (
        summary["event"] == "refused_summary"
        and summary["source"] == "bob"
        and summary["count"] == 15
    )
    assert summary["codes"] == {"POLICY": 15} and summary["first"] <= summary["last"]
    assert summary["note"] == (
        f"15 more refused requests from bob between {summary['first']} and {summary['last']}, not logged one by one"
    )
    assert [e["job"] for e in lines[14:]] == ["late", "later"]
    assert verify_log(path.read_bytes(), "alice").lines == len(lines) == 16
    assert REFUSED_PER_WINDOW == 10


def test_verify_names_a_renamed_key_and_says_what_an_unsigned_log_vouches_for(tmp_path, capsys):
    path = tmp_path / "audit.log"
    small_log(path).close()
    code, message = verify(path, capsys)
    assert code == 0
    assert message == (
        f"audit log {path}: 3 lines of party alice; hash chain intact, vouching for lines 1-2; the log is "
        "unsigned, so a change to line 3 or lines removed at the end cannot be detected: sign its head with "
        f"`ppbn audit sign {path} --key KEY` and check it with `ppbn audit verify {path} --cert CERT`"
    )
    renamed = (
        path.read_bytes()
        .replace(b'"party":"alice"', b'"parti":"alice"', 2)
        .replace(b'"parti"', b'"party"', 1)
    )
    path.write_bytes(renamed)
    code, message = verify(path, capsys)
    assert code == 1 and message == (
        f"ppbn: audit log {path} is broken (changed or damaged): line 2: has no 'party' field (a key was "
        "renamed or removed: the line was changed)"
    )
