"""Utility measures of a synthetic table against the real one (ppbn/lab/dp_utility.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.bn.model import structural_hamming_distance as bn_shd
from ppbn.bn.networks import load_network, sample
from ppbn.lab.dp_utility import (
    largest_blanket,
    marginal_tvd,
    markov_blanket,
    naive_bayes_accuracy,
    structural_hamming_distance,
    tvd_2way,
    tvd_3way,
)


@pytest.fixture(scope="module")
def asia():
    truth = load_network("asia")
    return truth, sample(truth, 3000, 1), [truth.cardinality(v) for v in truth.names]


def test_a_table_against_itself_is_zero(asia):
    _, codes, cards = asia
    assert tvd_2way(codes, codes, cards) == 0.0
    assert tvd_3way(codes, codes, cards) == 0.0
    shuffled_rows = codes[np.random.default_rng(0).permutation(len(codes))]
    assert tvd_2way(codes, shuffled_rows, cards) == pytest.approx(0.0, abs=1e-12)


def test_independent_shuffles_break_the_marginals(asia):
    """Each column shuffled on its own keeps the 1-way marginals but not the joint ones."""
    _, codes, cards = asia
    rng = np.random.default_rng(1)
    shuffled = np.column_stack([rng.permutation(codes[:, j]) for j in range(codes.shape[1])])
    for j in range(len(cards)):
        assert marginal_tvd(codes, shuffled, [j], cards) == 0.0
    assert tvd_2way(codes, shuffled, cards) > 0.01
    assert tvd_3way(codes, shuffled, cards) > tvd_2way(codes, shuffled, cards)


def test_hand_computed():
    # pair (0, 1): real 00 .5, 11 .25, 10 .25; synth 00 .5, 11 .5: TVD (0 + .25 + .25) / 2
    real = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 0, 1]])
    synth = np.array([[0, 0, 0], [1, 1, 1]])
    cards = [2, 2, 2]
    assert marginal_tvd(real, synth, [0, 1], cards) == pytest.approx(0.25)
    # (0, 2): real 00 .25, 01 .25, 10 .25, 11 .25; synth 00 .5, 11 .5: TVD .5
    assert marginal_tvd(real, synth, [0, 2], cards) == pytest.approx(0.5)
    # (1, 2): real 00 .25, 01 .5, 10 .25; synth 00 .5, 11 .5: (.25 + .5 + .25 + .5) / 2
    assert marginal_tvd(real, synth, [1, 2], cards) == pytest.approx(0.75)
    assert tvd_2way(real, synth, cards) == pytest.approx((0.25 + 0.5 + 0.75) / 3)
    # the one triple: real 000, 001, 110, 101 at .25 each; synth 000 .5, 111 .5
    assert tvd_3way(real, synth, cards) == pytest.approx(0.5 * (0.25 + 0.25 + 0.25 + 0.25 + 0.5))


def test_triples_sampled_or_all(asia):
    _, codes, cards = asia
    rng = np.random.default_rng(2)
    other = sample(load_network("asia"), 500, 9)
    # asia has C(8, 3) = 56 triples: 200 asked means all of them, whatever the rng
    assert tvd_3way(codes, other, cards, 200, np.random.default_rng(5)) == tvd_3way(
        codes, other, cards, 56, rng
    )
    a = tvd_3way(codes, other, cards, 10, np.random.default_rng(3))
    assert a == tvd_3way(codes, other, cards, 10, np.random.default_rng(3))
    with pytest.raises(ValueError, match="at least 1"):
        tvd_3way(codes, other, cards, 0)


def test_shapes_are_checked(asia):
    _, codes, cards = asia
    with pytest.raises(ValueError, match="records x 8"):
        tvd_2way(codes, codes[:, :3], cards)
    with pytest.raises(ValueError, match="no records"):
        tvd_2way(codes, codes[:0], cards)


def test_shd_is_bns():
    assert structural_hamming_distance is bn_shd
    a = {"x": (), "y": ("x",), "z": ("y",)}
    b = {"x": ("y",), "y": (), "z": ()}
    assert structural_hamming_distance(a, b) == 2  # one reversed, one missing


def test_a_deterministic_target_is_predicted_exactly():
    """Column 2 is a function of column 0 (its state mod 2): every record right."""
    rng = np.random.default_rng(6)
    first = rng.integers(0, 4, 600)
    codes = np.column_stack([first, rng.integers(0, 3, 600), first % 2])
    train, test = codes[:400], codes[400:]
    assert naive_bayes_accuracy(train, test, [4, 3, 2], target=2) == 1.0
    # column 1 is noise: no better than a guess of its most common state, give or take
    assert naive_bayes_accuracy(train, test, [4, 3, 2], target=1) < 0.5


def test_the_classifier_smooths_unseen_states():
    train = np.array([[0, 0], [0, 0], [1, 1]])
    test = np.array([[2, 0], [1, 1]])  # state 2 of column 0 was never seen
    assert naive_bayes_accuracy(train, test, [3, 2], target=1) == 1.0


def test_markov_blankets():
    parents = {"a": (), "b": ("a",), "c": ("b", "d"), "d": (), "e": ("c",)}
    assert markov_blanket(parents, "b") == {"a", "c", "d"}
    assert markov_blanket(parents, "c") == {"b", "d", "e"}
    assert largest_blanket(list(parents), parents) == "b"  # b and c tie at 3: the first
    assert largest_blanket(["c", "b", "a", "d", "e"], parents) == "c"
