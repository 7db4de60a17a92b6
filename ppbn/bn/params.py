"""Parameter learning from counts: maximum likelihood alpha_ijk / alpha_ij (Yang-Wright
Sec. 7.1) or a symmetric Dirichlet posterior mean.

A parent configuration that never occurs (alpha_ij = 0) has no ML estimate: its row is
uniform and the configuration is flagged in ``BayesNet.unobserved``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ppbn.bn.model import BayesNet


def cpt_from_counts(
    table: np.ndarray, pseudo_count: float = 0.0
) -> tuple[np.ndarray, tuple[int, ...]]:
    """(q, d) CPT from a (q, d) count table, and the rows that had no records."""
    table = np.asarray(table, dtype=float)
    if pseudo_count < 0:
        raise ValueError("the Dirichlet pseudo-count must be >= 0")
    d = table.shape[1]
    totals = table.sum(axis=1)
    unobserved = tuple(int(j) for j in np.flatnonzero(totals <= 0))
    numer = table + pseudo_count
    denom = totals + d * pseudo_count
    with np.errstate(invalid="ignore", divide="ignore"):
        cpt = np.where(
            denom[:, None] > 0, numer / np.where(denom > 0, denom, 1.0)[:, None], 1.0 / d
        )
    return cpt, unobserved


def estimate_parameters(
    names: tuple[str, ...],
    states: Mapping[str, tuple[str, ...]],
    parents: Mapping[str, tuple[str, ...]],
    count_fn: Callable[[tuple[str, ...]], np.ndarray],
    pseudo_count: float = 0.0,
) -> BayesNet:
    """CPTs of every variable given its parents, from ``count_fn((parents..., child))``."""
    cpts: dict[str, np.ndarray] = {}
    unobserved: dict[str, tuple[int, ...]] = {}
    for v in names:
        table = count_fn((*parents[v], v))
        cpt, missing = cpt_from_counts(table.reshape(-1, len(states[v])), pseudo_count)
        cpts[v] = cpt
        if missing:
            unobserved[v] = missing
    return BayesNet(
        tuple(names), dict(states), {v: tuple(parents[v]) for v in names}, cpts, unobserved
    )
