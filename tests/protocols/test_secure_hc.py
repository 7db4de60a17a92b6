"""Private hill climbing and secure BDeu: equal to the reference, resumable,
and the parameters checked. Both parties run in threads over the memory channel with
1024-bit keys; the daemon path and the larger networks are measured by
`ppbn bench k2 --search hc --check-reference` (figures in docs/benchmarks.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from secure_runs import alternating_schema, learn_both

from ppbn.bn.k2 import choose_candidate
from ppbn.bn.learn import HCOptions, joined_count_fn, learn_reference
from ppbn.bn.networks import load_network, sample
from ppbn.bn.schema import Schema
from ppbn.bn.scores import family_score
from ppbn.errors import UserError
from ppbn.jobs.learn import check_learn_params
from ppbn.protocols import ring
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.fixedpoint import (
    SCORE_FRAC,
    Shift,
    count_bits_for,
    shift_frac_for,
    term_fixed_many,
)
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.hc import tolerant_argmax
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.ledger import ALLOWED_KINDS, Ledger
from ppbn.protocols.tables import TablesConfig
from ppbn.protocols.yao import YaoParty

TEST_TABLES = TablesConfig(key_bits=1024, workers=1)


def _moves(search):
    return [(m.move.kind, m.move.edge) for m in search.moves]


@pytest.mark.parametrize(
    ("mode", "opts"),
    [("bic", HCOptions()), ("bdeu", HCOptions(tabu_length=5, black_list=[("smoke", "lung")]))],
)
def test_secure_hill_climbing_equals_the_reference(mode, opts):
    """Same moves in the same order, same CPTs; each party learns only the moves."""
    net = load_network("asia")
    codes = sample(net, 2000, 3)
    config = SecureLearnConfig(
        max_parents=2, mode=mode, tables=TEST_TABLES, search="hc", hc=opts, ess=5.0
    )
    alice, bob, ledgers = learn_both(alternating_schema(net), codes, net.names, config)
    reference = learn_reference(
        net.names, net.states, codes, 2, mode, search="hc", hc=opts, ess=5.0
    )
    assert _moves(alice.search) == _moves(reference.search) == _moves(bob.search)
    assert len(reference.search.moves) >= 5
    assert alice.search.parents == reference.search.parents
    assert all(m.delta is None for m in alice.search.moves) and alice.search.score is None
    for v in net.names:
        np.testing.assert_allclose(alice.network.cpts[v], reference.network.cpts[v], atol=1e-9)
    for role, ledger in ledgers.items():
        assert ledger.kinds() <= ALLOWED_KINDS, role
        moves = [
            (e.value["kind"], tuple(e.value["edge"])) for e in ledger.entries if e.kind == "hc_move"
        ]
        assert moves == _moves(reference.search)
        assert [e.kind for e in ledger.entries if e.kind.startswith("hc_")][-1] == "hc_stop"
        assert "k2_decision" not in ledger.kinds()


def test_forced_families_over_the_parent_limit_are_scored_exactly():
    """Fixed edges give dysp three parents under u = 1: the search keeps and scores that
    family, so the decision circuit's width is sized for it (``largest_parents``)."""
    net = load_network("asia")
    codes = sample(net, 1500, 5)
    opts = HCOptions(fixed_edges=[("tub", "dysp"), ("lung", "dysp"), ("bronc", "dysp")])
    config = SecureLearnConfig(
        max_parents=1, mode="exact", tables=TEST_TABLES, search="hc", hc=opts
    )
    assert config.largest_parents == 3 and SecureLearnConfig(max_parents=1).largest_parents == 1
    alice, bob, _ = learn_both(alternating_schema(net), codes, net.names, config)
    reference = learn_reference(net.names, net.states, codes, 1, "exact", search="hc", hc=opts)
    assert _moves(alice.search) == _moves(reference.search) == _moves(bob.search)
    assert set(alice.search.parents["dysp"]) == {"tub", "lung", "bronc"}
    np.testing.assert_allclose(
        alice.network.cpts["dysp"], reference.network.cpts["dysp"], atol=1e-9
    )


def test_resumed_hill_climbing_equals_the_uninterrupted_run():
    net = load_network("asia")
    codes = sample(net, 800, 4)
    config = SecureLearnConfig(max_parents=2, mode="exact", tables=TEST_TABLES, search="hc")
    saved = {"alice": [], "bob": []}
    alice, _, ledgers = learn_both(alternating_schema(net), codes, net.names, config, saved=saved)
    assert [s.step for s in saved["alice"]] == list(range(1, len(alice.search.moves) + 2))
    resume = {r: saved[r][2] for r in saved}  # after three moves
    again, _, again_ledgers = learn_both(
        alternating_schema(net), codes, net.names, config, resume=resume
    )
    assert _moves(again.search) == _moves(alice.search)
    assert again_ledgers["alice"].entries == ledgers["alice"].entries
    # a stored move that is not legal where it is replayed (no edge to delete at step 1)
    wrong = {r: type(saved[r][0])(1, [[["delete", "xray", "asia"]]], {}, {}) for r in saved}
    with pytest.raises(ValueError, match="not a legal move at step 1"):
        learn_both(alternating_schema(net), codes, net.names, config, resume=wrong)


