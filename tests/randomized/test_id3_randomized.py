"""ID3 on randomized data (Ma 2006, Sec. 7.2): gains and trees against Quinlan's example and
a brute-force ID3 on records; node estimates against the dissertation's indexing."""

import numpy as np
import pytest

from ppbn.errors import UserError
from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.id3 import entropy, fit_id3, information_gain
from ppbn.randomized.perturb.response import scheme_for
from ppbn.randomized.pram.operators import RandomSource

# Quinlan's Saturday mornings (the tree of Fig. 7.6): outlook sunny/overcast/rain,
# temperature hot/mild/cool, humidity high/normal, wind weak/strong, play no/yes.
TENNIS = np.array(
    [
        [0, 0, 0, 0, 0],
        [0, 0, 0, 1, 0],
        [1, 0, 0, 0, 1],
        [2, 1, 0, 0, 1],
        [2, 2, 1, 0, 1],
        [2, 2, 1, 1, 0],
        [1, 2, 1, 1, 1],
        [0, 1, 0, 0, 0],
        [0, 2, 1, 0, 1],
        [2, 1, 1, 0, 1],
        [0, 1, 1, 1, 1],
        [1, 1, 0, 1, 1],
        [1, 0, 1, 0, 1],
        [2, 1, 0, 1, 0],
    ]
)
COLUMNS = ["outlook", "temperature", "humidity", "wind", "play"]
CARDS = [3, 3, 2, 2, 2]


def _plain(codes, columns=COLUMNS, cards=CARDS):
    return RandomizedData.plain(columns, codes, cards)


def test_entropy_and_gain_closed_forms():
    assert entropy(np.array([9, 5])) == pytest.approx(0.940, abs=5e-4)
    assert entropy(np.array([7, 0])) == 0.0
    assert entropy(np.array([0.0, 0.0])) == 0.0
    assert entropy(np.array([1, 1, 1, 1])) == pytest.approx(2.0)
    # a negative estimate counts as 0
    assert information_gain(
        np.array([5.0, 5.0]), np.array([[5.0, -1.0], [0.0, 5.0]])
    ) == pytest.approx(1.0)


def test_quinlan_gains_and_tree():
    """Mitchell's figures: Gain(outlook) 0.246, humidity 0.151, wind 0.048, temperature 0.029;
    the tree: outlook; sunny -> humidity, overcast -> yes, rain -> wind."""
    data = _plain(TENNIS)
    node = data.estimate(["play"])
    gains = {a: information_gain(node, data.estimate([a, "play"])) for a in COLUMNS[:4]}
    assert gains["outlook"] == pytest.approx(0.2467, abs=1e-4)
    assert gains["humidity"] == pytest.approx(0.1518, abs=1e-4)
    assert gains["wind"] == pytest.approx(0.0481, abs=1e-4)
    assert gains["temperature"] == pytest.approx(0.0292, abs=1e-4)
    tree = fit_id3(data, "play")
    root = tree.root
    assert root.attribute == "outlook"
    sunny, overcast, rain = root.children
    assert sunny.attribute == "humidity" and [c.label for c in sunny.children] == [0, 1]
    assert overcast.attribute is None and overcast.label == 1
    assert rain.attribute == "wind" and [c.label for c in rain.children] == [1, 0]
    assert np.array_equal(tree.predict(data), TENNIS[:, -1])
    assert tree.nodes() == 8 and tree.depth() == 2


def _brute_force_id3(codes, attributes, cards, label_of_parent=0):
    """Textbook ID3 on the records themselves (Sec. 7.2.1), gains > 1e-12 to split."""
    y = codes[:, -1]
    counts = np.bincount(y, minlength=2).astype(float)
    label = int(np.argmax(counts)) if len(y) else label_of_parent
    if len(y) == 0 or np.count_nonzero(counts) <= 1 or not attributes:
        return (label,)
    best, best_gain = None, 1e-12
    for a in attributes:
        table = np.array([np.bincount(y[codes[:, a] == k], minlength=2) for k in range(cards[a])])
        gain = information_gain(counts, table)
        if gain > best_gain:
            best, best_gain = a, gain
    if best is None:
        return (label,)
    rest = [a for a in attributes if a != best]
    children = []
    for k in range(cards[best]):
        part = codes[codes[:, best] == k]
        children.append((label,) if len(part) < 1 else _brute_force_id3(part, rest, cards, label))
    return (label, best, tuple(children))


