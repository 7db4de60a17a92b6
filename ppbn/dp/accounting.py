"""The privacy plan of one DP learning job: the budget split, each mechanism's noise and
the (epsilon, delta) the release is held to (docs/security-dp.md).

Neighbouring data sets differ in the values of one record of the joined table; the record
count is public (both parties learn it when the records are aligned), so every count and
score is compared at the same n. The release composes, sequentially:

- the structure: K2 (``bn/k2.py``) takes at most ``decisions`` parent choices, each one
  report-noisy-max with exponential noise over the stop option and the candidates. Its
  utility is the family score; replacing one record changes any family score by at most
  ``score_sensitivity`` (see there), so each choice is (epsilon_d)-DP with
  epsilon_d = structure budget / decisions (permute-and-flip, which is report-noisy-max with
  exponential noise of scale 2 Delta / epsilon_d: McKenna and Sheldon 2020; Ding, Kifer and
  Zhang 2021);
- the parameters: every cell of every family's table of the learned network gets discrete
  Laplace noise before it is opened. Replacing one record moves one count of each family
  from one cell to another: L1 sensitivity 2 per family, 2 |V| in all, so the noise scale
  2 |V| / epsilon_p gives epsilon_p-DP (Canonne, Kamath and Steinke 2020).

Pure-DP sequential composition: epsilon = epsilon_s + epsilon_p. The epsilon of each
mechanism is OpenDP's privacy map of it (``opendp_epsilon``): the plan chooses the noise
scales, OpenDP states what they cost, and a plan whose cost exceeds its epsilon is refused. The noise is drawn with
finite precision and the structure's noisy scores are compared in fixed point; every
draw within ``GeometricSpec.deviation`` of the exact law and every comparison without a
tie make the drawn release equal to the exact mechanism's, so by a coupling the drawn one
is (epsilon, delta)-DP with delta = (1 + e^epsilon) times the probability that any of
them fails (``DPPlan.delta_bound``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppbn.dp.constants import (
    DEFAULT_DELTA,
    DEFAULT_STRUCTURE_SHARE,
    DP_SCORES,
    MAX_EPSILON,
    MIN_EPSILON,
)
from ppbn.dp.noise import DEFAULT_PRECISION, GeometricSpec, geometric_spec

# (uniform word bits, extra fractional bits of the structure's noise), cheapest first: the
# plan takes the first whose delta is within the allowed one (``DPPlan.failure_probability``)
PRECISIONS = ((64, 0), (64, 16), (96, 16), (96, 32), (128, 32), (128, 48), (128, 64))
FIXED_POINT_SLACK = 1e-6  # nats: the secure terms' fixed-point error, 8 changed terms at most


def score_sensitivity(mode: str, n_records: int, largest_states: int) -> float:
    """The most one family score changes when one record's values change (n fixed).

    Moving one record changes at most two cells alpha_ijk and two rows alpha_ij by one.
    - ``exact`` (K2's ln of the marginal likelihood, sum lnG(alpha_ijk + 1) -
      sum lnG(alpha_ij + d) + public): a cell term changes by ln(alpha_ijk + 1) <= ln n and
      a row term by ln(alpha_ij + d) <= ln(n + d - 1); the cell's and its row's changes
      have opposite signs when the record leaves (or joins) a row, so each half of the move
      is within [0, ln(n + d - 1)] or its negative, and the sum within ln(n + d - 1).
    - ``bic`` (the log-likelihood sum alpha ln alpha - sum alpha_ij ln alpha_ij, minus a
      penalty fixed by n): f(x) = (x + 1) ln(x + 1) - x ln x is increasing, so each half is
      within f(n - 1) = n ln n - (n - 1) ln(n - 1) <= ln n + 1, and the sum too.
    Plus ``FIXED_POINT_SLACK`` for the secure terms' fixed-point error."""
    n = max(int(n_records), 2)
    if mode == "exact":
        core = math.log(n + largest_states - 1)
    elif mode == "bic":
        core = n * math.log(n) - (n - 1) * math.log(n - 1)
    else:
        raise ValueError(
            f"a DP job scores with {' or '.join(DP_SCORES)}; score {mode!r} has no stated sensitivity"
        )
    return core + FIXED_POINT_SLACK


def k2_decisions(n_variables: int, max_parents: int) -> int:
    """The most parent choices K2 makes: the i-th variable of the order makes at most
    min(max_parents, i) (it stops when it has max_parents or no candidate is left)."""
    return sum(min(max_parents, i) for i in range(n_variables))


def largest_cells(cardinalities: list[int], max_parents: int) -> int:
    """An upper bound on the CPT cells of any network with at most ``max_parents`` parents
    per variable: each variable's states times the ``max_parents`` largest other ones."""
    total = 0
    for i, d in enumerate(cardinalities):
        others = sorted(cardinalities[:i] + cardinalities[i + 1 :], reverse=True)
        total += d * math.prod(others[:max_parents])
    return total


