"""The PRAM score oracle for the one K2 driver, and the PRAM learner (Ma 2006, Sec. 5.5).

The oracle scores a family on counts estimated from one randomized copy of the data
(docs/conventions.md, "One randomized copy": structure learning reuses one copy): the moment estimate clipped at 0, or the
EM estimate. Estimation errors break conditional independences and K2 then adds extra
links (Sec. 5.5.2). The two remedies of the paper:

- BIC/MDL with the penalty multiplied by C* (``mode="bic"``, ``c_star``); ppbn's BIC
  uses ln N / 2 per free parameter (``ppbn.bn.scores``).
- A threshold eta for the Bayesian score. The paper's rule "add only if eta P_new > P_old"
  (dissertation) or "P_new > eta P_old" (paper) compares raw probabilities; on the log
  scale a constant factor is a constant shift ln(1/eta), which is negligible next to log
  scores of order -10^4 and cannot be what the experiments (eta = 0.97..0.99) used. We
  read it (docs/conventions.md, "Eta rule") as a relative rule on log scores:
  add the winning candidate only if ln P_new - ln P_old > ln(1/eta) * |ln P_old|,
  i.e. the log score must improve by more than a fraction ln(1/eta) (about 1 - eta).
  eta = 1 is plain K2. The rule applies to whatever mode is chosen; the winner itself is
  still picked by the shared tie rule ``choose_candidate`` with ``tau``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.bn.hc import HCResult
from ppbn.bn.k2 import DEFAULT_TAU, CountsOracle, K2Result, k2_search
from ppbn.bn.learn import HCOptions, run_search
from ppbn.bn.model import BayesNet
from ppbn.bn.params import estimate_parameters
from ppbn.bn.scores import DEFAULT_ESS, SCORE_MODES
from ppbn.randomized.constants import COUNT_METHODS
from ppbn.randomized.pram.estimators import PramEstimator
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme


def eta_margin(current: float, eta: float) -> float:
    """The extra score rise the eta rule demands over ``current`` (see the module docstring)."""
    return math.log(1.0 / eta) * abs(current)


class PramOracle(CountsOracle):
    """K2 oracle on PRAM-estimated counts: the plaintext oracle of ``bn.k2`` (scores, cache,
    tie rule) fed by the estimator, plus the eta rule against extra links.

    ``evaluated`` records every score computed, in order, as (child, parents, score).
    """

    def __init__(
        self,
        estimator: PramEstimator,
        mode: str = "exact",
        c_star: float = 1.0,
        eta: float = 1.0,
        counts: str = "moment",
        ess: float = DEFAULT_ESS,
    ) -> None:
        if mode not in SCORE_MODES:
            raise RandomizationError(
                f"unknown score mode {mode!r}; choose one of {', '.join(SCORE_MODES)}"
            )
        if counts not in COUNT_METHODS:
            raise RandomizationError(f"unknown count estimator {counts!r}; choose moment or em")
        if not 0.0 < eta <= 1.0:
            raise RandomizationError(f"eta must be in (0, 1], got {eta}")
        if not c_star > 0:
            raise RandomizationError(f"C* must be positive, got {c_star}")
        super().__init__(
            lambda variables: estimator.counts(variables, counts), mode, c_star, ess=ess
        )
        self.estimator = estimator
        self.eta = eta
        self.counts = counts

    def accepts(self, current: float, best: float) -> bool:
        """The eta rule: the best score must also rise by ln(1/eta) |current|."""
        return self.eta >= 1.0 or best - current > eta_margin(current, self.eta)


@dataclass
class PramLearned:
    search: K2Result | HCResult
    network: BayesNet
    oracle: PramOracle


def learn_pram(
    names: Sequence[str],
    states: Mapping[str, tuple[str, ...]],
    randomized: np.ndarray,
    scheme: RandomizationScheme,
    max_parents: int,
    mode: str,
    tau: float = DEFAULT_TAU,
    order: Sequence[str] | None = None,
    c_star: float = 1.0,
    eta: float = 1.0,
    counts: str = "moment",
    pseudo_count: float = 0.0,
    progress: Callable[[int, int, str], None] | None = None,
    search: str = "k2",
    hc: HCOptions | None = None,
    ess: float = DEFAULT_ESS,
) -> PramLearned:
    """Structure (K2 on estimated counts, or hill climbing: ``search="hc"`` with ``hc``,
    the reference learner's semantics; the eta rule applies to K2 only) and parameters
    from randomized data.

    ``randomized`` has one column per name (in ``names`` order) as received by the
    learner: the data miner in setup II, the child's owner in setup I (its own columns
    unrandomized, i.e. not in ``scheme``'s blocks). The CPTs are the estimated counts
    (clipped at 0, or EM) normalized per parent configuration (Sec. 5.4).
    """
    estimator = PramEstimator(names, randomized, scheme)
    oracle = PramOracle(estimator, mode, c_star, eta, counts, ess)
    try:
        found = run_search(search, names, oracle, max_parents, tau, order, hc, progress)
    except ValueError as exc:  # an unknown search, a bad start DAG or list
        raise RandomizationError(str(exc)) from None
    network = estimate_parameters(
        tuple(names), states, found.parents, lambda vs: estimator.counts(vs, counts), pseudo_count
    )
    return PramLearned(found, network, oracle)


def setup_one_view(
    names: Sequence[str],
    owner: Mapping[str, str],
    party: str,
    codes: np.ndarray,
    randomized: np.ndarray,
    scheme: RandomizationScheme,
) -> tuple[np.ndarray, RandomizationScheme]:
    """What ``party`` holds in setup I (Sec. III-A): its own columns as they are, the other
    party's columns randomized, and the other party's blocks of ``scheme``.

    ``codes`` and ``randomized`` are the joined original and randomized data (columns in
    ``names`` order). A block may not mix the two parties' variables: only variables of
    one party can be randomized simultaneously (Ma 2006, Sec. 5.3).
    """
    own = np.array([owner[v] == party for v in names])
    for block in scheme.blocks:
        parties = {owner[v] for v in block.variables}
        if len(parties) > 1:
            raise RandomizationError(
                f"randomization block {block.name} mixes the variables of two parties"
            )
    view = np.where(own[None, :], codes, randomized)
    others = [b for b in scheme.blocks if owner[b.variables[0]] != party]
    return view, RandomizationScheme(scheme.cardinalities, others)


@dataclass
class OwnerOracle:
    """Setup I: each family is scored by the party that owns the child, on its own view."""

    oracles: Mapping[str, PramOracle]
    owner: Mapping[str, str]

    def best_parent(
        self, child: str, parents: tuple[str, ...], candidates: tuple[str, ...], tau: float
    ) -> str | None:
        return self.oracles[self.owner[child]].best_parent(child, parents, candidates, tau)


def learn_pram_setup_one(
    names: Sequence[str],
    states: Mapping[str, tuple[str, ...]],
    owner: Mapping[str, str],
    codes: np.ndarray,
    randomized: np.ndarray,
    scheme: RandomizationScheme,
    max_parents: int,
    mode: str,
    tau: float = DEFAULT_TAU,
    order: Sequence[str] | None = None,
    c_star: float = 1.0,
    eta: float = 1.0,
    counts: str = "moment",
    pseudo_count: float = 0.0,
) -> tuple[K2Result, BayesNet, dict[str, PramOracle]]:
    """Setup I simulated in one process: structure and CPTs, each family learned by the
    owner of its child from its setup-I view. Returns the search, the network and the
    per-party oracles (whose ``evaluated`` lists show who scored what).
    """
    names = tuple(names)
    parties = sorted(set(owner[v] for v in names))
    oracles = {}
    for party in parties:
        view, view_scheme = setup_one_view(names, owner, party, codes, randomized, scheme)
        oracles[party] = PramOracle(
            PramEstimator(names, view, view_scheme), mode, c_star, eta, counts
        )
    search = k2_search(tuple(order or names), max_parents, OwnerOracle(oracles, owner), tau)

    def family_counts(variables: tuple[str, ...]) -> np.ndarray:
        return oracles[owner[variables[-1]]].estimator.counts(variables, counts)

    network = estimate_parameters(names, states, search.parents, family_counts, pseudo_count)
    return search, network, oracles
