"""Hill climbing over DAGs: the order-free search, beside the K2 driver.

Semantics follow pgmpy's ``HillClimbSearch`` (Koller and Friedman 2009, Sec. 18.4.3):
start from the empty graph or a given DAG; each step applies the best legal move among
adding, deleting and reversing one edge, under acyclicity and a parent limit; a tabu list
of the last N moves forbids undoing them (after adding u->v, deleting it is tabu; after
deleting, re-adding; after reversing u->v, reversing either way); black-listed edges are
never added (nor created by a reversal), only white-listed edges may be (the rest join
the black list), fixed edges are put in the start graph and never deleted or reversed.
The search stops when no legal move improves the score by more than ``tau``.

Tie rule (generalised from K2, ``choose_candidate``): with best the largest delta, stop
unless best > tau; otherwise apply the earliest move, in the canonical move order, whose
delta is >= best - tau. Canonical move order: all additions, then all deletions, then all
reversals; within a kind, by the edge (u, v) with u's then v's position in the variable
order given to the driver (the schema order). pgmpy instead takes the exact maximum, in
the iteration order of a Python set: the two agree except where deltas lie within tau.

The driver never sees data, only an oracle with ``score(child, parents) -> float``
(``bn.k2.CountsOracle`` is one). Scores are decomposable: a move changes one family (add,
delete) or two (reverse), so the driver caches every family score it has seen and asks
the oracle only for new families, in one batch per step when the oracle defines
``scores(families)``. An oracle may also define ``choose_move(queries, tau)`` to apply
the tie rule itself (the secure oracle does, on shared scores: ``protocols/hc.py``);
``MoveQuery.terms`` then says which family scores make up each delta, and the driver
never asks for a score: the deltas and the total score stay unknown (None).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ppbn.bn.constants import DEFAULT_TABU
from ppbn.bn.k2 import DEFAULT_TAU, choose_candidate

ADD, DELETE, REVERSE = "add", "delete", "reverse"
KINDS = (ADD, DELETE, REVERSE)

Edge = tuple[str, str]
Family = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class Move:
    """One graph change: ``kind`` in add / delete / reverse, ``edge`` = (parent, child)
    as it is before the move (a reversal of (u, v) leaves v -> u)."""

    kind: str
    edge: Edge


@dataclass(frozen=True)
class AppliedMove:
    move: Move
    delta: float | None  # None when the oracle chose the move on hidden scores


@dataclass(frozen=True)
class MoveQuery:
    """A legal move and its delta as signed family scores: delta = sum(sign * score(family))."""

    move: Move
    terms: tuple[tuple[int, str, tuple[str, ...]], ...]


class ScoreOracle(Protocol):
    """Scores one family. Optional extras the driver uses when present:
    ``scores(families) -> list[float]`` (batch), ``choose_move(queries, tau) -> int | None``
    (the oracle applies the tie rule itself; it then never has to define ``score``) and
    ``families_scored`` (how many distinct families it scored)."""

    def score(self, child: str, parents: tuple[str, ...]) -> float:
        """The family score of ``child`` with ``parents``."""
        ...


@dataclass
class HCResult:
    names: tuple[str, ...]
    start: dict[str, tuple[str, ...]]
    parents: dict[str, tuple[str, ...]]
    moves: list[AppliedMove]
    score: float | None  # total score of the final DAG (None: chosen on hidden scores)
    families_scored: int

    @property
    def order(self) -> tuple[str, ...]:
        """The variable order the moves were enumerated in (the K2 result's field name)."""
        return self.names

    @property
    def edges(self) -> list[Edge]:
        """The final DAG's edges, child by child in variable order, parents in the order
        they joined."""
        return [(p, v) for v in self.names for p in self.parents[v]]


def descendants(names: Sequence[str], parents: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
    """Every node's proper descendants; ValueError if the graph has a cycle."""
    children: dict[str, list[str]] = {v: [] for v in names}
    for v in names:
        for p in parents[v]:
            children[p].append(v)
    out: dict[str, set[str]] = {}
    state: dict[str, int] = {}

    def visit(root: str) -> None:
        stack = [(root, iter(children[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                acc: set[str] = set()
                for c in children[node]:
                    acc.add(c)
                    acc |= out[c]
                out[node] = acc
                state[node] = 2
            elif state.get(child) == 1:
                raise ValueError(f"the graph has a cycle through {child!r}")
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(children[child])))

    for v in names:
        if v not in state:
            visit(v)
    return out


def is_tabu(move: Move, tabu: Iterable[Move]) -> bool:
    """pgmpy's rule: a move is tabu if listed; a reversal also if the reversal of the
    opposite edge is listed."""
    tabu = set(tabu)
    if move in tabu:
        return True
    return move.kind == REVERSE and Move(REVERSE, (move.edge[1], move.edge[0])) in tabu


def legal_moves(
    names: Sequence[str],
    parents: Mapping[str, tuple[str, ...]],
    max_parents: int,
    tabu: Iterable[Move] = (),
    forbidden: frozenset[Edge] | set[Edge] = frozenset(),
    required: frozenset[Edge] | set[Edge] = frozenset(),
) -> list[Move]:
    """The legal moves from ``parents``, in the canonical move order (module docstring)."""
    tabu = set(tabu)
    desc = descendants(names, parents)
    children: dict[str, list[str]] = {v: [] for v in names}
    for v in names:
        for p in parents[v]:
            children[p].append(v)
    moves: list[Move] = []
    for u in names:
        for v in names:
            if u == v or u in parents[v] or v in parents[u] or u in desc[v]:
                continue
            if len(parents[v]) + 1 > max_parents or (u, v) in forbidden:
                continue
            move = Move(ADD, (u, v))
            if move not in tabu:
                moves.append(move)
    existing = [(u, v) for u in names for v in names if u in parents[v]]
    for edge in existing:
        move = Move(DELETE, edge)
        if edge not in required and move not in tabu:
            moves.append(move)
    for u, v in existing:
        # reversing u -> v makes a cycle iff another path leads from u to v
        if any(c != v and v in desc[c] for c in children[u]):
            continue
        if (u, v) in required or (v, u) in forbidden or len(parents[u]) + 1 > max_parents:
            continue
        move = Move(REVERSE, (u, v))
        if not is_tabu(move, tabu):
            moves.append(move)
    return moves


def move_terms(
    move: Move, parents: Mapping[str, tuple[str, ...]]
) -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    """The families a move changes, as (sign, child, parents): new ones +1, old ones -1."""
    u, v = move.edge
    if move.kind == ADD:
        return ((1, v, (*parents[v], u)), (-1, v, parents[v]))
    if move.kind == DELETE:
        return ((1, v, tuple(p for p in parents[v] if p != u)), (-1, v, parents[v]))
    if move.kind == REVERSE:
        return (
            (1, u, (*parents[u], v)),
            (1, v, tuple(p for p in parents[v] if p != u)),
            (-1, u, parents[u]),
            (-1, v, parents[v]),
        )
    raise ValueError(f"unknown move kind {move.kind!r}")


def apply_move(move: Move, parents: dict[str, tuple[str, ...]]) -> None:
    """Apply ``move`` to ``parents`` in place (a new parent joins at the end)."""
    u, v = move.edge
    if move.kind == ADD:
        parents[v] = (*parents[v], u)
    elif move.kind == DELETE:
        parents[v] = tuple(p for p in parents[v] if p != u)
    elif move.kind == REVERSE:
        parents[v] = tuple(p for p in parents[v] if p != u)
        parents[u] = (*parents[u], v)
    else:
        raise ValueError(f"unknown move kind {move.kind!r}")


def undo_of(move: Move) -> Move:
    """The tabu entry a move leaves (pgmpy: the move that would undo it; a reversal is
    recorded as itself and ``is_tabu`` checks both directions)."""
    if move.kind == ADD:
        return Move(DELETE, move.edge)
    if move.kind == DELETE:
        return Move(ADD, move.edge)
    return move


def prepare_start(
    names: Sequence[str],
    start: Mapping[str, Sequence[str]] | Iterable[Edge] | None,
    black_list: Iterable[Edge] | None = None,
    white_list: Iterable[Edge] | None = None,
    fixed_edges: Iterable[Edge] | None = None,
) -> tuple[dict[str, tuple[str, ...]], frozenset[Edge], frozenset[Edge]]:
    """Start parents, forbidden and required edges, as pgmpy's HillClimbSearch sets them
    up: a white list forbids every edge outside it; fixed edges join the start DAG (a
    cycle is an error); forbidden edges are removed from it. A fixed edge that is also
    forbidden is an error here (pgmpy would silently drop it)."""
    names = tuple(names)
    known = set(names)
    parents: dict[str, tuple[str, ...]] = {v: () for v in names}
    if start is not None:
        if isinstance(start, Mapping):
            edges = [(p, c) for c, ps in start.items() for p in ps]
        else:
            edges = [tuple(e) for e in start]
        for p, c in _checked(edges, known, "start"):
            if p not in parents[c]:
                parents[c] = (*parents[c], p)
    forbidden = set(_checked(black_list or (), known, "black list"))
    if white_list is not None:
        allowed = set(_checked(white_list, known, "white list"))
        forbidden |= {(u, v) for u in names for v in names if u != v and (u, v) not in allowed}
    required = set(_checked(fixed_edges or (), known, "fixed edges"))
    clash = sorted(required & forbidden)
    if clash:
        raise ValueError(
            f"fixed edge {clash[0][0]} -> {clash[0][1]} is black-listed or outside the white list"
        )
    for p, c in sorted(required, key=lambda e: (names.index(e[1]), names.index(e[0]))):
        if p not in parents[c]:
            parents[c] = (*parents[c], p)
    for c in names:
        parents[c] = tuple(p for p in parents[c] if (p, c) not in forbidden)
    try:
        descendants(names, parents)
    except ValueError as exc:
        raise ValueError(f"the start DAG with the fixed edges is not acyclic: {exc}") from None
    return parents, frozenset(forbidden), frozenset(required)


def _checked(edges: Iterable[Sequence[str]], known: set[str], what: str) -> list[Edge]:
    out: list[Edge] = []
    for edge in edges:
        if len(edge) != 2:
            raise ValueError(f"{what}: an edge is a pair [parent, child], got {list(edge)!r}")
        p, c = str(edge[0]), str(edge[1])
        for v in (p, c):
            if v not in known:
                raise ValueError(f"{what}: {v!r} is not a variable")
        if p == c:
            raise ValueError(f"{what}: self-loop on {p!r}")
        out.append((p, c))
    return out


@dataclass
class _FamilyCache:
    oracle: ScoreOracle
    values: dict[tuple[str, frozenset[str]], float] = field(default_factory=dict)

    def fill(self, families: Iterable[Family]) -> None:
        missing: dict[tuple[str, frozenset[str]], Family] = {}
        for child, ps in families:
            key = (child, frozenset(ps))
            if key not in self.values and key not in missing:
                missing[key] = (child, ps)
        if not missing:
            return
        batch = getattr(self.oracle, "scores", None)
        wanted = list(missing.values())
        values = (
            list(batch(wanted))
            if batch is not None
            else [self.oracle.score(c, ps) for c, ps in wanted]
        )
        for key, value in zip(missing, values, strict=True):
            self.values[key] = float(value)

    def __call__(self, child: str, ps: Sequence[str]) -> float:
        return self.values[(child, frozenset(ps))]


def hill_climb(
    names: Sequence[str],
    oracle: ScoreOracle,
    max_parents: int | None = None,
    tau: float = DEFAULT_TAU,
    tabu_length: int = DEFAULT_TABU,
    start: Mapping[str, Sequence[str]] | Iterable[Edge] | None = None,
    black_list: Iterable[Edge] | None = None,
    white_list: Iterable[Edge] | None = None,
    fixed_edges: Iterable[Edge] | None = None,
    max_iter: int = 10**6,
    progress: Callable[[int, int, str], None] | None = None,
) -> HCResult:
    """Hill climbing with a tabu list (pgmpy's HillClimbSearch semantics, the tie rule of
    the module docstring). ``max_parents`` None: no limit."""
    names = tuple(names)
    if len(set(names)) != len(names):
        raise ValueError("variable names must be distinct")
    limit = len(names) if max_parents is None else max_parents
    if limit < 0:
        raise ValueError("max_parents must be >= 0")
    if tabu_length < 0:
        raise ValueError("the tabu length must be >= 0")
    parents, forbidden, required = prepare_start(names, start, black_list, white_list, fixed_edges)
    start_parents = dict(parents)
    tabu: deque[Move] = deque(maxlen=tabu_length)
    cache = _FamilyCache(oracle)
    moves: list[AppliedMove] = []
    choose = getattr(oracle, "choose_move", None)
    for step in range(max_iter):
        legal = legal_moves(names, parents, limit, tabu, forbidden, required)
        if not legal:
            break
        if progress:  # the move being chosen; the count of moves to come is unknown
            progress(step, 0, f"hc move {step + 1}: {len(legal)} legal moves")
        queries = [MoveQuery(m, move_terms(m, parents)) for m in legal]
        deltas: list[float] | None = None
        if choose is not None:
            index = choose(queries, tau)
        else:
            cache.fill((c, ps) for q in queries for _, c, ps in q.terms)
            deltas = [sum(sign * cache(c, ps) for sign, c, ps in q.terms) for q in queries]
            index = choose_candidate(0.0, deltas, tau)
        if index is None:
            break
        move = legal[index]
        delta = None if deltas is None else deltas[index]
        apply_move(move, parents)
        tabu.append(undo_of(move))
        moves.append(AppliedMove(move, delta))
        if progress:
            shown = "" if delta is None else f" ({delta:+.4f})"
            progress(
                step + 1,
                0,
                f"hc step {step + 1}: {move.kind} {move.edge[0]} -> {move.edge[1]}{shown}",
            )
    if progress:
        progress(len(moves), 0, "hc done")
    if choose is not None:
        return HCResult(
            names, start_parents, dict(parents), moves, None, getattr(oracle, "families_scored", 0)
        )
    cache.fill((v, parents[v]) for v in names)
    total = sum(cache(v, parents[v]) for v in names)
    return HCResult(names, start_parents, dict(parents), moves, total, len(cache.values))


def read_edge_file(text: str) -> list[Edge]:
    """Edges from a JSON text: a list of [parent, child] pairs, or a network.json (its
    ``parents`` map, else its ``edges``)."""
    import json

    data = json.loads(text)
    if isinstance(data, dict):
        if isinstance(data.get("parents"), dict):
            return [(str(p), str(c)) for c, ps in data["parents"].items() for p in ps]
        if isinstance(data.get("edges"), list):
            data = data["edges"]
        else:
            raise ValueError("expected a JSON list of [parent, child] edges or a network.json")
    if not isinstance(data, list) or not all(
        isinstance(e, list | tuple) and len(e) == 2 for e in data
    ):
        raise ValueError("expected a JSON list of [parent, child] edges or a network.json")
    return [(str(p), str(c)) for p, c in data]
