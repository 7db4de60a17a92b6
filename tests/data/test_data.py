"""Schema and data loading: every bad input gives one clear line naming file, line, column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppbn.bn.schema import Schema
from ppbn.data.party_data import load_joined, load_party_data
from ppbn.errors import DataError

SCHEMA = {
    "id_column": "id",
    "variables": [
        {"name": "smoke", "owner": "alice", "states": ["yes", "no"]},
        {"name": "lung", "owner": "alice", "states": ["yes", "no", "?"]},
        {"name": "xray", "owner": "bob", "states": ["pos", "neg"]},
    ],
    "missing_state": "?",
}


@pytest.fixture
def schema() -> Schema:
    return Schema.from_dict(SCHEMA)


def _csv(tmp_path: Path, text: str, name: str = "alice.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_file_is_coded_and_sorted_by_id(tmp_path, schema):
    path = _csv(tmp_path, "id,lung,smoke\nb,no,yes\na,yes,no\n")
    data = load_party_data(schema, "alice", path)
    assert data.columns == ("smoke", "lung")
    assert data.ids == ("a", "b")
    assert data.codes.tolist() == [[1, 0], [0, 1]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"alice\.csv: file is empty"),
        ("id,smoke,lung\n", r"alice\.csv: no records"),
        ("smoke,lung\nyes,no\n", r"alice\.csv: line 1: id column 'id' is missing"),
        ("id,smoke,lung,age\na,yes,no,3\n", r"line 1: column 'age' is not a variable"),
        (
            "id,smoke,lung,xray\na,yes,no,pos\n",
            r"line 1: column 'xray' is declared for bob, not alice",
        ),
        ("id,smoke\na,yes\n", r"line 1: column 'lung' of alice is missing"),
        (
            "id,smoke,lung\na,yes,no\nb,maybe,no\n",
            r"line 3, column 'smoke': value 'maybe' is not in the declared domain",
        ),
        (
            "id,smoke,lung\na,yes,no\na,no,no\n",
            r"line 3, column 'id': duplicate record id 'a' \(first on line 2\)",
        ),
        ("id,smoke,lung\na,yes,no\n ,no,no\n", r"line 3, column 'id': empty record id"),
        ("id,smoke,lung\na,yes,no\nb,,no\n", r"line 3, column 'smoke': missing value"),
        ("id,smoke,smoke,lung\na,yes,yes,no\n", r"column 'smoke' appears more than once"),
    ],
)
def test_each_loader_error_names_file_line_and_column(tmp_path, schema, text, message):
    path = _csv(tmp_path, text)
    with pytest.raises(DataError, match=message) as info:
        load_party_data(schema, "alice", path)
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path, schema):
    with pytest.raises(DataError, match="data file not found"):
        load_party_data(schema, "alice", tmp_path / "nope.csv")


def test_missing_as_category_uses_the_declared_state(tmp_path, schema):
    path = _csv(tmp_path, "id,smoke,lung\na,yes,\n")
    assert load_party_data(schema, "alice", path, missing_as_category=True).codes.tolist() == [
        [0, 2]
    ]
    # smoke has no '?' state: a missing smoke is still an error naming the cell
    path = _csv(tmp_path, "id,smoke,lung\na,,no\n")
    with pytest.raises(
        DataError, match="line 2, column 'smoke': missing value, and the missing state"
    ):
        load_party_data(schema, "alice", path, missing_as_category=True)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.pop("id_column"), "'id_column' must be a non-empty string"),
        (
            lambda s: s["variables"][0].update(owner="carol"),
            "variable 'smoke': owner must be 'alice' or 'bob'",
        ),
        (
            lambda s: s["variables"][0].update(states=["yes"]),
            "variable 'smoke': 'states' must list at least two",
        ),
        (lambda s: s["variables"][0].update(states=["a", "a"]), "'states' has a duplicate"),
        (
            lambda s: s["variables"].append(dict(s["variables"][0])),
            "variable 'smoke' is declared twice",
        ),
    ],
)
def test_schema_errors(mutate, message):
    raw = json.loads(json.dumps(SCHEMA))
    mutate(raw)
    with pytest.raises(DataError, match=message):
        Schema.from_dict(raw)


def test_schema_file_errors(tmp_path):
    bad = tmp_path / "schema.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match=r"schema\.json: not valid JSON \(line 1"):
        Schema.load(str(bad))


def test_fingerprint_is_stable_and_sensitive(schema):
    assert schema.fingerprint() == Schema.from_dict(json.loads(schema.to_json())).fingerprint()
    changed = json.loads(json.dumps(SCHEMA))
    changed["variables"][2]["states"] = ["neg", "pos"]  # the order of a domain matters
    assert Schema.from_dict(changed).fingerprint() != schema.fingerprint()


def test_join_needs_the_same_ids(tmp_path, schema):
    alice = _csv(tmp_path, "id,smoke,lung\na,yes,no\nb,no,no\n")
    bob = _csv(tmp_path, "id,xray\nb,pos\na,neg\n", "bob.csv")
    names, codes = load_joined(schema, alice, bob)
    assert names == ("smoke", "lung", "xray")
    assert codes.tolist() == [[0, 1, 1], [1, 1, 0]]
    bob = _csv(tmp_path, "id,xray\nb,pos\nc,neg\n", "bob.csv")
    with pytest.raises(DataError, match="record id 'a' has no row in .*use --align psi"):
        load_joined(schema, alice, bob)


def test_datasets_make_writes_a_consistent_split(asia_dir):
    schema = Schema.load(str(asia_dir / "schema.json"))
    assert [v.owner for v in schema.variables] == ["alice", "bob"] * 4
    names, codes = load_joined(schema, asia_dir / "alice.csv", asia_dir / "bob.csv")
    assert codes.shape == (5000, 8)
    # bob's file is in another row order: the join is by id, not by position
    alice_ids = (asia_dir / "alice.csv").read_text().splitlines()[1].split(",")[0]
    bob_ids = (asia_dir / "bob.csv").read_text().splitlines()[1].split(",")[0]
    assert alice_ids != bob_ids
    assert np.all(codes >= 0)


# -- streaming: chunks of records, Parquet ---------------------------------------


def test_chunked_reading_gives_the_same_data_and_names_lines_across_chunks(tmp_path, schema):
    rows = [f"r{i:03d},{'yes' if i % 3 else 'no'},{('yes', 'no', '?')[i % 3]}" for i in range(50)]
    path = _csv(tmp_path, "id,smoke,lung\n" + "\n".join(reversed(rows)) + "\n")
    whole = load_party_data(schema, "alice", path)
    chunked = load_party_data(schema, "alice", path, chunk_rows=7)
    assert chunked.ids == whole.ids and list(chunked.ids) == sorted(chunked.ids)
    np.testing.assert_array_equal(chunked.codes, whole.codes)
    bad = _csv(
        tmp_path, "id,smoke,lung\n" + "\n".join(rows[:20] + ["r999,maybe,no"]) + "\n", "bad.csv"
    )
    with pytest.raises(DataError, match=r"bad\.csv: line 22, column 'smoke': value 'maybe'"):
        load_party_data(schema, "alice", bad, chunk_rows=7)
    dup = _csv(tmp_path, "id,smoke,lung\n" + "\n".join([*rows[:20], rows[3]]) + "\n", "dup.csv")
    with pytest.raises(
        DataError, match=r"line 22, column 'id': duplicate record id 'r003' \(first on line 5\)"
    ):
        load_party_data(schema, "alice", dup, chunk_rows=7)
    gap = _csv(tmp_path, "id,smoke,lung\n" + "\n".join(rows[:10] + ["r500,yes,"]) + "\n", "gap.csv")
    with pytest.raises(DataError, match=r"line 12, column 'lung': missing value"):
        load_party_data(schema, "alice", gap, chunk_rows=4)


def test_parquet_reads_like_the_csv_and_names_rows(tmp_path, schema):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    csv_path = _csv(tmp_path, "id,lung,smoke\nb,no,yes\na,yes,no\nc,,no\n")
    table = pa.table(
        {"id": ["b", "a", "c"], "lung": ["no", "yes", None], "smoke": ["yes", "no", "no"]}
    )
    pq.write_table(table, tmp_path / "alice.parquet", row_group_size=2)
    from_csv = load_party_data(schema, "alice", csv_path, missing_rule="category")
    from_parquet = load_party_data(
        schema, "alice", tmp_path / "alice.parquet", missing_rule="category", chunk_rows=2
    )
    assert from_parquet.ids == from_csv.ids == ("a", "b", "c")
    np.testing.assert_array_equal(from_parquet.codes, from_csv.codes)
    with pytest.raises(DataError, match=r"alice\.parquet: row 3, column 'lung': missing value"):
        load_party_data(schema, "alice", tmp_path / "alice.parquet")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match=r"broken\.parquet: not a valid Parquet file"):
        load_party_data(schema, "alice", tmp_path / "broken.parquet")


# -- formats users meet: other separators, keys, names the outputs cannot carry -------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "id;smoke;lung\na;yes;no\n",
            r"alice\.csv: line 1 has one column, but ';' appears in it: ppbn reads "
            r"comma-separated files; save the file with commas as separators$",
        ),
        (
            "id\tsmoke\tlung\na\tyes\tno\n",
            r"alice\.csv: line 1 has one column, but a tab appears in it",
        ),
        (
            "id,smoke,lung\na;yes;no\n",
            r"alice\.csv: line 2 has 1 fields, the header has 3 \(';' appears in it: "
            r"save the file with commas as separators\)$",
        ),
    ],
)
def test_a_csv_with_another_separator_is_named(tmp_path, schema, text, message):
    path = _csv(tmp_path, text)
    with pytest.raises(DataError, match=message):
        load_party_data(schema, "alice", path)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda s: s.update(missing_stat="?"),
            r"^schema: unknown key 'missing_stat': did you mean 'missing_state'\?",
        ),
        (
            lambda s: s.update(comment="x"),
            r"^schema: unknown key 'comment': remove it \(known keys: version, ",
        ),
        (
            lambda s: s["variables"][1].update(owenr="alice"),
            r"^schema: variable 'lung': unknown key 'owenr': did you mean 'owner'\?",
        ),
        (
            lambda s: s.update(version=2),
            r"^schema: schema 'version' 2 is not supported: this ppbn reads version 1$",
        ),
        (lambda s: s.update(version=True), r"^schema: schema 'version' True is not supported"),
        (
            lambda s: s["variables"][0].update(name="smoke level"),
            r"^schema: variable 'smoke level': the name has a space",
        ),
        (
            lambda s: s["variables"][0].update(name="Lung"),
            r"^schema: variable 'lung': the name differs from 'Lung' only in letter case",
        ),
        (
            lambda s: s["variables"][0].update(states=["yes", "no "]),
            r"^schema: variable 'smoke', state 'no ': the state has a blank at its start or end",
        ),
        (
            lambda s: s["variables"][0].update(states=["yes", "no\n"]),
            r"^schema: variable 'smoke', state 'no\\n': the state has",
        ),
    ],
)
def test_schema_refuses_unknown_keys_versions_and_names_the_outputs_cannot_carry(mutate, message):
    raw = json.loads(json.dumps(SCHEMA))
    mutate(raw)
    with pytest.raises(DataError, match=message) as info:
        Schema.from_dict(raw)
    assert "\n" not in str(info.value)


def test_every_key_the_schema_writes_reads_back():
    """The keys refused as unknown are exactly those no writer produces: version, id_column,
    missing_state, a continuous variable's type and bins with every private field."""
    raw = json.loads(json.dumps(SCHEMA))
    raw["version"] = 1
    raw["variables"].append(
        {
            "name": "age",
            "owner": "alice",
            "type": "continuous",
            "bins": {"method": "mgas", "count": 3, "min_records": 2, "min_granularity": 1},
        }
    )
    raw["variables"].append(
        {
            "name": "income",
            "owner": "bob",
            "type": "continuous",
            "bins": {"method": "edges", "count": 3, "edges": [1, 2], "publish_edges": True},
        }
    )
    schema = Schema.from_dict(raw)
    assert Schema.from_dict(json.loads(schema.to_json())) == schema
    assert Schema.from_dict(schema.public_dict()).fingerprint() == schema.fingerprint()
