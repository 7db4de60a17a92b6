"""The privacy plan of one DP learning job: the budget split, each mechanism's noise and
the (epsilon, delta) the release is held to (docs/security-dp.md).

Neighbouring data sets differ in the values of one record of the joined table; the record
count is public (both parties learn it when the records are aligned), so every count and
score is compared at the same n. The release composes, sequentially:

- the structure: K2 (``bn/k2.py``) takes at most ``decisions`` parent choices, each one
  report-noisy-max with exponential noise over the stop option (left out where the
  counts of full families stay useful: ``stop_option``) and the candidates. Its
  utility is the family score; replacing one record changes any family score by at most
  ``score_sensitivity`` (see there), so each choice with exponential noise of scale
  2 Delta / epsilon_d is epsilon_d-DP (permute-and-flip: McKenna and Sheldon 2020; Ding,
  Kifer and Zhang 2021);
- the parameters: every cell of every family's table of the learned network gets discrete
  Laplace noise of scale b before it is opened. Replacing one record moves one count of
  each family from one cell to another: 2 |V| cells change, each by one (L1 distance
  2 |V|), and each cell's noise is (1 / b)-DP for a change of one (Canonne, Kamath and
  Steinke 2020).

Two ways to add these up, both with OpenDP's privacy maps (``opendp_epsilon``); a plan
takes the one that gives less noise (``ACCOUNTINGS``, ``plan``):

- ``pure``: epsilon = D epsilon_d + 2 |V| / b (sequential composition of pure DP);
  delta comes from the finite precision only.
- ``zcdp``: an epsilon_d-DP choice is epsilon_d^2 / 2-zCDP and a cell's noise
  1 / (2 b^2)-zCDP (Bun and Steinke 2016, Prop. 1.4); zCDP adds up over the choices and
  over the changed cells (the cells' noises are independent, and the Renyi divergences of
  independent coordinates add), rho = D epsilon_d^2 / 2 + |V| / b^2, and rho-zCDP is
  (epsilon, delta_c)-DP by OpenDP's conversion (``zcdp_epsilon``: Canonne, Kamath and
  Steinke 2020, Prop. 12). It grows like the square root of the number of mechanisms
  where pure DP grows linearly, so it wins on networks with many variables.

The marginal releases' counts under zcdp take discrete Gaussian noise N_Z(0, t^2) instead
(``count_family``, ``dp.gaussian``): a cell's is 1 / (2 t^2)-zCDP for a change of one
(Canonne, Kamath and Steinke 2020, Thm. 4), the discrete Laplace's charge at scale t, at
half its variance; its draw costs 9 to 13 t comparisons in a circuit (by the precision),
so the plan takes it while that stays within ``GAUSSIAN_MOST_THRESHOLDS``.

The marginal releases count a table per variable and one per chosen pair. Their 1-way
tables need not cost what a 2-way one does: each spends ``one_way_weight`` of a 2-way
table's rho (zcdp) or epsilon (pure), so the 1-way scale is b / sqrt(w) (zcdp) or b / w
(pure), and the sums above count a 1-way table w times (``DPPlan.count_units``).

The noise is drawn with finite precision and the structure's noisy scores are compared in
fixed point; every draw within ``GeometricSpec.deviation`` of the exact law and every
comparison without a tie make the drawn release equal to the exact mechanism's, so by a
coupling the drawn one is (epsilon, delta_c + delta_p)-DP with
delta_p = (1 + e^epsilon) times the probability that any of them fails
(``DPPlan.precision_delta``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ppbn.dp.constants import (
    DEFAULT_DELTA,
    DEFAULT_STRUCTURE_SHARE,
    DP_SCORES,
    MAX_EPSILON,
    MIN_EPSILON,
    RELEASES,
)
from ppbn.dp.count_noise import CountNoise
from ppbn.dp.gaussian import gaussian_spec
from ppbn.dp.noise import DEFAULT_PRECISION, GeometricSpec, geometric_spec
from ppbn.dp.quantiles import bins_share

# (uniform word bits, extra fractional bits of the structure's noise), cheapest first: the
# plan takes the first whose delta is within the allowed one (``DPPlan.failure_probability``)
PRECISIONS = ((64, 0), (64, 16), (96, 16), (96, 32), (128, 32), (96, 48), (128, 48), (128, 64))
FIXED_POINT_SLACK = 1e-6  # nats: the secure terms' fixed-point error, 8 changed terms at most
ACCOUNTINGS = ("pure", "zcdp")
COUNT_FAMILIES = ("laplace", "gaussian")  # a released count's noise (``DPPlan.count_family``)
# a discrete Gaussian draw's thresholds, at most (about 9 sigma at 64-bit words, 13 sigma at
# 128, each about that many AND gates; ``gaussian_affordable``): sigma up to about 300
GAUSSIAN_MOST_THRESHOLDS = 4096
PAIR_ERROR_SENSITIVITY = 2.0  # counts: one record leaves one cell of a pair's table for another
MARGINAL_RELEASES = ("marginals", "adaptive")  # pairs chosen by their L1 error, then measured
UTILITIES = {
    "marginals": "L1 error of the independent model",
    "adaptive": "L1 error of the fitted model, less a measurement's expected error (AIM)",
}
FITTED = {  # how each release's parameters come from its noisy counts
    "network": "CPTs from counts",
    "marginals": "a tree fitted to 1-way and 2-way counts",
    "adaptive": "a model fitted to 1-way and 2-way counts",
}
# a marginal release's 1-way table's share of the count budget, relative to a 2-way table's
# (``DPPlan.one_way_weight``): the 2-way tables hold the same counts, summed, and the model
# fitted to both reads each variable's marginal from them as well; by measurement on the
# five small bundled networks (docs/decisions/dp-gaussian-counts.md)
ONE_WAY_WEIGHT = {"marginals": 1.0, "adaptive": 0.25}
# the adaptive release's rounds: this many per variable, at most half the pairs (by
# measurement on the five small bundled networks: docs/decisions/dp-adaptive-release.md)
ADAPTIVE_ROUNDS_PER_VARIABLE = 2
# PrivBayes's theta-usefulness (Zhang et al. 2017, Sec. 4.3; they take 4): full families
# are worth filling when their average cell holds this many times the count noise's scale
# (``DPPlan.family_usefulness``); 8 by measurement (docs/decisions/dp-small-networks.md)
USEFUL_COUNT = 8.0
# more variables than this keep "stop" whatever the counts: a choice the noise decides then
# mostly picks a parent that carries nothing (win95pts, 76 variables: measured worse)
FULL_FAMILIES_MOST_VARIABLES = 40
PRECISION_DELTA_SHARE = 0.1  # of delta, for the finite precision under zCDP; the rest converts rho


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
    structure_share: float  # of epsilon (pure) or of rho (zcdp)
    n_records: int
    n_variables: int
    decisions: int
    score_sensitivity: float
    cells_bound: int
    largest_options: int  # the most options one choice has: stop and the candidates
    score_frac: int  # fractional bits of the fixed-point scores
    precision: int = DEFAULT_PRECISION  # bits of each uniform word of a draw
    extra_frac: int = 0  # the noise is added to the scores shifted up by this many bits
    accounting: str = "pure"  # one of ACCOUNTINGS
    rho: float = 0.0  # zcdp: the whole release's rho
    # the owners' private cut points of data-dependent bins (``dp.quantiles``), composed
    # sequentially before the rest: ``epsilon`` above is what the network has after them
    bins_cuts: int = 0
    bins_epsilon: float = 0.0
    # False: no "stop" option while candidates are left, so every child takes
    # min(max_parents, position) parents, as PrivBayes's do (``plan`` chooses it)
    stop_option: bool = True
    # what is released (``RELEASES``): "network", K2's choices and every family's noisy
    # counts; "marginals", a spanning tree's pairs chosen one by one and the noisy counts
    # of every variable and every chosen pair (``dp.marginal_release``); "adaptive", the
    # same with pairs chosen against a model fitted round by round (``dp.adaptive_release``)
    release: str = "network"
    # the marginal releases: a 1-way table's share of the count budget, relative to a 2-way
    # table's (``ONE_WAY_WEIGHT``); 1 spends the same on every table
    one_way_weight: float = 1.0
    # the counts' noise (``COUNT_FAMILIES``): discrete Laplace of scale ``count_scale``, or
    # (a marginal release under zcdp) the discrete Gaussian of sigma ``count_scale``
    count_family: str = "laplace"

    def __post_init__(self) -> None:
        if self.release not in RELEASES:
            raise ValueError(f"release must be one of {', '.join(RELEASES)}")
        if self.accounting not in ACCOUNTINGS:
            raise ValueError(f"accounting must be one of {', '.join(ACCOUNTINGS)}")
        if self.accounting == "zcdp" and not self.rho > 0.0:
            raise ValueError("a zcdp plan needs a positive rho")
        if not 0.0 < self.one_way_weight <= 1.0:
            raise ValueError("the 1-way tables' weight must lie in (0, 1]")
        if self.count_family not in COUNT_FAMILIES:
            raise ValueError(f"count_family must be one of {', '.join(COUNT_FAMILIES)}")
        if self.count_family == "gaussian" and self.accounting != "zcdp":
            raise ValueError("the discrete Gaussian counts need zcdp accounting")

    @property
    def total_epsilon(self) -> float:
        """The whole release's epsilon: the cut points' and the network's."""
        return self.epsilon + self.bins_epsilon

    @property
    def epsilon_per_cut(self) -> float:
        return self.bins_epsilon / self.bins_cuts if self.bins_cuts else 0.0

    @property
    def structure_share_used(self) -> float:
        return self.structure_share if self.decisions else 0.0

    @property
    def decision_epsilon(self) -> float:
        """Each parent choice's own epsilon_d."""
        if not self.decisions:
            return 0.0
        if self.accounting == "zcdp":
            return math.sqrt(2.0 * self.structure_share_used * self.rho / self.decisions)
        return self.epsilon * self.structure_share_used / self.decisions

    @property
    def released_tables(self) -> int:
        """The noisy tables one record is counted in: a family per variable (network), or
        a 1-way marginal per variable and a 2-way one per chosen pair (the marginal
        releases: one pair per choice)."""
        if self.release in MARGINAL_RELEASES:
            return self.n_variables + self.decisions
        return self.n_variables

    @property
    def count_units(self) -> float:
        """The released tables, each counted by its share of the count budget: a family or
        a 2-way table 1, a marginal release's 1-way table ``one_way_weight``."""
        if self.release in MARGINAL_RELEASES:
            return self.n_variables * self.one_way_weight + self.decisions
        return float(self.released_tables)

    @property
    def count_scale(self) -> float:
        """The noise scale b of every count of a family or a 2-way table (the discrete
        Laplace's scale, or the discrete Gaussian's sigma), with
        U = ``count_units`` (one record moves one count in each table, two cells): pure,
        2 U / b = epsilon_p; zcdp, U / b^2 = rho_p."""
        rest = 1.0 - self.structure_share_used
        if self.accounting == "zcdp":
            return math.sqrt(self.count_units / (rest * self.rho))
        return 2.0 * self.count_units / (rest * self.epsilon)

    @property
    def one_way_scale(self) -> float:
        """The scale of a marginal release's 1-way counts: b / sqrt(w) (zcdp) or b / w
        (pure) for w = ``one_way_weight``; ``count_scale`` for the network release."""
        if self.release not in MARGINAL_RELEASES:
            return self.count_scale
        w = self.one_way_weight
        return self.count_scale / (math.sqrt(w) if self.accounting == "zcdp" else w)

    def table_scales(self) -> list[tuple[int, float]]:
        """The noisy tables as (how many, the scale of their counts)."""
        if self.release in MARGINAL_RELEASES:
            return [(self.n_variables, self.one_way_scale), (self.decisions, self.count_scale)]
        return [(self.released_tables, self.count_scale)]

    @property
    def family_usefulness(self) -> float:
        """The average cell of a released table (the plan's ``cells_bound`` over the
        tables) in units of the count noise's scale."""
        return self.n_records * self.released_tables / (self.cells_bound * self.count_scale)

    @property
    def tail(self) -> float:
        return 2.0**-self.precision

    def _count_spec(self, scale: float) -> CountNoise:
        if self.count_family == "gaussian":
            return gaussian_spec(scale, self.precision, self.tail)
        return geometric_spec(scale, self.precision, self.tail)

    @property
    def count_noise(self) -> CountNoise:
        return self._count_spec(self.count_scale)

    @property
    def one_way_noise(self) -> CountNoise:
        return self._count_spec(self.one_way_scale)

    def table_noise(self, family: tuple[str, ...]) -> CountNoise:
        """The noise of a released table of ``family``'s counts."""
        return self.one_way_noise if len(family) == 1 else self.count_noise

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
        total = 2 * self.cells_bound * max(self.count_noise.deviation, self.one_way_noise.deviation)
        if self.decisions:
            k = self.largest_options
            rate = 1.0 / self.decision_scale
            total += self.decisions * k * (self.decision_noise.deviation + rate)
        return total

    @property
    def precision_delta(self) -> float:
        """delta_p: what the finite precision adds (the coupling)."""
        return (1.0 + math.exp(self.epsilon)) * self.failure_probability

    @property
    def conversion_delta(self) -> float:
        """delta_c: the delta at which rho converts to epsilon (0 under pure DP)."""
        return self.delta * (1.0 - PRECISION_DELTA_SHARE) if self.accounting == "zcdp" else 0.0

    @property
    def delta_bound(self) -> float:
        return self.conversion_delta + self.precision_delta

    def as_dict(self) -> dict:
        """The plan as a job's result and the docs state it."""
        return {
            "epsilon": self.total_epsilon,
            "delta": self.delta_bound,
            "bins": {
                "cut_points": self.bins_cuts,
                "epsilon": self.bins_epsilon,
                "epsilon_per_cut": self.epsilon_per_cut,
                "mechanism": "OpenDP private quantile over a fixed grid of candidates",
            }
            if self.bins_cuts
            else None,
            "release": self.release,
            "network_epsilon": self.epsilon,
            "delta_allowed": self.delta,
            "neighbours": "one record's values differ; the record count is public",
            "accounting": self.accounting,
            "rho": self.rho if self.accounting == "zcdp" else None,
            "structure_share": self.structure_share_used,
            "stop_option": self.stop_option,
            "decisions": self.decisions,
            "epsilon_per_decision": self.decision_epsilon,
            **(
                {"utility": UTILITIES[self.release], "utility_sensitivity": 2.0}
                if self.release in MARGINAL_RELEASES
                else {"score_sensitivity_nats": self.score_sensitivity}
            ),
            "parameters": FITTED[self.release],
            "count_noise": f"discrete {self.count_family.capitalize()}",
            "count_scale": self.count_scale,
            **(
                {"one_way_scale": self.one_way_scale, "one_way_weight": self.one_way_weight}
                if self.release in MARGINAL_RELEASES
                else {}
            ),
            "structure_noise": "exponential (report-noisy-max = permute-and-flip)",
            "structure_scale": self.decision_scale / 2.0**self.noise_frac
            if self.decisions
            else 0.0,
        }


