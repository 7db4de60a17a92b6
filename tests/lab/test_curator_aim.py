"""AIM run by a trusted curator (ppbn/lab/curator_aim.py): the rho its ledger spends,
recomputed here from the Gaussians' and the choices' parameters, is the budget and no
more; the numpy marginals its scores read agree with private-pgm's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppbn.dp.accounting import largest_rho
from ppbn.dp.graphical_fit import joint_counts, marginal, project
from ppbn.lab.curator_aim import ALPHA, aim_release, workload

NAMES = ["a", "b", "c"]
CARDS = [2, 3, 2]


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2, 800)
    b = np.where(rng.random(800) < 0.7, a, rng.integers(0, 3, 800))
    c = np.where(rng.random(800) < 0.7, b % 2, rng.integers(0, 2, 800))
    return np.column_stack([a, b, c]).astype(np.int64)


@pytest.fixture(scope="module")
def release(data):
    return aim_release(NAMES, CARDS, data, 1.0, 1e-9, np.random.default_rng(0), max_rounds=2)


def test_the_ledger_spends_the_budget_and_no_more(release):
    budget = largest_rho(1.0, 1e-9)
    # ppbn's neighbours: a Gaussian on counts of L2 sensitivity sqrt(2) costs 2 / (2 sigma^2);
    # an exponential-mechanism choice at epsilon costs epsilon^2 / 8
    spent = sum(1.0 / r.stddev**2 + (r.epsilon or 0.0) ** 2 / 8.0 for r in release.ledger)
    assert spent <= budget * (1 + 1e-12)
    assert spent == pytest.approx(budget, rel=1e-9)  # the last round spends the rest
    assert release.rho == pytest.approx(spent, rel=1e-12)
    ones, rounds = release.ledger[:3], release.ledger[3:]
    assert [r.clique for r in ones] == [("a",), ("b",), ("c",)]
    assert all(r.epsilon is None for r in ones) and len(rounds) == 2  # max_rounds
    planned = 16 * 3
    assert ones[0].stddev == pytest.approx(math.sqrt(2) * math.sqrt(planned / (2 * ALPHA * budget)))
    # capped at 2 rounds: the rest after the 1-way measurements in 3 shares, the last
    # round taking two
    rest = budget - sum(1.0 / r.stddev**2 for r in ones)
    assert rounds[0].stddev == pytest.approx(math.sqrt(2) * math.sqrt(3 / (2 * ALPHA * rest)))
    assert rounds[0].epsilon == pytest.approx(math.sqrt(8 * (1 - ALPHA) * rest / 3))
    # the last round: alpha of what was left to the Gaussian, the rest to the choice
    last = rounds[-1]
    assert (1.0 / last.stddev**2) / (last.epsilon**2 / 8.0) == pytest.approx(ALPHA / (1 - ALPHA))
    assert set(release.cliques) <= {("a", "b"), ("a", "c"), ("b", "c")}


def test_the_numpy_marginals_are_the_models(release):
    joint = joint_counts(release.model, NAMES)
    assert joint.sum() == pytest.approx(800.0)
    for clique in [("b",), ("c", "a"), ("a", "b"), ("b", "c")]:
        assert project(joint, NAMES, clique) == pytest.approx(
            marginal(release.model, clique).ravel(), rel=1e-6, abs=1e-6
        )


def test_the_workload():
    assert workload(NAMES, 2) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert workload(NAMES, 3) == [("a", "b", "c")]
    with pytest.raises(ValueError, match="at least 3 variables"):
        aim_release(["a", "b"], [2, 2], np.zeros((4, 2), dtype=np.int64), 1.0, 1e-9,
                    np.random.default_rng(0), way=3)  # fmt: skip
