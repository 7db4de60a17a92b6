"""Categorical reconstruction: the PRAM moment and EM estimators through one wrapper."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.randomized.perturb.categorical import reconstruct
from ppbn.randomized.perturb.mechanisms import parse_mechanisms
from ppbn.randomized.perturb.response import flip_group, warner
from ppbn.randomized.pram.operators import (
    Block,
    RandomizationError,
    RandomizationScheme,
    RandomSource,
)


def _scheme(matrix: np.ndarray) -> RandomizationScheme:
    k = matrix.shape[0]
    return RandomizationScheme({"x": k}, [Block(("x",), (k,), matrix)])


def _codes(counts) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), counts)[:, None]


def test_moment_estimate_solves_p_transpose_n_hat_equals_the_received_counts():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
    received = np.array([50, 30, 20])
    est = reconstruct(_codes(received), ["x"], _scheme(p), "moment")
    assert np.allclose(est.counts, np.linalg.solve(p.T, received))
    assert est.records == 100 and np.array_equal(est.randomized, received)


def test_em_is_the_brute_force_maximum_likelihood_on_the_boundary():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
    received = np.array([70, 28, 2])  # the moment estimate has a negative cell here
    assert np.linalg.solve(p.T, received).min() < 0
    est = reconstruct(_codes(received), ["x"], _scheme(p), "em")
    assert est.counts.min() >= 0 and est.counts.sum() == pytest.approx(100)
    m = 400  # brute force: the likelihood on a simplex grid of step 1/400
    grid = np.array([(i, j, m - i - j) for i in range(m + 1) for j in range(m + 1 - i)]) / m
    with np.errstate(divide="ignore"):
        loglik = np.log(grid @ p) @ received
    best = grid[np.argmax(loglik)]
    assert np.log(est.fractions @ p) @ received >= loglik.max() - 1e-9
    assert np.allclose(est.fractions, best, atol=2 / m)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 4), st.integers(0, 2**32 - 1))
def test_estimators_on_random_small_matrices(k, seed):
    rng = np.random.default_rng(seed)
    p = rng.random((k, k)) + np.eye(k) * k  # diagonally dominant: well conditioned
    p /= p.sum(axis=1, keepdims=True)
    received = rng.integers(1, 60, k)
    moment = reconstruct(_codes(received), ["x"], _scheme(p), "moment")
    em = reconstruct(_codes(received), ["x"], _scheme(p), "em")
    assert np.allclose(p.T @ moment.counts, received)  # unbiased inversion, exactly
    assert em.counts.min() >= 0 and em.counts.sum() == pytest.approx(received.sum())
    if moment.counts.min() > 1e-3 * received.sum():  # interior: the MLE is the moment estimate
        assert np.allclose(em.counts, moment.counts, atol=1e-4 * received.sum())


def test_warner_theta_one_and_zero_give_the_counts_exactly():
    received = np.array([30, 70])
    keep = reconstruct(_codes(received), ["x"], _scheme(warner(1.0)), "moment")
    lie = reconstruct(_codes(received), ["x"], _scheme(warner(0.0)), "moment")
    assert np.array_equal(keep.counts, [30, 70]) and np.array_equal(lie.counts, [70, 30])


def test_zhan_group_joint_and_marginal_tables():
    mech = parse_mechanisms(
        {
            "columns": {"a": {"states": ["0", "1"]}, "b": {"states": ["0", "1"]}},
            "groups": [{"columns": ["a", "b"], "kind": "zhan", "theta": 0.8}],
        },
        "mech.json",
    )
    rng = np.random.default_rng(2)
    n = 40_000
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.8, a, 1 - a)
    out = mech.randomize({"a": a, "b": b}, RandomSource.from_seed(2))
    codes = np.column_stack([out["a"], out["b"]])
    joint = reconstruct(codes, ["a", "b"], mech.scheme, "moment")
    table = np.histogram2d(out["a"], out["b"], bins=2)[0].reshape(-1)
    assert np.allclose(joint.counts.reshape(-1), np.linalg.solve(flip_group(2, 0.8).T, table))
    truth = np.histogram2d(a, b, bins=2)[0]
    # unbiased: within 4 sd of the randomization (sd of a cell <= sqrt(n theta(1-theta))/(2 theta-1))
    assert np.all(np.abs(joint.counts - truth) < 4 * np.sqrt(n * 0.16) / 0.6)
    marginal = reconstruct(codes, ["a", "b"], mech.scheme, "moment", of=["a"])
    assert np.allclose(marginal.counts, joint.counts.sum(axis=1))


def test_unknown_method_and_missing_partner_are_one_line_errors():
    scheme = _scheme(warner(0.8))
    with pytest.raises(RandomizationError, match="unknown method 'mle'"):
        reconstruct(_codes([1, 2]), ["x"], scheme, "mle")
    mech = parse_mechanisms(
        {
            "columns": {"a": {"states": ["0", "1"]}, "b": {"states": ["0", "1"]}},
            "groups": [{"columns": ["a", "b"], "kind": "zhan", "theta": 0.8}],
        },
        "mech.json",
    )
    with pytest.raises(RandomizationError, match="whose column is missing"):
        reconstruct(np.zeros((3, 1), dtype=int), ["a"], mech.scheme, "em")
