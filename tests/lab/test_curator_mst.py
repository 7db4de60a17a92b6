"""MST run by a trusted curator (ppbn/lab/curator_mst.py): at a huge epsilon it finds the
true tree of a chain and its synthetic records are as good as a fresh sample; at a tiny one
they are much worse; the budget is spent as stated."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.dp.accounting import largest_rho
from ppbn.dp.graphical_fit import synthetic_codes
from ppbn.lab.curator_mst import (
    L2_SENSITIVITY,
    exponential_choice,
    gaussian_rho,
    mst_release,
)
from ppbn.lab.dp_utility import tvd_2way

NAMES = ["a", "b", "c", "d"]
CARDS = [3, 3, 3, 3]
CHAIN = {("a", "b"), ("b", "c"), ("c", "d")}


def chain(rows: int, seed: int) -> np.ndarray:
    """a -> b -> c -> d: each variable copies the one before with probability 0.8, else a
    uniform state."""
    rng = np.random.default_rng(seed)
    codes = np.zeros((rows, 4), dtype=np.int64)
    codes[:, 0] = rng.integers(0, 3, rows)
    for j in range(1, 4):
        keep = rng.random(rows) < 0.8
        codes[:, j] = np.where(keep, codes[:, j - 1], rng.integers(0, 3, rows))
    return codes


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return chain(3000, 1)


def test_a_huge_epsilon_finds_the_chain_and_its_marginals(data):
    release = mst_release(NAMES, CARDS, data, 1000.0, 1e-9, np.random.default_rng(0))
    assert {tuple(sorted(edge)) for edge in release.cliques} == CHAIN
    assert release.rho == pytest.approx(largest_rho(1000.0, 1e-9), rel=1e-9)
    synth = synthetic_codes(release.model, NAMES, 3000, 5)
    fresh = tvd_2way(data, chain(3000, 2), CARDS)  # two samples of the truth
    assert tvd_2way(data, synth, CARDS) < 2 * fresh + 0.01


def test_a_tiny_epsilon_is_much_worse(data):
    good = mst_release(NAMES, CARDS, data, 1000.0, 1e-9, np.random.default_rng(0))
    bad = mst_release(NAMES, CARDS, data, 0.01, 1e-9, np.random.default_rng(0))
    assert bad.rho <= largest_rho(0.01, 1e-9) * (1 + 1e-12)
    tvd_good = tvd_2way(data, synthetic_codes(good.model, NAMES, 3000, 5), CARDS)
    tvd_bad = tvd_2way(data, synthetic_codes(bad.model, NAMES, 3000, 5), CARDS)
    assert tvd_bad > 3 * tvd_good


def test_the_mechanisms_costs():
    assert gaussian_rho(2.0) == pytest.approx(L2_SENSITIVITY**2 / 8.0)
    rng = np.random.default_rng(3)
    picks = [exponential_choice(np.array([0.0, 0.0, 1e6]), 1.0, rng) for _ in range(20)]
    assert picks == [2] * 20  # a score far ahead always wins
    picks = {exponential_choice(np.zeros(3), 1.0, rng) for _ in range(60)}
    assert picks == {0, 1, 2}  # equal scores: uniform
    with pytest.raises(ValueError, match="two variables"):
        mst_release(["a"], [2], np.zeros((5, 1), dtype=np.int64), 1.0, 1e-9, rng)
