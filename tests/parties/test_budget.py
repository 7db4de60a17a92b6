"""The privacy budget of one daemon: charges add up per data set, a refusal or a failed
write leaves the file as it was, a job is charged once, and nothing overspends."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from loopback_pair import insecure_pair
from waiting import wait_until

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData
from ppbn.errors import UserError
from ppbn.jobs.base import JobKind
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal, PrivacyCost
from ppbn.jobs.registry import register_job, unregister_job
from ppbn.parties.budget import (
    BUDGET_FILE,
    DatasetKey,
    PrivacyBudget,
    budget_path,
    dataset_key,
)
from ppbn.parties.client import DaemonClient

DATA = "d" * 64


def cost(epsilon: float, delta: float = 1e-9) -> PrivacyCost:
    return PrivacyCost(epsilon, delta)


@pytest.fixture
def budget(tmp_path) -> PrivacyBudget:
    return PrivacyBudget(tmp_path / BUDGET_FILE, 10.0)


def test_charges_add_up_per_data_set(budget):
    assert budget.entries() == [] and budget.spent(DATA) == (0.0, 0.0)
    assert budget.charge("j1", "learn", DATA, cost(2.5), "operator (via alice)")
    assert budget.charge("j2", "learn", DATA, cost(1.0, 2e-9), "operator")
    assert budget.charge("j3", "learn", "other", cost(4.0), "operator")
    assert budget.spent(DATA) == pytest.approx((3.5, 3e-9))
    assert budget.remaining(DATA) == pytest.approx(6.5)
    assert budget.remaining("other") == pytest.approx(6.0)
    assert budget.charged("j1") and budget.charged("j3", "other") and not budget.charged("j3", DATA)
    entries = budget.entries()
    assert [e.job_id for e in entries] == ["j1", "j2", "j3"]
    assert entries[0].kind == "learn" and entries[0].initiator == "operator (via alice)"
    assert entries[0].time.endswith("+00:00")  # UTC
    lines = budget.path.read_text().splitlines()
    assert len(lines) == 3 and set(json.loads(lines[0])) == {
        "time",
        "job_id",
        "kind",
        "dataset",
        "epsilon",
        "delta",
        "initiator",
    }


def test_a_job_over_the_total_is_refused_naming_the_figures_and_nothing_is_written(budget):
    budget.charge("j1", "learn", DATA, cost(7.0), "operator")
    before = budget.path.read_bytes()
    with pytest.raises(PolicyRefusal) as err:
        budget.check("", DATA, cost(3.5))
    assert err.value.parameter == "dp_epsilon"
    assert (
        "would spend epsilon 3.5 on this data set; spent 7 of the policy's total 10, 3 left"
        in str(err.value)
    )
    with pytest.raises(PolicyRefusal, match="job j2 would spend epsilon 3.5 .* spent 7 .* 3 left"):
        budget.charge("j2", "learn", DATA, cost(3.5), "operator")
    assert budget.path.read_bytes() == before
    budget.charge("j3", "learn", DATA, cost(3.0), "operator")  # exactly what is left
    assert budget.remaining(DATA) == 0.0


def test_rounding_does_not_refuse_what_is_left(tmp_path):
    budget = PrivacyBudget(tmp_path / BUDGET_FILE, 0.3)
    budget.charge("a", "learn", DATA, cost(0.1), "op")
    budget.charge("b", "learn", DATA, cost(0.2), "op")  # 0.1 + 0.2 > 0.3 in floating point
    with pytest.raises(PolicyRefusal):
        budget.charge("c", "learn", DATA, cost(1e-6), "op")


def test_a_job_is_charged_once(budget):
    assert budget.charge("j1", "learn", DATA, cost(6.0), "operator")
    before = budget.path.read_bytes()
    # resumed: not charged again, and not refused though 6 more would be over the total
    budget.check("j1", DATA, cost(6.0))
    assert budget.charge("j1", "learn", DATA, cost(6.0), "operator") is False
    assert budget.path.read_bytes() == before


def test_negative_or_infinite_costs_are_refused(budget):
    for bad in (cost(-1.0), cost(float("inf")), cost(float("nan")), cost(1.0, -1e-9)):
        with pytest.raises(PolicyRefusal):
            budget.charge("j", "learn", DATA, bad, "op")
    assert not budget.path.exists()
    with pytest.raises(ValueError):
        PrivacyBudget(budget.path, float("inf"))


def test_concurrent_charges_never_overspend(tmp_path):
    """Threads with their own budget objects on one file (as two processes): the folder's
    flock, not only the thread lock, keeps the check and the append together."""
    path = tmp_path / BUDGET_FILE
    results: list[str] = []
    start = threading.Barrier(24)

    def spend(i: int) -> None:
        budget = PrivacyBudget(path, 10.0)
        start.wait()
        try:
            budget.charge(f"job{i}", "learn", DATA, cost(1.0), "op")
            results.append("charged")
        except PolicyRefusal:
            results.append("refused")

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count("charged") == 10 and results.count("refused") == 14
    assert PrivacyBudget(path, 10.0).spent(DATA)[0] == pytest.approx(10.0)


def test_shared_budget_object_across_threads(budget):
    def spend(i: int) -> None:
        with contextlib.suppress(PolicyRefusal):
            budget.charge(f"job{i}", "learn", DATA, cost(0.75), "op")

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(budget.entries()) == 13 and budget.spent(DATA)[0] <= 10.0


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"job_id": "x"}',
        json.dumps(
            {
                "time": "t",
                "job_id": "x",
                "kind": "learn",
                "dataset": DATA,
                "epsilon": -1,
                "delta": 0,
                "initiator": "op",
            }
        ),
    ],
)
def test_a_corrupt_line_is_an_error_naming_file_and_line(budget, line):
    budget.charge("j1", "learn", DATA, cost(1.0), "op")
    with budget.path.open("a") as out:
        out.write(line + "\n")
    for read in (
        budget.entries,
        lambda: budget.spent(DATA),
        lambda: budget.check("", DATA, cost(1)),
    ):
        with pytest.raises(UserError, match=rf"{budget.path}: line 2 is not a budget entry"):
            read()
    before = budget.path.read_bytes()
    with pytest.raises(UserError, match="line 2"):
        budget.charge("j2", "learn", DATA, cost(1.0), "op")
    assert budget.path.read_bytes() == before


def test_a_line_cut_short_is_an_error(budget):
    budget.charge("j1", "learn", DATA, cost(1.0), "op")
    with budget.path.open("a") as out:
        out.write('{"time": "2024')
    with pytest.raises(UserError, match=rf"{budget.path}: line 2 is cut short"):
        budget.entries()


def test_a_failed_write_leaves_the_file_as_it_was(budget, monkeypatch):
    budget.charge("j1", "learn", DATA, cost(1.0), "op")
    before = budget.path.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data) -> int:
        if len(data) > 10:
            real_write(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(UserError, match="cannot write the privacy budget .* No space left"):
        budget.charge("j2", "learn", DATA, cost(1.0), "op")
    monkeypatch.undo()
    assert budget.path.read_bytes() == before


def test_budget_path_is_beside_the_audit_log(tmp_path):
    assert budget_path(tmp_path / "out") == tmp_path / "out" / BUDGET_FILE
    assert (
        budget_path(tmp_path / "out", tmp_path / "logs" / "a.log")
        == tmp_path / "logs" / BUDGET_FILE
    )


def _schema(states: int = 2) -> Schema:
    names = [f"s{i}" for i in range(states)]
    return Schema.from_dict(
        {
            "id_column": "id",
            "variables": [
                {"name": "a", "owner": "alice", "states": names},
                {"name": "b", "owner": "bob", "states": names},
            ],
        }
    )


def test_dataset_key_changes_with_the_data_and_the_schema():
    schema = _schema()
    codes = np.array([[0], [1], [1]], dtype=np.int64)
    data = PartyData(schema, "alice", ("a",), ("r1", "r2", "r3"), codes)
    key = dataset_key(schema, data)
    assert len(key) == 64 and key == dataset_key(schema, data)
    other_values = PartyData(schema, "alice", ("a",), ("r1", "r2", "r3"), codes[::-1].copy())
    other_ids = PartyData(schema, "alice", ("a",), ("r1", "r2", "r4"), codes)
    assert dataset_key(schema, other_values) != key
    assert dataset_key(schema, other_ids) != key
    assert dataset_key(_schema(3), data) != key
    lazy = DatasetKey(schema, data)
    assert lazy() == key == lazy()


# -- the daemons: a DP job over this party's total is refused before the peer is asked --
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


@pytest.fixture
def dp_test_kind():
    """A job kind that spends the epsilon its parameters name, and sends nothing itself."""
    kind = JobKind(
        "test.dp",
        lambda role, channel, context: {},
        lambda params, schema: params,
        "test",
        privacy_cost=lambda params: PrivacyCost(float(params["epsilon"]), 1e-9),
    )
    register_job(kind)
    yield
    unregister_job("test.dp")


def test_daemons_charge_their_own_budget_and_refuse_a_job_over_it(tmp_path, dp_test_kind):
    _write_world(tmp_path)
    policies = {
        role: LocalPolicy(min_records=10, dp_total_epsilon=total)
        for role, total in (("alice", 1.0), ("bob", 5.0))
    }
    with insecure_pair(tmp_path, tmp_path, policies, handshake_s=15.0) as (daemons, ports):
        files = {r: tmp_path / f"out-{r}" / BUDGET_FILE for r in daemons}
        with DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client:
            job_id = client.start("test.dp", {"epsilon": 0.75})
            assert client.wait(job_id, timeout_s=20).state == "SUCCEEDED"
            wait_until(lambda: daemons["bob"].jobs[job_id].done.is_set(), 10.0, "bob's job")
            for role in daemons:
                assert [(e.job_id, e.epsilon) for e in daemons[role].budget.entries()] == [
                    (job_id, 0.75)
                ]
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
