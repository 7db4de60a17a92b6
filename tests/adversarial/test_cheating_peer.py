"""A peer running a modified daemon, caught by the honest daemon at the malicious level.

Both daemons are real, over loopback mutual TLS, in this process. Bob's table phase is
altered (only in bob's job thread): as the aggregator it puts one of alice's records alone
in the product of one configuration and leaves that configuration's other records out, so
that the opened counts of that configuration are that record's values. At semi-honest the
job succeeds and the attack works: the shares add up to the record's one-hot. At
malicious alice's weights check catches it: her job fails naming bob and the check, her
audit log holds the evidence, ``ppbn audit verify`` lists it, and bob ends with no shares.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from hostile import Pair
from timeouts import WAIT_S
from waiting import wait_until

import ppbn.jobs.tables as tables_job
import ppbn.protocols.tables.exchange as exchange
from ppbn.cli import main
from ppbn.jobs.policy import LocalPolicy
from ppbn.jobs.tables import load_shares
from ppbn.protocols.constants import MALICIOUS, SEMI_HONEST

N_RECORDS = 150
RECORD = 17  # the record bob isolates
LABEL = 0  # in the product of bob's configuration 0
FAMILY = ("v0", "v1")
ALICE_STATES = ["s0", "s1", "s2"]  # three states against bob's two: alice encrypts
in_bobs_job = threading.local()


def _files(base):
    base.mkdir(parents=True, exist_ok=True)
    schema = {
        "id_column": "id",
        "variables": [
            {"name": "v0", "owner": "alice", "states": ALICE_STATES},
            {"name": "v1", "owner": "bob", "states": ["no", "yes"]},
        ],
    }
    (base / "schema.json").write_text(json.dumps(schema))
    rng = np.random.default_rng(5)
    v0, v1 = rng.integers(0, 3, N_RECORDS), rng.integers(0, 2, N_RECORDS)
    ids = [f"r{i:04d}" for i in range(N_RECORDS)]
    (base / "alice.csv").write_text(
        "id,v0\n" + "".join(f"{ids[i]},{ALICE_STATES[v0[i]]}\n" for i in range(N_RECORDS))
    )
    (base / "bob.csv").write_text(
        "id,v1\n" + "".join(f"{ids[i]},{['no', 'yes'][v1[i]]}\n" for i in range(N_RECORDS))
    )
    files = {"schema": base / "schema.json", "alice": base / "alice.csv", "bob": base / "bob.csv"}
    return files, int(v0[RECORD])


@pytest.fixture(scope="module")
def cheating_pair(tmp_path_factory, pki):
    """Bob's products are altered in bob's job thread only (both daemons share this process)."""
    honest_run, honest_multiply = tables_job.run_tables, exchange.multiply_by_label

    def run_tables(channel, role, *args, **kwargs):
        in_bobs_job.active = role == "bob"
        try:
            return honest_run(channel, role, *args, **kwargs)
        finally:
            in_bobs_job.active = False

    def multiply_by_label(n, payload, labels, label_counts):
        products, multiplications = honest_multiply(n, payload, labels, label_counts)
        if not getattr(in_bobs_job, "active", False):
            return products, multiplications
        width = 2 * ((n.bit_length() + 7) // 8)
        blob = bytearray(products[0])
        blob[LABEL * width : (LABEL + 1) * width] = payload[RECORD * width : (RECORD + 1) * width]
        return [bytes(blob), *products[1:]], multiplications

    patch = pytest.MonkeyPatch()
    patch.setattr(tables_job, "run_tables", run_tables)
    patch.setattr(exchange, "multiply_by_label", multiply_by_label)
    base = tmp_path_factory.mktemp("cheating")
    files, value = _files(base / "data")
    try:
        with Pair(base, files, pki, LocalPolicy()) as pair:
            pair.base, pair.record_value = base, value
            yield pair
    finally:
        patch.undo()


def _run(pair: Pair, level: str):
    params = {"max_family": 2, "security": level}
    job = pair.alice.controller.start("tables", json.dumps(params), "", "cheating test")
    wait_until(lambda: job.done.is_set(), WAIT_S, "alice's job")
    bobs = wait_until(lambda: pair.bob.jobs.get(job.job_id), WAIT_S, "bob's job")
    wait_until(lambda: bobs.done.is_set(), WAIT_S, "bob's job")
    return job, bobs


def test_at_semi_honest_the_isolated_record_is_opened(cheating_pair):
    job, bobs = _run(cheating_pair, SEMI_HONEST)
    assert job.result is not None and bobs.result is not None, (job.error, bobs.error)
    base = cheating_pair.base
    shares = [load_shares(base / f"out-{role}" / job.job_id) for role in ("alice", "bob")]
    counts = (shares[0][FAMILY] + shares[1][FAMILY]).astype(np.uint64)
    one_hot = np.eye(3, dtype=np.uint64)[cheating_pair.record_value]
    # the last state's count is derived from bob's own count; the others are the record's
    np.testing.assert_array_equal(counts[:-1, LABEL], one_hot[:-1])


def test_at_malicious_alice_catches_bob_and_keeps_the_evidence(cheating_pair, capsys):
    job, bobs = _run(cheating_pair, MALICIOUS)
    assert job.result is None and bobs.result is None
    assert "bob deviated from the protocol" in job.error
    assert "tables.weights check" in job.error and "audit log" in job.error
    base = cheating_pair.base
    assert not (base / "out-bob" / job.job_id / "shares.npz").exists()
    assert not (base / "out-alice" / job.job_id / "shares.npz").exists()
    log = base / "out-alice" / "audit.log"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    (caught,) = [e for e in events if e["event"] == "cheating" and e["job"] == job.job_id]
    assert caught["peers"] == ["bob"] and caught["check"] == "tables.weights"
    assert caught["evidence"]["expected"] != caught["evidence"]["found"]
    started = [e for e in events if e["event"] == "started" and e["job"] == job.job_id]
    assert started[0]["security"] == MALICIOUS
    assert main(["audit", "verify", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"job {job.job_id}: bob caught by the tables.weights check" in out
    ledger = json.loads((base / "out-alice" / job.job_id / "ledger.json").read_text())
    assert {"kind": "security_level", "value": MALICIOUS, "source": "job request"} in ledger[
        "entries"
    ]
