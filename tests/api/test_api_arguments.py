"""The Python API names its own keywords, never a command-line flag, and refuses before any
work what it would not use: ``ppbn.simulate``'s records, overlap, policy (a LocalPolicy or
a dict of settings), job keywords that need another and the settings of its PRAM and
perturbation paths; ``ppbn.sample``'s records above the cap (the command line alike)."""

from __future__ import annotations

import pytest

import ppbn
from ppbn.api.result import MAX_CELLS
from ppbn.api.spelling import FLAGS
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
        ({"network": "asia", "records": 300, "path": "mpc"}, "^path must be one of secure, "),
        (
            {"network": "asia", "records": 300, "path": "pram"},
            r"^path='pram' needs exactly one of p and randomization$",
        ),
        (
            {
                "network": "asia",
                "records": 300,
                "path": "pram",
                "p": 0.3,
                "missing": "available-case",
            },
            r"^missing='available-case' runs on the secure path only: the PRAM path .*\(use missing='category'\)$",
        ),
        (
            {"network": "asia", "records": 300, "path": "pram", "p": 0.3, "search": "hc"},
            "^search='hc' on the PRAM path needs setup=2 \\(a miner\\)",
        ),
        (
            {"network": "asia", "records": 300, "path": "pram", "randomization": "no-such.json"},
            "^no-such.json: randomization file not found",
        ),
        (
            {"network": "asia", "records": 300, "path": "perturb", "setup": 3, "params": {"p": 1}},
            r"^setup must be 1 or 2 \(got 3\)",
        ),
        (
            {"network": "asia", "records": 300, "path": "perturb"},
            "^path='perturb' needs the job parameters: params=",
        ),
        ({"network": "asia", "records": 300, "setup": 2}, "^setup needs path='pram' or"),
        (
            {"network": "asia", "records": 300, "randomization_seed": "s"},
            "^randomization_seed needs path='pram' or",
        ),
        (
            {"network": "asia", "records": 300, "path": "pram", "p": 0.3, "kind": "tables"},
            "^kind='tables' needs path='secure'",
        ),
        (
            {"network": "asia", "records": 300, "reveal_for_testing": True},
            "^reveal_for_testing applies to the tables job only",
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


def test_the_command_line_gets_the_same_refusals_in_its_flags():
    """``ppbn simulate`` calls ``simulate`` with ``spell=FLAGS``: one check, its flags named."""
    cases = [
        ({"path": "pram"}, "--path pram needs exactly one of --p P and --randomization FILE"),
        (
            {"path": "perturb"},
            "--path perturb needs the job parameters: "
            """--params '{"learner": "nb", "class": VAR, "theta": 0.8}'""",
        ),
        ({"overlap": 0.5}, "--overlap 0.5: parties with different records need --align psi"),
        ({"records": None}, "give --network and --records (or --data DIR)"),
    ]
    for kwargs, message in cases:
        with pytest.raises(UserError) as err:
            ppbn.simulate(**{"network": "asia", "records": 300, **kwargs}, spell=FLAGS)
        assert str(err.value) == message


def test_a_security_level_the_kind_lacks_is_refused_before_any_work(tmp_path):
    with pytest.raises(ParameterError, match="not available for learn jobs") as err:
        ppbn.simulate("asia", 300, params={"security": "malicious"}, out=tmp_path / "run")
    assert err.value.parameter == "security"
    assert not (tmp_path / "run").exists()


def test_simulate_takes_a_policy_or_a_dict_of_its_settings(tmp_path):
    with pytest.raises(TypeError, match="policy must be a LocalPolicy or a dict"):
        ppbn.simulate("asia", 150, kind="ping", policy=["min_records"], out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    policy = {"min_records": 100, "max_parents": 3}
    sim = ppbn.simulate("asia", 150, kind="ping", policy=policy, seed=3, out=tmp_path / "kept")
    assert sim.succeeded, sim.outcome.error
    # the daemons were started with the policy file the dict was read into
    assert LocalPolicy.load(str(sim.folder / "policy.toml")).max_parents == 3


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
