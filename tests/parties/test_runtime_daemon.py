"""Two daemons over loopback: handshake, refusals, jobs, malformed messages, killed peers.

Most tests run both daemons in this process (each with its own gRPC server) so that
test-only job kinds can be registered; the killed-peer test runs Bob as a separate
process and kills it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until as wait_for

from ppbn.cli import main as ppbn_main
from ppbn.errors import UserError
from ppbn.jobs.base import JobKind
from ppbn.jobs.registry import register_job, unregister_job
from ppbn.pair.loopback import free_port
from ppbn.parties.client import DaemonClient
from ppbn.parties.daemon import DaemonConfig, PartyDaemon
from ppbn.parties.handshake import PeerLinks
from ppbn.parties.net import dial
from ppbn.parties.pki import make_local_pki
from ppbn.parties.tls import PARTY_ROLES, load_tls_files
from ppbn.proto import party_pb2, party_pb2_grpc

N_RECORDS = 60
# the peer timeout of the daemon whose timeout a test makes fire (a silent or killed peer);
# every other daemon waits PEER_TIMEOUT_S, so no honest job depends on a quiet host
TIMEOUT_S = 3.0
# how late after TIMEOUT_S that daemon may report on a loaded host (as the fault matrix)
REPORT_MARGIN_S = 10.0


def write_party_csv(path: Path, ids: list[str], columns: dict[str, np.ndarray]) -> None:
    lines = [",".join(["id", *columns])]
    for i, record_id in enumerate(ids):
        lines.append(",".join([record_id, *(f"s{int(col[i])}" for col in columns.values())]))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """Schema, both parties' CSVs, variants that must be refused, and two unrelated PKIs
    (certs/ROLE: cross-trusting CAs per party; other-ca/ROLE: another such set)."""
    base = tmp_path_factory.mktemp("runtime")
    states = ["s0", "s1", "s2"]
    owners = {"a1": "alice", "b1": "bob", "a2": "alice", "b2": "bob"}
    schema = {
        "id_column": "id",
        "variables": [{"name": n, "owner": o, "states": states} for n, o in owners.items()],
    }
    (base / "schema.json").write_text(json.dumps(schema))
    reordered = dict(schema, variables=list(reversed(schema["variables"])))
    (base / "schema-other.json").write_text(json.dumps(reordered))
    rng = np.random.default_rng(5)
    codes = {n: rng.integers(0, 3, N_RECORDS) for n in owners}
    ids = [f"r{i:03d}" for i in range(N_RECORDS)]
    write_party_csv(base / "alice.csv", ids, {n: codes[n] for n in ("a1", "a2")})
    bob_cols = {n: codes[n] for n in ("b1", "b2")}
    write_party_csv(base / "bob.csv", ids, bob_cols)
    write_party_csv(base / "bob-short.csv", ids[:-1], {n: c[:-1] for n, c in bob_cols.items()})
    write_party_csv(base / "bob-other-ids.csv", [f"x{i:03d}" for i in range(N_RECORDS)], bob_cols)
    make_local_pki(base / "certs", PARTY_ROLES)
    make_local_pki(base / "other-ca", PARTY_ROLES)
    return base


class Pair:
    """Starts in-process daemons on free loopback ports and stops them at teardown."""

    def __init__(self, world: Path, tmp_path: Path) -> None:
        self.world, self.tmp = world, tmp_path
        self.ports = {"alice": free_port(), "bob": free_port()}
        self.started: list[PartyDaemon] = []

    def daemon(
        self,
        role: str,
        *,
        as_role: str | None = None,
        data: str | None = None,
        schema: str = "schema.json",
        tls: str = "certs",
        insecure: bool = False,
        timeout_s: float = PEER_TIMEOUT_S,
    ) -> PartyDaemon:
        """Daemon listening on ``role``'s port; ``as_role`` makes it claim another role."""
        claimed = as_role or role
        peer = "bob" if role == "alice" else "alice"
        config = DaemonConfig(
            role=claimed,
            schema_path=str(self.world / schema),
            data_path=str(self.world / (data or f"{claimed}.csv")),
            listen=f"127.0.0.1:{self.ports[role]}",
            peer=f"127.0.0.1:{self.ports[peer]}",
            tls_dir=None if insecure else str(self.world / tls / claimed),
            insecure=insecure,
            out_dir=str(self.tmp / f"out-{role}"),
            timeout_s=timeout_s,
            probe_interval_s=0.2,
        )
        daemon = PartyDaemon(config)
        daemon.start()
        self.started.append(daemon)
        return daemon

    def client(self, role: str = "alice", insecure: bool = False) -> DaemonClient:
        """An operator of the party whose daemon listens on ``role``'s port."""
        return DaemonClient(
            f"127.0.0.1:{self.ports[role]}", str(self.world / "certs" / role), "operator", insecure
        )

    def stop(self) -> None:
        for daemon in self.started:
            daemon.stop(grace_s=0.5)


