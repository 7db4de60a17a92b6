"""The adaptive marginal release (docs/security-dp.md, "The adaptive release"), and its
trusted curator's twin.

It follows AIM (McKenna, Mullins, Sheldon and Miklau 2022, PVLDB 15(11)) on the 2-way
workload: measure every 1-way marginal, fit a model to the measurements, then for a fixed
number of rounds choose the pair the model explains worst, measure it and fit again. Where
the marginal release (``dp.marginal_release``) fixes its choices' utility before the
first choice (the independent model) and keeps a tree, this one scores every pair against
the model of what has been measured so far, so a pair that the measured ones already
explain is not measured again, and a cycle of strong pairs can be.

- the 1-way counts, every cell with the plan's count noise (``DPPlan.one_way_noise``: the
  discrete Gaussian where the plan affords it, else discrete Laplace G1 - G2; a 1-way
  table spends a quarter of a 2-way one's budget, ``accounting.ONE_WAY_WEIGHT``);
- ``DPPlan.decisions`` rounds (``adaptive_rounds``); each chooses among the pairs not yet
  measured, (a, b) with a before b in the schema's order, by report-noisy-max with
  exponential noise (``DPPlan.decision_noise``) over AIM's utility: the L1 error of the
  current model's estimate of the pair (its counts rounded, ``model_estimate``) on the
  pair's true counts, less the L1 error a measurement of the pair's cells would itself
  carry (sqrt(2 / pi) sigma per cell, AIM's; made a non-negative public offset,
  ``measurement_offsets``), the first largest noisy value winning; the chosen pair's
  counts get the noise of the 2-way scale (``DPPlan.count_noise``); the model is fitted
  again;
- post-processing, free in privacy: the last fit as a Bayesian network
  (``model_network``): each variable's parents are its neighbours eliminated after it
  in a min-degree elimination of the measured pairs' graph, and its CPT the model's
  marginal over the family, so the network holds the model's distribution exactly.

Departures from AIM: a fixed number of rounds at one noise scale (no annealing: the plan,
the ledger and OpenDP price the release before it starts); report-noisy-max with
exponential noise, charged as pure DP, where AIM's exponential mechanism is charged
epsilon^2 / 8 under zCDP; the workload's
weights are all equal (every 2-way marginal), so they drop out; the model's marginals are
read from its full joint (``graphical_fit.joint_counts``), which bounds the domain
(``MAX_JOINT_CELLS``: the marginal release serves larger ones).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ppbn.bn.model import BayesNet
from ppbn.bn.params import cpt_from_counts
from ppbn.dp.accounting import DEFAULT_DELTA, DEFAULT_STRUCTURE_SHARE, DPPlan
from ppbn.dp.count_noise import noise_stddev
from ppbn.dp.graphical_fit import Measured, fit_marginals, joint_counts, project
from ppbn.dp.marginal_release import Pair, curator_counts, pair_error
from ppbn.dp.reference import checked_codes, draws, noisy_max

ERROR_PER_CELL = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|: AIM's expected error of a measured cell
# up to this many cells in the whole domain, every round's fit has one shape (every pair
# held, the unmeasured ones at no weight), which private-pgm compiles once for the release
# instead of once a round: asia, 16 rounds, 0.3 s a fit against about 4 s; the shape's one
# clique is the whole domain, so larger domains fit the measured pairs alone
ONE_SHAPE_MOST_CELLS = 2**12
# chooses one of the candidate pairs (its index), given the current model's joint counts
# (None where the party does not fit between rounds: ``adaptive_rounds``'s ``refit``)
RoundChooser = Callable[[list[Pair], np.ndarray | None], int]
# measures a chosen pair: its noisy counts, shaped (states of a, states of b)
PairMeasurer = Callable[[Pair], np.ndarray]


def all_pairs(names: Sequence[str]) -> list[Pair]:
    """Every pair (a, b), a before b in ``names``."""
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]


def model_estimate(joint: np.ndarray, names: Sequence[str], pair: Pair) -> np.ndarray:
    """The model's counts of ``pair`` (C order), rounded to whole counts: computed from
    released values only, so public."""
    return np.rint(project(joint, names, pair)).astype(np.int64)


def measurement_offsets(
    pairs: Sequence[Pair], cards: Mapping[str, int], stddev: float
) -> dict[Pair, int]:
    """AIM's penalty on a pair, the expected L1 error of its own measurement
    (sqrt(2 / pi) sigma per cell), as a whole-count offset added to every pair's utility:
    the largest penalty less the pair's own, so that every utility stays non-negative and
    the choice is AIM's. Public: it depends on the domain and the plan alone."""
    penalty = {p: ERROR_PER_CELL * stddev * cards[p[0]] * cards[p[1]] for p in pairs}
    top = max(penalty.values(), default=0.0)
    return {p: int(round(top - penalty[p])) for p in pairs}


