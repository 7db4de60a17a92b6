"""Randomized-response and grouped mechanisms, marginal transition matrices (Props. 7.1-7.2),
and the estimated-count layer every learner uses, against closed forms and brute force."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.response import (
    check_theta,
    flip_group,
    marginal_transition,
    scheme_for,
    warner,
)
from ppbn.randomized.pram.estimators import PramEstimator, moment_covariance
from ppbn.randomized.pram.operators import (
    RandomizationError,
    RandomSource,
    kron,
    multi_category,
)


def test_warner_matrix_is_zhan_m1():
    assert np.allclose(warner(0.8), np.array([[0.8, 0.2], [0.2, 0.8]]), rtol=0, atol=1e-15)
    assert np.array_equal(flip_group(1, 0.8), warner(0.8))


def test_two_groups_give_m2_equal_to_m1_kron_m1():
    """Zhan eq. 5: two groups randomized independently; the 4x4 M2 printed in the paper."""
    p, q = 0.7, 0.3
    scheme = scheme_for({"a": 2, "b": 2}, [], theta=p, groups=[("a",), ("b",)])
    data = RandomizedData(["a", "b"], np.zeros((1, 2), dtype=int), scheme)
    ops = data.operators(["a", "b"])
    m2 = kron(*(m for _, m in ops))
    printed = np.array(
        [
            [p * p, p * q, p * q, q * q],
            [p * q, p * p, q * q, p * q],
            [p * q, q * q, p * p, p * q],
            [q * q, p * q, p * q, p * p],
        ]
    )
    assert np.allclose(m2, printed)


def test_one_group_keeps_or_flips_every_bit():
    m = flip_group(3, 0.9)
    for state in range(8):
        row = m[state]
        assert row[state] == pytest.approx(0.9)
        assert row[7 - state] == pytest.approx(0.1)  # 110 -> 001 (Zhan Sec. 3.2)
        assert np.count_nonzero(row) == 2


@pytest.mark.parametrize("theta", [0.5, 1.5, -0.1])
def test_bad_theta_is_one_line(theta):
    with pytest.raises(RandomizationError) as err:
        check_theta(theta)
    assert "\n" not in str(err.value)
    if theta == 0.5:
        assert "theta = 0.5 is not invertible" in str(err.value)


def test_theta_half_refused_by_every_entry_point():
    for build in (
        lambda: warner(0.5),
        lambda: flip_group(2, 0.5),
        lambda: scheme_for({"a": 2}, ["a"], theta=0.5),
    ):
        with pytest.raises(RandomizationError, match="not invertible"):
            build()


@pytest.mark.parametrize("group, subset", [(1, 1), (2, 1), (3, 1), (3, 2), (4, 2), (4, 3)])
@pytest.mark.parametrize("p", [0.1, 0.35])
def test_marginal_matches_props_7_1_and_7_2(group, subset, p):
    """P_C for C inside a symmetric M-category group G: diagonal
    1 - p + p (2^{|G|-|C|} - 1)/(2^|G| - 1), off-diagonal p 2^{|G|-|C|}/(2^|G| - 1)."""
    full = multi_category(2**group, p)
    keep = tuple(range(group - subset, group))
    got = marginal_transition(full, (2,) * group, keep)
    diag = 1 - p + p * (2 ** (group - subset) - 1) / (2**group - 1)
    off = p * 2 ** (group - subset) / (2**group - 1)
    expected = np.full((2**subset, 2**subset), off)
    np.fill_diagonal(expected, diag)
    assert np.allclose(got, expected, atol=1e-14)
    if subset == 1:  # Prop. 7.1(1) in its own notation, J = 2^|G|
        j = 2**group
        assert got[0, 0] == pytest.approx(1 - p + p * (j / 2 - 1) / (j - 1))
        assert got[0, 1] == pytest.approx(p * j / (2 * (j - 1)))


def test_prop_7_1_examples():
    """Sec. 7.1.2.2: 1 - 4p/7 for a 3-item group, 1 - 2p/3 for a 2-item group."""
    p = 0.3
    assert marginal_transition(multi_category(8, p), (2, 2, 2), (1,))[0, 0] == pytest.approx(
        1 - 4 * p / 7
    )
    assert marginal_transition(multi_category(4, p), (2, 2), (0,))[1, 0] == pytest.approx(2 * p / 3)


def test_marginal_of_a_flip_group_is_a_flip_group():
    got = marginal_transition(flip_group(4, 0.8), (2, 2, 2, 2), (3, 1))
    assert np.allclose(got, flip_group(2, 0.8))


def test_marginal_of_independent_blocks_and_general_matrix():
    a, b = multi_category(3, 0.2), warner(0.9)
    assert np.allclose(marginal_transition(kron(a, b), (3, 2), (1, 0)), kron(b, a))
    rng = np.random.default_rng(0)
    general = rng.random((4, 4))
    general /= general.sum(axis=1, keepdims=True)
    assert marginal_transition(general, (2, 2), (0,)) is None


def test_scheme_for_refuses_bad_mechanisms():
    cards = {"a": 2, "b": 3, "c": 2}
    with pytest.raises(RandomizationError, match="exactly one mechanism"):
        scheme_for(cards, ["a"])
    with pytest.raises(RandomizationError, match="'b' has 3 states"):
        scheme_for(cards, ["a", "b"], theta=0.8)
    with pytest.raises(RandomizationError, match="two groups"):
        scheme_for(cards, [], p=0.2, groups=[("a", "c"), ("c",)])
    with pytest.raises(RandomizationError, match="unknown variable 'z'"):
        scheme_for(cards, [], p=0.2, groups=[("a", "z")])
    with pytest.raises(RandomizationError, match="not invertible"):
        scheme_for(cards, ["b"], p=2 / 3)  # 1 - p = p / 2: singular


def _random_case(seed):
    rng = np.random.default_rng(seed)
    cards = {"a": 2, "b": 3, "c": 2, "d": 2, "y": 2}
    columns = list(cards)
    codes = np.column_stack([rng.integers(0, k, 300) for k in cards.values()])
    scheme = scheme_for(cards, ["a", "b"], p=0.3, groups=[("c", "d", "y")])
    randomized = scheme.randomize(codes, columns, RandomSource.from_seed(seed))
    return columns, randomized, scheme


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31), st.permutations(["a", "b", "c", "d", "y"]), st.integers(1, 4))
def test_marginal_estimates_equal_the_expanded_estimate(seed, order, size):
    """Estimating through marginal matrices equals estimating over whole blocks and summing
    the other members out (PramEstimator); Theorem 2's covariance at the true counts too
    (the plug-in covariances differ: each clips its own estimate at 0)."""
    columns, randomized, scheme = _random_case(seed)
    data = RandomizedData(columns, randomized, scheme)
    pram = PramEstimator(columns, randomized, scheme)
    chosen = list(order[:size])
    assert np.allclose(data.estimate(chosen), pram.moment(chosen))
    truth = np.random.default_rng(seed).integers(0, 50, (2, 3, 2, 2, 2)).astype(float)
    full = moment_covariance(
        truth,
        [
            ((0,), multi_category(2, 0.3)),
            ((1,), multi_category(3, 0.3)),
            ((2, 3, 4), multi_category(8, 0.3)),
        ],
    )
    axes = [columns.index(v) for v in chosen]
    rest = tuple(i for i in range(5) if i not in axes)
    expanded = full.reshape(truth.shape * 2).sum(axis=rest + tuple(5 + r for r in rest))
    kept = sorted(axes)
    order_of = [kept.index(a) for a in axes]
    expanded = np.transpose(expanded, order_of + [len(kept) + k for k in order_of])
    cells = int(np.prod([truth.shape[a] for a in axes]))
    marginal = np.transpose(truth.sum(axis=rest), order_of)
    assert np.allclose(
        moment_covariance(marginal, data.operators(chosen)), expanded.reshape(cells, cells)
    )


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31), st.permutations(["a", "b", "c", "d", "y"]), st.integers(0, 3))
def test_conditional_counts_are_the_slice_of_the_estimate(seed, order, fixed_count):
    """ID3's node estimate (Sec. 7.2.2): the weighted count equals the sliced full table."""
    columns, randomized, scheme = _random_case(seed)
    data = RandomizedData(columns, randomized, scheme)
    names = list(order[: fixed_count + 2])
    fixed = {v: int(seed % data.cardinality(v)) for v in names[:fixed_count]}
    free = names[fixed_count:]
    full = data.estimate([*fixed, *free])
    assert np.allclose(data.conditional_counts(fixed, free), full[tuple(fixed.values())])


