"""The privacy plan of a DP job (ppbn/dp/accounting.py): sensitivities, budget split, the
finite-precision delta, the choice of pure or zCDP accounting, and OpenDP's maps agreeing
with the plan."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ppbn.bn.scores import family_score
from ppbn.dp.accounting import (
    FULL_FAMILIES_MOST_VARIABLES,
    USEFUL_COUNT,
    k2_decisions,
    largest_cells,
    largest_rho,
    opendp_epsilon,
    plan,
    score_sensitivity,
    zcdp_epsilon,
)

ALARMISH = [2, 3, 4, 3, 2, 4, 3] * 5 + [2, 2]


def _plan(epsilon, **kw):
    args = dict(n_records=20000, cardinalities=ALARMISH, max_parents=2, mode="exact", score_frac=49)
    return plan(epsilon, **{**args, **kw})


ASIAISH = [2] * 8


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 5.0, 20.0])
def test_pure_split_adds_up_and_opendp_agrees(epsilon):
    """Few variables: pure composition gives less noise, and its parts sum to epsilon."""
    p = _plan(epsilon, cardinalities=ASIAISH)
    assert p.accounting == "pure"
    spent = p.decision_epsilon * p.decisions + 2 * len(ASIAISH) / p.count_scale
    assert math.isclose(spent, epsilon)
    assert math.isclose(p.decision_epsilon * p.decisions, 0.3 * epsilon)
    assert math.isclose(opendp_epsilon(p), epsilon, rel_tol=1e-9)
    assert p.delta_bound <= 1e-9 and p.conversion_delta == 0.0


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 5.0, 20.0])
def test_zcdp_split_adds_up_and_opendp_agrees(epsilon):
    """Many variables: zCDP; rho splits 0.3 / 0.7, and OpenDP converts it to epsilon."""
    p = _plan(epsilon)
    assert p.accounting == "zcdp"
    structure = p.decisions * p.decision_epsilon**2 / 2
    counts = len(ALARMISH) / p.count_scale**2  # 2 |V| cells, 1 / (2 b^2) each
    assert math.isclose(structure + counts, p.rho)
    assert math.isclose(structure, 0.3 * p.rho)
    assert math.isclose(zcdp_epsilon(p.rho, p.conversion_delta), epsilon, rel_tol=1e-9)
    assert math.isclose(opendp_epsilon(p), epsilon, rel_tol=1e-9)
    assert p.precision_delta <= 1e-10 and p.delta_bound <= 1e-9
    assert opendp_epsilon(replace(p, rho=p.rho * 1.05)) > epsilon * 1.01  # OpenDP sees more


def _renyi_conversion(rho, delta):
    """rho-zCDP to (epsilon, delta) by Canonne, Kamath and Steinke 2020 (Prop. 12),
    minimised over a fine grid of orders alpha: an independent check of OpenDP's."""
    alpha = np.concatenate([np.linspace(1.001, 3, 4000), np.geomspace(3.001, 1e5, 40000)])
    values = alpha * rho + np.log1p(-1 / alpha) - (np.log(delta) + np.log(alpha)) / (alpha - 1)
    return float(values.min())


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.0145, 0.3, 5.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-9, 1e-12])
def test_opendps_conversion_is_the_renyi_one(rho, delta):
    assert zcdp_epsilon(rho, delta) == pytest.approx(_renyi_conversion(rho, delta), rel=1e-5)
    assert zcdp_epsilon(rho, delta) >= rho


def test_largest_rho_is_the_largest():
    rho = largest_rho(1.0, 1e-9)
    assert zcdp_epsilon(rho, 1e-9) <= 1.0 < zcdp_epsilon(rho * (1 + 1e-9), 1e-9)


@pytest.mark.parametrize(
    ("cards", "chosen"), [(ALARMISH, "zcdp"), (ASIAISH, "pure"), ([3] * 20, "zcdp")]
)
def test_the_plan_takes_the_accounting_with_less_noise(cards, chosen):
    p = _plan(1.0, cardinalities=cards)
    other = "pure" if chosen == "zcdp" else "zcdp"
    rho = largest_rho(1.0, 0.9e-9) if other == "zcdp" else 0.0
    alternative = replace(p, accounting=other, rho=rho)
    assert p.accounting == chosen
    if chosen == "zcdp":  # less noise in every count and more epsilon for every choice
        assert p.count_scale < alternative.count_scale
        assert p.decision_epsilon > alternative.decision_epsilon
    else:
        assert p.count_scale < alternative.count_scale


