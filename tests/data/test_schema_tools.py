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
    assert any("'level' has 1 empty cells" in w for w in inferred.warnings)


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
