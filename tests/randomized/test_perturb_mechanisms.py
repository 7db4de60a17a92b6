"""Mechanism descriptions and the mechanism file: Warner, Zhan's groups, PRAM kinds, noise."""

import copy

import numpy as np
import pytest

from ppbn.randomized.perturb.mechanisms import parse_mechanisms, zhan_scheme
from ppbn.randomized.perturb.noise import Gaussian
from ppbn.randomized.perturb.response import flip_group, warner
from ppbn.randomized.pram.operators import RandomizationError, RandomSource

GOOD = {
    "columns": {
        "smoker": {"states": ["no", "yes"], "kind": "warner", "theta": 0.8},
        "region": {"states": ["n", "e", "s", "w"], "kind": "multi_category", "p": 0.3},
        "grade": {"states": ["a", "b"], "kind": "matrix", "matrix": [[0.9, 0.1], [0.2, 0.8]]},
        "hiv": {"states": ["0", "1"]},
        "drug": {"states": ["0", "1"]},
        "sex": {"states": ["f", "m"]},
        "income": {"kind": "additive", "noise": {"kind": "gaussian", "sigma": 5}},
    },
    "groups": [{"columns": ["hiv", "drug"], "kind": "zhan", "theta": 0.7}],
}


def test_warner_is_keep_with_theta_else_flip():
    assert np.allclose(warner(0.8), [[0.8, 0.2], [0.2, 0.8]], rtol=0, atol=1e-15)
    assert np.array_equal(warner(1.0), np.eye(2))
    assert np.array_equal(warner(0.0), [[0.0, 1.0], [1.0, 0.0]])  # always lying is invertible


def test_two_zhan_groups_give_m2_of_equation_5():
    p, q = 0.7, 0.3
    m2 = np.array(
        [
            [p * p, p * q, p * q, q * q],
            [p * q, p * p, q * q, p * q],
            [p * q, q * q, p * p, p * q],
            [q * q, p * q, p * q, p * p],
        ]
    )
    assert np.allclose(zhan_scheme([1, 1], 0.7), m2)
    # one group of two attributes: 00 <-> 11 and 01 <-> 10 only
    assert np.allclose(flip_group(2, 0.7), [[p, 0, 0, q], [0, p, q, 0], [0, q, p, 0], [q, 0, 0, p]])


def test_parse_builds_blocks_and_descriptions():
    m = parse_mechanisms(GOOD, "mech.json")
    assert m.columns == ("smoker", "region", "grade", "hiv", "drug", "sex", "income")
    assert m.describe("smoker") == "warner theta=0.8"
    assert m.describe("hiv") == m.describe("drug") == "zhan theta=0.7 on hiv+drug"
    assert m.describe("sex") == "not randomized"
    assert m.describe("income") == "additive gaussian(sigma=5, mean=0)"
    assert m.partners("drug") == ("hiv", "drug")
    assert m.noise["income"] == Gaussian(5.0)
    assert np.allclose(m.scheme.block_of("hiv").matrix, flip_group(2, 0.7))


def _error(mutate) -> str:
    data = copy.deepcopy(GOOD)
    mutate(data)
    with pytest.raises(RandomizationError) as err:
        parse_mechanisms(data, "mech.json")
    message = str(err.value)
    assert "\n" not in message and message.startswith("mech.json: ")
    return message


def test_rows_not_summing_to_one_name_the_file_and_field():
    message = _error(lambda d: d["columns"]["grade"].update(matrix=[[0.9, 0.2], [0.2, 0.8]]))
    assert message.startswith("mech.json: columns.grade.matrix: ")
    assert "rows must sum to 1 (row 0 sums to 1.1)" in message


def test_a_singular_matrix_is_refused_as_not_invertible():
    message = _error(lambda d: d["columns"]["grade"].update(matrix=[[0.5, 0.5], [0.5, 0.5]]))
    assert message.startswith("mech.json: columns.grade.matrix: ") and "not invertible" in message
    # M-category p = (K-1)/K sends every state to the uniform distribution
    assert "not invertible" in _error(lambda d: d["columns"]["region"].update(p=0.75))


