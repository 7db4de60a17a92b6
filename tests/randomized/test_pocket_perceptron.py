"""The pocket perceptron on randomized data (Ma 2006, Ch. 6): the expected-cost weights
against a brute-force posterior per record, the pocket algorithm, and the Lens data."""

import itertools

import numpy as np
import pytest

from ppbn.errors import UserError
from ppbn.lab.lenses import (
    CARDINALITIES,
    LENSES,
    TABLE_6_1,
    lens_class,
    lenses_scheme,
    sample_lenses,
)
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.perceptron import (
    configuration_weights,
    fit_perceptron,
    perceptron_cost,
    pocket,
)
from ppbn.randomized.perturb.response import scheme_for
from ppbn.randomized.pram.operators import RandomSource, kron

COLUMNS = ["a", "b", "c", "y"]
CARDS = {"a": 3, "b": 2, "c": 2, "y": 2}


def _small_case(seed: int, n: int):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = rng.integers(0, 2, n)
    c = (rng.random(n) < 0.3 + 0.4 * b).astype(int)
    y = ((a + b + c >= 2) ^ (rng.random(n) < 0.1)).astype(int)
    codes = np.column_stack([a, b, c, y])
    # a alone, (b, c) as one group, y alone: P = P_a (x) P_bc (x) P_y in column order
    scheme = scheme_for(CARDS, ["a", "y"], p=0.3, groups=[("b", "c")])
    return codes, scheme


def _full_matrix(scheme):
    return kron(
        *(b.matrix for b in sorted(scheme.blocks, key=lambda b: COLUMNS.index(b.variables[0])))
    )


def test_expected_weights_equal_per_record_posteriors():
    """Brute force: for each randomized record, p(v_l | v_tilde_i) = T_hat_l P(l, k_i) /
    sum_m T_hat_m P(m, k_i) with the full Kronecker matrix, summed over the records."""
    codes, scheme = _small_case(1, 400)
    randomized = scheme.randomize(codes, COLUMNS, RandomSource.from_seed(1))
    data = RandomizedData(COLUMNS, randomized, scheme)
    weights = configuration_weights(data, COLUMNS, "expected", "moment").reshape(-1)
    prior = np.clip(data.estimate(COLUMNS, "moment"), 0, None).reshape(-1)
    full = _full_matrix(scheme)
    shape = [CARDS[c] for c in COLUMNS]
    total = np.zeros_like(prior)
    for row in randomized:
        post = prior * full[:, np.ravel_multi_index(tuple(row), shape)]
        total += post / post.sum()
    assert np.allclose(weights, total)
    assert weights.sum() == pytest.approx(len(randomized))


def test_em_fixed_point_weights_are_the_mle_counts():
    """At the EM fixed point the expected-cost weights equal T_hat (module docstring)."""
    codes, scheme = _small_case(2, 3000)
    data = RandomizedData(
        COLUMNS, scheme.randomize(codes, COLUMNS, RandomSource.from_seed(2)), scheme
    )
    weights = configuration_weights(data, COLUMNS, "expected", "em")
    assert np.allclose(weights, data.estimate(COLUMNS, "em"), atol=1e-4 * 3000)


def test_plain_and_raw_weights_are_counts():
    codes, scheme = _small_case(3, 200)
    plain = RandomizedData.plain(COLUMNS, codes, list(CARDS.values()))
    assert np.array_equal(configuration_weights(plain, COLUMNS), plain.randomized_counts(COLUMNS))
    randomized = RandomizedData(
        COLUMNS, scheme.randomize(codes, COLUMNS, RandomSource.from_seed(3)), scheme
    )
    assert np.array_equal(
        configuration_weights(randomized, COLUMNS, "raw"), randomized.randomized_counts(COLUMNS)
    )


