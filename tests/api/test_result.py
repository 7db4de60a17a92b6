"""A network document read back as Python objects: pgmpy, networkx and DOT agree with it,
and what a party was not shown is refused rather than invented."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ppbn.api.result import NetworkResult, load_result
from ppbn.errors import UserError

DOCUMENT = {
    "order": ["a", "b", "c"],
    "edges": [["a", "b"], ["a", "c"], ["b", "c"]],
    "parents": {"a": [], "b": ["a"], "c": ["a", "b"]},
    "owners": {"a": "alice", "b": "bob", "c": "alice"},
    "parameters": {
        "a": {"parents": [], "states": ["x", "y"], "table": [[0.3, 0.7]], "unobserved": []},
        "b": {
            "parents": ["a"],
            "states": ["u", "v", "w"],
            "table": [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]],
            "unobserved": [],
        },
        "c": {
            "parents": ["a", "b"],
            "states": ["n", "m"],
            # rows: (a, b) in C order, first parent slowest
            "table": [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4], [0.5, 0.5], [0.4, 0.6]],
            "unobserved": [4],
        },
    },
    "score": "exact",
    "search": "k2",
}


def test_pgmpy_model_has_every_cpd_in_pgmpys_layout():
    model = NetworkResult.from_document(DOCUMENT).to_pgmpy()
    assert sorted(model.edges()) == [("a", "b"), ("a", "c"), ("b", "c")]
    cpd = model.get_cpds("c")
    # P(c = m | a = y, b = u): row 3 of ppbn's table (a = y is index 1, b = u index 0)
    assert cpd.get_value(c="m", a="y", b="u") == pytest.approx(0.4)
    assert cpd.get_value(c="n", a="x", b="w") == pytest.approx(0.7)
    assert model.get_cpds("b").state_names["b"] == ["u", "v", "w"]


def test_networkx_and_dot_carry_the_structure_and_owners():
    result = NetworkResult.from_document(DOCUMENT)
    graph = result.to_networkx()
    assert list(graph.edges()) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert graph.nodes["b"]["owner"] == "bob"
    dot = result.to_dot()
    assert '"a" -> "c";' in dot and dot.count("->") == 3
    assert dot.count("lightblue") == 2 and dot.count("lightsalmon") == 1


def test_a_withheld_cpt_is_named_not_invented():
    document = {**DOCUMENT, "parameters": {"a": DOCUMENT["parameters"]["a"]}}
    result = NetworkResult.from_document(document)
    assert result.withheld == ("b", "c")
    with pytest.raises(UserError, match="b, c were not disclosed"):
        result.to_pgmpy()
    assert result.to_networkx().number_of_edges() == 3


def test_comparing_two_networks():
    ours = NetworkResult.from_document(DOCUMENT)
    shifted = json.loads(json.dumps(DOCUMENT))
    shifted["parameters"]["a"]["table"] = [[0.31, 0.69]]
    assert ours.max_cpt_difference(NetworkResult.from_document(shifted)) == pytest.approx(0.01)
    other = {**DOCUMENT, "edges": [["b", "a"]], "parents": {"a": ["b"], "b": [], "c": []}}
    assert ours.structural_hamming_distance(NetworkResult.from_document(other)) == 3
    with pytest.raises(UserError, match="different structures"):
        ours.max_cpt_difference(NetworkResult.from_document(other))


def test_load_result_reads_a_job_folder(tmp_path):
    (tmp_path / "network.json").write_text(json.dumps(DOCUMENT))
    (tmp_path / "ledger.json").write_text(
        json.dumps({"party": "alice", "entries": [{"kind": "x"}]})
    )
    (tmp_path / "stats.json").write_text(json.dumps({"self": {"bytes_sent": 5}, "peer": {}}))
    result = load_result(tmp_path)
    assert result.ledger == ({"kind": "x"},)
    assert result.stats["bytes_sent"] == 5
    assert np.allclose(result.cpts["b"].array().sum(axis=1), 1.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"edges": []}), "not a ppbn network.json: no .parents."),
    ],
)
def test_a_bad_file_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "network.json"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as caught:
        load_result(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(UserError, match="file not found"):
        load_result(tmp_path / "nothing.json")


def test_a_cyclic_network_is_refused_naming_the_file_and_a_cycle(tmp_path):
    cyclic = {**DOCUMENT, "parents": {"a": ["c"], "b": ["a"], "c": ["a", "b"]}}
    path = tmp_path / "network.json"
    path.write_text(json.dumps(cyclic))
    with pytest.raises(UserError) as caught:
        load_result(path)
    assert str(caught.value) == f"{path}: the edges form a cycle a -> b -> c -> a"
    with pytest.raises(UserError, match="the edges form a cycle"):
        NetworkResult.from_document(cyclic)
