"""Garbling, evaluation and OT-extension blocks on the party's executor: the
garbled tables, labels, OT messages and outputs are the same bytes inline and on a local
process pool for the same seeds, the garbler's secrets reach only its own executor, and a
secure learn job gives the same network whichever executor ran its batches."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from executor_util import assert_same_learning, learn_run

from ppbn.circuits import builders as B
from ppbn.circuits.ir import Circuit
from ppbn.circuits.schedule import schedule_of
from ppbn.protocols import ot, yao
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.executor import Executor, InlineExecutor, LocalExecutor, Pending
from ppbn.protocols.ot import CHUNK_OTS, OTReceiver, OTSender, Prg, prg_columns
from ppbn.protocols.seeds import TaskSeeds
from ppbn.protocols.yao import Reveal, YaoParty

ALICE_SEED = bytes(range(32))
BOB_SEED = bytes(range(32, 64))
M = 2 * CHUNK_OTS + 1000  # three extension blocks, the last one short


@pytest.fixture(scope="module")
def pool() -> LocalExecutor:
    with LocalExecutor(2) as executor:
        yield executor


class Recording(Executor):
    """An executor that runs tasks inline and keeps each task's function name and arguments."""

    kind = "inline"
    workers = 1

    def __init__(self) -> None:
        self.tasks: list[tuple[str, tuple]] = []

    def submit(self, fn: Callable, *args: Any) -> Pending:
        self.tasks.append((fn.__name__, args))
        return InlineExecutor().submit(fn, *args)

    def close(self) -> None:
        return None


def test_seekable_prg_equals_the_continuing_stream() -> None:
    keys = os.urandom(16 * 3)
    streams = [Prg(keys[16 * i : 16 * i + 16]) for i in range(3)]
    widths = [5, 16, 33, 1, 200]
    offset = 0
    for width in widths:
        expected = np.empty((3, width), dtype=np.uint8)
        for row, stream in zip(expected, streams, strict=True):
            stream.fill(row, memoryview(bytes(width)))
        np.testing.assert_array_equal(prg_columns(keys, offset, width), expected)
        offset += width


def _ot_run(executor: Executor | None) -> tuple[list, list]:
    """Chosen-message and correlated OT over three blocks with fixed seeds; the outputs of
    both ends and both ends' transcripts (every message each received)."""
    rng = np.random.default_rng(4)
    m0, m1 = (rng.integers(0, 2**63, size=(M, 2), dtype=np.uint64) for _ in range(2))
    choices = rng.integers(0, 2, size=M).astype(np.uint8)
    delta = rng.integers(0, 2**63, size=2, dtype=np.uint64)
    source = None if executor is None else (lambda: executor)

    def sender(ch):
        s = OTSender(
            ch, instance=b"t", seeds=TaskSeeds(ALICE_SEED), executor=source, inline_below=0
        )
        s.send(m0, m1)
        return s.send_correlated(M, delta)

    def receiver(ch):
        r = OTReceiver(
            ch, instance=b"t", seeds=TaskSeeds(BOB_SEED), executor=source, inline_below=0
        )
        return r.receive(choices), r.receive_correlated(choices)

    pair = memory_channel_pair(timeout_s=120, keep_transcript=True)
    x0, (chosen, correlated) = run_two_party(sender, receiver, pair=pair)
    np.testing.assert_array_equal(chosen, np.where(choices[:, None] == 1, m1, m0))
    np.testing.assert_array_equal(correlated, np.where(choices[:, None] == 1, x0 ^ delta, x0))
    return [x0, chosen, correlated], [list(end.transcript) for end in pair]


def test_ot_extension_blocks_are_bit_identical_inline_and_on_the_pool(pool: LocalExecutor) -> None:
    inline_out, inline_log = _ot_run(None)
    pool_out, pool_log = _ot_run(pool)
    for got, want in zip(pool_out, inline_out, strict=True):
        np.testing.assert_array_equal(got, want)
    assert [tag for tag, _ in inline_log[0]].count(
        "ot.ext.u"
    ) == 6  # 3 blocks per call: really split
    assert pool_log == inline_log  # every message, byte for byte


