"""Geometric noise as independent biased bits (ppbn/dp/noise.py): the drawn law is the
geometric law to within the stated deviation, and sampling in the clear follows it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ppbn.dp.noise import discrete_laplace_pmf, geometric_spec


@pytest.mark.parametrize("scale", [0.7, 3.0, 40.0])
def test_the_drawn_law_is_the_geometric_within_its_deviation(scale):
    spec = geometric_spec(scale)
    g = np.arange(0, 2**spec.bits) if spec.bits <= 16 else np.arange(0, 5000)
    q = math.exp(-1 / scale)
    exact = (1 - q) * q**g
    drawn = spec.pmf(g)
    assert 0.5 * np.abs(drawn - exact).sum() <= spec.deviation + 1e-15
    assert spec.tail_mass <= 2.0**-80


def test_a_wrong_threshold_moves_the_law():
    spec = geometric_spec(3.0)
    wrong = type(spec)(
        spec.scale, spec.bits, spec.precision, (spec.thresholds[0] - 2**60, *spec.thresholds[1:])
    )
    g = np.arange(0, 2**spec.bits)
    assert 0.5 * np.abs(wrong.pmf(g) - spec.pmf(g)).sum() > 1e-3


def test_sampling_in_the_clear_is_discrete_laplace_as_a_difference():
    spec = geometric_spec(2.5)
    rng = np.random.default_rng(11)
    noise = spec.sample(rng, 20000) - spec.sample(rng, 20000)
    values = np.arange(-10, 11)
    expected = discrete_laplace_pmf(values, 2.5) * noise.size
    observed = np.array([np.sum(noise == z) for z in values], dtype=float)
    _, p = stats.chisquare(
        np.append(observed, noise.size - observed.sum()),
        np.append(expected, noise.size - expected.sum()),
    )
    assert p > 1e-4


def test_refuses_bad_scales():
    for scale in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="positive"):
            geometric_spec(scale)