@pytest.fixture
def pair(world, tmp_path):
    p = Pair(world, tmp_path)
    yield p
    p.stop()


def peer_state_settled(daemon: PartyDaemon) -> str:
    state = daemon.peer_state
    return "" if state in ("not contacted yet",) or "refused the connection" in state else state


# -- handshake and a successful job --------------------------------------------------


def test_handshake_then_ping_job_writes_files_at_both(pair):
    alice, bob = pair.daemon("alice"), pair.daemon("bob")
    wait_for(lambda: alice.peer_state == "ok" and bob.peer_state == "ok", what="handshake")
    with pair.client("bob") as client:
        health = client.health()
        assert (
            health.role == "bob" and health.peer_state == "ok" and health.record_count == N_RECORDS
        )
        job_id = client.start("ping", {"rounds": 5, "bytes": 300})
        outcome = client.wait(job_id, timeout_s=WAIT_S)
    assert outcome.state == "SUCCEEDED", outcome.error
    assert outcome.stats["role"] == "bob" and outcome.peer_stats["role"] == "alice"
    assert outcome.peer_stats["bytes_sent"] == outcome.stats["bytes_received"] == 5 * (300 + 4)
    by_kind = outcome.stats["bytes_by_phase_and_kind"]  # bob's own, local figures
    assert (
        by_kind["ping"]["ping"]["bytes_received"]
        == by_kind["ping"]["pong"]["bytes_sent"]
        == 5 * (300 + 4)
    )
    wait_for(lambda: alice.jobs[job_id].done.is_set(), what="alice's job files")
    for out in (pair.tmp / "out-alice" / job_id, pair.tmp / "out-bob" / job_id):
        assert json.loads((out / "result.json").read_text())["state"] == "SUCCEEDED"
        peer_view = json.loads((out / "stats.json").read_text())["peer"]
        assert (
            peer_view["mirrored"] is True and "wall_s" not in peer_view
        )  # the peer's own figures stay there
        ledger = json.loads((out / "ledger.json").read_text())
        assert {e["kind"] for e in ledger["entries"]} == {
            "schema",
            "record_count",
            "security_level",
        }
    alice_result = json.loads((pair.tmp / "out-alice" / job_id / "result.json").read_text())
    assert alice_result["result"]["rounds"] == 5 and "rtt_ms_median" in alice_result["result"]