def test_warner_and_zhan_theta_one_half_are_refused_as_not_invertible():
    message = _error(lambda d: d["columns"]["smoker"].update(theta=0.5))
    assert message.startswith(
        "mech.json: columns.smoker.theta: Warner theta = 0.5 is not invertible"
    )
    message = _error(lambda d: d["groups"][0].update(theta=0.5))
    assert message.startswith("mech.json: groups[0].theta: Zhan theta = 0.5 is not invertible")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.update(extra=1), "mech.json: unknown field 'extra'"),
        (lambda d: d.update(columns={}), "'columns' must be a non-empty object"),
        (
            lambda d: d["columns"]["smoker"].update(kind="warnr"),
            "columns.smoker.kind: 'warnr' is not one of",
        ),
        (
            lambda d: d["columns"]["smoker"].pop("theta"),
            "columns.smoker: kind warner needs 'theta'",
        ),
        (lambda d: d["columns"]["region"].update(q=1), "columns.region: unknown field 'q'"),
        (
            lambda d: d["columns"]["region"].pop("states"),
            "columns.region.states: a categorical column needs",
        ),
        (lambda d: d["columns"]["sex"].update(states=["f", "f"]), "state 'f' is listed twice"),
        (
            lambda d: d["columns"]["smoker"].update(theta=1.5),
            "columns.smoker.theta: Warner theta must be a probability",
        ),
        (
            lambda d: d["columns"].update(
                region={"states": list("abc"), "kind": "warner", "theta": 0.8}
            ),
            "warner randomizes binary columns",
        ),
        (
            lambda d: d["columns"]["income"]["noise"].update(sigma=-1),
            "columns.income.noise: gaussian sigma must be a positive",
        ),
        (
            lambda d: d["columns"]["income"].pop("noise"),
            "columns.income: an additive column needs 'noise'",
        ),
        (
            lambda d: d["groups"][0].update(columns=["hiv", "smoker"]),
            "groups[0].columns: 'smoker' has its own kind",
        ),
        (
            lambda d: d["groups"][0].update(columns=["hiv", "income"]),
            "groups[0].columns: 'income' is additive",
        ),
        (
            lambda d: d["groups"].append({"columns": ["drug"], "kind": "zhan", "theta": 0.6}),
            "'drug' is already in groups[0]",
        ),
        (
            lambda d: d["columns"]["hiv"].update(states=["0", "1", "2"]),
            "zhan randomizes binary columns; 'hiv' has 3 states",
        ),
    ],
)
def test_bad_mechanism_files_are_one_line_errors(mutate, expected):
    assert expected in _error(mutate)


def test_randomize_follows_the_mechanisms():
    m = parse_mechanisms(GOOD, "mech.json")
    n = 20_000
    rng = np.random.default_rng(0)
    values = {
        "smoker": rng.integers(0, 2, n),
        "hiv": rng.integers(0, 2, n),
        "drug": rng.integers(0, 2, n),
        "sex": rng.integers(0, 2, n),
        "income": rng.normal(50, 10, n),
    }
    out = m.randomize(values, RandomSource.from_seed(3))
    kept = np.mean(out["smoker"] == values["smoker"])
    assert abs(kept - 0.8) < 4 * np.sqrt(0.8 * 0.2 / n)
    # Zhan: both attributes of the group are kept or both flipped, never one of them
    same_hiv = out["hiv"] == values["hiv"]
    assert np.array_equal(same_hiv, out["drug"] == values["drug"])
    assert abs(same_hiv.mean() - 0.7) < 4 * np.sqrt(0.7 * 0.3 / n)
    assert np.array_equal(out["sex"], values["sex"])  # declared but not randomized
    shift = out["income"] - values["income"]
    assert abs(shift.mean()) < 4 * 5 / np.sqrt(n) and abs(shift.std() - 5) < 0.1
    # every column or group draws from its own stream: the order of the columns is irrelevant
    again = m.randomize(dict(reversed(list(values.items()))), RandomSource.from_seed(3))
    assert all(np.array_equal(out[c], again[c]) for c in values)


def test_randomizing_part_of_a_group_is_refused():
    m = parse_mechanisms(GOOD, "mech.json")
    with pytest.raises(RandomizationError, match="randomized together with drug"):
        m.randomize({"hiv": np.array([0, 1])}, RandomSource.from_seed(1))
