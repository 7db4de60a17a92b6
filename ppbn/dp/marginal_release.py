"""The marginal-based DP release (docs/security-dp.md, "The marginal release"), and its
trusted curator's twin.

The release follows MST (McKenna, Miklau and Sheldon 2021, "Winning the NIST contest"):
measure every 1-way marginal, choose a spanning tree of pairs by the exponential mechanism,
measure the chosen pairs' 2-way marginals, and fit a graphical model to the noisy
measurements (private-pgm, ``dp.graphical_fit``). It needs no curator: the secure job
(``protocols/learning/dp_marginals.py``) computes the same steps on both parties' shares.

- the 1-way counts first: every cell of every variable's table gets the plan's count noise
  (``DPPlan.one_way_noise``: discrete Gaussian where the plan affords it, else discrete
  Laplace G1 - G2); from them, the independent model's estimate of each
  pair's table, n p_a(i) p_b(j) rounded, p the clipped and normalised noisy marginal
  (``independent_estimate``): public from here on.
- the tree: |V| - 1 rounds of Kruskal's algorithm, each choosing among the pairs (a, b), a
  before b in the schema's order, that join two components; the choice is report-noisy-max
  with exponential noise (``DPPlan.decision_noise``) over MST's utility, the L1 error of
  the independent model on the pair's true counts (``pair_error``), shifted up by the
  plan's ``extra_frac`` bits; the first largest noisy value wins.
- the 2-way counts: every cell of every chosen pair's table (a, b), with noise of the
  2-way scale (``DPPlan.count_noise``). The noisy counts and the chosen pairs are the
  release.
- post-processing, free in privacy: private-pgm fits the Markov random field of the tree;
  the tree rooted at the schema's first variable, oriented away from it, makes a Bayesian
  network whose CPTs are the fitted pair marginals over their parent's: ``ppbn sample``,
  ``show`` and the pictures read it like any other network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ppbn.bn.learn import joined_count_fn
from ppbn.bn.model import BayesNet
from ppbn.bn.params import cpt_from_counts
from ppbn.dp.accounting import DEFAULT_DELTA, DEFAULT_STRUCTURE_SHARE, DPPlan, plan
from ppbn.dp.count_noise import draw_noise, noise_stddev
from ppbn.dp.graphical_fit import Measured, fit_marginals, marginal
from ppbn.dp.reference import checked_codes, draws, noisy_max

Pair = tuple[str, str]
# chooses one of the candidate pairs (its index), given them in the order ``tree_rounds`` lists
Chooser = Callable[[list[Pair]], int]


def candidate_pairs(names: Sequence[str], joined: set[str]) -> list[Pair]:
    """The pairs (a, b), a before b in ``names``, with one end in ``joined`` and one out."""
    return [
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if (a in joined) != (b in joined)
    ]


def tree_rounds(names: Sequence[str], choose: Chooser) -> list[Pair]:
    """A spanning tree grown from ``names[0]`` (Prim's order), each edge chosen by ``choose``
    among the pairs that join a new variable to the tree: |V| - 1 rounds, the chosen pairs
    in the order chosen. MST grows its tree by Kruskal's order; Prim's offers each round
    only the tree's frontier, k (|V| - k) pairs, half as many noisy draws in all, where
    each draw is most of the secure job's cost."""
    joined = {names[0]} if names else set()
    chosen: list[Pair] = []
    for _ in range(len(names) - 1):
        candidates = candidate_pairs(names, joined)
        a, b = candidates[choose(candidates)]
        joined |= {a, b}
        chosen.append((a, b))
    return chosen


def orient(names: Sequence[str], pairs: Sequence[Pair]) -> tuple[tuple[str, ...], list[Pair]]:
    """The tree rooted at ``names[0]``, breadth first (children in ``names`` order): the
    visiting order and the (parent, child) edges in that order."""
    neighbours: dict[str, list[str]] = {v: [] for v in names}
    for a, b in pairs:
        neighbours[a].append(b)
        neighbours[b].append(a)
    position = {v: i for i, v in enumerate(names)}
    order, edges, seen = [names[0]], [], {names[0]}
    for v in order:
        for w in sorted(neighbours[v], key=position.__getitem__):
            if w not in seen:
                seen.add(w)
                order.append(w)
                edges.append((v, w))
    if len(order) != len(names):
        raise ValueError("the chosen pairs do not span every variable")
    return tuple(order), edges


def marginal_probabilities(noisy: np.ndarray) -> np.ndarray:
    """A noisy 1-way table clipped at 0 and normalised (uniform when nothing is left)."""
    clipped = np.clip(np.asarray(noisy, dtype=np.float64), 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(clipped.shape, 1.0 / clipped.size)


def independent_estimate(noisy_a: np.ndarray, noisy_b: np.ndarray, n_records: int) -> np.ndarray:
    """The independent model's counts of the pair (a, b), n p_a(i) p_b(j) rounded to whole
    counts (int64, shape (states of a, states of b)): computed alike by both parties from
    the released 1-way tables."""
    p = np.outer(marginal_probabilities(noisy_a), marginal_probabilities(noisy_b))
    return np.rint(p * float(n_records)).astype(np.int64)


def pair_error(counts: np.ndarray, estimate: np.ndarray) -> int:
    """MST's utility of a pair: sum |count - estimate| over its cells."""
    return int(np.abs(np.asarray(counts, dtype=np.int64) - estimate).sum())


def tree_network(
    names: Sequence[str],
    states: Mapping[str, Sequence[str]],
    pairs: Sequence[Pair],
    one_way: Mapping[str, np.ndarray],
    two_way: Mapping[Pair, np.ndarray],
    job: DPPlan,
    n_records: int,
) -> tuple[BayesNet, tuple[str, ...], list[Pair]]:
    """The released network: private-pgm's fit of the noisy 1-way and 2-way counts (each
    ``two_way[(a, b)]`` shaped (states of a, states of b)), each weighted by its noise's
    standard deviation under ``job``, as the tree network rooted at ``names[0]``; with its
    visiting order and oriented edges."""
    names = tuple(names)
    domain = {v: len(states[v]) for v in names}
    one_sd, two_sd = noise_stddev(job.one_way_noise), noise_stddev(job.count_noise)
    measured = [Measured((v,), np.asarray(one_way[v]), one_sd) for v in names]
    measured += [Measured(p, np.asarray(two_way[p]), two_sd) for p in pairs]
    model = fit_marginals(domain, measured, n_records)
    order, edges = orient(names, pairs)
    parents: dict[str, tuple[str, ...]] = {v: () for v in names}
    cpts: dict[str, np.ndarray] = {}
    unobserved: dict[str, tuple[int, ...]] = {}
    for parent, child in edges:
        parents[child] = (parent,)
    for v in names:
        table = marginal(model, (*parents[v], v)).reshape(-1, domain[v])
        cpts[v], empty = cpt_from_counts(np.clip(table, 0.0, None))
        if empty:
            unobserved[v] = empty
    net = BayesNet(names, {v: tuple(states[v]) for v in names}, parents, cpts, unobserved)
    return net, order, edges


def curator_counts(
    names: Sequence[str],
    states: Mapping[str, Sequence[str]],
    codes: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    release: str,
    structure_share: float,
    delta: float,
) -> tuple[
    DPPlan, Callable[[tuple[str, ...]], np.ndarray], Callable[[tuple[str, ...]], np.ndarray]
]:
    """A marginal release's twin's plan, its counter of the joined table (a family's
    counts), and its measurement: a family's counts plus the plan's noise in every cell,
    at the family's scale (``DPPlan.table_noise``), drawn from ``rng``."""
    job = plan(
        epsilon,
        n_records=int(codes.shape[0]),
        cardinalities=[len(states[v]) for v in names],
        max_parents=1,
        mode="bic",
        score_frac=0,
        structure_share=structure_share,
        delta=delta,
        release=release,
    )

    count = joined_count_fn(names, states, codes)

    def noisy(family: tuple[str, ...]) -> np.ndarray:
        table = count(family)
        flat = np.asarray(table, dtype=np.int64).reshape(-1)
        return (flat + draw_noise(job.table_noise(family), rng, flat.size)).reshape(np.shape(table))

    return job, count, noisy


def marginal_twin(
    names: Sequence[str],
    states: Mapping[str, Sequence[str]],
    codes: np.ndarray,
    epsilon: float,
    rng: np.random.Generator | None = None,
    *,
    structure_share: float = DEFAULT_STRUCTURE_SHARE,
    delta: float = DEFAULT_DELTA,
) -> tuple[BayesNet, DPPlan, list[Pair]]:
    """The epsilon-DP marginal release of ``codes`` (records x variables, columns in
    ``names`` order, complete), computed in the clear as a curator would; with its plan and
    the chosen pairs in the order chosen. ``rng`` (default: fresh OS entropy) draws all the
    noise: the 1-way counts (``names`` order), each round's candidates, the chosen pairs'
    counts (in the order chosen)."""
    names, states, codes = checked_codes(names, states, codes)
    rng = np.random.default_rng() if rng is None else rng
    n = int(codes.shape[0])
    job, count, noisy = curator_counts(
        names, states, codes, epsilon, rng, "marginals", structure_share, delta
    )
    one_way = {v: noisy((v,)) for v in names}

    def utility(pair: Pair) -> int:
        a, b = pair
        return pair_error(count(pair), independent_estimate(one_way[a], one_way[b], n))

    utilities: dict[Pair, int] = {}

    def choose(candidates: list[Pair]) -> int:
        values = [utilities.setdefault(p, utility(p)) << job.extra_frac for p in candidates]
        return noisy_max(values, draws(job.decision_noise, rng, len(candidates)))

    pairs = tree_rounds(names, choose) if len(names) > 1 else []
    two_way = {p: noisy(p) for p in pairs}
    net, _, _ = tree_network(names, states, pairs, one_way, two_way, job, n)
    return net, job, pairs