def adaptive_rounds(
    names: Sequence[str],
    domain: Mapping[str, int],
    rounds: int,
    first: Sequence[Measured],
    choose: RoundChooser,
    measure: PairMeasurer,
    stddev: float,
    n_records: int,
    refit: bool = True,
) -> tuple[list[Pair], list[Measured], Any]:
    """``rounds`` rounds from the measurements ``first``: fit, choose among the pairs not
    yet measured (in ``all_pairs`` order) given the model's joint counts, measure the
    chosen one; the chosen pairs in order, every measurement, and the last fit. Without
    ``refit`` only the last fit is made and ``choose`` gets None (the secure job's
    evaluator: the garbler's model gives the estimates)."""
    measured = list(first)
    left = all_pairs(names)
    chosen: list[Pair] = []
    for _ in range(min(rounds, len(left))):
        joint = (
            joint_counts(round_fit(names, domain, measured, n_records), names) if refit else None
        )
        pair = left.pop(choose(list(left), joint))
        chosen.append(pair)
        measured.append(Measured(pair, np.asarray(measure(pair)), stddev))
    return chosen, measured, round_fit(names, domain, measured, n_records)


def round_fit(
    names: Sequence[str], domain: Mapping[str, int], measured: Sequence[Measured], n_records: int
) -> Any:
    """private-pgm's fit of ``measured``. On a domain of at most ``ONE_SHAPE_MOST_CELLS``
    cells every pair not measured joins it at infinite standard deviation, each pair in
    ``all_pairs`` order whether measured or not: no weight in the loss, so their potentials
    stay at zero and the model is the same (to the fit's own precision), while every
    round's fit has one shape."""
    if math.prod(domain.values()) > ONE_SHAPE_MOST_CELLS:
        return fit_marginals(domain, measured, n_records)
    by_clique = {m.clique: m for m in measured}
    ordered = [by_clique[(v,)] for v in names]
    for a, b in all_pairs(names):
        idle = Measured((a, b), np.zeros((domain[a], domain[b])), math.inf)
        ordered.append(by_clique.get((a, b), idle))
    return fit_marginals(domain, ordered, n_records)


def later_neighbours(names: Sequence[str], pairs: Sequence[Pair]) -> dict[str, tuple[str, ...]]:
    """Each variable's neighbours still left when a min-degree elimination of the graph of
    ``pairs`` (ties to the earlier variable of ``names``) removes it; removing a variable
    joins them, so each variable and its later neighbours form a clique of the
    triangulated graph. In ``names`` order."""
    neighbours: dict[str, set[str]] = {v: set() for v in names}
    for a, b in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    position = {v: i for i, v in enumerate(names)}
    left, later = set(names), {}
    while left:
        v = min(left, key=lambda x: (len(neighbours[x] & left), position[x]))
        near = neighbours[v] & left
        for x in near:
            neighbours[x] |= near - {x}
        later[v] = tuple(sorted(near, key=position.__getitem__))
        left.remove(v)
    return later


def model_network(
    model: Any, names: Sequence[str], states: Mapping[str, Sequence[str]], pairs: Sequence[Pair]
) -> BayesNet:
    """The fitted model as a Bayesian network with the same distribution: each variable's
    parents are its later neighbours (``later_neighbours``: edges point from the later
    eliminated, so there is no cycle), its CPT the model's marginal over the family, a
    clique of the triangulated graph that the model factorises over."""
    names = tuple(names)
    parents = later_neighbours(names, pairs)
    joint = joint_counts(model, names)
    cpts: dict[str, np.ndarray] = {}
    unobserved: dict[str, tuple[int, ...]] = {}
    for v in names:
        table = project(joint, names, (*parents[v], v)).reshape(-1, len(states[v]))
        cpts[v], empty = cpt_from_counts(np.clip(table, 0.0, None))
        if empty:
            unobserved[v] = empty
    return BayesNet(names, {v: tuple(states[v]) for v in names}, parents, cpts, unobserved)


def adaptive_twin(
    names: Sequence[str],
    states: Mapping[str, Sequence[str]],
    codes: np.ndarray,
    epsilon: float,
    rng: np.random.Generator | None = None,
    *,
    structure_share: float = DEFAULT_STRUCTURE_SHARE,
    delta: float = DEFAULT_DELTA,
) -> tuple[BayesNet, DPPlan, list[Pair]]:
    """The epsilon-DP adaptive release of ``codes`` (records x variables, columns in
    ``names`` order, complete), computed in the clear as a curator would; with its plan
    and the chosen pairs in the order chosen. ``rng`` (default: fresh OS entropy) draws all
    the noise: the 1-way counts (``names`` order), then each round's candidates and the
    chosen pair's counts."""
    names, states, codes = checked_codes(names, states, codes)
    rng = np.random.default_rng() if rng is None else rng
    n = int(codes.shape[0])
    domain = {v: len(states[v]) for v in names}
    job, count, noisy = curator_counts(
        names, states, codes, epsilon, rng, "adaptive", structure_share, delta
    )
    stddev = noise_stddev(job.count_noise)
    one_sd = noise_stddev(job.one_way_noise)
    offsets = measurement_offsets(all_pairs(names), domain, stddev)

    def choose(candidates: list[Pair], joint: np.ndarray | None) -> int:
        assert joint is not None  # the curator fits every round
        values = [
            (pair_error(count(p).ravel(), model_estimate(joint, names, p)) + offsets[p])
            << job.extra_frac
            for p in candidates
        ]
        return noisy_max(values, draws(job.decision_noise, rng, len(candidates)))

    first = [Measured((v,), noisy((v,)), one_sd) for v in names]
    pairs, _, model = adaptive_rounds(names, domain, job.decisions, first, choose, noisy, stddev, n)
    return model_network(model, names, states, pairs), job, pairs
