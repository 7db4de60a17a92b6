"""Estimated true counts from randomized records: the summaries every learner here uses.

Ma 2006, Ch. 4.1: a model that needs only a summary g(N) of the data (naive Bayes, ID3's
information gains, Apriori's supports) is learned from g(N_hat), N_hat an estimate of the
true counts from the randomized data and the public matrices. ``RandomizedData`` holds
what the data miner received (randomized records and the scheme) and answers count
tables over any variable subset with the estimators of ``ppbn.randomized.pram.estimators``
(moment: Theorem 2; EM / MLE: Sec. 2.4.2), applied factor by factor along the axes.

A variable randomized jointly with others (a group) enters a table through the group's
marginal transition matrix on the variables asked for (Props. 7.1-7.3), so a table over
one item of a 14-item group is a 2-cell table, not a 2^14-cell one. When a block has no
marginal (an arbitrary joint matrix) the table is estimated over the whole block and the
other members are summed out (``PramEstimator``); the two agree whenever both exist.

``conditional_counts`` is the moment estimate of a table over a few free variables at one
fixed configuration of others (an ID3 node): the slice of the full estimate
(Sec. 7.2.2), computed as a weighted count in O(n) instead of a table exponential in the
depth of the node.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

import numpy as np

from ppbn.errors import UserError
from ppbn.randomized.perturb.response import marginal_transition
from ppbn.randomized.pram.estimators import (
    AxisOperator,
    PramEstimator,
    count_table,
    em_estimate,
    moment_covariance,
    moment_estimate,
)
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme

ESTIMATORS = ("moment", "em")


def state_names(states: Mapping[str, Sequence[str]] | None, variable: str, count: int) -> list[str]:
    """The names of a variable's states for reports: from ``states``, else "0", "1", ..."""
    if states is not None and variable in states:
        return [str(s) for s in states[variable]]
    return [str(k) for k in range(count)]