@dataclass(frozen=True)
class DPPlan:
    """Everything both parties derive alike from the job's public parameters."""

    epsilon: float
    delta: float  # the largest delta the job accepts
    structure_share: float
    n_records: int
    n_variables: int
    decisions: int
    score_sensitivity: float
    cells_bound: int
    largest_options: int  # the most options one choice has: stop and the candidates
    score_frac: int  # fractional bits of the fixed-point scores
    precision: int = DEFAULT_PRECISION  # bits of each uniform word of a draw
    extra_frac: int = 0  # the noise is added to the scores shifted up by this many bits

    @property
    def structure_epsilon(self) -> float:
        return self.epsilon * self.structure_share if self.decisions else 0.0

    @property
    def parameters_epsilon(self) -> float:
        return self.epsilon - self.structure_epsilon

    @property
    def decision_epsilon(self) -> float:
        return self.structure_epsilon / self.decisions if self.decisions else 0.0

    @property
    def count_scale(self) -> float:
        """Discrete Laplace scale of every count: L1 sensitivity 2 |V| over epsilon_p."""
        return 2.0 * self.n_variables / self.parameters_epsilon

    @property
    def tail(self) -> float:
        return 2.0**-self.precision

    @property
    def count_noise(self) -> GeometricSpec:
        return geometric_spec(self.count_scale, self.precision, self.tail)

    @property
    def noise_frac(self) -> int:
        """Fractional bits of the units the structure's noise is drawn in."""
        return self.score_frac + self.extra_frac

    @property
    def decision_scale(self) -> float:
        """Exponential noise scale 2 Delta / epsilon_d, in units of 2^-noise_frac nats."""
        return 2.0 * self.score_sensitivity / self.decision_epsilon * 2.0**self.noise_frac

    @property
    def decision_noise(self) -> GeometricSpec | None:
        if not self.decisions:
            return None
        return geometric_spec(self.decision_scale, self.precision, self.tail)

    @property
    def failure_probability(self) -> float:
        """The chance that any draw or comparison differs from the exact mechanism: every
        count's two draws, every decision's draws, and a decision whose two best noisy
        scores fall in one unit (given the others, the best lands within one unit of the
        runner-up with probability at most rate x 1, so at most k x rate per decision)."""
        total = 2 * self.cells_bound * self.count_noise.deviation
        if self.decisions:
            k = self.largest_options
            rate = 1.0 / self.decision_scale
            total += self.decisions * k * (self.decision_noise.deviation + rate)
        return total

    @property
    def delta_bound(self) -> float:
        return (1.0 + math.exp(self.epsilon)) * self.failure_probability

    def as_dict(self) -> dict:
        """The plan as a job's result and the docs state it."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta_bound,
            "delta_allowed": self.delta,
            "neighbours": "one record's values differ; the record count is public",
            "structure_epsilon": self.structure_epsilon,
            "parameters_epsilon": self.parameters_epsilon,
            "decisions": self.decisions,
            "epsilon_per_decision": self.decision_epsilon,
            "score_sensitivity_nats": self.score_sensitivity,
            "count_noise": "discrete Laplace",
            "count_scale": self.count_scale,
            "structure_noise": "exponential (report-noisy-max = permute-and-flip)",
            "structure_scale_nats": self.decision_scale / 2.0**self.score_frac
            if self.decisions
            else 0.0,
        }


EPSILON_ROUNDING = 1e-9  # OpenDP rounds its maps up in floating point


def opendp_epsilon(p: DPPlan) -> float:
    """The plan's epsilon from OpenDP's privacy maps: report-noisy-max with exponential noise
    (``make_noisy_max`` under max-divergence, scores at L-infinity distance Delta) for each
    of the D choices, and the discrete Laplace mechanism (``make_laplace`` on integer
    vectors at L1 distance 2 |V|) for the counts, composed by summing (pure DP)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    total = 0.0
    if p.decisions:
        scores = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
        choice = scores >> dp.m.then_noisy_max(
            dp.max_divergence(), scale=p.decision_scale / 2.0**p.noise_frac
        )
        total += p.decisions * choice.map(p.score_sensitivity)
    counts = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
    noisy = counts >> dp.m.then_laplace(scale=p.count_scale)
    total += noisy.map(2 * p.n_variables)
    return float(total)


def plan(
    epsilon: float,
    *,
    n_records: int,
    cardinalities: list[int],
    max_parents: int,
    mode: str,
    score_frac: int,
    structure_share: float = DEFAULT_STRUCTURE_SHARE,
    delta: float = DEFAULT_DELTA,
) -> DPPlan:
    """The job's plan, or ValueError naming what cannot be held."""
    if not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise ValueError(f"epsilon must lie in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]")
    if not 0.0 < structure_share < 1.0:
        raise ValueError("the structure's share of epsilon must lie strictly between 0 and 1")
    n_variables = len(cardinalities)
    decisions = k2_decisions(n_variables, max_parents)
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must lie in (0, 1)")
    result = None
    for precision, extra in PRECISIONS:
        result = DPPlan(
            epsilon=float(epsilon),
            delta=float(delta),
            structure_share=float(structure_share),
            n_records=int(n_records),
            n_variables=n_variables,
            decisions=decisions,
            score_sensitivity=score_sensitivity(mode, n_records, max(cardinalities)),
            cells_bound=largest_cells(list(cardinalities), max_parents),
            largest_options=n_variables,  # stop and at most |V| - 1 candidates
            score_frac=score_frac,
            precision=precision,
            extra_frac=extra,
        )
        if result.delta_bound <= delta:
            spent = opendp_epsilon(result)
            if spent > epsilon * (1 + EPSILON_ROUNDING):
                raise ValueError(
                    f"OpenDP's privacy maps give epsilon {spent:.6g} for this plan, above {epsilon:g}"
                )
            return result
    raise ValueError(
        f"at epsilon {epsilon:g} the noise's finite precision gives delta "
        f"{result.delta_bound:.2g}, above the allowed {delta:.2g} (a smaller epsilon or a larger delta)"
    )
