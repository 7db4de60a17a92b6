"""AIM run by a trusted curator on the joined table: one of ``ppbn bench dp``'s anchors.

AIM (McKenna, Mullins, Sheldon and Miklau 2022, "AIM: an adaptive and iterative mechanism
for differentially private synthetic data", PVLDB 15(11)) answers a workload of marginals
(here every 2-way marginal, weight 1; ``way=3``: every 3-way one, the paper's
experiments' workload) adaptively:

1. every 1-way marginal is measured with Gaussian noise of sigma_0 = sqrt(T / (2 alpha rho))
   (T = 16 d rounds planned for d variables, alpha = 0.9), and a model fitted to them;
2. each round picks a candidate r (the workload and every subset of its marginals) by the
   exponential mechanism at epsilon_t = sqrt(8 (1 - alpha) rho / T) with the score
   w_r (||M_r(D) - M_r(p)||_1 - sqrt(2 / pi) sigma_t n_r): how far the current model p is
   from the data on r, less the L1 error a measurement of r's n_r cells would itself carry,
   weighted by w_r, the workload's overlap with r (sum over workload marginals s of
   |r & s|); measures r with Gaussian noise of sigma_t and refits the model;
3. annealing: when the refitted model moved less on r than that expected error, sigma is
   halved and epsilon doubled (a round then costs four times more); when what is left is at
   most two rounds' cost, the last round spends all of it (alpha to the measurement);
4. model size: a candidate is allowed only while the junction tree of the model with it
   stays within (rho spent / rho) * 80 MB (mbi's ``hypothetical_model_size``; the paper's
   MAX-SIZE); the bundled networks never reach it.

Workload. 2-way by default, by measurement: on asia (10,000 records, epsilon 1, 8
rounds, 2 busy cores) the 3-way workload took 56 s against 43 s for 2-way TVD 0.0085 against
0.0087 and 3-way TVD 0.014 against 0.017; the rounds, not the workload, bound the time.

Departures. The refit starts afresh each round (``graphical_fit.fit_marginals`` takes no
warm start; the result is the same optimum, it only costs time). The model's marginals for
the scores are read from its full joint distribution in numpy (``graphical_fit.joint_counts``):
private-pgm's own out-of-model inference compiles once per marginal, minutes per round on
two cores. ``max_rounds`` caps the rounds for the bench's time: the 1-way measurements
keep the paper's share, the rest is planned for ``max_rounds`` rounds instead of 16 d
(else the capped rounds would spend a sliver each and the last one nearly all; the last
takes two shares, as the paper's last round does), and the round that reaches the cap
spends what is left, so the release is still exactly rho-zCDP. Neighbours and
sensitivities are those of ``ppbn.lab.curator_mst`` (ppbn's: one record's values changed).

    release = aim_release(["a", "b"], [2, 3], codes, 1.0, 1e-9, np.random.default_rng(0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ppbn.dp.accounting import largest_rho
from ppbn.dp.graphical_fit import Measured, fit_marginals, joint_counts, load_mbi, project
from ppbn.lab.curator_mst import (
    L2_SENSITIVITY,
    CuratorRelease,
    clique_counts,
    exponential_choice,
    gaussian_rho,
    measure,
)

ALPHA = 0.9  # the share of each round's budget for the measurement
ROUNDS_PER_VARIABLE = 16  # T = 16 d
MAX_SIZE_MB = 80.0
ERROR_PER_CELL = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|


@dataclass(frozen=True)
class Round:
    """One round's spending: the exponential mechanism at ``epsilon`` (None for the 1-way
    measurements before the rounds) and the Gaussian of ``stddev`` on ``clique``."""

    clique: tuple[str, ...]
    stddev: float
    epsilon: float | None


@dataclass(frozen=True)
class AimRelease(CuratorRelease):
    """MST's release plus the ledger of every measurement, to check the accounting."""

    ledger: tuple[Round, ...] = ()


def ledger_rho(ledger: Sequence[Round]) -> float:
    """The zCDP of the ledger's measurements and choices, composed (they add)."""
    return sum(gaussian_rho(r.stddev) + (r.epsilon or 0.0) ** 2 / 8.0 for r in ledger)


