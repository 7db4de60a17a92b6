"""The marginal release of the secure job (protocols/learning/dp_marginals.py).

Both parties in threads over the memory channel with 1024-bit Paillier keys. The circuits
are tested in plaintext in tests/circuits/test_noisy_tournament.py and the noise laws in
tests/circuits/test_noise_circuits.py; here: one release at both parties, only allowed
ledger kinds, a spanning tree; the utilities the noisy choices compare are exactly the
twin's (``dp.marginal_release.pair_error``); the tournament's winner, wherever it sits
among the blocks, is the best pair when the noise is small next to the gaps; and the
noisy 1-way counts are the plan's discrete Laplace around the true ones.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats
from secure_runs import alternating_schema, learn_both, scorers_run

from ppbn.bn.learn import joined_count_fn
from ppbn.bn.networks import load_network, sample
from ppbn.circuits.pair_error import pair_error_width
from ppbn.dp.accounting import plan
from ppbn.dp.gaussian import discrete_gaussian_pmf
from ppbn.dp.marginal_release import independent_estimate, pair_error
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.dp_marginals import (
    NoisyPairChooser,
    noisy_tables,
    pair_error_shares,
)
from ppbn.protocols.ledger import ALLOWED_KINDS
from ppbn.protocols.tables import TablesConfig

TEST_TABLES = TablesConfig(key_bits=1024, workers=1)


def _plan(net, n, epsilon, share=0.3):
    return plan(
        epsilon,
        n_records=n,
        cardinalities=[len(net.states[v]) for v in net.names],
        max_parents=1,
        mode="bic",
        score_frac=0,
        structure_share=share,
        release="marginals",
    )


def _config(dp):
    return SecureLearnConfig(max_parents=1, mode="bic", tables=TEST_TABLES, dp=dp)


def test_the_release_is_one_tree_at_both_with_only_allowed_disclosures():
    net = load_network("asia")
    codes = sample(net, 1500, 5)
    dp = _plan(net, 1500, 10.0)
    alice, bob, ledgers = learn_both(alternating_schema(net), codes, net.names, _config(dp))
    assert alice.search.edges == bob.search.edges
    assert len(alice.search.edges) == len(net.names) - 1
    roots = [v for v in net.names if not alice.search.parents[v]]
    assert roots == [net.names[0]]  # a tree rooted at the first variable
    assert all(len(ps) <= 1 for ps in alice.search.parents.values())
    for v in net.names:
        np.testing.assert_array_equal(alice.parameters.cpts[v], bob.parameters.cpts[v])
        cpt = alice.parameters.cpts[v]
        assert np.all(cpt >= 0) and np.allclose(cpt.sum(axis=1), 1.0)
    counts = joined_count_fn(net.names, net.states, codes)
    for role, ledger in ledgers.items():
        assert ledger.kinds() <= ALLOWED_KINDS
        pairs = [e.value["pair"] for e in ledger.entries if e.kind == "dp_pair"]
        assert len(pairs) == dp.decisions == len(net.names) - 1, role
        released = [e.value for e in ledger.entries if e.kind == "dp_counts"]
        assert len(released) == dp.released_tables  # |V| 1-way and |V| - 1 pairs
        for entry in released:
            true = counts(tuple(entry["variables"]))
            noisy = np.array(entry["counts"])
            assert noisy.shape == true.shape
            assert np.abs(noisy - true).max() <= 20 * dp.count_scale  # noise, not garbage
    chosen = {frozenset(p) for p in pairs}
    assert chosen == {frozenset(e) for e in alice.search.edges}


def test_the_noisy_choices_compare_the_twins_utilities_exactly():
    """Each pair's L1 error, opened from the two parties' shares, is ``pair_error`` of its
    true counts against the independent estimate of the released 1-way counts."""
    net = load_network("asia")
    codes = sample(net, 800, 8)
    names = net.names
    dp = _plan(net, 800, 2.0)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]

    def work(scorer):
        tables = scorer.table_shares([(v,) for v in names] + pairs)
        one_way = noisy_tables(scorer, dp, [(v,) for v in names], tables)

        def estimate(pair):
            return independent_estimate(one_way[pair[:1]], one_way[pair[1:]], 800)

        width = pair_error_width(scorer.count_bits, 4)
        return width, pair_error_shares(scorer, pairs, tables, estimate, width), one_way

    (width, a, released), (_, b, _), _ = scorers_run(
        alternating_schema(net), codes, names, _config(dp), work
    )
    counts = joined_count_fn(names, net.states, codes)
    for x, y in pairs:
        opened = (a[(x, y)] + b[(x, y)]) % (1 << width)
        estimate = independent_estimate(released[(x,)], released[(y,)], 800)
        assert opened == pair_error(counts((x, y)), estimate), (x, y)


@pytest.mark.parametrize("best", [0, 7, 8, 20])
def test_the_tournament_picks_the_best_pair_wherever_it_sits(best: int) -> None:
    """Utilities at least 500 counts apart under noise of scale ~9 counts: the winner is
    the best candidate of each offered list, whichever block holds it; the errors enter as
    shares."""
    net = load_network("asia")
    dp = dataclasses.replace(_plan(net, 2000, 10.0), decisions=4, largest_options=24)
    names = [f"v{i}" for i in range(24)]
    candidates = [(names[0], v) for v in names[1:]] + [(names[1], names[2])]
    rng = np.random.default_rng(best)
    ranks = rng.permutation(len(candidates))
    values = {p: 500 * (1 + int(r)) for p, r in zip(candidates, ranks, strict=True)}
    values[candidates[best]] = 500 * 40
    width = 16
    masks = {p: int(rng.integers(0, 1 << width)) for p in candidates}

    def work(scorer):
        mine = (
            masks
            if scorer.role == "alice"
            else {p: (values[p] - masks[p]) % (1 << width) for p in candidates}
        )
        chooser = NoisyPairChooser(scorer, dp, width, mine)
        return [chooser.choose(candidates[:n]) for n in (24, 21, 9)]

    codes = sample(net, 50, 1)
    alice, bob, _ = scorers_run(alternating_schema(net), codes, net.names, _config(dp), work)
    assert alice == bob
    for n, got in zip((24, 21, 9), alice, strict=True):
        subset = {p: values[p] for p in candidates[:n]}
        assert got == candidates.index(max(subset, key=subset.get)), (n, got)


def test_noisy_one_way_counts_are_discrete_gaussian_around_the_truth():
    net = load_network("asia")
    codes = sample(net, 1200, 6)
    dp = _plan(net, 1200, 8.0, share=0.5)
    assert dp.count_family == "gaussian"  # zcdp, and a sigma the circuit affords
    names = net.names
    counts = joined_count_fn(names, net.states, codes)
    noise = []
    for _ in range(3):

        def work(scorer):
            tables = scorer.table_shares([(v,) for v in names])
            return noisy_tables(scorer, dp, [(v,) for v in names], tables)

        alice, _, _ = scorers_run(alternating_schema(net), codes, names, _config(dp), work)
        for v in names:
            noise += list((alice[(v,)] - counts((v,))).ravel())
    noise = np.array(noise)
    values = np.arange(-8, 9)
    expected = discrete_gaussian_pmf(values, dp.one_way_scale) * noise.size
    observed = np.array([np.sum(noise == z) for z in values], dtype=float)
    tails = (noise.size - observed.sum(), noise.size - expected.sum())
    _, p = stats.chisquare(np.append(observed, tails[0]), np.append(expected, tails[1]))
    assert p > 1e-4, (p, noise.size, dp.one_way_scale)
