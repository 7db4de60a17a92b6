"""``ppbn.bench.dp`` from Python: the trusted-curator twin and the exact network on one
small data set, the tables for people and the files of ``out`` (the secure job's
plumbing and PrivBayes are in tests/commands/test_bench_dp.py)."""

from __future__ import annotations

import json

import pytest

from ppbn.bench.dp import TABLE_HEADER, DpSettings, bench_dp, dp_rows
from ppbn.errors import UserError

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
    assert [row[0] for row in tables["5"]] == ["twin", "exact"]
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
