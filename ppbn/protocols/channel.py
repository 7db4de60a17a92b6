"""The one interface every two-party protocol talks through.

A protocol never knows whether its peer is a thread in the same process (unit tests) or
a daemon on another host (gRPC over mutual TLS, in ``ppbn.parties``). It sends and
receives *typed* messages: a short tag naming the step, and a byte payload. The base
class numbers messages, checks tags and sizes on receipt, and keeps the counters that
``simulate`` and ``bench`` report (bytes, messages, rounds).

Each channel carries a public ``session`` label: the job id on the daemons' gRPC channel,
empty on in-memory test channels unless a test sets one. Every hash and garbling tweak of
the protocols that run over the channel is domain-separated by it (``fixed_key`` in
``ppbn.circuits.garble``), so no two jobs share a fixed-key permutation. Both ends must
use the same label; it is not secret and is never sent.

Validation is part of the contract: a peer that sends the wrong tag, an oversized
payload, or an array of the wrong shape makes the receiver raise ``ProtocolError`` with a
one-line message instead of crashing later or hanging.

A transport's ``_put`` must not wait for the peer to read the message (up to a bound far
above one protocol step's messages): protocols send their next message before they read
the peer's where that overlaps work with the wire (``arith.ole``, lanes), which over a
transport that blocks until the peer reads would leave both ends waiting in ``send``.

Lanes: ``open_lane`` starts a second conversation over the same transport, so that two
protocol steps can run side by side in two threads (the table phase of the next families
while the current ones are scored, ``scorer.SecureScorer``). A lane's frames carry its name in
the tag ("lane1|tables.masked"); whichever thread reads the transport hands frames of the
other conversation to it. Both parties open lanes at the same points of their protocol,
so they agree on the names (numbered in opening order). The peer's thread on a new lane
may send before this party's opens its end, so a frame for one of the next
``EARLY_LANES`` lanes waits for it; a frame for a lane already closed, or further ahead,
is a ``ProtocolError``, and the frames waiting for lanes are bounded in bytes.
"""

from __future__ import annotations

import queue
import struct
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ppbn.protocols.constants import DEFAULT_TIMEOUT_S  # read by the command line's help too

DEFAULT_MAX_MESSAGE_BYTES = 512 * 1024 * 1024
LANE_MARK = "|"  # never part of a protocol's own tags
MAIN_LANE = ""
LANE_BACKLOG_BYTES = 256 * 1024 * 1024  # frames read for a lane before it asked for them
EARLY_LANES = 2  # lanes not yet opened here whose frames may arrive (the peer opened them first)


class ProtocolError(Exception):
    """The peer broke the protocol: wrong tag, bad size, value out of range, timeout."""


class PeerGone(ProtocolError):
    """The peer closed the channel or stopped answering within the timeout."""


NO_SECTION = "setup"  # traffic before the first labelled phase (hello, record checks)


