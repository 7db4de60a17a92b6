"""Moment estimator, its covariance (Theorems 1-2), EM, and parameter estimates."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.randomized.pram.estimators import (
    PramEstimator,
    apply_along_axes,
    count_table,
    em_estimate,
    log_likelihood,
    moment_covariance,
    moment_estimate,
)
from ppbn.randomized.pram.operators import (
    Block,
    RandomizationScheme,
    RandomSource,
    binary,
    binary_symmetric,
    kron,
    multi_category,
    ternary_symmetric,
)


def _stochastic(rng, k):
    m = rng.random((k, k)) + np.eye(k) * k
    return m / m.sum(axis=1, keepdims=True)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(0, 2**32 - 1))
def test_axis_operators_equal_the_kronecker_product(dims, seed):
    rng = np.random.default_rng(seed)
    table = rng.random(dims)
    mats = [_stochastic(rng, k) for k in dims]
    full = kron(*mats)
    expected = (full @ table.reshape(-1)).reshape(dims)
    got = apply_along_axes(table, [((i,), m) for i, m in enumerate(mats)])
    assert np.allclose(got, expected)
    # the moment estimator is (P^T)^{-1} applied to vec(N_tilde)
    assert np.allclose(
        moment_estimate(table, [((i,), m) for i, m in enumerate(mats)]).reshape(-1),
        np.linalg.solve(full.T, table.reshape(-1)),
    )


def test_joint_block_on_non_adjacent_axes():
    rng = np.random.default_rng(4)
    table = rng.random((2, 3, 2))
    joint = _stochastic(rng, 4)  # over (axis 2, axis 0), axis 2 slowest
    got = apply_along_axes(table, [((2, 0), joint)])
    moved = np.transpose(table, (2, 0, 1)).reshape(4, 3)
    expected = np.transpose((joint @ moved).reshape(2, 2, 3), (1, 2, 0))
    assert np.allclose(got, expected)


def test_covariance_matches_the_explicit_theorem_formula():
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 200, size=(2, 3)).astype(float)
    p1, p2 = binary(0.1, 0.25), ternary_symmetric(0.15, 0.1)
    full = kron(p1, p2)
    n = counts.reshape(-1)
    sigma = sum(n[r] * (np.diag(full[r]) - np.outer(full[r], full[r])) for r in range(6))
    inv = np.linalg.inv(full)
    expected = inv.T @ sigma @ inv
    got = moment_covariance(counts, [((0,), p1), ((1,), p2)])
    assert np.allclose(got, expected)


def _sample_family(n, seed):
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.3).astype(int)
    b = np.where(a == 1, rng.choice(3, n, p=[0.6, 0.3, 0.1]), rng.choice(3, n, p=[0.2, 0.2, 0.6]))
    c = (rng.random(n) < np.where(b == 2, 0.8, 0.3)).astype(int)
    return np.column_stack([a, b, c])


def test_moment_estimator_is_unbiased_and_its_covariance_is_right():
    cards = {"a": 2, "b": 3, "c": 2}
    data = _sample_family(1500, 11)
    truth = count_table(data, (2, 3, 2))
    scheme = RandomizationScheme(
        cards,
        [Block(("a",), (2,), binary(0.1, 0.25)), Block(("b", "c"), (3, 2), multi_category(6, 0.3))],
    )
    runs = 300
    estimates = np.empty((runs, 12))
    root = RandomSource.from_seed("unbiased")
    for r in range(runs):
        randomized = scheme.randomize(data, ["a", "b", "c"], root.derive(str(r)))
        estimates[r] = (
            PramEstimator(["a", "b", "c"], randomized, scheme).moment(("a", "b", "c")).reshape(-1)
        )
    mean = estimates.mean(axis=0)
    stderr = estimates.std(axis=0, ddof=1) / np.sqrt(runs)
    assert np.all(np.abs(mean - truth.reshape(-1)) <= 3 * stderr)
    ops = [((0,), scheme.matrix_for("a")), ((1, 2), np.array(scheme.block_of("b").matrix))]
    predicted = np.sqrt(np.diag(moment_covariance(truth, ops)))
    observed = estimates.std(axis=0, ddof=1)
    # sd of a sample sd over 300 runs is about 4%; allow 20%
    assert np.allclose(observed, predicted, rtol=0.2)


def test_partial_joint_block_is_estimated_through_its_mates():
    cards = {"a": 2, "b": 3, "c": 2}
    data = _sample_family(4000, 12)
    scheme = RandomizationScheme(cards, [Block(("b", "c"), (3, 2), multi_category(6, 0.2))])
    randomized = scheme.randomize(data, ["a", "b", "c"], RandomSource.from_seed(1))
    est = PramEstimator(["a", "b", "c"], randomized, scheme)
    full = est.moment(("a", "b", "c"))
    assert np.allclose(est.moment(("a", "b")), full.sum(axis=2))
    assert np.allclose(est.moment(("c", "a")), full.sum(axis=1).T)
    cov_full = est.covariance(("a", "b", "c")).reshape(6, 2, 6, 2).sum(axis=(1, 3))
    assert np.allclose(est.covariance(("a", "b")), cov_full)
    assert np.allclose(est.moment(("a",)), count_table(data[:, :1], (2,)))  # a is not randomized


def test_em_equals_moment_estimate_when_interior():
    cards = {"a": 2, "b": 3}
    data = _sample_family(3000, 13)[:, :2]
    scheme = RandomizationScheme(
        cards,
        [
            Block(("a",), (2,), binary_symmetric(0.2)),
            Block(("b",), (3,), ternary_symmetric(0.15, 0.1)),
        ],
    )
    randomized = scheme.randomize(data, ["a", "b"], RandomSource.from_seed(2))
    est = PramEstimator(["a", "b"], randomized, scheme)
    moment = est.moment(("a", "b"))
    assert np.all(moment > 0)
    assert np.allclose(est.em(("a", "b")), moment, atol=1e-3)


def test_em_stays_nonnegative_on_the_boundary_and_beats_clipping():
    ops = [((0,), binary_symmetric(0.3)), ((1,), multi_category(3, 0.4))]
    truth = np.array([[500.0, 0.0, 3.0], [0.0, 400.0, 0.0]])
    observed = np.zeros_like(truth)
    rng = np.random.default_rng(21)
    flat_p = kron(binary_symmetric(0.3), multi_category(3, 0.4))
    for cell, count in enumerate(truth.reshape(-1)):
        observed += rng.multinomial(int(count), flat_p[cell]).reshape(2, 3)
    moment = moment_estimate(observed, ops)
    assert moment.min() < 0  # the moment estimate leaves the parameter space
    em = em_estimate(observed, ops)
    assert em.min() >= 0
    assert em.sum() == pytest.approx(observed.sum())
    clipped = np.clip(moment, 0, None)
    clipped *= observed.sum() / clipped.sum()
    assert log_likelihood(em, observed, ops) >= log_likelihood(clipped, observed, ops)
    # Karush-Kuhn-Tucker conditions of the MLE: with r = N_tilde / (P^T theta),
    # (P r)_j = N where theta_j > 0 and (P r)_j <= N where theta_j = 0
    theta = em / em.sum()
    predicted = apply_along_axes(theta, [(a, m.T) for a, m in ops])
    gradient = apply_along_axes(observed / predicted, ops)
    positive = em > 1e-3
    assert np.allclose(gradient[positive], observed.sum(), rtol=1e-4)
    assert np.all(gradient[~positive] <= observed.sum() * (1 + 1e-4))


def test_parameter_estimates_and_normal_intervals_cover_the_truth():
    cards = {"a": 2, "b": 3}
    scheme = RandomizationScheme(
        cards,
        [Block(("a",), (2,), binary_symmetric(0.25)), Block(("b",), (3,), multi_category(3, 0.2))],
    )
    data = _sample_family(5000, 14)[:, :2]
    true_theta = count_table(data, (2, 3))
    true_theta /= true_theta.sum(axis=1, keepdims=True)
    covered = 0
    runs = 60
    root = RandomSource.from_seed("coverage")
    for r in range(runs):
        randomized = scheme.randomize(data, ["a", "b"], root.derive(str(r)))
        params = PramEstimator(["a", "b"], randomized, scheme).parameters("b", ["a"])
        assert params.theta.shape == (2, 3) and np.allclose(params.theta.sum(axis=1), 1)
        lo, hi = params.interval(0.95)
        covered += int(np.sum((lo <= true_theta) & (true_theta <= hi)))
    rate = covered / (runs * 6)
    assert 0.88 <= rate <= 0.99
