"""``ppbn budget show`` and ``adopt``: a host's privacy budgets for its operator, as text
or JSON, releases told from refunded and cut-short runs."""

from __future__ import annotations

import json

import pytest

from ppbn.cli import main as ppbn_main
from ppbn.jobs.policy import PrivacyCost
from ppbn.parties.budget import PrivacyBudget, RunTicket

DATA, OTHER = "a" * 64, "b" * 64


@pytest.fixture
def folder(tmp_path):
    budget = PrivacyBudget(tmp_path / "budgets", 100.0, 1e-5)
    for job, dataset, epsilon, delta, end in (
        ("job1", DATA, 1.5, 1e-9, "release"),
        ("job2", DATA, 2.0, 2e-9, "release"),
        ("job3", OTHER, 0.5, 1e-9, "release"),
        ("job4", DATA, 9.0, 1e-9, "refund"),
        ("job5", DATA, 0.25, 1e-9, None),
    ):
        cost = PrivacyCost(epsilon, delta)
        budget.reserve(
            RunTicket(job, "r", "learn", dataset, cost, initiator="operator (via alice)")
        )
        if end == "release":
            budget.release(RunTicket(job, "r", "learn", dataset, cost))
        elif end == "refund":
            budget.refund(RunTicket(job, "r", "learn", dataset, cost))
    return budget.folder


def test_an_empty_folder_means_nothing_spent(tmp_path, capsys):
    assert ppbn_main(["budget", "show", "--budget-dir", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert f"privacy budgets in {tmp_path / 'none'}" in out
    assert "nothing spent: no data set has an account here" in out


def test_text_names_spent_totals_left_and_each_run(folder, tmp_path, capsys):
    policy = tmp_path / "policy.toml"
    policy.write_text("dp_total_epsilon = 10.0\ndp_max_epsilon = 4.0\n")
    assert ppbn_main(["budget", "show", "--budget-dir", str(folder), "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "per data set epsilon 10 and delta 1e-05 in all; per job epsilon 4, delta 1e-06" in out
    # job4 was refunded (not counted), job5 cut short (counted)
    assert f"data set {DATA[:16]}: epsilon 3.75 spent of 10, 6.25 left; delta 4e-09 spent" in out
    assert f"data set {OTHER[:16]}: epsilon 0.5 spent of 10, 9.5 left" in out
    assert "job job1  learn  epsilon 1.5  delta 1e-09  by operator (via alice)  (released)" in out
    assert "job job4  learn  epsilon 9  delta 1e-09  by operator (via alice)  (refunded" in out
    assert "job job5" in out and "(reserved: ended without a record, counted as spent)" in out


def test_json_report(folder, capsys):
    assert ppbn_main(["budget", "show", "--budget-dir", str(folder), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["budget_dir"] == str(folder) and report["exists"] is True
    assert report["total_epsilon"] == 100.0 and report["max_epsilon_per_job"] == 10.0
    assert report["total_delta"] == 1e-5 and report["max_delta_per_job"] == 1e-6
    first = report["datasets"][0]
    assert first["dataset"] == DATA
    assert first["epsilon_spent"] == pytest.approx(3.75)
    assert first["delta_spent"] == pytest.approx(4e-9)
    assert first["epsilon_left"] == pytest.approx(96.25)
    assert [(r["job_id"], r["status"], r["spent"]) for r in first["runs"]] == [
        ("job1", "released", True),
        ("job2", "released", True),
        ("job4", "refunded", False),
        ("job5", "reserved", True),
    ]


def test_a_corrupt_budget_is_one_line_naming_file_and_line(folder, capsys):
    path = folder / f"{DATA}.jsonl"
    with path.open("a") as out:
        out.write("{oops\n")
    assert ppbn_main(["budget", "show", "--budget-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ppbn: error: {path}: line 8 is not a budget entry")
    assert err.count("\n") == 1


def test_adopt_appends_every_charge_and_refuses_a_bad_line(folder, tmp_path, capsys):
    target = tmp_path / "new"
    source = folder / f"{DATA}.jsonl"
    assert ppbn_main(["budget", "adopt", str(source), "--budget-dir", str(target)]) == 0
    assert "adopted 4 charge(s) of data set aaaaaaaaaaaaaaaa" in capsys.readouterr().out
    assert PrivacyBudget(target, 100.0).spent(DATA)[0] == pytest.approx(3.75)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"job_id": "x"}\n')
    assert ppbn_main(["budget", "adopt", str(bad), "--budget-dir", str(target)]) == 2
    assert "bad.jsonl: line 1 is not a budget entry" in capsys.readouterr().err
    assert PrivacyBudget(target, 100.0).spent(DATA)[0] == pytest.approx(3.75)
