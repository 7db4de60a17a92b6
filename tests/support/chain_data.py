"""For the marginal releases' tests: a data set whose pairs leave no doubt (four binary
variables a - b - c - d, each a noisy copy of the one before), and a release's plan."""

from __future__ import annotations

import numpy as np

from ppbn.dp.accounting import DPPlan, plan

CHAIN = ("a", "b", "c", "d")
CHAIN_STATES = {v: ("0", "1") for v in CHAIN}
LINKS = (("a", "b"), ("b", "c"), ("c", "d"))


def chain_codes(n: int, rng: np.random.Generator, strength: float = 0.9) -> np.ndarray:
    """``n`` records (columns in ``CHAIN`` order): a uniform, each next one equal to the
    one before with probability ``strength``."""
    cols = [rng.integers(0, 2, size=n)]
    for _ in range(len(CHAIN) - 1):
        flip = rng.random(n) > strength
        cols.append(np.where(flip, 1 - cols[-1], cols[-1]))
    return np.column_stack(cols)


def pair_plan(epsilon: float, cards: list[int], n: int, release: str) -> DPPlan:
    """A marginal release's plan (``release`` marginals or adaptive) as its job makes it."""
    return plan(
        epsilon,
        n_records=n,
        cardinalities=cards,
        max_parents=1,
        mode="bic",
        score_frac=0,
        release=release,
    )
