"""A learn job's network.json carries its party's display names; a NetworkResult reads them
back (or takes them from a local schema) and draws its legend with them."""

from __future__ import annotations

import json

import numpy as np

from ppbn.api.result import load_result
from ppbn.bn.io import network_json
from ppbn.bn.model import BayesNet

NAMES = {"alice": "Acme Insurance", "bob": "City Clinic"}
OWNERS = {"age": "alice", "ill": "bob"}


def small_net() -> BayesNet:
    return BayesNet(
        ("age", "ill"),
        {"age": ("young", "old"), "ill": ("no", "yes")},
        {"age": (), "ill": ("age",)},
        {"age": np.array([[0.6, 0.4]]), "ill": np.array([[0.9, 0.1], [0.7, 0.3]])},
    )


def test_network_json_keeps_the_party_names(tmp_path):
    document = network_json(
        small_net(), ("age", "ill"), [("age", "ill")], "bdeu", 0.0, OWNERS, NAMES
    )
    assert document["party_names"] == NAMES
    assert "party_names" not in network_json(small_net(), ("age", "ill"), [], "bdeu", 0.0, OWNERS)
    path = tmp_path / "network.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = load_result(path)
    assert result.party_names == NAMES and result.owners == OWNERS
    result.plot(tmp_path / "net.png")
    assert (tmp_path / "net.png").read_bytes().startswith(b"\x89PNG")


def test_a_local_schema_gives_the_names_a_document_lacks(tmp_path):
    document = network_json(small_net(), ("age", "ill"), [("age", "ill")], "bdeu", 0.0)
    (tmp_path / "network.json").write_text(json.dumps(document), encoding="utf-8")
    schema = {
        "id_column": "id",
        "variables": [
            {"name": "age", "owner": "alice", "states": ["young", "old"]},
            {"name": "ill", "owner": "bob", "states": ["no", "yes"]},
        ],
        "party_names": {"bob": "City Clinic"},
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    assert load_result(tmp_path / "network.json").party_names == {}
    named = load_result(tmp_path / "network.json", tmp_path / "schema.json")
    assert named.party_names == {"bob": "City Clinic"} and named.owners == OWNERS


def test_the_learn_job_writes_its_own_schemas_names_only_when_it_has_some():
    from types import SimpleNamespace

    from ppbn.bn.schema import Schema
    from ppbn.jobs.learn import result_json

    def schema(**extra) -> Schema:
        variables = [
            {"name": "age", "owner": "alice", "states": ["young", "old"]},
            {"name": "ill", "owner": "bob", "states": ["no", "yes"]},
        ]
        return Schema.from_dict({"id_column": "id", "variables": variables, **extra})

    net = small_net()
    search = SimpleNamespace(order=net.names, edges=[("age", "ill")], parents=net.parents)
    config = SimpleNamespace(mode="bdeu", tau=0.0, disclosure="both", search="k2", ess=1.0, dp=None)
    seen = SimpleNamespace(cpts={"age": net.cpts["age"]}, unobserved={})
    for network, parameters in ((net, None), (None, seen)):
        result = SimpleNamespace(search=search, network=network, parameters=parameters)
        assert result_json(result, schema(party_names=NAMES), config)["party_names"] == NAMES
        assert "party_names" not in result_json(result, schema(), config)
