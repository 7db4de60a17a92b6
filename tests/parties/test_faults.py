"""The fault matrix: two `ppbn party serve` processes over loopback
mutual TLS; alice's operator runs a learn job and bob meets a fault in one phase:

- phases: handshake (the fault is in place when the job is requested), tables, ln terms,
  argmax, parameters (injected as soon as bob's log names the phase);
- faults: SIGKILL of bob, SIGSTOP of bob for longer than the peer timeout, and a dropped
  TCP connection (alice reaches bob through a relay that closes its connections).

Alice must report within peer-timeout + 10 s, naming the peer (and the phase), free the
job slot, and then run an honest job to the end. `make test` runs a representative
subset; the whole matrix runs with `pytest -m faults_full tests/parties/test_faults.py`.
"""

from __future__ import annotations

import time

import pytest
from faults_util import (
    FAULTS,
    PHASES,
    DaemonPair,
    phase_seen,
    resume_equals,
    run_matrix_case,
)
from waiting import wait_until

from ppbn.errors import UserError
from ppbn.jobs.checkpoint import CheckpointStore

PEER_TIMEOUT_S = 5.0
BOUND_S = PEER_TIMEOUT_S + 10
PARAMS = {"max_parents": 2, "score": "exact", "key_bits": 1024}
DEFAULT_SUBSET = {
    ("handshake", "stop"),
    ("tables", "kill"),
    ("argmax", "stop"),
    ("parameters", "drop"),
}


@pytest.fixture(scope="module")
def daemons(tmp_path_factory):
    with DaemonPair(tmp_path_factory.mktemp("faults"), "asia", 400, PEER_TIMEOUT_S) as running:
        yield running


@pytest.fixture
def pair(daemons):
    """The module's daemons, each test starting with both up (whatever a failed test left)."""
    daemons.ensure_running()
    return daemons


@pytest.fixture(scope="module")
def reference(daemons) -> dict:
    """network.json of an uninterrupted run on the same daemons: what a resume must equal."""
    return daemons.uninterrupted_network(PARAMS)


def _matrix_cases():
    for phase in PHASES:
        for fault in FAULTS:
            marks = () if (phase, fault) in DEFAULT_SUBSET else (pytest.mark.faults_full,)
            yield pytest.param(phase, fault, marks=marks, id=f"{phase.replace(' ', '-')}-{fault}")


@pytest.mark.parametrize(("phase", "fault"), list(_matrix_cases()))
def test_survivor_reports_in_time_then_serves_an_honest_job(pair, reference, phase, fault):
    run_matrix_case(pair, reference, PARAMS, phase, fault, bound_s=BOUND_S)


def test_sigterm_aborts_cleanly_tells_the_peer_and_the_job_resumes(pair, reference):
    """SIGTERM to bob mid-search: bob exits 0 with result.json CANCELLED and no network
    files; alice is told (SHUTTING_DOWN) and names `--resume`; after bob's restart the
    resumed job equals an uninterrupted run."""
    job_id = pair.start_learn(PARAMS)
    bob_store = CheckpointStore(pair.out["bob"], job_id, "bob")
    wait_until(lambda: bob_store.steps(), what="bob's first checkpoint")
    started = time.monotonic()
    assert pair.terminate("bob") == 0
    assert time.monotonic() - started < 25
    bob_result = pair.result_file("bob", job_id)
    assert bob_result["state"] == "CANCELLED" and "shutting down" in bob_result["error"], bob_result
    assert sorted(p.name for p in (pair.out["bob"] / job_id).glob("network*")) == []
    failed = pair.wait("alice", job_id, BOUND_S)
    assert failed["state"] == "FAILED"
    assert "peer bob aborted the job: its daemon is shutting down" in failed["error"], failed[
        "error"
    ]
    assert f"ppbn learn --resume {job_id}" in failed["error"], failed["error"]
    assert "received SIGTERM: shutting down" in pair.log("bob") and "bob stopped" in pair.log("bob")
    pair.restart("bob")
    resume_equals(pair, job_id, reference)


def test_sigkill_mid_search_then_restart_and_resume_equals_the_uninterrupted_run(pair, reference):
    """SIGKILL bob once both parties checkpointed a K2 step, restart him with the same
    --out, `ppbn learn --resume`: the same edges in the same order and CPTs within 1e-9."""
    job_id = pair.start_learn(PARAMS)
    stores = [CheckpointStore(pair.out[r], job_id, r) for r in ("alice", "bob")]
    wait_until(lambda: all(s.steps() for s in stores), what="a checkpointed K2 step at both")
    pair.kill("bob")
    killed = time.monotonic()
    failed = pair.wait("alice", job_id, 3 * BOUND_S)
    assert time.monotonic() - killed <= BOUND_S
    assert failed["state"] == "FAILED" and "peer bob" in failed["error"], failed
    assert f"ppbn learn --resume {job_id}" in failed["error"], failed["error"]
    assert not (pair.out["alice"] / job_id / "network.json").exists()
    with (
        pair.client("alice") as client,
        pytest.raises(UserError, match="parameters differ from the checkpoint's"),
    ):
        client.start("learn", {**PARAMS, "max_parents": 1}, job_id, resume=True)
    pair.restart("bob")
    resume_equals(pair, job_id, reference)
    assert "phase resume after K2 step" in pair.log("bob")
    assert all(s.steps() == [] for s in stores)  # a finished job keeps no checkpoint


def test_resume_is_refused_without_a_checkpoint(pair):
    code, _, err = pair.cli_learn("alice", ["--resume", "no-such-job"])
    assert code == 2
    assert err.strip().endswith(
        "alice has no checkpoint of job no-such-job in "
        + str(pair.out["alice"] / ".checkpoints" / "no-such-job")
        + ": nothing to resume"
    ), err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.faults_full
def test_keepalive_sees_a_stopped_peer_long_before_a_60_s_peer_timeout(tmp_path):
    """With the default 60 s peer timeout a SIGSTOPped peer is still seen in seconds: the
    HTTP/2 keepalive ping goes unanswered (gRPC's own ping timeout used to make it ~60 s)."""
    with DaemonPair(tmp_path, "asia", 400, 60.0) as slow:
        job_id = slow.start_learn(PARAMS)
        wait_until(lambda: phase_seen(slow, job_id, "argmax"), what="bob to enter phase argmax")
        slow.pause("bob")
        stopped = time.monotonic()
        outcome = slow.wait("alice", job_id, 90)
        elapsed = time.monotonic() - stopped
        slow.resume_process("bob")
        print(f"keepalive: {outcome['state']} after {elapsed:.1f} s: {outcome['error']}")
        assert outcome["state"] == "FAILED" and "ping timeout" in outcome["error"], outcome
        assert elapsed <= 20, f"a stopped peer took {elapsed:.1f} s to be seen"
