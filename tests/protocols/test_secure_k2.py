"""The private K2 and parameters: equal to the reference, and nothing else leaks.

Both parties run in threads over the in-memory channel with 1024-bit Paillier keys (the
daemon path is exercised in test_learn_job.py). Larger networks (alarm, u = 3) are
checked by `ppbn bench k2 --check-reference`, whose figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from views import profile_p_value, sign_profiles

from ppbn.bn.learn import joined_count_fn, learn_reference
from ppbn.bn.networks import load_network, sample
from ppbn.bn.schema import Schema, Variable
from ppbn.bn.scores import family_score
from ppbn.jobs.learn import combine_parameter_shares, write_parameter_shares
from ppbn.protocols import ring
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.fixedpoint import SCORE_FRAC
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.learn import learn_secure
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.ledger import ALLOWED_KINDS, Ledger
from ppbn.protocols.tables import TablesConfig

TEST_TABLES = TablesConfig(key_bits=1024, workers=1)


def _schema(net) -> Schema:
    return Schema(
        "id",
        tuple(
            Variable(v, "alice" if i % 2 == 0 else "bob", net.states[v])
            for i, v in enumerate(net.names)
        ),
    )


def _run(net, codes, config, keep_transcript=False):
    """Both parties in threads; with ``keep_transcript`` each keeps its whole view (the
    messages it received and the masked values it opened)."""
    schema = _schema(net)
    column = {v: i for i, v in enumerate(net.names)}
    ledgers = {r: Ledger(r) for r in ("alice", "bob")}

    def side(role):
        mine = [column[v.name] for v in schema.owned_by(role)]
        return lambda ch: learn_secure(
            ch, role, schema, codes[:, mine], config, ledgers[role], keep_openings=keep_transcript
        )

    pair = memory_channel_pair(timeout_s=300, keep_transcript=keep_transcript)
    alice, bob = run_two_party(side("alice"), side("bob"), pair=pair)
    return alice, bob, ledgers, pair


@pytest.mark.parametrize(
    ("network", "mode", "max_parents"),
    [
        ("asia", "exact", 2),
        ("asia", "yw", 2),
        ("asia", "yw0", 3),
        ("asia", "bic", 2),
        ("sachs", "exact", 3),
        ("child", "yw0", 2),
    ],
)
def test_secure_structure_and_parameters_equal_the_reference(network, mode, max_parents):
    _learn_equal_to_the_reference(network, mode, max_parents, seed=11)


def test_ot_extensions_at_k_4_give_the_same_network():
    """SoftSpokenOT at k = 4 (``ot_k``): other pads and twice the u bytes, the same result."""
    _learn_equal_to_the_reference("asia", "exact", 2, seed=11, ot_k=4)


def _learn_equal_to_the_reference(network: str, mode: str, max_parents: int, seed: int, **options):
    """Learn 2,000 sampled records securely; assert both parties got the reference's
    structure, edge order and CPTs; return the channel pair."""
    net = load_network(network)
    codes = sample(net, 2000, seed)
    config = SecureLearnConfig(max_parents=max_parents, mode=mode, tables=TEST_TABLES, **options)
    alice, bob, _, pair = _run(net, codes, config)
    reference = learn_reference(net.names, net.states, codes, max_parents, mode)
    assert alice.search.edges == reference.search.edges == bob.search.edges
    for v in net.names:
        np.testing.assert_allclose(alice.network.cpts[v], reference.network.cpts[v], atol=1e-9)
        np.testing.assert_array_equal(alice.network.cpts[v], bob.network.cpts[v])
        assert alice.network.unobserved.get(v, ()) == reference.network.unobserved.get(v, ())
    return pair


@pytest.mark.parametrize(
    ("network", "mode", "max_parents"), [("asia", "exact", 2), ("sachs", "yw", 2)]
)
def test_pipelined_table_phase_gives_the_same_network(monkeypatch, network, mode, max_parents):
    """With small pipeline groups every batch of families is scored in several groups,
    each next group's table phase on a lane of the channel in a second thread: the result
    is still the reference's, and the table phase's bytes are counted under "tables"."""
    from ppbn.protocols.learning import scorer as scoring

    monkeypatch.setattr(scoring, "PIPELINE_MIN_TERMS", 8)
    pair = _learn_equal_to_the_reference(network, mode, max_parents, seed=12)
    assert pair[0]._lanes_opened >= 4  # several K2 steps, each in several groups
    kinds = pair[0].stats.by_kind
    on_lanes = {
        tag for (section, tag) in kinds if section == "tables"
    }  # the main thread labels nothing here
    assert on_lanes and all(tag.startswith("tables.") for tag in on_lanes)


@pytest.mark.parametrize(
    ("network", "mode", "max_parents"), [("asia", "exact", 2), ("sachs", "bdeu", 2)]
)
def test_terms_split_in_two_halves_give_the_same_network(monkeypatch, network, mode, max_parents):
    """Every batch of terms runs as two halves side by side, the second on the terms lane
    with its own OTs, garbling and hashes (``SecureScorer.terms``): the result is still the
    reference's (bdeu: the shifts split with the counts), and the lane's bytes are counted
    under the same phases as the main thread's."""
    from ppbn.protocols.channel import LaneChannel
    from ppbn.protocols.learning import learn as learning
    from ppbn.protocols.learning.terms import TermsEngine

    on_lane = []  # the party of each half batch that ran on the terms lane
    terms = TermsEngine.terms

    def recording(self, *args):
        if isinstance(self.yao.channel, LaneChannel):
            on_lane.append(self.role)
        return terms(self, *args)

    monkeypatch.setattr(TermsEngine, "terms", recording)
    learn = learning.learn_secure

    def labelling(
        channel, *args, **kwargs
    ):  # as the daemon does: each phase labels the bytes after it
        def progress(message: str, done: int, total: int) -> None:
            if message.startswith("phase "):
                channel.stats.section = message[len("phase ") :]

        return learn(channel, *args, **{**kwargs, "progress": progress})

    monkeypatch.setattr(sys.modules[__name__], "learn_secure", labelling)
    pair = _learn_equal_to_the_reference(
        network, mode, max_parents, seed=13, split_terms=True, split_terms_from=2
    )
    assert on_lane.count("alice") >= 2 and on_lane.count("bob") >= 2  # several batches, each split
    by_kind = pair[0].stats.by_kind
    share_sections = {section for (section, tag) in by_kind if tag.startswith("arith.")}
    assert share_sections == {"ln terms (shares)"}  # the lane's too: none under another phase
    assert ("ln terms (Yao)", "yao.tables") in by_kind


