"""The one K2 driver (Cooper-Herskovits; Yang-Wright Sec. 3.2) and the plaintext oracle.

The driver never sees scores: it asks an oracle "given this child, its current parents and
these candidates, which candidate should be added, if any?". The plaintext oracle below
answers from count tables; the secure oracle (``protocols``) answers with a garbled
argmax so the parties learn only the decision; the PRAM oracle answers from estimated
counts. All of them apply the same tie rule, ``choose_candidate``.

Tie rule (docs/conventions.md, "Tie rule"): add a parent only if the score rises by more than ``tau``; among the
candidates whose score is within ``tau`` of the best, the earliest in the node order
wins. Precisely: with best = max(scores), stop unless best - current > tau; otherwise
add the first candidate i with scores[i] >= best - tau (its own score then exceeds the
current one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ppbn.bn.constants import DEFAULT_TAU
from ppbn.bn.scores import DEFAULT_ESS, family_score


def choose_candidate(current: float, scores: Sequence[float], tau: float) -> int | None:
    """Index of the candidate to add under the tie rule, or None to stop."""
    if not len(scores):
        return None
    best = max(scores)
    if not best - current > tau:
        return None
    return next(i for i, s in enumerate(scores) if s >= best - tau)


@dataclass(frozen=True)
class K2Request:
    """One K2 step of one child: which of ``candidates`` to add to ``parents``, if any."""

    child: str
    parents: tuple[str, ...]
    candidates: tuple[str, ...]


class K2Oracle(Protocol):
    """Answers K2 steps. An oracle may also define ``best_parents(requests, tau)`` to answer
    many independent steps at once (the secure oracle batches them into one protocol run);
    the driver uses it when present."""

    def best_parent(
        self, child: str, parents: tuple[str, ...], candidates: tuple[str, ...], tau: float
    ) -> str | None:
        """The candidate to add to ``parents`` of ``child`` under the tie rule, or None."""
        ...


def decide(oracle: K2Oracle, requests: Sequence[K2Request], tau: float) -> list[str | None]:
    """The oracle's answers to independent K2 steps, batched when the oracle can."""
    batch = getattr(oracle, "best_parents", None)
    if batch is not None:
        return list(batch(requests, tau))
    return [oracle.best_parent(r.child, r.parents, r.candidates, tau) for r in requests]


@dataclass
class K2Result:
    order: tuple[str, ...]
    parents: dict[str, tuple[str, ...]]
    edges: list[tuple[str, str]]  # (parent, child) in the order they were added


def k2_search(
    order: Sequence[str],
    max_parents: int,
    oracle: K2Oracle,
    tau: float = DEFAULT_TAU,
    progress: Callable[[int, int, str], None] | None = None,
) -> K2Result:
    """Greedy K2: each node takes parents from its predecessors while they help.

    A node's search depends only on its own scores (its candidates are its predecessors in
    the fixed order, whatever their parents), so the driver runs the searches of all nodes
    side by side in waves: wave w asks the w-th step of every node still adding parents.
    Decisions, parent sets and the reported edge order (node by node, in node order, each
    node's parents in the order added) are exactly those of the sequential algorithm.
    """
    if max_parents < 0:
        raise ValueError("max_parents must be >= 0")
    order = tuple(order)
    position = {v: i for i, v in enumerate(order)}
    parents: dict[str, tuple[str, ...]] = {v: () for v in order}
    active = [v for v in order if position[v] > 0 and max_parents > 0]
    wave = 0
    while active:
        if progress:
            progress(
                wave, max_parents, f"K2 step {wave + 1}: {len(active)} nodes still adding parents"
            )
        requests = [
            K2Request(v, parents[v], tuple(z for z in order[: position[v]] if z not in parents[v]))
            for v in active
        ]
        requests = [r for r in requests if r.candidates]
        answers = decide(oracle, requests, tau)
        active = []
        for request, chosen in zip(requests, answers, strict=True):
            if chosen is None:
                continue
            if chosen not in request.candidates:
                raise ValueError(
                    f"oracle chose {chosen!r}, not a candidate parent of {request.child!r}"
                )
            parents[request.child] += (chosen,)
            if len(parents[request.child]) < max_parents:
                active.append(request.child)
        wave += 1
    if progress:
        progress(max_parents, max_parents, "K2 done")
    edges = [(p, v) for v in order for p in parents[v]]
    return K2Result(order, parents, edges)


