"""``learn_files`` and ``run_mgas_example``, the work of ``ppbn perturb learn`` and
``ppbn perturb mgas-example`` called from Python, and the learn report's text."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ppbn.errors import UserError
from ppbn.lab.mgas_example import run_mgas_example
from ppbn.lab.randomized_learning import LearnRequest, learn_files, report_lines


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    n = 2000
    label = rng.choice(["a", "b"], n)
    feature = np.where(rng.random(n) < 0.85, label, np.where(label == "a", "b", "a"))
    path = tmp_path / "data.csv"
    pd.DataFrame({"x": feature, "y": rng.choice(["u", "v"], n), "c": label}).to_csv(
        path, index=False
    )
    return path


def test_learn_files_randomizes_learns_and_writes_the_folder(table, tmp_path):
    out = tmp_path / "model"
    request = LearnRequest(
        "nb",
        str(table),
        {"estimator": None, "alpha": 1.0},
        class_name="c",
        test=str(table),
        theta=0.8,
        randomize_seed="1",
        out=str(out),
    )
    report = learn_files(request)
    assert report["corrected"] and report["randomized_here"] and report["data"] == str(table)
    assert report["accuracy"] > 0.7
    assert json.loads((out / "report.json").read_text())["model"] == report["model"]
    lines = report_lines(report)
    assert lines[0].startswith("nb on 2,000 records (estimated counts)")
    assert any(line.startswith("accuracy on 2,000 test records") for line in lines)


def test_learn_files_needs_one_mechanism(table):
    with pytest.raises(UserError, match="name the mechanism"):
        learn_files(LearnRequest("nb", str(table), {"alpha": 1.0}, class_name="c"))
    with pytest.raises(UserError, match="give one mechanism"):
        learn_files(LearnRequest("nb", str(table), class_name="c", theta=0.8, p=0.2))
    with pytest.raises(UserError, match="give --test"):
        learn_files(LearnRequest("nb", str(table), class_name="c", test_randomized=True))


def test_mgas_example_runs_each_seed(tmp_path):
    report = run_mgas_example(first_seed=4, seeds=2, records=6000, plot_path=None)
    assert [run["seed"] for run in report["runs"]] == [4, 5] and report["plot"] is None
    assert all(run["groups"] >= 2 for run in report["runs"])
    with pytest.raises(UserError, match="--seeds >= 1"):
        run_mgas_example(seeds=0)
