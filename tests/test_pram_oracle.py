"""The PRAM score oracle with the shared K2 driver: eta rule, C*, and agreement with the
plaintext reference when nothing is randomized."""

import numpy as np
import pytest

from ppbn.bn.learn import learn_reference
from ppbn.protocols.pram.estimators import PramEstimator
from ppbn.protocols.pram.experiment import experiment1_network
from ppbn.protocols.pram.operators import RandomizationError, RandomizationScheme, RandomSource
from ppbn.protocols.pram.oracle import PramOracle, eta_margin, learn_pram

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
