"""The privacy budget of one daemon: runs are reserved, released or refunded, charges add
up per data set, a refusal or a failed write leaves the file as it was, and nothing
overspends epsilon, delta or a peer's rate."""

from __future__ import annotations

import contextlib
import json
import os
import threading

import numpy as np
import pytest

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData
from ppbn.errors import UserError
from ppbn.jobs.policy import PolicyRefusal, PrivacyCost
from ppbn.parties.budget import (
    DatasetKey,
    PrivacyBudget,
    RunTicket,
    budget_folder,
    dataset_key,
)

DATA, OTHER = "d" * 64, "e" * 64


def cost(epsilon: float, delta: float = 1e-9) -> PrivacyCost:
    return PrivacyCost(epsilon, delta)


@pytest.fixture
def budget(tmp_path) -> PrivacyBudget:
    return PrivacyBudget(tmp_path / "budgets", 10.0, 1e-6)


def spend(budget: PrivacyBudget, job: str, c: PrivacyCost, dataset: str = DATA, run: str = "r1"):
    """A run that opened something: reserved, then released."""
    budget.reserve(RunTicket(job, run, "learn", dataset, c, initiator="operator"))
    budget.release(RunTicket(job, run, "learn", dataset, c))


def test_charges_add_up_per_data_set(budget):
    assert budget.entries(DATA) == [] and budget.spent(DATA) == (0.0, 0.0)
    spend(budget, "j1", cost(2.5))
    spend(budget, "j2", cost(1.0, 2e-9))
    spend(budget, "j3", cost(4.0), OTHER)
    assert budget.spent(DATA) == pytest.approx((3.5, 3e-9))
    assert budget.remaining(DATA) == pytest.approx(6.5)
    assert budget.remaining(OTHER) == pytest.approx(6.0)
    assert budget.job_ids(DATA) == {"j1", "j2"} and budget.datasets() == [DATA, OTHER]
    entries = budget.entries(DATA)
    assert [(e.job_id, e.event) for e in entries] == [
        ("j1", "reserve"),
        ("j1", "release"),
        ("j2", "reserve"),
        ("j2", "release"),
    ]
    assert entries[0].time.endswith("+00:00")  # UTC
    assert budget.path(DATA) == budget.folder / f"{DATA}.jsonl"
    line = json.loads(budget.path(DATA).read_text().splitlines()[0])
    assert set(line) == {
        "time",
        "job_id",
        "run",
        "event",
        "kind",
        "dataset",
        "epsilon",
        "delta",
        "initiator",
        "peer",
    }


def test_a_reservation_counts_until_refunded_and_a_refund_after_a_release_gives_nothing(budget):
    budget.reserve(RunTicket("j1", "r1", "learn", DATA, cost(4.0), initiator="op"))
    assert budget.spent(DATA)[0] == 4.0  # a run cut short stays spent
    budget.refund(RunTicket("j1", "r1", "learn", DATA, cost(4.0)))
    assert budget.spent(DATA)[0] == 0.0
    spend(budget, "j2", cost(3.0))
    budget.refund(RunTicket("j2", "r1", "learn", DATA, cost(3.0)))  # too late: it was opened
    assert budget.spent(DATA)[0] == 3.0
    budget.refund(
        RunTicket("ghost", "r9", "learn", DATA, cost(3.0))
    )  # no reservation: counts nothing
    budget.release(RunTicket("ghost", "r9", "learn", DATA, cost(3.0)))
    assert budget.spent(DATA)[0] == 3.0
    statuses = [r.status.split(" ")[0] for r in budget.runs(DATA)]
    assert statuses == ["refunded", "released"]


def test_every_run_of_a_job_is_reserved_again(budget):
    """A resumed job draws its noisy values again: each run costs the job's epsilon."""
    spend(budget, "j1", cost(4.0), run="first")
    budget.check("j1", DATA, cost(4.0))
    spend(budget, "j1", cost(4.0), run="resumed")
    assert budget.spent(DATA)[0] == 8.0
    with pytest.raises(PolicyRefusal, match="job j1 would spend epsilon 4 .* spent 8 .* 2 left"):
        budget.reserve(RunTicket("j1", "again", "learn", DATA, cost(4.0), initiator="op"))


def test_a_job_over_the_total_is_refused_naming_the_figures_and_nothing_is_written(budget):
    spend(budget, "j1", cost(7.0))
    before = budget.path(DATA).read_bytes()
    with pytest.raises(PolicyRefusal) as err:
        budget.check("", DATA, cost(3.5))
    assert err.value.parameter == "dp_epsilon"
    assert (
        "would spend epsilon 3.5 on this data set; spent 7 of the policy's total 10, 3 left"
        in str(err.value)
    )
    with pytest.raises(PolicyRefusal, match="job j2 would spend epsilon 3.5 .* spent 7 .* 3 left"):
        budget.reserve(RunTicket("j2", "r", "learn", DATA, cost(3.5), initiator="operator"))
    assert budget.path(DATA).read_bytes() == before
    spend(budget, "j3", cost(3.0))  # exactly what is left
    assert budget.remaining(DATA) == 0.0


def test_delta_is_budgeted_like_epsilon(budget):
    spend(budget, "j1", cost(0.1, 6e-7))
    before = budget.path(DATA).read_bytes()
    with pytest.raises(PolicyRefusal) as err:
        budget.reserve(RunTicket("j2", "r", "learn", DATA, cost(0.1, 5e-7), initiator="op"))
    assert err.value.parameter == "dp_delta"
    assert "spent 6e-07 of the policy's total dp_total_delta 1e-06, 4e-07 left" in str(err.value)
    assert budget.path(DATA).read_bytes() == before
    spend(budget, "j3", cost(0.1, 4e-7))
    assert budget.spent(DATA)[1] == pytest.approx(1e-6)


