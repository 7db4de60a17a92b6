"""``ppbn.bench.scale`` from Python: what is refused before any data or daemon, and the
table for people (one job per worker count runs in tests/commands/test_bench_scale.py)."""

from __future__ import annotations

import pytest

from ppbn.bench.pair_runs import LearnJob
from ppbn.bench.scale import WHOLE_JOB, ScaleSettings, bench_scale, scale_rows
from ppbn.errors import UserError


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (ScaleSettings(workers=(2, 1)), "--workers: distinct worker counts"),
        (ScaleSettings(lanes="all"), "--lanes must be one of job, workers"),
        (ScaleSettings(workers=(1, 65), lanes="workers"), "at most 64 terms lanes"),
        (ScaleSettings(job=LearnJob(key_bits=1024)), "key_bits 1024 is below"),
    ],
)
def test_refused_before_any_work(settings: ScaleSettings, message: str, monkeypatch) -> None:
    def no_work(*_args):
        raise AssertionError("data sampled for refused settings")

    monkeypatch.setattr("ppbn.bench.scale.sample_pair_files", no_work)
    with pytest.raises(UserError, match=message):
        bench_scale(settings)


def test_scale_rows_show_each_phase_and_the_speed_up() -> None:
    report = {
        "baseline_workers": 1,
        "median_seconds": {
            "1": {"tables": 4.0, WHOLE_JOB: 12.0},
            "2": {"tables": 2.0, "parameters": 0.5, WHOLE_JOB: 6.0},
        },
    }
    assert scale_rows(report) == [
        ("tables", "4.00 s (1.0x)", "2.00 s (2.0x)"),
        ("parameters", "-", "0.50 s"),
        (WHOLE_JOB, "12.0 s (1.0x)", "6.00 s (2.0x)"),
    ]
