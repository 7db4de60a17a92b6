"""The differentially private release of the secure job (protocols/learning/dp.py).

Both parties in threads over the memory channel with 1024-bit Paillier keys. The noise
circuits' distributions are tested in tests/circuits/test_noise_circuits.py; here: the
job's release (same at both parties, only allowed ledger kinds, CPTs from the noisy
counts), the noise the protocol adds to real table shares, and that what a party receives
does not depend on the data or the noise.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from secure_runs import alternating_schema, learn_both, scorers_run
from views import profile_p_value, sign_profiles

from ppbn.bn.k2 import K2Request
from ppbn.bn.learn import joined_count_fn, learn_reference
from ppbn.bn.networks import load_network, sample
from ppbn.dp.accounting import plan
from ppbn.dp.noise import discrete_laplace_pmf
from ppbn.protocols.fixedpoint import SCORE_FRAC
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.dp import NoisyOracle, noisy_parameters
from ppbn.protocols.ledger import ALLOWED_KINDS
from ppbn.protocols.tables import TablesConfig

TEST_TABLES = TablesConfig(key_bits=1024, workers=1)


def _plan(net, n, epsilon, max_parents=2, mode="exact", share=0.3):
    return plan(
        epsilon,
        n_records=n,
        cardinalities=[len(net.states[v]) for v in net.names],
        max_parents=max_parents,
        mode=mode,
        score_frac=SCORE_FRAC,
        structure_share=share,
    )


def test_dp_job_releases_one_network_to_both_with_only_allowed_disclosures():
    net = load_network("asia")
    codes = sample(net, 3000, 5)
    schema = alternating_schema(net)
    dp = _plan(net, 3000, 20.0)
    config = SecureLearnConfig(max_parents=2, mode="exact", tables=TEST_TABLES, dp=dp)
    alice, bob, ledgers = learn_both(schema, codes, net.names, config)
    assert alice.search.edges == bob.search.edges
    for v in net.names:
        np.testing.assert_array_equal(alice.parameters.cpts[v], bob.parameters.cpts[v])
        cpt = alice.parameters.cpts[v]
        assert np.all(cpt >= 0) and np.allclose(cpt.sum(axis=1), 1.0)
    for role, ledger in ledgers.items():
        assert ledger.kinds() <= ALLOWED_KINDS
        assert {"k2_decision", "dp_counts", "parameter", "structure"} <= ledger.kinds()
        decisions = [e for e in ledger.entries if e.kind == "k2_decision"]
        assert 0 < len(decisions) <= dp.decisions, role
        assert all("noisy" in e.source for e in decisions)
    # full families stay useful here, so the plan leaves "stop" out and the secure job
    # honours it: every child takes min(u, position) parents, every choice is made
    assert not dp.stop_option
    assert len(decisions) == dp.decisions
    for position, v in enumerate(net.names):
        assert len(alice.search.parents[v]) == min(2, position), v
    # at epsilon 20 the noise is small next to asia's strong dependencies: most of the
    # reference's edges are found, and the CPTs are close to the exact ones
    reference = learn_reference(net.names, net.states, codes, 2, "exact")
    found = set(alice.search.edges) & set(reference.search.edges)
    assert len(found) >= len(reference.search.edges) // 2
    counts = joined_count_fn(net.names, net.states, codes)
    for v in net.names:
        table = counts((*alice.search.parents[v], v)).reshape(-1, len(net.states[v]))
        noisy = np.array(
            next(
                e.value["counts"]
                for e in ledgers["alice"].entries
                if e.kind == "dp_counts" and e.value["variable"] == v
            )
        )
        assert noisy.shape == table.shape
        assert np.abs(noisy - table).max() <= 20 * dp.count_scale  # noise, not garbage


def test_refuses_what_a_dp_job_cannot_do():
    net = load_network("asia")
    dp = _plan(net, 1000, 1.0)
    for change, words in (
        ({"search": "hc"}, "K2"),
        ({"disclosure": "owner"}, "public"),
        ({"mode": "yw"}, "exact or bic"),
        ({"available_case": True}, "complete records"),
    ):
        config = SecureLearnConfig(max_parents=2, tables=TEST_TABLES, dp=dp, **change)
        with pytest.raises(ValueError, match=words):
            config.check_dp()


def test_noise_on_real_table_shares_is_discrete_laplace():
    """The counts the protocol opens minus the true counts, over every cell of a fixed
    structure in several runs: discrete Laplace of the plan's scale (chi-square)."""
    net = load_network("asia")
    codes = sample(net, 2000, 6)
    schema = alternating_schema(net)
    dp = _plan(net, 2000, 8.0, share=0.5)  # count scale 2 * 8 / 4 = 4
    config = SecureLearnConfig(max_parents=2, tables=TEST_TABLES, dp=dp)
    parents = {v: () for v in net.names} | {
        "either": ("tub", "lung"),
        "dysp": ("bronc", "either"),
        "xray": ("either",),
    }
    counts = joined_count_fn(net.names, net.states, codes)
    noise = []
    for _ in range(6):
        alice, _, _ = scorers_run(
            schema,
            codes,
            net.names,
            config,
            lambda s: (noisy_parameters(s, parents, dp, lambda: None), s.ledger),
        )
        for entry in alice[1].entries:
            if entry.kind == "dp_counts":
                v = entry.value["variable"]
                true = counts((*parents[v], v)).reshape(-1, len(net.states[v]))
                noise += list((np.array(entry.value["counts"]) - true).ravel())
    noise = np.array(noise)
    values = np.arange(-12, 13)
    expected = discrete_laplace_pmf(values, dp.count_scale) * noise.size
    observed = np.array([np.sum(noise == z) for z in values], dtype=float)
    tails = noise.size - observed.sum()
    expected_tails = noise.size - expected.sum()
    statistic, p = stats.chisquare(np.append(observed, tails), np.append(expected, expected_tails))
    assert p > 1e-4, (p, noise.size)
    assert abs(noise.mean()) < 4 * noise.std() / np.sqrt(noise.size)


