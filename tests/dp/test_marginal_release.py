"""The marginal release (ppbn/dp/marginal_release.py): its plan and accounting, the tree
rounds, the utility and its stated sensitivity, and the curator's twin end to end."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from chain_data import CHAIN, CHAIN_STATES, LINKS, chain_codes, pair_plan

from ppbn.bn.k2 import count_table
from ppbn.bn.networks import sample
from ppbn.dp.accounting import PAIR_ERROR_SENSITIVITY, opendp_epsilon, plan
from ppbn.dp.marginal_release import (
    candidate_pairs,
    independent_estimate,
    marginal_twin,
    orient,
    pair_error,
    tree_rounds,
)
from ppbn.lab.dp_utility import tvd_2way

ALARMISH = [2, 3, 4, 3, 2, 4, 3] * 5 + [2, 2]


def _plan(epsilon, cards, n=20000):
    return pair_plan(epsilon, cards, n, "marginals")


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 5.0])
@pytest.mark.parametrize("cards", [[2] * 8, ALARMISH])
def test_the_plan_counts_two_tables_per_variable_and_opendp_agrees(epsilon, cards):
    p = _plan(epsilon, cards)
    v = len(cards)
    assert p.release == "marginals" and p.decisions == v - 1
    assert p.released_tables == 2 * v - 1
    assert p.largest_options == (v // 2) * (v - v // 2)
    assert p.score_sensitivity == PAIR_ERROR_SENSITIVITY and p.score_frac == 0
    assert not p.stop_option
    assert opendp_epsilon(p) <= epsilon * (1 + 1e-9)
    if p.accounting == "pure":  # the parts add up to the whole: choices, then 2 T cells
        spent = p.decisions * p.decision_epsilon + 2 * p.released_tables / p.count_scale
        assert spent == pytest.approx(epsilon)
    assert p.as_dict()["release"] == "marginals"
    network = plan(
        epsilon, n_records=20000, cardinalities=cards, max_parents=1, mode="exact", score_frac=49
    )
    # the same budget over more tables: the marginal release's counts are noisier
    assert p.count_scale > network.count_scale


def test_tree_rounds_grow_one_spanning_tree_from_the_first_variable():
    names = ("a", "b", "c", "d", "e")
    seen = []

    def last(candidates):
        seen.append(list(candidates))
        return len(candidates) - 1

    pairs = tree_rounds(names, last)
    assert len(pairs) == 4
    assert seen[0] == [("a", "b"), ("a", "c"), ("a", "d"), ("a", "e")]
    joined = {"a"}
    for round_candidates, (x, y) in zip(seen, pairs, strict=True):
        assert all((p in joined) != (q in joined) for p, q in round_candidates)
        assert (x in joined) != (y in joined)
        joined |= {x, y}
    assert joined == set(names)
    assert [len(c) for c in seen] == [k * (5 - k) for k in range(1, 5)]
    order, edges = orient(names, pairs)
    assert order[0] == "a" and sorted(order) == sorted(names)
    assert {frozenset(e) for e in edges} == {frozenset(p) for p in pairs}
    assert candidate_pairs(names, set(names)) == []
    with pytest.raises(ValueError, match="span"):
        orient(names, pairs[:2])


def test_the_utility_moves_by_at_most_its_sensitivity():
    """Replacing one record moves one count of the pair's table: |change| <= 2, and 2 is
    reached."""
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 3, size=(200, 2))
    noisy_a, noisy_b = np.array([80, 70, 40]), np.array([30, 90, 85])
    estimate = independent_estimate(noisy_a, noisy_b, 200)
    assert estimate.shape == (3, 3) and abs(int(estimate.sum()) - 200) <= 9
    base = pair_error(count_table(codes, [0, 1], [3, 3]), estimate)
    worst = 0
    for row, (x, y) in itertools.product(range(0, 200, 17), itertools.product(range(3), repeat=2)):
        changed = codes.copy()
        changed[row] = (x, y)
        moved = abs(pair_error(count_table(changed, [0, 1], [3, 3]), estimate) - base)
        assert moved <= PAIR_ERROR_SENSITIVITY
        worst = max(worst, moved)
    assert worst == PAIR_ERROR_SENSITIVITY


def test_the_twin_finds_the_chain_at_a_large_epsilon_and_loses_it_at_a_tiny_one():
    rng = np.random.default_rng(4)
    names, states = CHAIN, CHAIN_STATES
    codes = chain_codes(5000, rng)
    net, job, pairs = marginal_twin(names, states, codes, 10.0, np.random.default_rng(1))
    assert {frozenset(p) for p in pairs} == {frozenset(p) for p in LINKS}
    assert net.parents == {"a": (), "b": ("a",), "c": ("b",), "d": ("c",)}
    assert net.cpts["b"][0, 0] == pytest.approx(0.9, abs=0.03)
    synthetic = sample_codes(net, 5000)
    close = tvd_2way(codes, synthetic, [2] * 4)
    assert close < 0.03
    far = np.median(
        [
            tvd_2way(
                codes,
                sample_codes(
                    marginal_twin(names, states, codes, 0.002, np.random.default_rng(s))[0], 5000
                ),
                [2] * 4,
            )
            for s in range(3)
        ]
    )
    assert far > 2 * close


def sample_codes(net, n):
    return sample(net, n, 11)


def test_the_twin_refuses_missing_cells():
    with pytest.raises(ValueError, match="complete records"):
        marginal_twin(
            ("a", "b"), {"a": ("0", "1"), "b": ("0", "1")}, np.array([[0, -1], [1, 1]]), 1.0
        )
