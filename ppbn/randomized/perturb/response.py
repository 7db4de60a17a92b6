"""Randomized response and grouped randomization, written as PRAM blocks.

Zhan, Chang and Matwin (Sec. 3.2-3.3): Warner's randomized response keeps a binary answer
with probability theta and flips it otherwise; the multi-attribute form keeps a whole
*group* of binary attributes with probability theta or flips every bit of it, and groups
are randomized independently, so two groups give M2 = M1 (x) M1. Ma 2006 (Sec. 7.1.2.1)
randomizes a group of items simultaneously with the symmetric M-category randomization
over its 2^|G| combinations. Both are blocks of a ``RandomizationScheme``
(``ppbn.randomized.pram.operators``): one matrix over the group's combined states, C order,
first variable slowest, rows summing to 1 (docs/conventions.md, "Combined variables" and "PRAM matrices"). Every estimator of
``ppbn.randomized.pram.estimators`` then applies unchanged.

Learners need the transition matrix of *part* of a group (an itemset inside a group, one
attribute of Zhan's one-group scheme). ``marginal_transition`` computes it for any block
whose marginal exists, which covers Props. 7.1-7.2 (symmetric M-category groups) and the
flip-all groups of Zhan; the tests compare it with the propositions' closed forms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ppbn.randomized.pram.operators import (
    Block,
    RandomizationError,
    RandomizationScheme,
    binary_symmetric,
    multi_category,
)

# Two transition probabilities closer than this are the same number (sums of a few
# products of probabilities; the marginal of a block exists up to rounding).
MARGINAL_TOLERANCE = 1e-12


def check_theta(theta: object, what: str = "theta") -> float:
    """theta as a probability; 0.5 is refused: Warner's model cannot be inverted there.
    ``what`` names the value in the message (a mechanism file names its field)."""
    try:
        value = float(theta)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise RandomizationError(f"{what} must be a number in [0, 1], got {theta!r}") from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise RandomizationError(f"{what} must be a probability in [0, 1], got {theta!r}")
    if value == 0.5:
        raise RandomizationError(
            f"{what} = 0.5 is not invertible: randomized response with theta = 0.5 makes each "
            "answer a fair coin flip, independent of the truth (2 theta - 1 = 0), so nothing can be estimated"
        )
    return value


def warner(theta: float, what: str = "Warner theta") -> np.ndarray:
    """Warner's matrix M1 = [[theta, 1 - theta], [1 - theta, theta]] (Zhan Sec. 3.2, eq. 3)."""
    return binary_symmetric(1.0 - check_theta(theta, what))


def flip_group(bits: int, theta: float, what: str = "Zhan theta") -> np.ndarray:
    """Zhan's group scheme over ``bits`` binary attributes: keep all with theta, flip all else.

    In C order over binary states the complement of combined state s is 2^bits - 1 - s, so
    the matrix is theta I + (1 - theta) J with J the anti-diagonal permutation.
    """
    theta = check_theta(theta, what)
    if bits < 1:
        raise RandomizationError(
            f"a randomized-response group needs at least 1 attribute, got {bits}"
        )
    size = 1 << bits
    return theta * np.eye(size) + (1.0 - theta) * np.fliplr(np.eye(size))


def marginal_transition(
    matrix: np.ndarray, cardinalities: Sequence[int], keep: Sequence[int]
) -> np.ndarray | None:
    """Transition matrix of the variables at positions ``keep`` of a block, or None.

    Pr(kept randomized = t | kept original = s) is defined only when it does not depend on
    the original values of the other variables of the block (true for Props. 7.1-7.2 and
    for flip-all groups; false for an arbitrary joint matrix). Rows and columns follow the
    order of ``keep`` (C order, first slowest).
    """
    cards = tuple(int(c) for c in cardinalities)
    keep = tuple(int(k) for k in keep)
    if sorted(keep) != sorted(set(keep)) or any(not 0 <= k < len(cards) for k in keep):
        raise ValueError(f"keep must list distinct positions of 0..{len(cards) - 1}, got {keep}")
    rest = tuple(i for i in range(len(cards)) if i not in keep)
    n = len(cards)
    tensor = np.asarray(matrix, dtype=float).reshape(cards + cards)
    # sum out the randomized values of the other variables; the kept randomized axes then
    # sit at n, n+1, ... in increasing variable order. Reorder to (kept originals, other
    # originals, kept randomized), each kept list in the order of ``keep``.
    summed = tensor.sum(axis=tuple(n + i for i in rest))
    rank = {k: j for j, k in enumerate(sorted(keep))}
    moved = np.transpose(summed, keep + rest + tuple(n + rank[k] for k in keep))
    size = int(np.prod([cards[k] for k in keep], dtype=np.int64))
    others = int(np.prod([cards[r] for r in rest], dtype=np.int64))
    flat = moved.reshape(size, others, size)
    if np.max(np.abs(flat - flat[:, :1, :])) > MARGINAL_TOLERANCE:
        return None
    return flat[:, 0, :].copy()


def scheme_for(
    cardinalities: Mapping[str, int],
    randomized: Sequence[str],
    *,
    theta: float | None = None,
    p: float | None = None,
    groups: Sequence[Sequence[str]] = (),
) -> RandomizationScheme:
    """The scheme of the command-line mechanisms: exactly one of ``theta`` and ``p``.

    ``theta``: Warner randomized response (binary variables only); a group is kept or
    flipped as a whole (Zhan Sec. 3.3). ``p``: M-category randomization with parameter p
    (Ma Sec. 2.1); a group is randomized over its combined states (Sec. 7.1.2.1). Every
    variable of ``randomized`` that is in no group is randomized on its own; variables not
    in ``randomized`` and in no group are sent unchanged.
    """
    if (theta is None) == (p is None):
        raise RandomizationError(
            "give exactly one mechanism: theta (randomized response) or p (PRAM)"
        )
    seen: set[str] = set()
    units: list[tuple[str, ...]] = []
    for group in groups:
        members = tuple(str(v) for v in group)
        for v in members:
            if v not in cardinalities:
                raise RandomizationError(f"group {'+'.join(members)}: unknown variable {v!r}")
            if v in seen:
                raise RandomizationError(f"variable {v!r} is in two groups")
            seen.add(v)
        units.append(members)
    for v in randomized:
        if v not in cardinalities:
            raise RandomizationError(f"unknown variable {v!r}")
        if v not in seen:
            units.append((v,))
            seen.add(v)
    blocks = []
    for members in units:
        cards = tuple(int(cardinalities[v]) for v in members)
        if theta is not None:
            wide = [v for v, c in zip(members, cards, strict=True) if c != 2]
            if wide:
                raise RandomizationError(
                    f"randomized response needs binary variables; {wide[0]!r} has "
                    f"{cardinalities[wide[0]]} states (use --p for M-category randomization)"
                )
            matrix, label = flip_group(len(members), theta), f"randomized response theta={theta:g}"
        else:
            size = int(np.prod(cards, dtype=np.int64))
            matrix, label = multi_category(size, float(p)), f"multi-category p={p:g}"
        blocks.append(Block(members, cards, matrix, label))
    return RandomizationScheme(cardinalities, blocks)
