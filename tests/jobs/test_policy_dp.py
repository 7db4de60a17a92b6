"""The local policy's DP settings: validated like the others, printed and read back, and
held against every job (the per-job epsilon, require_dp)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ppbn.bn.schema import Schema
from ppbn.cli import main as ppbn_main
from ppbn.errors import UserError
from ppbn.jobs.base import (
    PING_JOB,
    JobKind,
    PolicyScope,
    PrivacyCost,
    check_job_policy,
    no_privacy_cost,
)
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal

SCHEMA = Schema.from_dict(
    {
        "id_column": "id",
        "variables": [
            {"name": "a", "owner": "alice", "states": ["x", "y"]},
            {"name": "b", "owner": "bob", "states": ["x", "y"]},
        ],
    }
)
SCOPE = PolicyScope("alice", SCHEMA, 1000)


def _kind(cost: PrivacyCost | None) -> JobKind:
    return JobKind(
        "test.release",
        lambda role, channel, context: {},
        lambda params, schema: params,
        "test",
        privacy_cost=lambda params: cost,
    )


def test_defaults_and_kinds():
    policy = LocalPolicy()
    assert (policy.dp_max_epsilon, policy.dp_total_epsilon, policy.require_dp) == (
        10.0,
        100.0,
        False,
    )
    assert no_privacy_cost({"dp_epsilon": 1.0}) is None
    assert PING_JOB.releases_data is False and _kind(None).releases_data is True
    assert PING_JOB.privacy_cost({}) is None


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("dp_max_epsilon = -1.0", "dp_max_epsilon"),
        ("dp_max_epsilon = inf", "dp_max_epsilon"),
        ("dp_total_epsilon = inf", "dp_total_epsilon"),
        ("dp_total_epsilon = +inf", "dp_total_epsilon"),
        ("dp_total_epsilon = nan", "dp_total_epsilon"),
        ("dp_total_epsilon = -0.5", "dp_total_epsilon"),
        ('dp_total_epsilon = "100"', "dp_total_epsilon"),
        ("dp_max_epsilon = true", "dp_max_epsilon"),
        ('require_dp = "yes"', "require_dp"),
        ("require_dp = 1", "require_dp"),
    ],
)
def test_bad_settings_are_one_line_naming_setting_and_file(tmp_path, text, setting):
    path = tmp_path / "policy.toml"
    path.write_text(text + "\n")
    with pytest.raises(UserError) as err:
        LocalPolicy.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: policy setting {setting} must be") and "\n" not in message


def test_json_policy_with_infinity_is_refused(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text('{"dp_total_epsilon": Infinity}')
    with pytest.raises(UserError, match="dp_total_epsilon must be a finite number"):
        LocalPolicy.load(path)


def test_good_settings_load_ints_and_zero(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text("dp_max_epsilon = 2\ndp_total_epsilon = 0\nrequire_dp = true\n")
    policy = LocalPolicy.load(path)
    assert (policy.dp_max_epsilon, policy.dp_total_epsilon, policy.require_dp) == (2, 0, True)


def test_over_the_per_job_maximum_is_refused():
    policy = LocalPolicy(dp_max_epsilon=2.0)
    policy.require_privacy(PrivacyCost(2.0, 1e-9), True)  # equal to the bound: accepted
    with pytest.raises(PolicyRefusal) as err:
        policy.require_privacy(PrivacyCost(2.5, 1e-9), True)
    assert err.value.parameter == "dp_epsilon"
    assert str(err.value) == (
        "dp_epsilon 2.5 is above this party's policy maximum dp_max_epsilon 2"
    )
    with pytest.raises(PolicyRefusal, match="dp_epsilon 2.5 is above"):
        check_job_policy(_kind(PrivacyCost(2.5, 1e-9)), {}, policy, SCOPE)
    with pytest.raises(PolicyRefusal, match="finite"):
        policy.require_privacy(PrivacyCost(-1.0, 0.0), True)


def test_require_dp_refuses_a_release_without_dp_and_lets_ping_through():
    policy = LocalPolicy(require_dp=True)
    with pytest.raises(PolicyRefusal) as err:
        check_job_policy(_kind(None), {}, policy, SCOPE)
    assert err.value.parameter == "dp_epsilon"
    assert str(err.value).endswith(
        "this party's policy requires a differentially private release (require_dp); "
        "ask with --dp-epsilon"
    )
    check_job_policy(PING_JOB, {"rounds": 1, "bytes": 0}, policy, SCOPE)  # random bytes only
    check_job_policy(_kind(PrivacyCost(1.0, 1e-9)), {}, policy, SCOPE)
    check_job_policy(_kind(None), {}, LocalPolicy(), SCOPE)  # not required: the exact release


def test_require_dp_names_kinds_without_a_dp_release():
    """pram, tables and the perturbation learners take no --dp-epsilon: the refusal says
    what does, instead of asking for a flag the kind does not take."""
    from ppbn.jobs.registry import job_kind

    policy = LocalPolicy(require_dp=True)
    for name, raw in (("pram", {"p": 0.3, "max_parents": 1}), ("tables", {"max_family": 2})):
        kind = job_kind(name)
        params = kind.check_params(raw, SCOPE.schema)
        with pytest.raises(PolicyRefusal) as err:
            check_job_policy(kind, params, policy, SCOPE)
        assert err.value.parameter == "kind"
        assert f"job kind {name} has no differentially private release" in str(err.value)
        assert "run a learn job with --dp-epsilon instead" in str(err.value)


def test_delta_over_the_per_job_maximum_is_refused():
    policy = LocalPolicy(dp_max_delta=1e-7)
    policy.require_privacy(PrivacyCost(1.0, 1e-7), True)  # equal to the bound: accepted
    with pytest.raises(PolicyRefusal) as err:
        policy.require_privacy(PrivacyCost(1.0, 0.9), True)
    assert err.value.parameter == "dp_delta"
    assert str(err.value) == "dp_delta 0.9 is above this party's policy maximum dp_max_delta 1e-07"
    assert LocalPolicy().dp_max_delta == 1e-6 and LocalPolicy().dp_total_delta == 1e-5


@pytest.mark.parametrize("value", ["1e-3", "0.5", "-1e-9", "nan", '"0"'])
def test_a_delta_bound_at_or_above_the_ceiling_is_refused(tmp_path, value):
    path = tmp_path / "policy.toml"
    for key in ("dp_max_delta", "dp_total_delta"):
        path.write_text(f"{key} = {value}\n")
        with pytest.raises(UserError, match=rf"{key} must be a number in \[0, 0.001\)"):
            LocalPolicy.load(path)


def test_to_toml_round_trip(tmp_path):
    policy = LocalPolicy(dp_max_epsilon=0.5, dp_total_epsilon=12.25, require_dp=True)
    text = policy.to_toml()
    assert "dp_max_epsilon = 0.5\n" in text and "dp_total_epsilon = 12.25\n" in text
    assert "require_dp = true\n" in text
    path = tmp_path / "policy.toml"
    path.write_text(text)
    loaded = LocalPolicy.load(path)
    assert loaded == LocalPolicy(
        dp_max_epsilon=0.5, dp_total_epsilon=12.25, require_dp=True, source=str(path)
    )


def test_policy_show_prints_the_settings_and_reads_back(tmp_path, capsys):
    path = tmp_path / "policy.toml"
    path.write_text("dp_total_epsilon = 3.0\nrequire_dp = true\n")
    assert ppbn_main(["policy", "show", "--policy", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "dp_total_epsilon = 3.0" in shown and "dp_max_epsilon = 10.0" in shown
    again = tmp_path / "again.toml"
    again.write_text(shown)
    assert LocalPolicy.load(again) == replace(LocalPolicy.load(path), source=str(again))
    assert ppbn_main(["policy", "show", "--policy", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["dp_total_epsilon"], data["require_dp"]) == (3.0, True)
