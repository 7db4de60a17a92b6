"""Family scores over a count table, in the five modes ppbn offers (every learner).

``counts`` has shape (q, d): parent configurations x child states (see ``bn.model``).
Modes (docs/conventions.md, "Score modes"):

- ``exact``: ln f of Yang-Wright eq. (3), the K2 (Cooper-Herskovits) score, via lgamma.
- ``yw``: g of eq. (6) exactly as printed, with beta_ijk = max(alpha_ijk, 1),
  l_ij = alpha_ij + d - 1 and pub(d, q) = q(d-1) + q ln (d-1)! + q(d-1)/2 ln 2 pi.
  Folding q(d-1) into pub() assumes sum_k beta_ijk = alpha_ij, which is false for every
  zero cell, so g exceeds ln f by about one per zero cell (the measured divergence).
- ``yw0``: g minus the number of zero cells, which removes that bias.
- ``bic``: log-likelihood minus c_star * (ln N / 2) * q(d-1) (standard BIC; docs/conventions.md, "BIC penalty", says
  the PRAM paper prints N/2, which we read as a typo). N is the public record count n,
  also for available-case families with fewer complete records (docs/user-guide.md, "Missing values").
- ``bdeu``: the Bayesian Dirichlet equivalent uniform score (Heckerman, Geiger and
  Chickering 1995) with equivalent sample size ``ess`` (pgmpy's convention: alpha_ij =
  ess/q, alpha_ijk = ess/(q d); default 10). On the secure path: lnGamma with a public
  shift (``protocols.fixedpoint``).

Counts may be non-integer (PRAM estimates); negative estimates must be clipped by the
caller.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

# SCORE_MODES, the modes every learner offers, and DEFAULT_ESS live in bn.constants, which
# the command line reads without loading numpy and scipy
from ppbn.bn.constants import DEFAULT_ESS, SCORE_MODES


def pub(d: int, q: int) -> float:
    """The public term of Yang-Wright eq. (6)."""
    return q * (d - 1) + q * math.lgamma(d) + q * (d - 1) / 2 * math.log(2 * math.pi)


def _xlogx(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)


def exact_score(counts: np.ndarray) -> float:
    """ln f (eq. 3): sum_j [ln (d-1)! - ln (alpha_ij + d - 1)!] + sum_jk ln alpha_ijk!."""
    counts = np.asarray(counts, dtype=float)
    d = counts.shape[1]
    row = counts.sum(axis=1)
    return float(np.sum(gammaln(d) - gammaln(row + d)) + np.sum(gammaln(counts + 1.0)))


def yw_score(counts: np.ndarray) -> float:
    """g (eq. 6) as printed."""
    counts = np.asarray(counts, dtype=float)
    q, d = counts.shape
    beta = np.where(counts == 0, 1.0, counts)
    ell = counts.sum(axis=1) + d - 1
    cells = np.sum(0.5 * np.log(beta) + _xlogx(beta))
    rows = np.sum(0.5 * np.log(ell) + _xlogx(ell))
    return float(cells - rows + pub(d, q))


def bic_score(counts: np.ndarray, c_star: float = 1.0, n_records: int | None = None) -> float:
    """Log-likelihood of the ML parameters minus c_star * (ln N / 2) * free parameters.

    N is ``n_records`` when given (the public record count: the secure path cannot see a
    family's own total, which under available-case analysis may be smaller), else the
    table's total."""
    counts = np.asarray(counts, dtype=float)
    q, d = counts.shape
    n = counts.sum() if n_records is None else n_records
    loglik = float(np.sum(_xlogx(counts)) - np.sum(_xlogx(counts.sum(axis=1))))
    return loglik - c_star * (math.log(n) / 2 if n > 1 else 0.0) * q * (d - 1)


def bdeu_score(counts: np.ndarray, ess: float = DEFAULT_ESS) -> float:
    """BDeu (Heckerman, Geiger, Chickering 1995, eq. 28 with the uniform prior):
    sum_j [lnG(a_j) - lnG(a_j + N_j)] + sum_jk [lnG(a_jk + N_jk) - lnG(a_jk)], with
    a_j = ess/q and a_jk = ess/(q d). Unobserved parent configurations add exactly 0."""
    if not ess > 0:
        raise ValueError("the BDeu equivalent sample size must be > 0")
    counts = np.asarray(counts, dtype=float)
    q, d = counts.shape
    a_j = ess / q
    a_jk = ess / (q * d)
    rows = counts.sum(axis=1)
    return float(
        np.sum(gammaln(a_j) - gammaln(a_j + rows)) + np.sum(gammaln(counts + a_jk) - gammaln(a_jk))
    )


def family_score(
    counts: np.ndarray,
    mode: str,
    c_star: float = 1.0,
    n_records: int | None = None,
    ess: float = DEFAULT_ESS,
) -> float:
    """Score of one family (child with a parent set) from its (q, d) count table;
    ``n_records`` is the N of the BIC penalty (see ``bic_score``), ``ess`` the BDeu
    equivalent sample size."""
    if mode == "exact":
        return exact_score(counts)
    if mode == "yw":
        return yw_score(counts)
    if mode == "yw0":
        return yw_score(counts) - int(np.count_nonzero(np.asarray(counts) == 0))
    if mode == "bic":
        return bic_score(counts, c_star, n_records)
    if mode == "bdeu":
        return bdeu_score(counts, ess)
    raise ValueError(f"unknown score mode {mode!r}; choose one of {', '.join(SCORE_MODES)}")
