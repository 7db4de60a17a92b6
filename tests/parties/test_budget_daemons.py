"""The privacy budget at the daemons: each reserves, releases or refunds its own account,
refuses a job over either total or a peer over its rate, and keeps the account with the
data set, whatever its flags: an account it cannot find stops DP jobs until its operator
adopts it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from loopback_pair import insecure_pair
from timeouts import WAIT_S
from waiting import wait_until

from ppbn.cli import main as ppbn_main
from ppbn.errors import UserError
from ppbn.jobs.base import JobKind
from ppbn.jobs.policy import LocalPolicy, PrivacyCost
from ppbn.jobs.registry import register_job, unregister_job
from ppbn.parties.budget import PrivacyBudget, budget_folder
from ppbn.parties.client import DaemonClient
from ppbn.protocols.channel import PeerGone

ROLES = ("alice", "bob")


def _write_world(base: Path) -> None:
    states = ["s0", "s1"]
    schema = {
        "id_column": "id",
        "variables": [
            {"name": "a1", "owner": "alice", "states": states},
            {"name": "b1", "owner": "bob", "states": states},
        ],
    }
    (base / "schema.json").write_text(json.dumps(schema))
    for role, column in (("alice", "a1"), ("bob", "b1")):
        rows = [f"r{i:03d},s{i % 2}" for i in range(40)]
        (base / f"{role}.csv").write_text("\n".join([f"id,{column}", *rows]) + "\n")


def _run(role, channel, context) -> dict:
    """Opens a noisy value (``before_release``) unless told to fail before it."""
    if context.params.get("vanish"):
        raise PeerGone("the peer went away (test)")
    context.before_release()
    return {}


@pytest.fixture
def dp_test_kind():
    """A job kind that spends the epsilon and delta its parameters name."""
    kind = JobKind(
        "test.dp",
        _run,
        lambda params, schema: params,
        "test",
        privacy_cost=lambda params: PrivacyCost(
            float(params["epsilon"]), float(params.get("delta", 1e-9))
        ),
    )
    register_job(kind)
    yield
    unregister_job("test.dp")


def _policy(**settings) -> LocalPolicy:
    return LocalPolicy(min_records=10, **settings)


def _runs(daemon) -> list[tuple[str, str]]:
    key = daemon.setup.dataset()
    return [(r.first.job_id, r.status.split(" ")[0]) for r in daemon.setup.budget.runs(key)]


def _finish(client, daemons, job_id) -> str:
    state = client.wait(job_id, timeout_s=WAIT_S).state
    for daemon in daemons.values():
        wait_until(lambda d=daemon: d.jobs[job_id].done.is_set(), what="the job at both")
    return state


def test_daemons_charge_their_own_budget_and_refuse_a_job_over_it(tmp_path, dp_test_kind):
    _write_world(tmp_path)
    policies = {
        role: _policy(dp_total_epsilon=total) for role, total in (("alice", 1.0), ("bob", 5.0))
    }
    with insecure_pair(tmp_path, tmp_path, policies) as (daemons, ports):
        with DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client:
            job_id = client.start("test.dp", {"epsilon": 0.75})
            assert _finish(client, daemons, job_id) == "SUCCEEDED"
            for daemon in daemons.values():
                assert _runs(daemon) == [(job_id, "released")]
            files = {r: d.setup.budget.path(d.setup.dataset()) for r, d in daemons.items()}
            before = {r: f.read_bytes() for r, f in files.items()}
            bob_jobs = set(daemons["bob"].jobs)
            with pytest.raises(
                UserError,
                match=r"dp_epsilon.*would spend epsilon 0\.5 on this data set; spent 0\.75 of "
                r"the policy's total 1, 0\.25 left",
            ):
                client.start("test.dp", {"epsilon": 0.5})
        assert {r: f.read_bytes() for r, f in files.items()} == before
        assert set(daemons["bob"].jobs) == bob_jobs  # bob was never asked


def test_a_job_that_ends_before_anything_is_opened_is_refunded(tmp_path, dp_test_kind, capsys):
    """The drain: a peer that accepts DP jobs and vanishes before any noisy value is
    opened spends nothing of the other party's budget; each request counts in its rate."""
    _write_world(tmp_path)
    policies = {"alice": _policy(dp_total_epsilon=1.0), "bob": _policy(dp_total_epsilon=1.0)}
    with (
        insecure_pair(tmp_path, tmp_path, policies) as (daemons, ports),
        DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client,
    ):
        for _ in range(3):  # three times the total, refunded each time
            job_id = client.start("test.dp", {"epsilon": 0.9, "vanish": True})
            assert _finish(client, daemons, job_id) == "FAILED"
        for daemon in daemons.values():
            key = daemon.setup.dataset()
            assert daemon.setup.budget.spent(key) == (0.0, 0.0)
            assert [s for _, s in _runs(daemon)] == ["refunded"] * 3
        job_id = client.start("test.dp", {"epsilon": 0.9})
        assert _finish(client, daemons, job_id) == "SUCCEEDED"
    folder = daemons["bob"].setup.budget.folder
    assert ppbn_main(["budget", "show", "--budget-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.count("(refunded: ended before anything was opened)") == 3
    assert out.count("(released)") == 1 and "epsilon 0.9 spent of 100" in out


def test_a_peer_is_held_to_its_rate_of_dp_jobs(tmp_path, dp_test_kind):
    _write_world(tmp_path)
    policies = {"alice": _policy(), "bob": _policy(dp_peer_jobs_per_hour=2)}
    with insecure_pair(tmp_path, tmp_path, policies) as (daemons, ports):
        with DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client:
            for _ in range(2):
                job_id = client.start("test.dp", {"epsilon": 0.1, "vanish": True})
                _finish(client, daemons, job_id)
            with pytest.raises(
                UserError,
                match="peer bob .* policy does not allow this job .parameter 'dp_epsilon'",
            ):
                client.start("test.dp", {"epsilon": 0.1})
        # bob's own operator is not a peer: it is not held to the rate
        with DaemonClient(f"127.0.0.1:{ports['bob']}", None, insecure=True) as client:
            job_id = client.start("test.dp", {"epsilon": 0.1})
            assert _finish(client, daemons, job_id) == "SUCCEEDED"


def test_delta_above_the_policy_bound_is_refused(tmp_path, dp_test_kind):
    _write_world(tmp_path)
    policies = {"alice": _policy(), "bob": _policy()}
    with insecure_pair(tmp_path, tmp_path, policies) as (daemons, ports):
        with (
            DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client,
            pytest.raises(UserError, match="dp_delta 0.5 is above this party's policy"),
        ):
            client.start("test.dp", {"epsilon": 1.0, "delta": 0.5})
        for daemon in daemons.values():
            assert daemon.setup.budget.datasets() == []


def _serve_once(data: Path, out: Path, settings: dict, epsilon: float = 0.0) -> str:
    """Start the pair with ``settings`` for alice, run one DP job of ``epsilon`` (or just
    try one: the refusal's text, '' when it ran)."""
    policies = {"alice": _policy(dp_total_epsilon=3.0), "bob": _policy()}
    with (
        insecure_pair(data, out, policies, settings={"alice": settings}) as (
            daemons,
            ports,
        ),
        DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client,
    ):
        try:
            job_id = client.start("test.dp", {"epsilon": epsilon})
        except UserError as exc:
            return str(exc)
        assert _finish(client, daemons, job_id) == "SUCCEEDED"
        return ""


def test_the_budget_belongs_to_the_data_set_not_to_the_flags(tmp_path, dp_test_kind):
    _write_world(tmp_path)
    state = str(tmp_path / "state")
    assert _serve_once(tmp_path, tmp_path / "a", {"state_dir": state}, 2.5) == ""
    # another output folder and another audit log: the same account, 0.5 left of 3
    other = {"state_dir": state, "audit_log": str(tmp_path / "logs" / "x.log")}
    refused = _serve_once(tmp_path, tmp_path / "b", other, 2.0)
    assert "spent 2.5 of the policy's total 3, 0.5 left" in refused


def test_an_account_moved_or_missing_stops_dp_jobs_until_adopted(tmp_path, dp_test_kind):
    _write_world(tmp_path)
    out, first = tmp_path / "run", str(tmp_path / "state-1")
    assert _serve_once(tmp_path, out, {"state_dir": first}, 2.5) == ""
    # the same output folder with another state folder: the account is elsewhere
    second = tmp_path / "state-2"
    refused = _serve_once(tmp_path, out, {"state_dir": str(second)}, 0.1)
    assert "the privacy budget of this data set is kept in" in refused and first in refused
    assert "ppbn budget adopt" in refused
    # adopted into the second folder, with the output folder's note: the account counts
    [account] = list(Path(budget_folder(first)).glob("*.jsonl"))
    adopt = ["budget", "adopt", str(account), "--budget-dir", str(budget_folder(second))]
    assert ppbn_main([*adopt, "--out", str(out / "out-alice")]) == 0
    refused = _serve_once(tmp_path, out, {"state_dir": str(second)}, 1.0)
    assert "spent 2.5 of the policy's total 3, 0.5 left" in refused
    # the account deleted: missing, refused, never started again at zero
    shutil.rmtree(budget_folder(second))
    refused = _serve_once(tmp_path, out, {"state_dir": str(second)}, 0.1)
    assert "is missing" in refused and "DP jobs are refused" in refused


def test_charges_kept_beside_the_audit_log_are_found_and_adopted(tmp_path, dp_test_kind):
    """An account of one charge per job beside the audit log (the form earlier daemons
    kept): a daemon with an empty budget folder refuses until it is adopted."""
    _write_world(tmp_path)
    out = tmp_path / "run"
    state = str(tmp_path / "state")
    # learn the data set's key from a first run in a throwaway state folder
    assert _serve_once(tmp_path, tmp_path / "probe", {"state_dir": str(tmp_path / "p")}, 0.1) == ""
    [probe] = list(budget_folder(tmp_path / "p").glob("*.jsonl"))
    key = probe.stem
    legacy = out / "out-alice" / "privacy-budget.jsonl"
    legacy.parent.mkdir(parents=True)
    charge = {
        "time": "2026-01-01T00:00:00+00:00",
        "job_id": "old",
        "kind": "learn",
        "dataset": key,
        "epsilon": 2.75,
        "delta": 1e-9,
        "initiator": "operator",
    }
    legacy.write_text(json.dumps(charge) + "\n")
    refused = _serve_once(tmp_path, out, {"state_dir": state}, 0.1)
    assert f"{legacy} holds charges of this data set" in refused
    adopt = ["budget", "adopt", str(legacy), "--budget-dir", str(budget_folder(state))]
    assert ppbn_main(adopt) == 0
    assert PrivacyBudget(budget_folder(state), 3.0).spent(key)[0] == 2.75
    refused = _serve_once(tmp_path, out, {"state_dir": state}, 0.5)
    assert "spent 2.75 of the policy's total 3, 0.25 left" in refused
