"""``ppbn schema merge --party-name ROLE=NAME``: display names written into this party's
copy, outside the public fingerprint, and shown by ``ppbn show``."""

from __future__ import annotations

import json

import pytest

from ppbn.bn.schema import Schema
from ppbn.cli import main

PARTIAL = {
    "alice": {
        "id_column": "id",
        "variables": [{"name": "a", "owner": "alice", "states": ["x", "y"]}],
    },
    "bob": {"id_column": "id", "variables": [{"name": "b", "owner": "bob", "states": ["u", "v"]}]},
}


@pytest.fixture
def partials(tmp_path):
    paths = []
    for role, schema in PARTIAL.items():
        path = tmp_path / f"{role}.json"
        path.write_text(json.dumps(schema))
        paths.append(str(path))
    return paths


def test_names_are_written_and_leave_the_fingerprint_alone(tmp_path, partials):
    plain, named = tmp_path / "plain.json", tmp_path / "named.json"
    assert main(["schema", "merge", *partials, "--out", str(plain)]) == 0
    argv = ["--party-name", "alice=Acme Insurance", "--party-name", "bob=City Clinic"]
    assert main(["schema", "merge", *partials, *argv, "--out", str(named)]) == 0
    schema = Schema.load(str(named))
    assert schema.party_label("alice") == "Acme Insurance (alice)"
    assert schema.fingerprint() == Schema.load(str(plain)).fingerprint()


def exit_code(argv: list[str]) -> int:
    """The command's exit code, whether argparse exits or the command returns."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


@pytest.mark.parametrize(
    ("value", "message"),
    [("carol=X", "ROLE=NAME"), ("alice=", "non-empty"), ("alice=a\x01b", "non-printable")],
)
def test_a_bad_name_is_one_line_and_writes_nothing(tmp_path, partials, capsys, value, message):
    out = tmp_path / "m.json"
    assert exit_code(["schema", "merge", *partials, "--party-name", value, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_show_labels_the_owners_with_the_names(tmp_path, capsys):
    network = {
        "variables": ["a", "b"],
        "states": {"a": ["x", "y"], "b": ["u", "v"]},
        "parents": {"a": [], "b": ["a"]},
        "edges": [["a", "b"]],
        "owners": {"a": "alice", "b": "bob"},
        "party_names": {"alice": "Acme Insurance"},
    }
    path = tmp_path / "network.json"
    path.write_text(json.dumps(network))
    assert main(["show", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Acme Insurance (alice) (1): a" in text and "  bob (1): b" in text
