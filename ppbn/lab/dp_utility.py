"""How useful a synthetic table is, measured against the real one (``ppbn bench dp``).

Both tables hold codes (records x variables, the same columns, code k = the k-th state of
the variable, ``cards`` states each); the record counts may differ. The measures are the
ones of the PrivBayes line of work (Zhang et al. 2017, Sec. 6.1): the total variation
distance TVD(P, Q) = 1/2 sum |P(x) - Q(x)| between the two tables' empirical marginals,
averaged over every pair of variables (``tvd_2way``) or over a random sample of triples
(``tvd_3way``). The structural Hamming distance of two DAGs is ``bn.model``'s
``structural_hamming_distance`` (re-exported here, the function behind
``NetworkResult.structural_hamming_distance``).

The downstream task: a categorical naive Bayes classifier (Laplace smoothing) trained on
the synthetic records predicts one variable from all the others on held-out real records
(``naive_bayes_accuracy``); the default target is the true network's variable with the
largest Markov blanket (``largest_blanket``), the one whose prediction needs the most of
the network's structure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np

from ppbn.bn.k2 import count_table
from ppbn.bn.model import structural_hamming_distance

__all__ = [
    "largest_blanket",
    "marginal_tvd",
    "markov_blanket",
    "naive_bayes_accuracy",
    "structural_hamming_distance",
    "tvd_2way",
    "tvd_3way",
]

DEFAULT_TRIPLES = 200


def _check(real: np.ndarray, synth: np.ndarray, cards: Sequence[int]) -> None:
    for name, table in (("real", real), ("synthetic", synth)):
        if table.ndim != 2 or table.shape[1] != len(cards):
            raise ValueError(f"the {name} table must be records x {len(cards)} variables")
        if table.shape[0] == 0:
            raise ValueError(f"the {name} table has no records")


def marginal_tvd(
    real: np.ndarray, synth: np.ndarray, columns: Sequence[int], cards: Sequence[int]
) -> float:
    """TVD between the two tables' empirical joint distributions of ``columns``."""
    shape = [int(cards[c]) for c in columns]
    p = count_table(real, list(columns), shape).ravel() / real.shape[0]
    q = count_table(synth, list(columns), shape).ravel() / synth.shape[0]
    return 0.5 * float(np.abs(p - q).sum())


def tvd_2way(real: np.ndarray, synth: np.ndarray, cards: Sequence[int]) -> float:
    """The average TVD of the 2-way marginals over all pairs of variables."""
    real, synth = np.asarray(real), np.asarray(synth)
    _check(real, synth, cards)
    pairs = list(combinations(range(len(cards)), 2))
    if not pairs:
        raise ValueError("a 2-way marginal needs at least two variables")
    return float(np.mean([marginal_tvd(real, synth, pair, cards) for pair in pairs]))


def tvd_3way(
    real: np.ndarray,
    synth: np.ndarray,
    cards: Sequence[int],
    triples: int = DEFAULT_TRIPLES,
    rng: np.random.Generator | None = None,
) -> float:
    """The average TVD of the 3-way marginals over ``triples`` distinct triples of
    variables drawn uniformly with ``rng`` (default seed 0), or over all of them when
    there are no more."""
    real, synth = np.asarray(real), np.asarray(synth)
    _check(real, synth, cards)
    m = len(cards)
    if m < 3:
        raise ValueError("a 3-way marginal needs at least three variables")
    if triples < 1:
        raise ValueError("triples must be at least 1")
    total = math.comb(m, 3)
    if total <= triples:
        chosen = list(combinations(range(m), 3))
    else:
        rng = np.random.default_rng(0) if rng is None else rng
        seen: set[tuple[int, ...]] = set()
        while len(seen) < triples:
            seen.add(tuple(sorted(int(c) for c in rng.choice(m, size=3, replace=False))))
        chosen = sorted(seen)
    return float(np.mean([marginal_tvd(real, synth, triple, cards) for triple in chosen]))


def markov_blanket(parents: Mapping[str, Sequence[str]], variable: str) -> set[str]:
    """The variable's parents, children and its children's other parents."""
    children = [c for c, ps in parents.items() if variable in ps]
    blanket = set(parents[variable]) | set(children)
    for child in children:
        blanket |= set(parents[child])
    return blanket - {variable}


def largest_blanket(names: Sequence[str], parents: Mapping[str, Sequence[str]]) -> str:
    """The variable with the largest Markov blanket, the first in ``names`` on a tie."""
    return max(names, key=lambda v: (len(markov_blanket(parents, v)), -list(names).index(v)))


def naive_bayes_accuracy(
    train: np.ndarray,
    test: np.ndarray,
    cards: Sequence[int],
    target: int,
    smoothing: float = 1.0,
) -> float:
    """The share of ``test`` records whose column ``target`` a categorical naive Bayes
    trained on ``train`` predicts right from the other columns: log P(y) + sum_j log P(x_j
    | y), each count plus ``smoothing`` (Laplace), ties to the lowest class."""
    train, test = np.asarray(train), np.asarray(test)
    _check(train, test, cards)
    classes = int(cards[target])
    prior = np.bincount(train[:, target], minlength=classes) + smoothing
    scores = np.tile(np.log(prior / prior.sum()), (test.shape[0], 1))
    for j, card in enumerate(cards):
        if j == target:
            continue
        table = count_table(train, [target, j], [classes, int(card)]) + smoothing
        log_conditional = np.log(table / table.sum(axis=1, keepdims=True))
        scores += log_conditional[:, test[:, j]].T
    return float(np.mean(np.argmax(scores, axis=1) == test[:, target]))
