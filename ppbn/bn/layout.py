"""A layered (Sugiyama-style) layout of a DAG, deterministic, in inches.

Rows top to bottom by longest path from the roots, a root moved down next to its first
child; a row wider than ``max_width`` is split into staggered rows. An edge across more
than one row passes through bend points, one per row between, that take part in the
ordering like nodes, so it runs beside the boxes instead of under them. Order within a
row: barycenter sweeps; x: as near the neighbours' mean as the box widths allow
(isotonic regression). No random numbers anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ppbn.bn.model import topological_order

Edge = tuple[str, str]
Point = tuple[float, float]
BEND_WIDTH = 0.12  # inches a bend point takes in its row
BEND_WEIGHT = 4.0  # bend points hold their place more than boxes: long edges run straighter
SWEEPS = 24  # barycenter ordering sweeps (down and up in turn)
SETTLE = 8  # placement passes with the order fixed, both neighbours counted


@dataclass(frozen=True)
class Layout:
    """Box centres (x right, y down from the first row, inches), the bend points of each
    edge that crosses rows, and the number of rows."""

    pos: dict[str, Point]
    bends: dict[Edge, list[Point]]
    rows: int


def layers(variables: Sequence[str], edges: Sequence[Edge]) -> dict[str, int]:
    """Longest path from the roots; a root sits just above its highest child. ValueError
    on a cycle."""
    parents = {v: tuple(p for p, c in edges if c == v) for v in variables}
    layer: dict[str, int] = {}
    for v in topological_order(tuple(variables), parents):
        layer[v] = 1 + max((layer[p] for p in parents[v]), default=-1)
    for v in variables:
        children = [layer[c] for p, c in edges if p == v]
        if not parents[v] and children:
            layer[v] = min(children) - 1
    return layer


def isotonic(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Pool-adjacent-violators: the non-decreasing sequence nearest ``values`` (weighted
    least squares)."""
    blocks: list[tuple[float, float, int]] = []  # (mean, weight, count)
    for v, w in zip(values, weights, strict=True):
        mean, weight, count = v, w, 1
        while blocks and blocks[-1][0] > mean:
            m, u, n = blocks.pop()
            mean = (m * u + mean * weight) / (u + weight)
            weight, count = weight + u, count + n
        blocks.append((mean, weight, count))
    return [mean for mean, _, count in blocks for _ in range(count)]


def _place(
    row: list[str],
    size: Mapping[str, float],
    weight: Mapping[str, float],
    want: dict[str, float],
    gap: float,
) -> None:
    """Move ``want`` (x per node of ``row``, left to right) apart by the box widths, the
    heavier nodes less."""
    offsets, at = [], 0.0
    for i, v in enumerate(row):
        if i:
            at += (size[row[i - 1]] + size[v]) / 2 + gap
        offsets.append(at)
    fitted = isotonic(
        [want[v] - o for v, o in zip(row, offsets, strict=True)], [weight[v] for v in row]
    )
    for v, f, o in zip(row, fitted, offsets, strict=True):
        want[v] = f + o


def layered_layout(
    variables: Sequence[str],
    edges: Sequence[Edge],
    widths: Mapping[str, float],
    gap: float,
    row_step: float,
    max_width: float,
) -> Layout:
    """Lay out ``variables`` (boxes ``widths`` inches wide) and ``edges`` (a DAG)."""
    layer = layers(variables, edges)
    rows: list[list[str]] = []
    for k in sorted(set(layer.values())):
        members = [v for v in variables if layer[v] == k]
        span = sum(widths[v] + gap for v in members)
        parts = max(1, math.ceil(span / max_width))
        rows += [members[i::parts] for i in range(parts)]
    row_of = {v: i for i, row in enumerate(rows) for v in row}
    size = dict(widths)
    up: dict[str, list[str]] = {v: [] for v in variables}
    down: dict[str, list[str]] = {v: [] for v in variables}
    chains: dict[Edge, list[str]] = {}
    for p, c in edges:
        chain, last = [], p
        for r in range(row_of[p] + 1, row_of[c]):
            bend = f"\0{p}\0{c}\0{r}"
            rows[r].append(bend)
            size[bend], row_of[bend], up[bend], down[bend] = BEND_WIDTH, r, [], []
            chain.append(bend)
            down[last].append(bend)
            up[bend].append(last)
            last = bend
        down[last].append(c)
        up[c].append(last)
        chains[(p, c)] = chain
    x = {v: float(i) for row in rows for i, v in enumerate(row)}
    both = {v: up[v] + down[v] for v in x}
    weight = {v: 1.0 if v in widths else BEND_WEIGHT for v in x}
    for sweep in range(SWEEPS + SETTLE):
        downward = sweep % 2 == 0
        near = both if sweep >= SWEEPS else (up if downward else down)
        for row in rows if downward else rows[::-1]:
            want = {v: sum(x[n] for n in near[v]) / len(near[v]) if near[v] else x[v] for v in row}
            if sweep < SWEEPS:
                row.sort(key=lambda v: (want[v], x[v]))
            _place(row, size, weight, want, gap)
            x.update(want)
    left = min(x[v] - size[v] / 2 for v in x)
    return Layout(
        {v: (x[v] - left, row_of[v] * row_step) for v in variables},
        {e: [(x[b] - left, row_of[b] * row_step) for b in chain] for e, chain in chains.items()},
        len(rows),
    )
