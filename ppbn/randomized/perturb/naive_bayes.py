"""Naive Bayes from randomized-response data (Zhan, Chang and Matwin, Sec. 3.4).

The classifier needs P(C) and P(A_j, C) only (eq. 6), so it is learned from estimated
counts (Ma 2006, Ch. 4.1): N_hat(C) and N_hat(A_j, C) by the moment estimator, i.e. by
solving Zhan's eqs. 2-4 for whatever grouping the scheme uses. When the class is not
randomized (Zhan's experiments) the estimator flips only the attribute (docs/conventions.md, "Randomized-response naive Bayes"):
N_hat(a, c) = [theta N*(a, c) - (1 - theta) N*(1 - a, c)] / (2 theta - 1).

Estimates can leave [0, N] near theta = 0.5 (docs/conventions.md, "Randomized-response naive Bayes"): they are clipped at 0, Laplace
smoothed with ``alpha`` and renormalised per class; everything after that is in log space.
With theta in {0, 1} the inverse is an exact permutation, so the model equals the plain
naive Bayes of the original records bit for bit (tested).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.errors import UserError
from ppbn.randomized.perturb.estimated import RandomizedData, state_names


@dataclass(frozen=True)
class NaiveBayes:
    """log P(C = c) and log P(A_j = a | C = c) for coded attributes."""

    attributes: tuple[str, ...]
    class_name: str
    log_prior: np.ndarray  # (classes,)
    log_conditional: tuple[np.ndarray, ...]  # per attribute: (states, classes)

    def log_posterior(self, data: RandomizedData) -> np.ndarray:
        """log P(C = c | attributes) per record of ``data``, (n, classes), normalised."""
        score = np.tile(self.log_prior, (data.records, 1))
        for name, table in zip(self.attributes, self.log_conditional, strict=True):
            score += table[data.column(name)]
        top = score.max(axis=1, keepdims=True)
        return score - (top + np.log(np.exp(score - top).sum(axis=1, keepdims=True)))

    def predict_proba(self, data: RandomizedData) -> np.ndarray:
        return np.exp(self.log_posterior(data))

    def predict(self, data: RandomizedData) -> np.ndarray:
        """The most probable class code of each record (ties: the lower code)."""
        return np.argmax(self.log_posterior(data), axis=1)

    def to_dict(self, states: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        """The probabilities, states named by ``states`` (codes as strings otherwise)."""
        classes = state_names(states, self.class_name, len(self.log_prior))
        conditionals = {}
        for name, table in zip(self.attributes, self.log_conditional, strict=True):
            names = state_names(states, name, table.shape[0])
            conditionals[name] = {
                s: dict(zip(classes, np.exp(row).tolist(), strict=True))
                for s, row in zip(names, table, strict=True)
            }
        return {
            "model": "naive_bayes",
            "class": self.class_name,
            "prior": dict(zip(classes, np.exp(self.log_prior).tolist(), strict=True)),
            "conditionals": conditionals,
        }


def fit_naive_bayes(
    data: RandomizedData,
    class_name: str,
    attributes: Sequence[str] | None = None,
    alpha: float = 1.0,
    method: str = "moment",
) -> NaiveBayes:
    """Learn naive Bayes from ``data`` (randomized or plain) and its public scheme."""
    if not alpha > 0:
        raise UserError(f"the smoothing alpha must be positive, got {alpha:g}")
    chosen = data.attributes_besides(class_name, attributes)
    prior = _normalised(data.estimate([class_name], method), alpha, axis=0)
    tables = []
    for name in chosen:
        joint = data.estimate([name, class_name], method)  # (states, classes)
        tables.append(np.log(_normalised(joint, alpha, axis=0)))
    return NaiveBayes(tuple(chosen), class_name, np.log(prior), tuple(tables))


def _normalised(counts: np.ndarray, alpha: float, axis: int) -> np.ndarray:
    """Clip estimated counts at 0, add ``alpha``, and normalise along ``axis``."""
    smoothed = np.clip(counts, 0.0, None) + alpha
    return smoothed / smoothed.sum(axis=axis, keepdims=True)