REVEALED = ("yao.out_values",)  # the released winner and noisy counts themselves


def test_what_a_party_receives_does_not_depend_on_data_or_noise():
    """The first K2 wave's noisy choices and the noisy counts of a fixed structure, on asia
    records and on independent uniform records (other counts, other scores, other noise):
    under every message tag and byte position except the revealed outputs, the byte
    profile each party receives is the same (chi-square, Bonferroni)."""
    net = load_network("asia")
    schema = alternating_schema(net)
    dp = _plan(net, 1500, 1.0)
    config = SecureLearnConfig(max_parents=2, tables=TEST_TABLES, dp=dp)
    names = net.names
    requests = [K2Request(v, (), tuple(names[:i])) for i, v in enumerate(names) if i]
    parents = {v: () for v in names} | {"either": ("tub", "lung"), "xray": ("either",)}

    def work(scorer):
        NoisyOracle(scorer, dp, lambda: None).best_parents(requests, 0.0)
        noisy_parameters(scorer, parents, dp, lambda: None)

    rng = np.random.default_rng(3)
    views = []
    for codes in (sample(net, 1500, 4), rng.integers(0, 2, size=(1500, len(names)))):
        _, _, pair = scorers_run(schema, codes, names, config, work, keep_transcript=True)
        views.append(
            [
                sign_profiles(
                    [(t, p) for t, p in end.transcript if not t.startswith(("tables.",) + REVEALED)]
                )
                for end in pair
            ]
        )
    p_values = []
    for party in (0, 1):
        first, second = views[0][party], views[1][party]
        assert set(first) == set(second)
        for key in sorted(first):
            a, b = first[key], second[key]
            assert a.sum() == b.sum(), f"{key}: message sizes depend on the data"
            p = profile_p_value(a, b, 4)
            if p is not None:
                p_values.append((p, party, key))
    assert len(p_values) >= 3
    worst = min(p_values)
    assert worst[0] > 1e-3 / len(p_values), worst
