"""Resumable learn jobs: checkpoints, and a resumed protocol run equal
to an uninterrupted one (both parties in threads over the memory channel). Resumes
between two daemon processes, after SIGKILL, SIGTERM or a dropped link, are in
test_faults.py."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from secure_runs import alternating_schema, learn_both

from ppbn.bn.networks import load_network, sample
from ppbn.errors import UserError
from ppbn.jobs.checkpoint import KEY_FILE, CheckpointStore
from ppbn.protocols.learning.config import K2Checkpoint, SecureLearnConfig
from ppbn.protocols.tables import TablesConfig

TEST_TABLES = TablesConfig(key_bits=1024, workers=1)


def test_resumed_protocol_run_equals_the_uninterrupted_one():
    net = load_network("asia")
    codes = sample(net, 500, 3)
    schema = alternating_schema(net)
    config = SecureLearnConfig(max_parents=2, mode="exact", tables=TEST_TABLES)
    saved = {"alice": [], "bob": []}
    alice, bob, ledgers = learn_both(schema, codes, net.names, config, saved=saved)
    steps = [s.step for s in saved["alice"]]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 2
    k = 1  # resume after the first wave: the later waves and the parameters run again
    resume = {r: saved[r][k - 1] for r in saved}
    again_alice, again_bob, again_ledgers = learn_both(
        schema, codes, net.names, config, resume=resume
    )
    assert again_alice.search.edges == alice.search.edges == again_bob.search.edges
    for v in net.names:
        np.testing.assert_allclose(again_alice.network.cpts[v], alice.network.cpts[v], atol=1e-9)
    for role in ("alice", "bob"):  # the replayed decisions are recorded as the live ones were
        assert again_ledgers[role].entries == ledgers[role].entries


def test_a_checkpoint_that_does_not_match_the_job_is_refused():
    net = load_network("asia")
    codes = sample(net, 300, 4)
    schema = alternating_schema(net)
    config = SecureLearnConfig(max_parents=1, mode="exact", tables=TEST_TABLES)
    wrong = K2Checkpoint(1, [[["no-such-child", None]]], {}, {})
    with pytest.raises(ValueError, match="checkpoint does not match K2 step 1"):
        learn_both(schema, codes, net.names, config, resume={"alice": wrong, "bob": wrong})


def test_checkpoint_store_is_encrypted_atomic_and_keeps_two_steps(tmp_path):
    store = CheckpointStore(tmp_path, "job1", "alice")
    shares = {("a", "b"): np.arange(4, dtype=np.uint64)}
    scores = {("b", frozenset({"a"})): np.array([[1, 2]], dtype=np.uint64)}
    for step in (1, 2, 3):
        store.save(
            {"params": {"max_parents": 2}},
            K2Checkpoint(step, [[["b", "a"]]] * step, shares, scores),
        )
    assert store.steps() == [2, 3]
    assert stat.S_IMODE(os.stat(tmp_path / KEY_FILE).st_mode) == 0o600
    raw = store.path(3).read_bytes()
    assert b"max_parents" not in raw and b"decisions" not in raw  # encrypted at rest
    assert not list(store.folder.glob("*.tmp"))
    header, state = store.load(3)
    assert header["params"] == {"max_parents": 2} and state.step == 3
    np.testing.assert_array_equal(state.count_shares[("a", "b")], shares[("a", "b")])
    np.testing.assert_array_equal(
        state.score_shares[("b", frozenset({"a"}))], scores[("b", frozenset({"a"}))]
    )
    # another step's name, another party or an altered byte: refused with the file named
    store.path(3).rename(store.path(7))
    with pytest.raises(UserError, match="checkpoint-7.bin: checkpoint does not decrypt"):
        store.load(7)
    with pytest.raises(UserError, match="checkpoint-2.bin: checkpoint does not decrypt"):
        CheckpointStore(tmp_path, "job1", "bob").load(2)
    with pytest.raises(UserError, match="no checkpoint of step 5"):
        store.load(5)
    store.remove_all()
    assert store.steps() == []


def test_an_unwritable_checkpoint_folder_is_one_line_naming_the_file(tmp_path):
    blocker = tmp_path / "out"
    blocker.write_text("a file where the daemon's --out folder should be")
    store = CheckpointStore(blocker, "job1", "bob")
    with pytest.raises(
        UserError, match=r"out/.checkpoints/job1/checkpoint-1.bin: cannot write the checkpoint: "
    ) as error:
        store.save({}, K2Checkpoint(1, [], {}, {}))
    assert "\n" not in str(error.value)


# -- a resume request is a new job request: the peer's OPEN cannot weaken anything --------


@pytest.fixture
def bob(tmp_path):
    """bob's daemon object (built, not serving) with the built-in policy, on asia data."""
    from ppbn.data.datasets import make_dataset
    from ppbn.parties.daemon import DaemonConfig, PartyDaemon

    make_dataset("asia", 200, 5, tmp_path / "data")
    config = DaemonConfig(
        role="bob",
        schema_path=str(tmp_path / "data" / "schema.json"),
        data_path=str(tmp_path / "data" / "bob.csv"),
        listen="127.0.0.1:0",
        peer="127.0.0.1:1",
        insecure=True,
        out_dir=str(tmp_path / "out"),
    )
    return PartyDaemon(config)


def _checkpoint(bob, job_id: str, params: dict) -> None:
    from ppbn.jobs.checkpoint import data_digest
    from ppbn.jobs.learn import check_learn_params

    meta = {
        "job_id": job_id,
        "kind": "learn",
        "role": "bob",
        "params": check_learn_params(params, bob.schema),
        "schema": bob.schema.fingerprint(),
        "data": data_digest(bob.data.ids, bob.data.codes),
    }
    CheckpointStore(bob.config.out_dir, job_id, "bob").save(meta, K2Checkpoint(1, [[]], {}, {}))


def _resume_open(bob, job_id: str, params: dict):
    from ppbn.proto import party_pb2

    hello = party_pb2.Hello()
    hello.CopyFrom(bob.hello)
    hello.role = "alice"
    job = party_pb2.JobRequest(
        kind="learn", params_json=json.dumps(params), job_id=job_id, resume=True
    )
    return party_pb2.Frame(
        kind=party_pb2.Frame.OPEN, job_id=job_id, hello=hello, job=job, nonce=os.urandom(16)
    )


def test_a_peers_resume_must_match_our_checkpoint_and_pass_our_policy(bob):
    from ppbn.parties.job import JobRefused

    _checkpoint(bob, "run1", {"max_parents": 2})
    with pytest.raises(
        JobRefused, match="asks for other parameters than bob's checkpoint"
    ) as other:
        bob.controller.accept(_resume_open(bob, "run1", {"max_parents": 3}), "alice")
    assert other.value.parameter == "resume"
    with pytest.raises(JobRefused, match="bob has no checkpoint of job run2"):
        bob.controller.accept(_resume_open(bob, "run2", {"max_parents": 2}), "alice")
    # a checkpoint made under a weaker policy does not pass today's policy either
    _checkpoint(bob, "weak", {"max_parents": 2, "key_bits": 1024})
    with pytest.raises(JobRefused, match="policy") as weak:
        bob.controller.accept(
            _resume_open(bob, "weak", {"max_parents": 2, "key_bits": 1024}), "alice"
        )
    assert weak.value.parameter == "key_bits"
    job = bob.controller.accept(_resume_open(bob, "run1", {"max_parents": 2}), "alice")
    assert job.context.resume and job.job_id == "run1" and job.params["max_parents"] == 2
