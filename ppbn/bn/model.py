"""A discrete Bayesian network: ordered domains, parent sets and CPTs.

CPT layout (used everywhere in ppbn): ``cpts[v]`` has shape ``(q, d)`` where rows are the
parent configurations in C order over ``parents[v]`` (first parent slowest) and columns
are the child's states. This is the family index K_i (j - 1) + k of Yang-Wright Sec. 3.1
and of docs/conventions.md, "Table layouts" (child varies fastest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class BayesNet:
    names: tuple[str, ...]
    states: dict[str, tuple[str, ...]]
    parents: dict[str, tuple[str, ...]]
    cpts: dict[str, np.ndarray]
    # parent configurations (row indices) that never occurred in the data: their CPT row
    # is uniform (or the Dirichlet prior) and flagged in the output
    unobserved: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for v in self.names:
            q = int(np.prod([len(self.states[p]) for p in self.parents[v]], dtype=np.int64))
            shape = (q, len(self.states[v]))
            if self.cpts[v].shape != shape:
                raise ValueError(f"CPT of {v!r} has shape {self.cpts[v].shape}, expected {shape}")

    def cardinality(self, name: str) -> int:
        return len(self.states[name])

    def with_state_names(self, names: Mapping[str, tuple[str, ...]]) -> BayesNet:
        """The same network with states renamed (same number, same order): how a party
        writes its continuous variables' bins as intervals in its own output files."""
        states = dict(self.states)
        for v, new in names.items():
            if v in states:
                if len(new) != len(states[v]):
                    raise ValueError(f"{v!r}: {len(new)} state names for {len(states[v])} states")
                states[v] = tuple(new)
        return BayesNet(self.names, states, self.parents, self.cpts, self.unobserved)

    def edges(self) -> list[tuple[str, str]]:
        return [(p, v) for v in self.names for p in self.parents[v]]

    def topological_order(self) -> tuple[str, ...]:
        return topological_order(self.names, self.parents)

    def log_probability(self, codes: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
        """ln P(record) for every row of ``codes`` (columns in ``names`` order); each CPT row
        is first mixed with the uniform distribution at weight ``smoothing``."""
        column = {v: i for i, v in enumerate(self.names)}
        total = np.zeros(codes.shape[0])
        for v in self.names:
            cpt = self.cpts[v]
            if smoothing:
                cpt = (1.0 - smoothing) * cpt + smoothing / cpt.shape[1]
            parents = self.parents[v]
            if parents:
                dims = tuple(self.cardinality(p) for p in parents)
                config = np.ravel_multi_index(tuple(codes[:, column[p]] for p in parents), dims)
            else:
                config = np.zeros(codes.shape[0], dtype=np.int64)
            with np.errstate(divide="ignore"):
                total += np.log(cpt[config, codes[:, column[v]]])
        return total

    def predict(self, codes: np.ndarray, variable: str, smoothing: float = 1e-9) -> np.ndarray:
        """The most probable state of ``variable`` given every other column of each record
        (its posterior is proportional to the joint; ties: the lower state). The network as
        a classifier, as a data owner would use a learned network."""
        position = self.names.index(variable)
        scores = np.empty((codes.shape[0], self.cardinality(variable)))
        filled = np.array(codes, dtype=np.int64, copy=True)
        for state in range(self.cardinality(variable)):
            filled[:, position] = state
            scores[:, state] = self.log_probability(filled, smoothing)
        return np.argmax(scores, axis=1)


def topological_order(
    names: tuple[str, ...], parents: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """Kahn's algorithm; ties broken by the position in ``names`` so the order is stable."""
    position = {n: i for i, n in enumerate(names)}
    remaining = {n: set(parents[n]) for n in names}
    done: list[str] = []
    placed: set[str] = set()
    while remaining:
        ready = sorted((n for n, ps in remaining.items() if ps <= placed), key=position.__getitem__)
        if not ready:
            raise ValueError(f"the network has a cycle among {sorted(remaining)}")
        for n in ready:
            done.append(n)
            placed.add(n)
            del remaining[n]
    return tuple(done)


def find_cycle(parents: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A directed cycle of the structure as a path that ends where it starts (parent to
    child: ``[a, b, a]`` for a -> b -> a), or None when it is acyclic; a parent that is not
    a key of ``parents`` is a root. For messages that name the cycle, not just its nodes."""
    children: dict[str, list[str]] = {v: [] for v in parents}
    for child, ps in parents.items():
        for p in ps:
            children.setdefault(p, []).append(child)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in children:
        if start in state:
            continue
        path, stack = [start], [iter(children[start])]
        state[start] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return [*path[path.index(child) :], child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append(iter(children[child]))
    return None


def structural_hamming_distance(
    a: Mapping[str, tuple[str, ...]], b: Mapping[str, tuple[str, ...]]
) -> int:
    """Number of edges in one structure but not the other, a reversed edge counting once."""
    ea = {(p, c) for c, ps in a.items() for p in ps}
    eb = {(p, c) for c, ps in b.items() for p in ps}
    reversed_pairs = {(p, c) for p, c in ea - eb if (c, p) in eb - ea}
    return len(ea ^ eb) - len(reversed_pairs)


def structure_diff(
    learned: Mapping[str, Sequence[str]], reference: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """Extra, missing and reversed links of ``learned`` against ``reference``; their sum is
    the structural Hamming distance (``structural_hamming_distance``)."""
    ours = {(p, c) for c, ps in learned.items() for p in ps}
    theirs = {(p, c) for c, ps in reference.items() for p in ps}
    reversed_links = sorted((p, c) for p, c in ours - theirs if (c, p) in theirs)
    extra = sorted((p, c) for p, c in ours - theirs if (c, p) not in theirs)
    missing = sorted((p, c) for p, c in theirs - ours if (c, p) not in ours)
    return {
        "shd": len(extra) + len(missing) + len(reversed_links),
        "extra": len(extra),
        "missing": len(missing),
        "reversed": len(reversed_links),
        "extra_links": [list(e) for e in extra],
        "missing_links": [list(e) for e in missing],
        "reversed_links": [list(e) for e in reversed_links],
    }
