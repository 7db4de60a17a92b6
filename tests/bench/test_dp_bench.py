"""``ppbn.bench.dp`` from Python: the trusted-curator twin and the exact network on one
small data set, the curators' MST and AIM, the matrix over several networks, the
classifier's accuracy, the tables for people and the files of ``out``; the ``--networks``
and ``--bif`` flags (the secure job's plumbing and PrivBayes are in
tests/commands/test_bench_dp.py)."""

from __future__ import annotations

import csv
import json

import pytest

from ppbn.bench.constants import DP_METHODS
from ppbn.bench.dp import METHODS, DpSettings, bench_dp, bench_dp_networks
from ppbn.bench.dp_report import TABLE_HEADER, dp_rows
from ppbn.bn.io import bif_text
from ppbn.bn.networks import load_network
from ppbn.cli import main
from ppbn.errors import UserError
from ppbn.lab.dp_utility import largest_blanket

SMALL = DpSettings("cancer", 300, synthetic_records=400, epsilons=(1.0, 5.0), seeds=1)


def test_the_twin_and_the_exact_network(tmp_path) -> None:
    lines: list[str] = []
    settings = DpSettings(**{**SMALL.__dict__, "methods": ("twin", "exact")})
    report = bench_dp(settings, lines.append, tmp_path / "out")
    assert report["methods"] == ["twin", "exact"] and report["secure_seeds"] == 0
    assert report["synthetic_records"] == 400
    assert [(r["method"], r["epsilon"]) for r in report["runs"]] == [
        ("twin", 1.0),
        ("twin", 5.0),
        ("exact", None),
    ]
    assert len(lines) == 3 and lines[0].startswith("  seed 7, epsilon 1, twin: 2-way TVD")
    tables = dp_rows(report)
    assert list(tables) == ["1", "5"]
    assert [row[0] for row in tables["5"]] == ["twin", "exact", "real"]
    assert all(len(row) == len(TABLE_HEADER) for row in tables["5"])
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == report
    assert (tmp_path / "out" / "tvd.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "out" / "runs.csv").read_text().count("\n") == 4  # header + 3 runs


@pytest.mark.parametrize(
    ("methods", "message"),
    [(("twin", "magic"), "methods are a comma list"), ((), "methods are a comma list")],
)
def test_unknown_methods_are_refused(methods: tuple[str, ...], message: str) -> None:
    with pytest.raises(UserError, match=message):
        bench_dp(DpSettings(**{**SMALL.__dict__, "methods": methods}))


def test_every_method_is_one_entry():
    assert tuple(METHODS) == DP_METHODS


def test_the_classifier_and_its_anchor():
    one = {**SMALL.__dict__, "methods": ("twin",), "epsilons": (1.0,)}
    report = bench_dp(DpSettings(**{**one, "seeds": 2}))
    truth = load_network("cancer")
    assert report["target"] == largest_blanket(truth.names, truth.parents)
    assert report["real"]["runs"] == 2 and 0.5 < report["real"]["accuracy"]["median"] <= 1
    assert all(0 <= r["accuracy"] <= 1 for r in report["runs"])
    real_row = dp_rows(report)["1"][-1]
    assert real_row[0] == "real" and real_row[2] == "-" and real_row[5] != "-"
    assert bench_dp(DpSettings(**{**one, "target": "Smoker"}))["target"] == "Smoker"
    with pytest.raises(UserError, match="'Nope' is no variable of cancer"):
        bench_dp(DpSettings(**{**one, "target": "Nope"}))


def test_mst_and_aim_release_models(monkeypatch):
    monkeypatch.setattr("ppbn.bench.dp.AIM_MAX_ROUNDS", 1)
    settings = DpSettings("cancer", 200, epsilons=(2.0,), seeds=1, methods=("mst", "aim"))
    report = bench_dp(settings)
    assert [r["method"] for r in report["runs"]] == ["mst", "aim"]
    for run in report["runs"]:
        assert run["shd"] is None and run["edges"] is None  # a model, no network
        assert 0 <= run["tvd2"] < 0.3 and 0 <= run["accuracy"] <= 1 and run["seconds"] > 0
    rows = dp_rows(report)["2"]
    assert [row[4] for row in rows[:2]] == ["-", "-"]  # the SHD column


def test_the_matrix_over_networks(tmp_path):
    settings = DpSettings(**{**SMALL.__dict__, "epsilons": (5.0,), "methods": ("twin", "exact")})
    lines: list[str] = []
    matrix = bench_dp_networks(settings, ["cancer", "earthquake"], lines.append, tmp_path / "o")
    assert matrix["networks"] == ["cancer", "earthquake"]
    assert [r["network"] for r in matrix["by_network"].values()] == ["cancer", "earthquake"]
    assert lines[0] == "cancer:" and "earthquake:" in lines
    with (tmp_path / "o" / "runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["network"], r["method"]) for r in rows] == [
        ("cancer", "twin"), ("cancer", "exact"), ("earthquake", "twin"), ("earthquake", "exact"),
    ]  # fmt: skip
    assert json.loads((tmp_path / "o" / "report.json").read_text()) == matrix
    for name in ("tvd-cancer.png", "tvd-earthquake.png"):
        assert (tmp_path / "o" / name).read_bytes()[:4] == b"\x89PNG"


def one_error_line(capsys, *argv: str) -> str:
    """The command's one error line (argparse's, or ppbn's own), after its exit status 2."""
    try:
        status = main(["bench", "dp", *argv])
    except SystemExit as exit_:  # argparse's refusal of a flag's value
        status = exit_.code
    assert status == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(lines) == 1
    return lines[0]


def test_flag_errors_are_one_line(capsys, tmp_path):
    assert "--networks: distinct networks of" in one_error_line(
        capsys, "--networks", "asia,nowhere"
    )
    assert "distinct" in one_error_line(capsys, "--networks", "asia,asia")
    bad = tmp_path / "bad.bif"
    bad.write_text("no network here\n")
    assert one_error_line(capsys, "--bif", str(bad)).startswith(f"ppbn: error: {bad}: ")
    missing = tmp_path / "missing.bif"
    assert str(missing) in one_error_line(capsys, "--bif", str(missing))
    assert "--bif: not allowed with argument --network" in one_error_line(
        capsys, "--network", "asia", "--bif", str(bad)
    )


def test_a_users_bif(capsys, tmp_path):
    path = tmp_path / "mine.bif"
    path.write_text(bif_text(load_network("cancer"), "mine"))
    argv = ["bench", "dp", "--bif", str(path), "--records", "300", "--seeds", "1"]
    assert main([*argv, "--epsilons", "5", "--methods", "twin", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["network"] == "mine" and report["runs"][0]["network"] == "mine"


def test_the_marginal_release_secure_and_twin():
    """``ppbn-marginals`` runs the real two-party job (``--dp-release marginals``) between
    two local daemons on the seed's data set, ``marginals-twin`` its curator's twin: both
    release a tree, and the secure one reports its bytes."""
    settings = DpSettings(
        "cancer", 400, epsilons=(5.0,), seeds=2, secure_seeds=1,
        methods=("ppbn-marginals", "marginals-twin"),
    )  # fmt: skip
    report = bench_dp(settings)
    runs = [(r["method"], r["seed"]) for r in report["runs"]]
    assert runs == [("ppbn-marginals", 7), ("marginals-twin", 7), ("marginals-twin", 8)]
    for run in report["runs"]:
        assert run["edges"] == 4  # a tree over cancer's five variables
        assert 0 <= run["tvd2"] < 0.2
    secure = report["runs"][0]
    assert secure["bytes"] > 0 and secure["seconds"] > 0
