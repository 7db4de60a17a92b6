"""Wu's estimators for additive perturbation: EM, binned EM = Richardson-Lucy, Fourier, one-step.

Stated tolerances (docs/user-guide.md, "Perturbation"), each with the measured value it guards:
- EM vs binned EM (8 z-bins per bin, 100 iterations, 20,000 values): 1/2 L1 <= 0.01
  (measured 0.0032 gaussian, 0.0053 uniform), and the gap shrinks as the z-bins get finer.
- Richardson-Lucy vs binned EM: equal to 1e-12 (measured ~1e-15).
- Fourier (two triangles, gaussian sigma 0.05, 50,000 values, 6 harmonics):
  integral |f - f_hat| <= 0.08 (measured 0.060) and within 0.02 of the truncation floor
  (0.056); without deconvolution it is 0.123.
- One-step protocol: the mean estimate over 400 repetitions within 4 standard errors.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.randomized.perturb.additive import (
    OneStepServer,
    binned_em,
    default_range,
    em_individual,
    fourier_estimate,
    histogram,
    information_loss,
    interval_kernel,
    one_step_reports,
    quantized_problem,
    richardson_lucy,
    richardson_lucy_reconstruction,
    uniform_edges,
    z_histogram_edges,
)
from ppbn.randomized.perturb.noise import DiscreteNormal, Gaussian, Poisson, Uniform
from ppbn.randomized.pram.operators import RandomizationError, RandomSource


def two_triangles(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    left = rng.triangular(0.1, 0.3, 0.5, n)
    return np.where(rng.random(n) < 0.5, left, left + 0.4)


def two_triangle_density(x: np.ndarray) -> np.ndarray:
    tent = np.clip(0.2 - np.abs(np.mod(x - 0.1, 0.4) - 0.2), 0, None) / 0.04
    return np.where((x >= 0.1) & (x <= 0.9), 0.5 * tent, 0.0)


def simplex_grid(k: int, step: float) -> np.ndarray:
    m = round(1 / step)
    points = [c for c in itertools.product(range(m + 1), repeat=k - 1) if sum(c) <= m]
    grid = np.array([[*c, m - sum(c)] for c in points], dtype=float) / m
    return grid


# -- small inputs against brute force and closed forms ------------------------------------------


def test_interval_kernel_is_the_integral_of_the_noise_density_over_the_bin():
    noise = Gaussian(0.3)
    edges = np.array([0.0, 0.5, 1.25])
    points = np.array([-0.2, 0.4, 1.0, 2.0])
    xs = np.linspace(0, 1.25, 250_001)
    for j, t in enumerate(points):
        for i in range(2):
            inside = (xs >= edges[i]) & (xs < edges[i + 1])
            brute = np.trapezoid(noise.pdf(t - xs) * inside, xs) / (edges[i + 1] - edges[i])
            assert interval_kernel(noise, points, edges)[j, i] == pytest.approx(brute, abs=1e-4)


def _mle_checks(kernel: np.ndarray, weights: np.ndarray, pi: np.ndarray) -> None:
    """pi maximizes sum_m w_m log (K pi)_m on the simplex: better than every point of a grid,
    and the Kuhn-Tucker conditions g_i = sum_m w_m K_mi / (K pi)_m <= 1, = 1 where pi_i > 0."""
    grid = simplex_grid(kernel.shape[1], 0.005)
    with np.errstate(divide="ignore"):
        best = np.max(np.log(grid @ kernel.T) @ weights)
    assert float(np.log(kernel @ pi) @ weights) >= best - 1e-9
    g = kernel.T @ (weights / (kernel @ pi))
    assert np.all(g <= 1 + 1e-6)
    assert np.allclose(g[pi > 1e-6], 1.0, atol=1e-6)


def test_em_on_individual_values_reaches_the_brute_force_maximum_likelihood():
    noise = Gaussian(0.3)
    edges = np.array([0.0, 0.5, 1.0, 1.5])
    z = np.array([0.1, 0.35, 0.4, 1.2, 1.3, -0.2, 0.9])
    em = em_individual(z, noise, edges, max_iter=100_000, tol=1e-13)
    assert em.converged and em.probabilities.sum() == pytest.approx(1.0)
    _mle_checks(interval_kernel(noise, z, edges), np.full(len(z), 1 / len(z)), em.probabilities)


def test_binned_em_reaches_the_maximum_of_the_binned_likelihood():
    noise = Uniform(-0.4, 0.4)
    edges = np.array([0.0, 0.5, 1.0, 1.5])
    z = np.array([0.1, 0.35, 0.4, 1.2, 1.3, -0.2, 0.9, 1.7])
    z_edges = np.linspace(-0.4, 1.9, 24)
    em = binned_em(z, noise, edges, z_edges=z_edges, max_iter=100_000, tol=1e-13)
    counts, psf = quantized_problem(z, noise, edges, z_edges)
    used = counts > 0
    _mle_checks(psf[used], counts[used] / counts.sum(), em.probabilities)
    # the PSF is column-stochastic (with its "outside the histogram" row)
    assert np.allclose(psf.sum(axis=0), 1.0, atol=1e-15)


def test_richardson_lucy_one_step_and_exact_data_fixed_point():
    h = np.array([[0.8, 0.3], [0.2, 0.7]])
    d = np.array([3.0, 1.0])
    u, _, _ = richardson_lucy(d, h, np.array([2.0, 2.0]), max_iter=1, tol=0)
    ratio = d / (h @ [2.0, 2.0])  # [3/2.2, 1/1.8]
    assert np.allclose(
        u, [2 * (0.8 * ratio[0] + 0.2 * ratio[1]), 2 * (0.3 * ratio[0] + 0.7 * ratio[1])]
    )
    # with data in the range of H and a positive solution, RL converges to H^{-1} d, also for
    # columns that do not sum to 1
    h3 = np.array([[0.6, 0.1, 0.3], [0.3, 0.5, 0.0], [0.2, 0.3, 0.9]])
    truth = np.array([5.0, 2.0, 3.0])
    u, iterations, converged = richardson_lucy(h3 @ truth, h3, max_iter=100_000, tol=1e-14)
    assert converged and np.allclose(u, truth, rtol=1e-6)


def test_fourier_coefficients_equal_wus_real_two_by_two_form():
    """Wu Sec. 3.1: (a_i, b_i) = 2 A_i^{-1} (E sin 2 pi i Z, E cos 2 pi i Z) on [0, 1]."""
    noise = Gaussian(0.08, 0.05)
    z = np.array([0.12, 0.3, 0.55, 0.61, 0.9, 1.05, 0.47])
    est = fourier_estimate(z, noise, 0.0, 1.0, harmonics=4, max_gain=1e9)
    x = np.linspace(0.01, 0.99, 37)
    wu = np.ones_like(x)
    for i in range(1, 5):
        phi = noise.char(np.array([2 * math.pi * i]))[0]
        a_matrix = np.array([[phi.real, phi.imag], [-phi.imag, phi.real]])
        moments = [np.mean(np.sin(2 * math.pi * i * z)), np.mean(np.cos(2 * math.pi * i * z))]
        a_i, b_i = 2 * np.linalg.solve(a_matrix, moments)
        wu += a_i * np.sin(2 * math.pi * i * x) + b_i * np.cos(2 * math.pi * i * x)
    assert np.allclose(est.raw_density(x), wu, atol=1e-12)


def test_fourier_caps_the_inverse_gain_and_clips_at_zero():
    noise = Gaussian(0.1)
    z = two_triangles(2000, 4) + noise.sample(2000, RandomSource.from_seed(4))
    est = fourier_estimate(z, noise, 0.0, 1.0, harmonics=8, max_gain=5.0)
    gains = 1 / np.abs(noise.char(2 * math.pi * np.arange(1, 9)))
    assert est.capped == tuple(int(k) for k in np.flatnonzero(gains > 5.0) + 1)
    grid = np.linspace(0, 1, 2001)
    assert est.density(grid).min() >= 0
    assert np.trapezoid(est.density(grid), grid) == pytest.approx(1.0, abs=1e-3)
    assert est.bin_probabilities(uniform_edges(0, 1, 10)).sum() == pytest.approx(1.0)


def test_one_step_estimate_closed_form_and_clipping():
    server = OneStepServer(3, Poisson(1.0, 2.0))  # mean 2
    server.add(np.array([[3.0, 2.0, 1.0], [2.0, 4.0, 1.0]]))
    assert np.allclose(server.estimate(clip=False), [0.5, 1.0, -1.0])
    assert np.allclose(server.estimate(), [0.5, 1.0, 0.0])


def test_information_loss_is_half_the_l1_distance():
    assert information_loss([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == pytest.approx(0.5)
    assert information_loss([0.2, 0.8], [0.2, 0.8]) == 0.0
    with pytest.raises(RandomizationError, match="same bins"):
        information_loss([1.0], [0.5, 0.5])


def test_default_range_from_the_data_and_the_noise_quantiles():
    x = np.random.default_rng(0).uniform(5, 10, 5000)
    noise = Uniform(0.0, 2.0)
    lo, hi = default_range(x + noise.sample(5000, RandomSource.from_seed(0)), noise)
    # narrower than [5, 10] where Z is thin near its ends (its density starts as a ramp)
    assert 5.0 <= lo <= 5.15 and 9.85 <= hi <= 10.0
    with pytest.raises(RandomizationError, match="give the range"):
        default_range(np.array([0.0, 0.1]), Uniform(0.0, 20.0))


# -- agreement between the estimators --------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(30, 400), st.floats(0.02, 0.3), st.integers(2, 12))
def test_richardson_lucy_equals_binned_em(seed, n, sigma, k):
    noise = Gaussian(sigma)
    z = np.random.default_rng(seed).uniform(0, 1, n) + noise.sample(n, RandomSource.from_seed(seed))
    edges = uniform_edges(0, 1, k)
    bem = binned_em(z, noise, edges, max_iter=60, tol=0)
    rl = richardson_lucy_reconstruction(z, noise, edges, max_iter=60, tol=0)
    assert np.max(np.abs(rl.probabilities - bem.probabilities)) <= 1e-12


@pytest.mark.parametrize("noise", [Gaussian(0.05), Uniform(-0.1, 0.1)], ids=lambda n: n.kind)
def test_em_and_binned_em_agree_and_converge_together_as_the_z_bins_shrink(noise):
    x = two_triangles(20_000, 0)
    z = x + noise.sample(len(x), RandomSource.from_seed(0))
    edges = uniform_edges(0, 1, 20)
    em = em_individual(z, noise, edges, max_iter=100, tol=0)
    gaps = {}
    for per_bin in (2, 8, 32):
        z_edges = z_histogram_edges(z, edges, per_bin)
        gaps[per_bin] = information_loss(
            em.probabilities,
            binned_em(z, noise, edges, z_edges=z_edges, max_iter=100, tol=0).probabilities,
        )
    assert gaps[8] <= 0.01  # the stated tolerance for the default z-bins
    assert gaps[32] < gaps[2] / 5
    # EM deconvolves: closer to the histogram of x than the histogram of z is
    h = histogram(x, edges)
    assert information_loss(h, em.probabilities) < 0.75 * information_loss(h, histogram(z, edges))


def test_fourier_recovers_the_two_triangle_density():
    noise = Gaussian(0.05)
    x = two_triangles(50_000, 1)
    z = x + noise.sample(len(x), RandomSource.from_seed(1))
    grid = (np.arange(20_000) + 0.5) / 20_000
    truth = two_triangle_density(grid)
    est = fourier_estimate(z, noise, 0.0, 1.0, harmonics=6, max_gain=10.0)
    l1 = float(np.mean(np.abs(est.density(grid) - truth)))
    # floor: the exact density truncated to the same 6 harmonics (clipped, renormalized)
    c = np.array([np.mean(truth * np.exp(-2j * math.pi * k * grid)) for k in range(1, 7)])
    series = 1 + 2 * np.real(np.exp(2j * math.pi * np.outer(grid, np.arange(1, 7))) @ c)
    floor = float(
        np.mean(np.abs(np.clip(series, 0, None) / np.mean(np.clip(series, 0, None)) - truth))
    )
    blurred = fourier_estimate(z, Gaussian(1e-9), 0.0, 1.0, harmonics=6)  # no deconvolution
    assert l1 <= 0.08 and l1 <= floor + 0.02
    assert float(np.mean(np.abs(blurred.density(grid) - truth))) >= 0.1


def test_fourier_refuses_a_harmonic_where_the_characteristic_function_is_zero():
    z = np.linspace(0, 20, 50)
    with pytest.raises(RandomizationError) as err:  # width 20 on a range of width 10: all zeros
        fourier_estimate(z, Uniform(0.0, 20.0), 0.0, 10.0, harmonics=3)
    message = str(err.value)
    assert (
        "\n" not in message
        and "is zero" in message
        and "at harmonic 1 of the range [0, 10]" in message
    )
    with pytest.raises(RandomizationError, match="at harmonic 5 "):
        fourier_estimate(z, Uniform(-0.2, 0.2), 0.0, 1.0, harmonics=6)
    fourier_estimate(z, Uniform(-0.2, 0.2), 0.0, 1.0, harmonics=4)  # below the first zero: fine


# -- the one-step protocol (Wu Sec. 4) --------------------------------------------------------


@pytest.mark.parametrize(
    "noise", [DiscreteNormal(0.5, 1.0), Poisson(0.5, 1.0)], ids=lambda n: n.kind
)
def test_one_step_estimate_is_unbiased(noise):
    k, n, repetitions = 5, 200, 400
    bins = np.random.default_rng(5).choice(k, size=n, p=[0.1, 0.4, 0.2, 0.25, 0.05])
    truth = np.bincount(bins, minlength=k) / n
    reports = one_step_reports(
        np.tile(bins, repetitions), k, noise, RandomSource.from_seed(noise.kind)
    )
    estimates = []
    for chunk in reports.reshape(repetitions, n, k):
        server = OneStepServer(k, noise)
        for start in range(0, n, 50):  # the server only keeps a running sum
            server.add(chunk[start : start + 50])
        estimates.append(server.estimate(clip=False))
    estimates = np.array(estimates)
    standard_error = estimates.std(axis=0, ddof=1) / math.sqrt(repetitions)
    assert np.all(np.abs(estimates.mean(axis=0) - truth) <= 4 * standard_error)
    # and it can fail: it detects any bias above 0.01 (forgetting Poisson's mean is 0.5)
    assert np.all(4 * standard_error < 0.01)


def test_one_step_refuses_a_lattice_the_indicator_falls_off():
    with pytest.raises(RandomizationError, match="gamma must be 1/m"):
        one_step_reports(np.array([0, 1]), 2, DiscreteNormal(0.3, 1.0), RandomSource.from_seed(0))
    reports = one_step_reports(
        np.array([0, 1]), 2, DiscreteNormal(0.25, 1.0), RandomSource.from_seed(0)
    )
    assert np.allclose(reports * 4, np.round(reports * 4))
