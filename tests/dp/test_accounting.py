"""The privacy plan of a DP job (ppbn/dp/accounting.py): sensitivities, budget split, the
finite-precision delta, and OpenDP's maps agreeing with the plan."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppbn.bn.scores import family_score
from ppbn.dp.accounting import k2_decisions, largest_cells, opendp_epsilon, plan, score_sensitivity

ALARMISH = [2, 3, 4, 3, 2, 4, 3] * 5 + [2, 2]


def _plan(epsilon, **kw):
    args = dict(n_records=20000, cardinalities=ALARMISH, max_parents=2, mode="exact", score_frac=49)
    return plan(epsilon, **{**args, **kw})


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 5.0, 20.0])
def test_the_split_adds_up_and_opendp_agrees(epsilon):
    p = _plan(epsilon)
    assert math.isclose(p.structure_epsilon + p.parameters_epsilon, epsilon)
    assert math.isclose(p.decision_epsilon * p.decisions, p.structure_epsilon)
    assert math.isclose(opendp_epsilon(p), epsilon, rel_tol=1e-9)
    assert p.delta_bound <= 1e-9
    assert p.count_scale == pytest.approx(2 * len(ALARMISH) / p.parameters_epsilon)


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
