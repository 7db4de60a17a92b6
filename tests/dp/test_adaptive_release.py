"""The adaptive release (ppbn/dp/adaptive_release.py): its plan and accounting, AIM's
offsets, the network that holds the fitted model's distribution, the rounds, and the
curator's twin end to end."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from chain_data import CHAIN, CHAIN_STATES, LINKS, chain_codes, pair_plan

from ppbn.bn.model import topological_order
from ppbn.dp.accounting import (
    ADAPTIVE_ROUNDS_PER_VARIABLE,
    ONE_WAY_WEIGHT,
    PAIR_ERROR_SENSITIVITY,
    adaptive_rounds_count,
    opendp_epsilon,
)
from ppbn.dp.adaptive_release import (
    adaptive_rounds,
    adaptive_twin,
    all_pairs,
    later_neighbours,
    measurement_offsets,
    model_network,
    round_fit,
)
from ppbn.dp.graphical_fit import Measured, fit_marginals, joint_counts

ALARMISH = [2, 3, 4, 3, 2, 4, 3] * 5 + [2, 2]


def _plan(epsilon, cards, n=20000):
    return pair_plan(epsilon, cards, n, "adaptive")


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 5.0])
@pytest.mark.parametrize("cards", [[2] * 4, [2] * 8, ALARMISH])
def test_the_plan_counts_a_table_per_variable_and_per_round_and_opendp_agrees(epsilon, cards):
    p = _plan(epsilon, cards)
    v = len(cards)
    rounds = min(ADAPTIVE_ROUNDS_PER_VARIABLE * v, v * (v - 1) // 4)  # half the pairs at most
    assert p.release == "adaptive" and p.decisions == rounds
    assert p.released_tables == v + rounds
    assert p.largest_options == v * (v - 1) // 2  # every pair at the first round
    assert p.score_sensitivity == PAIR_ERROR_SENSITIVITY and p.score_frac == 0
    assert not p.stop_option
    assert opendp_epsilon(p) <= epsilon * (1 + 1e-9)
    # a 1-way table spends a quarter of a 2-way one's budget: its counts are noisier
    assert p.one_way_weight == ONE_WAY_WEIGHT["adaptive"] < 1
    assert p.one_way_scale > p.count_scale
    assert p.table_noise(("a",)) == p.one_way_noise and p.table_noise(("a", "b")) == p.count_noise
    b1, b2 = p.one_way_scale, p.count_scale
    if p.accounting == "pure":  # the parts add up to the whole: choices, then 2 cells a table
        spent = p.decisions * p.decision_epsilon + 2 * v / b1 + 2 * rounds / b2
        assert spent == pytest.approx(epsilon)
        assert 2 / b1 == pytest.approx(p.one_way_weight * 2 / b2)
    else:  # rho: choices, then 1 / b^2 a table
        spent = p.decisions * p.decision_epsilon**2 / 2 + v / b1**2 + rounds / b2**2
        assert spent == pytest.approx(p.rho)
        assert 1 / b1**2 == pytest.approx(p.one_way_weight / b2**2)
    pair_cells = sorted((a * b for a, b in itertools.combinations(cards, 2)), reverse=True)
    assert p.cells_bound == sum(cards) + sum(pair_cells[:rounds])
    assert p.as_dict()["release"] == "adaptive"
    assert "AIM" in p.as_dict()["utility"]


def test_the_rounds_are_two_per_variable_and_at_most_half_the_pairs():
    assert [adaptive_rounds_count(v) for v in (1, 2, 3, 4, 5, 8, 11, 37)] == [
        0, 1, 1, 3, 5, 14, 22, 74,
    ]  # fmt: skip


def test_the_offsets_are_aims_penalty_made_non_negative():
    cards = {"a": 2, "b": 2, "c": 4, "d": 3}
    pairs = all_pairs(list(cards))
    offsets = measurement_offsets(pairs, cards, 10.0)
    assert min(offsets.values()) == 0 and offsets[("c", "d")] == 0  # the most cells
    assert all(o >= 0 for o in offsets.values())
    # differences are AIM's: sqrt(2 / pi) sigma per cell
    gap = offsets[("a", "b")] - offsets[("a", "c")]
    assert gap == pytest.approx(np.sqrt(2 / np.pi) * 10.0 * (8 - 4), abs=1)
    assert offsets[("a", "b")] > offsets[("b", "d")] > offsets[("c", "d")]


def test_the_later_neighbours_triangulate_a_cycle():
    names = ("a", "b", "c", "d")
    cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    later = later_neighbours(names, cycle)
    # each variable with its later neighbours is a clique of a triangulation of the cycle
    chords = {frozenset((v, w)) for v in names for w in later[v]}
    assert {frozenset(p) for p in cycle} <= chords and len(chords) == 5
    assert topological_order(names, later)  # no cycle: edges point to the earlier eliminated


def _random_measurements(rng, domain, cliques, n):
    out = []
    for clique in cliques:
        shape = [domain[v] for v in clique]
        table = rng.multinomial(n, rng.dirichlet(np.ones(int(np.prod(shape))))).reshape(shape)
        out.append(Measured(tuple(clique), table.astype(float), 5.0))
    return out


def test_the_network_holds_the_fitted_models_distribution():
    """The joint of the network's CPTs is the model's joint, cell by cell, for a model on a
    cycle of pairs (the network needs a chord and a family of three)."""
    rng = np.random.default_rng(3)
    domain = {"a": 2, "b": 3, "c": 2, "d": 2}
    names = tuple(domain)
    cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    measured = _random_measurements(rng, domain, [(v,) for v in names] + cycle, 1000)
    model = fit_marginals(domain, measured, 1000, iterations=500)
    states = {v: tuple(str(i) for i in range(k)) for v, k in domain.items()}
    net = model_network(model, names, states, cycle)
    assert max(len(ps) for ps in net.parents.values()) == 2
    joint = np.ones([domain[v] for v in names])
    for v in names:
        family = (*net.parents[v], v)
        cpt = net.cpts[v].reshape([domain[x] for x in family])
        axes = [names.index(x) for x in family]
        order = np.argsort(axes)
        aligned = np.transpose(cpt, order).reshape(
            [domain[x] if i in axes else 1 for i, x in enumerate(names)]
        )
        joint = joint * aligned
    expected = joint_counts(model, names) / 1000.0
    np.testing.assert_allclose(joint, expected, atol=1e-9)


def test_the_one_shape_fit_is_the_fit_of_the_measured_pairs_alone():
    """The unmeasured pairs held at infinite standard deviation change nothing: the same
    joint as private-pgm's fit of the measured cliques alone."""
    rng = np.random.default_rng(6)
    domain = {"a": 2, "b": 3, "c": 2, "d": 2}
    names = tuple(domain)
    measured = _random_measurements(
        rng, domain, [(v,) for v in names] + [("a", "c"), ("b", "d")], 500
    )
    one_shape = joint_counts(round_fit(names, domain, measured, 500), names)
    alone = joint_counts(fit_marginals(domain, measured, 500), names)
    np.testing.assert_allclose(one_shape, alone, atol=1e-4)


