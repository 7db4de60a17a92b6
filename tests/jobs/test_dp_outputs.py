"""Nothing unnoised leaves in a DP release: on continuous data binned at the owner's exact
quantiles, a DP job's outputs carry none of those cut points, and every field that is not
noisy (or computed from noisy values) is the same whether or not one record's value
changes (docs/security-dp.md, "What each output is")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from known_files import TEST_POLICY
from loopback_pair import insecure_pair
from timeouts import WAIT_S

from ppbn.bn.discretize import format_number
from ppbn.bn.schema import Schema
from ppbn.cli import main as ppbn_main
from ppbn.data.party_data import load_party_data
from ppbn.dp.quantiles import candidates, increasing, private_cuts
from ppbn.jobs.dp_bins import private_cut_count, private_cut_variables, recut
from ppbn.jobs.policy import LocalPolicy
from ppbn.parties.client import DaemonClient

N = 600
# network.json: each top-level field, noisy (or computed from noisy values) or public
NOISY_FIELDS = {"edges", "parents", "parameters"}
PUBLIC_FIELDS = {
    "order",
    "score",
    "tau",
    "owners",
    "disclosure",
    "search",
    "family_records",
    "privacy",
}
TIMING_FIELDS = {"stats"}  # seconds, bytes and rounds: rounds follow the noisy choices
# ledger.json: each kind of entry
NOISY_KINDS = {"k2_decision", "dp_counts", "parameter", "edge", "structure"}
PUBLIC_KINDS = {"schema", "record_count", "records_match", "security_level"}


def _schema() -> dict:
    quantile = {"method": "quantile", "count": 4, "publish_edges": False}
    return {
        "version": 1,
        "id_column": "id",
        "variables": [
            {"name": "age", "owner": "alice", "type": "continuous", "bins": quantile},
            {"name": "income", "owner": "alice", "type": "continuous", "bins": quantile},
            {"name": "smoker", "owner": "bob", "states": ["no", "yes"]},
            {"name": "risk", "owner": "bob", "states": ["low", "high"]},
        ],
    }


def _world(base: Path, change_one: bool) -> Path:
    """Numbers spread narrowly around 4,500 and 8,500, so each exact cut point (a midpoint
    of neighbouring values) needs more than three significant digits, the private ones'
    grid; ``change_one``: the smallest age is made the largest, which moves every exact
    quantile of age."""
    rng = np.random.default_rng(8)
    age = (rng.normal(4500, 30, N)).round(4)
    income = (rng.normal(8500, 20, N) + 0.2 * age).round(4)
    smoker = rng.random(N) < 1 / (1 + np.exp(-(age - 4500) / 20))
    risk = rng.random(N) < 0.3 + 0.4 * smoker
    if change_one:
        age[int(np.argmin(age))] = float(age.max()) + 1.2345
    base.mkdir(parents=True)
    (base / "schema.json").write_text(json.dumps(_schema()))
    with (base / "alice.csv").open("w") as out:
        out.write("id,age,income\n")
        out.writelines(f"r{i:04d},{age[i]},{income[i]}\n" for i in range(N))
    with (base / "bob.csv").open("w") as out:
        out.write("id,smoker,risk\n")
        out.writelines(
            f"r{i:04d},{'yes' if smoker[i] else 'no'},{'high' if risk[i] else 'low'}\n"
            for i in range(N)
        )
    return base


def _exact_cuts(data: Path) -> set[str]:
    """The cut points `ppbn schema bins` prints for alice's file, as text."""
    schema = Schema.load(str(data / "schema.json"))
    loaded = load_party_data(schema, "alice", data / "alice.csv")
    return {format_number(c) for cuts in loaded.bins.values() for c in cuts}


def _run(data: Path, out: Path) -> dict[str, dict[str, str]]:
    """One DP learn job; every file each daemon wrote, by role and name."""
    policy = LocalPolicy.load(TEST_POLICY)
    with (
        insecure_pair(data, out, {"alice": policy, "bob": policy}) as (daemons, ports),
        DaemonClient(f"127.0.0.1:{ports['alice']}", None, insecure=True) as client,
    ):
        params = {"max_parents": 1, "key_bits": 1024, "dp_epsilon": 2.0}
        job_id = client.start("learn", params)
        outcome = client.wait(job_id, timeout_s=300)
        assert outcome.state == "SUCCEEDED", outcome.error
        assert daemons["bob"].jobs[job_id].done.wait(WAIT_S), "bob's end of the job"
    files = {}
    for role in ("alice", "bob"):
        folder = out / f"out-{role}" / job_id
        files[role] = {p.name: p.read_text() for p in folder.iterdir()}
        files[role]["audit.log"] = (out / f"out-{role}" / "audit.log").read_text()
    return files


