"""``ppbn show``: every edge of a network.json, a job folder or a BIF file, parents,
owners, CPTs, the differences from a reference, the picture; bad input is one line, exit
2. Also ``ppbn reference --plot`` and the owners in network.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppbn.api.result import NetworkResult, load_result
from ppbn.bn.io import network_json, write_bif
from ppbn.bn.model import BayesNet
from ppbn.cli import main

NAMES = tuple(f"v{i}" for i in range(8))
# 14 edges: more than any listing would show before cutting with "..."
PARENTS = {
    "v0": (),
    "v1": ("v0",),
    "v2": ("v0", "v1"),
    "v3": ("v1", "v2"),
    "v4": ("v0", "v2", "v3"),
    "v5": ("v3", "v4"),
    "v6": ("v4", "v5"),
    "v7": ("v5", "v6"),
}
OWNERS = {v: ("alice", "bob")[i % 2] for i, v in enumerate(NAMES)}


def _net() -> BayesNet:
    rng = np.random.default_rng(0)
    cpts = {}
    for v in NAMES:
        rows = rng.uniform(0.1, 1.0, size=(2 ** len(PARENTS[v]), 2))
        cpts[v] = rows / rows.sum(axis=1, keepdims=True)
    states = {v: ("lo", "hi") for v in NAMES}
    return BayesNet(NAMES, states, dict(PARENTS), cpts)


EDGES = _net().edges()


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    net = _net()
    job = tmp_path / "job"
    job.mkdir()
    document = network_json(net, NAMES, EDGES, "bdeu", 1.0, OWNERS)
    (job / "network.json").write_text(json.dumps(document))
    write_bif(net, tmp_path / "net.bif")
    schema = {
        "id_column": "id",
        "variables": [{"name": v, "owner": OWNERS[v], "states": ["lo", "hi"]} for v in NAMES],
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    return {"json": job / "network.json", "job": job, "bif": tmp_path / "net.bif"}


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("kind", ["json", "job", "bif"])
def test_every_edge_is_printed(files, capsys, kind):
    assert len(EDGES) > 10
    code, out, _ = _run(["show", str(files[kind])], capsys)
    assert code == 0 and "..." not in out
    for p, c in EDGES:
        assert f"{p} -> {c}" in out
    assert "v4 [alice]" in out if kind != "bif" else "[alice]" not in out
    assert "v0, v2, v3" in out  # v4's parents


def test_owners_from_a_schema_and_the_json_form(files, capsys, tmp_path):
    schema = str(tmp_path / "schema.json")
    code, out, _ = _run(["show", str(files["bif"]), "--schema", schema, "--format", "json"], capsys)
    shown = json.loads(out)
    assert code == 0 and shown["owners"] == OWNERS
    assert sorted(map(tuple, shown["edges"])) == sorted(EDGES)
    assert shown["parents"]["v4"] == ["v0", "v2", "v3"]


def test_reference_marks_the_differences(files, capsys, tmp_path):
    document = json.loads(files["json"].read_text())
    document["parents"]["v7"] = ["v5"]  # v6 -> v7 missing
    document["parents"]["v1"], document["parents"]["v0"] = [], ["v1"]  # v0 -> v1 reversed
    document["parents"]["v6"] = ["v4", "v5", "v0"]  # v0 -> v6 extra
    del document["edges"]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(document))
    code, out, _ = _run(["show", str(other), "--reference", str(files["bif"])], capsys)
    assert code == 0
    assert "v1 -> v0   [reversed (reference: v0 -> v1)]" in out
    assert "v0 -> v6   [extra]" in out and "missing: v6 -> v7" in out
    assert "structural Hamming distance 3 (1 extra, 1 missing, 1 reversed)" in out
    code, out, _ = _run(
        ["show", str(other), "--reference", str(files["job"]), "--format", "json"], capsys
    )
    diff = json.loads(out)["reference"]
    assert (diff["shd"], diff["extra"], diff["missing"], diff["reversed"]) == (3, 1, 1, 1)


def test_cpt_and_plot(files, capsys, tmp_path):
    png = tmp_path / "pics" / "net.png"
    code, out, err = _run(["show", str(files["job"]), "--cpt", "v3", "--plot", str(png)], capsys)
    assert code == 0 and png.stat().st_size > 10_000 and f"wrote {png}" in err
    assert "P(v3 | v1, v2): 4 x 2" in out
    table = out.split("P(v3 | v1, v2): 4 x 2\n")[1].splitlines()
    assert table[0].split() == ["v1", "v2", "|", "lo", "hi"] and len(table) == 5
    code, _, err = _run(["show", str(files["job"]), "--cpt", "v33"], capsys)
    assert code == 2 and "did you mean 'v3'?" in err


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        (None, "gone.json", "file not found"),
        ("{not json", "bad.json", "not valid JSON (line 1, column 2)"),
        ('{"order": []}', "bad.json", "not a ppbn network.json: no 'parents' object"),
        ('{"parents": {"a": ["z"]}}', "bad.json", "'a' has parent 'z', not a variable"),
        ("hello\n", "notes.txt", "not a BIF file"),
        (
            '{"parents": {"a": ["b"], "b": ["a"]}}',
            "network.json",
            "the edges form a cycle a -> b -> a",
        ),
        ('{"parents": {"a": [], "b": ["a"], "c": ["c"]}}', "n.json", "a cycle c -> c"),
        (
            '{"parents": {"a": [], "b": ["a"]}, "edges": ["ab"]}',
            "n.json",
            "'edges' is not a list of",
        ),
        ('{"parents": {"a": [], "b": ["a", "a"]}}', "n.json", "'parents' of 'b' names 'a' twice"),
        ('{"parents": {"a": []}, "order": [["a"]]}', "n.json", "'order' is not a list of names"),
        ('{"parents": {"a": []}, "stats": 5}', "n.json", "'stats' is not an object"),
        ('{"parents": {"a": []}, "score": [1]}', "n.json", "'score' is not a string"),
        ('{"parents": {"a": []}, "parameters": [1]}', "n.json", "'parameters' is not an object"),
        (
            '{"parents": {"a": []}, "parameters": {"a": {"parents": [], "states": "xy", "table": [[1]]}}}',
            "n.json",
            "the CPT entry of 'a' is malformed",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path, capsys, text, name, message):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    code, _, err = _run(["show", str(path)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"ppbn: error: {path}: ") and message in err


def test_a_folder_without_a_result_is_one_line(tmp_path, capsys):
    code, _, err = _run(["show", str(tmp_path)], capsys)
    assert code == 2 and err == f"ppbn: error: {tmp_path}: no network.json in this folder\n"


def test_the_plot_takes_owners_from_the_schema(files, tmp_path):
    document = json.loads(files["json"].read_text())
    del document["owners"]
    (tmp_path / "bare.json").write_text(json.dumps(document))
    network = load_result(tmp_path / "bare.json", schema=tmp_path / "schema.json")
    assert network.owners == OWNERS
    reference = NetworkResult.from_document(
        {"parents": {v: [p for p, c in EDGES[1:] if c == v] for v in NAMES}}
    )
    marks = network.plot(tmp_path / "p.png", reference)
    assert marks["extra"] == [EDGES[0]] and (tmp_path / "p.png").is_file()


def test_reference_plot_and_owners_in_network_json(small_data, tmp_path, capsys):
    png, out = tmp_path / "ref.png", tmp_path / "out"
    code, _, err = _run(
        ["reference", "--data", str(small_data), "--plot", str(png), "--out", str(out)], capsys
    )
    assert code == 0 and png.stat().st_size > 10_000 and f"wrote {png}" in err
    written = load_result(out)
    assert set(written.owners.values()) == {"alice", "bob"}
    assert set(written.owners) == set(written.variables)
