"""The adaptive release of the secure job (protocols/learning/dp_adaptive.py).

Both parties in threads over the memory channel with 1024-bit Paillier keys. The circuits
(pair error, tournament, noise) are tested in tests/circuits and, on shares, in
tests/protocols/test_secure_dp_marginals.py; here: one release at both parties with only
allowed ledger kinds, a table per variable and per round, a network that is a DAG over the
chosen pairs; and the secure rounds choose what the twin chooses where the data leave no
doubt (a chain whose links are worth far more than the noise).
"""

from __future__ import annotations

import numpy as np
from chain_data import CHAIN, CHAIN_STATES, LINKS, chain_codes
from secure_runs import alternating_schema, learn_both

from ppbn.bn.learn import joined_count_fn
from ppbn.bn.model import BayesNet
from ppbn.dp.accounting import plan
from ppbn.dp.adaptive_release import adaptive_twin
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.dp_adaptive import utility_width
from ppbn.protocols.ledger import ALLOWED_KINDS
from ppbn.protocols.tables import TablesConfig

TEST_TABLES = TablesConfig(key_bits=1024, workers=1)
NAMES, STATES = CHAIN, CHAIN_STATES


def _plan(n: int, epsilon: float):
    return plan(
        epsilon,
        n_records=n,
        cardinalities=[2] * len(NAMES),
        max_parents=1,
        mode="bic",
        score_frac=0,
        release="adaptive",
    )


def _network():
    """A stand-in for the schema's network: the chain's names and states (CPTs unused)."""
    uniform = {v: np.full((1, 2), 0.5) for v in NAMES}
    return BayesNet(NAMES, STATES, dict.fromkeys(NAMES, ()), uniform)


def test_the_release_is_one_network_at_both_with_only_allowed_disclosures():
    codes = chain_codes(1500, np.random.default_rng(5))
    dp = _plan(1500, 10.0)
    config = SecureLearnConfig(max_parents=1, mode="bic", tables=TEST_TABLES, dp=dp)
    alice, bob, ledgers = learn_both(alternating_schema(_network()), codes, NAMES, config)
    assert alice.search.parents == bob.search.parents
    for v in NAMES:
        np.testing.assert_array_equal(alice.parameters.cpts[v], bob.parameters.cpts[v])
        cpt = alice.parameters.cpts[v]
        assert np.all(cpt >= 0) and np.allclose(cpt.sum(axis=1), 1.0)
    position = {v: i for i, v in enumerate(alice.search.order)}
    assert all(position[p] < position[c] for p, c in alice.search.edges)  # a DAG, in order
    counts = joined_count_fn(NAMES, STATES, codes)
    twin_pairs = adaptive_twin(NAMES, STATES, codes, 10.0, np.random.default_rng(2))[2]
    for role, ledger in ledgers.items():
        assert ledger.kinds() <= ALLOWED_KINDS
        pairs = [tuple(e.value["pair"]) for e in ledger.entries if e.kind == "dp_pair"]
        assert len(pairs) == dp.decisions == 3, role  # half the six pairs
        # the links, as the twin takes them: each is worth hundreds of counts of L1 error
        # against the model, the noise a few counts
        assert {frozenset(p) for p in pairs} == {frozenset(p) for p in twin_pairs}
        assert {frozenset(p) for p in pairs} == {frozenset(p) for p in LINKS}
        released = [e.value for e in ledger.entries if e.kind == "dp_counts"]
        assert len(released) == dp.released_tables  # |V| 1-way, one pair per round
        for entry in released:
            family = tuple(entry["variables"])
            true = counts(family)
            noisy = np.array(entry["counts"])
            assert noisy.shape == true.shape
            scale = dp.one_way_scale if len(family) == 1 else dp.count_scale
            assert np.abs(noisy - true).max() <= 20 * scale  # noise, not garbage
        one_way = [e for e in released if len(e["variables"]) == 1]
        assert len(one_way) == len(NAMES) and dp.one_way_scale > dp.count_scale


def test_the_utility_width_holds_the_error_and_the_offset():
    width = utility_width(12, 16, 5000)
    assert 1 << (width - 1) > 16 * (1 << 12) + 5000
    assert utility_width(12, 4, 0) == 12 + 2 + 1  # the pair-error circuit's own width
