"""``ppbn.bench.ot`` from Python: a thousand OTs between two threads."""

from __future__ import annotations

import pytest

from ppbn.bench.ot import OtSettings, bench_ot
from ppbn.errors import UserError


def test_bench_ot_in_threads() -> None:
    report = bench_ot(OtSettings(count=1000, repeats=1, parties="threads", ot_k=8))
    assert report["parties"] == "threads" and report["count"] == 1000
    assert report["ot_per_s"] > 0 and report["correlated_ot_per_s"] > 0
    assert 34 <= report["bytes_per_ot"] < 35  # u: 2 bytes (k = 8), y: 32
    assert set(report["kernels"]) == {"alice", "bob"}


def test_bench_ot_refuses_an_unknown_placement() -> None:
    with pytest.raises(UserError, match="--parties"):
        bench_ot(OtSettings(count=10, parties="cluster"))


def test_bench_ot_at_the_malicious_level_runs_the_check() -> None:
    report = bench_ot(
        OtSettings(count=1000, repeats=1, parties="threads", ot_k=4, security="malicious")
    )
    assert report["security"] == "malicious" and report["ot_per_s"] > 0
    # u: 4 bytes (k = 4) and the padding's 256 more OTs; y: 32; the challenge and answer
    assert 36 + 4 * 256 / 1000 < report["bytes_per_ot"] < 37.2
    with pytest.raises(UserError, match="--security"):
        bench_ot(OtSettings(count=10, security="paranoid"))
