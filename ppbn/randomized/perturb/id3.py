"""ID3 decision trees from randomized data (Ma 2006, Sec. 7.2).

ID3 (Sec. 7.2.1) needs, at each node, the class counts of the records that follow the
node's path a_1 = k_1, ..., a_l = k_l, and for a candidate attribute A the class counts
of each branch A = k. From randomized data these are estimated (Sec. 7.2.2): T_hat =
(P^T)^{-1} T_tilde over (a_1, ..., a_l, A, C), sliced at the path. The moment estimate of
that slice is computed as a weighted count over the records
(``RandomizedData.conditional_counts``), so a node costs O(n) per candidate however deep
it is; with ``method="em"`` the whole table is estimated by EM and sliced, which is
exponential in the depth and meant for small trees.

Entropies use the estimates clipped at 0 (an entropy of a negative count is undefined),
with |D_hat| the sum of the clipped branch counts. The dissertation's ID3 has no pruning;
two stopping rules are added because estimated counts are never exactly pure or empty:
a branch whose estimated count is below ``min_count`` is "empty" (step 6(c): a leaf with
the parent's majority class), and a node whose best estimated gain is not positive
becomes a leaf (splitting on noise cannot help). ``max_depth`` bounds the tree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppbn.errors import UserError
from ppbn.randomized.perturb.estimated import ESTIMATORS, RandomizedData, state_names

GAIN_TOLERANCE = 1e-12
# cells of the one table the EM variant estimates per node and candidate
EM_TABLE_LIMIT = 1 << 22


def entropy(counts: np.ndarray) -> float:
    """Entropy in bits of the class distribution given by nonnegative counts (0 if empty)."""
    counts = np.asarray(counts, dtype=float)
    total = counts.sum()
    if total <= 0:
        return 0.0
    share = counts[counts > 0] / total
    return float(-(share * np.log2(share)).sum())


def information_gain(node_counts: np.ndarray, branch_counts: np.ndarray) -> float:
    """IGain(D, A) = entropy(D) - sum_k |D_k| / |D| entropy(D_k) (Sec. 7.2.1).

    ``branch_counts`` is (states of A, classes); estimates are clipped at 0 first.
    """
    branches = np.clip(np.asarray(branch_counts, dtype=float), 0.0, None)
    sizes = branches.sum(axis=1)
    total = sizes.sum()
    if total <= 0:
        return 0.0
    children = sum(size / total * entropy(row) for size, row in zip(sizes, branches, strict=True))
    return entropy(np.clip(node_counts, 0.0, None)) - children


@dataclass
class Node:
    """A leaf (``attribute`` None) or a test on ``attribute`` with one child per state."""

    label: int
    counts: np.ndarray  # estimated class counts of the records reaching this node
    attribute: str | None = None
    gain: float = 0.0
    children: list[Node] = field(default_factory=list)

    def to_dict(
        self, classes: list[str], states: Mapping[str, Sequence[str]] | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": classes[self.label],
            "counts": dict(zip(classes, np.round(self.counts, 3).tolist(), strict=True)),
        }
        if self.attribute is not None:
            names = state_names(states, self.attribute, len(self.children))
            out["split"] = self.attribute
            out["gain"] = round(self.gain, 6)
            out["children"] = {
                name: child.to_dict(classes, states)
                for name, child in zip(names, self.children, strict=True)
            }
        return out


@dataclass(frozen=True)
class DecisionTree:
    """An ID3 tree over coded attributes; ``predict`` walks it for each record."""

    class_name: str
    attributes: tuple[str, ...]
    root: Node

    def predict(self, data: RandomizedData) -> np.ndarray:
        """Class code for each record of ``data`` (plain records with the same columns)."""
        out = np.empty(data.records, dtype=np.int64)
        self._assign(self.root, np.arange(data.records), data, out)
        return out

    def _assign(self, node: Node, rows: np.ndarray, data: RandomizedData, out: np.ndarray) -> None:
        if node.attribute is None or rows.size == 0:
            out[rows] = node.label
            return
        values = data.column(node.attribute)[rows]
        for state, child in enumerate(node.children):
            self._assign(child, rows[values == state], data, out)

    def nodes(self) -> int:
        return _count(self.root)

    def depth(self) -> int:
        return _depth(self.root)

    def to_dict(self, states: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        classes = state_names(states, self.class_name, len(self.root.counts))
        return {
            "model": "id3",
            "class": self.class_name,
            "nodes": self.nodes(),
            "depth": self.depth(),
            "tree": self.root.to_dict(classes, states),
        }

    def lines(self, states: Mapping[str, Sequence[str]] | None = None) -> list[str]:
        """The tree as indented text, one line per branch (for people)."""
        classes = state_names(states, self.class_name, len(self.root.counts))
        out: list[str] = []
        _render(self.root, classes, states, "", out)
        return out


def _render(
    node: Node,
    classes: list[str],
    states: Mapping[str, Sequence[str]] | None,
    indent: str,
    out: list[str],
) -> None:
    if node.attribute is None:
        if not out:
            out.append(f"{classes[node.label]} (a single leaf)")
        return
    names = state_names(states, node.attribute, len(node.children))
    for name, child in zip(names, node.children, strict=True):
        leaf = (
            f" -> {classes[child.label]} ({child.counts.sum():.0f} records)"
            if child.attribute is None
            else ""
        )
        out.append(f"{indent}{node.attribute} = {name}{leaf}")
        _render(child, classes, states, indent + "  ", out)


def _count(node: Node) -> int:
    return 1 + sum(_count(c) for c in node.children)


def _depth(node: Node) -> int:
    return 0 if not node.children else 1 + max(_depth(c) for c in node.children)


def fit_id3(
    data: RandomizedData,
    class_name: str,
    attributes: Sequence[str] | None = None,
    method: str = "moment",
    max_depth: int | None = None,
    min_count: float = 1.0,
) -> DecisionTree:
    """Grow an ID3 tree from ``data`` (randomized or plain) and its public scheme."""
    if method not in ESTIMATORS:
        raise UserError(f"unknown estimator {method!r}; use one of {', '.join(ESTIMATORS)}")
    if max_depth is not None and max_depth < 0:
        raise UserError(f"max depth must be at least 0, got {max_depth}")
    if not min_count > 0:
        raise UserError(f"min count must be positive, got {min_count:g}")
    chosen = data.attributes_besides(class_name, attributes)
    grower = _Grower(data, class_name, method, max_depth, min_count)
    root_counts = grower.counts({}, None)
    return DecisionTree(class_name, tuple(chosen), grower.grow({}, chosen, root_counts))


class _Grower:
    """ID3(D, AL) of Sec. 7.2.1 with the node counts estimated as in Sec. 7.2.2."""

    def __init__(
        self,
        data: RandomizedData,
        class_name: str,
        method: str,
        max_depth: int | None,
        min_count: float,
    ) -> None:
        self.data = data
        self.class_name = class_name
        self.method = method
        self.max_depth = max_depth
        self.min_count = min_count

    def counts(self, path: Mapping[str, int], candidate: str | None) -> np.ndarray:
        """Estimated counts over (candidate, class), or over the class, at ``path``."""
        free = [self.class_name] if candidate is None else [candidate, self.class_name]
        if self.method == "moment":
            return self.data.conditional_counts(path, free)
        names = [*path, *free]
        cells = int(np.prod([self.data.cardinality(v) for v in names], dtype=np.int64))
        if cells > EM_TABLE_LIMIT:
            raise UserError(
                f"ID3 with EM estimates needs a {cells:,}-cell table at depth {len(path)}; "
                "use the moment estimator or a smaller max depth"
            )
        return self.data.estimate(names, "em")[tuple(path.values())]

    def grow(self, path: dict[str, int], remaining: list[str], counts: np.ndarray) -> Node:
        clipped = np.clip(counts, 0.0, None)
        node = Node(int(np.argmax(clipped)), clipped)
        pure = np.count_nonzero(clipped > 0) <= 1
        deep = self.max_depth is not None and len(path) >= self.max_depth
        if pure or not remaining or deep:
            return node
        best, best_gain, best_table = None, GAIN_TOLERANCE, None
        for candidate in remaining:
            table = self.counts(path, candidate)
            gain = information_gain(clipped, table)
            if gain > best_gain:
                best, best_gain, best_table = candidate, gain, table
        if best is None or best_table is None:
            return node
        node.attribute, node.gain = best, best_gain
        rest = [a for a in remaining if a != best]
        for state, branch in enumerate(best_table):
            if np.clip(branch, 0.0, None).sum() < self.min_count:
                node.children.append(Node(node.label, np.clip(branch, 0.0, None)))
            else:
                node.children.append(self.grow({**path, best: state}, rest, branch))
        return node