@dataclass
class CountsOracle:
    """Plaintext oracle: scores families from count tables (the non-private reference).

    ``count_fn(variables)`` returns the count table of ``variables`` (parents..., child),
    one axis per variable in that order. Under available-case analysis the tables of a
    child with and without a candidate parent may hold different numbers of records; the
    scores are compared as they are (docs/user-guide.md, "Missing values"). ``evaluated`` records every score computed, in
    order, as (child, parents, score): tests compare the modes on it.
    """

    count_fn: Callable[[tuple[str, ...]], np.ndarray]
    mode: str
    c_star: float = 1.0
    # n of the BIC penalty (c_star ln(n)/2 per free parameter): the public record count,
    # as on the secure path, also when available-case families hold fewer records; None:
    # the table's own total (the PRAM path's estimated counts)
    n_records: int | None = None
    # Available-case analysis: each candidate z is compared with the current parents on the
    # same records, those complete in z too (the candidate's table summed over z), so a
    # candidate is never favoured because its missing cells drop records from its family.
    paired: bool = False
    # equivalent sample size of the ``bdeu`` mode (ignored by the other modes)
    ess: float = DEFAULT_ESS
    evaluated: list[tuple[str, tuple[str, ...], float]] = field(default_factory=list)
    _cache: dict[tuple[str, frozenset[str]], float] = field(default_factory=dict, repr=False)
    _paired_cache: dict[tuple[str, frozenset[str], str], float] = field(
        default_factory=dict, repr=False
    )

    def score(self, child: str, parents: tuple[str, ...]) -> float:
        key = (child, frozenset(parents))
        if key not in self._cache:
            table = self.count_fn((*parents, child))
            d = table.shape[-1]
            value = family_score(
                table.reshape(-1, d), self.mode, self.c_star, self.n_records, self.ess
            )
            self._cache[key] = value
            self.evaluated.append((child, parents, value))
        return self._cache[key]

    def accepts(self, current: float, best: float) -> bool:
        """An extra acceptance rule on top of the tie rule; subclasses override it (the PRAM
        oracle's eta threshold). The plain K2 oracle accepts whatever the tie rule picks."""
        return True

    def paired_score(self, child: str, parents: tuple[str, ...], given: str) -> float:
        """Score of (child, parents) on the records also complete in ``given``."""
        key = (child, frozenset(parents), given)
        if key not in self._paired_cache:
            table = self.count_fn((*parents, given, child)).sum(axis=len(parents))
            d = table.shape[-1]
            self._paired_cache[key] = family_score(
                table.reshape(-1, d), self.mode, self.c_star, self.n_records, self.ess
            )
        return self._paired_cache[key]

    def best_parent(
        self, child: str, parents: tuple[str, ...], candidates: tuple[str, ...], tau: float
    ) -> str | None:
        """The tie rule applied to plaintext scores, then ``accepts``. Paired mode applies it
        to each candidate's gain over the current parents on the same records (current = 0);
        without missing cells the gains are exactly score - current, the same decision."""
        if self.paired:
            gains = [
                self.score(child, (*parents, z)) - self.paired_score(child, parents, z)
                for z in candidates
            ]
            index = choose_candidate(0.0, gains, tau)
            return None if index is None else candidates[index]
        current = self.score(child, parents)
        scores = [self.score(child, (*parents, z)) for z in candidates]
        index = choose_candidate(current, scores, tau)
        if index is None or not self.accepts(current, max(scores)):
            return None
        return candidates[index]


def count_table(codes: np.ndarray, columns: Sequence[int], cards: Sequence[int]) -> np.ndarray:
    """Counts of every joint state of the chosen columns, shape ``cards`` (C order).

    Available-case rule (``--missing available-case``): a record with a negative code
    (missing) in any of the chosen columns adds to no cell, so each family is counted on
    its own complete records; the secure tables protocol gives such a record an all-zero
    indicator row (``protocols.tables``), which is the same count.
    """
    cards = tuple(int(c) for c in cards)
    size = int(np.prod(cards, dtype=np.int64))
    if not columns:
        return np.array(codes.shape[0], dtype=np.int64).reshape(())
    selected = codes[:, list(columns)]
    complete = np.all(selected >= 0, axis=1)
    if not complete.all():
        selected = selected[complete]
    flat = np.ravel_multi_index(tuple(selected.T), cards)
    return np.bincount(flat, minlength=size).reshape(cards)
