"""Apriori on randomized transactions (Ma 2006, Sec. 7.1): Prop. 7.4's inclusion-exclusion,
unbiased supports with Theorem 2's variance (Props. 7.2-7.3), and the miner against brute force."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.errors import UserError
from ppbn.randomized.perturb.apriori import (
    SupportEstimator,
    apriori_gen,
    association_rules,
    frequent_itemsets,
    mine,
    table_from_supports,
)
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.response import scheme_for
from ppbn.randomized.pram.estimators import moment_covariance
from ppbn.randomized.pram.operators import RandomSource

ITEMS = [f"i{k}" for k in range(6)]
GROUPS = [("i0", "i1", "i2"), ("i3", "i4")]  # i5 alone


def _transactions(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    basket = rng.random(n) < 0.4
    rates = np.array([0.7, 0.6, 0.5, 0.65, 0.3, 0.45])
    return (rng.random((n, 6)) < np.where(basket[:, None], rates, 0.15)).astype(np.int64)


def _scheme(p: float):
    return scheme_for(dict.fromkeys(ITEMS, 2), ITEMS, p=p, groups=GROUPS)


def _plain(codes):
    return RandomizedData.plain(ITEMS, codes, [2] * 6)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 5))
def test_prop_7_4_inclusion_exclusion_gives_the_pattern_counts(seed, size):
    """T_tilde_C from the supports of C and its subsets equals counting the patterns."""
    codes = _transactions(200, seed)
    rng = np.random.default_rng(seed)
    items = [ITEMS[i] for i in rng.permutation(6)[:size]]
    supports = {
        frozenset(sub): float(np.all(codes[:, [ITEMS.index(i) for i in sub]] == 1, axis=1).sum())
        for k in range(1, size + 1)
        for sub in itertools.combinations(items, k)
    }
    table = table_from_supports(items, supports, 200.0)
    assert np.array_equal(table, _plain(codes).randomized_counts(items))


def test_section_7_1_2_3_two_item_table():
    """The printed example: T_tilde_C = [N - s2 - s1 + s12, s2 - s12, s1 - s12, s12]."""
    s1, s2, s12, n = 40.0, 30.0, 12.0, 100.0
    table = table_from_supports(
        ["I1", "I2"],
        {frozenset({"I1"}): s1, frozenset({"I2"}): s2, frozenset({"I1", "I2"}): s12},
        n,
    )
    assert table.reshape(-1).tolist() == [n - s2 - s1 + s12, s2 - s12, s1 - s12, s12]


CODES = np.array([[1, 1, 0, 1, 0, 1], [1, 0, 1, 1, 1, 0], [0, 1, 1, 0, 1, 1]])


@pytest.mark.parametrize(
    "itemset, records",
    [
        (("i0",), 3),
        (("i0", "i2"), 3),
        (("i2", "i5"), 3),
        (("i1", "i3"), 2),
        (("i0", "i4", "i5"), 2),
    ],
)
def test_exact_enumeration_unbiased_with_theorem_2_variance(itemset, records):
    """Brute force on 2-3 transactions: every combination of randomized values of the
    groups holding the itemset's items, with its probability (the other groups do not
    enter the estimate). The estimated support's exact mean is the true support and its
    exact variance is Theorem 2's Cov(T_hat)[last, last] at the true table."""
    codes = CODES[:records]
    scheme = _scheme(0.3)
    blocks = [b for b in scheme.blocks if set(b.variables) & set(itemset)]
    per_record = []
    for row in codes:
        outcomes = []
        for choice in itertools.product(*(range(b.size) for b in blocks)):
            prob, new = 1.0, row.copy()
            for block, state in zip(blocks, choice, strict=True):
                idx = [ITEMS.index(v) for v in block.variables]
                source = int(np.ravel_multi_index(tuple(row[idx]), block.cardinalities))
                prob *= block.matrix[source, state]
                new[idx] = np.unravel_index(state, block.cardinalities)
            outcomes.append((prob, new))
        per_record.append(outcomes)
    mean = second = total = 0.0
    columns = [ITEMS.index(i) for i in itemset]
    seen: dict[bytes, float] = {}  # the estimate depends on the itemset's columns only
    for combo in itertools.product(*per_record):
        prob = float(np.prod([c[0] for c in combo]))
        randomized = np.array([c[1] for c in combo])
        key = randomized[:, columns].tobytes()
        if key not in seen:
            seen[key] = (
                SupportEstimator(RandomizedData(ITEMS, randomized, scheme)).estimate(itemset).count
            )
        value = seen[key]
        total += prob
        mean += prob * value
        second += prob * value**2
    assert total == pytest.approx(1.0)
    truth = float(np.all(codes[:, [ITEMS.index(i) for i in itemset]] == 1, axis=1).sum())
    assert mean == pytest.approx(truth, abs=1e-9)
    data = RandomizedData(ITEMS, codes, scheme)
    variance = moment_covariance(_plain(codes).randomized_counts(itemset), data.operators(itemset))[
        -1, -1
    ]
    assert second - mean**2 == pytest.approx(variance, rel=1e-9)