EPSILON_ROUNDING = 1e-9  # OpenDP rounds its maps up in floating point


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The epsilon at which rho-zCDP is (epsilon, delta)-DP, by OpenDP's conversion
    (``make_zCDP_to_approxDP``). The conversion depends on rho alone, so it is read off a
    Gaussian mechanism of scale 1 at distance sqrt(2 rho), whose zCDP is exactly rho."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if rho <= 0.0:
        return 0.0
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    gaussian = dp.c.make_zCDP_to_approxDP(space >> dp.m.then_gaussian(scale=1.0))
    return float(gaussian.map(math.sqrt(2.0 * rho)).epsilon(delta))


def largest_rho(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-12 relative) whose conversion at ``delta`` is within
    ``epsilon``; rho < epsilon always (the conversion gives at least rho)."""
    low, high = 0.0, float(epsilon)
    while high - low > 1e-12 * high:
        middle = (low + high) / 2.0
        if zcdp_epsilon(middle, delta) <= epsilon:
            low = middle
        else:
            high = middle
    return low


def opendp_epsilon(p: DPPlan) -> float:
    """The plan's epsilon from OpenDP's privacy maps: report-noisy-max with exponential noise
    (``make_noisy_max`` under max-divergence, scores at L-infinity distance Delta) for each
    of the D choices, and the discrete Laplace mechanism (``make_laplace`` on integers) for
    each of the two changed cells of every released table, at its table's scale (the
    discrete Gaussian's ``make_gaussian``, zCDP already); ``pure`` sums them, ``zcdp`` maps
    each to zCDP (``make_pureDP_to_zCDP``), sums rho and converts at delta_c
    (``zcdp_epsilon``)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    convert = dp.c.make_pureDP_to_zCDP if p.accounting == "zcdp" else (lambda m: m)
    total = 0.0
    if p.decisions:
        scores = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
        choice = scores >> dp.m.then_noisy_max(
            dp.max_divergence(), scale=p.decision_scale / 2.0**p.noise_frac
        )
        total += p.decisions * convert(choice).map(p.score_sensitivity)
    cell = dp.atom_domain(T=int), dp.absolute_distance(T=int)
    for tables, scale in p.table_scales():
        if p.count_family == "gaussian":  # the discrete Gaussian, under zCDP already
            noisy = cell >> dp.m.then_gaussian(scale=scale)
        else:
            noisy = convert(cell >> dp.m.then_laplace(scale=scale))
        total += 2 * tables * noisy.map(1)
    if p.accounting == "zcdp":
        return zcdp_epsilon(float(total), p.conversion_delta)
    return float(total)


