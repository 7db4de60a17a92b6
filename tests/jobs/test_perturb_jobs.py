"""The perturbation learners as daemon jobs: ``perturb-learn`` (setup I, alice
with bob) and ``perturb-learn-miner`` (setup II, the miner) over real daemons on loopback
mutual TLS, against the local library call (``ppbn perturb learn``'s ``learn``) on the same
records; the local policy's refusals and the one-line parameter errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from daemon_trio import Trio

from ppbn.bn.schema import Schema
from ppbn.data.datasets import make_dataset
from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy, PramPolicy
from ppbn.lab.randomized_learning import Mechanism, learn, load_tables
from ppbn.parties.pki import make_local_pki
from ppbn.protocols.ledger import ALLOWED_KINDS

RECORDS = 2000
SEED = "test-perturb-jobs"
# a party that protects none of its variables: the identity mechanism may leave its host
PERMISSIVE = LocalPolicy(pram=PramPolicy(always_randomize=()), source="test: nothing protected")
OPTIONS = {
    "estimator": None,
    "alpha": 1.0,
    "max_depth": None,
    "min_count": 1.0,
    "positive": None,
    "encoding": "onehot",
    "cost": "expected",
    "iterations": 20_000,
    "seed": 0,
    "min_support": 0.05,
    "min_confidence": 0.6,
    "max_size": None,
}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("perturb-jobs")
    make_dataset(
        "asia", RECORDS, 5, base / "data"
    )  # alice: asia tub bronc xray; bob: smoke lung either dysp
    make_local_pki(base / "certs")
    return base


def _trio(world: Path, tmp: Path, policy: LocalPolicy):
    trio = Trio(world, tmp, SEED)
    for role in ("alice", "bob", "miner"):
        trio.start(role, policy=policy)
    trio.wait_for_handshakes()
    return trio


@pytest.fixture(scope="module")
def strict(world, tmp_path_factory):
    """Every daemon on the built-in policy (every variable protected, change probability >= 0.1)."""
    trio = _trio(world, tmp_path_factory.mktemp("strict"), LocalPolicy())
    yield trio
    trio.stop()


@pytest.fixture(scope="module")
def permissive(world, tmp_path_factory):
    trio = _trio(world, tmp_path_factory.mktemp("permissive"), PERMISSIVE)
    yield trio
    trio.stop()


def _run(trio: Trio, start_role: str, kind: str, params: dict) -> dict[str, dict]:
    """Every taking part daemon's model.json, ledger and result."""
    return {
        role: {
            "model": json.loads((job_dir / "model.json").read_text()),
            "ledger": json.loads((job_dir / "ledger.json").read_text()),
            "result": json.loads((job_dir / "result.json").read_text())["result"],
        }
        for role, job_dir in trio.run_job(start_role, kind, params).items()
    }


def _local(
    world: Path,
    learner: str,
    class_name: str | None,
    theta: float,
    randomized,
    seed: str | None = None,
    **options,
) -> dict:
    """``ppbn perturb learn``'s library call on the joined data (randomized here with ``seed``)."""
    (table,) = load_tables([world / "data"])
    mechanism = Mechanism(theta, None, (), tuple(randomized))
    return learn(
        learner, table, None, class_name, mechanism, {**OPTIONS, **options}, randomize_seed=seed
    )["model"]


def _model(document: dict) -> dict:
    return {
        k: v for k, v in document.items() if k not in ("mechanism", "privacy", "stats", "perturb")
    }


def _entries(ledger: dict, kind: str) -> list[dict]:
    assert {e["kind"] for e in ledger["entries"]} <= ALLOWED_KINDS
    return [e for e in ledger["entries"] if e["kind"] == kind]


def _owned(world: Path, party: str) -> list[str]:
    return [v.name for v in Schema.load(str(world / "data" / "schema.json")).owned_by(party)]


def test_setup_one_identity_naive_bayes_equals_the_local_learner_bit_for_bit(world, permissive):
    got = _run(
        permissive, "alice", "perturb-learn", {"learner": "nb", "class": "dysp", "theta": 1.0}
    )
    assert set(got) == {"alice", "bob"}
    expected = _local(world, "nb", "dysp", 1.0, _owned(world, "alice"))
    for role, files in got.items():
        assert _model(files["model"]) == expected, role  # exact float equality
        assert files["model"]["perturb"]["disclosed"] == _owned(world, "alice")
        assert files["model"]["stats"]["wall_s"] > 0 and files["model"]["stats"]["phases"]
        assert all(
            row["gamma"] == "inf" for row in files["model"]["privacy"]
        )  # theta = 1: not randomized
    # bob owns the class and learns: he received alice's columns; alice received the model
    (received,) = _entries(got["bob"]["ledger"], "randomized_data")
    assert received["source"] == "alice" and received["value"]["variables"] == _owned(
        world, "alice"
    )
    assert not _entries(got["bob"]["ledger"], "randomization_matrix")  # identity: sent as they are
    (model,) = _entries(got["alice"]["ledger"], "model")
    assert model["source"] == "bob" and model["value"] == expected
    assert not _entries(got["alice"]["ledger"], "randomized_data")
    assert got["alice"]["result"]["received"] == [] and got["bob"]["result"]["received"] == _owned(
        world, "alice"
    )