def test_pipeline_groups_weigh_secure_terms_and_start_small(monkeypatch):
    """Groups follow the families' secure terms (a local family weighs nothing) and the
    first group, whose table phase nothing overlaps, gets about half a share."""
    from ppbn.protocols.learning import scorer as scoring

    monkeypatch.setattr(scoring, "PIPELINE_MIN_TERMS", 1)
    net = load_network("child")
    schema = _schema(net)
    pair = memory_channel_pair(timeout_s=30)
    scorer = SecureScorer(
        pair[0],
        "alice",
        schema,
        np.zeros((10, 10), dtype=np.int64),
        10,
        SecureLearnConfig(tables=TEST_TABLES),
        Ledger("alice"),
    )
    names = net.names
    families = [
        (names[i], names[j]) for i in range(len(names)) for j in range(len(names)) if i != j
    ]
    groups = scorer.pipeline_groups(families)
    assert [f for g in groups for f in g] == families and len(groups) == scoring.PIPELINE_GROUPS
    weights = [sum(scorer.secure_terms(f) for f in g) for g in groups]
    local = [f for f in families if schema.owner(f[0]) == schema.owner(f[1])]
    assert local and all(scorer.secure_terms(f) == 0 for f in local)
    share = sum(weights) / (len(groups) - 0.5)
    largest = max(scorer.secure_terms(f) for f in families)
    assert abs(weights[0] - share / 2) <= largest
    assert all(abs(w - share) <= 2 * largest for w in weights[1:])


