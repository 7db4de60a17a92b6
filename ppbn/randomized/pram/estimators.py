"""Estimating true count tables from randomized data (Ma 2006, Sec. 2.4 and 5.3-5.4).

A count table has one axis per variable, C order (docs/conventions.md, "Table layouts"). With randomization blocks
P_1, ..., P_r the matrix of the whole table is their Kronecker product (first factor
slowest), so every product with P, P^T or their inverses is applied *block by block along
the block's axes*; the full matrix is never formed.

- Moment estimator (Theorem 2): N_hat = (P^T)^{-1} N_tilde; unbiased, may be negative.
- Covariance (Theorems 1 and 2; docs/conventions.md, "PRAM estimators"): Cov(N_hat) = (P^{-1})^T [sum_l N_l V_l] P^{-1},
  V_l = diag(P[l,:]) - P[l,:]^T P[l,:]. Since sum_l N_l V_l = diag(P^T N) - P^T diag(N) P,
  this equals (P^{-1})^T diag(P^T N) P^{-1} - diag(N), which is what is computed. N is
  plugged in as the moment estimate clipped at 0 (a negative "count" would make the
  binomial variances negative).
- EM / maximum likelihood (Sec. 2.4.2; update as in docs/conventions.md, "PRAM estimators"), started at N_tilde / N.
- Parameters theta_jk = N_jk / N_j and their normal approximation by the delta method
  (Sec. 5.4.1-5.4.2): Var ~ (Var N_jk - 2 theta Cov(N_jk, N_j) + theta^2 Var N_j) / N_j^2.
  These variances are conditional on the data D (randomization noise only), as in the
  dissertation; sampling noise of D itself is not included.

A variable randomized jointly with variables outside a requested table is handled
exactly: the table is estimated over all members of the blocks it touches and the extra
axes are summed out (the dissertation's "marginal transition matrix", case (d) of
Sec. 5.3, exists only when the joint matrix factorizes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme

# An operator acts on the axes listed, in that order, by a square matrix over their
# combined (C-order) states: T'[.., a, ..] = sum_b M[a, b] T[.., b, ..].
AxisOperator = tuple[tuple[int, ...], np.ndarray]


def apply_along_axes(table: np.ndarray, operators: Sequence[AxisOperator]) -> np.ndarray:
    """Apply each operator along its axes; equals the Kronecker product acting on vec(table)."""
    out = np.asarray(table, dtype=float)
    for axes, matrix in operators:
        if not axes:
            continue
        front = np.moveaxis(out, axes, tuple(range(len(axes))))
        lead = front.shape[: len(axes)]
        size = int(np.prod(lead))
        if matrix.shape != (size, size):
            raise ValueError(
                f"operator of shape {matrix.shape} does not fit axes {axes} of sizes {lead}"
            )
        moved = (matrix @ front.reshape(size, -1)).reshape(front.shape)
        out = np.moveaxis(moved, tuple(range(len(axes))), axes)
    return out


def count_table(codes: np.ndarray, cardinalities: Sequence[int]) -> np.ndarray:
    """Contingency table of the columns of ``codes`` over the declared domains (C order)."""
    cards = tuple(int(c) for c in cardinalities)
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(cards):
        raise ValueError(f"codes must be (n, {len(cards)}), got {codes.shape}")
    if not cards:
        return np.array(float(codes.shape[0]))
    flat = np.ravel_multi_index(tuple(codes.T), cards)
    return np.bincount(flat, minlength=int(np.prod(cards))).reshape(cards).astype(float)


def _transposed(operators: Sequence[AxisOperator]) -> list[AxisOperator]:
    return [(axes, m.T) for axes, m in operators]


def _inverse_transposed(operators: Sequence[AxisOperator]) -> list[AxisOperator]:
    return [(axes, np.linalg.inv(m).T) for axes, m in operators]


def moment_estimate(randomized: np.ndarray, operators: Sequence[AxisOperator]) -> np.ndarray:
    """N_hat = (P^T)^{-1} N_tilde, factor by factor (Theorem 2)."""
    return apply_along_axes(randomized, _inverse_transposed(operators))


def moment_covariance(estimate: np.ndarray, operators: Sequence[AxisOperator]) -> np.ndarray:
    """Cov(N_hat | D) of Theorems 1-2 as a (J, J) matrix over the C-order cells.

    Computed as (P^{-1})^T diag(P^T N) P^{-1} - diag(N) with N = max(estimate, 0); the
    products with P^{-1} are applied along the axes of a 2d-axis tensor, so the cost is
    O(J^2 sum K_b) and P itself is never formed.
    """
    counts = np.clip(np.asarray(estimate, dtype=float), 0.0, None)
    shape = counts.shape
    size = counts.size
    expected = apply_along_axes(counts, _transposed(operators)).reshape(-1)
    middle = np.diag(expected).reshape(shape + shape)
    inv_t = _inverse_transposed(operators)
    ndim = len(shape)
    left = apply_along_axes(middle, inv_t)
    both = apply_along_axes(left, [(tuple(a + ndim for a in axes), m) for axes, m in inv_t])
    return both.reshape(size, size) - np.diag(counts.reshape(-1))


def em_estimate(
    randomized: np.ndarray,
    operators: Sequence[AxisOperator],
    tol: float = 1e-9,
    max_iter: int = 5000,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Maximum-likelihood counts by EM (Sec. 2.4.2; update as in docs/conventions.md, "PRAM estimators").

    theta_j <- (1/N) sum_k N_tilde_k theta_j P_jk / sum_m theta_m P_mk, started at
    N_tilde / N (or at ``start`` normalised), until no cell moves by more than ``tol * N``
    in one cycle. The update keeps theta nonnegative and summing to 1; when the moment
    estimate is interior it is the MLE and EM converges to it. A cell that starts at 0
    stays at 0: the dissertation's start suits matrices near the identity; for one far
    from it (randomized response with theta < 0.5) pass an interior ``start``.

    EM crawls when the MLE is on the boundary (a cell tends to 0), so the iterations are
    accelerated with SQUAREM (Varadhan and Roland 2008): from two EM steps, extrapolate
    along the squared-step direction; the proposal is kept only if it is nonnegative and
    its likelihood is no worse than the two plain steps, then one EM step follows. Each
    accepted point is thus an EM image, nonnegative, with likelihood never decreasing.
    """
    observed = np.asarray(randomized, dtype=float)
    total = observed.sum()
    if total <= 0:
        return np.zeros_like(observed)
    forward = _transposed(operators)

    def step(theta: np.ndarray) -> np.ndarray:
        predicted = apply_along_axes(theta, forward)
        ratio = np.divide(observed, predicted, out=np.zeros_like(observed), where=predicted > 0)
        return theta * apply_along_axes(ratio, operators) / total

    def loglik(theta: np.ndarray) -> float:
        return log_likelihood(theta, observed, operators)

    theta = observed / total if start is None else np.asarray(start, dtype=float) / np.sum(start)
    for _ in range(max_iter):
        first = step(theta)
        second = step(first)
        r = first - theta
        v = second - first - r
        r_norm, v_norm = float(np.linalg.norm(r)), float(np.linalg.norm(v))
        updated = second
        if v_norm > 0:
            alpha = min(-r_norm / v_norm, -1.0)
            proposal = theta - 2 * alpha * r + alpha**2 * v
            if proposal.min() >= 0 and loglik(proposal) >= loglik(second):
                updated = step(proposal)
        change = float(np.max(np.abs(updated - theta)))
        theta = updated
        if change <= tol:
            break
    return theta * total


