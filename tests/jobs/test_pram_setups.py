"""The PRAM path over real daemons on loopback (mutual TLS): setup I (alice and bob) and
setup II (the miner), checked against the in-process learners on the same randomized data;
the miner role's handshake and job refusals; ``ppbn simulate --path pram``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from daemon_trio import Trio
from timeouts import PEER_TIMEOUT_S
from waiting import wait_until as wait_for

from ppbn.bn.schema import Schema
from ppbn.cli import main as ppbn_main
from ppbn.data.datasets import make_dataset
from ppbn.data.party_data import load_joined
from ppbn.errors import UserError
from ppbn.parties.pki import make_local_pki
from ppbn.protocols.ledger import ALLOWED_KINDS
from ppbn.randomized.pram import RandomizationScheme, RandomSource, learn_pram, learn_pram_setup_one

RECORDS = 2000
SEED = "test-setups"
P = 0.2


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("pram-setups")
    make_dataset("asia", RECORDS, 5, base / "data")
    make_local_pki(base / "certs")
    return base


def run(trio: Trio, start_role: str, kind: str, params: dict) -> dict[str, dict]:
    """Run a job; every daemon's network.json, ledger and BIF (those that took part)."""
    return {
        role: {
            "network": json.loads((job_dir / "network.json").read_text()),
            "ledger": json.loads((job_dir / "ledger.json").read_text()),
            "bif": (job_dir / "network.bif").read_text(),
        }
        for role, job_dir in trio.run_job(start_role, kind, params).items()
    }


@pytest.fixture
def trio(world, tmp_path):
    t = Trio(world, tmp_path, SEED)
    yield t
    t.stop()


def _joined(world: Path):
    schema = Schema.load(str(world / "data" / "schema.json"))
    names, codes = load_joined(schema, world / "data" / "alice.csv", world / "data" / "bob.csv")
    cards = dict(zip(names, schema.cardinalities(), strict=True))
    scheme = RandomizationScheme.uniform(cards, P)
    randomized = scheme.randomize(codes, names, RandomSource.from_seed(SEED))
    states = {v.name: v.states for v in schema.variables}
    owner = {v.name: v.owner for v in schema.variables}
    return schema, names, codes, scheme, randomized, states, owner


def _check_ledger(ledger: dict, must: set[str]) -> None:
    kinds = {e["kind"] for e in ledger["entries"]}
    assert kinds <= ALLOWED_KINDS
    assert must <= kinds, kinds


def test_setup_one_over_daemons_equals_the_in_process_learner(world, trio):
    for role in ("alice", "bob"):
        trio.start(role, accept_miner=False)
    wait_for(lambda: all(d.peer_state == "ok" for d in trio.daemons.values()), what="handshakes")
    params = {"p": P, "max_parents": 2, "score": "exact"}
    got = run(trio, "alice", "pram", params)
    assert set(got) == {"alice", "bob"}
    schema, names, codes, scheme, randomized, states, owner = _joined(world)
    search, network, _ = learn_pram_setup_one(
        names, states, owner, codes, randomized, scheme, 2, "exact"
    )
    for role, files in got.items():
        doc = files["network"]
        assert [tuple(e) for e in doc["edges"]] == search.edges, role
        for v in names:
            assert np.allclose(doc["parameters"][v]["table"], network.cpts[v]), (role, v)
        assert (
            doc["stats"]["bytes_sent"] > 0 and doc["stats"]["wall_s"] > 0 and doc["stats"]["phases"]
        )
        assert {row["k_p"] for row in doc["privacy"]} == {2} and doc["privacy"][0][
            "gamma"
        ] == pytest.approx(4.0)
        assert files["bif"].startswith("network ppbn {")
        _check_ledger(
            files["ledger"], {"randomized_data", "randomization_matrix", "structure", "parameter"}
        )
        received = [
            e["value"]["variables"]
            for e in files["ledger"]["entries"]
            if e["kind"] == "randomized_data"
        ]
        peer = "bob" if role == "alice" else "alice"
        assert received and all(owner[v] == peer for v in received[0])


