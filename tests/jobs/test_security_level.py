"""A job's security level: a parameter of every kind, held against each daemon's policy.

A kind runs only at the levels whose defences it has; a daemon never runs below its
policy's ``min_security``, whoever asked.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ppbn.bn.schema import Schema
from ppbn.errors import UserError
from ppbn.jobs.base import (
    ParameterError,
    PolicyScope,
    check_job_policy,
    checked_params,
    job_security,
)
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal
from ppbn.jobs.registry import job_kind
from ppbn.protocols.constants import MALICIOUS, SEMI_HONEST

SCHEMA = Schema.from_dict(
    {
        "id_column": "id",
        "variables": [
            {"name": n, "owner": o, "states": ["no", "yes"]}
            for n, o in (("a", "alice"), ("b", "bob"), ("c", "alice"), ("d", "bob"))
        ],
    }
)
SCOPE = PolicyScope("alice", SCHEMA, 1000)
STRICT = replace(LocalPolicy(), min_security=MALICIOUS)


def test_a_semi_honest_request_keeps_the_kinds_own_parameters():
    plain = checked_params(job_kind("tables"), {}, SCHEMA)
    assert "security" not in plain and job_security(plain) == SEMI_HONEST
    said = checked_params(job_kind("tables"), {"security": SEMI_HONEST}, SCHEMA)
    assert said == plain


def test_a_stronger_level_is_kept_for_the_kinds_that_have_it():
    params = checked_params(job_kind("ping"), {"security": MALICIOUS}, SCHEMA)
    assert job_security(params) == MALICIOUS
    params = checked_params(job_kind("tables"), {"security": MALICIOUS}, SCHEMA)
    assert job_security(params) == MALICIOUS


@pytest.mark.parametrize("kind", ["learn", "pram", "perturb-learn"])
def test_a_kind_without_the_defences_refuses_the_level_by_name(kind):
    with pytest.raises(ParameterError, match="not available for") as caught:
        checked_params(job_kind(kind), {"security": MALICIOUS}, SCHEMA)
    assert caught.value.parameter == "security"


@pytest.mark.parametrize("value", ["paranoid", 1, None, ["malicious"]])
def test_an_unknown_level_is_refused(value):
    with pytest.raises(ParameterError, match="security must be one of") as caught:
        checked_params(job_kind("ping"), {"security": value}, SCHEMA)
    assert caught.value.parameter == "security"


def test_the_policy_minimum_refuses_a_weaker_job_whoever_asked():
    params = checked_params(job_kind("tables"), {}, SCHEMA)
    with pytest.raises(PolicyRefusal, match="below this party's policy minimum") as caught:
        check_job_policy(job_kind("tables"), params, STRICT, SCOPE)
    assert caught.value.parameter == "security"
    strong = checked_params(job_kind("tables"), {"security": MALICIOUS}, SCHEMA)
    check_job_policy(job_kind("tables"), strong, STRICT, SCOPE)  # accepted
    check_job_policy(job_kind("tables"), strong, LocalPolicy(), SCOPE)  # stronger is fine


def test_the_policy_file_names_a_bad_level(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('min_security = "paranoid"\n')
    with pytest.raises(UserError, match="policy setting min_security must be one of"):
        LocalPolicy.load(path)
    path.write_text('min_security = "malicious"\n')
    assert LocalPolicy.load(path).min_security == MALICIOUS
    assert 'min_security = "malicious"' in LocalPolicy.load(path).to_toml()
