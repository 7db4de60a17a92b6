"""The parties' display names: a local, optional part of the schema file, checked like every
input, outside the fingerprint (and so outside the DP budget account), shown in pictures."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from ppbn.bn.draw import draw_network, owner_labels
from ppbn.bn.schema import Schema, party_label, role_label
from ppbn.errors import DataError

NAMES = {"alice": "Acme Insurance", "bob": "City Clinic"}


def schema_data(**extra) -> dict:
    return {
        "id_column": "id",
        "variables": [
            {"name": "age", "owner": "alice", "states": ["young", "old"]},
            {"name": "ill", "owner": "bob", "states": ["no", "yes"]},
        ],
        **extra,
    }


def test_names_are_read_and_written_back():
    schema = Schema.from_dict(schema_data(party_names={**NAMES, "miner": "Data Trust"}))
    assert schema.party_name("bob") == "City Clinic"
    assert schema.party_name("miner") == "Data Trust"
    assert schema.party_label("alice") == "Acme Insurance (alice)"
    assert Schema.from_dict(json.loads(schema.to_json())).party_names == schema.party_names


def test_without_names_a_party_is_its_role():
    schema = Schema.from_dict(schema_data(party_names={"bob": "City Clinic"}))
    assert schema.party_name("alice") == "alice" and schema.party_label("alice") == "alice"
    assert "party_names" not in Schema.from_dict(schema_data()).to_dict()
    assert party_label("bob", None) == "bob" and role_label("bob", {}) == "bob"
    assert role_label("bob", NAMES) == "bob (City Clinic)"


def test_names_stay_out_of_the_fingerprint_and_the_budget_account():
    from ppbn.parties.budget import dataset_key

    plain = Schema.from_dict(schema_data())
    named = Schema.from_dict(schema_data(party_names=NAMES))
    renamed = Schema.from_dict(schema_data(party_names={"alice": "Acme Group"}))
    assert "party_names" not in named.public_dict()
    assert plain.fingerprint() == named.fingerprint() == renamed.fingerprint()
    data = SimpleNamespace(ids=np.array(["1", "2"]), codes=np.array([[0, 1], [1, 0]]))
    assert dataset_key(plain, data) == dataset_key(named, data) == dataset_key(renamed, data)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["Acme"], "s.json: 'party_names' must be an object of role -> display name"),
        (
            {"carol": "Acme"},
            "s.json: 'party_names' 'carol': not a role (known roles: alice, bob, miner)",
        ),
        ({"alice": ""}, "s.json: 'party_names' 'alice': the name must be a non-empty string"),
        ({"alice": "   "}, "s.json: 'party_names' 'alice': the name must be a non-empty string"),
        ({"bob": 7}, "s.json: 'party_names' 'bob': the name must be a non-empty string"),
        (
            {"bob": "City\nClinic"},
            "s.json: 'party_names' 'bob': the name holds the non-printable character '\\n'",
        ),
        (
            {"bob": "City\x1b[31m"},
            "s.json: 'party_names' 'bob': the name holds the non-printable character '\\x1b'",
        ),
        ({"bob": "x" * 61}, "s.json: 'party_names' 'bob': the name has 61 characters, at most 60"),
    ],
)
def test_a_bad_name_is_one_line_naming_the_file_and_the_key(names, message):
    with pytest.raises(DataError) as caught:
        Schema.from_dict(schema_data(party_names=names), source="s.json")
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text


def test_names_in_a_variable_are_pointed_to_the_top_level():
    data = schema_data()
    data["variables"][0]["party_names"] = NAMES
    with pytest.raises(DataError, match="'party_names' belongs at the top level"):
        Schema.from_dict(data, source="s.json")


def test_the_legend_names_the_owners_by_their_display_names(tmp_path):
    owners = {"age": "alice", "ill": "bob"}
    assert owner_labels(owners, NAMES) == [
        ("alice", "Acme Insurance (alice)"),
        ("bob", "City Clinic (bob)"),
    ]
    assert owner_labels(owners) == [("alice", "alice"), ("bob", "bob")]
    picture, _ = draw_network(["age", "ill"], [("age", "ill")], owners, party_names=NAMES)
    assert picture.startswith(b"\x89PNG")


def test_with_party_names_writes_checked_names_into_a_merged_schema():
    from ppbn.data.schema_tools import with_party_names

    merged = with_party_names(schema_data(), {"alice": "Acme"})
    merged = with_party_names(merged, {"alice": "Acme Insurance", "bob": "City Clinic"})
    assert merged["party_names"] == NAMES
    assert Schema.from_dict(merged).fingerprint() == Schema.from_dict(schema_data()).fingerprint()
    with pytest.raises(DataError, match="^merged schema: 'party_names' 'carol': not a role"):
        with_party_names(schema_data(), {"carol": "Acme"})