def gaussian_affordable(sigma: float) -> bool:
    """Whether a discrete Gaussian of ``sigma`` draws within ``GAUSSIAN_MOST_THRESHOLDS``
    at the finest precision a plan may take (its tail 2^-128 reaches furthest)."""
    reach = sigma * math.sqrt(2.0 * math.log(2.0) * (PRECISIONS[-1][0] + 1)) + 2.0
    return reach <= GAUSSIAN_MOST_THRESHOLDS


def _with_precision(base: DPPlan, delta_share: float) -> DPPlan | None:
    """``base`` at the cheapest precision whose delta_p is within ``delta_share`` of delta."""
    for precision, extra in PRECISIONS:
        candidate = replace(base, precision=precision, extra_frac=extra)
        if candidate.precision_delta <= base.delta * delta_share:
            return candidate
    return None


def stop_option(p: DPPlan) -> bool:
    """Whether K2's choices keep their "stop" option. Where full families' counts stay
    useful (``USEFUL_COUNT``), a choice between candidates only spends the same budget
    without the costliest mistake: under noise of hundreds of nats (asia at epsilon 1:
    about 800), "stop" often beats a parent worth a few hundred, and the missing edge
    costs far more 2-way TVD than a weak extra parent does (docs/decisions/
    dp-small-networks.md). Where they are not (a small n epsilon, large domains), the
    extra cells would drown in noise, and "stop" stays; and on a network of many
    variables a forced parent is mostly one that carries nothing."""
    return p.family_usefulness < USEFUL_COUNT or p.n_variables > FULL_FAMILIES_MOST_VARIABLES


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
    bins_cuts: int = 0,
    release: str = "network",
) -> DPPlan:
    """The job's plan, or ValueError naming what cannot be held. ``bins_cuts`` private cut
    points (``dp.quantiles``) take ``bins_share`` of epsilon first; of the two accountings
    the rest takes ``zcdp`` when that gives every count no more noise and every choice no
    less epsilon than ``pure``, else ``pure`` (few variables, or a small delta); K2 keeps
    its stop option by ``stop_option``."""
    if not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise ValueError(f"epsilon must lie in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]")
    if bins_cuts:
        network = plan(
            epsilon * (1.0 - bins_share(bins_cuts)),
            n_records=n_records,
            cardinalities=cardinalities,
            max_parents=max_parents,
            mode=mode,
            score_frac=score_frac,
            structure_share=structure_share,
            delta=delta,
            release=release,
        )
        spent = epsilon * bins_share(bins_cuts)
        return replace(network, bins_cuts=int(bins_cuts), bins_epsilon=spent)
    if not 0.0 < structure_share < 1.0:
        raise ValueError("the structure's share of the budget must lie strictly between 0 and 1")
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must lie in (0, 1)")
    n_variables = len(cardinalities)
    if release in MARGINAL_RELEASES:
        base = pair_base(epsilon, n_records, list(cardinalities), structure_share, delta, release)
    else:
        base = DPPlan(
            epsilon=float(epsilon),
            delta=float(delta),
            structure_share=float(structure_share),
            n_records=int(n_records),
            n_variables=n_variables,
            decisions=k2_decisions(n_variables, max_parents),
            score_sensitivity=score_sensitivity(mode, n_records, max(cardinalities)),
            cells_bound=largest_cells(list(cardinalities), max_parents),
            largest_options=n_variables,  # stop and at most |V| - 1 candidates
            score_frac=score_frac,
        )
    pure = _with_precision(base, 1.0)
    zcdp = replace(
        base,
        accounting="zcdp",
        rho=largest_rho(epsilon, delta * (1.0 - PRECISION_DELTA_SHARE)),
    )
    if release in MARGINAL_RELEASES and gaussian_affordable(zcdp.one_way_scale):
        zcdp = replace(zcdp, count_family="gaussian")
    zcdp = _with_precision(zcdp, PRECISION_DELTA_SHARE)
    if zcdp is not None and (
        pure is None
        # the Gaussian counts, even where pure DP would give the choices more epsilon: on the
        # five small bundled networks their release was measured better (docs/decisions/
        # dp-gaussian-counts.md)
        or zcdp.count_family == "gaussian"
        or (zcdp.count_scale <= pure.count_scale and zcdp.decision_epsilon >= pure.decision_epsilon)
    ):
        chosen = zcdp
    elif pure is not None:
        chosen = pure
    else:
        worst = replace(base, precision=PRECISIONS[-1][0], extra_frac=PRECISIONS[-1][1])
        raise ValueError(
            f"at epsilon {epsilon:g} the noise's finite precision gives delta "
            f"{worst.precision_delta:.2g}, above the allowed {delta:.2g} (a smaller epsilon or a larger delta)"
        )
    spent = opendp_epsilon(chosen)
    if spent > epsilon * (1 + EPSILON_ROUNDING):
        raise ValueError(
            f"OpenDP's privacy maps give epsilon {spent:.6g} for this plan, above {epsilon:g}"
        )
    if release in MARGINAL_RELEASES:
        return replace(chosen, stop_option=False)  # pairs chosen: no "stop" to choose
    return replace(chosen, stop_option=stop_option(chosen))