@dataclass
class ChannelStats:
    """Traffic counters of one side of a channel; a round is a change of direction.

    Bytes and messages are also kept per (section, tag): ``section`` is a label the owner
    of the channel sets (the daemon sets the job's current phase), the tag is the message
    kind the protocol named ("yao.tables", "ot.ext.u", ...), so a run can say where its
    bytes went. Tags are fixed strings of the protocols and only tags the receiver
    expected are counted, so the breakdown stays small whatever a peer sends.
    """

    bytes_sent: int = 0
    bytes_received: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    rounds: int = 0
    section: str = NO_SECTION
    # (section, tag) -> [bytes sent, bytes received, messages sent, messages received]
    by_kind: dict[tuple[str, str], list[int]] = field(default_factory=dict, repr=False)
    _last_direction: str = field(default="", repr=False)

    def note(self, direction: str, size: int, tag: str = "") -> None:
        cell = self.by_kind.get((self.section, tag))
        if cell is None:
            cell = self.by_kind[(self.section, tag)] = [0, 0, 0, 0]
        if direction == "send":
            self.bytes_sent += size
            self.messages_sent += 1
            cell[0] += size
            cell[2] += 1
        else:
            self.bytes_received += size
            self.messages_received += 1
            cell[1] += size
            cell[3] += 1
        if direction != self._last_direction:
            if direction == "send":
                self.rounds += 1
            self._last_direction = direction

    def as_dict(self) -> dict[str, int]:
        return {
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "messages_sent": self.messages_sent,
            "messages_received": self.messages_received,
            "rounds": self.rounds,
        }

    def add(self, other: ChannelStats, mirrored: bool = False) -> None:
        """Add ``other``'s counters (``mirrored``: seen from its peer, sent and received
        swapped); rounds take the larger, as channels that run side by side."""
        s = (1, 0, 3, 2) if mirrored else (0, 1, 2, 3)
        self.bytes_sent += other.bytes_received if mirrored else other.bytes_sent
        self.bytes_received += other.bytes_sent if mirrored else other.bytes_received
        self.messages_sent += other.messages_received if mirrored else other.messages_sent
        self.messages_received += other.messages_sent if mirrored else other.messages_received
        self.rounds = max(self.rounds, other.rounds)
        for key, cell in other.by_kind.items():
            mine = self.by_kind.setdefault(key, [0, 0, 0, 0])
            for i in range(4):
                mine[i] += cell[s[i]]

    def breakdown(self) -> dict[str, dict[str, dict[str, int]]]:
        """{section: {tag: {bytes_sent, bytes_received, messages_sent, messages_received}}}."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for (section, tag), (sent, received, n_sent, n_received) in self.by_kind.items():
            out.setdefault(section, {})[tag] = {
                "bytes_sent": sent,
                "bytes_received": received,
                "messages_sent": n_sent,
                "messages_received": n_received,
            }
        return out


class Channel(ABC):
    """Ordered, reliable, typed message pipe between exactly two parties.

    Subclasses implement ``_put`` and ``_get`` for raw frames; this class adds sequence
    numbers, tag checks, size limits, counters and an optional transcript of everything
    received (tests use it to check that what a party sees is independent of the other
    party's data). ``session`` is the public label of the job the channel serves (see
    the module doc).
    """

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        keep_transcript: bool = False,
        session: bytes = b"",
    ) -> None:
        if not isinstance(session, bytes):
            raise TypeError(f"session must be bytes, got {type(session).__name__}")
        self.session = session
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        self.stats = ChannelStats()
        self.transcript: list[tuple[str, bytes]] | None = [] if keep_transcript else None
        self._send_seq = 0
        self._recv_seq = 0
        self._send_lock = threading.Lock()  # a message's frames stay together on the transport
        self._lanes = threading.Condition()
        self._waiting: dict[str, deque[tuple[int, str, bytes]]] = {MAIN_LANE: deque()}
        self._waiting_bytes = 0
        self._reading = False  # a thread is reading the transport for every lane
        self._lanes_opened = 0
        self._early_lanes = EARLY_LANES

    # -- transport, implemented by subclasses -------------------------------------
    @abstractmethod
    def _put(self, seq: int, tag: str, payload: bytes) -> None:
        """Deliver one frame to the peer."""

    @abstractmethod
    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        """Next frame from the peer; raise PeerGone on close or timeout."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release transport resources; the default has none."""

    def _expect(self, max_bytes: int) -> None:  # noqa: B027 - optional hook
        """The next ``_get`` is for a message of at most ``max_bytes``: a transport that
        reassembles messages can refuse a longer one before holding all of it."""

    # -- typed messages -----------------------------------------------------------
    def send(self, tag: str, payload: bytes) -> None:
        if len(payload) > self.max_message_bytes:
            raise ProtocolError(
                f"message {tag!r} is {len(payload)} bytes, over the limit {self.max_message_bytes}"
            )
        with self._send_lock:
            self._put(self._send_seq, tag, bytes(payload))
        self._send_seq += 1
        self.stats.note("send", len(payload) + len(tag), tag)

    def recv(self, tag: str, max_bytes: int | None = None) -> bytes:
        seq, got_tag, payload = self._receive_frame(
            self.max_message_bytes if max_bytes is None else max_bytes
        )
        if seq != self._recv_seq:
            raise ProtocolError(
                f"message {got_tag!r}: sequence number {seq}, expected {self._recv_seq}"
            )
        self._recv_seq += 1
        if got_tag != tag:
            raise ProtocolError(f"expected message {tag!r} from peer, got {got_tag!r}")
        limit = self.max_message_bytes if max_bytes is None else max_bytes
        if len(payload) > limit:
            raise ProtocolError(f"message {tag!r} is {len(payload)} bytes, over the limit {limit}")
        self.stats.note("recv", len(payload) + len(tag), tag)
        if self.transcript is not None:
            self.transcript.append((tag, payload))
        return payload

    # -- lanes ----------------------------------------------------------------------
    def open_lane(self, session: bytes | None = None) -> LaneChannel:
        """A second conversation over this channel, for another thread (module doc); the
        peer opens its end at the same point of the protocol. Close it with ``close_lane``.
        ``session`` gives the lane its own session label (default: this channel's), so that
        hashes keyed by it (garbling, OT, lookups) are domain-separated from this channel's."""
        with self._lanes:
            self._lanes_opened += 1
            name = f"lane{self._lanes_opened}"
            self._waiting.setdefault(name, deque())  # frames may be waiting already
        return LaneChannel(self, name, session)

    def expect_lanes(self, count: int) -> None:
        """The protocol will open ``count`` lanes at one point (a job's terms lanes): the
        peer's frames for any of them, and for the usual ``EARLY_LANES`` after, may come
        before this party has opened them. ``count`` is the job's, bounded by local policy."""
        with self._lanes:
            self._early_lanes = max(self._early_lanes, EARLY_LANES + count)

    def _is_early_lane(self, name: str) -> bool:
        """``name`` is one of the next ``EARLY_LANES`` (``expect_lanes``: more) lanes, not
        yet opened here (call with ``_lanes`` held)."""
        prefix, _, number = name.partition("lane")
        if prefix or not number.isdigit():
            return False
        return self._lanes_opened < int(number) <= self._lanes_opened + self._early_lanes

    def close_lane(self, lane: LaneChannel) -> None:
        """End a lane whose conversation is over: its counters (and transcript) join this
        channel's; frames still waiting for it break the protocol."""
        with self._lanes:
            left = self._waiting.pop(lane.name, None)
            if left:
                self._waiting_bytes -= sum(len(frame[2]) for frame in left)
        if left:
            raise ProtocolError(
                f"peer sent {len(left)} more messages on {lane.name} than the protocol has"
            )
        self.settle_lane(lane)

    def settle_lane(self, lane: LaneChannel) -> None:
        """Move a lane's counters (and transcript) so far into this channel's, and keep the
        lane open: a lane that lives for a whole job reports its traffic step by step."""
        self.stats.add(lane.stats)
        lane.stats = ChannelStats(section=lane.stats.section)
        if self.transcript is not None and lane.transcript is not None:
            self.transcript.extend(lane.transcript)
            lane.transcript.clear()

    def _receive_frame(self, max_bytes: int) -> tuple[int, str, bytes]:
        return self._frame_for(MAIN_LANE, max_bytes, self.timeout_s)

    def _frame_for(self, lane: str, max_bytes: int, timeout_s: float) -> tuple[int, str, bytes]:
        """The next frame of ``lane``: one waiting for it, or read from the transport by this
        thread, which hands the frames of other lanes to them until one of its own comes."""
        deadline = time.monotonic() + timeout_s
        with self._lanes:
            while True:
                if self._waiting[lane]:
                    frame = self._waiting[lane].popleft()
                    self._waiting_bytes -= len(frame[2])
                    return frame
                if not self._reading:
                    self._reading = True
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PeerGone(f"peer sent nothing within {timeout_s:g} s")
                self._lanes.wait(min(remaining, 0.5))
        # the first read waits the whole timeout, so a transport's timeout message names it;
        # reads after another lane's frame wait what is left of it
        remaining = timeout_s
        try:
            while True:
                if remaining <= 0:
                    raise PeerGone(f"peer sent nothing within {timeout_s:g} s")
                with self._lanes:
                    side_lanes = len(self._waiting) > 1
                # with lanes open the next frame may be another lane's: only the general limit applies
                self._expect(self.max_message_bytes if side_lanes else max_bytes)
                seq, tag, payload = self._get(remaining)
                name, mark, inner = tag.rpartition(LANE_MARK)
                if not mark:
                    name, inner = MAIN_LANE, tag
                if name == lane:
                    return seq, inner, payload
                with self._lanes:
                    if name not in self._waiting:
                        if not self._is_early_lane(name):
                            raise ProtocolError(f"message {tag!r}: no such lane is open")
                        self._waiting[name] = deque()
                    if self._waiting_bytes + len(payload) > LANE_BACKLOG_BYTES:
                        raise ProtocolError(
                            f"message {tag!r}: over {LANE_BACKLOG_BYTES} bytes wait for other lanes"
                        )
                    self._waiting[name].append((seq, inner, payload))
                    self._waiting_bytes += len(payload)
                    self._lanes.notify_all()
                remaining = deadline - time.monotonic()
        finally:
            with self._lanes:
                self._reading = False
                self._lanes.notify_all()

    # -- numpy arrays -------------------------------------------------------------
    def send_array(self, tag: str, array: np.ndarray) -> None:
        """Send a C-contiguous array; shape and dtype are agreed by the protocol, not sent."""
        self.send(tag, np.ascontiguousarray(array).tobytes())

    def recv_array(self, tag: str, dtype: np.dtype | type, shape: Sequence[int]) -> np.ndarray:
        """Receive an array whose dtype and shape the receiver already knows; check the size."""
        dt = np.dtype(dtype)
        expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        payload = self.recv(tag, max_bytes=expected)
        if len(payload) != expected:
            raise ProtocolError(
                f"message {tag!r}: {len(payload)} bytes, expected {expected} for shape {tuple(shape)} {dt}"
            )
        return np.frombuffer(payload, dtype=dt).reshape(tuple(shape)).copy()

    # -- big integers (Paillier ciphertexts, group elements) --------------------------
    def send_ints(self, tag: str, values: Iterable[int], width_bytes: int) -> None:
        """Send non-negative integers as fixed-width big-endian fields."""
        self.send(tag, b"".join(int(v).to_bytes(width_bytes, "big") for v in values))

    def recv_ints(self, tag: str, count: int, width_bytes: int) -> list[int]:
        expected = count * width_bytes
        payload = self.recv(tag, max_bytes=expected)
        if len(payload) != expected:
            raise ProtocolError(
                f"message {tag!r}: {len(payload)} bytes, expected {count} integers of {width_bytes} bytes"
            )
        return [
            int.from_bytes(payload[i : i + width_bytes], "big")
            for i in range(0, expected, width_bytes)
        ]

    # -- rows of bits (Yao's decoding bits, permute bits and values) ---------------------
    def send_bits(self, tag: str, bits: np.ndarray) -> None:
        """(rows, instances) bits, packed 8 to a byte; no message for no rows (``recv_bits``)."""
        if len(bits):
            self.send_array(tag, np.packbits(bits.astype(np.uint8), axis=1, bitorder="little"))

    def recv_bits(self, tag: str, rows: int, k: int) -> np.ndarray:
        """(rows, k) bits sent by ``send_bits``; none and no message where ``rows`` is 0."""
        if not rows:
            return np.empty((0, k), dtype=np.uint8)
        packed = self.recv_array(tag, np.uint8, (rows, (k + 7) // 8))
        return np.unpackbits(packed, axis=1, count=k, bitorder="little")

    # -- small structured values --------------------------------------------------
    def send_u64s(self, tag: str, values: Sequence[int]) -> None:
        self.send(tag, struct.pack(f">{len(values)}Q", *values))

    def recv_u64s(self, tag: str, count: int) -> tuple[int, ...]:
        payload = self.recv(tag, max_bytes=8 * count)
        if len(payload) != 8 * count:
            raise ProtocolError(f"message {tag!r}: {len(payload)} bytes, expected {8 * count}")
        return struct.unpack(f">{count}Q", payload)


class LaneChannel(Channel):
    """One lane of a channel (``Channel.open_lane``): its own sequence numbers, counters
    and transcript over the parent's transport."""

    def __init__(self, parent: Channel, name: str, session: bytes | None = None) -> None:
        super().__init__(
            timeout_s=parent.timeout_s,
            max_message_bytes=parent.max_message_bytes,
            keep_transcript=parent.transcript is not None,
            session=parent.session if session is None else session,
        )
        self.parent = parent
        self.name = name
        self.stats.section = parent.stats.section

    def _put(self, seq: int, tag: str, payload: bytes) -> None:
        with self.parent._send_lock:
            self.parent._put(seq, f"{self.name}{LANE_MARK}{tag}", payload)

    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        raise ProtocolError(
            "a lane reads through its parent channel"
        )  # only _receive_frame is used

    def _receive_frame(self, max_bytes: int) -> tuple[int, str, bytes]:
        return self.parent._frame_for(self.name, max_bytes, self.timeout_s)

    def open_lane(self, session: bytes | None = None) -> LaneChannel:
        raise ProtocolError("lanes open on the channel itself, not on a lane")


class MemoryChannel(Channel):
    """One end of an in-process channel pair (both parties in threads, for tests)."""

    _CLOSED = object()

    def __init__(self, inbox: queue.Queue, outbox: queue.Queue, **kwargs) -> None:
        super().__init__(**kwargs)
        self._inbox = inbox
        self._outbox = outbox
        self._closed = threading.Event()

    def _put(self, seq: int, tag: str, payload: bytes) -> None:
        if self._closed.is_set():
            raise PeerGone("channel is closed")
        self._outbox.put((seq, tag, payload))

    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerGone(f"peer sent nothing within {timeout_s:g} s")
            try:
                item = self._inbox.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if item is self._CLOSED:
                raise PeerGone("peer closed the channel")
            return item

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._outbox.put(self._CLOSED)


def memory_channel_pair(**kwargs) -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected in-memory channel ends: (alice_end, bob_end)."""
    a_to_b: queue.Queue = queue.Queue()
    b_to_a: queue.Queue = queue.Queue()
    return MemoryChannel(b_to_a, a_to_b, **kwargs), MemoryChannel(a_to_b, b_to_a, **kwargs)


def run_two_party(
    alice_fn,
    bob_fn,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    pair: tuple[Channel, Channel] | None = None,
    **channel_kwargs,
):
    """Run ``alice_fn(channel)`` and ``bob_fn(channel)`` in two threads over a memory pair.

    Pass ``pair`` (from ``memory_channel_pair``) to inspect counters or transcripts after
    the run. Returns (alice_result, bob_result); re-raises the first exception either
    side raised (and closes that end so the other side does not hang).
    """
    alice_ch, bob_ch = pair or memory_channel_pair(timeout_s=timeout_s, **channel_kwargs)
    results: dict[str, object] = {}
    errors: dict[str, BaseException] = {}

    def runner(name: str, fn, ch: MemoryChannel) -> None:
        try:
            results[name] = fn(ch)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            errors[name] = exc
            ch.close()

    threads = [
        threading.Thread(target=runner, args=("alice", alice_fn, alice_ch), daemon=True),
        threading.Thread(target=runner, args=("bob", bob_fn, bob_ch), daemon=True),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s * 4)
    for name in ("alice", "bob"):
        if name in errors and not isinstance(errors[name], PeerGone):
            raise errors[name]
    for name in ("alice", "bob"):
        if name in errors:
            raise errors[name]
    if len(results) != 2:
        raise PeerGone("two-party run did not finish")
    return results["alice"], results["bob"]