def test_learn_command_starts_a_job_and_prints_both_parties(pair, capsys):
    alice, bob = pair.daemon("alice"), pair.daemon("bob")
    wait_for(lambda: alice.peer_state == "ok" and bob.peer_state == "ok", what="handshake")
    code = ppbn_main(
        [
            "learn",
            "--peer",
            f"127.0.0.1:{pair.ports['alice']}",
            "--tls-dir",
            str(pair.world / "certs" / "alice"),
            "--job",
            "ping",
            "--params",
            '{"rounds": 2}',
            "--format",
            "json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "SUCCEEDED" and report["result"]["rounds"] == 2
    assert set(report["stats"]) == {"alice", "bob"}
    code = ppbn_main(
        [
            "learn",
            "--peer",
            f"127.0.0.1:{pair.ports['alice']}",
            "--tls-dir",
            str(pair.world / "certs" / "alice"),
            "--job",
            "tables",
            "--max-family",
            "9",
        ]
    )
    assert code == 2
    assert "tables: max_family must be an integer in 2..4" in capsys.readouterr().err
    with pair.client("alice") as client, pytest.raises(UserError, match="job id '..' must be"):
        client.start("ping", {}, job_id="..")


# -- refusals ---------------------------------------------------------------------


def _refused_both_sides(pair, alice, bob, pattern: str) -> None:
    import re

    wait_for(
        lambda: peer_state_settled(alice) and peer_state_settled(bob), what="handshake outcome"
    )
    assert re.search(pattern, alice.peer_state), alice.peer_state
    assert re.search(pattern, bob.peer_state), bob.peer_state
    with pair.client("alice") as client, pytest.raises(UserError, match="job not started") as err:
        client.start("ping", {})
    assert re.search(pattern, str(err.value)), str(err.value)


def test_wrong_schema_is_refused_on_both_sides(pair):
    alice = pair.daemon("alice")
    bob = pair.daemon("bob", schema="schema-other.json")
    _refused_both_sides(pair, alice, bob, "schema fingerprint of (alice|bob) is [0-9a-f]{12}")


def test_wrong_record_count_is_refused_on_both_sides(pair):
    alice = pair.daemon("alice")
    bob = pair.daemon("bob", data="bob-short.csv")
    _refused_both_sides(
        pair, alice, bob, "(alice|bob) holds (59|60) records, (alice|bob) holds (59|60)"
    )


def test_different_record_ids_fail_the_job_at_both(pair, test_jobs):
    """Same count, other ids: the handshake (public n) passes; the per-job keyed digest of
    the ids, the first step of every data job, stops it at both daemons."""
    alice = pair.daemon("alice")
    bob = pair.daemon("bob", data="bob-other-ids.csv")
    wait_for(lambda: alice.peer_state == "ok", what="handshake")
    outcome, bob_job = _run_both(pair, alice, bob, "test.wrong_tag")
    assert outcome.state == "FAILED"
    hint = "; to learn on the records both hold, start both daemons with --align psi"
    assert outcome.error == (
        f"alice and bob hold the same number of records but different record ids{hint}"
    )
    assert bob_job.error == (
        f"bob and alice hold the same number of records but different record ids{hint}"
    )


def test_certificate_from_another_ca_fails_tls_on_both_sides(pair):
    alice = pair.daemon("alice")
    bob = pair.daemon("bob", tls="other-ca")
    _refused_both_sides(pair, alice, bob, "TLS with 127.0.0.1:[0-9]+ failed")
    assert "not signed by a CA we trust" in alice.peer_state
    assert "not signed by a CA we trust" in bob.peer_state


def test_wrong_role_at_the_address_is_refused(pair):
    alice = pair.daemon("alice")
    impostor = pair.daemon("bob", as_role="alice")  # a second "alice" where bob should be
    _refused_both_sides(pair, alice, impostor, "certificate for (role )?'alice'")


def test_wrong_role_is_refused_by_hello_without_tls(pair):
    alice = pair.daemon("alice", insecure=True)
    impostor = pair.daemon("bob", as_role="alice", insecure=True)
    wait_for(
        lambda: peer_state_settled(alice) and peer_state_settled(impostor), what="handshake outcome"
    )
    assert "the peer says it is 'alice' but alice expects 'bob'" in alice.peer_state
    with (
        pair.client("alice", insecure=True) as client,
        pytest.raises(UserError, match="expects 'bob'"),
    ):
        client.start("ping", {})


def test_operator_certificate_cannot_pose_as_the_peer(pair):
    pair.daemon("alice")
    operator = load_tls_files(pair.world / "certs" / "alice", "operator")
    with dial(f"127.0.0.1:{pair.ports['alice']}", operator, "a daemon") as channel:
        stub = party_pb2_grpc.PartyServiceStub(channel)
        with pytest.raises(
            Exception,
            match="takes handshakes only from bob, not from a certificate for (role )?'operator'",
        ):
            stub.Handshake(party_pb2.Hello(role="bob"), timeout=WAIT_S)


def test_bad_data_is_one_line_naming_file_line_and_column(world, tmp_path, capsys):
    bad = tmp_path / "alice.csv"
    bad.write_text("id,a1,a2\nr000,s0,s1\nr001,s9,s1\n")
    code = ppbn_main(
        [
            "party",
            "serve",
            "--role",
            "alice",
            "--schema",
            str(world / "schema.json"),
            "--data",
            str(bad),
            "--listen",
            "127.0.0.1:0",
            "--peer",
            "127.0.0.1:1",
            "--tls-dir",
            str(world / "certs" / "alice"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("ppbn: error:") and "line 3" in err and "'a1'" in err and str(bad) in err


# -- misbehaving jobs -------------------------------------------------------------


def _no_params(params, schema):
    return params


@pytest.fixture
def test_jobs():
    """Job kinds that break the protocol on purpose, registered for one test."""

    def wrong_tag(role, channel, context):
        if role == "bob":
            channel.send("oops", b"surprise")
            channel.recv("never")
        else:
            channel.recv("hello")
        return {}

    def oversize(role, channel, context):
        if role == "bob":
            channel.send("small", bytes(1000))
            channel.recv("never")
        else:
            channel.recv("small", max_bytes=10)
        return {}

    def stall(role, channel, context):
        # Bob never answers; he only checks for cancellation. Alice waits for a reply.
        if role == "bob":
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                context.progress("stalling")
                time.sleep(0.05)
            return {}
        channel.send("question", b"?")
        channel.recv("answer")
        return {}

    kinds = {"test.wrong_tag": wrong_tag, "test.oversize": oversize, "test.stall": stall}
    for name, fn in kinds.items():
        register_job(JobKind(name, fn, _no_params, "test"))
    yield
    for name in kinds:
        unregister_job(name)


def _run_both(pair, alice, bob, kind: str):
    with pair.client("alice") as client:
        job_id = client.start(kind, {})
        outcome = client.wait(job_id, timeout_s=WAIT_S)
    wait_for(lambda: bob.jobs[job_id].done.is_set(), what="bob's job to end")
    return outcome, bob.jobs[job_id]


def test_wrong_tag_fails_the_job_cleanly_and_daemons_keep_serving(pair, test_jobs):
    alice, bob = pair.daemon("alice"), pair.daemon("bob")
    wait_for(lambda: alice.peer_state == "ok", what="handshake")
    outcome, bob_job = _run_both(pair, alice, bob, "test.wrong_tag")
    assert outcome.state == "FAILED"
    assert outcome.error == "expected message 'hello' from peer, got 'oops'"
    assert (
        bob_job.error
        == "peer alice aborted the job: it received a message that breaks the protocol"
    )
    again, _ = _run_both(pair, alice, bob, "ping")
    assert again.state == "SUCCEEDED"


def test_oversize_message_fails_the_job_cleanly(pair, test_jobs):
    alice, bob = pair.daemon("alice"), pair.daemon("bob")
    wait_for(lambda: alice.peer_state == "ok", what="handshake")
    outcome, bob_job = _run_both(pair, alice, bob, "test.oversize")
    assert outcome.state == "FAILED" and "is 1000 bytes, over the limit 10" in outcome.error
    assert (
        bob_job.error
        == "peer alice aborted the job: it received a message that breaks the protocol"
    )


def test_silent_peer_fails_the_job_within_the_timeout(pair, test_jobs):
    alice, bob = pair.daemon("alice", timeout_s=TIMEOUT_S), pair.daemon("bob")
    wait_for(lambda: alice.peer_state == "ok", what="handshake")
    start = time.monotonic()
    outcome, bob_job = _run_both(pair, alice, bob, "test.stall")
    assert time.monotonic() - start < TIMEOUT_S + REPORT_MARGIN_S  # not bob's whole stall
    assert outcome.state == "FAILED"
    hint = "; when both daemons are up, start the job again"
    assert (
        outcome.error == f"peer bob sent nothing for {TIMEOUT_S:g} s (waiting for a message){hint}"
    )
    assert (
        bob_job.error
        == f"peer alice aborted the job: it waited for us longer than its peer timeout{hint}"
    )


def test_cancel_reaches_both_daemons(pair, test_jobs):
    alice, _ = pair.daemon("alice"), pair.daemon("bob")
    wait_for(lambda: alice.peer_state == "ok", what="handshake")
    with pair.client("bob") as client:
        job_id = client.start("test.stall", {})
        wait_for(lambda: client.status(job_id).progress == "stalling", what="job to run")
        info = client.cancel(job_id)
    assert info.state == party_pb2.JobInfo.CANCELLED and info.error.startswith(
        "cancelled by operator of bob"
    )
    alice_job = wait_for(lambda: alice.jobs[job_id].done.is_set() and alice.jobs[job_id])
    assert alice_job.error == "peer bob aborted the job: its operator cancelled the job"


# -- a killed peer process ----------------------------------------------------------


def _spawn_bob(pair) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "ppbn.cli",
        "party",
        "serve",
        "--role",
        "bob",
        "--schema",
        str(pair.world / "schema.json"),
        "--data",
        str(pair.world / "bob.csv"),
        "--listen",
        f"127.0.0.1:{pair.ports['bob']}",
        "--peer",
        f"127.0.0.1:{pair.ports['alice']}",
        "--tls-dir",
        str(pair.world / "certs" / "bob"),
        "--out",
        str(pair.tmp / "out-bob"),
        "--timeout",
        f"{PEER_TIMEOUT_S:g}",
    ]
    log = open(pair.tmp / "bob.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)


def test_killed_peer_fails_the_job_and_the_survivor_keeps_serving(pair):
    alice = pair.daemon("alice", timeout_s=TIMEOUT_S)
    bob = _spawn_bob(pair)
    try:
        wait_for(lambda: alice.peer_state == "ok", what="bob to come up")
        with pair.client("alice") as client:
            job_id = client.start("ping", {"rounds": 100_000, "bytes": 20_000})
            wait_for(lambda: client.status(job_id).progress.startswith("ping round"), what="ping")
            os.killpg(bob.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            outcome = client.wait(job_id, timeout_s=WAIT_S)
            assert time.monotonic() - killed_at <= TIMEOUT_S + REPORT_MARGIN_S
            assert outcome.state == "FAILED" and "peer bob" in outcome.error
            assert client.health().status == party_pb2.HealthReply.SERVING
            bob.wait(WAIT_S)
            # alice's own view of bob must first turn from the killed bob's "ok", or the wait
            # below could end before the new bob listens
            wait_for(lambda: alice.peer_state != "ok", what="alice to see bob gone")
            bob = _spawn_bob(pair)
            wait_for(lambda: alice.peer_state == "ok", what="bob to come back")
            alice.config.timeout_s = PEER_TIMEOUT_S  # the fault is over: an honest job again
            second = client.wait(client.start("ping", {"rounds": 3}), timeout_s=WAIT_S)
            assert second.state == "SUCCEEDED"
        bob.send_signal(signal.SIGTERM)
        assert bob.wait(WAIT_S) == 0
        log = (pair.tmp / "bob.log").read_text()
        assert "received SIGTERM: shutting down" in log and "bob stopped" in log
    finally:
        if bob.poll() is None:
            os.killpg(bob.pid, signal.SIGKILL)
            bob.wait(5)


def test_probe_loop_ends_quietly_when_stop_closes_its_channel():
    """stop() closes the peer channels while the probe thread may be inside a handshake:
    grpc then raises ValueError ("closed channel"), which ends the loop when stopping and
    propagates otherwise."""
    import threading
    from types import SimpleNamespace

    stopping = threading.Event()

    def closed_by_stop(role):  # stop() ran while this handshake was on its way
        stopping.set()
        raise ValueError("Cannot invoke RPC on closed channel!")

    def closed(role):
        raise ValueError("Cannot invoke RPC on closed channel!")

    PeerLinks.probe(SimpleNamespace(roles=["bob"], handshake=closed_by_stop), stopping, 2.0)
    stopping.clear()
    with pytest.raises(ValueError, match="closed channel"):
        PeerLinks.probe(SimpleNamespace(roles=["bob"], handshake=closed), stopping, 2.0)