def adaptive_rounds_count(n_variables: int) -> int:
    """The adaptive release's rounds: ``ADAPTIVE_ROUNDS_PER_VARIABLE`` per variable, at most
    half the pairs (at least one where there is a pair): measuring every pair of a small
    network spreads the budget over tables the model needs least."""
    pairs = n_variables * (n_variables - 1) // 2
    return min(ADAPTIVE_ROUNDS_PER_VARIABLE * n_variables, max(pairs // 2, min(pairs, 1)))


def pair_base(
    epsilon: float,
    n_records: int,
    cardinalities: list[int],
    structure_share: float,
    delta: float,
    release: str,
) -> DPPlan:
    """A marginal release's plan before its accounting. Each choice picks a pair by its L1
    error against a public estimate (fixed before the choice: the 1-way release's
    independent model, or the model fitted to what is released so far), in whole counts
    (``score_frac`` 0), plus the adaptive release's public offset; replacing one record
    moves one count of the pair's table, so the utility changes by at most
    ``PAIR_ERROR_SENSITIVITY``. The noisy tables are every variable's 1-way marginal and
    the chosen pairs' 2-way ones. ``marginals`` (``dp.marginal_release``): |V| - 1 choices
    among the tree's frontier (k (|V| - k) pairs at its widest), a tree's pairs bounded by
    ``largest_cells``; ``adaptive`` (``dp.adaptive_release``): ``adaptive_rounds_count``
    choices among the pairs not yet measured (every pair at the first), bounded by the
    largest pairs. The choices score no family: ``plan``'s mode and score_frac play no part."""
    n = len(cardinalities)
    if release == "marginals":
        decisions, options = n - 1, (n // 2) * (n - n // 2)
        pair_cells = largest_cells(cardinalities, 1)
    else:
        decisions, options = adaptive_rounds_count(n), n * (n - 1) // 2
        products = (a * b for i, a in enumerate(cardinalities) for b in cardinalities[i + 1 :])
        pair_cells = sum(sorted(products, reverse=True)[:decisions])
    return DPPlan(
        epsilon=float(epsilon),
        delta=float(delta),
        structure_share=float(structure_share),
        n_records=int(n_records),
        n_variables=n,
        decisions=decisions,
        score_sensitivity=PAIR_ERROR_SENSITIVITY,
        cells_bound=sum(cardinalities) + pair_cells,
        largest_options=max(options, 1),
        score_frac=0,
        release=release,
        one_way_weight=ONE_WAY_WEIGHT[release],
    )
