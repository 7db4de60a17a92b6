"""``ppbn.bench.k2`` (and the pair runs it stands on) from Python: one small learn job
between two daemons, checked against the non-private reference."""

from __future__ import annotations

import pytest
from known_files import TEST_POLICY

from ppbn.bench.k2 import K2Settings, bench_k2, breakdown_rows
from ppbn.bench.pair_runs import LearnJob
from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy


def test_a_small_job_agrees_with_the_reference() -> None:
    settings = K2Settings(
        "asia",
        300,
        job=LearnJob(key_bits=1024),
        policy=LocalPolicy.load(TEST_POLICY),
        check_reference=True,
    )
    report = bench_k2(settings)
    assert report["reference"]["equal"], report["reference"]
    assert report["network"] == "asia" and report["records"] == 300
    assert report["search"] == "k2" and report["overlap_tables"] == "on"
    assert set(report["bytes_sent"]) == {"alice", "bob"}
    assert report["paillier_encryptions"] > 0 and report["ln_evaluations"] > 0
    assert report["fewer_encryptions_than_per_alpha"] >= 1
    shares = sum(row["share_pct"] for row in report["bytes_by_phase_and_kind"])
    assert shares == pytest.approx(100, abs=0.5)


def test_a_dp_release_is_not_checked_against_the_exact_reference() -> None:
    job = LearnJob(dp_params={"dp_epsilon": 1.0})
    with pytest.raises(UserError, match="--check-reference compares with the exact reference"):
        bench_k2(K2Settings("asia", 300, job=job, check_reference=True))


def test_the_job_parameters() -> None:
    hc = {"search": "hc", "tabu": 5}
    job = LearnJob(score="bdeu", ess=4.0, search_params=hc, dp_params={})
    assert job.search == "hc"
    params = job.params()
    assert params["ess"] == 4.0 and params["tabu"] == 5 and params["search"] == "hc"
    assert "ess" not in LearnJob().params() and LearnJob().search == "k2"


def test_breakdown_rows_are_largest_first_with_their_share() -> None:
    counters = {"bytes_sent": 30, "bytes_received": 10, "messages_sent": 1, "messages_received": 2}
    small = {"bytes_sent": 0, "bytes_received": 10, "messages_sent": 0, "messages_received": 1}
    rows = breakdown_rows({"tables": {"paillier.ct": counters}, "ln terms": {"ot.u": small}})
    assert [(r["phase"], r["kind"], r["total"]) for r in rows] == [
        ("tables", "paillier.ct", 40),
        ("ln terms", "ot.u", 10),
    ]
    assert [r["share_pct"] for r in rows] == [80.0, 20.0]
    assert rows[0]["alice_to_bob"] == 30 and rows[0]["messages"] == 3
