"""Checks of the inputs every share protocol takes: ring vectors and value bounds.

The bound MAX_BOUND_BITS is the largest for which a value plus the statistical mask of
``products.truncate`` never wraps around Z_2^128 (``fixedpoint.STAT_BITS``).
"""

from __future__ import annotations

import numpy as np

from ppbn.protocols.fixedpoint import RING_BITS, STAT_BITS

MAX_BOUND_BITS = RING_BITS - 1 - STAT_BITS  # |x| < 2^87: x + mask never wraps


def check_shares(x: np.ndarray, what: str) -> np.ndarray:
    """x as an array, refused (naming ``what``) unless it is an (n, 2) uint64 ring vector."""
    x = np.asarray(x)
    if x.dtype != np.uint64 or x.ndim != 2 or x.shape[1] != 2:
        raise ValueError(f"{what} must be an (n, 2) uint64 ring vector, got {x.shape} {x.dtype}")
    return x


def check_bound(bound_bits: int) -> None:
    """Refuse a bound the statistical mask of a masked opening cannot hide a value under."""
    if not 1 <= bound_bits <= MAX_BOUND_BITS:
        raise ValueError(f"bound_bits must lie in [1, {MAX_BOUND_BITS}] (STAT_BITS = {STAT_BITS})")