class RandomizedData:
    """Randomized coded records (n x columns) and the public scheme that produced them.

    Columns the scheme does not randomize are taken as they are (identity matrix), so the
    same class also holds original data: ``RandomizedData.plain`` gives the ordinary
    learner, which is how the learners here reduce to their textbook form.
    """

    def __init__(
        self, columns: Sequence[str], codes: np.ndarray, scheme: RandomizationScheme
    ) -> None:
        self.columns = tuple(str(c) for c in columns)
        self.codes = np.asarray(codes, dtype=np.int64)
        if self.codes.ndim != 2 or self.codes.shape[1] != len(self.columns):
            raise RandomizationError(
                f"records must be (n, {len(self.columns)}), got shape {self.codes.shape}"
            )
        if len(set(self.columns)) != len(self.columns):
            raise RandomizationError("a column name appears twice")
        for j, name in enumerate(self.columns):
            if name not in scheme.cardinalities:
                raise RandomizationError(f"column {name!r} is not in the randomization scheme")
            card = scheme.cardinalities[name]
            col = self.codes[:, j]
            if col.size and (col.min() < 0 or col.max() >= card):
                raise RandomizationError(f"column {name!r} has a code outside 0..{card - 1}")
        self.scheme = scheme
        self._position = {c: i for i, c in enumerate(self.columns)}
        self._fallback: PramEstimator | None = None
        self._factors: dict[tuple[str, ...], np.ndarray] = {}

    @classmethod
    def plain(
        cls, columns: Sequence[str], codes: np.ndarray, cardinalities: Sequence[int]
    ) -> RandomizedData:
        """Original (or randomized but taken at face value) records: no correction at all."""
        cards = {str(c): int(k) for c, k in zip(columns, cardinalities, strict=True)}
        return cls(columns, codes, RandomizationScheme(cards))

    @property
    def records(self) -> int:
        return int(self.codes.shape[0])

    def cardinality(self, name: str) -> int:
        return self.scheme.cardinalities[name]

    def column(self, name: str) -> np.ndarray:
        if name not in self._position:
            raise RandomizationError(f"no column {name!r} in the data")
        return self.codes[:, self._position[name]]

    def attributes_besides(
        self, class_name: str, attributes: Sequence[str] | None = None
    ) -> list[str]:
        """A classifier's attributes: ``attributes`` or every column but the class."""
        if class_name not in self._position:
            raise UserError(f"class column {class_name!r} is not in the data")
        chosen = (
            [c for c in self.columns if c != class_name] if attributes is None else list(attributes)
        )
        for name in chosen:
            if name == class_name:
                raise UserError(f"{name!r} is the class; it cannot be an attribute too")
            self.column(name)
        if len(set(chosen)) != len(chosen):
            raise UserError("an attribute is listed twice")
        if not chosen:
            raise UserError("no attribute columns besides the class")
        return chosen

    def operators(self, variables: Sequence[str]) -> list[AxisOperator] | None:
        """Per-block transition matrices on the axes of a table over ``variables``.

        None when a block touching the table has no marginal on the variables asked for.
        """
        names = list(variables)
        if len(set(names)) != len(names):
            raise ValueError(f"a table names a variable twice: {names}")
        operators: list[AxisOperator] = []
        done = set()
        for v in names:
            self.column(v)
            block = self.scheme.block_of(v)
            if block is None or block.name in done:
                continue
            done.add(block.name)
            inside = [w for w in block.variables if w in names]
            inside.sort(key=names.index)
            keep = [block.variables.index(w) for w in inside]
            if keep == list(range(len(block.variables))):
                matrix = block.matrix  # the whole block, in its own order
            else:
                matrix = marginal_transition(block.matrix, block.cardinalities, keep)
            if matrix is None:
                return None
            operators.append((tuple(names.index(w) for w in inside), matrix))
        return operators

    def randomized_counts(self, variables: Sequence[str]) -> np.ndarray:
        """N_tilde over ``variables`` (C order): what the randomized records show."""
        idx = [self._position[v] for v in variables]
        return count_table(self.codes[:, idx], [self.cardinality(v) for v in variables])

    def _pram(self) -> PramEstimator:
        if self._fallback is None:
            self._fallback = PramEstimator(self.columns, self.codes, self.scheme)
        return self._fallback

    def estimate(
        self, variables: Sequence[str], method: str = "moment", em_cycles: int | None = None
    ) -> np.ndarray:
        """Estimated true counts over ``variables``: ``moment`` (unbiased, may be negative)
        or ``em`` (maximum likelihood, nonnegative; ``em_cycles`` caps its accelerated
        cycles below ``em_estimate``'s default)."""
        if method not in ESTIMATORS:
            raise ValueError(f"unknown estimator {method!r}; use one of {ESTIMATORS}")
        operators = self.operators(variables)
        if operators is None:
            pram = self._pram()
            return pram.moment(variables) if method == "moment" else pram.em(variables)
        observed = self.randomized_counts(variables)
        if not operators:
            return observed
        if method == "moment":
            return moment_estimate(observed, operators)
        # interior start (add one to every cell): from N_tilde / N a cell empty in the
        # randomized data could never become positive, which traps EM far from the MLE
        # when the matrix is far from the identity (theta < 0.5: the truth sits in the
        # flipped cells)
        cycles = {} if em_cycles is None else {"max_iter": em_cycles}
        return em_estimate(observed, operators, start=observed + 1.0, **cycles)

    def covariance(self, variables: Sequence[str]) -> np.ndarray:
        """Cov(N_hat | D) of the moment estimate over the C-order cells (Theorems 1-2)."""
        operators = self.operators(variables)
        if operators is None:
            return self._pram().covariance(variables)
        return moment_covariance(self.estimate(variables), operators)

    def conditional_counts(self, fixed: Mapping[str, int], free: Sequence[str]) -> np.ndarray:
        """Moment estimate of the counts over ``free`` among records with ``fixed`` values.

        Equals ``estimate([*fixed, *free])`` sliced at the fixed values: with
        Q_B = (P_B^T)^{-1} per block, N_hat[cell] = sum over records r of
        prod_B Q_B[cell_B, x_tilde_B(r)], evaluated for the fixed cells only.
        """
        names = [*fixed, *free]
        operators = self.operators(names)
        if operators is None:
            full = self.estimate(names)
            return full[tuple(int(fixed[v]) for v in fixed)]
        units = [([names[a] for a in axes], matrix) for axes, matrix in operators]
        covered = {v for members, _ in units for v in members}
        units += [([v], None) for v in names if v not in covered]
        letters = iter(string.ascii_letters.replace("r", ""))
        axis_letter = {v: next(letters) for v in free}
        weight = np.ones(self.records)
        factors: list[np.ndarray] = []
        subscripts: list[str] = []
        for members, matrix in units:
            factor = self._record_factor(members, matrix)
            index = (slice(None), *(int(fixed[v]) if v in fixed else slice(None) for v in members))
            part = factor[index]
            if part.ndim == 1:
                weight = weight * part
                continue
            factors.append(part)
            subscripts.append("r" + "".join(axis_letter[v] for v in members if v not in fixed))
        target = "".join(axis_letter[v] for v in free)
        spec = ",".join(["r", *subscripts]) + "->" + target
        return np.einsum(spec, weight, *factors, optimize=True)

    def _record_factor(self, members: list[str], matrix: np.ndarray | None) -> np.ndarray:
        """(n, states of members...): Q[cell, x_tilde(r)] for every record r and cell.

        For a variable that is not randomized this is its one-hot coding. One-variable
        factors are cached: ID3 asks for the same ones at every node.
        """
        key = tuple(members)
        cached = self._factors.get(key) if len(members) == 1 else None
        if cached is not None:
            return cached
        cards = [self.cardinality(v) for v in members]
        observed = np.ravel_multi_index(tuple(self.column(v) for v in members), cards)
        if matrix is None:
            factor = np.eye(cards[0])[observed]
        else:
            inverse = np.linalg.inv(matrix).T  # N_hat = inverse @ N_tilde along these axes
            factor = inverse[:, observed].T.reshape(self.records, *cards)
        if len(members) == 1:
            self._factors[key] = factor
        return factor