def test_setup_two_over_three_daemons_equals_learn_pram(world, trio):
    for role in ("alice", "bob", "miner"):
        trio.start(role)
    wait_for(lambda: all(d.peer_state == "ok" for d in trio.daemons.values()), what="handshakes")
    params = {"p": P, "max_parents": 2, "score": "bic", "c_star": 2.0}
    got = run(trio, "miner", "pram-miner", params)
    assert set(got) == {"alice", "bob", "miner"}
    schema, names, codes, scheme, randomized, states, owner = _joined(world)
    expected = learn_pram(names, states, randomized, scheme, 2, "bic", c_star=2.0)
    for role, files in got.items():
        doc = files["network"]
        assert [tuple(e) for e in doc["edges"]] == expected.search.edges, role
        for v in names:
            assert np.allclose(doc["parameters"][v]["table"], expected.network.cpts[v])
    miner_ledger = got["miner"]["ledger"]
    _check_ledger(miner_ledger, {"randomized_data", "randomization_matrix"})
    senders = {e["source"] for e in miner_ledger["entries"] if e["kind"] == "randomized_data"}
    assert senders == {"alice", "bob"}
    for role in ("alice", "bob"):  # the parties see only the output, never each other's data
        _check_ledger(got[role]["ledger"], {"structure", "edge", "parameter"})
        assert "randomized_data" not in {e["kind"] for e in got[role]["ledger"]["entries"]}


def test_miner_is_refused_by_a_party_that_does_not_expect_one(trio):
    alice = trio.start("alice", accept_miner=False)
    trio.start("bob")
    miner = trio.start("miner")
    wait_for(
        lambda: "certificate for role 'miner'" in miner.peer_states["alice"], what="alice's refusal"
    )
    assert (
        "alice takes handshakes only from bob, not from a certificate for role 'miner'"
        in miner.peer_states["alice"]
    )
    wait_for(
        lambda: miner.peer_states["bob"] == "ok" and alice.peer_state == "ok",
        what="the other handshakes",
    )
    with trio.client("miner") as client, pytest.raises(UserError, match="job not started"):
        client.start("pram-miner", {"p": P})
    with (
        trio.client("miner") as client,
        pytest.raises(UserError, match="the miner runs only .*pram-miner"),
    ):
        client.start("ping", {})
    with (
        trio.client("alice") as client,
        pytest.raises(UserError, match="start it at the miner's daemon"),
    ):
        client.start("pram-miner", {"p": P})


def test_a_daemon_of_the_wrong_role_at_the_miners_address_is_refused(trio):
    trio.start("alice")
    trio.start("bob")
    impostor = trio.start("miner", as_role="alice")  # an "alice" where the miner should be
    alice = trio.daemons["alice"]
    wait_for(
        lambda: (
            "miner" in alice.peer_states
            and alice.peer_states["miner"] not in ("ok", "not contacted yet")
            and "refused the connection" not in alice.peer_states["miner"]
        ),
        what="alice's view of the miner",
    )
    assert re.search("certificate for (role )?'alice'", alice.peer_states["miner"]), (
        alice.peer_states
    )
    assert impostor.peer_state != "ok"


def test_simulate_pram_setup_two_prints_every_daemon(world, capsys):
    code = ppbn_main(
        [
            "simulate",
            "--path",
            "pram",
            "--setup",
            "2",
            "--data",
            str(world / "data"),
            "--p",
            "0.1",
            "--format",
            "json",
            "--timeout",
            f"{PEER_TIMEOUT_S:g}",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert report["state"] == "SUCCEEDED" and report["kind"] == "pram-miner"
    assert set(report["parties"]) == {"alice", "bob", "miner"}
    miner_stats = report["parties"]["miner"]["result"]["stats"]
    party_sent = sum(
        report["parties"][r]["result"]["stats"]["bytes_sent"] for r in ("alice", "bob")
    )
    assert miner_stats["bytes_received"] == party_sent
    assert report["structure_vs_reference"]["shd"] >= 0 and report["privacy"]
