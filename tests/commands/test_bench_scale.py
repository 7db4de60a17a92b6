"""``ppbn bench scale`` (ppbn/bench/scale.py): every worker count runs the same job and learns the same network,
and a bad worker list is refused before any work. A measurement: no time is checked."""

from __future__ import annotations

import json

import pytest
from known_files import TEST_POLICY

from ppbn.bench.scale import scale_policy
from ppbn.cli import main
from ppbn.jobs.policy import LocalPolicy
from ppbn.protocols.ot import OT_INLINE_BELOW
from ppbn.protocols.yao import GC_INLINE_BELOW

QUICK = ["bench", "scale", "--records", "300", "--key-bits", "1024"]
QUICK += ["--policy", str(TEST_POLICY), "--format", "json"]


def test_each_worker_count_runs_every_phase_and_learns_the_same(capsys):
    """With ``--lanes workers`` the job at W workers also runs W terms lanes per party."""
    code = main([*QUICK, "--workers", "2,1", "--lanes", "workers"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["workers"] == [1, 2]
    assert [r["workers"] for r in report["runs"]] == [1, 2]
    assert [r["term_lanes"] for r in report["runs"]] == [1, 2]
    for run in report["runs"]:
        assert set(run["phases_s"]) == {"alice", "bob"}
        reported = {p for phases in run["phases_s"].values() for p in phases}
        assert {"tables", "ln and x ln x (shares)", "parameters"} <= reported
        assert reported | {"whole job"} == set(report["median_seconds"][str(run["workers"])])
        assert run["same_result_as_baseline"]
    assert report["same_results"]
    assert report["cores"] >= 1


def test_more_lanes_than_a_job_may_have_is_one_line(capsys, monkeypatch):
    def no_work(*_args):
        raise AssertionError("data sampled for refused --lanes")

    monkeypatch.setattr("ppbn.bench.scale.sample_pair_files", no_work)
    assert main([*QUICK, "--workers", "1,65", "--lanes", "workers"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ppbn: error: --lanes workers: at most 64 terms lanes, so W <= that"]


@pytest.mark.parametrize("workers", ["0", "a", "", "1,1"])
def test_a_bad_worker_list_is_one_line_before_any_work(workers, capsys, monkeypatch):
    def no_work(*_args):
        raise AssertionError("data sampled for a refused --workers")

    monkeypatch.setattr("ppbn.bench.scale.sample_pair_files", no_work)
    with pytest.raises(SystemExit) as exited:
        main([*QUICK, "--workers", workers])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = captured.err.strip().splitlines()[-1]
    assert line.startswith("ppbn bench scale: error: argument --workers: ")


def test_one_worker_is_inline_and_more_send_garbling_and_ot_to_the_pool():
    base = LocalPolicy()
    one = scale_policy(base, "local", 1)
    assert (one.executor, one.workers) == ("inline", 1)
    assert (one.gc_inline_below, one.ot_inline_below) == (GC_INLINE_BELOW, OT_INLINE_BELOW)
    four = scale_policy(base, "ray", 4)
    assert (four.executor, four.workers, four.ray_address) == ("ray", 4, None)
    assert (four.gc_inline_below, four.ot_inline_below) == (0, 0)
    assert four.max_term_lanes == base.max_term_lanes
    assert scale_policy(base, "local", 2, 32).max_term_lanes == 32  # room for the job's lanes