def test_overlap_off_keeps_the_table_phase_on_the_channel(monkeypatch):
    from ppbn.protocols.learning import scorer as scoring

    monkeypatch.setattr(scoring, "PIPELINE_MIN_TERMS", 8)
    net = load_network("asia")
    config = SecureLearnConfig(max_parents=1, mode="yw", tables=TEST_TABLES, overlap_tables=False)
    alice, _, _, pair = _run(net, sample(net, 500, 3), config)
    assert (
        alice.search.edges
        == learn_reference(net.names, net.states, sample(net, 500, 3), 1, "yw").search.edges
    )
    assert pair[0]._lanes_opened == 0


def test_secure_scores_reconstruct_to_the_plaintext_scores():
    net = load_network("asia")
    codes = sample(net, 3000, 5)
    schema = _schema(net)
    column = {v: i for i, v in enumerate(net.names)}
    count = joined_count_fn(net.names, net.states, codes)
    # owners alternate: bob's dysp alone and with bob's either (all terms local to bob);
    # alice's parents with bob's child and the reverse (rows local); mixed parents
    # and two children (both binary) of the same mixed parents, whose rows are run once
    keys = [
        ("dysp", ()),
        ("dysp", ("either",)),
        ("dysp", ("bronc",)),
        ("xray", ("either", "lung")),
        ("dysp", ("bronc", "either")),
        ("xray", ("bronc", "either")),
    ]
    # secure terms: the crossing families' cells (4 + 8 + 8 + 8), the mixed parents' rows
    # (4, once); under available-case the rows of the single-owner parents too (2 + 4) and
    # the mixed parents' rows per child (4 more)
    for mode, available_case, secure_terms in [
        ("exact", False, 32),
        ("yw", False, 32),
        ("yw0", False, 32),
        ("bic", False, 32),
        ("bdeu", False, 32),
        ("exact", True, 42),
    ]:
        config = SecureLearnConfig(
            max_parents=2, mode=mode, tables=TEST_TABLES, available_case=available_case
        )
        pair = memory_channel_pair(timeout_s=300)
        scorers = {
            role: SecureScorer(
                end,
                role,
                schema,
                codes[:, [column[v.name] for v in schema.owned_by(role)]],
                codes.shape[0],
                config,
                Ledger(role),
            )
            for role, end in zip(("alice", "bob"), pair, strict=True)
        }

        def scores(role, scorers=scorers):
            with scorers[role].tables:
                return scorers[role].scores(keys)

        shares_a, shares_b = run_two_party(
            lambda _: scores("alice"), lambda _: scores("bob"), pair=pair
        )
        for (child, parents), a, b in zip(keys, shares_a, shares_b, strict=True):
            secure = ring.to_signed(ring.add(a, b).reshape(1, 2))[0] / 2**SCORE_FRAC
            table = count((*parents, child)).reshape(-1, net.cardinality(child))
            assert secure == pytest.approx(family_score(table, mode), abs=1e-6), (
                mode,
                child,
                parents,
            )
        assert scorers["alice"].evaluations == scorers["bob"].evaluations == secure_terms, mode
        # alice's share of bob's own family is the public term alone: she computed none of it
        public = int(round(scorers["alice"].public_term(2, 2) * 2**SCORE_FRAC)) % ring.MODULUS
        assert ring.to_ints(shares_a[1].reshape(1, 2)) == [public]


