"""The pocket perceptron on randomized data (Ma 2006, Ch. 6; framework of Sec. 4.2).

A linear classifier g(x) = w^T phi(x) separates a ``positive`` class state from the rest
(multi-class problems are split into binary ones, Sec. 6.2). The perceptron cost
J(w) = sum_i delta_i(w) w^T x_i cannot be evaluated on randomized records, so the
dissertation minimises its expectation given what was observed,
sum_i sum_l delta_l(w) w^T v_l p(V = v_l | V_tilde = v_tilde_i), over all L true
configurations v_l of (attributes, class). The posterior is
p(v_l | v_tilde_k) = T_hat_l P(l, k) / sum_m T_hat_m P(m, k) with T_hat estimated from the
randomized data, by EM (nonnegative; the default) or the moment estimate clipped at 0.
The dissertation allows either. EM is the better prior (Lens at p = 0.4: 0.94 accuracy
against 0.78, 5 runs each) but slow when the MLE is on the boundary, as whenever the
class is a function of the attributes (Lens) or a variable of others (asia's "either"):
its cycles are capped at ``PRIOR_EM_CYCLES``.

Summed over the records, the weight of configuration l is
W_l = T_hat_l [P (N_tilde / (P^T T_hat))]_l, one EM step from T_hat, computed factor by
factor along the axes (the full P is never formed). At the EM fixed point W = T_hat:
learning from the expected cost is learning from the maximum-likelihood counts.

The pocket algorithm (Gallant 1990, with ratchet) runs the perceptron on randomly drawn
examples and keeps in its pocket the weights with the longest run of consecutive correct
classifications, if they also classify more of the training weight correctly. The
dissertation draws among the N L examples (v_l, delta_l^i) and lets a correct example
add delta_l^i to the run; drawing configurations with probability proportional to W_l
and adding 1 per correct draw is the same in expectation, and is what is done here. With
``cost="raw"`` the weights are the randomized counts themselves: the pocket algorithm run
on the randomized data as if it were original (the dissertation's comparison curves).

Features: ``onehot`` (one indicator per attribute state, for categorical attributes) or
``ordinal`` (the state's value: its position 1, 2, ... as in the Lens experiment of
Sec. 6.3, or given values such as interval means). A bias feature is always added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.errors import UserError
from ppbn.randomized.perturb.estimated import ESTIMATORS, RandomizedData, state_names
from ppbn.randomized.pram.estimators import apply_along_axes

ENCODINGS = ("onehot", "ordinal")
COSTS = ("expected", "raw")
MAX_CONFIGURATIONS = 1 << 16
# The prior only weights the posteriors: 300 accelerated EM cycles (about 900 EM steps)
# gave test accuracies within 0.012 of 5,000 cycles (asia, class dysp or bronc, p = 0.3
# and 0.4) in a tenth of the time.
PRIOR_EM_CYCLES = 300
DEFAULT_ITERATIONS = 20_000


@dataclass(frozen=True)
class Perceptron:
    """w over [1, phi(attributes)]; predicts ``positive`` when w^T x > 0."""

    class_name: str
    positive: int
    attributes: tuple[str, ...]
    encoding: str
    values: tuple[tuple[float, ...], ...]  # per attribute: the value of each state (ordinal)
    weights: np.ndarray
    training_correct: float  # share of the training weight the pocket weights classify right

    def features(self, data: RandomizedData) -> np.ndarray:
        codes = np.column_stack([data.column(a) for a in self.attributes])
        return _features(codes, self.encoding, self.values)

    def predict(self, data: RandomizedData) -> np.ndarray:
        """True where a record is predicted to be of the ``positive`` class state."""
        return self.features(data) @ self.weights > 0

    def accuracy(self, data: RandomizedData) -> float:
        """Share of the records of ``data`` (plain) classified right, positive vs the rest."""
        truth = data.column(self.class_name) == self.positive
        return float(np.mean(self.predict(data) == truth))

    def to_dict(self, states: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        names = ["bias"]
        for name, vals in zip(self.attributes, self.values, strict=True):
            if self.encoding == "ordinal":
                names.append(name)
            else:
                names += [f"{name}={s}" for s in state_names(states, name, len(vals))]
        classes = state_names(states, self.class_name, self.positive + 1)
        return {
            "model": "pocket_perceptron",
            "class": self.class_name,
            "positive": classes[self.positive],
            "encoding": self.encoding,
            "weights": dict(zip(names, self.weights.tolist(), strict=True)),
            "training_correct": self.training_correct,
        }


def _features(codes: np.ndarray, encoding: str, values: Sequence[Sequence[float]]) -> np.ndarray:
    """[1, phi(x)] for each row of coded attributes."""
    parts = [np.ones((codes.shape[0], 1))]
    for j, vals in enumerate(values):
        if encoding == "ordinal":
            parts.append(np.asarray(vals, dtype=float)[codes[:, j]][:, None])
        else:
            parts.append(np.eye(len(vals))[codes[:, j]])
    return np.hstack(parts)


def configuration_weights(
    data: RandomizedData, variables: Sequence[str], cost: str = "expected", method: str = "em"
) -> np.ndarray:
    """W over the C-order configurations of ``variables`` (see the module docstring).

    ``expected``: sum over records of p(v_l | v_tilde_i) with the prior T_hat;
    ``raw``: the randomized counts N_tilde, taken at face value.
    """
    if cost not in COSTS:
        raise UserError(f"unknown cost {cost!r}; use one of {', '.join(COSTS)}")
    if method not in ESTIMATORS:
        raise UserError(f"unknown estimator {method!r}; use one of {', '.join(ESTIMATORS)}")
    observed = data.randomized_counts(variables)
    operators = data.operators(variables)
    if operators is None:
        raise UserError(
            "the expected perceptron cost needs each randomization block's marginal on the "
            "variables used; a block with a general joint matrix has none"
        )
    if cost == "raw" or not operators:
        return observed
    prior = np.clip(data.estimate(variables, method, em_cycles=PRIOR_EM_CYCLES), 0.0, None)
    predicted = apply_along_axes(prior, [(axes, m.T) for axes, m in operators])
    ratio = np.divide(observed, predicted, out=np.zeros_like(observed), where=predicted > 0)
    return prior * apply_along_axes(ratio, operators)


def perceptron_cost(
    weights: np.ndarray, features: np.ndarray, labels: np.ndarray, mass: np.ndarray
) -> float:
    """J(w) = sum_l mass_l delta_l(w) w^T x_l: the perceptron cost (Sec. 6.2), each example
    weighted; delta is -1 for a misclassified positive, +1 for a misclassified negative."""
    score = features @ weights
    wrong = labels * score <= 0
    return float(np.sum(mass[wrong] * -labels[wrong] * score[wrong]))


def pocket(
    features: np.ndarray,
    labels: np.ndarray,
    mass: np.ndarray,
    iterations: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Gallant's pocket algorithm with ratchet on weighted examples; labels in {-1, +1}.

    Returns the pocket weights and the share of ``mass`` they classify correctly.
    """
    total = float(mass.sum())
    if total <= 0:
        raise UserError("no training weight: the data hold no records")
    draws = rng.choice(len(mass), size=iterations, p=mass / total)
    w = np.zeros(features.shape[1])
    best, best_ok, best_run, run = w.copy(), _correct(w, features, labels, mass), 0, 0
    for e in draws:
        if labels[e] * (features[e] @ w) > 0:
            run += 1
            if run > best_run:
                ok = _correct(w, features, labels, mass)
                if ok > best_ok:
                    best, best_ok, best_run = w.copy(), ok, run
        else:
            w = w + labels[e] * features[e]
            run = 0
    return best, best_ok / total


