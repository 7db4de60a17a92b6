"""Input formats users really meet, at the command line: names and values the outputs
cannot carry, CSVs saved with another separator, misspelled or unsupported schema keys.
Each is refused with one line (exit code 2) when the files are loaded, before any
learning, rather than when a job writes its network.bif.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppbn.cli import main

ALLOWED_NAME = "(letters, digits, '_', '-', '.')"
ALLOWED_STATE = (
    '(any text without , ; ( ) { } | " // /* or a control character, no blank at either end)'
)


def run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def two_party_folder(
    folder: Path,
    name: str = "radius",
    states: tuple[str, str] = ("low", "high"),
    schema_extra: dict | None = None,
) -> Path:
    """schema.json, alice.csv and bob.csv for one alice variable ``name`` (``states``) and
    one bob variable; the CSV cells are quoted, so any value survives the CSV itself."""
    folder.mkdir(parents=True, exist_ok=True)
    schema = {
        "version": 1,
        "id_column": "id",
        "variables": [
            {"name": name, "owner": "alice", "states": list(states)},
            {"name": "target", "owner": "bob", "states": ["no", "yes"]},
        ],
        **(schema_extra or {}),
    }
    (folder / "schema.json").write_text(json.dumps(schema))

    def quoted(cell: str) -> str:
        return '"' + cell.replace('"', '""') + '"'

    ids = [f"r{i:02d}" for i in range(20)]
    (folder / "alice.csv").write_text(
        f"id,{quoted(name)}\n"
        + "".join(f"{r},{quoted(states[i % 2])}\n" for i, r in enumerate(ids))
    )
    (folder / "bob.csv").write_text(
        "id,target\n" + "".join(f"{r},{('no', 'yes')[i % 3 == 0]}\n" for i, r in enumerate(ids))
    )
    return folder


# -- names and values the network's BIF file cannot carry -------------------------------------


def test_schema_infer_refuses_a_column_name_with_a_space(tmp_path, capsys):
    """scikit-learn's breast cancer data: 'mean radius'. The inferred schema would load, and
    the learn job would fail only when writing network.bif, after all the secure work."""
    csv = tmp_path / "alice.csv"
    csv.write_text(
        "id,mean radius,label\n" + "".join(f"r{i},{10 + i},{'ab'[i % 2]}\n" for i in range(30))
    )
    out = tmp_path / "alice.json"
    code, err = run(
        [
            "schema",
            "infer",
            "--data",
            str(csv),
            "--owner",
            "alice",
            "--id",
            "id",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 2
    assert err == (
        f"ppbn: error: {csv}: line 1, column 'mean radius': the name has a space, which a BIF file cannot "
        f"carry; rename it in the file {ALLOWED_NAME}, e.g. 'mean_radius'\n"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("red, dark", "','"),
        ("a;b", "';'"),
        ("x (y)", "'('"),
        ("{x}", "'{'"),
        ("a|b", "'|'"),
        ('say "hi"', "'\"'"),
    ],
)
def test_schema_infer_refuses_a_value_the_bif_cannot_carry(tmp_path, capsys, value, shown):
    csv = tmp_path / "alice.csv"
    cell = '"' + value.replace('"', '""') + '"'
    csv.write_text("id,colour\nr1,blue\nr2,green\n" + f"r3,{cell}\nr4,blue\n")
    code, err = run(
        ["schema", "infer", "--data", str(csv), "--owner", "alice", "--id", "id"], capsys
    )
    assert code == 2
    assert err == (
        f"ppbn: error: {csv}: line 4, column 'colour': value {value!r} has {shown}, which a BIF file "
        f"cannot carry; change it in the file {ALLOWED_STATE}\n"
    )


def test_reference_refuses_a_name_with_a_space_before_any_work(tmp_path, capsys):
    data = two_party_folder(tmp_path / "data", name="mean radius")
    out = tmp_path / "ref"
    code, err = run(["reference", "--data", str(data), "--out", str(out)], capsys)
    assert code == 2
    assert err == (
        f"ppbn: error: {data / 'schema.json'}: variable 'mean radius': the name has a space, which a BIF "
        f"file cannot carry; rename it in the schema and the data {ALLOWED_NAME}, e.g. 'mean_radius'\n"
    )
    assert not out.exists()


def test_reference_out_with_a_comma_in_a_state_is_one_line_not_a_traceback(tmp_path, capsys):
    data = two_party_folder(tmp_path / "data", states=("low", "high, very"))
    out = tmp_path / "ref"
    code, err = run(["reference", "--data", str(data), "--out", str(out)], capsys)
    assert code == 2
    assert err == (
        f"ppbn: error: {data / 'schema.json'}: variable 'radius', state 'high, very': the state has ',', "
        f"which a BIF file cannot carry; rename it in the schema and the data {ALLOWED_STATE}\n"
    )
    assert not out.exists()


def test_party_serve_refuses_a_schema_the_outputs_cannot_carry(tmp_path, capsys):
    data = two_party_folder(tmp_path / "data", states=("low", "(high)"))
    code, err = run(
        [
            "party",
            "serve",
            "--role",
            "alice",
            "--schema",
            str(data / "schema.json"),
            "--data",
            str(data / "alice.csv"),
            "--listen",
            "127.0.0.1:0",
            "--peer",
            "127.0.0.1:9",
            "--insecure",
            "--out",
            str(tmp_path / "out"),
        ],
        capsys,
    )
    assert code == 2
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"ppbn: error: {data / 'schema.json'}: variable 'radius', state '(high)': the state has '(', "
        f"which a BIF file cannot carry; rename it in the schema and the data {ALLOWED_STATE}"
    )


def test_schema_merge_refuses_names_that_differ_only_in_case(tmp_path, capsys):
    """pgmpy's BIF reader matches variable names in lower case: 'Age' and 'age' would merge."""
    first, second = tmp_path / "alice.json", tmp_path / "bob.json"
    first.write_text(
        json.dumps(
            {
                "id_column": "id",
                "variables": [{"name": "Age", "owner": "alice", "states": ["y", "o"]}],
            }
        )
    )
    second.write_text(
        json.dumps(
            {
                "id_column": "id",
                "variables": [{"name": "age", "owner": "bob", "states": ["y", "o"]}],
            }
        )
    )
    code, err = run(["schema", "merge", str(first), str(second)], capsys)
    assert code == 2
    assert err == (
        f"ppbn: error: variable 'Age' of {first} and 'age' of {second} differ only in letter case, which "
        "pgmpy's BIF reader cannot tell apart; rename one column\n"
    )


