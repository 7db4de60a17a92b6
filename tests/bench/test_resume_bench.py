"""``ppbn.bench.resume`` from Python: a kill outside the job's span is refused before any
data or daemon (daemons killed, restarted and resumed: tests/parties/test_daemon_restart.py)."""

from __future__ import annotations

import tempfile

import pytest

from ppbn.bench.resume import ResumeSettings, bench_resume, resumed_equal
from ppbn.errors import UserError


@pytest.mark.parametrize("kill_at", [0.0, 0.99])
def test_a_kill_outside_the_run_is_refused(kill_at: float, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(UserError, match="--kill-at must be between 0.05 and 0.95"):
        bench_resume(ResumeSettings("asia", 300, kill_at=kill_at))
    assert not list(tmp_path.iterdir())  # no work folder was made


def test_resumed_equal_needs_the_same_edges_and_cpts() -> None:
    assert resumed_equal({"same_edges_and_order": True, "max_abs_cpt_difference": 0.0})
    assert not resumed_equal({"same_edges_and_order": False, "max_abs_cpt_difference": 0.0})
    assert not resumed_equal({"same_edges_and_order": True, "max_abs_cpt_difference": 1e-6})
