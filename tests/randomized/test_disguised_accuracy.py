"""Zhan, Chang and Matwin Sec. 3.5: the accuracy on original test records, estimated from
disguised ones. Checked against the exact expectation over every randomization of a tiny
test set (brute force), against eq. 7 solved directly, and end to end in the CLI."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from ppbn.cli import main
from ppbn.randomized.perturb.disguised_accuracy import disguised_accuracy
from ppbn.randomized.perturb.response import scheme_for, warner
from ppbn.randomized.pram.operators import (
    Block,
    RandomizationError,
    RandomizationScheme,
    RandomSource,
    multi_category,
)

COLUMNS = ("a", "b", "y")


def _rule(records: np.ndarray) -> np.ndarray:
    """A fixed classifier of y from a (3 states) and b (binary)."""
    return ((records[:, 0] == 2) | (records[:, 1] == 1)).astype(int) == records[:, 2]


def _expected_estimate(codes: np.ndarray, scheme: RandomizationScheme) -> float:
    """E[estimate] over every randomization of every record, by enumeration."""
    per_record = []
    for record in codes:
        total = 0.0
        for randomized in itertools.product(*(range(scheme.cardinalities[c]) for c in COLUMNS)):
            probability = 1.0
            for j, c in enumerate(COLUMNS):
                probability *= scheme.matrix_for(c)[record[j], randomized[j]]
            if probability:
                one = np.array([randomized])
                total += probability * disguised_accuracy(_rule, one, COLUMNS, scheme).estimate
        per_record.append(total)
    return float(np.mean(per_record))


@pytest.mark.parametrize("class_randomized", [False, True])
def test_estimate_is_unbiased_by_enumeration(class_randomized):
    """A dense inverse (M-category p on a) and Warner on b (and y): E[h] = correct(u) exactly."""
    codes = np.array([[0, 0, 0], [2, 1, 1], [1, 0, 1], [2, 0, 0], [1, 1, 1]])
    blocks = [Block(("a",), (3,), multi_category(3, 0.3)), Block(("b",), (2,), warner(0.8))]
    if class_randomized:
        blocks.append(Block(("y",), (2,), warner(0.7)))
    scheme = RandomizationScheme({"a": 3, "b": 2, "y": 2}, blocks)
    truth = float(np.mean(_rule(codes)))
    assert _expected_estimate(codes, scheme) == pytest.approx(truth, abs=1e-12)


def test_two_warner_groups_solve_eq_7():
    """Zhan's construction: accuracies on S1S2 and its reversed sets, then P = M2^-1 P*."""
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 2, (400, 3))
    theta = 0.8
    scheme = scheme_for(dict.fromkeys(COLUMNS, 2), [], theta=theta, groups=[("a",), ("b", "y")])

    def rule(records):
        return (records[:, 0] ^ records[:, 1]) == records[:, 2]

    got = disguised_accuracy(rule, codes, COLUMNS, scheme)
    observed = []
    for flip_a, flip_by in itertools.product((0, 1), repeat=2):
        variant = codes.copy()
        variant[:, 0] ^= flip_a
        variant[:, 1:] ^= flip_by
        observed.append(np.mean(rule(variant)))
    m2 = np.kron(warner(theta), warner(theta))
    assert got.candidates == 4
    assert got.estimate == pytest.approx(np.linalg.solve(m2, observed)[0], abs=1e-12)


def test_identity_gives_the_plain_accuracy_and_repetitions_centre_on_it():
    rng = np.random.default_rng(5)
    codes = np.column_stack([rng.integers(0, 3, 3000), rng.integers(0, 2, (3000, 2))])
    plain = RandomizationScheme({"a": 3, "b": 2, "y": 2})
    truth = float(np.mean(_rule(codes)))
    assert disguised_accuracy(_rule, codes, COLUMNS, plain).estimate == truth
    scheme = scheme_for({"a": 3, "b": 2, "y": 2}, ["a"], p=0.2, groups=[("b", "y")])
    estimates = [
        disguised_accuracy(
            _rule, scheme.randomize(codes, COLUMNS, RandomSource.from_seed(s)), COLUMNS, scheme
        )
        for s in range(40)
    ]
    mean = np.mean([e.estimate for e in estimates])
    spread = np.mean([e.standard_error for e in estimates]) / np.sqrt(len(estimates))
    assert abs(mean - truth) < 4 * spread


