"""The discrete Gaussian draw (``dp.gaussian``): its thresholds invert the exact law within
its stated deviation, its samples pass a chi-square test against the exact law (and the
same test rejects a wrong sigma), and the plans that take it add up under zCDP."""

from __future__ import annotations

import numpy as np
import pytest
from gaussian_law import gaussian_chisquare_p

from ppbn.dp.accounting import GAUSSIAN_MOST_THRESHOLDS, gaussian_affordable, opendp_epsilon
from ppbn.dp.count_noise import draw_noise, noise_stddev
from ppbn.dp.gaussian import discrete_gaussian_pmf, gaussian_spec
from ppbn.dp.noise import geometric_spec


@pytest.mark.parametrize("sigma", [0.7, 3.0, 41.5])
def test_the_drawn_law_is_the_exact_one_within_its_deviation(sigma):
    spec = gaussian_spec(sigma)
    assert list(spec.thresholds) == sorted(spec.thresholds)
    assert spec.tail_mass <= 2.0**-80 and spec.deviation < 1e-15
    values = np.arange(-spec.support - 3, spec.support + 4)
    drawn, exact = spec.pmf(values), discrete_gaussian_pmf(values, sigma)
    assert drawn.sum() == pytest.approx(1.0, abs=1e-12)
    assert 0.5 * np.abs(drawn - exact).sum() <= spec.deviation + 1e-12
    assert spec.stddev == pytest.approx(np.sqrt((values**2 * exact).sum()), rel=1e-9)
    # the support reaches no further than the tail needs: P(|X| > m) <= exp(-m^2 / 2 sigma^2)
    assert spec.support <= sigma * np.sqrt(2 * np.log(2) * 80) + 2


def test_a_draw_counts_the_thresholds_its_word_reaches_and_takes_the_top_bit_as_sign():
    spec = gaussian_spec(2.0, precision=16, tail=2.0**-16)
    d = spec.thresholds
    top = 1 << spec.precision
    words = np.array([0, d[0] - 1, d[0], d[1], top - 1, top | d[0], top | (top - 1)], dtype=object)
    got = spec.draw(words).tolist()
    assert got == [0, 0, 1, 2, spec.support, -1, -spec.support]


def test_samples_pass_against_the_exact_law_and_a_wrong_sigma_fails():
    spec = gaussian_spec(6.0)
    draws = spec.sample(np.random.default_rng(5), 40000)
    assert draws.dtype == np.int64
    assert gaussian_chisquare_p(draws, 6.0) > 1e-4
    assert gaussian_chisquare_p(draws, 6.6) < 1e-6  # the test can fail
    assert draws.std() == pytest.approx(spec.stddev, rel=0.03)


def test_the_count_noise_of_either_family():
    gaussian, laplace = gaussian_spec(10.0), geometric_spec(10.0)
    assert noise_stddev(gaussian) == pytest.approx(10.0, rel=1e-6)
    q = np.exp(-0.1)
    assert noise_stddev(laplace) == pytest.approx(np.sqrt(2 * q) / (1 - q))
    # at the same scale the Gaussian has about half the Laplace's variance
    assert noise_stddev(laplace) ** 2 > 1.9 * noise_stddev(gaussian) ** 2
    rng = np.random.default_rng(2)
    assert draw_noise(gaussian, rng, 5).shape == (5,) == draw_noise(laplace, rng, 5).shape


def test_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="positive"):
        gaussian_spec(0.0)
    with pytest.raises(ValueError, match="precision"):
        gaussian_spec(1.0, precision=4)
    assert gaussian_affordable(100.0) and not gaussian_affordable(GAUSSIAN_MOST_THRESHOLDS / 10)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_a_gaussian_plan_adds_up_under_zcdp_and_opendp_agrees(epsilon):
    from ppbn.dp.accounting import plan

    cards = [2, 3, 2, 4, 2, 3, 2, 2]
    p = plan(
        epsilon,
        n_records=10000,
        cardinalities=cards,
        max_parents=1,
        mode="bic",
        score_frac=0,
        release="adaptive",
    )
    assert p.accounting == "zcdp" and p.count_family == "gaussian"
    assert p.as_dict()["count_noise"] == "discrete Gaussian"
    assert p.count_noise.sigma == p.count_scale and p.one_way_noise.sigma == p.one_way_scale
    # rho: the choices, then 1 / sigma^2 a table (two cells, 1 / (2 sigma^2) each)
    spent = (
        p.decisions * p.decision_epsilon**2 / 2
        + len(cards) / p.one_way_scale**2
        + p.decisions / p.count_scale**2
    )
    assert spent == pytest.approx(p.rho)
    assert opendp_epsilon(p) <= epsilon * (1 + 1e-9)
    assert opendp_epsilon(p) == pytest.approx(epsilon, rel=1e-6)
