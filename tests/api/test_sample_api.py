"""``NetworkResult.sample`` and ``ppbn.sample``: forward sampling of a learned network gives
its exact 1-way marginals, one column per variable with only its states, the same records
for the same seed; a network with withheld CPTs or a malformed one is refused.

(Named test_sample_api.py: tests/commands/test_sample.py holds the command's tests, and
two test modules of one basename cannot be collected together.)"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ppbn
from ppbn.api.result import NetworkResult, WithheldCptsError, load_result
from ppbn.api.sample import guarantee
from ppbn.cli import main
from ppbn.data.datasets import make_dataset
from ppbn.errors import DataError, UserError

RECORDS = 20_000


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> Path:
    """The reference learner's job folder on 2000 Asia records (network.json, network.bif),
    and the data folder beside it."""
    root = tmp_path_factory.mktemp("sample-api")
    make_dataset("asia", 2000, 5, root / "data")
    assert main(["reference", "--data", str(root / "data"), "--out", str(root / "job")]) == 0
    return root


def exact_marginals(network: NetworkResult) -> dict[str, dict[str, float]]:
    from pgmpy.inference import VariableElimination

    inference = VariableElimination(network.to_pgmpy())
    found = {}
    for v in network.variables:
        factor = inference.query([v], show_progress=False)
        found[v] = dict(zip(factor.state_names[v], factor.values.tolist(), strict=True))
    return found


def assert_marginals_match(frame: pd.DataFrame, network: NetworkResult) -> None:
    """Every state's frequency within 5 standard errors of its exact probability."""
    n = len(frame)
    for v, exact in exact_marginals(network).items():
        counts = frame[v].astype(str).value_counts()
        for state, p in exact.items():
            se = math.sqrt(p * (1 - p) / n)
            assert abs(counts.get(state, 0) / n - p) <= 5 * se + 1e-12, (v, state, p, counts)


def test_samples_have_the_networks_marginals(learned, capsys):
    network = load_result(learned / "job")
    frame = network.sample(RECORDS, seed=11)
    assert len(frame) == RECORDS
    document = json.loads((learned / "job" / "network.json").read_text())
    assert list(frame.columns) == list(document["parents"])  # the file's order
    for v in frame.columns:
        assert set(frame[v].astype(str)) <= set(network.cpts[v].states)
        assert list(frame[v].cat.categories) == list(network.cpts[v].states)
    assert_marginals_match(frame, network)


def test_the_same_seed_gives_the_same_records(learned):
    network = load_result(learned / "job")
    first = network.sample(500, seed=3)
    pd.testing.assert_frame_equal(first, network.sample(500, seed=3))
    assert not first.equals(network.sample(500, seed=4))
    assert len(network.sample(1)) == 1  # no seed: fresh entropy
    assert len(network.sample(np.int64(3), seed=np.int64(1))) == 3


@pytest.mark.parametrize("records", [0, -3, 1.5, True, "10"])
def test_records_must_be_a_positive_integer(learned, records):
    with pytest.raises(ValueError, match="records must be a positive integer"):
        load_result(learned / "job").sample(records)


def test_withheld_cpts_are_refused_naming_the_variables(learned):
    document = json.loads((learned / "job" / "network.json").read_text())
    for v in ("lung", "either"):
        del document["parameters"][v]
    network = NetworkResult.from_document(document, source="bob/network.json")
    with pytest.raises(ValueError, match=r"CPTs of lung, either are withheld") as info:
        network.sample(10)
    assert isinstance(info.value, UserError) and isinstance(info.value, WithheldCptsError)
    assert "\n" not in str(info.value) and str(info.value).startswith("bob/network.json: ")


def test_a_bif_file_is_sampled_too(learned):
    truth = load_result(learned / "data" / "truth.bif")
    frame = truth.sample(RECORDS, seed=2)
    assert list(frame.columns) == list(truth.variables)
    assert_marginals_match(frame, truth)


