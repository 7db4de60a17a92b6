"""A hostile peer against an honest daemon, both real daemons over loopback mutual TLS.

The hostile side is alice's real daemon code with one thing altered: it skips its own
parameter and policy checks, so whatever job request a test writes goes out in the OPEN
frame exactly as written. Bob is an honest daemon with the default policy (or a stricter
one), and must refuse every weakening before it sends anything derived from its data.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until as wait_for

from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy, PramPolicy
from ppbn.pair.loopback import free_port
from ppbn.parties.admission import Admission
from ppbn.parties.daemon import DaemonConfig, PartyDaemon
from ppbn.parties.pki import make_local_pki
from ppbn.proto import party_pb2

N_RECORDS = 150
STATES = ["s0", "s1", "s2"]
OWNERS = {"a1": "alice", "b1": "bob", "a2": "alice", "b2": "bob"}
# what a hostile alice allows itself: nothing is checked on its side anyway
PERMISSIVE = LocalPolicy(
    min_key_bits=1024,
    max_parents=64,
    max_family=64,
    min_records=1,
    pram=PramPolicy(min_p=0.0, always_randomize=()),
    dp_max_delta=9e-4,
    dp_total_delta=9e-4,
    source="test: permissive",
)


def write_dataset(base: Path, n: int, seed: int) -> dict[str, Path]:
    """schema.json, alice.csv and bob.csv with ``n`` records of random states."""
    base.mkdir(parents=True, exist_ok=True)
    schema = {
        "id_column": "id",
        "variables": [{"name": v, "owner": o, "states": STATES} for v, o in OWNERS.items()],
    }
    (base / "schema.json").write_text(json.dumps(schema))
    rng = np.random.default_rng(seed)
    codes = {v: rng.integers(0, 3, n) for v in OWNERS}
    ids = [f"r{i:04d}" for i in range(n)]
    files = {"schema": base / "schema.json"}
    for role in ("alice", "bob"):
        names = [v for v, o in OWNERS.items() if o == role]
        lines = [",".join(["id", *names])]
        lines += [",".join([ids[i], *(STATES[int(codes[v][i])] for v in names)]) for i in range(n)]
        (base / f"{role}.csv").write_text("\n".join(lines) + "\n")
        files[role] = base / f"{role}.csv"
    return files


AbortCode = party_pb2.AbortCode


def refused_at_bob(pair: Pair, caplog, kind: str, params: dict, parameter: str) -> None:
    jobs_before = set(pair.bob.jobs)
    caplog.clear()
    with (
        caplog.at_level(logging.ERROR, logger="ppbn.party.bob"),
        pytest.raises(UserError) as refused,
    ):
        pair.alice.controller.start(kind, json.dumps(params), "", "hostile test")
    message = str(refused.value)
    # alice (the requesting side) is told which parameter, in bob's fixed words
    assert f"parameter {parameter!r}" in message, message
    assert "bob" in message
    # bob logged the parameter with its own detailed reason, and created no job
    bob_lines = [r.getMessage() for r in caplog.records if r.name == "ppbn.party.bob"]
    assert any("refused job" in line and parameter in line for line in bob_lines), bob_lines
    assert set(pair.bob.jobs) == jobs_before
    # what bob sent on the job's stream: one ABORT frame, nothing else
    job = next(
        j
        for j in pair.alice.jobs.values()
        if j.error and j.job_id not in jobs_before and not j.result
    )
    channel = job.channel
    assert channel.peer_abort_code in (AbortCode.POLICY, AbortCode.BAD_REQUEST)
    assert channel.stats.bytes_received == 0 and channel.stats.messages_received == 0
    assert 0 < channel.wire_bytes_received < 200, channel.wire_bytes_received


class HostileAdmission(Admission):
    """Alice's real checks, altered to pass a job request they would refuse as it stands
    (honest requests are normalised as usual, so honest jobs still run)."""

    def checked_params(self, kind, params_json: str) -> dict[str, Any]:
        try:
            return super().checked_params(kind, params_json)
        except UserError:
            return json.loads(params_json or "{}")


class HostileDaemon(PartyDaemon):
    """Alice's real daemon, whose job controller asks the hostile checks."""

    def __init__(self, config: DaemonConfig) -> None:
        super().__init__(config)
        self.controller.admission = HostileAdmission(self.setup)


class Pair:
    """A hostile alice and an honest bob on loopback ports, with their TLS folders."""

    def __init__(
        self, base: Path, files: dict[str, Path], tls: dict[str, Path], bob_policy: LocalPolicy
    ) -> None:
        ports = {"alice": free_port(), "bob": free_port()}
        self.tls = tls
        self.addresses = {role: f"127.0.0.1:{port}" for role, port in ports.items()}

        def config(role: str, policy: LocalPolicy) -> DaemonConfig:
            peer = "bob" if role == "alice" else "alice"
            return DaemonConfig(
                role=role,
                schema_path=str(files["schema"]),
                data_path=str(files[role]),
                listen=self.addresses[role],
                peer=self.addresses[peer],
                tls_dir=str(tls[role]),
                out_dir=str(base / f"out-{role}"),
                timeout_s=PEER_TIMEOUT_S,
                policy=policy,
            )

        self.alice = HostileDaemon(config("alice", PERMISSIVE))
        self.bob = PartyDaemon(config("bob", bob_policy))

    def __enter__(self) -> Pair:
        self.alice.start()
        self.bob.start()
        wait_for(
            lambda: self.alice.peer_state == "ok" and self.bob.peer_state == "ok",
            WAIT_S,
            "handshake",
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.alice.stop(0.5)
        self.bob.stop(0.5)


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> dict[str, Path]:
    return make_local_pki(tmp_path_factory.mktemp("pki"), roles=("alice", "bob", "miner"))


@pytest.fixture(scope="module")
def pair(tmp_path_factory, pki):
    base = tmp_path_factory.mktemp("hostile")
    files = write_dataset(base / "data", N_RECORDS, seed=1)
    bob_policy = replace(
        LocalPolicy(), disclosures=("owner", "shared"), source="test: bob keeps its CPTs"
    )
    with Pair(base, files, pki, bob_policy) as running:
        yield running
