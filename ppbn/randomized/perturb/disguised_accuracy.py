"""A classifier's accuracy measured on a *disguised* test set (Zhan, Chang and Matwin, Sec. 3.5).

When the test records are randomized like the training records, a wrong prediction on a
record may be a wrong prediction or a randomized record. Zhan's answer for two Warner
groups: run the classifier on the disguised set S1S2 and on the sets with one or both
groups reversed, and solve eq. 7, P* = M2 P, for the accuracy on the original records.

Written here for any scheme of independent blocks. For one record with randomized block
states s_b, let Q_b = P_b^-1 and

    h(s) = sum over v of  prod_b Q_b[s_b, v_b] * correct(v),

where v runs over the candidate original records (every block replaced by a candidate
state, unrandomized columns kept). Because sum_s P[u, s] Q[s, v] = [u = v] block by block,
E[h(S) | original u] = correct(u): the mean of h over the test records is an unbiased
estimate of the accuracy on the original records. For a Warner group, row s of
Q_b = (theta I - (1 - theta) J) / (2 theta - 1) is non-zero only at s and its opposite,
so the candidates are exactly Zhan's reversed test sets and the estimate solves eq. 7.
(The paper lists eq. 7's left side in the order cc, c-bar c-bar, c-bar c, c c-bar against
M2's rows E1E2, E1 E2-bar, E1-bar E2, E1-bar E2-bar; the Kronecker order is used here.)

The estimate may leave [0, 1] on few records; its standard error is reported with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme

# Candidate original records per test record (the product of the candidates per block):
# each candidate is one pass of the classifier over the test set.
MAX_CANDIDATES = 16_384
# Entries of an inverse matrix below this (relative to its largest) are structural zeros.
ZERO_WEIGHT = 1e-12


class TooManyPasses(RandomizationError):
    """The estimate would take more classifier passes than MAX_CANDIDATES allows; callers for
    whom it is an extra (the true accuracy is known) skip it and say why."""

    def __init__(self, passes: int) -> None:
        super().__init__(
            f"the disguised-test estimate needs {passes:,} classifier passes (more than {MAX_CANDIDATES:,}): "
            "randomize fewer or binary columns, or attributes in groups (a Warner group has 2 candidates, "
            "whatever its size)"
        )
        self.passes = passes


@dataclass(frozen=True)
class DisguisedAccuracy:
    """The estimate, its standard error over the test records, and the classifier passes."""

    estimate: float
    standard_error: float
    candidates: int
    records: int


def _candidates(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per randomized state s: the original states v with Q[s, v] != 0 and their weights,
    padded to one width (a padded slot has weight 0)."""
    inverse = np.linalg.inv(matrix)
    nonzero = np.abs(inverse) > ZERO_WEIGHT * np.abs(inverse).max()
    width = int(nonzero.sum(axis=1).max())
    states = np.tile(np.arange(matrix.shape[0])[:, None], (1, width))
    weights = np.zeros((matrix.shape[0], width))
    for s in range(matrix.shape[0]):
        columns = np.flatnonzero(nonzero[s])
        states[s, : columns.size] = columns
        weights[s, : columns.size] = inverse[s, columns]
    return states, weights


def disguised_accuracy(
    correct: Callable[[np.ndarray], np.ndarray],
    codes: np.ndarray,
    columns: Sequence[str],
    scheme: RandomizationScheme,
) -> DisguisedAccuracy:
    """Unbiased estimate of the share of *original* test records ``correct`` accepts, from the
    randomized records ``codes`` (n x columns) and the public ``scheme`` that randomized them.

    ``correct(records)`` -> bool per record: the classifier's prediction from the attribute
    columns equals the record's class column (both as in ``records``).
    """
    codes = np.asarray(codes, dtype=np.int64)
    position = {c: j for j, c in enumerate(columns)}
    blocks = [b for b in scheme.blocks if not b.is_identity]
    for block in blocks:
        missing = [v for v in block.variables if v not in position]
        if missing:
            raise RandomizationError(f"test records: block {block.name} needs column(s) {missing}")
    tables = [_candidates(block.matrix) for block in blocks]
    total = int(np.prod([states.shape[1] for states, _ in tables], dtype=np.int64))
    if total > MAX_CANDIDATES:
        raise TooManyPasses(total)
    observed = [
        np.ravel_multi_index(tuple(codes[:, position[v]] for v in b.variables), b.cardinalities)
        for b in blocks
    ]
    h = np.zeros(codes.shape[0])
    for slots in itertools.product(*(range(states.shape[1]) for states, _ in tables)):
        variant = codes.copy()
        weight = np.ones(codes.shape[0])
        for block, (states, weights), s, slot in zip(blocks, tables, observed, slots, strict=True):
            weight *= weights[s, slot]
            parts = np.unravel_index(states[s, slot], block.cardinalities)
            for v, part in zip(block.variables, parts, strict=True):
                variant[:, position[v]] = part
        if np.any(weight):
            h += weight * np.asarray(correct(variant), dtype=float)
    n = codes.shape[0]
    error = float(np.std(h, ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return DisguisedAccuracy(float(np.mean(h)) if n else float("nan"), error, total, n)