def _circuit() -> Circuit:
    b = B.CircuitBuilder()
    x, y = b.input("x", 16), b.input("y", 16)
    b.output("max", B.maximum(b, x, y))
    b.output("sum", B.add(b, x, y))
    return b.build()


def _yao_run(alice_executor: Executor | None, bob_executor: Executor | None) -> tuple[list, list]:
    """300 instances in chunks of 20 with fixed seeds: both parties' outputs (shares
    included) and both transcripts (label seed, tables, decode bits, OT messages)."""
    circuit, k = _circuit(), 300
    rng = np.random.default_rng(8)
    xs, ys = rng.integers(0, 2**16, size=k), rng.integers(0, 2**16, size=k)
    outputs = {"max": Reveal.BOTH, "sum": Reveal.SHARES}

    def side(seed, executor, garbler, inputs):
        def run(ch):
            party = YaoParty(
                ch,
                seeds=TaskSeeds(seed),
                executor=None if executor is None else (lambda: executor),
                gc_inline_below=0,
                ot_inline_below=0,
            )
            return party.run(circuit, garbler=garbler, inputs=inputs, outputs=outputs)

        return run

    pair = memory_channel_pair(timeout_s=120, keep_transcript=True)
    alice, bob = run_two_party(
        side(ALICE_SEED, alice_executor, True, {"x": xs}),
        side(BOB_SEED, bob_executor, False, {"y": ys}),
        pair=pair,
    )
    np.testing.assert_array_equal(alice["max"], np.maximum(xs, ys))
    np.testing.assert_array_equal((alice["sum"] + bob["sum"]) % 2**16, (xs + ys) % 2**16)
    return [alice["max"], alice["sum"], bob["max"], bob["sum"]], [
        list(end.transcript) for end in pair
    ]


def test_garbling_and_evaluation_are_bit_identical_inline_and_on_the_pool(
    pool: LocalExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        yao, "CHUNK_BYTES", 32 * schedule_of(_circuit()).n_and * 20
    )  # chunks of at most 20 instances
    monkeypatch.setattr(ot, "CHUNK_OTS", 1024)  # the evaluator's 4,800 input OTs in 5 blocks
    inline_out, inline_log = _yao_run(None, None)
    pool_out, pool_log = _yao_run(pool, pool)
    for got, want in zip(pool_out, inline_out, strict=True):
        np.testing.assert_array_equal(got, want)
    assert [tag for tag, _ in inline_log[1]].count("yao.tables") >= 15
    assert [tag for tag, _ in inline_log[0]].count("ot.ext.u") == 5
    assert pool_log == inline_log


def test_the_garblers_secrets_reach_only_its_own_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yao, "CHUNK_BYTES", 32 * schedule_of(_circuit()).n_and * 100)
    alice, bob = Recording(), Recording()
    _yao_run(alice, bob)
    assert {name for name, _ in alice.tasks} == {"garble_chunk", "sender_block"}
    assert {name for name, _ in bob.tasks} == {"evaluate_chunk", "receiver_block"}
    garbled = [args for name, args in alice.tasks if name == "garble_chunk"]
    delta = garbled[0][3].tobytes()
    assert all(args[3].tobytes() == delta for args in garbled)  # one R for the whole run
    # x's 16 rows and the sum's 16 mask rows are labelled from the seed, with alice's bits
    assert all(args[6].size == 32 and args[7].shape[0] == 32 for args in garbled)
    assert len({args[8] for args in garbled}) == len(garbled)  # a public label key per chunk
    input_bits = [args[7].tobytes() for args in garbled]
    for _, args in bob.tasks:
        for arg in args:
            raw = (
                arg.tobytes()
                if isinstance(arg, np.ndarray)
                else arg
                if isinstance(arg, bytes)
                else b""
            )
            assert delta not in raw and not any(bits == raw for bits in input_bits)


def test_learn_job_is_the_same_with_every_batch_on_the_pool() -> None:
    expected = learn_run("inline", "asia")
    assert_same_learning(learn_run("local", "asia", inline_below=0), expected)
