"""The one skeleton of the PRAM and perturbation jobs (``ppbn.jobs.randomized_job``): its
shared checks, and the policy order both paths follow (missing-value rule, path, records,
then this party's own randomization)."""

from __future__ import annotations

import math

import pytest

from ppbn.bn.schema import Schema
from ppbn.data.datasets import make_dataset
from ppbn.errors import UserError
from ppbn.jobs import perturb, pram
from ppbn.jobs.base import ParameterError, PolicyScope, check_job_policy
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal, PramPolicy
from ppbn.jobs.randomized_job import json_privacy, number_param, refuse_seed


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> Schema:
    folder = tmp_path_factory.mktemp("asia") / "data"
    make_dataset("asia", 200, 1, folder)
    return Schema.load(str(folder / "schema.json"))


def test_shared_parameter_checks():
    assert number_param("pram", {"p": 1}, "p", 0.0) == 1.0
    for bad in (True, math.inf, "0.2"):
        with pytest.raises(ParameterError, match="pram: 'p' must be a number"):
            number_param("pram", {"p": bad}, "p", 0.0)
    with pytest.raises(PolicyRefusal, match="perturb-learn: a randomization seed is never"):
        refuse_seed("perturb-learn", {"seed": 1})
    assert json_privacy([{"gamma": math.inf, "k": math.inf}]) == [{"gamma": "inf", "k": math.inf}]


def test_each_path_declares_its_two_kinds():
    assert [pram.SETUP_ONE_JOB.name, pram.SETUP_TWO_JOB.name] == ["pram", "pram-miner"]
    assert [perturb.SETUP_ONE_JOB.name, perturb.SETUP_TWO_JOB.name] == [
        "perturb-learn",
        "perturb-learn-miner",
    ]


def test_policy_order_is_the_same_on_both_paths(schema):
    jobs = [
        (pram.SETUP_TWO_JOB, {"p": 0.05}, "pram", "p"),
        (
            perturb.SETUP_TWO_JOB,
            {"learner": "nb", "class": "dysp", "p": 0.05},
            "perturb-learn-miner",
            "p",
        ),
    ]
    weak = LocalPolicy(pram=PramPolicy(min_p=0.2))
    for kind, raw, prefix, parameter in jobs:
        params = kind.check_params(raw, schema)
        with pytest.raises(UserError, match=f"^{prefix}: --missing available-case"):
            check_job_policy(
                kind, params, weak, PolicyScope("alice", schema, 200, "available-case")
            )
        with pytest.raises(PolicyRefusal, match=f"job kind '{prefix}' is on the"):
            check_job_policy(kind, params, LocalPolicy(paths=()), PolicyScope("miner", schema, 0))
        check_job_policy(kind, params, weak, PolicyScope("miner", schema, 0))  # holds no columns
        with pytest.raises(PolicyRefusal) as refused:
            check_job_policy(kind, params, weak, PolicyScope("alice", schema, 200))
        assert refused.value.parameter == parameter


def test_setup_one_learner_keeps_its_columns(schema):
    kind = perturb.SETUP_ONE_JOB
    params = kind.check_params({"learner": "nb", "class": "dysp", "p": 0.05}, schema)
    weak = LocalPolicy(pram=PramPolicy(min_p=0.2))
    learner = schema.owner("dysp")
    other = "alice" if learner == "bob" else "bob"
    check_job_policy(kind, params, weak, PolicyScope(learner, schema, 200))
    with pytest.raises(PolicyRefusal):
        check_job_policy(kind, params, weak, PolicyScope(other, schema, 200))
