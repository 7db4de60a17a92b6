"""Continuous variables: schema rules, the public fingerprint, load errors, and
the secure learn against the reference on the same discretization, with the owner's cut
points kept out of the other party's files."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from known_files import CONTINUOUS_SCHEMA
from known_files import TEST_POLICY as KNOWN_POLICY

from ppbn.bn.discretize import format_number
from ppbn.bn.schema import Schema
from ppbn.cli import main
from ppbn.data.party_data import load_joined_with_bins, load_party_data
from ppbn.errors import DataError

TEST_POLICY = str(KNOWN_POLICY)

OWNER_COPY = json.loads(CONTINUOUS_SCHEMA.read_text())  # alice bins age and income


def _peer_copy() -> dict:
    """Bob's copy: the same public schema without alice's private bin fields."""
    peer = copy.deepcopy(OWNER_COPY)
    del peer["variables"][0]["bins"]["edges"]
    del peer["variables"][1]["bins"]["min_records"], peer["variables"][1]["bins"]["min_granularity"]
    return peer


def _csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- schema and fingerprint ---------------------------------------------------------------
def test_fingerprint_covers_only_the_public_part():
    owner, peer = Schema.from_dict(OWNER_COPY), Schema.from_dict(_peer_copy())
    assert owner.fingerprint() == peer.fingerprint()
    assert owner.variable("age").states == ("bin1", "bin2", "bin3")
    assert '"edges": [' not in json.dumps(owner.public_dict()) and "min_records" not in json.dumps(
        owner.public_dict()
    )
    assert owner.to_dict()["variables"][0]["bins"]["edges"] == [
        18,
        35,
    ]  # the owner's file keeps them
    for change in (("count", 4, "edges", [1, 2, 3]), ("method", "quantile", "edges", None)):
        other = copy.deepcopy(OWNER_COPY)
        other["variables"][0]["bins"][change[0]] = change[1]
        if change[3] is None:
            del other["variables"][0]["bins"]["edges"]
        else:
            other["variables"][0]["bins"][change[2]] = change[3]
        assert Schema.from_dict(other).fingerprint() != owner.fingerprint()
    published = copy.deepcopy(OWNER_COPY)
    published["variables"][0]["bins"]["publish_edges"] = True
    moved = copy.deepcopy(published)
    moved["variables"][0]["bins"]["edges"] = [18, 40]
    assert Schema.from_dict(published).fingerprint() not in {
        owner.fingerprint(),
        Schema.from_dict(moved).fingerprint(),
    }


def test_categorical_fingerprint_is_unchanged():
    """The fingerprint of an all-categorical schema is the one computed before continuous variables existed."""
    schema = Schema.from_dict(
        {
            "id_column": "id",
            "variables": [
                {"name": "smoke", "owner": "alice", "states": ["yes", "no"]},
                {"name": "lung", "owner": "alice", "states": ["yes", "no", "?"]},
                {"name": "xray", "owner": "bob", "states": ["pos", "neg"]},
            ],
            "missing_state": "?",
        }
    )
    assert (
        schema.fingerprint() == "ed79e5483546c0a3038e6bb0b976f0ad81c9f07ce959c162aa60f31d54397e1d"
    )
    assert schema.public_dict() == schema.to_dict()


@pytest.mark.parametrize(
    ("bins", "message"),
    [
        ({"method": "kmeans", "count": 3}, "unknown method 'kmeans'"),
        ({"method": "quantile", "count": 1}, "'count' must be an integer >= 2"),
        ({"method": "quantile", "count": True}, "'count' must be an integer >= 2"),
        ({"method": "edges", "count": 3, "edges": [35, 18]}, "edges must be strictly increasing"),
        ({"method": "edges", "count": 4, "edges": [18, 35]}, "4 bins need 3 edges"),
        (
            {"method": "edges", "count": 3, "edges": [18, "x"]},
            "'edges' must be a list of finite numbers",
        ),
        ({"method": "quantile", "count": 3, "cuont": 3}, "unknown key 'cuont'"),
        (
            {"method": "quantile", "count": 3, "publish_edges": True},
            "'publish_edges' needs the 'edges'",
        ),
        (
            {"method": "quantile", "count": 3, "edges": [1, 2]},
            "'edges' are used only with method 'edges'",
        ),
        ({"method": "quantile", "count": 3, "min_records": 5}, "apply to method 'mgas' only"),
        ({"method": "mgas", "count": 3, "min_records": 0}, "'min_records' must be an integer >= 1"),
        ("quantile", "needs a 'bins' object"),
    ],
)
def test_bad_bins_specs(bins, message):
    raw = copy.deepcopy(OWNER_COPY)
    raw["variables"][0]["bins"] = bins
    with pytest.raises(DataError, match=message) as info:
        Schema.from_dict(raw, source="s.json")
    assert str(info.value).startswith("s.json: variable 'age': ") and "\n" not in str(info.value)


def test_continuous_variable_has_no_states_and_type_is_checked():
    raw = copy.deepcopy(OWNER_COPY)
    raw["variables"][0]["states"] = ["a", "b"]
    with pytest.raises(DataError, match="has 'bins', not 'states'"):
        Schema.from_dict(raw)
    raw = copy.deepcopy(OWNER_COPY)
    raw["variables"][2]["type"] = "ordinal"
    with pytest.raises(DataError, match="'type' must be 'categorical' or 'continuous'"):
        Schema.from_dict(raw)


# -- loading --------------------------------------------------------------------------------
GOOD = "id,age,income\nr1,12,100\nr2,20.5,101\nr3,35,200\nr4,80,201.5\n"


def test_owner_discretizes_and_keeps_its_cut_points(tmp_path):
    data = load_party_data(Schema.from_dict(OWNER_COPY), "alice", _csv(tmp_path / "a.csv", GOOD))
    assert data.column("age").tolist() == [0, 1, 2, 2]  # 35 is on a cut: [35, inf)
    assert data.bins["age"] == (18.0, 35.0)
    assert data.column("income").tolist() == [0, 0, 1, 1] and data.bins["income"] == (150.0,)
    names = data.schema.state_names(data.bins)
    assert names["age"] == ("x<18", "18<=x<35", "x>=35") and names["smoker"] == ("no", "yes")
    peer = Schema.from_dict(_peer_copy())
    bob = load_party_data(
        peer, "bob", _csv(tmp_path / "b.csv", "id,smoker\nr1,no\nr2,yes\nr3,no\nr4,no\n")
    )
    assert bob.bins == {} and peer.state_names(bob.bins)["age"] == ("bin1", "bin2", "bin3")
    published = copy.deepcopy(_peer_copy())
    published["variables"][0]["bins"].update(publish_edges=True, edges=[18, 35])
    assert Schema.from_dict(published).state_names({})["age"] == ("x<18", "18<=x<35", "x>=35")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "id,age,income\nr1,12,100\nr2,abc,101\nr3,35,200\n",
            r"a\.csv: line 3, column 'age': value 'abc' is not a finite number",
        ),
        (
            "id,age,income\nr1,12,100\nr2,nan,101\nr3,35,200\n",
            r"line 3, column 'age': value 'nan' is not a finite number",
        ),
        ("id,age,income\nr1,12,100\nr2,,101\nr3,35,200\n", r"line 3, column 'age': missing value"),
        (
            "id,age,income\nr1,12,100\nr2,12,101\nr3,12,200\n",
            r"a\.csv: lines 2-4, column 'age': only 1 distinct values for 3 bins: lower the bins count in the "
            r"schema, or declare 'age' categorical",
        ),
        (
            "id,age,income\nr1,12,100\nr2,20,100.5\nr3,35,101\nr4,80,101.4\n",
            r"column 'income': mgas made 1 groups but the schema's bins count is 2: set count to 1 .*lower min_records",
        ),
    ],
)
def test_load_errors_are_one_line_with_file_line_and_column(tmp_path, text, message):
    with pytest.raises(DataError, match=message) as info:
        load_party_data(Schema.from_dict(OWNER_COPY), "alice", _csv(tmp_path / "a.csv", text))
    assert "\n" not in str(info.value)


def test_private_fields_missing_at_the_owner_and_published_edges_that_differ(tmp_path):
    path = _csv(tmp_path / "a.csv", GOOD)
    with pytest.raises(
        DataError, match="method 'edges' needs the 'edges' list in the owner's schema"
    ):
        load_party_data(Schema.from_dict(_peer_copy()), "alice", path)
    raw = copy.deepcopy(OWNER_COPY)
    raw["variables"][0]["bins"] = {
        "method": "quantile",
        "count": 2,
        "publish_edges": True,
        "edges": [25],
    }
    # the cut between 20.5 and 35: their midpoint 27.75, rounded as far as it stays between
    with pytest.raises(
        DataError, match=r"the quantile cut points of this file \[30\] differ from the published"
    ):
        load_party_data(Schema.from_dict(raw), "alice", path)


def test_cli_exit_code_2_and_one_line(tmp_path, capsys):
    (tmp_path / "schema.json").write_text(json.dumps(OWNER_COPY))
    _csv(tmp_path / "alice.csv", "id,age,income\nr1,12,100\nr2,1e,101\n")
    _csv(tmp_path / "bob.csv", "id,smoker\nr1,no\nr2,yes\n")
    assert main(["reference", "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "line 3, column 'age': value '1e' is not a finite number" in err


# -- end to end ------------------------------------------------------------------------------
def _strings(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file())


def test_secure_learn_equals_reference_and_cut_points_stay_with_the_owner(tmp_path, capsys):
    data = tmp_path / "data"
    # two continuous columns on each side (alice: bronc, xray; bob: smoke, lung), quantile bins
    assert (
        main(
            [
                "datasets",
                "make",
                "--network",
                "asia",
                "--records",
                "500",
                "--seed",
                "5",
                "--continuous",
                "bronc,smoke,xray,lung",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    schema = Schema.load(str(data / "schema.json"))
    assert {v.name: v.owner for v in schema.continuous()} == {
        "smoke": "bob",
        "lung": "bob",
        "bronc": "alice",
        "xray": "alice",
    }
    capsys.readouterr()
    sim = tmp_path / "sim"
    code = main(
        [
            "simulate",
            "--data",
            str(data),
            "--max-parents",
            "2",
            "--params",
            '{"key_bits": 1024}',
            "--policy",
            TEST_POLICY,
            "--format",
            "json",
            "--out",
            str(sim),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report.get("error")
    ref_dir = tmp_path / "ref"
    assert (
        main(["reference", "--data", str(data), "--max-parents", "2", "--out", str(ref_dir)]) == 0
    )
    reference = json.loads((ref_dir / "network.json").read_text())
    assert reference["edges"], "the test needs a network with edges"
    _, _, cuts = load_joined_with_bins(schema, data / "alice.csv", data / "bob.csv")
    for role in ("alice", "bob"):
        folder = next(sim.glob(f"out-{role}/*/network.json")).parent
        mine = json.loads((folder / "network.json").read_text())
        assert mine["edges"] == reference["edges"]  # structure and edge order
        for v, spec in reference["parameters"].items():
            assert mine["parameters"][v]["parents"] == spec["parents"]
            assert (
                np.max(np.abs(np.array(mine["parameters"][v]["table"]) - np.array(spec["table"])))
                < 1e-9
            )
            variable = schema.variable(v)
            if not variable.is_continuous or variable.owner == role:
                assert (
                    mine["parameters"][v]["states"] == spec["states"]
                )  # intervals, as in the reference
            else:
                assert mine["parameters"][v]["states"] == list(variable.states)  # bin1..binK
        own = _strings(folder)
        theirs = [v.name for v in schema.continuous() if v.owner != role]
        for v in theirs:
            for c in cuts[v]:
                assert format_number(c) not in own, (role, v, c)
        assert (
            "<=x<" not in (folder / "ledger.json").read_text()
            and "x>=" not in (folder / "ledger.json").read_text()
        )
        for v in (v.name for v in schema.continuous() if v.owner == role):
            assert f"x>={format_number(cuts[v][-1])}" in (folder / "network.bif").read_text()
