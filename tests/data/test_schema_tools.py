"""`ppbn schema infer` and `ppbn schema merge`: from two CSVs back to the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppbn.bn.schema import Schema
from ppbn.cli import main
from ppbn.data.datasets import make_dataset
from ppbn.data.schema_tools import infer_schema, merge_schemas
from ppbn.errors import DataError, UserError


def _equivalent(a: Schema, b: Schema) -> None:
    """Same id column, variables, owners, kinds, bin specs, and domains as sets."""
    assert a.id_column == b.id_column
    assert {v.name: v.owner for v in a.variables} == {v.name: v.owner for v in b.variables}
    for v in a.variables:
        w = b.variable(v.name)
        assert v.kind == w.kind, v.name
        if v.is_continuous:
            assert v.bins.public_dict() == w.bins.public_dict(), v.name
        else:
            assert set(v.states) == set(w.states), v.name


@pytest.fixture(scope="module")
def sachs_dir(tmp_path_factory) -> Path:
    """`ppbn datasets make` output: 11 variables of 3 states (LOW, AVG, HIGH), split alternately."""
    data = tmp_path_factory.mktemp("sachs")
    make_dataset("sachs", 400, 3, data, force=True)
    return data


@pytest.mark.parametrize("order", ["first-seen", "sorted"])
def test_infer_and_merge_give_back_the_made_schema(tmp_path, capsys, order, sachs_dir):
    data = sachs_dir
    made = Schema.load(str(data / "schema.json"))
    for role in ("alice", "bob"):
        code = main(
            [
                "schema",
                "infer",
                "--data",
                str(data / f"{role}.csv"),
                "--owner",
                role,
                "--id",
                "record_id",
                "--order",
                order,
                "--out",
                str(tmp_path / f"{role}.json"),
            ]
        )
        assert code == 0
    merged_path = tmp_path / "merged.json"
    assert (
        main(
            [
                "schema",
                "merge",
                str(tmp_path / "bob.json"),
                str(tmp_path / "alice.json"),
                "--out",
                str(merged_path),
            ]
        )
        == 0
    )
    merged = Schema.load(str(merged_path))
    _equivalent(merged, made)
    assert "public fingerprint" in capsys.readouterr().err
    if order == "sorted":
        assert all(list(v.states) == sorted(v.states) for v in merged.variables)


def test_infer_proposes_continuous_for_numeric_columns_and_warns(tmp_path):
    rows = ["id,age,code,city,level"]
    rows += [
        f"r{i},{20 + i * 0.5},{i % 3},c{i % 25},{'' if i == 7 else 'hi' if i % 2 else 'lo'}"
        for i in range(60)
    ]
    path = tmp_path / "alice.csv"
    path.write_text("\n".join(rows) + "\n")
    inferred = infer_schema(path, "alice", "id", order="sorted", bins=5)
    schema = inferred.schema
    assert schema.variable("age").is_continuous and schema.variable("age").bins.public_dict() == {
        "method": "quantile",
        "count": 5,
        "publish_edges": False,
    }
    assert schema.variable("code").states == (
        "0",
        "1",
        "2",
    )  # few numeric levels: categorical, sorted
    assert len(schema.variable("city").states) == 25
    assert schema.variable("level").states == ("hi", "lo")
    assert any(
        "'city' has 25 distinct values" in w and "group its values" in w for w in inferred.warnings
    )
    assert any("'level' has 1 empty cell, read as missing" in w for w in inferred.warnings)
    assert inferred.schema.missing == ()  # only empty cells: no marker to write down


def _with_markers(tmp_path: Path) -> Path:
    """A file as spreadsheets write it: 'NA' in a numeric and a categorical column, '?' and
    empty cells in another."""
    rows = ["id,age,sex,smoker"]
    for i in range(120):
        age = "NA" if i % 10 == 0 else f"{30 + i * 0.37:.2f}"
        sex = "NA" if i % 40 == 1 else "F" if i % 2 else "M"
        smoker = "?" if i % 30 == 2 else "" if i % 60 == 3 else "yes" if i % 3 else "no"
        rows.append(f"r{i},{age},{sex},{smoker}")
    path = tmp_path / "alice.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_missing_markers_are_missing_not_states(tmp_path):
    inferred = infer_schema(_with_markers(tmp_path), "alice", "id")
    schema = inferred.schema
    assert schema.variable("age").is_continuous  # not 109 categories
    assert schema.variable("sex").states == ("M", "F")  # no state 'NA'
    assert schema.variable("smoker").states == ("no", "yes")
    assert schema.missing == ("NA", "?")  # the markers found, in the order of the default set
    warned = "\n".join(inferred.warnings)
    assert "column 'age' has 12 cells 'NA', read as missing" in warned
    assert "column 'sex' has 3 cells 'NA', read as missing" in warned
    assert "column 'smoker' has 4 cells '?', 2 empty cells, read as missing" in warned
    assert inferred.decisions == [
        "column 'age': continuous, 4 quantile bins (108 distinct numbers, 12 missing)",
        "column 'sex': categorical, 2 states, first-seen order (text, 3 missing)",
        "column 'smoker': categorical, 2 states, first-seen order (text, 6 missing)",
    ]
    assert json.loads(schema.to_json())["missing"] == ["NA", "?"]


def test_missing_markers_can_be_chosen(tmp_path, capsys):
    path = _with_markers(tmp_path)
    only_na = infer_schema(path, "alice", "id", missing_markers=["NA"]).schema
    assert only_na.variable("smoker").states == ("no", "yes", "?") and only_na.missing == ("NA",)
    none = infer_schema(path, "alice", "id", missing_markers=[])
    assert none.schema.variable("age").states[0] == "NA" and none.schema.missing == ()
    assert any(
        "if 'NA' (line 2) means no value, add it to --missing-markers" in w for w in none.warnings
    )
    out = tmp_path / "partial.json"
    argv = ["schema", "infer", "--data", str(path), "--owner", "alice", "--id", "id"]
    assert main([*argv, "--missing-markers", "NA, ?", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{path}: column 'age': continuous, 4 quantile bins" in err
    assert f"{path}: column 'sex': categorical, 2 states" in err
    assert json.loads(out.read_text())["missing"] == ["NA", "?"]


def test_the_loader_reads_the_markers_as_missing(tmp_path):
    from ppbn.data.party_data import MISSING_CODE, load_party_data

    path = _with_markers(tmp_path)
    alice = infer_schema(path, "alice", "id").schema
    bob = Schema.from_dict(
        {"id_column": "id", "variables": [{"name": "b", "owner": "bob", "states": ["x", "y"]}]}
    )
    merged = Schema.from_dict(merge_schemas(alice, bob, ("a.json", "b.json")))
    assert merged.missing == ("NA", "?")
    data = load_party_data(merged, "alice", path, missing_rule="available-case")
    missing = (data.codes == MISSING_CODE).sum(axis=0)
    assert dict(zip(data.columns, missing.tolist(), strict=True)) == {
        "age": 12,
        "sex": 3,
        "smoker": 6,
    }
    with pytest.raises(DataError, match=r"line 2, column 'age': missing value"):
        load_party_data(merged, "alice", path)
    # how a party reads its own file: not part of the public fingerprint
    without = Schema.from_dict({**merged.to_dict(), "missing": []})
    assert without.fingerprint() == merged.fingerprint()
    with pytest.raises(DataError, match=r"line 2, column 'age': value 'NA' is not a finite"):
        load_party_data(without, "alice", path, missing_rule="available-case")


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("NA", "'missing' must be a list of strings"),
        (["NA", 1], "'missing' must be a list of strings"),
        (["NA", "NA"], "'missing' lists 'NA' twice"),
        (["y"], "variable 'a', state 'y': the schema's 'missing' lists it as a missing value"),
    ],
)
def test_the_missing_key_is_checked(missing, message):
    raw = {
        "id_column": "id",
        "variables": [{"name": "a", "owner": "alice", "states": ["x", "y"]}],
        "missing": missing,
    }
    with pytest.raises(DataError, match=message) as caught:
        Schema.from_dict(raw, source="schema.json")
    assert str(caught.value).startswith("schema.json: ") and "\n" not in str(caught.value)


def test_merge_joins_the_markers_and_refuses_one_that_is_a_state():
    alice = Schema.from_dict({**_partial("alice", ["a"]).to_dict(), "missing": ["NA"]})
    bob = Schema.from_dict({**_partial("bob", ["b"]).to_dict(), "missing": ["?"]})
    assert merge_schemas(alice, bob, ("A", "B"))["missing"] == ["NA", "?"]
    bob_x = Schema.from_dict(
        {
            "id_column": "id",
            "variables": [{"name": "b", "owner": "bob", "states": ["u", "v"]}],
            "missing": ["x"],
        }
    )
    with pytest.raises(UserError, match="variable 'a' of A has the state 'x', which B lists as"):
        merge_schemas(alice, bob_x, ("A", "B"))


def test_continuous_round_trip_through_infer_and_merge(tmp_path):
    data = tmp_path / "data"
    make_dataset("sachs", 400, 3, data, continuous="2")  # one continuous variable per party, 3 bins
    made = Schema.load(str(data / "schema.json"))
    parts = [
        infer_schema(data / f"{r}.csv", r, "record_id", bins=3).schema for r in ("alice", "bob")
    ]
    merged = Schema.from_dict(merge_schemas(*parts, ("a.json", "b.json")))
    _equivalent(merged, made)


def _partial(
    owner: str, names: list[str], id_column: str = "id", bins: dict | None = None
) -> Schema:
    variables = [{"name": n, "owner": owner, "states": ["x", "y"]} for n in names]
    if bins is not None:
        variables.append(
            {"name": f"{owner}_num", "owner": owner, "type": "continuous", "bins": bins}
        )
    return Schema.from_dict({"id_column": id_column, "variables": variables})


def test_merge_refuses_conflicts():
    alice, bob = _partial("alice", ["a"]), _partial("bob", ["b"])
    with pytest.raises(UserError, match="the id columns differ: A uses 'id', B uses 'rid'"):
        merge_schemas(alice, _partial("bob", ["b"], "rid"), ("A", "B"))
    with pytest.raises(UserError, match="A and B both declare alice's variables"):
        merge_schemas(alice, _partial("alice", ["c"]), ("A", "B"))
    with pytest.raises(
        UserError, match=r"variable 'a' is declared by both A \(alice\) and B \(bob\)"
    ):
        merge_schemas(alice, _partial("bob", ["a"]), ("A", "B"))
    mixed = Schema.from_dict(
        {
            "id_column": "id",
            "variables": [
                {"name": "a", "owner": "alice", "states": ["x", "y"]},
                {"name": "b", "owner": "bob", "states": ["x", "y"]},
            ],
        }
    )
    with pytest.raises(UserError, match="A: declares variables of both alice and bob"):
        merge_schemas(mixed, bob, ("A", "B"))


def test_merge_keeps_private_edges_only_in_their_owners_copy(tmp_path, capsys):
    private = {"method": "edges", "count": 3, "edges": [18.25, 35.75]}
    alice = _partial("alice", ["a"], bins=private)
    bob = _partial("bob", ["b"], bins={"method": "mgas", "count": 2, "min_records": 40})
    public = json.dumps(merge_schemas(alice, bob, ("A", "B")))
    assert "18.25" not in public and "min_records" not in public
    for_alice = json.dumps(merge_schemas(alice, bob, ("A", "B"), keep_private_of="alice"))
    assert "18.25" in for_alice and "min_records" not in for_alice
    fingerprints = set()
    for party in ("alice", "bob", None):
        merged = Schema.from_dict(merge_schemas(bob, alice, ("B", "A"), keep_private_of=party))
        fingerprints.add(
            Schema.from_dict(
                {
                    **merged.to_dict(),
                    "variables": sorted(merged.to_dict()["variables"], key=lambda v: v["name"]),
                }
            ).fingerprint()
        )
    assert len(fingerprints) == 1  # every copy has the same public schema
    a_path, b_path = tmp_path / "a.json", tmp_path / "b.json"
    a_path.write_text(alice.to_json())
    b_path.write_text(bob.to_json())
    assert main(["schema", "merge", str(a_path), str(b_path)]) == 0
    assert "18.25" not in capsys.readouterr().out


def test_infer_errors(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_text("id,x\nr1,1\nr1,2\n")
    with pytest.raises(DataError, match="line 3, column 'id': duplicate record id 'r1'"):
        infer_schema(path, "alice", "id")
    path.write_text("id,x\nr1,same\nr2,same\n")
    with pytest.raises(DataError, match="column 'x': fewer than two distinct values"):
        infer_schema(path, "alice", "id")
    assert main(["schema", "infer", "--data", str(path), "--owner", "alice", "--id", "record"]) == 2
    assert "id column 'record' is missing" in capsys.readouterr().err
    assert not Path(tmp_path / "out.json").exists()


def test_infer_refuses_names_and_values_the_network_file_cannot_carry(tmp_path):
    """Found at `schema infer`, on the line at fault, instead of when a learn job writes its
    network.bif after the secure work."""
    path = tmp_path / "a.csv"
    path.write_text("id,mean radius\n" + "".join(f"r{i},{i % 3}\n" for i in range(9)))
    with pytest.raises(
        DataError,
        match=r"a\.csv: line 1, column 'mean radius': the name has a space, .* e\.g\. 'mean_radius'$",
    ):
        infer_schema(path, "alice", "id")
    path.write_text("id,table1\nr1,x\nr2,y\n")
    with pytest.raises(
        DataError,
        match=r"column 'table1': the name has 'table' followed by '1', .* e\.g\. 'table_1'$",
    ):
        infer_schema(path, "alice", "id")
    path.write_text("id,A,a\nr1,x,x\nr2,y,y\n")
    with pytest.raises(
        DataError, match=r"a\.csv: line 1: columns 'A' and 'a' differ only in letter case"
    ):
        infer_schema(path, "alice", "id")
    path.write_text('id,size\nr1,small\nr2,"big (XL)"\nr3,small\n')
    with pytest.raises(
        DataError,
        match=r"a\.csv: line 3, column 'size': value 'big \(XL\)' has '\(', which a BIF file cannot carry",
    ):
        infer_schema(path, "alice", "id")
    path.write_text("id,size\nr1,small\nr2,big\n")
    assert infer_schema(path, "alice", "id").schema.variable("size").states == ("small", "big")


def test_merge_refuses_names_that_differ_only_in_case():
    with pytest.raises(
        UserError, match=r"variable 'Age' of A and 'age' of B differ only in letter case"
    ):
        merge_schemas(_partial("alice", ["Age"]), _partial("bob", ["age"]), ("A", "B"))
