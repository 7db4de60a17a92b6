"""``randomize_file`` and ``reconstruct_file``, the work of ``ppbn perturb randomize`` and
``reconstruct`` called from Python: they write what they report and refuse one-line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ppbn.data.perturb_files import randomize_file, read_table, reconstruct_file
from ppbn.errors import UserError
from ppbn.randomized.perturb.reconstruction import ReconstructionSettings

MECHANISM = {
    "columns": {
        "smoker": {"states": ["no", "yes"], "kind": "warner", "theta": 0.8},
        "income": {"kind": "additive", "noise": {"kind": "gaussian", "sigma": 5}},
    }
}


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    n = 2000
    pd.DataFrame(
        {
            "smoker": rng.choice(["no", "yes"], n, p=[0.7, 0.3]),
            "income": rng.normal(30, 3, n).round(2),
            "note": "kept",
        }
    ).to_csv(tmp_path / "original.csv", index=False)
    (tmp_path / "mech.json").write_text(json.dumps(MECHANISM))
    return tmp_path


def test_randomize_then_reconstruct(files):
    out = str(files / "randomized.csv")
    report = randomize_file(str(files / "original.csv"), str(files / "mech.json"), out, seed=3)
    assert report["records"] == 2000 and set(report["columns"]) == {"smoker", "income"}
    randomized = read_table(out)
    assert list(randomized.columns) == ["smoker", "income", "note"]
    assert (randomized["note"] == "kept").all()
    again = str(files / "again.csv")
    randomize_file(str(files / "original.csv"), str(files / "mech.json"), again, seed=3)
    assert read_table(again).equals(randomized)  # the seed makes it reproducible
    result = reconstruct_file(
        out,
        str(files / "mech.json"),
        ["smoker", "smoker"],
        ReconstructionSettings(method="moment"),
        original_path=str(files / "original.csv"),
        plot_path=str(files / "smoker.png"),
    )
    assert result["columns"] == ["smoker"] and result["information_loss"] < 0.05
    assert (files / "smoker.png").read_bytes()[:4] == b"\x89PNG"
    additive = reconstruct_file(out, str(files / "mech.json"), ["income"], ReconstructionSettings())
    assert additive["kind"] == "additive" and "plot" not in additive


def test_only_the_columns_asked_for_are_randomized(files):
    out = str(files / "randomized.csv")
    report = randomize_file(
        str(files / "original.csv"), str(files / "mech.json"), out, seed=3, columns=["smoker"]
    )
    assert list(report["columns"]) == ["smoker"]
    original = read_table(files / "original.csv")
    assert read_table(out)["income"].equals(original["income"])


def test_refusals_name_the_flag(files):
    mech = str(files / "mech.json")
    with pytest.raises(UserError, match="--columns: 'age' has no mechanism"):
        randomize_file(str(files / "original.csv"), mech, str(files / "o.csv"), columns=["age"])
    with pytest.raises(UserError, match="'income' is additive: reconstruct it on its own"):
        reconstruct_file(
            str(files / "original.csv"), mech, ["smoker", "income"], ReconstructionSettings()
        )
    with pytest.raises(UserError, match="--column 'age': no mechanism"):
        reconstruct_file(str(files / "original.csv"), mech, ["age"], ReconstructionSettings())
