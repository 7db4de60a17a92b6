"""Estimating the original distribution of one or a few randomized categorical columns.

A thin layer over the PRAM estimators (``ppbn.randomized.pram.estimators``, Ma 2006
Sec. 2.4): the moment estimate N_hat = (P^T)^{-1} N_tilde (Theorem 2; unbiased, may be
negative) and the EM / maximum-likelihood estimate (Sec. 2.4.2; nonnegative). Columns
randomized together (a Zhan group, a PRAM block) are handled by ``PramEstimator``: the
table is estimated over the whole block and the other columns summed out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.randomized.pram.estimators import PramEstimator
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme

METHODS = ("moment", "em")


@dataclass(frozen=True)
class CategoricalEstimate:
    """Count tables over ``columns`` (C order, first column slowest)."""

    columns: tuple[str, ...]
    method: str
    randomized: np.ndarray  # N_tilde: the counts as received
    counts: np.ndarray  # the estimate of the original counts

    @property
    def records(self) -> int:
        return int(round(float(self.randomized.sum())))

    @property
    def fractions(self) -> np.ndarray:
        """The estimated distribution (the moment estimate's may hold negative cells)."""
        return self.counts / self.randomized.sum()


def reconstruct(
    codes: np.ndarray,
    columns: Sequence[str],
    scheme: RandomizationScheme,
    method: str = "em",
    of: Sequence[str] | None = None,
) -> CategoricalEstimate:
    """Estimate the original count table of ``of`` (default: all ``columns``) from the
    randomized ``codes`` (n x len(columns), state indices) under ``scheme``.

    Every column randomized together with one of ``of`` must be among ``columns``.
    """
    if method not in METHODS:
        raise RandomizationError(
            f"unknown method {method!r} for a categorical column (use moment or em)"
        )
    wanted = tuple(columns if of is None else of)
    estimator = PramEstimator(columns, np.asarray(codes), scheme)
    counts = estimator.moment(wanted) if method == "moment" else estimator.em(wanted)
    return CategoricalEstimate(wanted, method, estimator.randomized_counts(wanted), counts)