def test_identity_rules_and_naive_bayes_through_the_miner_equal_the_local_learner(
    world, permissive
):
    rules = _run(
        permissive, "alice", "perturb-learn", {"learner": "rules", "learner_party": "bob", "p": 0.0}
    )
    expected_rules = _local(world, "rules", None, 1.0, [])
    assert all(_model(files["model"]) == expected_rules for files in rules.values())
    assert _entries(rules["alice"]["ledger"], "model")[0]["source"] == "bob"
    got = _run(
        permissive,
        "miner",
        "perturb-learn-miner",
        {"learner": "nb", "class": "either", "theta": 1.0},
    )
    assert set(got) == {"alice", "bob", "miner"}
    expected = _local(world, "nb", "either", 1.0, [])
    assert all(_model(files["model"]) == expected for files in got.values())


def test_setup_two_theta_08_equals_the_local_learner_on_the_same_randomized_records(world, strict):
    params = {"learner": "nb", "class": "either", "theta": 0.8}
    got = _run(strict, "miner", "perturb-learn-miner", params)
    names = Schema.load(str(world / "data" / "schema.json")).names
    expected = _local(world, "nb", "either", 0.8, names, seed=SEED)
    for role, files in got.items():
        assert _model(files["model"]) == expected, role
        assert [row["gamma"] for row in files["model"]["privacy"]] == [pytest.approx(4.0)] * len(
            names
        )  # 0.8 / 0.2
        assert "TESTING ONLY" in files["result"]["warning"]
    miner = got["miner"]["ledger"]
    assert {e["source"] for e in _entries(miner, "randomized_data")} == {"alice", "bob"}
    assert len(_entries(miner, "randomization_matrix")) == len(
        names
    )  # one Warner block per variable
    for role in ("alice", "bob"):  # the parties see the model only, never each other's columns
        assert not _entries(got[role]["ledger"], "randomized_data")
        (model,) = _entries(got[role]["ledger"], "model")
        assert model["source"] == "miner" and model["value"] == expected


def test_setup_one_id3_theta_08_equals_the_local_learner_on_the_same_randomized_records(
    world, strict
):
    params = {"learner": "id3", "class": "dysp", "theta": 0.8, "max_depth": 3}
    got = _run(strict, "alice", "perturb-learn", params)
    expected = _local(world, "id3", "dysp", 0.8, _owned(world, "alice"), seed=SEED, max_depth=3)
    assert all(_model(files["model"]) == expected for files in got.values())
    assert got["bob"]["result"]["model"] == {"nodes": expected["nodes"], "depth": expected["depth"]}


@pytest.mark.parametrize(
    ("start", "kind", "params", "parameter"),
    [
        ("alice", "perturb-learn", {"learner": "nb", "class": "bronc", "theta": 1.0}, "theta"),
        ("alice", "perturb-learn", {"learner": "nb", "class": "bronc", "theta": 0.0}, "theta"),
        (
            "alice",
            "perturb-learn",
            {"learner": "nb", "class": "bronc", "theta": 0.8, "randomized": ["dysp"]},
            "randomized",
        ),
        ("miner", "perturb-learn-miner", {"learner": "id3", "class": "dysp", "p": 0.0}, "p"),
        ("miner", "perturb-learn-miner", {"learner": "id3", "class": "dysp", "p": 0.05}, "p"),
        ("miner", "perturb-learn-miner", {"learner": "id3", "class": "dysp", "p": 0.95}, "p"),
    ],
    ids=["theta-1", "theta-0", "unrandomized", "p-0", "p-below-min", "p-near-a-flip"],
)
def test_a_protected_variable_randomized_too_weakly_is_refused(
    strict, start, kind, params, parameter
):
    """Every party protects its variables: theta 1 (or a deterministic flip, theta 0) and p
    below 0.1 are refused before anything is sent. In setup I alice owns the class bronc, so
    bob is the one who would send, and his daemon refuses."""
    with strict.client(start) as client, pytest.raises(UserError) as refused:
        client.start(kind, params)
    message = str(refused.value)
    assert f"parameter {parameter!r}" in message and "\n" not in message, message


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"learner": "nb", "class": "nope", "theta": 0.8}, "class"),
        ({"learner": "svm", "class": "dysp", "theta": 0.8}, "learner"),
        ({"learner": "id3", "class": "dysp", "theta": 0.8, "alpha": 2}, "alpha"),
        ({"learner": "nb", "class": "dysp", "theta": 0.5}, "theta"),
        ({"learner": "nb", "class": "dysp", "theta": 0.8, "p": 0.2}, "theta"),
        ({"learner": "nb", "class": "dysp", "p": 0.2, "groups": [["asia", "dysp"]]}, "groups"),
        ({"learner": "rules", "theta": 0.8, "min_support": 0}, "min_support"),
        ({"learner": "perceptron", "class": "dysp", "theta": 0.8, "positive": "maybe"}, "positive"),
        ({"learner": "nb", "class": "dysp", "theta": 0.8, "seed": 7}, "seed"),
    ],
    ids=lambda x: str(x)[:30],
)
def test_a_bad_parameter_is_a_one_line_error_naming_it(strict, params, parameter):
    with strict.client("alice") as client, pytest.raises(UserError) as bad:
        client.start("perturb-learn", params)
    message = str(bad.value)
    assert repr(parameter) in message or f"{parameter} " in message, message
    assert "\n" not in message, message
