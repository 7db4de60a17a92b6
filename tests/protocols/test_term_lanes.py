"""Terms lanes: a large batch of secure terms across processes of each party, each on a
lane of the job's channel (``ppbn/protocols/learning/term_lanes.py``).

The lanes must give the reference's network, count their bytes under the job's phases,
keep every message in the transcript the view tests read, and fail with one line when the
peer breaks the protocol on a lane or a lane's process dies.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ppbn.protocols.channel import ProtocolError, memory_channel_pair
from ppbn.protocols.executor import ExecutorError
from ppbn.protocols.learning import term_lanes as lanes_module
from ppbn.protocols.learning.term_lanes import TermLanes, lanes_for
from ppbn.protocols.learning.terms import EngineSpec
from ppbn.protocols.seeds import TaskSeeds

SPEC = EngineSpec(
    role="alice",
    mode="exact",
    count_bits=12,
    shift_frac=0,
    dh_bits=2048,
    ot_k=8,
    gc_inline_below=1 << 40,
    ot_inline_below=1 << 40,
)


def test_a_batch_uses_as_many_lanes_as_have_enough_terms():
    assert lanes_for(10_000, 1) == 1
    assert lanes_for(10_000, 8) == 8
    assert lanes_for(3 * lanes_module.MIN_LANE_TERMS, 8) == 3
    assert lanes_for(lanes_module.MIN_LANE_TERMS - 1, 8) == 1


@pytest.mark.parametrize(("network", "mode"), [("asia", "exact"), ("sachs", "bdeu")])
def test_terms_on_lanes_give_the_reference_network(monkeypatch, network, mode):
    """Every batch of K2's terms on two lanes per party (bdeu: the shifts split with the
    counts): the reference's structure, edge order and CPTs; the lanes' bytes under the
    phases of the job's own, and their messages in the channel's transcript."""
    from ppbn.protocols.learning import learn as learning

    monkeypatch.setattr(lanes_module, "MIN_LANE_TERMS", 4)
    batches = []
    run = TermLanes.run
    monkeypatch.setattr(
        TermLanes, "run", lambda self, x, *rest: batches.append(len(x)) or run(self, x, *rest)
    )
    learn = learning.learn_secure

    def labelling(channel, *args, **kwargs):  # as the daemon does: each phase labels its bytes
        def progress(message: str, done: int, total: int) -> None:
            if message.startswith("phase "):
                channel.stats.section = message[len("phase ") :]

        return learn(channel, *args, **{**kwargs, "progress": progress})

    import test_secure_k2

    monkeypatch.setattr(test_secure_k2, "learn_secure", labelling)
    pair = test_secure_k2._learn_equal_to_the_reference(network, mode, 2, seed=14, term_lanes=2)
    by_kind = pair[0].stats.by_kind
    share_sections = {section for (section, tag) in by_kind if tag.startswith("arith.")}
    assert share_sections == {"ln terms (shares)"}
    assert ("ln terms (Yao)", "yao.tables") in by_kind
    assert len(batches) >= 4  # both parties, several K2 steps: every batch on the lanes


def _peer_breaking_the_protocol(channel, count: int) -> None:
    """The peer's side: opens the lanes as the protocol does, then sends a wrong message."""
    lanes = [channel.open_lane() for _ in range(count)]
    for lane in lanes:
        lane.send("not.a.protocol.step", b"x" * 16)


def test_a_peer_breaking_the_protocol_on_a_lane_fails_the_batch_with_one_line():
    alice, bob = memory_channel_pair(timeout_s=30)
    alice.expect_lanes(2)
    lanes = TermLanes(alice, SPEC, 2, TaskSeeds(b"lanes test"))
    try:
        peer = threading.Thread(target=_peer_breaking_the_protocol, args=(bob, 2), daemon=True)
        peer.start()
        shares = np.arange(2 * lanes_module.MIN_LANE_TERMS, dtype=np.uint64)
        with pytest.raises(ProtocolError, match="expected message .* got 'not.a.protocol.step'"):
            lanes.run(shares, None, lambda phase: None, lambda phase: "ln terms (Yao)")
    finally:
        lanes.close()
    assert not any(process.is_alive() for process in lanes.processes)


def test_a_lane_whose_process_died_is_an_executor_error():
    alice, _bob = memory_channel_pair(timeout_s=30)
    lanes = TermLanes(alice, SPEC, 2, TaskSeeds(b"lanes test"))
    try:
        lanes.wait_ready()
        lanes.processes[1].kill()  # as a crash would
        lanes.processes[1].join(10)
        shares = np.arange(2 * lanes_module.MIN_LANE_TERMS, dtype=np.uint64)
        with pytest.raises(ExecutorError, match="terms lane2: its process ended"):
            lanes.run(shares, None, lambda phase: None, lambda phase: "ln terms (Yao)")
    finally:
        lanes.close()


def test_a_lane_that_cannot_build_its_sessions_says_why():
    alice, _bob = memory_channel_pair(timeout_s=30)
    broken = EngineSpec(**{**SPEC.__dict__, "dh_bits": 1024})
    lanes = TermLanes(alice, broken, 1, TaskSeeds(b"lanes test"))
    try:
        with pytest.raises(ExecutorError, match="terms lane1: ValueError: base-OT group must be"):
            lanes.wait_ready()
    finally:
        lanes.close()