def test_zcdp_halves_the_count_noise_of_an_alarm_sized_network():
    """The figure docs/security-dp.md quotes: 37 variables, u = 2, epsilon 1."""
    p = _plan(1.0)
    pure = 2 * len(ALARMISH) / 0.7
    assert p.count_scale < 0.6 * pure
    assert p.decision_epsilon > 2 * 0.3 / p.decisions


def test_full_families_where_their_counts_stay_useful():
    """Small networks with enough records per unit of noise drop K2's stop option; a small
    n epsilon, large domains or many variables keep it. The privacy spent does not move."""
    small = _plan(1.0, n_records=10000, cardinalities=ASIAISH)
    assert small.family_usefulness >= USEFUL_COUNT and not small.stop_option
    assert small.as_dict()["stop_option"] is False
    assert small.family_usefulness == pytest.approx(10000 / (8 * small.count_scale))
    for keeps in (_plan(1.0, n_records=10000), _plan(0.1, n_records=2000, cardinalities=ASIAISH)):
        assert keeps.family_usefulness < USEFUL_COUNT and keeps.stop_option
    many = _plan(1.0, n_records=10000, cardinalities=[2] * (FULL_FAMILIES_MOST_VARIABLES + 1))
    assert many.family_usefulness >= USEFUL_COUNT and many.stop_option
    assert opendp_epsilon(small) <= 1.0 * (1 + 1e-9)
    assert replace(small, stop_option=True).count_scale == small.count_scale


def test_decisions_and_cells_bound_k2():
    assert k2_decisions(5, 2) == 0 + 1 + 2 + 2 + 2
    assert k2_decisions(4, 0) == 0
    assert largest_cells([2, 3, 4], 1) == 2 * 4 + 3 * 4 + 4 * 3


def test_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="epsilon must lie"):
        _plan(50.0)
    with pytest.raises(ValueError, match="share"):
        _plan(1.0, structure_share=1.0)
    with pytest.raises(ValueError, match="no stated sensitivity"):
        _plan(1.0, mode="yw")
    with pytest.raises(ValueError, match="delta"):
        _plan(20.0, delta=1e-40)
    with pytest.raises(ValueError, match="accounting must be one of pure, zcdp"):
        replace(_plan(1.0), accounting="renyi")
    with pytest.raises(ValueError, match="positive rho"):
        replace(_plan(1.0), rho=0.0)


def _neighbour_changes(mode, n, d, q, rng, trials=300):
    """The largest change of one family score when one record of a random table moves."""
    worst = 0.0
    for _ in range(trials):
        counts = rng.multinomial(n, rng.dirichlet(np.ones(q * d) * 0.3)).reshape(q, d)
        source = tuple(rng.choice(np.argwhere(counts > 0)))
        target = (rng.integers(q), rng.integers(d))
        moved = counts.copy()
        moved[source] -= 1
        moved[target] += 1
        change = abs(family_score(counts, mode) - family_score(moved, mode))
        worst = max(worst, change)
    return worst


@pytest.mark.parametrize("mode", ["exact", "bic"])
def test_the_stated_sensitivity_bounds_every_move(mode):
    """Random tables, one record moved: the score never changes by more than Delta; the
    bound is nearly reached by a record that leaves a singleton cell of a large row for a
    large cell of another row (so the bound is not loose by orders)."""
    rng = np.random.default_rng(5)
    n, d, q = 200, 3, 4
    bound = score_sensitivity(mode, n, d)
    assert _neighbour_changes(mode, n, d, q, rng) <= bound
    half = n // 2
    extreme = np.array([[half, 1, 0], [n - half - 1, 0, 0]])
    moved = np.array([[half, 0, 0], [n - half, 0, 0]])
    change = abs(family_score(extreme, mode) - family_score(moved, mode))
    assert change <= bound and change > 0.6 * bound
