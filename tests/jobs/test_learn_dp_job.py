"""The DP learn job through the daemons: its parameters, what it releases and reports,
and what each daemon's policy and budget make of it."""

from __future__ import annotations

import dataclasses
import json

import pytest
from known_files import TEST_POLICY
from timeouts import PEER_TIMEOUT_S, WAIT_S

from ppbn.bn.schema import Schema
from ppbn.cli import main
from ppbn.errors import UserError
from ppbn.jobs.learn import LEARN_JOB, check_learn_params


def test_dp_parameters_are_checked(asia_dir):
    schema = Schema.load(str(asia_dir / "schema.json"))
    assert check_learn_params({}, schema)["dp_epsilon"] is None
    assert LEARN_JOB.privacy_cost(check_learn_params({}, schema)) is None
    params = check_learn_params({"dp_epsilon": 0.5}, schema)
    cost = LEARN_JOB.privacy_cost(params)
    assert (cost.epsilon, cost.delta) == (0.5, 1e-9)
    for bad, message in [
        ({"dp_epsilon": 0}, "dp_epsilon must be a number in"),
        ({"dp_epsilon": 25}, "dp_epsilon must be a number in"),
        ({"dp_epsilon": True}, "dp_epsilon must be a number in"),
        ({"dp_epsilon": "1"}, "dp_epsilon must be a number in"),
        ({"dp_epsilon": 1, "dp_delta": 0}, "dp_delta must be a number"),
        ({"dp_epsilon": 1, "dp_structure_share": 1.5}, "dp_structure_share must be"),
        ({"dp_epsilon": 1, "search": "hc"}, "search must be k2"),
        ({"dp_epsilon": 1, "disclosure": "owner"}, "disclosure must be public"),
        ({"dp_epsilon": 1, "score": "yw"}, "scores with exact or bic"),
        ({"dp_epsilon": 1, "dp_release": "tree"}, "dp_release must be one of network, marginals"),
        ({"dp_epsilon": 1, "dp_release": "adaptive", "max_parents": 2}, "max_parents must be 1"),
        ({"dp_epsilon": 1, "dp_release": "adaptive", "order": list(schema.names)}, "not an order"),
        ({"dp_release": "marginals"}, "dp_release needs dp_epsilon"),
        ({"dp_epsilon": 1, "dp_release": "marginals", "max_parents": 2}, "max_parents must be 1"),
        ({"dp_epsilon": 1, "dp_release": "marginals", "order": list(schema.names)}, "not an order"),
    ]:
        with pytest.raises(UserError, match=message):
            check_learn_params(bad, schema)
    marginals = check_learn_params({"dp_epsilon": 1, "dp_release": "marginals"}, schema)
    assert marginals["max_parents"] == 1 and marginals["dp_release"] == "marginals"
    assert check_learn_params({"dp_epsilon": 1}, schema)["dp_release"] == "network"
    adaptive = check_learn_params({"dp_epsilon": 1, "dp_release": "adaptive"}, schema)
    assert adaptive["max_parents"] == 1 and adaptive["dp_release"] == "adaptive"


def test_the_adaptive_release_refuses_a_domain_it_cannot_fit(asia_dir):
    """The adaptive release reads its model's whole joint: 25 binary variables (2^25
    cells) are refused before any work, naming the marginal release; 24 are taken."""
    schema = Schema.load(str(asia_dir / "schema.json"))
    first = schema.variables[0]

    def wide(k):
        variables = tuple(
            dataclasses.replace(first, name=f"v{i}", owner=("alice", "bob")[i % 2])
            for i in range(k)
        )
        return dataclasses.replace(schema, variables=variables)

    params = {"dp_epsilon": 1, "dp_release": "adaptive"}
    with pytest.raises(UserError, match="33,554,432 cells.*use dp_release marginals"):
        check_learn_params(params, wide(25))
    assert check_learn_params(params, wide(24))["dp_release"] == "adaptive"


@pytest.mark.parametrize(
    ("network", "release", "choices", "search"),
    [("asia", "marginals", 7, "marginal tree"), ("cancer", "adaptive", 5, "adaptive pairs")],
)
def test_simulate_a_marginal_release(tmp_path, capsys, network, release, choices, search):
    """--dp-release marginals or adaptive through both daemons: one network at both, its
    pair choices in both ledgers (the tree's |V| - 1; the adaptive release's five rounds,
    half of cancer's ten pairs), the plan in both network files, and
    the result's privacy line names its pair choices."""
    code = main(
        ["simulate", "--network", network, "--records", "1200", "--seed", "4",
         "--dp-epsilon", "2", "--dp-release", release, "--params", '{"key_bits": 1024}',
         "--policy", str(TEST_POLICY), "--format", "json", "--out", str(tmp_path / "run")]
    )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report.get("error")
    privacy = report["result"]["privacy"]
    assert privacy["release"] == release and privacy["decisions"] == choices
    assert privacy["parameters"].endswith("fitted to 1-way and 2-way counts")
    assert report["result"]["search"] == search
    networks = []
    for role in ("alice", "bob"):
        folder = tmp_path / "run" / f"out-{role}" / report["job_id"]
        network = json.loads((folder / "network.json").read_text())
        assert network["privacy"] == privacy
        networks.append(network["parameters"])
        ledger = json.loads((folder / "ledger.json").read_text())
        assert sum(e["kind"] == "dp_pair" for e in ledger["entries"]) == choices
    assert networks[0] == networks[1]
    if release == "marginals":
        assert sum(1 for p in networks[0].values() if not p["parents"]) == 1  # a tree