@pytest.fixture(scope="module")
def neighbours(tmp_path_factory):
    base = tmp_path_factory.mktemp("dp-outputs")
    runs = {}
    for label, change in (("D", False), ("D'", True)):
        data = _world(base / label / "data", change)
        runs[label] = (_exact_cuts(data), _run(data, base / label))
    return runs


def _labelled(cuts: set[str], text: str) -> list[str]:
    """The exact cut points ``text`` uses in a state label, but for those a private cut
    point may equal by chance (the candidates' grid)."""
    grid = set(candidates())
    return sorted(
        c
        for c in cuts
        if float(c) not in grid and any(f in text for f in (f"x<{c}", f"{c}<=x", f"x>={c}"))
    )


def test_no_exact_cut_point_appears_in_any_output(neighbours, tmp_path):
    for exact, files in neighbours.values():
        assert len(exact) == 6
        assert sum(float(c) not in set(candidates()) for c in exact) >= 4  # the test has teeth
        for role, named in files.items():
            for name, text in named.items():
                leaked = _labelled(exact, text)
                assert not leaked, f"{role}'s {name} carries exact cut points {leaked}"
        # a synthetic table sampled from alice's release carries none either
        network = json.loads(files["alice"]["network.json"])
        assert network["privacy"]["bins"]["cut_points"] == 6


def test_only_noisy_fields_differ_between_neighbouring_data_sets(neighbours):
    (_, first), (_, second) = neighbours["D"], neighbours["D'"]
    for role in ("alice", "bob"):
        one, two = (json.loads(f[role]["network.json"]) for f in (first, second))
        assert set(one) == NOISY_FIELDS | PUBLIC_FIELDS | TIMING_FIELDS, set(one)
        for field in PUBLIC_FIELDS:
            assert one[field] == two[field], (role, field)
        ledgers = [json.loads(f[role]["ledger.json"])["entries"] for f in (first, second)]
        for ledger in ledgers:
            assert {e["kind"] for e in ledger} <= NOISY_KINDS | PUBLIC_KINDS
        public = [[e for e in ledger if e["kind"] in PUBLIC_KINDS] for ledger in ledgers]
        for left, right in zip(*public, strict=True):
            if left["kind"] != "schema":  # the schema is the same: so is its fingerprint
                assert left["value"] == right["value"], left["kind"]


def test_a_sample_of_the_release_carries_no_exact_cut(neighbours, tmp_path):
    exact, files = neighbours["D"]
    folder = tmp_path / "release"
    folder.mkdir()
    for name in ("network.json", "network.bif", "result.json"):
        (folder / name).write_text(files["alice"][name])
    out = tmp_path / "synthetic.csv"
    assert ppbn_main(["sample", str(folder), "--records", "300", "--out", str(out)]) == 0
    assert not _labelled(exact, out.read_text())


def test_which_bins_are_cut_again_under_dp():
    schema = Schema.from_dict(_schema())
    assert [v.name for v in private_cut_variables(schema)] == ["age", "income"]
    assert private_cut_count(schema) == 6
    given = _schema()
    given["variables"][0]["bins"] = {"method": "edges", "count": 3, "edges": [30, 50]}
    given["variables"][1]["bins"] = {
        "method": "quantile",
        "count": 2,
        "publish_edges": True,
        "edges": [3.5],
    }
    assert private_cut_count(Schema.from_dict(given)) == 0


def test_recut_moves_the_owners_codes_to_private_bins(tmp_path):
    data = _world(tmp_path / "data", False)
    schema = Schema.load(str(data / "schema.json"))
    alice = load_party_data(schema, "alice", data / "alice.csv")
    again = recut(alice, 1.0)
    assert set(again.bins) == {"age", "income"}
    for name, cuts in again.bins.items():
        assert all(c in candidates() for c in cuts) and list(cuts) == sorted(set(cuts))
        j = alice.columns.index(name)
        expected = np.searchsorted(np.array(cuts), alice.values[name], side="right")
        assert np.array_equal(again.codes[:, j], expected)
    assert again.codes is not alice.codes and alice.bins != again.bins


def test_private_cuts_are_near_the_quantiles_and_increasing():
    values = np.random.default_rng(4).normal(45, 12, 20000)
    cuts = private_cuts(values, 4, 0.5)
    assert np.allclose(cuts, np.quantile(values, [0.25, 0.5, 0.75]), atol=0.5)
    assert increasing([3.0, 1.0, 1.0]) == (1.0, 1.01, 3.0)
    assert len(candidates()) == 28801 and candidates()[14400] == 0.0
