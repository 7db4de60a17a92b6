"""A released count's noise, of either family: discrete Laplace as two geometric draws
(``dp.noise``) or one discrete Gaussian draw (``dp.gaussian``); the plan chooses
(``DPPlan.count_family``)."""

from __future__ import annotations

import math

import numpy as np

from ppbn.dp.gaussian import GaussianSpec
from ppbn.dp.noise import GeometricSpec

CountNoise = GeometricSpec | GaussianSpec


def noise_stddev(spec: CountNoise) -> float:
    """The standard deviation of a count's noise: G1 - G2 with q = exp(-1 / scale),
    sqrt(2 q) / (1 - q); or the discrete Gaussian's."""
    if isinstance(spec, GaussianSpec):
        return spec.stddev
    q = spec.q
    return float(math.sqrt(2.0 * q) / (1.0 - q))


def draw_noise(spec: CountNoise, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` counts' noise in the clear (the twins), as the circuit draws it: two
    geometric draws a count (all the first ones, then all the second ones) or one
    Gaussian draw."""
    if isinstance(spec, GaussianSpec):
        return spec.sample(rng, size)
    g = np.array([int(x) for x in spec.sample(rng, 2 * size)], dtype=np.int64).reshape(2, -1)
    return g[0] - g[1]
