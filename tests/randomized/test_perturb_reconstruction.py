"""The reconstruction report of ``ppbn perturb reconstruct``, called as a library: the
estimate is near the original distribution, the report's keys are the command's JSON."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.errors import UserError
from ppbn.randomized.perturb.mechanisms import parse_mechanisms
from ppbn.randomized.perturb.reconstruction import (
    ReconstructionSettings,
    joint_cells,
    needed_columns,
    parse_bins,
    reconstruct_additive,
    reconstruct_categorical,
    reconstruction_title,
)
from ppbn.randomized.pram.operators import RandomSource

MECHANISMS = parse_mechanisms(
    {
        "columns": {
            "smoker": {"states": ["no", "yes"], "kind": "warner", "theta": 0.8},
            "hiv": {"states": ["0", "1"]},
            "drug": {"states": ["0", "1"]},
            "income": {"kind": "additive", "noise": {"kind": "gaussian", "sigma": 5}},
        },
        "groups": [{"columns": ["hiv", "drug"], "kind": "zhan", "theta": 0.75}],
    },
    "test",
)


def test_categorical_estimate_is_near_the_original_fractions():
    rng = np.random.default_rng(0)
    original = (rng.random(20_000) < 0.3).astype(np.int64)
    randomized = MECHANISMS.randomize({"smoker": original}, RandomSource.from_seed(1))
    report = reconstruct_categorical(
        MECHANISMS, ["smoker"], randomized["smoker"][:, None], None, original[:, None]
    )
    assert report["method"] == "em" and report["cells"] == ["no", "yes"]
    assert report["estimate"] == pytest.approx([0.7, 0.3], abs=0.02)
    assert report["information_loss"] < 0.02
    assert reconstruction_title(report).startswith("smoker (")


def test_a_joint_estimate_needs_the_whole_group():
    assert needed_columns(MECHANISMS, ["hiv"]) == ["hiv", "drug"]
    assert joint_cells([("0", "1"), ("a", "b")], ["hiv", "drug"]) == [
        "hiv=0, drug=a",
        "hiv=0, drug=b",
        "hiv=1, drug=a",
        "hiv=1, drug=b",
    ]


def test_additive_estimate_on_the_given_range():
    rng = np.random.default_rng(2)
    original = rng.normal(30, 3, 5000)
    z = original + rng.normal(0, 5, 5000)
    settings = ReconstructionSettings(bins="12", value_range=(15.0, 45.0))
    report = reconstruct_additive(MECHANISMS, "income", z, settings, original)
    assert report["method"] == "binned-em" and len(report["estimate"]) == 12
    assert report["edges"][0] == 15.0 and report["edges"][-1] == 45.0
    assert report["information_loss"] < 0.15 and report["original_outside_range"] >= 0
    fourier = reconstruct_additive(
        MECHANISMS,
        "income",
        z,
        ReconstructionSettings(method="fourier", bins="15,30,45", harmonics=4),
    )
    assert fourier["edges"] == [15.0, 30.0, 45.0] and "iterations" not in fourier


def test_settings_that_do_not_fit_the_column_are_refused():
    z = np.zeros(10)
    with pytest.raises(UserError, match="--method moment: 'income' is additive"):
        reconstruct_additive(MECHANISMS, "income", z, ReconstructionSettings(method="moment"))
    with pytest.raises(UserError, match="--iterations must be at least 1"):
        reconstruct_additive(MECHANISMS, "income", z, ReconstructionSettings(iterations=0))
    with pytest.raises(UserError, match="not both"):
        reconstruct_additive(
            MECHANISMS, "income", z, ReconstructionSettings(bins="0,1", value_range=(0.0, 1.0))
        )
    with pytest.raises(UserError, match="'smoker' is categorical"):
        reconstruct_categorical(MECHANISMS, ["smoker"], np.zeros((3, 1), int), "fourier")
    assert parse_bins("7") == 7 and list(parse_bins("0, 1,2")) == [0.0, 1.0, 2.0]
    with pytest.raises(UserError, match="--bins '0'"):
        parse_bins("0")