def test_ppbn_sample_writes_the_file_whole_and_refuses_an_existing_one(learned, tmp_path):
    out = tmp_path / "synth.csv"
    frame = ppbn.sample(learned / "job", 300, seed=9, out=out)
    read = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert read.equals(frame.astype(str))
    before = out.read_bytes()
    with pytest.raises(UserError, match="exists"):
        ppbn.sample(learned / "job", 300, seed=10, out=out)
    assert out.read_bytes() == before
    ppbn.sample(learned / "job", 300, seed=10, out=out, force=True)
    assert out.read_bytes() != before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_parquet_and_the_schemas_column_order(learned, tmp_path):
    schema = json.loads((learned / "data" / "schema.json").read_text())
    schema["variables"].reverse()
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    out = tmp_path / "synth.parquet"
    frame = ppbn.sample(learned / "job", 200, seed=1, out=out, schema=tmp_path / "schema.json")
    names = [v["name"] for v in schema["variables"]]
    assert list(frame.columns) == names
    pd.testing.assert_frame_equal(pd.read_parquet(out), frame)


def test_a_schema_of_other_variables_is_refused(learned, tmp_path):
    schema = json.loads((learned / "data" / "schema.json").read_text())
    schema["variables"] = schema["variables"][:-1]
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    with pytest.raises(DataError, match=r"schema\.json: not the schema of the network's"):
        ppbn.sample(learned / "job", 10, schema=tmp_path / "schema.json")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda p: p["asia"].update(table=[[0.5, 0.2]]), "row 0 of the CPT of 'asia' sums to 0.7"),
        (lambda p: p["asia"].update(table=[[-0.5, 1.5]]), "negative or non-finite"),
        (lambda p: p["asia"].update(table=[[1.0]]), "one column per state"),
        (lambda p: p["asia"].update(table=[[0.5, 0.5], [0.5, 0.5]]), "not a valid network"),
        (lambda p: p["xray"].update(parents=[]), "over parents"),
    ],
)
def test_a_malformed_network_is_refused_naming_the_file(learned, tmp_path, change, why):
    job = tmp_path / "job"
    shutil.copytree(learned / "job", job)
    document = json.loads((job / "network.json").read_text())
    change(document["parameters"])
    (job / "network.json").write_text(json.dumps(document))
    with pytest.raises(DataError, match=f"^{job / 'network.json'}: .*{why}"):
        load_result(job).sample(10)


def test_the_privacy_guarantee_is_read_from_network_json(learned):
    document = json.loads((learned / "job" / "network.json").read_text())
    assert guarantee(NetworkResult.from_document(document)) is None
    dp = {**document, "privacy": {"epsilon": 1.5, "delta": 1e-9, "structure_share": 0.3}}
    assert guarantee(NetworkResult.from_document(dp)) == (1.5, 1e-9)
    pram = {**document, "privacy": [{"variables": ["asia"], "gamma": 3.0}]}
    assert guarantee(NetworkResult.from_document(pram)) is None
    for bad in ({"epsilon": 0, "delta": 0.0}, {"epsilon": 1.0}, {"epsilon": 1.0, "delta": 1}):
        with pytest.raises(DataError, match="'privacy' object needs a positive 'epsilon'"):
            guarantee(NetworkResult.from_document({**document, "privacy": bad}))


def test_the_records_are_those_of_the_one_forward_sampler(learned):
    """``ppbn.bn.networks.sample`` (the sampler of ``datasets make``) on ``bayes_net()``."""
    from ppbn.bn.networks import sample

    network = load_result(learned / "job")
    codes = sample(network.bayes_net(), 100, 8)
    frame = network.sample(100, 8, columns=network.variables)
    assert np.array_equal(np.column_stack([frame[v].cat.codes for v in frame]), codes)
    with pytest.raises(ValueError, match="'nope' is not a variable"):
        network.sample(10, columns=("asia", "nope"))