def test_too_many_passes_is_one_line():
    cards = {f"x{i}": 4 for i in range(8)} | {"y": 2}
    scheme = scheme_for(cards, [f"x{i}" for i in range(8)], p=0.2)
    codes = np.zeros((3, 9), dtype=int)
    with pytest.raises(RandomizationError, match="65,536 classifier passes"):
        disguised_accuracy(lambda r: r[:, 0] == 0, codes, tuple(cards), scheme)


def _write(path, codes, names):
    frame = pd.DataFrame(np.where(codes == 1, "yes", "no"), columns=names)
    frame.to_csv(path, index=False)
    return path


def test_cli_mechanism_file_and_disguised_test(tmp_path, capsys):
    """`perturb randomize` with a mechanism file, then `perturb learn --mechanism` on the
    randomized training and test tables: the estimate from the disguised test set lands
    near the accuracy on its originals."""
    rng = np.random.default_rng(11)
    n = 6000
    y = rng.integers(0, 2, n)
    x = (rng.random((n, 3)) < 0.2 + np.array([0.6, 0.4, 0.1]) * y[:, None]).astype(int)
    names = ["a", "b", "c", "y"]
    original = _write(tmp_path / "train.csv", np.column_stack([x, y])[:4000], names)
    test = _write(tmp_path / "test.csv", np.column_stack([x, y])[4000:], names)
    mechanism = tmp_path / "mech.json"
    yes_no = ["no", "yes"]
    mechanism.write_text(
        json.dumps(
            {
                "columns": {
                    "a": {"states": yes_no},
                    "b": {"states": yes_no},
                    "c": {"states": yes_no},
                    "y": {"states": yes_no},
                },
                "groups": [{"columns": ["a", "b", "c"], "kind": "zhan", "theta": 0.85}],
            }
        )
    )
    for name, seed in (("train", "1"), ("test", "2")):
        code = main(
            [
                "perturb",
                "randomize",
                "--in",
                str(tmp_path / f"{name}.csv"),
                "--mechanism",
                str(mechanism),
                "--out",
                str(tmp_path / f"{name}-r.csv"),
                "--seed",
                seed,
            ]
        )
        assert code == 0
    capsys.readouterr()
    common = ["nb", "--class", "y", "--format", "json", "--mechanism", str(mechanism)]
    assert (
        main(
            [
                "perturb",
                "learn",
                *common,
                "--data",
                str(tmp_path / "train-r.csv"),
                "--test",
                str(test),
            ]
        )
        == 0
    )
    truth = json.loads(capsys.readouterr().out)
    assert (
        main(
            [
                "perturb",
                "learn",
                *common,
                "--data",
                str(tmp_path / "train-r.csv"),
                "--test",
                str(tmp_path / "test-r.csv"),
                "--test-randomized",
            ]
        )
        == 0
    )
    estimated = json.loads(capsys.readouterr().out)
    assert "accuracy" not in estimated and estimated["accuracy_estimated_passes"] == 2
    assert (
        abs(estimated["accuracy_estimated"] - truth["accuracy"])
        < 4 * estimated["accuracy_estimated_se"] + 0.01
    )
    assert estimated["mechanism"].startswith(f"mechanism file {mechanism}")
    # the file's states order the codes: a value it does not declare is a one-line error
    _write(tmp_path / "odd.csv", np.column_stack([x, y])[:10], names)
    frame = pd.read_csv(tmp_path / "odd.csv")
    frame.loc[3, "b"] = "maybe"
    frame.to_csv(tmp_path / "odd.csv", index=False)
    assert main(["perturb", "learn", *common, "--data", str(tmp_path / "odd.csv")]) != 0
    err = capsys.readouterr().err.strip()
    assert (
        "odd.csv: line 5, column 'b': value 'maybe' is not a state" in err and err.count("\n") == 0
    )
    assert main(["perturb", "learn", *common, "--theta", "0.8", "--data", str(original)]) != 0
    assert "leave out --theta" in capsys.readouterr().err
