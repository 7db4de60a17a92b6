"""``ppbn bench dp`` (ppbn/commands/bench_dp.py, ppbn/bench/dp.py): tiny runs of the twin,
the exact network, the secure job's plumbing (with a stand-in for the job) and PrivBayes."""

from __future__ import annotations

import csv
import json
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from ppbn.cli import main
from ppbn.commands.bench_dp import DP_SCORES, epsilon_list, method_list
from ppbn.lab.privbayes_peer import MISSING

TINY = ["bench", "dp", "--network", "cancer", "--records", "300", "--seeds", "2"]


def run_json(capsys, *extra: str) -> dict:
    assert main([*TINY, *extra, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_twin_and_exact(capsys, tmp_path):
    out = tmp_path / "out"
    report = run_json(
        capsys, "--epsilons", "1,5", "--methods", "twin,exact", "--synthetic-records", "400",
        "--out", str(out),
    )  # fmt: skip
    assert report["seeds"] == [7, 8] and report["epsilons"] == [1.0, 5.0]
    runs = report["runs"]
    assert len([r for r in runs if r["method"] == "twin"]) == 4  # 2 epsilons x 2 seeds
    assert len([r for r in runs if r["method"] == "exact"]) == 2  # once per seed
    assert all(r["epsilon"] is None for r in runs if r["method"] == "exact")
    for r in runs:
        assert 0 <= r["tvd2"] <= 1 and 0 <= r["tvd3"] <= 1 and r["shd"] >= 0
        assert r["bytes"] is None
    assert set(report["by_epsilon"]) == {"1", "5"}
    twin = report["by_epsilon"]["5"]["twin"]
    assert twin["runs"] == 2 and twin["tvd2"]["q1"] <= twin["tvd2"]["median"] <= twin["tvd2"]["q3"]
    assert twin["mb"] is None
    assert report["exact"]["tvd2"]["median"] < report["by_epsilon"]["1"]["twin"]["tvd2"]["median"]
    with (out / "runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 and rows[0]["method"] == "twin"
    assert json.loads((out / "report.json").read_text())["runs"] == runs
    assert (out / "tvd.png").read_bytes()[:4] == b"\x89PNG"


def test_the_table_for_people(capsys):
    assert main([*TINY, "--seeds", "1", "--epsilons", "2", "--methods", "twin,exact"]) == 0
    text = capsys.readouterr().out
    assert "seed 7, epsilon 2, twin: 2-way TVD" in text  # a progress line
    assert "epsilon 2" in text and "2-way TVD" in text and "exact" in text


def test_the_secure_job_runs_for_the_secure_seeds_only(capsys, monkeypatch):
    """The ppbn method runs the secure DP job (``secure_release``) on the seed's data set
    and reads the released network, the job's seconds and both parties' bytes (the job
    stood in for)."""
    from ppbn.bench.pair_runs import LearnRun
    from ppbn.bn.io import network_json
    from ppbn.bn.networks import load_network
    from ppbn.bn.schema import Schema

    calls = []

    def fake(data, max_parents, score, epsilon, release):
        calls.append(
            {"max_parents": max_parents, "score": score, "epsilon": epsilon, "release": release}
        )
        schema = Schema.load(str(data / "schema.json"))
        net = load_network("cancer")  # any network over the schema's variables will do
        assert net.names == schema.names
        document = network_json(net, net.names, net.edges(), score, 0.0)
        outcome = SimpleNamespace(
            stats={"bytes_sent": 3_000_000}, peer_stats={"bytes_sent": 1_000_000}, error=""
        )
        return LearnRun(2.5, document, outcome)

    monkeypatch.setattr("ppbn.bench.dp.secure_release", fake)
    report = run_json(capsys, "--epsilons", "0.5,2", "--methods", "ppbn", "--secure-seeds", "1")
    assert [c["epsilon"] for c in calls] == [0.5, 2.0]
    assert all(c["max_parents"] == 2 and c["score"] == "exact" for c in calls)
    assert all(c["release"] == "network" for c in calls)
    runs = report["runs"]
    assert [r["seed"] for r in runs] == [7, 7]  # seed 8 is not a secure seed
    assert all(r["bytes"] == 4_000_000 and r["seconds"] == 2.5 for r in runs)
    assert all(r["shd"] == 0 for r in runs)  # the true network released
    assert report["by_epsilon"]["2"]["ppbn"]["mb"]["median"] == 4.0


def test_option_parsing():
    assert epsilon_list("2,0.1, 1") == (0.1, 1.0, 2.0)
    assert method_list("exact,twin") == ("twin", "exact")
    for bad in ("", "0", "1,1", "x", "-1"):
        with pytest.raises(Exception, match="epsilon|number"):
            epsilon_list(bad)
    with pytest.raises(Exception, match="methods"):
        method_list("twin,magic")
    assert set(DP_SCORES) == {"exact", "bic"}


def test_dp_scores_are_the_plans():
    from ppbn.dp.constants import DP_SCORES as PLAN_SCORES

    assert tuple(DP_SCORES) == tuple(PLAN_SCORES)


def test_an_epsilon_the_plan_refuses_is_one_line(capsys):
    assert main([*TINY, "--epsilons", "50", "--methods", "twin"]) == 2
    assert "--epsilons 50: epsilon must lie" in capsys.readouterr().err


def test_privbayes_missing_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "DataSynthesizer", None)  # import fails
    assert main([*TINY, "--methods", "privbayes,twin"]) == 2
    assert capsys.readouterr().err.strip() == f"ppbn: error: {MISSING}"


def test_privbayes(capsys):
    pytest.importorskip("DataSynthesizer")
    report = run_json(capsys, "--seeds", "1", "--epsilons", "5", "--methods", "privbayes")
    (run,) = report["runs"]
    assert run["method"] == "privbayes" and 0 <= run["tvd2"] < 0.5 and run["seconds"] > 0
    assert np.isfinite(run["tvd3"])