def test_supports_unbiased_with_the_stated_variance_over_repetitions():
    """300 randomizations of 1,000 transactions, p = 0.3: for an itemset inside one group
    (Prop. 7.2), one across two groups and a single item (Prop. 7.3), the mean estimate is
    within 4 standard errors of the truth and the sample variance within 0.35 of
    Theorem 2's (its relative sd is sqrt(2/299) = 8%: about 4 sd)."""
    n, reps, p = 1000, 300, 0.3
    codes = _transactions(n, 3)
    scheme = _scheme(p)
    itemsets = [("i0", "i1"), ("i1", "i3", "i5"), ("i4",)]
    stacked = scheme.randomize(np.tile(codes, (reps, 1)), ITEMS, RandomSource.from_seed("apriori"))
    estimates = np.empty((reps, len(itemsets)))
    for r in range(reps):
        estimator = SupportEstimator(RandomizedData(ITEMS, stacked[r * n : (r + 1) * n], scheme))
        estimates[r] = [estimator.estimate(s).count for s in itemsets]
    plain = RandomizedData(ITEMS, codes, scheme)
    for j, itemset in enumerate(itemsets):
        truth = float(np.all(codes[:, [ITEMS.index(i) for i in itemset]] == 1, axis=1).sum())
        stated = moment_covariance(
            _plain(codes).randomized_counts(itemset), plain.operators(itemset)
        )[-1, -1]
        mean, var = estimates[:, j].mean(), estimates[:, j].var(ddof=1)
        assert abs(mean - truth) < 4 * np.sqrt(stated / reps), (itemset, mean, truth)
        assert abs(var / stated - 1) < 0.35, (itemset, var, stated)


def _brute_force_frequent(codes: np.ndarray, min_support: float) -> dict[tuple[str, ...], float]:
    out = {}
    for k in range(1, 7):
        for sub in itertools.combinations(ITEMS, k):
            count = float(np.all(codes[:, [ITEMS.index(i) for i in sub]] == 1, axis=1).sum())
            if count >= min_support * len(codes):
                out[sub] = count
    return out


@pytest.mark.parametrize("min_support", [0.05, 0.12, 0.3])
def test_apriori_on_plain_data_equals_brute_force(min_support):
    codes = _transactions(500, 4)
    found = frequent_itemsets(_plain(codes), min_support)
    assert {s.items: s.count for s in found} == _brute_force_frequent(codes, min_support)
    assert all(s.sd == 0.0 for s in found)


def test_rules_on_plain_data_equal_brute_force():
    codes = _transactions(500, 5)
    result = mine(_plain(codes), 0.1, 0.6)
    frequent = _brute_force_frequent(codes, 0.1)
    expected = set()
    for items, count in frequent.items():
        for k in range(1, len(items)):
            for x in itertools.combinations(items, k):
                if count / frequent[x] >= 0.6:
                    expected.add(
                        (x, tuple(i for i in items if i not in x), count / 500, count / frequent[x])
                    )
    got = {(r.antecedent, r.consequent, r.support, r.confidence) for r in result.rules}
    assert got == expected


def test_randomized_mining_finds_the_strong_itemsets():
    """20,000 transactions, p = 0.2: the frequent itemsets at 15% support are those of the
    original data except ones within 2 sd of the threshold."""
    codes = _transactions(20000, 6)
    scheme = _scheme(0.2)
    data = RandomizedData(ITEMS, scheme.randomize(codes, ITEMS, RandomSource.from_seed(6)), scheme)
    found = {s.items: s for s in frequent_itemsets(data, 0.15)}
    truth = _brute_force_frequent(codes, 0.15)
    for items in set(found) ^ set(truth):
        estimate = found[items] if items in found else SupportEstimator(data).estimate(items)
        assert abs(estimate.count - 0.15 * 20000) < 2 * estimate.sd + 1, items
    uncorrected = {s.items for s in frequent_itemsets(_plain(data.codes), 0.15)}
    assert len(set(found) ^ set(truth)) < len(uncorrected ^ set(truth))


def test_apriori_gen_joins_and_prunes():
    order = {i: k for k, i in enumerate("abcde")}
    frequent = [("a", "b"), ("a", "c"), ("b", "c"), ("a", "d"), ("c", "d")]
    assert apriori_gen(frequent, order) == [("a", "b", "c"), ("a", "c", "d")]
    assert apriori_gen([("a", "b"), ("a", "c")], order) == []  # (b, c) not frequent


def test_confidence_is_clipped_and_bad_thresholds_refused():
    from ppbn.randomized.perturb.apriori import Itemset

    sets = [
        Itemset(("a",), 10.0, 0.0, 10),
        Itemset(("b",), 30.0, 0.0, 30),
        Itemset(("a", "b"), 12.0, 0.0, 9),
    ]
    rules = association_rules(sets, 100, 0.0)
    assert max(r.confidence for r in rules) == 1.0
    with pytest.raises(UserError, match="min support"):
        frequent_itemsets(_plain(_transactions(10, 1)), 0.0)
    with pytest.raises(UserError, match="min confidence"):
        association_rules(sets, 100, 1.5)
    cards = {"x": 3}
    with pytest.raises(UserError, match="items must be binary"):
        SupportEstimator(RandomizedData.plain(["x"], np.zeros((2, 1), dtype=int), [cards["x"]]))
