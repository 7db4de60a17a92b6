"""``ppbn budget show``: a daemon's privacy budget for its operator, as text or JSON."""

from __future__ import annotations

import json

import pytest

from ppbn.cli import main as ppbn_main
from ppbn.jobs.policy import PrivacyCost
from ppbn.parties.budget import BUDGET_FILE, PrivacyBudget

DATA, OTHER = "a" * 64, "b" * 64


@pytest.fixture
def out_dir(tmp_path):
    budget = PrivacyBudget(tmp_path / BUDGET_FILE, 100.0)
    budget.charge("job1", "learn", DATA, PrivacyCost(1.5, 1e-9), "operator (via alice)")
    budget.charge("job2", "learn", DATA, PrivacyCost(2.0, 2e-9), "operator")
    budget.charge("job3", "learn", OTHER, PrivacyCost(0.5, 1e-9), "operator")
    return tmp_path


def test_a_missing_budget_means_nothing_spent(tmp_path, capsys):
    assert ppbn_main(["budget", "show", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"privacy budget {tmp_path / BUDGET_FILE}" in out
    assert "nothing spent: the file does not exist" in out


def test_text_names_spent_total_left_and_the_jobs(out_dir, tmp_path, capsys):
    policy = tmp_path / "policy.toml"
    policy.write_text("dp_total_epsilon = 10.0\ndp_max_epsilon = 4.0\n")
    assert ppbn_main(["budget", "show", "--out-dir", str(out_dir), "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "epsilon 10 in all per data set, 4 per job" in out
    assert f"data set {DATA[:16]}: epsilon 3.5 spent of 10, 6.5 left; delta 3e-09 spent" in out
    assert f"data set {OTHER[:16]}: epsilon 0.5 spent of 10, 9.5 left" in out
    assert "job job1  learn  epsilon 1.5  delta 1e-09  by operator (via alice)" in out


def test_json_report(out_dir, capsys):
    path = out_dir / BUDGET_FILE
    assert ppbn_main(["budget", "show", "--budget", str(path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["budget"] == str(path) and report["exists"] is True
    assert report["total_epsilon"] == 100.0 and report["max_epsilon_per_job"] == 10.0
    first = report["datasets"][0]
    assert first["dataset"] == DATA
    assert first["epsilon_spent"] == pytest.approx(3.5)
    assert first["delta_spent"] == pytest.approx(3e-9)
    assert first["epsilon_left"] == pytest.approx(96.5)
    assert [j["job_id"] for j in first["jobs"]] == ["job1", "job2"]
    assert set(first["jobs"][0]) == {"job_id", "kind", "epsilon", "delta", "time", "initiator"}


def test_a_corrupt_budget_is_one_line_naming_file_and_line(out_dir, capsys):
    with (out_dir / BUDGET_FILE).open("a") as out:
        out.write("{oops\n")
    assert ppbn_main(["budget", "show", "--out-dir", str(out_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ppbn: error: {out_dir / BUDGET_FILE}: line 4 is not a budget entry")
    assert err.count("\n") == 1


def test_out_dir_and_budget_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ppbn_main(["budget", "show", "--out-dir", str(tmp_path), "--budget", "x"])
    assert "not allowed with argument" in capsys.readouterr().err