def log_likelihood(
    counts: np.ndarray, randomized: np.ndarray, operators: Sequence[AxisOperator]
) -> float:
    """ln L of the randomized table under true counts ``counts`` (multinomial, up to a constant)."""
    counts = np.asarray(counts, dtype=float)
    theta = counts / counts.sum()
    predicted = apply_along_axes(theta, _transposed(operators))
    observed = np.asarray(randomized, dtype=float)
    used = observed > 0
    if np.any(predicted[used] <= 0):
        return float("-inf")
    return float(np.sum(observed[used] * np.log(predicted[used])))


@dataclass(frozen=True)
class ParameterEstimate:
    """theta[j, k] = Pr(child = k | parents in configuration j) with its normal approximation.

    ``sd`` is the delta-method standard deviation (Sec. 5.4.2), conditional on the data;
    NaN where the estimated parent count is not positive (theta falls back to uniform).
    """

    variables: tuple[str, ...]
    theta: np.ndarray
    sd: np.ndarray

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation confidence interval, clipped to [0, 1]."""
        z = float(norm.ppf(0.5 + level / 2.0))
        return np.clip(self.theta - z * self.sd, 0, 1), np.clip(self.theta + z * self.sd, 0, 1)


def parameter_estimate(
    variables: Sequence[str], estimate: np.ndarray, covariance: np.ndarray
) -> ParameterEstimate:
    """theta from a family table (parents..., child) and the delta-method sd.

    theta uses the estimate clipped at 0 and renormalized per parent configuration; a
    configuration with no positive estimated count gets the uniform distribution.
    """
    table = np.asarray(estimate, dtype=float)
    d = table.shape[-1]
    flat = table.reshape(-1, d)
    q = flat.shape[0]
    clipped = np.clip(flat, 0.0, None)
    rows = clipped.sum(axis=1, keepdims=True)
    theta = np.where(rows > 0, clipped / np.where(rows > 0, rows, 1.0), 1.0 / d)
    cov = np.asarray(covariance).reshape(q, d, q, d)
    sd = np.full((q, d), np.nan)
    for j in range(q):
        block = cov[j, :, j, :]
        n_j = flat[j].sum()
        if n_j <= 0:
            continue
        var_k = np.diag(block)
        cov_k_total = block.sum(axis=1)
        var_total = block.sum()
        t = flat[j] / n_j
        var = (var_k - 2 * t * cov_k_total + t**2 * var_total) / n_j**2
        sd[j] = np.sqrt(np.clip(var, 0.0, None))
    return ParameterEstimate(tuple(variables), theta, sd)


class PramEstimator:
    """Estimates count tables of any variable subset from one randomized data set.

    Holds the randomized records (what the data miner or the child's owner received),
    the public scheme, and caches every table it has estimated. Structure learning
    reuses this one randomized copy throughout (docs/conventions.md, "One randomized copy").
    """

    def __init__(
        self, columns: Sequence[str], codes: np.ndarray, scheme: RandomizationScheme
    ) -> None:
        self.columns = tuple(columns)
        self.codes = np.asarray(codes, dtype=np.int64)
        if self.codes.ndim != 2 or self.codes.shape[1] != len(self.columns):
            raise RandomizationError(
                f"randomized data must be (n, {len(self.columns)}), got {self.codes.shape}"
            )
        for c in self.columns:
            if c not in scheme.cardinalities:
                raise RandomizationError(
                    f"randomized column {c!r} is not in the randomization scheme"
                )
        self.scheme = scheme
        self._position = {c: i for i, c in enumerate(self.columns)}
        self._moment: dict[tuple[str, ...], np.ndarray] = {}
        self._em: dict[tuple[str, ...], np.ndarray] = {}

    @property
    def records(self) -> int:
        return int(self.codes.shape[0])

    def _expanded(self, variables: Sequence[str]) -> tuple[tuple[str, ...], list[AxisOperator]]:
        """Variables plus the block-mates they need, and the per-block axis operators."""
        names = list(variables)
        if len(set(names)) != len(names):
            raise ValueError(f"a table names a variable twice: {names}")
        for v in names:
            if v not in self._position:
                raise RandomizationError(f"no randomized column for variable {v!r}")
        blocks = []
        for v in list(names):
            block = self.scheme.block_of(v)
            if block is None or block in blocks:
                continue
            blocks.append(block)
            for mate in block.variables:
                if mate not in names:
                    if mate not in self._position:
                        raise RandomizationError(
                            f"variable {v!r} is randomized with {mate!r}, whose column is missing"
                        )
                    names.append(mate)
        operators = [
            (tuple(names.index(v) for v in b.variables), np.array(b.matrix)) for b in blocks
        ]
        return tuple(names), operators

    def _marginal(self, table: np.ndarray, kept: int) -> np.ndarray:
        return table.sum(axis=tuple(range(kept, table.ndim))) if table.ndim > kept else table

    def randomized_counts(self, variables: Sequence[str]) -> np.ndarray:
        """N_tilde: the counts of the randomized data over ``variables`` (C order)."""
        names = tuple(variables)
        idx = [self._position[v] for v in names]
        return count_table(self.codes[:, idx], self.scheme.cardinalities_of(names))

    def moment(self, variables: Sequence[str]) -> np.ndarray:
        """Unbiased moment estimate of the true count table (may hold negative cells)."""
        key = tuple(variables)
        if key not in self._moment:
            names, operators = self._expanded(key)
            full = moment_estimate(self.randomized_counts(names), operators)
            self._moment[key] = self._marginal(full, len(key))
        return self._moment[key]

    def covariance(self, variables: Sequence[str]) -> np.ndarray:
        """Cov(N_hat | D) over the C-order cells of ``variables`` (Theorems 1-2)."""
        key = tuple(variables)
        names, operators = self._expanded(key)
        full_est = moment_estimate(self.randomized_counts(names), operators)
        cov = moment_covariance(full_est, operators)
        if len(names) == len(key):
            return cov
        shape = full_est.shape
        kept = int(np.prod(shape[: len(key)]))
        extra = int(np.prod(shape[len(key) :]))
        return cov.reshape(kept, extra, kept, extra).sum(axis=(1, 3))

    def em(self, variables: Sequence[str]) -> np.ndarray:
        """Maximum-likelihood estimate of the true count table (nonnegative)."""
        key = tuple(variables)
        if key not in self._em:
            names, operators = self._expanded(key)
            full = em_estimate(self.randomized_counts(names), operators)
            self._em[key] = self._marginal(full, len(key))
        return self._em[key]

    def counts(self, variables: Sequence[str], method: str = "moment") -> np.ndarray:
        """Nonnegative estimated counts for scoring: ``moment`` (clipped at 0) or ``em``."""
        if method == "moment":
            return np.clip(self.moment(variables), 0.0, None)
        if method == "em":
            return self.em(variables)
        raise ValueError(f"unknown count estimator {method!r} (use 'moment' or 'em')")

    def parameters(self, child: str, parents: Sequence[str]) -> ParameterEstimate:
        """theta of ``child`` given ``parents`` with its normal approximation (Sec. 5.4)."""
        family = (*parents, child)
        return parameter_estimate(family, self.moment(family), self.covariance(family))