def test_expected_cost_equals_brute_force_sum_over_records():
    """Sec. 6.2: J(w) = sum_i sum_l delta_l(w) w^T v_l p(v_l | v_tilde_i) by enumeration of
    every true configuration for each of 3 records, against the weighted cost."""
    codes, scheme = _small_case(4, 500)
    randomized = scheme.randomize(codes, COLUMNS, RandomSource.from_seed(4))[:3]
    data = RandomizedData(COLUMNS, randomized, scheme)
    prior = np.clip(
        RandomizedData(
            COLUMNS, scheme.randomize(codes, COLUMNS, RandomSource.from_seed(5)), scheme
        ).estimate(COLUMNS, "em"),
        0,
        None,
    )
    w = np.array([0.3, -1.0, 0.5, 0.2, 0.7, -0.4, 0.1, 0.9])  # bias + one-hot a, b, c
    full = _full_matrix(scheme)
    shape = [CARDS[c] for c in COLUMNS]
    brute = 0.0
    configs = list(itertools.product(*(range(k) for k in shape)))
    for row in randomized:
        k = np.ravel_multi_index(tuple(row), shape)
        post = prior.reshape(-1) * full[:, k]
        post /= post.sum()
        for cell, (a, b, c, y) in enumerate(configs):
            x = np.concatenate([[1.0], np.eye(3)[a], np.eye(2)[b], np.eye(2)[c]])
            score = w @ x
            delta = -1 if (y == 1 and score <= 0) else (1 if (y == 0 and score > 0) else 0)
            brute += delta * score * post[cell]
    observed = data.randomized_counts(COLUMNS)
    ops = data.operators(COLUMNS)
    from ppbn.randomized.pram.estimators import apply_along_axes

    predicted = apply_along_axes(prior, [(axes, m.T) for axes, m in ops])
    mass = (prior * apply_along_axes(observed / predicted, ops)).reshape(-1)
    features = np.array(
        [
            np.concatenate([[1.0], np.eye(3)[a], np.eye(2)[b], np.eye(2)[c]])
            for a, b, c, _ in configs
        ]
    )
    labels = np.array([1.0 if y == 1 else -1.0 for *_, y in configs])
    assert perceptron_cost(w, features, labels, mass) == pytest.approx(brute, rel=1e-9)
    assert brute >= 0


def test_pocket_separates_separable_data():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(200, 2))
    labels = np.where(x @ np.array([1.0, -2.0]) + 0.3 > 0, 1.0, -1.0)
    features = np.column_stack([np.ones(200), x])
    weights, correct = pocket(features, labels, np.ones(200), 20_000, np.random.default_rng(0))
    assert correct == 1.0
    assert np.all(labels * (features @ weights) > 0)


def test_pocket_keeps_the_best_weights_on_noisy_data():
    """Non-separable labels: the pocket's share correct beats the last perceptron's."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(300, 2))
    labels = np.where((x[:, 0] > 0) ^ (rng.random(300) < 0.15), 1.0, -1.0)
    features = np.column_stack([np.ones(300), x])
    weights, correct = pocket(features, labels, np.ones(300), 5000, np.random.default_rng(1))
    assert correct >= 0.8
    assert correct == pytest.approx(np.mean(labels * (features @ weights) > 0))


def test_lenses_database_and_table_6_1():
    assert len(LENSES) == 24 and set(LENSES.values()) == {1, 2, 3}
    assert all(c == 3 for (_, _, _, tear), c in LENSES.items() if tear == 1)  # reduced tears: none
    rng = np.random.default_rng(7)
    columns, codes = sample_lenses(20_000, rng)
    share = codes[:, -1].mean()
    exact = sum(
        np.prod([TABLE_6_1[j][v - 1] for j, v in enumerate(combo)])
        for combo, c in LENSES.items()
        if c == 3
    )
    assert share == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / 20_000))
    assert np.array_equal(lens_class(np.array([[0, 0, 1, 1], [2, 1, 1, 1]])), [0, 1])


def test_lens_experiment_expected_cost_beats_raw_at_p_0_2():
    """Sec. 6.3 (1) at one p, one run: 6,000 records, Table 6.2 randomization, test on the
    original data, moment prior (EM takes seconds here). Learning from the expected cost
    stays near the original accuracy; the pocket run on randomized data as if original
    falls towards the majority rate (0.74)."""
    columns, train = sample_lenses(6000, np.random.default_rng(8))
    _, test_codes = sample_lenses(6000, np.random.default_rng(9))
    cards = [CARDINALITIES[c] for c in columns]
    test = RandomizedData.plain(columns, test_codes, cards)
    original = fit_perceptron(
        RandomizedData.plain(columns, train, cards), "lenses", encoding="ordinal"
    )
    scheme = lenses_scheme(0.2)
    data = RandomizedData(
        columns, scheme.randomize(train, columns, RandomSource.from_seed(8)), scheme
    )
    expected = fit_perceptron(data, "lenses", encoding="ordinal", method="moment")
    raw = fit_perceptron(data, "lenses", encoding="ordinal", cost="raw")
    assert original.accuracy(test) > 0.98
    assert expected.accuracy(test) > 0.95
    assert raw.accuracy(test) < expected.accuracy(test) - 0.1


def test_bad_perceptron_options():
    codes, scheme = _small_case(9, 50)
    plain = RandomizedData.plain(COLUMNS, codes, list(CARDS.values()))
    with pytest.raises(UserError, match="unknown encoding"):
        fit_perceptron(plain, "y", encoding="binary")
    with pytest.raises(UserError, match="has 3 states: name the positive one"):
        fit_perceptron(plain, "a")
    with pytest.raises(UserError, match="unknown cost"):
        configuration_weights(plain, COLUMNS, cost="exact")
    assert fit_perceptron(plain, "a", positive=2, iterations=200).positive == 2