@pytest.mark.parametrize("disclosure", ["public", "owner", "shared"])
def test_ledger_holds_only_allowed_disclosures(disclosure, tmp_path):
    net = load_network("asia")
    codes = sample(net, 1500, 2)
    config = SecureLearnConfig(
        max_parents=2, mode="exact", disclosure=disclosure, tables=TEST_TABLES
    )
    alice, bob, ledgers, _ = _run(net, codes, config)
    schema = _schema(net)
    for role, result in (("alice", alice), ("bob", bob)):
        ledger = ledgers[role]
        assert ledger.kinds() <= ALLOWED_KINDS
        assert {"schema", "record_count", "k2_decision", "edge", "structure"} <= ledger.kinds()
        edges = [tuple(e.value) for e in ledger.entries if e.kind == "edge"]
        assert edges == result.search.edges
        chosen = [
            e.value["chosen"]
            for e in ledger.entries
            if e.kind == "k2_decision" and e.value["chosen"]
        ]
        assert sorted(chosen) == sorted(p for p, _ in result.search.edges)
        seen = {e.value["variable"] for e in ledger.entries if e.kind == "parameter"}
        if disclosure == "public":
            assert seen == set(net.names)
            sources = {
                e.value["variable"]: e.source for e in ledger.entries if e.kind == "parameter"
            }
            # alternate owners: asia, tub (alice) and smoke, lung (bob) form one-party families
            assert all("case 1" in sources[v] for v in ("asia", "tub", "smoke", "lung"))
            assert "garbled division" in sources["bronc"]  # bronc (alice) | smoke (bob)
        elif disclosure == "owner":
            assert seen == {v.name for v in schema.owned_by(role)}
            assert set(result.parameters.cpts) == seen
        else:
            assert seen == set() and result.parameters.cpts == {}
            assert set(result.parameters.shares) == set(net.names)
    if disclosure == "shared":
        files = {}
        for role, result in (("alice", alice), ("bob", bob)):
            path = tmp_path / f"{role}-shares.json"
            write_parameter_shares(path, role, result, schema)
            files[role] = json.loads(path.read_text())
        opened = combine_parameter_shares(files["alice"], files["bob"])
        reference = learn_reference(net.names, net.states, codes, 2, "exact")
        for v in net.names:
            np.testing.assert_allclose(opened[v]["table"], reference.network.cpts[v], atol=1e-9)


def _view(result, channel) -> list[tuple[str, bytes]]:
    """A party's view as byte strings: received messages, then opened masked values."""
    opened = [(f"opened.{what}", values.tobytes()) for what, values in result.openings or []]
    return list(channel.transcript) + opened


def _skewed_asia():
    """Asia with very different root distributions: other counts, the same structure."""
    net = load_network("asia")
    net.cpts["asia"] = np.array([[0.3, 0.7]])
    net.cpts["smoke"] = np.array([[0.15, 0.85]])
    return net


DESIGN_EFFECT = 4  # one share is masked and sent up to 4 times (u in u*u and u^2*u, ...)