def test_a_peer_opens_at_most_its_rate_of_dp_jobs_an_hour(budget):
    for i in range(3):  # refunded runs count too: each was a request
        budget.reserve(
            RunTicket(f"p{i}", "r", "learn", DATA, cost(0.1), initiator="x (via bob)", peer="bob"),
            3,
        )
        budget.refund(RunTicket(f"p{i}", "r", "learn", DATA, cost(0.1)))
    with pytest.raises(PolicyRefusal, match="bob opened 3 DP jobs here within the last hour"):
        budget.check("", DATA, cost(0.1), "bob", 3)
    budget.check("", DATA, cost(0.1), "carol", 3)  # another peer, and the operator, pass
    budget.check("", DATA, cost(0.1))
    with pytest.raises(PolicyRefusal, match="dp_peer_jobs_per_hour 0"):
        budget.check("", DATA, cost(0.1), "carol", 0)


def test_rounding_does_not_refuse_what_is_left(tmp_path):
    budget = PrivacyBudget(tmp_path, 0.3, 1.0e-3)
    spend(budget, "a", cost(0.1))
    spend(budget, "b", cost(0.2))  # 0.1 + 0.2 > 0.3 in floating point
    with pytest.raises(PolicyRefusal):
        budget.reserve(RunTicket("c", "r", "learn", DATA, cost(1e-6), initiator="op"))


def test_negative_or_infinite_costs_are_refused(budget):
    for bad in (cost(-1.0), cost(float("inf")), cost(float("nan")), cost(1.0, -1e-9)):
        with pytest.raises(PolicyRefusal):
            budget.reserve(RunTicket("j", "r", "learn", DATA, bad, initiator="op"))
    assert not budget.path(DATA).exists()
    with pytest.raises(ValueError):
        PrivacyBudget(budget.folder, float("inf"))
    with pytest.raises(ValueError):
        PrivacyBudget(budget.folder, 1.0, float("nan"))


def test_concurrent_reservations_never_overspend(tmp_path):
    """Threads with their own budget objects on one folder (as two processes): the folder's
    flock, not only the thread lock, keeps the check and the append together."""
    results: list[str] = []
    start = threading.Barrier(24)

    def run(i: int) -> None:
        budget = PrivacyBudget(tmp_path, 10.0, 1.0e-3)
        start.wait()
        try:
            budget.reserve(RunTicket(f"job{i}", "r", "learn", DATA, cost(1.0), initiator="op"))
            results.append("charged")
        except PolicyRefusal:
            results.append("refused")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count("charged") == 10 and results.count("refused") == 14
    assert PrivacyBudget(tmp_path, 10.0).spent(DATA)[0] == pytest.approx(10.0)


def test_shared_budget_object_across_threads(budget):
    def run(i: int) -> None:
        with contextlib.suppress(PolicyRefusal):
            budget.reserve(RunTicket(f"job{i}", "r", "learn", DATA, cost(0.75), initiator="op"))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(budget.entries(DATA)) == 13 and budget.spent(DATA)[0] <= 10.0


def _line(**changes) -> str:
    entry = {
        "time": "2026-01-01T00:00:00+00:00",
        "job_id": "x",
        "run": "r",
        "event": "reserve",
        "kind": "learn",
        "dataset": DATA,
        "epsilon": 1,
        "delta": 0,
        "initiator": "op",
        "peer": "",
    }
    return json.dumps({**entry, **changes})


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"job_id": "x"}',
        _line(epsilon=-1),
        _line(event="spend"),
        _line(dataset=OTHER),  # another data set's line in this data set's file
    ],
)
def test_a_corrupt_line_is_an_error_naming_file_and_line(budget, line):
    spend(budget, "j1", cost(1.0))
    with budget.path(DATA).open("a") as out:
        out.write(line + "\n")
    path = budget.path(DATA)
    for read in (
        lambda: budget.entries(DATA),
        lambda: budget.spent(DATA),
        lambda: budget.check("", DATA, cost(1)),
    ):
        with pytest.raises(UserError, match=rf"{path}: line 3 is not a budget entry"):
            read()
    before = path.read_bytes()
    with pytest.raises(UserError, match="line 3"):
        budget.reserve(RunTicket("j2", "r", "learn", DATA, cost(1.0), initiator="op"))
    assert path.read_bytes() == before


def test_a_line_cut_short_is_an_error(budget):
    spend(budget, "j1", cost(1.0))
    with budget.path(DATA).open("a") as out:
        out.write('{"time": "2024')
    with pytest.raises(UserError, match=rf"{budget.path(DATA)}: line 3 is cut short"):
        budget.entries(DATA)


def test_a_failed_write_leaves_the_file_as_it_was(budget, monkeypatch):
    spend(budget, "j1", cost(1.0))
    before = budget.path(DATA).read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data) -> int:
        if len(data) > 10:
            real_write(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(UserError, match="cannot write the privacy budget .* No space left"):
        budget.reserve(RunTicket("j2", "r", "learn", DATA, cost(1.0), initiator="op"))
    monkeypatch.undo()
    assert budget.path(DATA).read_bytes() == before


def test_the_budget_folder_follows_the_state_folder_not_the_daemon_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("PPBN_STATE_DIR", str(tmp_path / "state"))
    assert budget_folder() == tmp_path / "state" / "privacy-budget"
    assert budget_folder(tmp_path / "other") == tmp_path / "other" / "privacy-budget"
    monkeypatch.delenv("PPBN_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert budget_folder() == tmp_path / "xdg" / "ppbn" / "privacy-budget"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert budget_folder() == tmp_path / "home" / ".local" / "state" / "ppbn" / "privacy-budget"


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