def test_the_rounds_offer_each_pair_until_it_is_measured():
    names = ("a", "b", "c", "d")
    domain = dict.fromkeys(names, 2)
    rng = np.random.default_rng(0)
    first = _random_measurements(rng, domain, [(v,) for v in names], 100)
    offered, fits = [], []

    def choose(candidates, joint):
        offered.append(list(candidates))
        fits.append(joint is not None)
        return len(candidates) - 1  # the last pair each round

    chosen, measured, _ = adaptive_rounds(
        names, domain, 3, first, choose, lambda p: np.full((2, 2), 25.0), 5.0, 100
    )
    assert offered[0] == all_pairs(names)
    assert chosen == [("c", "d"), ("b", "d"), ("b", "c")]
    assert [len(c) for c in offered] == [6, 5, 4] and all(fits)
    assert [m.clique for m in measured[4:]] == chosen
    _, _, _ = adaptive_rounds(
        names,
        domain,
        1,
        first,
        lambda c, joint: fits.append(joint is not None) or 0,
        lambda p: np.full((2, 2), 25.0),
        5.0,
        100,
        refit=False,
    )
    assert fits[-1] is False  # an evaluator fits once, at the end


def test_the_twin_measures_the_chain_first_at_a_large_epsilon():
    """Each link of the chain is worth far more than the rest: the three rounds (half of
    the six pairs) take them."""
    names, states = CHAIN, CHAIN_STATES
    codes = chain_codes(5000, np.random.default_rng(4))
    net, job, pairs = adaptive_twin(names, states, codes, 10.0, np.random.default_rng(1))
    assert len(pairs) == job.decisions == 3
    assert {frozenset(p) for p in pairs} == {frozenset(p) for p in LINKS}
    joint = np.ones((2, 2, 2, 2))
    for v in names:
        family = (*net.parents[v], v)
        axes = [names.index(x) for x in family]
        cpt = np.transpose(net.cpts[v].reshape([2] * len(family)), np.argsort(axes))
        joint = joint * cpt.reshape([2 if i in axes else 1 for i in range(4)])
    p_ab = joint.sum(axis=(2, 3))
    assert p_ab[0, 0] + p_ab[1, 1] == pytest.approx(0.9, abs=0.03)


def test_the_twin_refuses_missing_cells():
    with pytest.raises(ValueError, match="complete records"):
        adaptive_twin(
            ("a", "b"), {"a": ("0", "1"), "b": ("0", "1")}, np.array([[0, -1], [1, 1]]), 1.0
        )
