"""Reproduction of Experiment 1 of Ma 2006 (Sec. 5.6.1, Tables 5.1 and 5.2)."""

import numpy as np
import pytest

from ppbn.lab.pram_experiment import (
    EXPERIMENT1_ORDER,
    TABLE_5_2,
    experiment1_network,
    experiment1_scheme,
    run_experiment1,
)
from ppbn.randomized.pram.privacy import gamma_amplification


@pytest.fixture(scope="module")
def result():
    return run_experiment1(records=20000, runs=5, seed="experiment-1")


def test_network_reproduces_figure_5_2():
    net = experiment1_network()
    assert net.parents["E"] == ("L", "T") and net.parents["D"] == ("E", "B")
    assert np.allclose(net.cpts["L"], [[0.3, 0.4, 0.3], [0.7, 0.15, 0.15]])
    for v in EXPERIMENT1_ORDER:
        assert np.allclose(net.cpts[v].sum(axis=1), 1.0), v
        assert net.cpts[v].size == len(TABLE_5_2[v])
    assert net.joint().sum() == pytest.approx(1.0)


def test_scheme_is_table_5_1():
    scheme = experiment1_scheme()
    assert set(scheme.randomized) == set(EXPERIMENT1_ORDER) - {"T", "S", "G"}
    gammas = {v: gamma_amplification(scheme.matrix_for(v)).value for v in scheme.randomized}
    assert gammas["A"] == pytest.approx(3) and gammas["E"] == pytest.approx(4)
    assert gammas["L"] == pytest.approx(4.67, abs=0.005)


def test_every_parameter_within_three_sd_of_table_5_2(result):
    assert len(result.rows) == 64
    outside = [
        (
            r.variable,
            r.config,
            r.state,
            round(r.mean, 4),
            r.paper_mean,
            round(result.difference_sd(r), 4),
        )
        for r in result.rows
        if not result.within_table(r)
    ]
    assert outside == []


def test_estimates_track_the_generating_network(result):
    for r in result.rows:
        parent_count = result.sample_counts[r.variable][r.config].sum()
        sd = np.sqrt(r.truth * (1 - r.truth) / parent_count + r.predicted_sd**2 / result.runs)
        assert abs(r.mean - r.truth) <= 3 * sd + 1e-12, (r.variable, r.config, r.state)


def test_unrandomized_root_has_no_spread_as_in_table_5_2(result):
    s_rows = [r for r in result.rows if r.variable == "S"]
    assert all(r.sd == 0 and r.predicted_sd == 0 for r in s_rows)
    spread = [r for r in result.rows if r.variable in ("A", "T") and r.sd > 0]
    assert len(spread) == 6
