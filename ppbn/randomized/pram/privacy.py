"""Privacy metrics of a PRAM matrix (Ma 2006, Sec. 3.1; Ma and Sivakumar, Sec. II-B).

- gamma-amplification (Evfimievski et al.): gamma = max over outputs k of
  max_{k1,k2} P(k1, k) / P(k2, k). Zero entries (docs/conventions.md, "Gamma amplification"): a column holding a zero next to
  a nonzero entry makes the strict value infinite (that output rules states out). We
  report the strict value and the value over the nonzero entries only, and say which is
  the headline: the strict one. The dissertation's grouped-randomization figures
  (e.g. 2(1-p)/p for 6 states in two groups of 3, Sec. 3.1.2) are the nonzero-only value.
  Note: for binary randomization with p1 = 0.1, p2 = 0.25 the paper prints gamma = 9,
  which is (1-p1)/p1, a row ratio; the definition above gives 7.5.
- Probabilistic K-anonymity (Sec. 3.1.3): K_p = min over outputs k' of the number of
  originals k with posterior Pr(X = k | X_tilde = k') > 0, and Dist_K = min over outputs
  of the Kullback-Leibler divergence (bits) of that posterior from the uniform
  distribution over its support (our reading of "uniform over K_p categories").
- Conditional entropy H(X | X_tilde) in bits for a given prior (Sec. 3.1.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.randomized.pram.operators import RandomizationScheme, validate_matrix


@dataclass(frozen=True)
class Gamma:
    """gamma-amplification of one matrix under both zero-entry conventions."""

    value: float
    value_ignoring_zeros: float

    @property
    def convention(self) -> str:
        """Which value is the headline, in words (for reports)."""
        if self.value == self.value_ignoring_zeros:
            return "strict (no zero entries matter)"
        return "strict (infinite: an output excludes some originals); nonzero-only value given too"


def gamma_amplification(matrix: np.ndarray, name: str = "matrix") -> Gamma:
    """gamma over all outputs that can occur; see the module docstring for zeros."""
    p = validate_matrix(matrix, name)
    strict = 1.0
    nonzero_only = 1.0
    for column in p.T:
        positive = column[column > 0]
        if positive.size == 0:
            continue
        ratio = float(positive.max() / positive.min())
        nonzero_only = max(nonzero_only, ratio)
        strict = float("inf") if positive.size < column.size else max(strict, ratio)
    return Gamma(strict, nonzero_only)


def _prior(prior: Sequence[float] | None, size: int) -> np.ndarray:
    if prior is None:
        return np.full(size, 1.0 / size)
    arr = np.asarray(prior, dtype=float)
    if arr.shape != (size,) or np.any(arr < 0) or not np.isclose(arr.sum(), 1.0):
        raise ValueError(f"prior must be {size} nonnegative probabilities summing to 1")
    return arr


def _posteriors(p: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns of Pr(X = k | X_tilde = k') and Pr(X_tilde = k')."""
    joint = prior[:, None] * p
    marginal = joint.sum(axis=0)
    post = np.divide(joint, marginal, out=np.zeros_like(joint), where=marginal > 0)
    return post, marginal


@dataclass(frozen=True)
class KAnonymity:
    k_p: int
    dist_k: float


def probabilistic_k_anonymity(
    matrix: np.ndarray, prior: Sequence[float] | None = None, name: str = "matrix"
) -> KAnonymity:
    """(K_p, Dist_K) over the outputs that occur; prior defaults to uniform."""
    p = validate_matrix(matrix, name)
    post, marginal = _posteriors(p, _prior(prior, p.shape[0]))
    k_p = p.shape[0]
    dist = float("inf")
    for k in np.flatnonzero(marginal > 0):
        column = post[:, k]
        support = column[column > 0]
        k_p = min(k_p, int(support.size))
        dist = min(dist, float(np.log2(support.size) + np.sum(support * np.log2(support))))
    return KAnonymity(k_p, max(dist, 0.0))


def conditional_entropy(
    matrix: np.ndarray, prior: Sequence[float] | None = None, name: str = "matrix"
) -> float:
    """H(X | X_tilde) in bits: -sum prior(l) P(l, k) log2 Pr(X = l | X_tilde = k)."""
    p = validate_matrix(matrix, name)
    pri = _prior(prior, p.shape[0])
    post, _ = _posteriors(p, pri)
    joint = pri[:, None] * p
    used = joint > 0
    return float(-np.sum(joint[used] * np.log2(post[used])))


@dataclass(frozen=True)
class BlockPrivacy:
    """The metrics of one randomized (possibly combined) variable, for reports.

    ``entropy_bits`` is H(X | X_tilde); ``prior_entropy_bits`` is H(X), its upper bound.
    """

    variables: tuple[str, ...]
    label: str
    gamma: Gamma
    k_anonymity: KAnonymity
    entropy_bits: float
    prior_entropy_bits: float


def privacy_report(
    scheme: RandomizationScheme, priors: Mapping[str, Sequence[float]] | None = None
) -> list[BlockPrivacy]:
    """gamma, K_p and H(X | X_tilde) for every block of ``scheme``.

    ``priors`` maps a block name (variables joined by ``+``) to a prior over its combined
    states; a block without one is measured under the uniform prior.
    """
    out = []
    for block in scheme.blocks:
        prior = None if priors is None else priors.get(block.name)
        pri = _prior(prior, block.size)
        out.append(
            BlockPrivacy(
                block.variables,
                block.label,
                gamma_amplification(block.matrix, block.name),
                probabilistic_k_anonymity(block.matrix, prior, block.name),
                conditional_entropy(block.matrix, prior, block.name),
                float(-np.sum(pri[pri > 0] * np.log2(pri[pri > 0]))),
            )
        )
    return out
