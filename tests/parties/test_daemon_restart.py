"""What a daemon knows of its jobs across a restart, a kill and a pause of its own: two
`ppbn party serve` processes over loopback mutual TLS (faults_util.DaemonPair).

- a job that ended before the restart is known from its folder under --out: its state,
  error and result (the same folder keeps its id taken);
- the id of a job killed together with its daemon (its files left in OUT/.J.partial) is
  refused naming that folder and what to do, and its status says it was interrupted;
- a daemon stopped (SIGSTOP) for longer than the peer timeout, then continued, puts the
  lost job down to its own pause, not to its peer.
"""

from __future__ import annotations

import time
import uuid

import pytest
from faults_util import DaemonPair
from timeouts import WAIT_S
from waiting import wait_until

from ppbn.cli import main as ppbn_main
from ppbn.errors import UserError
from ppbn.parties.client import JobOutcome
from ppbn.proto import party_pb2

PEER_TIMEOUT_S = 5.0
LONG_PING = {"rounds": 100_000, "bytes": 64}  # minutes of round trips: running when faulted


@pytest.fixture(scope="module")
def daemons(tmp_path_factory):
    with DaemonPair(tmp_path_factory.mktemp("restart"), "asia", 200, PEER_TIMEOUT_S) as running:
        yield running


@pytest.fixture
def pair(daemons):
    daemons.ensure_running()
    return daemons


def _fresh_id() -> str:
    return f"j{uuid.uuid4().hex[:10]}"


def _running_at(pair: DaemonPair, role: str, job_id: str) -> bool:
    with pair.client(role) as client:
        return client.health().running_job == job_id


def _outcome(pair: DaemonPair, role: str, job_id: str) -> JobOutcome:
    with pair.client(role) as client:
        return JobOutcome.from_info(client.status(job_id), pair.address(role))


def _idle(pair: DaemonPair) -> None:
    for role in ("alice", "bob"):
        wait_until(lambda r=role: _running_at(pair, r, ""), WAIT_S, f"{role} idle")


def test_a_job_that_ended_before_a_restart_is_known_from_its_folder(pair, capsys):
    done, cancelled = _fresh_id(), _fresh_id()
    with pair.client("alice") as client:
        client.start("ping", {"rounds": 3}, done)
        assert client.wait(done, WAIT_S).state == "SUCCEEDED"
        client.start("ping", LONG_PING, cancelled)
        wait_until(lambda: _running_at(pair, "alice", cancelled), WAIT_S, "the long ping to run")
        client.cancel(cancelled)
        assert client.wait(cancelled, WAIT_S).state == "CANCELLED"
    _idle(pair)
    pair.restart("alice")

    known = _outcome(pair, "alice", done)
    assert known.state == "SUCCEEDED" and known.kind == "ping", known
    assert known.result is not None and known.result["rounds"] == 3, known.result
    assert known.stats is not None and known.stats["wall_s"] > 0, known.stats
    assert known.out_dir == str(pair.out["alice"] / done)
    stopped = _outcome(pair, "alice", cancelled)
    assert stopped.state == "CANCELLED" and "cancelled by operator" in stopped.error, stopped

    address = ["--peer", pair.address("alice"), "--tls-dir", str(pair.pki["alice"])]
    assert ppbn_main(["learn", *address, "--status", done]) == 0
    shown = capsys.readouterr().out
    assert "SUCCEEDED" in shown and done in shown, shown
    with pair.client("alice") as client, pytest.raises(UserError, match="already has a job"):
        client.start("ping", {"rounds": 1}, done)
    with pair.client("alice") as client, pytest.raises(UserError, match="knows no job"):
        client.status(_fresh_id())


def test_the_id_of_a_job_killed_with_its_daemon_names_its_temporary_folder(pair):
    job_id = _fresh_id()
    with pair.client("alice") as client:
        client.start("ping", LONG_PING, job_id)
    wait_until(lambda: _running_at(pair, "bob", job_id), WAIT_S, "bob to run the job")
    pair.kill("bob")
    partial = pair.out["bob"] / f".{job_id}.partial"
    assert partial.is_dir() and not (pair.out["bob"] / job_id).exists()
    pair.restart("bob")
    _idle(pair)

    with pair.client("bob") as client, pytest.raises(UserError) as refused:
        client.start("ping", {"rounds": 1}, job_id)
    message = str(refused.value)
    assert str(partial) in message and "remove that folder" in message, message
    assert f"{pair.out['bob'] / job_id})" not in message, message  # no folder that is not there
    interrupted = _outcome(pair, "bob", job_id)
    assert interrupted.state == "FAILED" and str(partial) in interrupted.error, interrupted


def test_a_daemon_paused_longer_than_the_peer_timeout_blames_its_pause(pair):
    job_id = _fresh_id()
    with pair.client("alice") as client:
        client.start("ping", LONG_PING, job_id)
    wait_until(lambda: _running_at(pair, "bob", job_id), WAIT_S, "bob to run the job")
    pair.pause("bob")
    stopped = time.monotonic()
    try:  # bob stays stopped until alice has given the job up, and twice her timeout at least
        failed = pair.wait("alice", job_id, 3 * PEER_TIMEOUT_S + 30)
        time.sleep(max(0.0, stopped + 2 * PEER_TIMEOUT_S - time.monotonic()))
    finally:
        pair.resume_process("bob")
    assert failed["state"] == "FAILED" and "peer bob" in failed["error"], failed

    wait_until(lambda: not _running_at(pair, "bob", job_id), WAIT_S, "bob to end the job")
    with pair.client("bob") as client:
        info = client.status(job_id)
    assert info.state == party_pb2.JobInfo.FAILED, info
    assert "this daemon (bob) was paused for about" in info.error, info.error
    assert "because bob was paused, not because of peer alice" in info.error, info.error
