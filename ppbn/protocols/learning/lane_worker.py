"""The process of one terms lane (``term_lanes.py``): a set of term sessions of this party
that runs its share of each large batch of secure terms on a core of its own.

The process never touches the network. Its ``RelayChannel`` hands every message to the
party's own process over a pipe, where the lane of the job's channel sends it, and asks
that process for each message it awaits: the lane there checks the tag, the order and the
size (``Channel.recv``) before the payload comes here, where the protocol checks the
shape and the values as on any channel. Everything on the pipe belongs to this party
(its shares, its sessions' randomness); nothing of it reaches the peer but the protocol's
own messages.

Pipe messages, tuples whose first item names them:
- from the party's process: (TERMS, x shares, shifts or None) and (STOP,);
- to it: (READY,) once the process has loaded; per batch (SEND, tag, payload),
  (RECV, tag, max bytes), (PHASE, name) when the terms reach their share arithmetic, then
  (DONE, shares, report) (``BatchReport``) or (FAILED, kind, text);
- its answer to RECV: (DATA, payload) or (FAILED, kind, text), kind naming the error class.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

from ppbn.protocols.channel import Channel, PeerGone, ProtocolError
from ppbn.protocols.executor import exit_with_parent
from ppbn.protocols.learning.clock import PhaseClock
from ppbn.protocols.learning.terms import EngineSpec, TermsEngine, build_engine, take_counters
from ppbn.protocols.seeds import TaskSeeds

TERMS, STOP, READY, SEND, RECV, PHASE, DONE, FAILED, DATA = (
    "terms",
    "stop",
    "ready",
    "send",
    "recv",
    "phase",
    "done",
    "failed",
    "data",
)
ERRORS: dict[str, type[Exception]] = {"ProtocolError": ProtocolError, "PeerGone": PeerGone}


class _Stopped(BaseException):
    """The party's process ended the lane while a batch awaited a message (the job failed)."""


def error_from(kind: str, text: str) -> Exception:
    """The exception a FAILED message names: a protocol error stays one (the daemon tells
    the peer's misbehaviour from its own failures by the class)."""
    return ERRORS.get(kind, RuntimeError)(text)


class RelayChannel(Channel):
    """A lane process's channel: messages go through the party's own process, whose lane of
    the job's channel carries and checks them (module doc). Sequence numbers and counters
    are the lane's there; this end keeps its own only for the protocol's use."""

    def __init__(self, connection: Connection, **kwargs) -> None:
        super().__init__(**kwargs)
        self._connection = connection

    def _put(self, seq: int, tag: str, payload: bytes) -> None:
        self._connection.send((SEND, tag, payload))

    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        raise ProtocolError("a terms lane reads through its party's process")  # recv is relayed

    def recv(self, tag: str, max_bytes: int | None = None) -> bytes:
        self._connection.send((RECV, tag, max_bytes))
        reply = self._connection.recv()
        if reply[0] == STOP:
            raise _Stopped
        if reply[0] != DATA:
            raise error_from(reply[1], reply[2])
        payload = reply[1]
        self.stats.note("recv", len(payload) + len(tag), tag)
        return payload


@dataclass
class BatchReport:
    """What a lane did for one batch besides its shares: the sessions' counters (Yao's and
    the share arithmetic's), the openings tests keep, the seconds of each phase, the CPU
    seconds of the lane's process, and per phase those of its thread and tasks (``cpu``,
    to which the party's relay thread adds its own: all of it ran beside the job's thread)."""

    yao: dict[str, int]
    arith: dict[str, int]
    openings: list
    seconds: dict[str, float]
    cpu_seconds: float
    cpu: dict[str, float]


def _run_batch(engine: TermsEngine, connection: Connection, x_shares, shifts) -> tuple:
    clock, cpu = PhaseClock(), time.process_time()
    result = engine.terms(
        np.asarray(x_shares, dtype=np.uint64),
        shifts,
        lambda phase: connection.send((PHASE, phase)),
        clock,
    )
    openings = []
    if engine.arith.openings is not None:
        openings, engine.arith.openings[:] = list(engine.arith.openings), []
    report = BatchReport(
        take_counters(engine.yao.counters),
        take_counters(engine.arith.counters),
        openings,
        clock.seconds,
        time.process_time() - cpu,
        {phase: used.total_s for phase, used in clock.cpu.items()},
    )
    return DONE, result, report


def lane_main(
    spec: EngineSpec,
    seed: bytes | None,
    session: bytes,
    timeout_s: float,
    max_message_bytes: int,
    connection: Connection,
    parent_pid: int,
) -> None:
    """A terms lane's process: build the sessions (their base OTs run at the first batch),
    then run each batch the party's process sends until STOP or the pipe closes. ``seed``
    fixes the randomness in tests only (None: fresh from the OS)."""
    exit_with_parent(parent_pid)
    channel = RelayChannel(
        connection, timeout_s=timeout_s, max_message_bytes=max_message_bytes, session=session
    )
    try:
        engine = build_engine(spec, channel, TaskSeeds(seed), None)
    except Exception as exc:  # noqa: BLE001 - reported to the party's process
        connection.send((FAILED, type(exc).__name__, str(exc)))
        return
    try:
        connection.send((READY,))
        while (command := connection.recv())[0] == TERMS:
            try:
                reply = _run_batch(engine, connection, command[1], command[2])
            except Exception as exc:  # noqa: BLE001 - reported to the party's process
                reply = (FAILED, type(exc).__name__, str(exc))
            connection.send(reply)
    except (EOFError, OSError, _Stopped):
        pass  # the party's process is gone or ended the lane: nothing to report to
