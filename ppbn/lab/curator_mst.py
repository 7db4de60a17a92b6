"""MST run by a trusted curator on the joined table: one of ``ppbn bench dp``'s anchors.

MST (McKenna, Miklau and Sheldon 2021, "Winning the NIST contest: a scalable and general
approach to differentially private synthetic data", Journal of Privacy and
Confidentiality) spends a rho-zCDP budget in three equal parts:

1. every 1-way marginal, with Gaussian noise;
2. a maximum spanning tree over the variables, chosen edge by edge: r - 1 rounds (r
   variables) of the exponential mechanism over the pairs that join two components of the
   tree so far (Kruskal's rule), each pair scored by the L1 distance between its true counts
   and the estimate of the model fitted to the 1-way measurements (the pairs the
   independent model explains worst are the ones worth measuring);
3. the chosen 2-way marginals, with Gaussian noise;

then fits a graphical model to all the measurements (Private-PGM,
``ppbn.dp.graphical_fit``) and samples records from it.

Privacy. The paper's neighbours add or remove one record: a marginal's counts move by 1 in
L2 and the quality score by 1, so a Gaussian of standard deviation sigma costs 1 / (2
sigma^2) and an exponential-mechanism choice at epsilon costs epsilon^2 / 8 (its bounded
range, Cesar and Rogers 2021). ppbn's neighbours change one record's values with the count
public (docs/security-dp.md): one cell loses a record and another gains it, so a marginal
moves by sqrt(2) in L2 and a quality score by 2 (``L2_SENSITIVITY``, ``SCORE_SENSITIVITY``).
The noise here is scaled by those, so a release at (epsilon, delta) is (epsilon, delta)-DP
under the same neighbours as ppbn's own release (rho from ``largest_rho``).

Not done: MST's compression of each variable's rare values into one (it matters for
the wide domains of the NIST data; the bundled networks have a few states per variable).

    release = mst_release(["a", "b"], [2, 3], codes, 1.0, 1e-9, np.random.default_rng(0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from ppbn.bn.k2 import count_table
from ppbn.dp.accounting import largest_rho
from ppbn.dp.graphical_fit import Measured, fit_marginals, marginal

L2_SENSITIVITY = math.sqrt(2.0)  # a marginal's counts, one record's values changed
SCORE_SENSITIVITY = 2.0  # an L1 distance to those counts, the same change


@dataclass(frozen=True)
class CuratorRelease:
    """A curator's fitted model (``graphical_fit``), the marginals it measured beyond the
    1-way ones, and the rho-zCDP it spent (at most its budget)."""

    model: Any
    cliques: tuple[tuple[str, ...], ...]
    rho: float


def clique_counts(
    codes: np.ndarray, names: Sequence[str], cards: Sequence[int], clique: Sequence[str]
) -> np.ndarray:
    """The true counts of ``clique`` (C order over its variables' states), flattened."""
    columns = [list(names).index(v) for v in clique]
    return count_table(codes, columns, [int(cards[c]) for c in columns]).ravel().astype(float)


def gaussian_rho(stddev: float) -> float:
    """The zCDP of one marginal measured with Gaussian noise of ``stddev``."""
    return L2_SENSITIVITY**2 / (2.0 * stddev**2)


def exponential_choice(scores: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
    """The exponential mechanism: index i with probability proportional to
    exp(epsilon * scores[i] / (2 * SCORE_SENSITIVITY)); epsilon-DP, epsilon^2 / 8-zCDP."""
    logits = epsilon * np.asarray(scores, dtype=float) / (2.0 * SCORE_SENSITIVITY)
    weights = np.exp(logits - logits.max())
    return int(rng.choice(len(weights), p=weights / weights.sum()))


def measure(
    codes: np.ndarray,
    names: Sequence[str],
    cards: Sequence[int],
    clique: tuple[str, ...],
    stddev: float,
    rng: np.random.Generator,
) -> Measured:
    """The Gaussian mechanism on one marginal."""
    true = clique_counts(codes, names, cards, clique)
    return Measured(clique, true + rng.normal(0.0, stddev, size=true.size), stddev)


def _spanning_tree(
    codes: np.ndarray,
    names: Sequence[str],
    cards: Sequence[int],
    one_way: Any,
    epsilon: float,
    rng: np.random.Generator,
) -> list[tuple[str, str]]:
    """Kruskal's tree with each edge drawn by the exponential mechanism at ``epsilon``."""
    n = float(codes.shape[0])
    probability = {v: marginal(one_way, (v,)) / n for v in names}
    quality = {}
    for a, b in combinations(names, 2):
        estimate = n * np.outer(probability[a], probability[b]).ravel()
        quality[(a, b)] = float(np.abs(clique_counts(codes, names, cards, (a, b)) - estimate).sum())
    component = {v: v for v in names}

    def root(v: str) -> str:
        while component[v] != v:
            v = component[v]
        return v

    tree: list[tuple[str, str]] = []
    for _ in range(len(names) - 1):
        joining = [pair for pair in quality if root(pair[0]) != root(pair[1])]
        chosen = joining[exponential_choice(np.array([quality[p] for p in joining]), epsilon, rng)]
        component[root(chosen[0])] = root(chosen[1])
        tree.append(chosen)
    return tree


def mst_release(
    names: Sequence[str],
    cards: Sequence[int],
    codes: np.ndarray,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
) -> CuratorRelease:
    """MST at (``epsilon``, ``delta``) on ``codes`` (records x variables, column j in
    0 .. cards[j] - 1): the model fitted to its 1-way and spanning-tree measurements."""
    names = list(names)
    if len(names) < 2:
        raise ValueError("MST needs at least two variables")
    rho = largest_rho(epsilon, delta)
    domain = dict(zip(names, (int(c) for c in cards), strict=True))
    n = codes.shape[0]
    third = rho / 3.0
    edges = len(names) - 1
    sigma_one = L2_SENSITIVITY * math.sqrt(len(names) / (2.0 * third))
    one_way = [measure(codes, names, cards, (v,), sigma_one, rng) for v in names]
    first = fit_marginals(domain, one_way, n)
    tree = _spanning_tree(codes, names, cards, first, math.sqrt(8.0 * third / edges), rng)
    sigma_two = L2_SENSITIVITY * math.sqrt(edges / (2.0 * third))
    two_way = [measure(codes, names, cards, pair, sigma_two, rng) for pair in tree]
    spent = len(names) * gaussian_rho(sigma_one) + edges * (
        (8.0 * third / edges) / 8.0 + gaussian_rho(sigma_two)
    )
    model = fit_marginals(domain, one_way + two_way, n)
    return CuratorRelease(model, tuple(tree), spent)
