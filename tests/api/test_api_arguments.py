"""The Python API names its own keywords, never a command-line flag, and refuses before any
work what it would not use: ``ppbn.simulate``'s records, overlap, policy (a LocalPolicy or
a dict of settings) and job keywords that need another; ``ppbn.sample``'s records above
the cap (the command line alike)."""

from __future__ import annotations

import pytest

import ppbn
from ppbn.api.result import MAX_CELLS
from ppbn.api.simulate import _policy
from ppbn.cli import main
from ppbn.commands import sample as sample_command
from ppbn.errors import UserError
from ppbn.jobs.base import ParameterError
from ppbn.jobs.policy import LocalPolicy


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"network": "asia", "records": -1}, r"^records must be a positive integer \(got -1\)"),
        ({"network": "asia", "records": True}, "^records must be a positive integer"),
        ({"records": 10}, r"^give network and records \(or data DIR\)"),
        ({"network": "asia", "records": 300, "overlap": 0.5}, "need align='psi'"),
        (
            {"network": "asia", "records": 300, "white_list": [["asia", "tub"]]},
            "^white_list needs search='hc'",
        ),
        ({"network": "asia", "records": 300, "params": {"tabu": 5}}, "^tabu needs search='hc'"),
        ({"network": "asia", "records": 300, "dp_delta": 1e-6}, "^dp_delta needs dp_epsilon"),
        (
            {"network": "asia", "records": 300, "policy": {"bogus": 1}},
            "^policy: unknown policy setting 'bogus'",
        ),
        (
            {"network": "asia", "records": 300, "policy": {"cache_mb": -1}},
            "^policy: policy setting cache_mb",
        ),
    ],
)
def test_simulate_names_its_keywords_before_any_work(tmp_path, kwargs, message):
    with pytest.raises(UserError, match=message):
        ppbn.simulate(out=tmp_path / "run", **kwargs)
    assert not (tmp_path / "run").exists()


def test_the_job_keyword_error_names_the_parameter():
    with pytest.raises(ParameterError) as err:
        ppbn.simulate(network="asia", records=300, fixed_edges=[["asia", "tub"]])
    assert err.value.parameter == "fixed_edges"


def test_simulate_takes_a_policy_or_a_dict_of_its_settings(tmp_path):
    policy = LocalPolicy(min_records=50)
    assert _policy(policy) is policy and _policy(None) is None
    assert _policy({"min_records": 50, "max_parents": 3}).max_parents == 3
    with pytest.raises(TypeError, match="policy must be a LocalPolicy or a dict"):
        _policy(["min_records"])
    sim = ppbn.simulate("asia", 150, kind="ping", policy={"min_records": 100}, seed=3)
    assert sim.succeeded, sim.outcome.error


@pytest.fixture(scope="module")
def network(asia_dir):
    return ppbn.load_result(asia_dir / "truth.bif")


def test_sample_refuses_a_table_over_the_cap_before_any_work(network, tmp_path):
    assert sample_command.MAX_CELLS == MAX_CELLS  # the help states the API's cap
    records = MAX_CELLS // len(network.variables) + 1
    with pytest.raises(UserError, match=f"^records {records}: .* over the cap of 100,000,000"):
        ppbn.sample(network, records, out=tmp_path / "s.csv")
    with pytest.raises(ValueError, match="^records must be a positive integer, not '10'"):
        ppbn.sample(network, "10")
    assert not (tmp_path / "s.csv").exists()
    assert len(ppbn.sample(network, 50, seed=1)) == 50


def test_the_sample_command_refuses_it_in_one_line(asia_dir, tmp_path, capsys):
    argv = ["sample", str(asia_dir / "truth.bif"), "--out", str(tmp_path / "s.csv")]
    assert main([*argv, "--records", "1000000000000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ppbn: error: --records 1000000000000: "), err
    assert "cap of 100,000,000" in err[0]
    assert not (tmp_path / "s.csv").exists()


def test_daemon_learn_refuses_an_unused_keyword_before_the_daemon_is_asked():
    """No daemon listens on port 1: the refusal comes before any call."""
    with ppbn.Daemon("127.0.0.1:1", insecure=True) as daemon:
        with pytest.raises(UserError, match="white_list needs search='hc'"):
            daemon.learn(max_parents=2, white_list=[["a", "b"]])
        with pytest.raises(UserError, match="dp_delta needs dp_epsilon"):
            daemon.learn(dp_delta=1e-9)


def test_a_network_result_refuses_a_sample_over_the_cap(network):
    records = MAX_CELLS // len(network.variables) + 1
    with pytest.raises(UserError, match="over the cap of 100,000,000"):
        network.sample(records)
