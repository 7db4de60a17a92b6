"""The trusted curator's twin of the secure DP learn job (docs/security-dp.md): the same
plan (``accounting.plan``) and the same mechanism, computed in the clear on the joined
table, with the noise drawn bit by bit from one ``numpy`` generator (``GeometricSpec``).

- structure: K2 (``bn.k2.k2_search``) under the node order, every parent choice
  report-noisy-max: the options are [stop: score(child | parents)] + [score(child |
  parents + z) for each candidate z] (stop left out where ``plan.stop_option`` is False,
  its noise still drawn, as the secure job draws it), each rounded to fixed point
  (``score_frac`` fractional bits), shifted up by ``plan.extra_frac`` bits, plus one
  draw of ``plan.decision_noise``; the first largest noisy value wins, index 0 stopping. The score is the family score (``bn.scores``) of mode ``exact``
  or ``bic`` (c_star 1, N the record count); the tie tolerance tau plays no part.
- parameters: every cell of every family's count table (parents..., child) gets
  discrete Laplace noise G1 - G2 (two draws of ``plan.count_noise``), is clipped at 0,
  and each row is normalised, an all-zero row becoming uniform (``bn.params``).

The secure job computes the same release inside garbled circuits from both parties'
uniform bits; this one is what a curator holding all the data would publish.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.bn.k2 import CountsOracle, K2Request, k2_search
from ppbn.bn.learn import joined_count_fn
from ppbn.bn.model import BayesNet
from ppbn.bn.params import cpt_from_counts
from ppbn.dp.accounting import DEFAULT_DELTA, DEFAULT_STRUCTURE_SHARE, DPPlan, plan
from ppbn.dp.noise import GeometricSpec


def draws(spec: GeometricSpec, rng: np.random.Generator, size: int) -> list[int]:
    """``size`` draws of ``spec`` as Python integers (a small epsilon's decision noise
    has more digits than an int64 holds)."""
    return [int(x) for x in spec.sample(rng, size)]


def fixed_point(score: float, frac: int) -> int:
    """round(score * 2^frac), exactly (a power-of-two scaling of a float is exact)."""
    return round(score * 2.0**frac)


def noisy_max(values: Sequence[int], noise: Sequence[int]) -> int:
    """The index of the first largest noisy value values[i] + noise[i]."""
    noisy = [v + z for v, z in zip(values, noise, strict=True)]
    return noisy.index(max(noisy))


@dataclass
class NoisyMaxOracle:
    """K2's oracle (``bn.k2.K2Oracle``): each parent choice report-noisy-max over the stop
    option and the candidates' fixed-point scores (``scores`` computes them, cached),
    shifted up by ``extra_frac`` bits as the secure job shifts its shares, so that the
    noise is drawn in units of 2^-(score_frac + extra_frac) nats."""

    scores: CountsOracle
    noise: GeometricSpec
    rng: np.random.Generator
    score_frac: int
    extra_frac: int = 0
    limit: int | None = None  # the plan's most choices (``DPPlan.decisions``)
    stop_option: bool = True  # ``DPPlan.stop_option``
    decisions: int = 0  # choices made so far

    def choose(self, request: K2Request) -> str | None:
        self.decisions += 1
        if self.limit is not None and self.decisions > self.limit:
            raise RuntimeError(
                f"K2 asked for {self.decisions} noisy choices; the plan allows {self.limit}"
            )
        child, parents = request.child, request.parents
        options = [self.scores.score(child, parents)]
        options += [self.scores.score(child, (*parents, z)) for z in request.candidates]
        values = [fixed_point(s, self.score_frac) << self.extra_frac for s in options]
        noise = draws(self.noise, self.rng, len(values))
        first = 0 if self.stop_option else 1  # K2 asks only while candidates are left
        index = first + noisy_max(values[first:], noise[first:])
        return None if index == 0 else request.candidates[index - 1]

    def best_parents(self, requests: Sequence[K2Request], tau: float) -> list[str | None]:
        return [self.choose(r) for r in requests]

    def best_parent(
        self, child: str, parents: tuple[str, ...], candidates: tuple[str, ...], tau: float
    ) -> str | None:
        return self.choose(K2Request(child, parents, candidates))


def noisy_counts(table: np.ndarray, spec: GeometricSpec, rng: np.random.Generator) -> np.ndarray:
    """``table`` plus discrete Laplace noise G1 - G2 in every cell, clipped at 0."""
    flat = np.asarray(table, dtype=np.int64).reshape(-1)
    g = np.array(draws(spec, rng, 2 * flat.size), dtype=np.int64).reshape(2, -1)
    return np.clip(flat + g[0] - g[1], 0, None).reshape(np.shape(table))


def checked_codes(
    names: Sequence[str], states: Mapping[str, Sequence[str]], codes: np.ndarray
) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]], np.ndarray]:
    """A twin's inputs as tuples and an array, or ValueError: ``codes`` must be records x
    variables (``names`` order) with no missing cell (a DP release counts complete records)."""
    names = tuple(names)
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(names):
        raise ValueError(f"codes must be records x {len(names)} variables, got {codes.shape}")
    if np.any(codes < 0):
        raise ValueError("a DP release needs complete records: codes hold missing cells")
    return names, {v: tuple(states[v]) for v in names}, codes


def dp_learn(
    names: Sequence[str],
    states: Mapping[str, Sequence[str]],
    codes: np.ndarray,
    epsilon: float,
    max_parents: int,
    mode: str = "exact",
    order: Sequence[str] | None = None,
    structure_share: float = DEFAULT_STRUCTURE_SHARE,
    rng: np.random.Generator | None = None,
    *,
    score_frac: int,
    delta: float = DEFAULT_DELTA,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[BayesNet, DPPlan]:
    """The epsilon-DP network of ``codes`` (records x variables, columns in ``names`` order,
    each coded as the index in ``states[name]``, as ``bn.learn.learn_reference`` takes
    them; from a schema: ``schema.names`` and ``{v.name: v.states for v in
    schema.variables}``) and the job's plan. K2 runs under ``order`` (default ``names``);
    ``rng`` (default: fresh OS entropy) draws all the noise.
    Raises ValueError for a plan that cannot be held (``accounting.plan``: epsilon out of
    range, or the finite-precision noise's delta bound above ``delta``) or for missing
    cells (negative codes: the DP job counts complete records only)."""
    names, states, codes = checked_codes(names, states, codes)
    rng = np.random.default_rng() if rng is None else rng
    job = plan(
        epsilon,
        n_records=int(codes.shape[0]),
        cardinalities=[len(states[v]) for v in names],
        max_parents=max_parents,
        mode=mode,
        score_frac=score_frac,
        structure_share=structure_share,
        delta=delta,
    )
    count = joined_count_fn(names, states, codes)
    parents: Mapping[str, tuple[str, ...]] = {v: () for v in names}
    if job.decision_noise is not None:
        scores = CountsOracle(count, mode, 1.0, n_records=int(codes.shape[0]))
        oracle = NoisyMaxOracle(
            scores,
            job.decision_noise,
            rng,
            score_frac,
            job.extra_frac,
            job.decisions,
            job.stop_option,
        )
        parents = k2_search(tuple(order or names), max_parents, oracle, 0.0, progress).parents
    cpts: dict[str, np.ndarray] = {}
    unobserved: dict[str, tuple[int, ...]] = {}
    for v in names:
        table = count((*parents[v], v)).reshape(-1, len(states[v]))
        cpts[v], empty = cpt_from_counts(noisy_counts(table, job.count_noise, rng))
        if empty:
            unobserved[v] = empty
    net = BayesNet(names, states, {v: tuple(parents[v]) for v in names}, cpts, unobserved)
    return net, job
