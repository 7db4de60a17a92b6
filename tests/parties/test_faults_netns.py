"""The fault matrix over a real link: alice's daemon in one network namespace,
bob's in another, joined by a veth pair (10.203.X.1/30 and .2/30); certificates name the
veth addresses, and the test process (in the root namespace) reaches each daemon through a
loopback relay whose upstream sockets are made inside that daemon's namespace.

Faults on bob: SIGKILL, SIGSTOP for longer than the peer timeout, and the link cut the
network way (bob's veth end set down for longer than the peer timeout, then up again).
Alice must report within peer-timeout + 10 s naming the peer (and the phase), free the job
slot, then run an honest job to the end; a killed bob restarted and `ppbn learn --resume`
finish equal to the uninterrupted run.

Needs CAP_NET_ADMIN and iproute2 (`ip netns add`); skipped with the reason otherwise.
`make test` runs one phase per fault; the whole matrix runs with
`pytest -m faults_full tests/parties/test_faults_netns.py`.
"""

from __future__ import annotations

import time

import pytest
from faults_util import FAULTS, PHASES, DaemonPair, resume_equals, run_matrix_case
from netns_util import VethNamespaces
from waiting import wait_until

from ppbn.jobs.checkpoint import CheckpointStore

PEER_TIMEOUT_S = 5.0
BOUND_S = PEER_TIMEOUT_S + 10
HOLD_S = PEER_TIMEOUT_S + 1  # a stop or a cut link lasts longer than the peer timeout
PARAMS = {"max_parents": 2, "score": "exact", "key_bits": 1024}
DEFAULT_SUBSET = {
    ("ln terms", "drop")
}  # the fault only this variant has; kill and stop: tests/parties/test_faults.py


@pytest.fixture(scope="module")
def net():
    with VethNamespaces() as namespaces:
        yield namespaces


@pytest.fixture(scope="module")
def daemons(net, tmp_path_factory):
    with DaemonPair.over_namespaces(
        tmp_path_factory.mktemp("faults-netns"), net, "asia", 400, PEER_TIMEOUT_S
    ) as running:
        yield running


@pytest.fixture
def pair(daemons):
    """The module's daemons, each test starting with both up and the link up."""
    daemons.ensure_running()
    return daemons


@pytest.fixture(scope="module")
def reference(daemons) -> dict:
    """network.json of an uninterrupted run over the veth link: what a resume must equal."""
    return daemons.uninterrupted_network(PARAMS)


def test_the_daemons_talk_over_the_veth_link(pair, net):
    """Each daemon runs inside its own namespace and listens on its veth address only."""
    assert pair.listen_address("alice").startswith(net.address["a"] + ":")
    assert pair.listen_address("bob").startswith(net.address["b"] + ":")
    for role, side in (("alice", "a"), ("bob", "b")):
        pid = str(pair.processes[role].pid)
        assert pid in net.pids(side), f"{role} (pid {pid}) is not in namespace {net.ns[side]}"
    assert pair.run_job("ping", {"rounds": 2})["state"] == "SUCCEEDED"


def _matrix_cases():
    for phase in PHASES:
        for fault in FAULTS:
            marks = () if (phase, fault) in DEFAULT_SUBSET else (pytest.mark.faults_full,)
            yield pytest.param(phase, fault, marks=marks, id=f"{phase.replace(' ', '-')}-{fault}")


@pytest.mark.parametrize(("phase", "fault"), list(_matrix_cases()))
def test_over_veth_survivor_reports_in_time_then_serves_an_honest_job(
    pair, reference, phase, fault
):
    run_matrix_case(
        pair, reference, PARAMS, phase, fault, bound_s=BOUND_S, hold_s=HOLD_S, drop_redials=False
    )


@pytest.mark.faults_full
def test_over_veth_sigkill_mid_search_then_restart_and_resume_equals_the_uninterrupted_run(
    pair, reference
):
    """SIGKILL bob in his namespace once both parties checkpointed a K2 step; alice names
    the peer and `--resume` in time; bob restarted in his namespace, the resumed job's
    network equals the uninterrupted run at both parties."""
    job_id = pair.start_learn(PARAMS)
    stores = [CheckpointStore(pair.out[r], job_id, r) for r in ("alice", "bob")]
    wait_until(lambda: all(s.steps() for s in stores), what="a checkpointed K2 step at both")
    pair.kill("bob")
    killed = time.monotonic()
    failed = pair.wait("alice", job_id, 3 * BOUND_S)
    elapsed = time.monotonic() - killed
    print(f"mid-search / kill: {failed['state']} after {elapsed:.1f} s: {failed['error']}")
    assert elapsed <= BOUND_S
    assert failed["state"] == "FAILED" and "peer bob" in failed["error"], failed
    assert f"ppbn learn --resume {job_id}" in failed["error"], failed["error"]
    pair.restart("bob")
    resume_equals(pair, job_id, reference)
