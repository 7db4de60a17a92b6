"""`ppbn simulate` end to end (two daemon processes, mutual TLS) and the harness's cleanup."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from known_files import TEST_POLICY as KNOWN_POLICY
from timeouts import PEER_TIMEOUT_S

from ppbn.cli import main as ppbn_main
from ppbn.errors import UserError
from ppbn.pair.loopback import LocalPair, PairFiles
from ppbn.parties.pki import make_local_pki
from ppbn.parties.tls import PARTY_ROLES

TEST_POLICY = str(KNOWN_POLICY)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A small two-party data set with 3 alice and 2 bob variables of varied cardinality."""
    base = tmp_path_factory.mktemp("simdata")
    spec = {
        "a1": ("alice", 2),
        "b1": ("bob", 3),
        "a2": ("alice", 3),
        "b2": ("bob", 2),
        "a3": ("alice", 2),
    }
    schema = {
        "id_column": "id",
        "variables": [
            {"name": n, "owner": o, "states": [f"v{k}" for k in range(c)]}
            for n, (o, c) in spec.items()
        ],
    }
    (base / "schema.json").write_text(json.dumps(schema))
    rng = np.random.default_rng(11)
    n = 120
    codes = {name: rng.integers(0, card, n) for name, (_, card) in spec.items()}
    for role in ("alice", "bob"):
        names = [name for name, (owner, _) in spec.items() if owner == role]
        order = rng.permutation(n)  # rows in different orders: the loader aligns by id
        lines = [",".join(["id", *names])]
        lines += [",".join([f"id{i}", *(f"v{codes[m][i]}" for m in names)]) for i in order]
        (base / f"{role}.csv").write_text("\n".join(lines) + "\n")
    return base


def test_simulate_tables_with_reveal_reports_both_parties(data_dir, capsys):
    code = ppbn_main(
        [
            "simulate",
            "--data",
            str(data_dir),
            "--job",
            "tables",
            "--max-family",
            "3",
            "--params",
            json.dumps({"key_bits": 1024}),
            "--policy",
            TEST_POLICY,
            "--format",
            "json",
            "--reveal-for-testing",
            "--timeout",
            f"{PEER_TIMEOUT_S:g}",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "BREAKS THE PRIVACY" in captured.err.upper()
    report = json.loads(captured.out)
    assert report["state"] == "SUCCEEDED"
    assert report["reveal_for_testing"] == {
        "tables_checked": 15,
        "tables_wrong": [],
        "all_equal": True,
    }
    assert set(report["stats"]) == {"alice", "bob"}
    for stats in report["stats"].values():
        assert stats["wall_s"] > 0 and stats["rounds"] >= 1 and stats["phases"]
        assert stats["bytes_sent"] > 0 and stats["public_key_operations"] > 0
    alice, bob = report["stats"]["alice"], report["stats"]["bob"]
    assert (
        alice["bytes_sent"] == bob["bytes_received"]
        and bob["bytes_sent"] == alice["bytes_received"]
    )
    assert report["paillier_encryptions_both_parties"] < report["per_alpha_encryptions"]


def test_local_pair_stops_both_daemons_when_the_run_fails(data_dir, tmp_path):
    make_local_pki(tmp_path / "certs", PARTY_ROLES)
    files = PairFiles(
        data_dir / "schema.json",
        {"alice": data_dir / "alice.csv", "bob": data_dir / "bob.csv"},
        tmp_path / "certs",
        tmp_path,
    )
    pair = LocalPair(files, timeout_s=PEER_TIMEOUT_S)
    with (
        pytest.raises(UserError, match="tables: max_family must be an integer in 2..5"),
        pair,
        pair.client("alice") as client,
    ):
        assert client.health().peer_state == "ok"
        client.start("tables", {"max_family": 99})
    for process in pair.processes.values():
        assert process.poll() is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(process.pid, 0)
    assert "received SIGTERM: shutting down" in (tmp_path / "alice.log").read_text()