def test_secure_bdeu_family_scores_reconstruct_to_lgamma(ess=1.3):
    net = load_network("asia")
    codes = sample(net, 3000, 5)
    schema = alternating_schema(net)
    column = {v: i for i, v in enumerate(net.names)}
    count = joined_count_fn(net.names, net.states, codes)
    config = SecureLearnConfig(max_parents=2, mode="bdeu", tables=TEST_TABLES, ess=ess)
    families = [
        ("dysp", ("bronc", "either")),
        ("asia", ()),
        ("xray", ("either",)),
        ("lung", ("smoke", "xray")),
    ]

    def side(role):
        mine = [column[v.name] for v in schema.owned_by(role)]
        return lambda ch: SecureScorer(
            ch, role, schema, codes[:, mine], 3000, config, Ledger(role)
        ).scores(families)

    shares_a, shares_b = run_two_party(
        side("alice"), side("bob"), pair=memory_channel_pair(timeout_s=300)
    )
    for (child, parents), a, b in zip(families, shares_a, shares_b, strict=True):
        value = ring.to_signed(ring.add(a, b).reshape(1, 2))[0] / 2**SCORE_FRAC
        table = count((*parents, child))
        expected = family_score(table.reshape(-1, table.shape[-1]), "bdeu", ess=ess)
        assert abs(value - expected) < 1e-6, (child, parents)


def test_bdeu_term_model_equals_lgamma():
    """The fixed-point model of the secure lnG(x + a) (fixedpoint.term_fixed_many)."""
    bits = count_bits_for(20000 + 11)
    rng = np.random.default_rng(1)
    xs = list(range(0, 130)) + rng.integers(0, 20000, 200).tolist() + [20000]
    for a in (5.0, 10 / 6, 10 / 256, 0.3, 10.0):
        got = term_fixed_many(xs, bits, "bdeu", [Shift(a, shift_frac_for(bits))] * len(xs))
        worst = max(
            abs(g / 2**SCORE_FRAC - math.lgamma(x + a)) for x, g in zip(xs, got, strict=True)
        )
        assert worst < 1e-9, a


def test_hill_climbing_and_bdeu_parameters_are_checked(asia_dir):
    schema = Schema.load(str(asia_dir / "schema.json"))
    normal = check_learn_params({"search": "hc", "score": "bdeu", "ess": 4, "tabu": 3}, schema)
    assert (normal["search"], normal["ess"], normal["tabu"]) == ("hc", 4, 3)
    assert check_learn_params(normal, schema) == normal  # the peer checks the normalised form
    for bad, message in [
        ({"search": "dfs"}, "search must be one of"),
        ({"tabu": 3}, "tabu is a hill-climbing setting"),
        ({"search": "hc", "order": list(reversed(schema.names))}, "takes no order"),
        ({"search": "hc", "tabu": -1}, "tabu must be an integer"),
        ({"search": "hc", "black_list": [["asia", "nope"]]}, "black_list must be a list of"),
        ({"search": "hc", "fixed_edges": [["asia", "tub"], ["tub", "asia"]]}, "not acyclic"),
        ({"ess": 3}, "ess is the equivalent sample size of the bdeu score only"),
        ({"score": "bdeu", "ess": 0}, "ess must be a number"),
    ]:
        with pytest.raises(UserError, match=message):
            check_learn_params(bad, schema)


@settings(max_examples=12, deadline=None)
@example([5] * 40 + [10], 6, 1)  # ties across two blocks: the first within tolerance wins
@example([0] * 33 + [100] + [100], 0, 2)  # an exact tie in the second block
@example([-7] * 70, 3, 3)  # stop
@given(
    st.lists(st.integers(-(2**20), 2**20), min_size=1, max_size=80),
    st.integers(0, 2**12),
    st.integers(0, 2**63),
)
def test_staged_argmax_applies_the_tie_rule(values, tolerance, seed):
    """tolerant_argmax on shares equals the tie rule (bn.k2.choose_candidate) on the values,
    over block boundaries, padding and ties."""
    width = 24
    rng = np.random.default_rng(seed)
    masks = [int(m) for m in rng.integers(0, 1 << width, size=len(values))]
    shares = {
        True: masks,
        False: [(v - m) % (1 << width) for v, m in zip(values, masks, strict=True)],
    }

    def side(garbler):
        return lambda ch: tolerant_argmax(YaoParty(ch), garbler, shares[garbler], tolerance, width)

    alice, bob = run_two_party(side(True), side(False), pair=memory_channel_pair(timeout_s=60))
    assert alice == bob == choose_candidate(0, values, tolerance)
