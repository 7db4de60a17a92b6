"""Noise distributions of Wu's additive perturbation: cdf, characteristic function, sampling."""

import math

import numpy as np
import pytest

from ppbn.randomized.perturb.noise import (
    INVERSE_SQUARE_C,
    ZETA2,
    ZETA3,
    DiscreteNormal,
    Gaussian,
    Geometric,
    InverseCube,
    InverseSquare,
    Lattice,
    Poisson,
    Uniform,
    noise_from_dict,
)
from ppbn.randomized.pram.operators import RandomizationError, RandomSource

CONTINUOUS = [Gaussian(2.0, 1.0), Uniform(-1.0, 3.0)]
LATTICE = [
    DiscreteNormal(0.5, 1.5),
    Poisson(0.25, 3.0),
    InverseSquare(1.0),
    InverseCube(0.5),
    Geometric(1.0, 3.0),
]
T = np.array([0.0, 0.3, 1.1, 2.5])


@pytest.mark.parametrize("noise", CONTINUOUS, ids=lambda n: n.kind)
def test_continuous_cdf_and_char_match_numeric_integrals_of_the_pdf(noise):
    lo, hi = noise.quantile(1e-12) - 1, noise.quantile(1 - 1e-12) + 1
    grid = np.linspace(lo, hi, 400_001)
    step = grid[1] - grid[0]
    pdf = noise.pdf(grid)
    cdf = np.cumsum(pdf) * step
    for t in (-0.5, 0.7, 2.0):
        assert noise.cdf(np.array([t]))[0] == pytest.approx(cdf[np.searchsorted(grid, t)], abs=2e-4)
    brute = np.array([np.sum(pdf * np.exp(1j * t * grid)) * step for t in T])
    assert np.allclose(noise.char(T), brute, atol=2e-4)


@pytest.mark.parametrize("noise", LATTICE, ids=lambda n: n.kind)
def test_lattice_cdf_pmf_and_char_agree_with_direct_sums(noise):
    ks = np.arange(-3000, 3001) if noise.kind == "inverse_square" else np.arange(-200, 201)
    pmf = noise.pmf(ks)
    assert np.all(pmf >= 0)
    # mass outside the window: 2c/3000 (inverse_square), 1/(2 zeta(3) 200^2) (inverse_cube)
    tail = {"inverse_square": 2 * INVERSE_SQUARE_C / 3000, "inverse_cube": 1.1e-5}.get(
        noise.kind, 1e-12
    )
    assert pmf.sum() == pytest.approx(1.0, abs=tail)
    # cdf at a real t is the mass of the atoms gamma*k <= t
    for t in (-1.3, 0.0, 0.49, 2.0):
        assert noise.cdf(np.array([t]))[0] == pytest.approx(
            pmf[noise.gamma * ks <= t].sum()
            + (noise.cdf(np.array([ks[0] * noise.gamma - 1e-9]))[0]),
            abs=1e-9,
        )
    brute = np.array([np.sum(pmf * np.exp(1j * t * noise.gamma * ks)) for t in T])
    assert np.allclose(noise.char(T), brute, atol=tail + noise.char_error + 1e-9)


def test_closed_forms_of_wus_lattice_noises():
    # inverse_square at t = pi/gamma: c (1 + 2 sum_j (-1)^j/(j+1)^2) = c (pi^2/6 - 1)
    noise = InverseSquare(0.5)
    assert noise.char(np.array([math.pi / 0.5]))[0].real == pytest.approx(
        INVERSE_SQUARE_C * (math.pi**2 / 6 - 1), abs=noise.char_error
    )
    assert INVERSE_SQUARE_C * (math.pi**2 / 3 - 1) == pytest.approx(1.0)  # the pmf sums to 1
    assert InverseCube(1.0).mean == pytest.approx(ZETA2 / ZETA3)
    assert InverseCube(1.0).mean == pytest.approx(1.368, abs=5e-4)  # Wu Sec. 4.2: "about 1.368"
    assert Geometric(2.0, 3.0).mean == pytest.approx(2.0 / 2.0)
    assert Poisson(0.5, 4.0).mean == pytest.approx(2.0)
    assert InverseSquare(1.0).mean is None and InverseSquare(1.0).centre == 0.0


@pytest.mark.parametrize("noise", CONTINUOUS + LATTICE, ids=lambda n: n.kind)
def test_sampling_follows_the_cdf(noise):
    n = 40_000
    draws = noise.sample(n, RandomSource.from_seed(f"noise/{noise.kind}"))
    if isinstance(noise, Lattice):
        assert np.allclose(draws / noise.gamma, np.round(draws / noise.gamma))
    points = np.array([noise.quantile(q) for q in (0.1, 0.3, 0.5, 0.7, 0.9)])
    empirical = (draws[:, None] <= points[None, :]).mean(axis=0)
    # Dvoretzky-Kiefer-Wolfowitz: P(sup |F_n - F| > 0.015) <= 2 exp(-2 n 0.015^2) ~ 3e-8
    assert np.max(np.abs(empirical - noise.cdf(points))) < 0.015
    if noise.mean is not None and noise.kind != "inverse_cube":  # inverse_cube: infinite variance
        sd = float(np.std(draws))
        assert abs(draws.mean() - noise.mean) < 5 * sd / math.sqrt(n)


def test_sampling_is_reproducible_from_the_seed_and_differs_between_seeds():
    a = Gaussian(1.0).sample(10, RandomSource.from_seed(1))
    assert np.array_equal(a, Gaussian(1.0).sample(10, RandomSource.from_seed(1)))
    assert not np.array_equal(a, Gaussian(1.0).sample(10, RandomSource.from_seed(2)))


def test_uniform_char_has_its_zeros_at_multiples_of_two_pi_over_the_width():
    noise = Uniform(0.0, 20.0)
    assert abs(noise.char(np.array([2 * math.pi / 20 * 3]))[0]) < 1e-15
    assert abs(noise.char(np.array([2 * math.pi / 20 * 2.5]))[0]) > 0.01


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "cauchy"}, "noise kind 'cauchy' is not one of"),
        ({"kind": "gaussian"}, "noise gaussian needs 'sigma'"),
        ({"kind": "gaussian", "sigma": 1, "sd": 2}, "unknown field 'sd'"),
        ({"kind": "gaussian", "sigma": 0}, "gaussian sigma must be a positive number"),
        ({"kind": "uniform", "low": 2, "high": 1}, "uniform needs low < high"),
        ({"kind": "geometric", "gamma": 1, "a": 1}, "geometric a must be greater than 1"),
        ({"kind": "poisson", "gamma": 1, "lam": "x"}, "poisson lam must be a number"),
        ("gaussian", "noise must be an object"),
    ],
)
def test_bad_noise_entries_are_one_line_errors(entry, message):
    with pytest.raises(RandomizationError, match=message) as err:
        noise_from_dict(entry)
    assert "\n" not in str(err.value)


def test_noise_from_dict_builds_every_kind_with_defaults():
    assert noise_from_dict({"kind": "gaussian", "sigma": 2}) == Gaussian(2.0, 0.0)
    assert noise_from_dict({"kind": "discrete_normal", "gamma": 0.5}) == DiscreteNormal(0.5, 1.0)
    assert (
        noise_from_dict({"kind": "inverse_cube", "gamma": 1}).describe() == "inverse_cube(gamma=1)"
    )