def _shape(node, columns):
    if node.attribute is None:
        return (node.label,)
    return (
        node.label,
        columns.index(node.attribute),
        tuple(_shape(c, columns) for c in node.children),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_plain_id3_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    cards = [3, 2, 2, 3, 2]
    columns = ["a", "b", "c", "d", "y"]
    x = np.column_stack([rng.integers(0, k, 300) for k in cards[:4]])
    y = ((x[:, 0] == 1) ^ (x[:, 1] == 1) | (rng.random(300) < 0.1)).astype(int)
    codes = np.column_stack([x, y])
    tree = fit_id3(_plain(codes, columns, cards), "y")
    assert _shape(tree.root, columns) == _brute_force_id3(codes, [0, 1, 2, 3], cards)


def test_node_estimates_follow_the_dissertations_indexing():
    """Sec. 7.2.2 example: a1 (3 states), a2 (2), a3 (3), class (2); at a1 = 3, a2 = 1 the
    class counts are T_hat(9), T_hat(10) of (a1, a2, C) and, with a3, T_hat(25..30)."""
    rng = np.random.default_rng(4)
    cards = {"a1": 3, "a2": 2, "a3": 3, "c": 2}
    codes = np.column_stack([rng.integers(0, k, 500) for k in cards.values()])
    scheme = scheme_for(cards, ["a1", "a2", "a3", "c"], p=0.25)
    data = RandomizedData(
        list(cards), scheme.randomize(codes, list(cards), RandomSource.from_seed(4)), scheme
    )
    flat = data.estimate(["a1", "a2", "c"]).reshape(-1)
    assert np.allclose(data.conditional_counts({"a1": 2, "a2": 0}, ["c"]), flat[[8, 9]])
    flat = data.estimate(["a1", "a2", "a3", "c"]).reshape(-1)
    assert np.allclose(
        data.conditional_counts({"a1": 2, "a2": 0}, ["a3", "c"]).reshape(-1), flat[24:30]
    )


def _randomized_tennis():
    codes = np.tile(TENNIS, (300, 1))
    scheme = scheme_for(dict(zip(COLUMNS, CARDS, strict=True)), COLUMNS, p=0.2)
    randomized = scheme.randomize(codes, COLUMNS, RandomSource.from_seed("tennis"))
    return RandomizedData(COLUMNS, randomized, scheme)


def test_randomized_tennis_recovers_quinlans_tree():
    """The dissertation enlarges a data set by repeating it (Sec. 7.2.3): 300 copies of
    Quinlan's 14 days, every variable (class too) randomized with p = 0.2; the tree grown
    from moment estimates splits as Quinlan's and classifies the 14 days right."""
    data = _randomized_tennis()
    tree = fit_id3(data, "play", min_count=50)
    root = tree.root
    assert root.attribute == "outlook"
    assert [c.attribute for c in root.children] == ["humidity", None, "wind"]
    assert np.array_equal(tree.predict(_plain(TENNIS)), TENNIS[:, -1])
    truth = _plain(np.tile(TENNIS, (300, 1)))
    assert root.gain == pytest.approx(
        information_gain(truth.estimate(["play"]), truth.estimate(["outlook", "play"])), abs=0.03
    )


def test_em_estimates_choose_the_same_root():
    """method="em": each node's table is estimated by EM and sliced (small trees only)."""
    tree = fit_id3(_randomized_tennis(), "play", method="em", max_depth=1)
    assert tree.root.attribute == "outlook"
    assert [c.label for c in tree.root.children][1] == 1


def test_depth_limit_and_bad_options():
    data = _plain(TENNIS)
    assert fit_id3(data, "play", max_depth=0).nodes() == 1
    assert fit_id3(data, "play", max_depth=1).depth() == 1
    with pytest.raises(UserError, match="unknown estimator"):
        fit_id3(data, "play", method="fourier")
    with pytest.raises(UserError, match="min count"):
        fit_id3(data, "play", min_count=0)
    with pytest.raises(UserError, match="class column 'nope'"):
        fit_id3(data, "nope")
