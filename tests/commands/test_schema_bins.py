"""``ppbn schema bins``: a party's cut points from its own file, equal to what its daemon
computes (``load_party_data``), with the records per bin; the other party's file is never
needed."""

from __future__ import annotations

import json

import numpy as np
from known_files import CONTINUOUS_SCHEMA

from ppbn.bn.schema import Schema
from ppbn.cli import main
from ppbn.data.datasets import make_dataset
from ppbn.data.party_data import load_party_data

SCHEMA = json.loads(CONTINUOUS_SCHEMA.read_text())  # alice bins age and income
ALICE = "id,age,income\nr1,12,100\nr2,20.5,101\nr3,35,200\nr4,80,201.5\nr5,,150\n"


def _bins(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(["schema", "bins", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cut_points_equal_the_daemons_on_generated_data(tmp_path, capsys):
    data = tmp_path / "data"
    make_dataset("asia", 400, 3, data, continuous="4")
    (data / "bob.csv").unlink()  # the other party's file is not needed
    schema, alice = data / "schema.json", data / "alice.csv"
    argv = ["--schema", str(schema), "--data", str(alice), "--party", "alice", "--format", "json"]
    code, out, _ = _bins(argv, capsys)
    assert code == 0
    report = json.loads(out)
    loaded = load_party_data(Schema.load(str(schema)), "alice", alice)  # what the daemon runs
    assert len(report["variables"]) == 2
    assert {v["variable"]: tuple(v["cut_points"]) for v in report["variables"]} == loaded.bins
    for v in report["variables"]:
        counts = np.bincount(loaded.column(v["variable"]), minlength=v["bins"])
        assert v["records"] == counts.tolist() and sum(v["records"]) == 400
        assert v["method"] == "quantile"


def test_text_names_method_bins_cut_points_and_records(tmp_path, capsys):
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "alice.csv").write_text(ALICE)
    argv = ["--schema", str(tmp_path / "schema.json"), "--data", str(tmp_path / "alice.csv")]
    code, out, _ = _bins([*argv, "--party", "alice", "--missing", "available-case"], capsys)
    assert code == 0
    assert "age: edges, 3 bins, cut points 18, 35" in out
    assert "bin2  18<=x<35  1 records" in out and "bin3  x>=35     2 records" in out
    assert "income: mgas, 2 bins, cut points 180" in out
    assert "missing cells (left out of this variable's families): 1" in out
    code, _, err = _bins([*argv, "--party", "alice"], capsys)  # an empty cell, --missing error
    assert code == 2 and "line 6, column 'age': missing value" in err and err.count("\n") == 1
    code, _, err = _bins([*argv, "--party", "bob"], capsys)
    assert err == f"ppbn: error: {tmp_path / 'schema.json'}: bob owns no continuous variable\n"
    assert code == 2
