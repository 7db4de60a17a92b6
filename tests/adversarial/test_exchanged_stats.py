"""Issue 10: after a job only data-independent figures cross the wire.

Two learn jobs on two data sets of the same shape but different values: every field of
what each daemon sent its peer as end-of-job statistics is identical, and an unlisted
field from a peer fails the job.
"""

from __future__ import annotations

import json

import pytest
from hostile import PERMISSIVE, Pair, write_dataset
from timeouts import WAIT_S

from ppbn.parties import job_stats as daemon_module
from ppbn.parties.grpc_channel import GrpcChannel
from ppbn.protocols.channel import ProtocolError


def _learn_and_capture(tmp_path, pki, seed: int, monkeypatch) -> tuple[dict[str, bytes], dict]:
    sent: dict[str, bytes] = {}
    original = GrpcChannel.send

    def spy(channel, tag, payload):
        if tag == "job.done":
            sent[channel.peer] = bytes(payload)  # keyed by the receiving role
        return original(channel, tag, payload)

    monkeypatch.setattr(GrpcChannel, "send", spy)
    files = write_dataset(tmp_path / f"data{seed}", 150, seed=seed)
    with Pair(tmp_path / f"run{seed}", files, pki, PERMISSIVE) as running:
        params = {"max_parents": 1, "key_bits": 1024}
        job = running.alice.controller.start("learn", json.dumps(params), "", "stats test")
        assert job.done.wait(WAIT_S) and job.error == "", job.error
        assert running.bob.jobs[job.job_id].done.wait(WAIT_S), "bob's end of the job"
        structure = job.result["parents"]
    monkeypatch.undo()
    return sent, structure


def test_the_exchanged_statistics_do_not_depend_on_the_data(tmp_path, pki, monkeypatch):
    first, structure_1 = _learn_and_capture(tmp_path, pki, 11, monkeypatch)
    second, structure_2 = _learn_and_capture(tmp_path, pki, 12, monkeypatch)
    assert set(first) == set(second) == {"alice", "bob"}
    for receiver in ("alice", "bob"):
        a, b = json.loads(first[receiver]), json.loads(second[receiver])
        assert tuple(sorted(a)) == tuple(sorted(daemon_module.EXCHANGED_STATS))
        assert a == b, (receiver, a, b)
    data = [(tmp_path / f"data{seed}" / "bob.csv").read_text() for seed in (11, 12)]
    assert data[0] != data[1] and structure_1 is not None and structure_2 is not None


def test_an_unlisted_statistics_field_from_the_peer_is_refused():
    honest = {"protocol_version": daemon_module.PROTOCOL_VERSION, "role": "bob", "kind": "learn"}
    assert daemon_module.parse_stats(json.dumps(honest).encode(), "learn") == honest
    for extra in ({"and_gates": 1}, {"wall_s": 2.5}, {"phases": {"tables": 1.0}}):
        with pytest.raises(ProtocolError, match="fields other than"):
            daemon_module.parse_stats(json.dumps({**honest, **extra}).encode(), "learn")
    with pytest.raises(ProtocolError):
        daemon_module.parse_stats(b"[" * 100_000, "learn")