def test_general_joint_block_falls_back_to_whole_block():
    from ppbn.randomized.pram.operators import Block, RandomizationScheme

    rng = np.random.default_rng(2)
    general = rng.random((4, 4)) + 2 * np.eye(4)
    general /= general.sum(axis=1, keepdims=True)
    scheme = RandomizationScheme({"a": 2, "b": 2, "y": 2}, [Block(("a", "b"), (2, 2), general)])
    codes = rng.integers(0, 2, (400, 3))
    randomized = scheme.randomize(codes, ["a", "b", "y"], RandomSource.from_seed(2))
    data = RandomizedData(["a", "b", "y"], randomized, scheme)
    pram = PramEstimator(["a", "b", "y"], randomized, scheme)
    assert data.operators(["a", "y"]) is None
    assert np.allclose(data.estimate(["a", "y"]), pram.moment(["a", "y"]))
    assert np.allclose(data.conditional_counts({"a": 1}, ["y"]), pram.moment(["a", "y"])[1])


def test_randomized_data_refuses_bad_records():
    scheme = scheme_for({"a": 2}, ["a"], p=0.1)
    with pytest.raises(RandomizationError, match="outside 0..1"):
        RandomizedData(["a"], np.array([[2]]), scheme)
    with pytest.raises(RandomizationError, match="not in the randomization scheme"):
        RandomizedData(["b"], np.array([[0]]), scheme)
