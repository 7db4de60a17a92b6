"""The PRAM score oracle with the shared K2 driver: eta rule, C*, and agreement with the
plaintext reference when nothing is randomized."""

import numpy as np
import pytest

from ppbn.bn.learn import learn_reference
from ppbn.lab.pram_experiment import experiment1_network
from ppbn.randomized.pram.estimators import PramEstimator
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme, RandomSource
from ppbn.randomized.pram.oracle import (
    PramOracle,
    eta_margin,
    learn_pram,
    learn_pram_setup_one,
    setup_one_view,
)

NET = experiment1_network()
NAMES = NET.order
STATES = {v: tuple(f"s{i}" for i in range(NET.cardinalities[v])) for v in NAMES}


@pytest.fixture(scope="module")
def data():
    return NET.sample(10000, np.random.default_rng(3))


@pytest.fixture(scope="module")
def reference(data):
    return learn_reference(NAMES, STATES, data, 2, "exact")


@pytest.mark.parametrize("mode", ["exact", "bic", "yw0"])
def test_without_randomization_pram_equals_the_reference(data, mode):
    ref = learn_reference(NAMES, STATES, data, 2, mode)
    scheme = RandomizationScheme(NET.cardinalities)
    got = learn_pram(NAMES, STATES, data, scheme, 2, mode)
    assert got.search.edges == ref.search.edges
    for v in NAMES:
        assert np.allclose(got.network.cpts[v], ref.network.cpts[v])


def test_reference_recovers_the_generating_graph(reference):
    assert all(set(reference.search.parents[v]) == set(NET.parents[v]) for v in NAMES)


def _extra_links(learned, reference):
    return len(set(learned.search.edges) - set(reference.search.edges))


def test_randomization_adds_links_and_eta_or_c_star_remove_them(data, reference):
    scheme = RandomizationScheme.uniform(NET.cardinalities, 0.1)
    randomized = scheme.randomize(data, NAMES, RandomSource.from_seed("p0.1"))
    plain = learn_pram(NAMES, STATES, randomized, scheme, 2, "exact")
    with_eta = learn_pram(NAMES, STATES, randomized, scheme, 2, "exact", eta=0.99)
    bic = learn_pram(NAMES, STATES, randomized, scheme, 2, "bic")
    bic_c4 = learn_pram(NAMES, STATES, randomized, scheme, 2, "bic", c_star=4.0)
    assert _extra_links(plain, reference) > 0
    assert _extra_links(with_eta, reference) < _extra_links(plain, reference)
    assert _extra_links(bic_c4, reference) < _extra_links(bic, reference)


def test_eta_rule_blocks_rises_below_the_relative_margin(data):
    scheme = RandomizationScheme.uniform(NET.cardinalities, 0.1)
    randomized = scheme.randomize(data, NAMES, RandomSource.from_seed("eta"))
    est = PramEstimator(NAMES, randomized, scheme)
    loose, strict = PramOracle(est, "exact"), PramOracle(est, "exact", eta=0.999)
    current = loose.score("X", ())
    rise = loose.score("X", ("E",)) - current
    assert rise > 0
    chosen = strict.best_parent("X", (), ("E",), 1e-3)
    assert (chosen == "E") == (rise > eta_margin(current, 0.999))
    assert eta_margin(-1000.0, 1.0) == 0.0
    assert eta_margin(-1000.0, 0.99) == pytest.approx(10.05, abs=0.01)


def test_em_counts_give_a_valid_network(data):
    scheme = RandomizationScheme.uniform(NET.cardinalities, 0.1, sensitive=["A", "E", "X"])
    randomized = scheme.randomize(data, NAMES, RandomSource.from_seed("em"))
    learned = learn_pram(NAMES, STATES, randomized, scheme, 2, "exact", counts="em")
    for v in NAMES:
        assert np.allclose(learned.network.cpts[v].sum(axis=1), 1.0)
        assert learned.network.cpts[v].min() >= 0


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"eta": 0.0}, "eta"),
        ({"eta": 1.5}, "eta"),
        ({"c_star": 0.0}, "C\\*"),
        ({"mode": "nope"}, "score mode"),
        ({"counts": "x"}, "estimator"),
    ],
)
def test_oracle_settings_are_checked(data, kwargs, fragment):
    est = PramEstimator(NAMES, data, RandomizationScheme(NET.cardinalities))
    with pytest.raises(RandomizationError, match=fragment):
        PramOracle(est, **kwargs)


OWNER = {v: ("alice" if i % 2 == 0 else "bob") for i, v in enumerate(NAMES)}


def test_setup_one_view_keeps_own_columns_and_the_others_blocks(data):
    scheme = RandomizationScheme.uniform(NET.cardinalities, 0.2)
    randomized = scheme.randomize(data, NAMES, RandomSource.from_seed("view"))
    view, view_scheme = setup_one_view(NAMES, OWNER, "alice", data, randomized, scheme)
    for i, v in enumerate(NAMES):
        expected = data[:, i] if OWNER[v] == "alice" else randomized[:, i]
        assert np.array_equal(view[:, i], expected)
    assert set(view_scheme.randomized) == {v for v in NAMES if OWNER[v] == "bob"}
    mixed = RandomizationScheme.from_spec(
        NET.cardinalities, {"A+S": {"kind": "multi_category", "p": 0.2}}
    )
    with pytest.raises(RandomizationError, match="mixes"):
        setup_one_view(NAMES, OWNER, "alice", data, data, mixed)


def test_setup_one_counts_own_families_exactly_and_beats_setup_two(data, reference):
    scheme = RandomizationScheme.uniform(NET.cardinalities, 0.1)
    randomized = scheme.randomize(data, NAMES, RandomSource.from_seed("p0.1"))
    search, network, oracles = learn_pram_setup_one(
        NAMES, STATES, OWNER, data, randomized, scheme, 2, "exact"
    )
    # a party's own family with no cross parent is counted on raw data: A's CPT is exact
    assert np.allclose(network.cpts["A"], reference.network.cpts["A"])
    assert all(OWNER[child] == party for party, o in oracles.items() for child, _, _ in o.evaluated)
    setup_two = learn_pram(NAMES, STATES, randomized, scheme, 2, "exact")
    extra_one = len(set(search.edges) - set(reference.search.edges))
    assert extra_one < _extra_links(setup_two, reference)