def workload(names: Sequence[str], way: int) -> list[tuple[str, ...]]:
    """Every ``way``-way marginal, in column order."""
    return list(combinations(names, way))


def aim_release(
    names: Sequence[str],
    cards: Sequence[int],
    codes: np.ndarray,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    way: int = 2,
    max_rounds: int | None = None,
) -> AimRelease:
    """AIM at (``epsilon``, ``delta``) on ``codes`` (records x variables), its workload every
    ``way``-way marginal, at most ``max_rounds`` rounds (None: until the budget is spent)."""
    names = list(names)
    if len(names) < way:
        raise ValueError(f"a {way}-way workload needs at least {way} variables")
    mbi = load_mbi()
    rho = largest_rho(epsilon, delta)
    domain = dict(zip(names, (int(c) for c in cards), strict=True))
    space = mbi.Domain(names, tuple(domain.values()))
    n = codes.shape[0]
    marginals = workload(names, way)
    candidates = sorted(
        {sub for clique in marginals for k in range(1, way + 1) for sub in combinations(clique, k)},
        key=lambda c: (len(c), [names.index(v) for v in c]),
    )
    weight = {r: sum(len(set(r) & set(s)) for s in marginals) for r in candidates}
    cells = {r: int(np.prod([domain[v] for v in r])) for r in candidates}
    planned = ROUNDS_PER_VARIABLE * len(names)
    sigma = L2_SENSITIVITY * math.sqrt(planned / (2.0 * ALPHA * rho))
    eps = math.sqrt(8.0 * (1.0 - ALPHA) * rho / planned)
    ledger = [Round((v,), sigma, None) for v in names]
    measured: list[Measured] = [measure(codes, names, cards, (v,), sigma, rng) for v in names]
    model = fit_marginals(domain, measured, n)
    joint = joint_counts(model, names)
    truth = {r: clique_counts(codes, names, cards, r) for r in candidates}
    spent = ledger_rho(ledger)
    if max_rounds is not None and max_rounds < planned:
        shares = max_rounds + 1  # the rest over the capped rounds, the last one taking two
        sigma = L2_SENSITIVITY * math.sqrt(shares / (2.0 * ALPHA * (rho - spent)))
        eps = math.sqrt(8.0 * (1.0 - ALPHA) * (rho - spent) / shares)
    rounds, last = 0, False
    while not last:
        rounds += 1
        round_cost = gaussian_rho(sigma) + eps**2 / 8.0
        last = rho - spent <= 2.0 * round_cost or rounds == max_rounds
        if last:
            rest = rho - spent  # the last round: alpha of it to the measurement
            sigma = L2_SENSITIVITY / math.sqrt(2.0 * ALPHA * rest)
            eps = math.sqrt(8.0 * (1.0 - ALPHA) * rest)
        spent += gaussian_rho(sigma) + eps**2 / 8.0
        limit = spent / rho * MAX_SIZE_MB
        cliques = [m.clique for m in measured]
        allowed = [
            r
            for r in candidates
            if r in cliques
            or mbi.junction_tree.hypothetical_model_size(space, [*cliques, r]) <= limit
        ]
        scores = np.array(
            [
                weight[r]
                * (
                    np.abs(truth[r] - project(joint, names, r)).sum()
                    - ERROR_PER_CELL * sigma * cells[r]
                )
                for r in allowed
            ]
        )
        chosen = allowed[exponential_choice(scores / max(weight.values()), eps, rng)]
        ledger.append(Round(chosen, sigma, eps))
        measured.append(measure(codes, names, cards, chosen, sigma, rng))
        before = project(joint, names, chosen)
        model = fit_marginals(domain, measured, n)
        joint = joint_counts(model, names)
        if (
            np.abs(project(joint, names, chosen) - before).sum()
            <= ERROR_PER_CELL * sigma * cells[chosen]
        ):
            sigma, eps = sigma / 2.0, eps * 2.0
    chosen_cliques = tuple(
        dict.fromkeys(r.clique for r in ledger[len(names) :] if len(r.clique) > 1)
    )
    return AimRelease(model, chosen_cliques, ledger_rho(ledger), tuple(ledger))
