"""A chi-square test of integer draws against the exact discrete Gaussian (``dp.gaussian``),
shared by the sampler's and the circuit's law tests."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ppbn.dp.gaussian import discrete_gaussian_pmf


def gaussian_chisquare_p(draws: np.ndarray, sigma: float) -> float:
    """The p-value of ``draws`` against N_Z(0, sigma^2): one bin per value expected at least
    5 times within 6 sigma, the rest pooled into one bin."""
    support = np.arange(-int(6 * sigma) - 1, int(6 * sigma) + 2)
    probs = discrete_gaussian_pmf(support, sigma)
    keep = probs * draws.size >= 5
    counts = np.array([np.count_nonzero(draws == z) for z in support[keep]])
    expected = probs[keep] * draws.size
    counts = np.append(counts, draws.size - counts.sum())
    expected = np.append(expected, draws.size - expected.sum())
    return float(stats.chisquare(counts, expected).pvalue)