def test_the_marginal_release_flags(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--network", "asia", "--dp-release", "tree"])
    assert "invalid choice: 'tree'" in capsys.readouterr().err
    code = main(["simulate", "--network", "asia", "--records", "200", "--dp-release", "marginals"])
    assert code != 0
    assert "--dp-release needs --dp-epsilon" in capsys.readouterr().err


@pytest.mark.parametrize(("delta", "accounting"), [("1e-9", "pure"), ("1e-5", "zcdp")])
def test_simulate_a_dp_release(tmp_path, capsys, delta, accounting):
    """asia has few variables: pure composition at delta 1e-9; a large delta makes zCDP
    the one with less noise (ppbn/dp/accounting.py), and the secure job runs it alike."""
    code = main(
        [
            "simulate",
            "--network",
            "asia",
            "--records",
            "1500",
            "--seed",
            "4",
            "--max-parents",
            "2",
            "--dp-epsilon",
            "2",
            "--dp-delta",
            delta,
            "--params",
            '{"key_bits": 1024}',
            "--policy",
            str(TEST_POLICY),
            "--format",
            "json",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report.get("error")
    privacy = report["result"]["privacy"]
    assert privacy["epsilon"] == 2 and privacy["delta"] <= float(delta)
    assert privacy["accounting"] == accounting
    if accounting == "pure":
        assert privacy["epsilon_per_decision"] * privacy["decisions"] == pytest.approx(0.6)
    else:
        structure = privacy["decisions"] * privacy["epsilon_per_decision"] ** 2 / 2
        assert structure == pytest.approx(0.3 * privacy["rho"])
    assert "reference_check" not in report  # a noisy release is not compared for equality
    for role in ("alice", "bob"):
        folder = tmp_path / "run" / f"out-{role}" / report["job_id"]
        network = json.loads((folder / "network.json").read_text())
        assert network["privacy"] == privacy
        ledger = json.loads((folder / "ledger.json").read_text())
        kinds = {e["kind"] for e in ledger["entries"]}
        assert "dp_counts" in kinds and "parameter" in kinds


def test_each_daemon_holds_its_own_epsilon_limits(tmp_path):
    """Real DP learn jobs against a policy with small limits: a job over the per-job
    maximum and one that would take the total over are refused, the budget files are left
    byte for byte as they were; the job in between is charged at both daemons."""
    import dataclasses

    import ppbn
    from ppbn.api.simulate import make_data
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.budget import budget_folder
    from ppbn.parties.pki import make_local_pki

    files = make_data(tmp_path, "asia", 400, seed=5)
    make_local_pki(tmp_path / "certs")
    pair_files = PairFiles(files.schema, files.csvs(), tmp_path / "certs", tmp_path)
    policy = dataclasses.replace(
        LocalPolicy.load(TEST_POLICY), dp_max_epsilon=1.5, dp_total_epsilon=2.5
    )
    job = {"max_parents": 1, "key_bits": 1024}
    with (
        LocalPair(pair_files, PEER_TIMEOUT_S, policy=policy) as pair,
        ppbn.Daemon(pair.address("alice"), tls_dir=tmp_path / "certs" / "alice") as alice,
    ):
        folders = {r: budget_folder(pair.state_dir(r)) for r in ("alice", "bob")}

        def contents():
            files = {r: sorted(f.glob("*.jsonl")) for r, f in folders.items()}
            return {r: f[0].read_bytes() if f else None for r, f in files.items()}

        with pytest.raises(UserError, match="dp_epsilon 2 is above this party's policy maximum"):
            alice.learn(dp_epsilon=2.0, **job).wait(timeout_s=WAIT_S)
        assert contents() == {"alice": None, "bob": None}
        outcome = alice.learn(dp_epsilon=1.5, **job).wait(timeout_s=WAIT_S)
        assert outcome.state == "SUCCEEDED", outcome.error
        charged = contents()
        for role, text in charged.items():
            entries = [json.loads(line) for line in text.decode().splitlines()]
            assert [(e["job_id"], e["event"], e["epsilon"]) for e in entries] == [
                (outcome.job_id, "reserve", 1.5),
                (outcome.job_id, "release", 1.5),
            ], role
        with pytest.raises(UserError, match=r"spent 1\.5 of the policy's total 2\.5"):
            alice.learn(dp_epsilon=1.5, **job).wait(timeout_s=WAIT_S)
        assert contents() == charged