@pytest.mark.parametrize(
    "split",
    [{}, {"split_terms": True}, {"term_lanes": 2}],
    ids=["one lane", "terms split", "terms lanes"],
)
def test_what_a_party_receives_does_not_depend_on_the_data(monkeypatch, split):
    """Two data sets with very different counts that give the same network (structure and
    edge order; CPTs kept as shares): under every message tag and byte position, the
    profile of the bytes each party receives or opens (its view) is the same (chi-square, deflated by the
    design effect of reused shares, Bonferroni over all tests of both parties). Paillier traffic is
    excluded: its ciphertexts depend on the fresh key (tested in test_tables.py)."""
    config = SecureLearnConfig(
        max_parents=2,
        mode="exact",
        disclosure="shared",
        tables=TEST_TABLES,
        split_terms_from=2,
        **split,
    )
    from ppbn.protocols.learning import term_lanes

    monkeypatch.setattr(term_lanes, "MIN_LANE_TERMS", 4)  # every batch on the lanes
    runs = []
    for net, seed in ((load_network("asia"), 21), (_skewed_asia(), 22)):
        codes = sample(net, 1500, seed)
        results = _run(net, codes, config, keep_transcript=True)
        views = [sign_profiles(_view(results[party], results[3][party])) for party in (0, 1)]
        runs.append((results[0].search.edges, views))
    assert runs[0][0] == runs[1][0], "precondition: both data sets give the same network"
    p_values = []
    for party, name in enumerate(("alice", "bob")):
        first, second = runs[0][1][party], runs[1][1][party]
        assert set(first) == set(second)
        tested = 0
        for key in sorted(k for k in first if not k[0].startswith("tables.")):
            a, b = first[key], second[key]
            if a.sum() != b.sum():
                pytest.fail(
                    f"{name}, {key[0]}: {a.sum()} vs {b.sum()} bytes: message sizes depend on the data"
                )
            p = profile_p_value(a, b, DESIGN_EFFECT)
            if p is None:
                continue
            p_values.append((p, name, key))
            tested += 1
        assert tested >= 3, name
    worst = min(p_values)
    assert worst[0] > 1e-3 / len(p_values), (
        f"{worst[1]}: message {worst[2]} differs between data sets (p = {worst[0]:.2e})"
    )
    assert math.isfinite(worst[0])


@pytest.mark.parametrize("mode", ["exact", "yw0"])
def test_first_wave_view_is_the_same_for_very_different_data(mode):
    """With one K2 step the scoring requests do not depend on the data, so the share
    arithmetic a party sees (its arith messages and the masked values it opens) must have
    the same distribution for Asia records and for independent uniform records, whose
    counts (zeros, small and large cells) differ completely. A mask that is too short
    fails this test (checked by shortening the truncation mask)."""
    net = load_network("asia")
    config = SecureLearnConfig(max_parents=1, mode=mode, disclosure="shared", tables=TEST_TABLES)
    rng = np.random.default_rng(3)
    datasets = [sample(net, 1500, 4), rng.integers(0, 2, size=(1500, len(net.names)))]
    views = []
    for codes in datasets:
        alice, bob, _, pair = _run(net, codes, config, keep_transcript=True)
        view = [(t, p) for t, p in _view(bob, pair[1]) if t.startswith(("arith.", "opened."))]
        views.append(sign_profiles(view))
    first, second = views
    assert set(first) == set(second) and any(k[0].startswith("opened.") for k in first)
    p_values = []
    for key in sorted(first):
        a, b = first[key], second[key]
        assert a.sum() == b.sum(), f"{key}: sizes differ"
        p = profile_p_value(a, b, DESIGN_EFFECT)
        if p is not None:
            p_values.append((p, key))
    worst = min(p_values)
    assert worst[0] > 1e-3 / len(p_values), (
        f"{worst[1]} differs between data sets (p = {worst[0]:.2e})"
    )


def test_decision_width_covers_every_score():
    """The decision circuit compares scores modulo 2^width: the width must bound every
    family score of the job, the BIC penalty with a large C* included."""
    from ppbn.bn.k2 import count_table
    from ppbn.protocols.learning.config import score_bits

    net = load_network("alarm")
    codes = sample(net, 3000, 1)
    schema = _schema(net)
    column = {v: i for i, v in enumerate(net.names)}
    rng = np.random.default_rng(0)
    for c_star in (1.0, 1000.0):
        width = score_bits(schema, codes.shape[0], 3, c_star)
        for _ in range(200):
            family = tuple(rng.choice(net.names, size=4, replace=False))
            table = count_table(
                codes, [column[v] for v in family], [net.cardinality(v) for v in family]
            )
            for mode in ("exact", "yw", "bic"):
                score = family_score(table.reshape(-1, table.shape[-1]), mode, c_star)
                assert abs(score) * 2**SCORE_FRAC < 2 ** (width - 3), (family, mode, c_star)
    with pytest.raises(ValueError, match="lower c_star"):
        score_bits(schema, codes.shape[0], 3, 1e30)