def _correct(w: np.ndarray, features: np.ndarray, labels: np.ndarray, mass: np.ndarray) -> float:
    return float(mass[labels * (features @ w) > 0].sum())


def fit_perceptron(
    data: RandomizedData,
    class_name: str,
    attributes: Sequence[str] | None = None,
    positive: int | None = None,
    encoding: str = "onehot",
    values: Sequence[Sequence[float]] | None = None,
    cost: str = "expected",
    method: str = "em",
    iterations: int = DEFAULT_ITERATIONS,
    seed: int = 0,
) -> Perceptron:
    """Learn a pocket perceptron for ``positive`` vs the other class states from ``data``."""
    if encoding not in ENCODINGS:
        raise UserError(f"unknown encoding {encoding!r}; use one of {', '.join(ENCODINGS)}")
    if iterations < 1:
        raise UserError(f"iterations must be at least 1, got {iterations}")
    chosen = data.attributes_besides(class_name, attributes)
    classes = data.cardinality(class_name)
    if positive is None:
        if classes != 2:
            raise UserError(
                f"class {class_name!r} has {classes} states: name the positive one "
                "(the perceptron separates it from the rest)"
            )
        positive = 0
    if not 0 <= positive < classes:
        raise UserError(f"positive class state must be in 0..{classes - 1}, got {positive}")
    cards = [data.cardinality(a) for a in chosen]
    if values is None:
        values = [tuple(float(k + 1) for k in range(c)) for c in cards]
    values = tuple(tuple(float(v) for v in vals) for vals in values)
    if [len(v) for v in values] != cards:
        raise UserError("give one value per state of every attribute")
    variables = [*chosen, class_name]
    size = int(np.prod(cards, dtype=np.int64)) * classes
    if size > MAX_CONFIGURATIONS:
        raise UserError(
            f"the expected cost ranges over all {size:,} configurations of the attributes and "
            f"the class (at most {MAX_CONFIGURATIONS:,}); use fewer attributes"
        )
    mass = configuration_weights(data, variables, cost, method).reshape(-1)
    used = np.flatnonzero(mass > 0)
    configs = np.column_stack(np.unravel_index(used, [*cards, classes]))
    features = _features(configs[:, :-1], encoding, values)
    labels = np.where(configs[:, -1] == positive, 1.0, -1.0)
    weights, ok = pocket(features, labels, mass[used], iterations, np.random.default_rng(seed))
    return Perceptron(class_name, positive, tuple(chosen), encoding, values, weights, ok)
