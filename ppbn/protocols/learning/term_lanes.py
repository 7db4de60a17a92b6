"""Terms lanes: a large batch of secure terms split across processes of this party, each
with its own lane of the job's channel, so that the ln-term phase uses as many cores as
the job agreed (the job parameter ``term_lanes``).

A term's work is dozens of short interactive steps (the normalisation circuit, one round
of lookups, the products of the share series), so handing each step's blocks to a pool
costs more than it saves (docs/protocols/cost-model.md). A lane instead runs a whole part
of the batch, every step of it, in one process with sessions of its own: its own base
OTs and OT extensions, its own garbling tweaks and, through the lane's own session label,
its own hash keys, as the second half of a split batch does on its thread
(``scorer.SecureScorer.terms``). The parts are contiguous and the same at both parties
(the batch size is public), so lane i of alice talks to lane i of bob. Each party's own
process stays the only one on the network: it relays its lanes' messages over the
job's channel and checks each one before a lane sees it (``lane_worker.RelayChannel``).

The outputs are shares of the same terms as one engine's (each term on its own masks), so
the search reaches the same decisions; the lanes' traffic counts under the phases of the
job's own (``SecureScorer._section_of``), and their transcripts join the channel's, so
the view tests see every message.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing import get_context
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import numpy as np

from ppbn.protocols.channel import Channel, LaneChannel, ProtocolError
from ppbn.protocols.executor import ExecutorError
from ppbn.protocols.learning.clock import NORMALISE, SHARE_TERMS
from ppbn.protocols.learning.lane_worker import (
    DATA,
    DONE,
    FAILED,
    PHASE,
    READY,
    RECV,
    SEND,
    STOP,
    TERMS,
    BatchReport,
    error_from,
    lane_main,
)
from ppbn.protocols.learning.terms import EngineSpec
from ppbn.protocols.seeds import TaskSeeds

LANES_SESSION = b"|terms lanes/"  # + the lane's number: each lane's hashes under its own label
MIN_LANE_TERMS = 256  # each lane's part of a batch: below this many terms, one lane fewer
SHARES_PHASE = "ln terms (shares)"  # what a lane reports when its products start
STOP_WAIT_S = 5.0


def lanes_for(n: int, lanes: int) -> int:
    """How many lanes a batch of n terms uses: all, unless a part would be under
    ``MIN_LANE_TERMS`` (a lane's fixed cost is its round trips). Public, as n is."""
    return max(1, min(lanes, n // MIN_LANE_TERMS))


def _add_relay_cpu(report: BatchReport, shares_from: float | None) -> None:
    """Add the calling relay thread's CPU (a fresh thread's own, from its start) to its lane's
    report: to the normalisation until the lane reached its share phase (``shares_from``, a
    ``time.thread_time`` reading), to the share terms after."""
    now = time.thread_time()
    split = {NORMALISE: now if shares_from is None else shares_from}
    split[SHARE_TERMS] = now - split[NORMALISE]
    for phase, seconds in split.items():
        report.cpu[phase] = report.cpu.get(phase, 0.0) + seconds


class TermLanes:
    """This party's terms lanes for one job: ``count`` processes, each on a lane of
    ``channel`` (opened here, so call it at the same point of the protocol as the peer),
    started now and ended by ``close``. ``seeds``: a fixed test seed gives each lane a
    fixed one; otherwise each lane draws its randomness from the OS."""

    def __init__(self, channel: Channel, spec: EngineSpec, count: int, seeds: TaskSeeds) -> None:
        self.channel = channel
        context = get_context("spawn")  # as the executor's pool: safe beside gRPC's threads
        self._lanes: list[LaneChannel] = []
        self._connections: list[Connection] = []
        self._processes: list[BaseProcess] = []
        self._ready = False
        try:
            for number in range(count):
                lane = channel.open_lane(session=channel.session + LANES_SESSION + b"%d" % number)
                mine, theirs = context.Pipe(duplex=True)
                process = context.Process(
                    target=lane_main,
                    args=(
                        spec,
                        seeds.next() if seeds.fixed else None,
                        lane.session,
                        channel.timeout_s,
                        channel.max_message_bytes,
                        theirs,
                        os.getpid(),
                    ),
                    name=f"ppbn-terms-{lane.name}",
                    daemon=True,
                )
                process.start()
                theirs.close()
                self._lanes.append(lane)
                self._connections.append(mine)
                self._processes.append(process)
        except BaseException:
            self.close()
            raise

    @property
    def count(self) -> int:
        return len(self._lanes)

    @property
    def processes(self) -> tuple[BaseProcess, ...]:
        """The lanes' processes, in lane order: to watch them (alive, exit code, pid)."""
        return tuple(self._processes)

    def wait_ready(self) -> None:
        """Until every lane's process has loaded (its sessions are built; their base OTs run
        with the first batch). A process that ends first, or is not ready within the
        channel's timeout, is an ``ExecutorError``."""
        if self._ready:
            return
        for lane, connection, process in zip(
            self._lanes, self._connections, self._processes, strict=True
        ):
            try:
                message = connection.recv() if connection.poll(self.channel.timeout_s) else None
            except (EOFError, OSError):
                message = None
            if message is not None and message[0] == FAILED:
                raise ExecutorError(f"terms {lane.name}: {message[1]}: {message[2]}")
            if message != (READY,):
                process.join(1.0)
                raise ExecutorError(
                    f"terms {lane.name}: its process did not start (exit code {process.exitcode})"
                )
        self._ready = True

    def run(
        self,
        x_shares: np.ndarray,
        shifts: Sequence[float] | None,
        announce: Callable[[str], None],
        section_of: Callable[[str], str],
    ) -> tuple[np.ndarray, list[BatchReport]]:
        """The terms of one batch, in contiguous parts on the first ``lanes_for`` lanes:
        the shares in order, and each used lane's report (counters, openings, seconds).
        ``announce`` names the share phase once the first lane reaches it; ``section_of``
        gives a phase's byte section on the channel (the main thread labels it)."""
        self.wait_ready()
        n = x_shares.shape[0]
        used = lanes_for(n, self.count)
        bounds = np.linspace(0, n, used + 1).astype(int).tolist()
        for index in range(used):
            low, high = bounds[index], bounds[index + 1]
            self._lanes[index].stats.section = section_of("ln terms (Yao)")
            part = None if shifts is None else list(shifts[low:high])
            try:
                self._connections[index].send((TERMS, x_shares[low:high], part))
            except (OSError, ValueError):
                raise self._ended(index) from None
        outcomes: list[tuple | BaseException | None] = [None] * used
        reached = threading.Event()
        relays = [
            threading.Thread(
                target=self._relay,
                args=(index, outcomes, reached, section_of),
                daemon=True,  # if the main thread fails, the channel closes and the relay ends
                name=f"relay-{self._lanes[index].name}",
            )
            for index in range(used)
        ]
        for relay in relays:
            relay.start()
        reached.wait()
        announce(SHARES_PHASE)
        for relay in relays:
            relay.join()
        for lane in self._lanes[:used]:
            self.channel.settle_lane(lane)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        done = [outcome for outcome in outcomes if isinstance(outcome, tuple)]
        return np.concatenate([outcome[1] for outcome in done]), [outcome[2] for outcome in done]

    def _relay(
        self,
        index: int,
        outcomes: list,
        reached: threading.Event,
        section_of: Callable[[str], str],
    ) -> None:
        """Carry lane ``index``'s messages until its part is done: its sends go out on its
        lane; each message it awaits is read (and checked) on the lane, then handed over.
        A peer's error is passed to the lane (which stops) and is the batch's outcome."""
        connection, lane = self._connections[index], self._lanes[index]
        failure: BaseException | None = None
        shares_from: float | None = None  # this thread's CPU when the lane's share phase began
        try:
            while True:
                message = connection.recv()
                if message[0] == SEND:
                    lane.send(message[1], message[2])
                elif message[0] == RECV:
                    try:
                        payload = lane.recv(message[1], message[2])
                    except ProtocolError as exc:
                        failure = failure or exc
                        connection.send((FAILED, type(exc).__name__, str(exc)))
                    else:
                        connection.send((DATA, payload))
                elif message[0] == PHASE:
                    reached.set()
                    lane.stats.section = section_of(message[1])
                    shares_from = time.thread_time()
                elif message[0] == DONE:
                    _add_relay_cpu(message[2], shares_from)
                    outcomes[index] = message
                    return
                else:  # FAILED
                    outcomes[index] = failure or error_from(message[1], message[2])
                    return
        except (EOFError, OSError):
            outcomes[index] = failure or self._ended(index)
        except BaseException as exc:  # noqa: BLE001 - the batch's outcome, raised by run
            outcomes[index] = failure or exc
        finally:
            reached.set()

    def _ended(self, index: int) -> ExecutorError:
        process = self._processes[index]
        process.join(1.0)
        return ExecutorError(
            f"terms {self._lanes[index].name}: its process ended (exit code {process.exitcode})"
        )

    def close(self) -> None:
        """Stop the lanes' processes (at the end of the job, or when it fails)."""
        for connection in self._connections:
            with contextlib.suppress(OSError, ValueError):
                connection.send((STOP,))
        for process in self._processes:
            process.join(STOP_WAIT_S)
            if process.is_alive():
                process.terminate()
                process.join(STOP_WAIT_S)
        for connection in self._connections:
            connection.close()