# -- CSVs saved with another separator ---------------------------------------------------------


@pytest.mark.parametrize(("sep", "word"), [(";", "';'"), ("\t", "a tab")])
def test_schema_infer_names_another_separator(tmp_path, capsys, sep, word):
    csv = tmp_path / "alice.csv"
    csv.write_text(sep.join(["id", "smoke", "lung"]) + "\n" + sep.join(["r1", "yes", "no"]) + "\n")
    code, err = run(
        ["schema", "infer", "--data", str(csv), "--owner", "alice", "--id", "id"], capsys
    )
    assert code == 2
    assert err == (
        f"ppbn: error: {csv}: line 1 has one column, but {word} appears in it: ppbn reads comma-separated "
        "files; save the file with commas as separators\n"
    )


def test_reference_names_a_semicolon_csv(tmp_path, capsys):
    data = two_party_folder(tmp_path / "data")
    alice = data / "alice.csv"
    alice.write_text(alice.read_text().replace(",", ";").replace('"', ""))
    code, err = run(["reference", "--data", str(data)], capsys)
    assert code == 2
    assert err == (
        f"ppbn: error: {alice}: line 1 has one column, but ';' appears in it: ppbn reads comma-separated "
        "files; save the file with commas as separators\n"
    )


# -- schema keys: misspelled, misplaced, unsupported version -----------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s.update(missing_stat="?"),
            "unknown key 'missing_stat': did you mean 'missing_state'? (known keys: version, id_column, variables, missing_state, missing, party_names)",
        ),
        (
            lambda s: s.update(variabels=s["variables"]),
            "unknown key 'variabels': did you mean 'variables'? (known keys: version, id_column, variables, missing_state, missing, party_names)",
        ),
        (
            lambda s: s["variables"][0].update(stats=["a", "b"]),
            "variable 'radius': unknown key 'stats': did you mean 'states'? (known keys: name, owner, states, type, bins)",
        ),
        (
            lambda s: s["variables"][0].update(missing_state="?"),
            "variable 'radius': key 'missing_state' belongs at the top level of the schema, not in a variable",
        ),
        (
            lambda s: s.update(version=2),
            "schema 'version' 2 is not supported: this ppbn reads version 1",
        ),
        (
            lambda s: s.update(version="1"),
            "schema 'version' '1' is not supported: this ppbn reads version 1",
        ),
    ],
)
def test_reference_refuses_misspelled_keys_and_other_versions(tmp_path, capsys, change, message):
    data = two_party_folder(tmp_path / "data")
    schema = json.loads((data / "schema.json").read_text())
    change(schema)
    (data / "schema.json").write_text(json.dumps(schema))
    code, err = run(["reference", "--data", str(data)], capsys)
    assert code == 2
    assert err == f"ppbn: error: {data / 'schema.json'}: {message}\n"


def test_schema_merge_refuses_a_misspelled_key_in_a_partial_schema(tmp_path, capsys):
    first, second = tmp_path / "alice.json", tmp_path / "bob.json"
    first.write_text(
        json.dumps(
            {
                "id_column": "id",
                "missing_stat": "?",
                "variables": [{"name": "a", "owner": "alice", "states": ["x", "y"]}],
            }
        )
    )
    second.write_text(
        json.dumps(
            {"id_column": "id", "variables": [{"name": "b", "owner": "bob", "states": ["x", "y"]}]}
        )
    )
    code, err = run(["schema", "merge", str(first), str(second)], capsys)
    assert code == 2
    assert err.startswith(
        f"ppbn: error: {first}: unknown key 'missing_stat': did you mean 'missing_state'?"
    )
    assert err.count("\n") == 1
