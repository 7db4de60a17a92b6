"""Hill climbing and BDeu (the plaintext half): the move generator against a
brute-force legality check, BDeu/BIC family scores and whole runs against pgmpy."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.bn.hc import (
    ADD,
    DELETE,
    KINDS,
    REVERSE,
    Move,
    apply_move,
    descendants,
    hill_climb,
    is_tabu,
    legal_moves,
    move_terms,
    prepare_start,
    read_edge_file,
)
from ppbn.bn.k2 import CountsOracle
from ppbn.bn.learn import HCOptions, joined_count_fn, learn_reference
from ppbn.bn.networks import load_network, sample
from ppbn.bn.scores import bdeu_score, bic_score, family_score

NAMES = tuple("abcdef")


@st.composite
def dag_case(draw):
    n = draw(st.integers(2, 6))
    names = NAMES[:n]
    perm = draw(st.permutations(names))
    pairs = [(perm[i], perm[j]) for i in range(n) for j in range(i + 1, n)]
    edges = [e for e in pairs if draw(st.booleans())]
    all_pairs = [(u, v) for u in names for v in names if u != v]
    black = {e for e in all_pairs if draw(st.integers(0, 9)) == 0 and e not in edges}
    fixed = {e for e in edges if draw(st.integers(0, 4)) == 0}
    moves = [Move(k, e) for k in KINDS for e in all_pairs]
    tabu = draw(st.lists(st.sampled_from(moves), max_size=4))
    max_parents = draw(st.integers(0, 4))
    parents = {v: tuple(p for p, c in edges if c == v) for v in names}
    return names, parents, max_parents, tabu, frozenset(black), frozenset(fixed)


def _brute_force_legal(names, parents, max_parents, tabu, forbidden, required, move) -> bool:
    """Legality from first principles: apply, then check every rule on the result."""
    u, v = move.edge
    exists = u in parents[v]
    if move.kind == ADD and (exists or v in parents[u]):
        return False
    if move.kind in (DELETE, REVERSE) and not exists:
        return False
    after = dict(parents)
    apply_move(move, after)
    try:
        descendants(names, after)
    except ValueError:
        return False
    changed = {ADD: [v], DELETE: [], REVERSE: [u]}[move.kind]
    if any(len(after[c]) > max_parents for c in changed):
        return False
    new_edge = {ADD: (u, v), DELETE: None, REVERSE: (v, u)}[move.kind]
    if new_edge in forbidden:
        return False
    if move.kind != ADD and (u, v) in required:
        return False
    return not is_tabu(move, tabu)


@settings(max_examples=150, deadline=None)
@given(dag_case())
def test_move_generator_matches_brute_force(case):
    names, parents, max_parents, tabu, forbidden, required = case
    legal = legal_moves(names, parents, max_parents, tabu, forbidden, required)
    assert len(set(legal)) == len(legal)
    for kind in KINDS:
        for u in names:
            for v in names:
                if u == v:
                    continue
                move = Move(kind, (u, v))
                expected = _brute_force_legal(
                    names, parents, max_parents, tabu, forbidden, required, move
                )
                assert (move in legal) == expected, move
    for move in legal:  # every legal move keeps the graph a DAG, fixed edges in place
        after = dict(parents)
        apply_move(move, after)
        descendants(names, after)
        assert all(p in after[c] for p, c in required)
    # canonical order: kinds in order, then edges by position of parent, then child
    index = {v: i for i, v in enumerate(names)}
    keys = [(KINDS.index(m.kind), index[m.edge[0]], index[m.edge[1]]) for m in legal]
    assert keys == sorted(keys)


@settings(max_examples=40, deadline=None)
@given(dag_case(), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_hill_climb_respects_lists_and_tabu(case, tabu_length, seed):
    """Random scores: every applied move is legal, fixed edges survive, black-listed edges
    never appear, and no move undoes one of the last ``tabu_length`` moves."""
    names, parents, max_parents, _, forbidden, required = case
    rng = np.random.default_rng(seed)
    table: dict = {}

    class RandomOracle:
        def score(self, child, ps):
            return table.setdefault((child, frozenset(ps)), float(rng.normal(0, 10)))

    start = {v: tuple(p for p in parents[v] if (p, v) not in forbidden) for v in names}
    result = hill_climb(
        names,
        RandomOracle(),
        max_parents + len(names),
        1e-6,
        tabu_length,
        start,
        black_list=forbidden,
        fixed_edges=required,
    )
    current = dict(start)
    history: list[Move] = []
    for applied in result.moves:
        recent = history[-tabu_length:] if tabu_length else []
        tabu = [Move({ADD: DELETE, DELETE: ADD}.get(m.kind, m.kind), m.edge) for m in recent]
        assert applied.move in legal_moves(
            names, current, len(names) * 2, tabu, forbidden, required
        )
        assert applied.delta > 1e-6
        apply_move(applied.move, current)
        history.append(applied.move)
    assert current == result.parents
    edges = {(p, c) for c in names for p in current[c]}
    assert required <= edges and not (edges & forbidden)


def test_prepare_start_lists():
    names = ("a", "b", "c")
    parents, forbidden, required = prepare_start(
        names,
        [("a", "b"), ("b", "c")],
        black_list=[("b", "c")],
        white_list=None,
        fixed_edges=[("c", "a")],
    )
    assert parents == {"a": ("c",), "b": ("a",), "c": ()}
    assert ("b", "c") in forbidden and required == {("c", "a")}
    _, forbidden, _ = prepare_start(names, None, white_list=[("a", "b")])
    assert forbidden == {(u, v) for u in names for v in names if u != v} - {("a", "b")}
    with pytest.raises(ValueError, match="not acyclic"):
        prepare_start(names, [("a", "b"), ("b", "c")], fixed_edges=[("c", "a")])
    with pytest.raises(ValueError, match="black-listed"):
        prepare_start(names, None, black_list=[("a", "b")], fixed_edges=[("a", "b")])
    assert read_edge_file('[["a", "b"]]') == [("a", "b")]
    assert read_edge_file('{"parents": {"b": ["a"], "a": []}}') == [("a", "b")]


def test_bdeu_by_hand():
    counts = np.array([[3.0, 0.0], [1.0, 2.0], [0.0, 0.0]])
    ess, q, d = 10.0, 3, 2
    aj, ajk = ess / q, ess / (q * d)
    expected = sum(
        math.lgamma(aj)
        - math.lgamma(aj + row.sum())
        + sum(math.lgamma(ajk + x) - math.lgamma(ajk) for x in row)
        for row in counts
    )
    assert bdeu_score(counts, ess) == pytest.approx(expected, abs=1e-12)
    assert family_score(counts, "bdeu", ess=ess) == bdeu_score(counts, ess)
    # an unobserved parent configuration adds exactly nothing
    assert bdeu_score(counts[:2], ess * 2 / 3) == pytest.approx(bdeu_score(counts, ess), abs=1e-12)


def _frame(net, codes) -> pd.DataFrame:
    return pd.DataFrame(
        {v: np.array(net.states[v], dtype=object)[codes[:, i]] for i, v in enumerate(net.names)}
    )


def _pgmpy_score(mode, frame, net):
    from pgmpy.estimators import BIC, BDeu

    state_names = {v: list(net.states[v]) for v in net.names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "bdeu":
            return BDeu(frame, equivalent_sample_size=10, state_names=state_names)
        return BIC(frame, state_names=state_names)


@pytest.mark.parametrize("network", ["asia", "child"])
@pytest.mark.parametrize("mode", ["bdeu", "bic"])
def test_family_scores_equal_pgmpy(network, mode):
    """With the declared domains as state_names, pgmpy's BDeu (ess 10) and BIC equal ours
    on every true family and a few random ones, unobserved configurations included
    (pgmpy's BIC is ours with C* = 1 and N = the record count; natural log)."""
    net = load_network(network)
    codes = sample(net, 5000, 3)
    pg = _pgmpy_score(mode, _frame(net, codes), net)
    count = joined_count_fn(net.names, net.states, codes)
    rng = np.random.default_rng(0)
    families = [(v, tuple(net.parents[v])) for v in net.names]
    for _ in range(10):
        picked = [net.names[i] for i in rng.choice(len(net.names), 3, replace=False)]
        families.append((picked[0], tuple(picked[1:])))
    for child, parents in families:
        table = count((*parents, child)).reshape(-1, net.cardinality(child))
        ours = bdeu_score(table, 10.0) if mode == "bdeu" else bic_score(table, 1.0, 5000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = pg.local_score(child, list(parents))
        assert abs(ours - theirs) < 1e-9 * max(1.0, abs(ours)), (child, parents)


_KIND = {"+": ADD, "-": DELETE, "flip": REVERSE}


def _pgmpy_trace(net, codes, mode, max_parents, tabu, epsilon):
    """pgmpy's HillClimbSearch run, recording every step's graph, tabu list and scored
    legal operations."""
    from pgmpy.estimators import HillClimbSearch

    class Recording(HillClimbSearch):
        steps: list

        def _legal_operations(
            self, model, score, prior, tabu_list, max_indegree, forbidden, required
        ):
            ops = list(
                super()._legal_operations(
                    model, score, prior, tabu_list, max_indegree, forbidden, required
                )
            )
            graph = {v: tuple(model.get_parents(v)) for v in net.names}
            self.steps.append((graph, [Move(_KIND[k], e) for k, e in tabu_list], ops))
            return iter(ops)

    frame = _frame(net, codes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = Recording(frame, state_names={v: list(net.states[v]) for v in net.names})
        est.steps = []
        dag = est.estimate(
            scoring_method=_pgmpy_score(mode, frame, net),
            tabu_length=tabu,
            max_indegree=max_parents,
            epsilon=epsilon,
            show_progress=False,
        )
    return est.steps, {v: set(dag.get_parents(v)) for v in net.names}


@pytest.mark.parametrize("network", ["asia", "child"])
@pytest.mark.parametrize("mode", ["bdeu", "bic"])
def test_hill_climb_equals_pgmpy(network, mode):
    """Step by step along pgmpy's own run: the same legal moves, deltas within 1e-9, the
    same stop. pgmpy breaks exact ties (score-equivalent moves such as adding a -> b or
    b -> a to two orphans) by Python set order, which changes between processes; ours by
    the canonical move order. So we replay pgmpy's choice at each step through our driver
    (an oracle whose ``choose_move`` picks pgmpy's move, asserted to be within tau of our
    best) and require pgmpy's DAG exactly."""
    net = load_network(network)
    codes = sample(net, 5000, 5)
    u, tabu, eps = 3, 100, 1e-4
    steps, pg_dag = _pgmpy_trace(net, codes, mode, u, tabu, eps)
    oracle = CountsOracle(joined_count_fn(net.names, net.states, codes), mode, n_records=5000)
    picks: list[Move | None] = []
    for graph, tabu_list, ops in steps:
        legal = legal_moves(net.names, graph, u, tabu_list)
        theirs = {Move(_KIND[k], e): d for (k, e), d in ops}
        assert set(legal) == set(theirs)
        deltas = {m: sum(s * oracle.score(c, p) for s, c, p in move_terms(m, graph)) for m in legal}
        assert all(abs(deltas[m] - theirs[m]) < 1e-9 for m in legal)
        best = max(ops, key=lambda t: t[1], default=(None, -math.inf))
        if best[0] is None or best[1] < eps:
            picks.append(None)
        else:
            move = Move(_KIND[best[0][0]], best[0][1])
            assert deltas[move] >= max(deltas.values()) - eps
            picks.append(move)

    class Replay:
        def __init__(self):
            self.step = 0

        def score(self, child, parents):
            return oracle.score(child, parents)

        def choose_move(self, queries, tau):
            pick = picks[self.step]
            self.step += 1
            return None if pick is None else [q.move for q in queries].index(pick)

    replay = Replay()
    result = hill_climb(net.names, replay, u, eps, tabu)
    assert {v: set(ps) for v, ps in result.parents.items()} == pg_dag
    assert replay.step == len(picks)
    # and our own tie rule reaches a DAG at least as good up to tau per move, deterministically
    ours = hill_climb(net.names, oracle, u, eps, tabu)
    assert ours.parents == hill_climb(net.names, oracle, u, eps, tabu).parents


def test_learn_reference_hc_asia():
    """hc on asia at 20,000 records finds the true skeleton's families' scores and CPTs
    come from the existing estimator; fixed and black-listed edges are honoured."""
    net = load_network("asia")
    codes = sample(net, 20000, 1)
    learned = learn_reference(net.names, net.states, codes, 2, "bdeu", 1e-4, search="hc")
    assert learned.search.moves and all(m.delta > 1e-4 for m in learned.search.moves)
    assert set(learned.network.parents) == set(net.names)
    for v in net.names:
        assert learned.network.cpts[v].shape[0] == int(
            np.prod([net.cardinality(p) for p in learned.search.parents[v]])
        )
    opts = HCOptions(
        tabu_length=5,
        fixed_edges=[("asia", "dysp")],
        black_list=[("smoke", "lung"), ("lung", "smoke")],
    )
    constrained = learn_reference(
        net.names, net.states, codes, 2, "bic", 1e-4, search="hc", hc=opts
    )
    assert "asia" in constrained.search.parents["dysp"]
    assert (
        "smoke" not in constrained.search.parents["lung"]
        and "lung" not in constrained.search.parents["smoke"]
    )


def test_cli_reference_hc_and_refusals(tmp_path, capsys):
    import json

    from ppbn.cli import main

    data = tmp_path / "asia"
    assert (
        main(["datasets", "make", "--network", "asia", "--records", "2000", "--out", str(data)])
        == 0
    )
    (tmp_path / "fixed.json").write_text('[["asia", "tub"]]')
    out = tmp_path / "out"
    argv = [
        "reference",
        "--data",
        str(data),
        "--search",
        "hc",
        "--score",
        "bdeu",
        "--ess",
        "5",
        "--fixed-edges",
        str(tmp_path / "fixed.json"),
        "--tabu",
        "10",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    result = json.loads((out / "network.json").read_text())
    assert result["search"] == "hc" and result["ess"] == 5 and result["moves"]
    assert ["asia", "tub"] in result["edges"] and ["asia", "tub"] in result["start"]
    assert {"kind", "edge", "delta"} <= set(result["moves"][0])
    capsys.readouterr()
    argv = [
        "simulate",
        "--path",
        "pram",
        "--p",
        "0.2",
        "--network",
        "asia",
        "--records",
        "200",
        "--search",
        "hc",
    ]
    assert main(argv) == 2
    assert "--search hc on the PRAM path needs --setup 2 (a miner)" in capsys.readouterr().err


def test_pram_hill_climbing_and_bdeu():
    """The PRAM oracle runs the same hill climbing: with p = 0 (identity randomization) the
    estimated counts are the counts, so it equals the reference; setup I refuses hc."""
    from ppbn.bn.schema import Schema, Variable
    from ppbn.errors import UserError
    from ppbn.jobs.pram import check_pram_params, check_setup_one_params
    from ppbn.randomized.pram.operators import RandomizationScheme
    from ppbn.randomized.pram.oracle import learn_pram

    net = load_network("asia")
    codes = sample(net, 3000, 2)
    scheme = RandomizationScheme.uniform(
        dict(zip(net.names, [net.cardinality(v) for v in net.names], strict=True)), 0.0
    )
    opts = HCOptions(tabu_length=10)
    learned = learn_pram(
        net.names, net.states, codes, scheme, 2, "bdeu", 1e-3, search="hc", hc=opts, ess=3.0
    )
    reference = learn_reference(
        net.names, net.states, codes, 2, "bdeu", 1e-3, search="hc", hc=opts, ess=3.0
    )
    assert [m.move for m in learned.search.moves] == [m.move for m in reference.search.moves]
    schema = Schema("id", tuple(Variable(v, "alice", net.states[v]) for v in net.names))
    params = {"p": 0.2, "search": "hc", "score": "bdeu", "ess": 3.0}
    assert check_pram_params(params, schema)["search"] == "hc"
    with pytest.raises(UserError, match="needs setup II"):
        check_setup_one_params(params, schema)
