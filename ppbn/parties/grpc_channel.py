"""``Channel`` over one gRPC ``Exchange`` stream: the transport the protocols never see.

Both ends look the same to a protocol. Underneath, the initiating daemon holds the
client side of the bidirectional stream and the peer the server side; either way
outgoing frames go through a queue that gRPC drains (so a slow peer applies
back-pressure instead of filling memory) and a reader thread moves incoming messages into
a second queue that ``_get`` waits on with the job's timeout. Both queues are bounded in
bytes (``queue_bytes``); a message larger than one gRPC frame (``frame_bytes``) travels
as several DATA frames flagged ``more`` and is reassembled, up to the Channel's
``max_message_bytes``, before it is queued.

Every way a job can end on the wire maps to ``PeerGone`` with a line saying which:
the peer finished (CLOSE), gave up (ABORT, with a code whose fixed text is shown: never
text chosen by the peer), its process or connection died (the stream fails), or it went
silent longer than the timeout.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator

import grpc

from ppbn.parties.net import describe_rpc_error
from ppbn.parties.peer_errors import PeerSilent
from ppbn.proto import party_pb2
from ppbn.protocols.channel import Channel, PeerGone, ProtocolError

Frame = party_pb2.Frame
AbortCode = party_pb2.AbortCode

DEFAULT_FRAME_BYTES = 16 * 1024 * 1024
DEFAULT_QUEUE_BYTES = 64 * 1024 * 1024
QUEUE_DEPTH = 64  # frames; the byte bound is what limits memory
_POLL_S = 0.25
_PARAMETER = re.compile(r"^[a-z][a-z_]{0,31}$")

ABORT_TEXTS = {
    AbortCode.POLICY: "its local policy does not allow this job",
    AbortCode.BAD_REQUEST: "it does not run this job as requested (kind or parameters)",
    AbortCode.BUSY: "it is busy with another job",
    AbortCode.MISMATCH: "its schema, records or protocol version differ",
    AbortCode.PROTOCOL: "it received a message that breaks the protocol",
    AbortCode.TIMEOUT: "it waited for us longer than its peer timeout",
    AbortCode.CANCELLED: "its operator cancelled the job",
    AbortCode.SHUTTING_DOWN: "its daemon is shutting down",
    AbortCode.INTERNAL: "an internal error (details in its own log)",
    AbortCode.DUPLICATE_JOB: "it already has a job with this id",
    AbortCode.FAILED: "the job failed there (details in its own log)",
}
# FAILED with one of these parameters: the sender could not write the job down, so no party
# keeps it (an older peer shows the plain FAILED text instead)
OUTPUTS_PARAMETER = "outputs"
AUDIT_LOG_PARAMETER = "audit_log"
RELAYED_PARAMETER = "party_outputs"  # the miner passing on one party's FAILED to the other
FAILED_TEXTS = {
    OUTPUTS_PARAMETER: "it could not write its outputs, so no party keeps the job's outputs (details in its own log)",
    AUDIT_LOG_PARAMETER: "it could not write its audit log, so no party keeps the job's outputs (details in its own log)",
    RELAYED_PARAMETER: "the other party could not write its outputs or its audit log, so no party keeps the "
    "job's outputs (details in its log)",
}


class Malformed:
    """A request the daemon's parser could not decode (gRPC refuses None from a parser)."""


MALFORMED = Malformed()


def abort_text(code: int, parameter: str = "") -> str:
    """The fixed one-line text of an abort code; the parameter name only if it looks like one."""
    if code == AbortCode.FAILED and parameter in FAILED_TEXTS:
        return FAILED_TEXTS[parameter]
    text = ABORT_TEXTS.get(code, f"abort code {int(code)}")
    if code in (AbortCode.POLICY, AbortCode.BAD_REQUEST) and _PARAMETER.match(parameter or ""):
        text += f" (parameter {parameter!r})"
    return text


def frame_kind_name(kind: int) -> str:
    """Name of a frame kind, also for a value the schema does not define (a hostile peer's)."""
    try:
        return Frame.Kind.Name(kind)
    except ValueError:
        return f"undefined kind {int(kind)}"


class _End:
    """Marker in the incoming queue: the stream is over, ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _StopSending:
    """Marker in the outgoing queue: finish the stream after what is already queued."""


class GrpcChannel(Channel):
    """One side of a job's Exchange stream, with the typed-message checks of ``Channel``."""

    def __init__(
        self,
        job_id: str,
        peer: str,
        address: str = "",
        frame_bytes: int = DEFAULT_FRAME_BYTES,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.peer = peer
        self.address = address or peer
        self.frame_bytes = frame_bytes
        self._got_frame = False
        self._incoming: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self._outgoing: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self._incoming_budget = _ByteBudget(queue_bytes)
        self._outgoing_budget = _ByteBudget(queue_bytes)
        self._finished = threading.Event()  # we queued CLOSE or ABORT
        self._stream_dead = threading.Event()  # the transport is gone; stop waiting on it
        self._dead_reason = ""
        # (index, size limit) of the message a receive waits for; messages delivered and taken
        self._awaited: tuple[int, int] | None = None
        self._delivered = 0
        self._taken = 0
        self.peer_abort_code = 0  # the code of the peer's ABORT, once one arrived
        self.peer_abort_parameter = ""  # and its parameter (a name; never shown unchecked)
        self.wire_bytes_received = 0  # every frame from the peer, control frames included
        self._lock = threading.Lock()
        self._on_finish: list[Callable[[], None]] = []

    # -- transport side, driven by the daemon ------------------------------------------
    def queue_control(self, frame: Frame) -> None:
        """Queue a non-DATA frame (OPEN, ACCEPT) ahead of the protocol's messages."""
        frame.job_id = self.job_id
        self._outgoing.put(frame, timeout=self.timeout_s)

    def outgoing_frames(self) -> Iterator[Frame]:
        """Frames for gRPC to send: the request iterator (client) or the response generator (server)."""
        while True:
            try:
                item = self._outgoing.get(timeout=_POLL_S)
            except queue.Empty:
                if self._stream_dead.is_set():
                    return
                continue
            if isinstance(item, _StopSending):
                return
            self._outgoing_budget.release(len(item.payload))
            yield item

    def pump(self, frames: Iterable[Frame], first_expected: int | None = None) -> None:
        """Move frames from the stream into the incoming queue until it ends (run in a thread).

        ``first_expected`` is the control frame kind the opener waits for (ACCEPT); it is
        passed through to ``next_control``. Anything else that is not DATA ends the stream.
        """
        reason = f"peer {self.peer} ended the stream without closing the job"
        parts: list[bytes] = []
        size = 0
        try:
            for frame in frames:
                if self._finished.is_set():  # the job is over here: hold nothing more of the peer's
                    break
                if frame is MALFORMED:
                    reason = f"peer {self.peer} sent a frame that is not a valid Frame message"
                    break
                self._got_frame = True
                self.wire_bytes_received += frame.ByteSize()
                if frame.job_id != self.job_id:
                    reason = f"peer {self.peer} sent a frame for another job"
                    break
                if frame.kind == Frame.DATA:
                    size += len(frame.payload)
                    if size > self.max_message_bytes:
                        reason = (
                            f"peer {self.peer} sent a message of over {self.max_message_bytes} bytes "
                            f"(message {int(frame.seq)})"
                        )
                        break
                    if (frame.more or parts) and self._too_long(size):  # one frame: recv checks it
                        reason = (
                            f"peer {self.peer} sent a message of over {size} bytes where the protocol "
                            f"expects a shorter one (message {int(frame.seq)})"
                        )
                        break
                    parts.append(bytes(frame.payload))
                    if frame.more:
                        continue
                    payload = parts[0] if len(parts) == 1 else b"".join(parts)
                    parts, size = [], 0
                    if not self._deliver((int(frame.seq), frame.tag, payload), len(payload)):
                        return
                    self._delivered += 1
                elif parts:
                    reason = f"peer {self.peer} interrupted a split message with a control frame"
                    break
                elif first_expected is not None and frame.kind == first_expected:
                    first_expected = None
                    if not self._deliver(frame, 0):
                        return
                elif frame.kind == Frame.CLOSE:
                    reason = f"peer {self.peer} closed the job's channel"
                    break
                elif frame.kind == Frame.ABORT:
                    self.peer_abort_code = int(frame.code)
                    self.peer_abort_parameter = frame.parameter[:32]
                    reason = f"peer {self.peer} aborted the job: {abort_text(frame.code, frame.parameter)}"
                    break
                else:
                    reason = (
                        f"peer {self.peer} sent an unexpected frame ({frame_kind_name(frame.kind)})"
                    )
                    break
        except grpc.RpcError as exc:
            if self._got_frame:
                reason = _stream_failure(self.peer, exc)
            else:
                reason = describe_rpc_error(exc, self.address, self.peer)
        except Exception as exc:  # noqa: BLE001 - any transport failure ends the job the same way
            reason = f"connection to peer {self.peer} failed: {exc}"
        self.mark_dead(reason)

    def _too_long(self, size: int) -> bool:
        """Is the message being reassembled, now ``size`` bytes, longer than this side may hold?

        Longer than the receive waiting for it allows: yes, at once. Past the incoming
        queue's budget before a receive waits for it: wait for one (back-pressure on the
        stream); yes once the job is over here. So a peer makes this side hold no more than
        the queue budget or what its own protocol expects next, whichever is larger.
        """
        while True:
            awaited = self._awaited
            if awaited is not None and awaited[0] == self._delivered:
                return size > awaited[1]
            if size <= self._incoming_budget.limit:
                return False
            if self._finished.wait(_POLL_S):
                return True

    @property
    def failure(self) -> str | None:
        """Why the stream ended, once it has; None while it is alive."""
        return self._dead_reason if self._stream_dead.is_set() else None

    def mark_dead(self, reason: str) -> None:
        """The transport ended (or the RPC was cancelled): wake up any waiting receive."""
        with self._lock:
            if self._stream_dead.is_set():
                return
            self._dead_reason = reason
            self._stream_dead.set()
        # A full queue must not block this: receivers also watch _stream_dead.
        with contextlib.suppress(queue.Full):
            self._incoming.put_nowait(_End(reason))

    def _deliver(self, item: object, size: int) -> bool:
        """Queue one message for the protocol; blocks (back-pressure on the stream) while
        the queued bytes are over the budget. False once this side has finished."""
        if not self._incoming_budget.acquire(size, self._finished):
            return False
        while not self._finished.is_set():
            try:
                self._incoming.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def next_control(self, timeout_s: float) -> Frame:
        """Wait for the control frame ``pump`` was told to expect; PeerGone if the stream ends first."""
        item = self._next_item(timeout_s, what="an answer to the job request")
        if not isinstance(item, Frame):
            self._incoming_budget.release(len(item[2]))  # type: ignore[index]
            raise ProtocolError(f"peer {self.peer} sent protocol messages before accepting the job")
        return item

    def on_finish(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once this side has closed or aborted (e.g. cancel the RPC later)."""
        self._on_finish.append(callback)

    # -- Channel transport ----------------------------------------------------------
    def _put(self, seq: int, tag: str, payload: bytes) -> None:
        if self._finished.is_set():
            raise PeerGone("channel is closed")
        if self._stream_dead.is_set():
            raise PeerGone(self._dead_reason)
        step = max(self.frame_bytes, 1)
        starts = range(0, max(len(payload), 1), step)
        for start in starts:
            chunk = payload[start : start + step]
            more = start + step < len(payload)
            self._queue_out(
                Frame(
                    kind=Frame.DATA, job_id=self.job_id, seq=seq, tag=tag, payload=chunk, more=more
                )
            )

    def _queue_out(self, frame: Frame) -> None:
        """Queue one DATA frame, waiting while the peer drains too slowly (up to the timeout)."""
        alive = threading.Event()  # never set: the budget waits until the stream dies or times out
        waited = 0.0
        while not self._outgoing_budget.acquire(len(frame.payload), alive, _POLL_S):
            waited += _POLL_S
            if self._stream_dead.is_set():
                raise PeerGone(self._dead_reason)
            if self._finished.is_set():  # we aborted meanwhile (cancel, SIGTERM)
                raise PeerGone("channel is closed")
            if waited >= self.timeout_s:
                raise PeerGone(f"peer {self.peer} took no messages for {self.timeout_s:g} s")
        while True:
            try:
                self._outgoing.put(frame, timeout=_POLL_S)
                return
            except queue.Full:
                waited += _POLL_S
                if self._stream_dead.is_set():
                    raise PeerGone(self._dead_reason) from None
                if self._finished.is_set():
                    raise PeerGone("channel is closed") from None
                if waited >= self.timeout_s:
                    raise PeerGone(
                        f"peer {self.peer} took no messages for {self.timeout_s:g} s"
                    ) from None

    def _expect(self, max_bytes: int) -> None:
        self._awaited = (self._taken, max_bytes)

    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        try:
            item = self._next_item(timeout_s, what="a message")
        finally:
            self._awaited = None
        if isinstance(item, Frame):
            raise ProtocolError(
                f"peer {self.peer} sent a second {frame_kind_name(item.kind)} frame"
            )
        self._incoming_budget.release(len(item[2]))  # type: ignore[index]
        self._taken += 1
        return item  # type: ignore[return-value]

    def _next_item(self, timeout_s: float, what: str) -> object:
        waited = 0.0
        while True:
            try:
                item = self._incoming.get(timeout=min(_POLL_S, max(timeout_s - waited, 0.01)))
            except queue.Empty:
                waited += _POLL_S
                if self._stream_dead.is_set() and self._incoming.empty():
                    raise PeerGone(self._dead_reason) from None
                if self._finished.is_set():  # we aborted (cancel, SIGTERM): stop waiting at once
                    raise PeerGone("channel is closed") from None
                if waited >= timeout_s:
                    raise PeerSilent(
                        f"peer {self.peer} sent nothing for {timeout_s:g} s (waiting for {what})"
                    ) from None
                continue
            if isinstance(item, _End):
                raise PeerGone(item.reason)
            return item

    def close(self) -> None:
        """Finish normally: tell the peer with CLOSE and end our half of the stream."""
        self._finish(Frame(kind=Frame.CLOSE, job_id=self.job_id))

    def abort(self, code: int, parameter: str = "") -> None:
        """Give up: send ABORT with a code (and, for POLICY, the parameter at fault) so the
        peer's job fails too; the peer shows the code's fixed text, never ours."""
        self._finish(Frame(kind=Frame.ABORT, job_id=self.job_id, code=code, parameter=parameter))

    def _drop_incoming(self) -> None:
        """Nothing reads after CLOSE or ABORT: free what the peer had queued (up to the
        queue budget) instead of keeping it as long as the job is remembered."""
        with contextlib.suppress(queue.Empty):
            for _ in range(QUEUE_DEPTH + 1):
                self._incoming.get_nowait()

    def _finish(self, frame: Frame) -> None:
        with self._lock:
            if self._finished.is_set():
                return
            self._finished.set()
        self._incoming_budget.close()
        self._drop_incoming()
        if not self._stream_dead.is_set():
            for item in (frame, _StopSending()):
                try:
                    self._outgoing.put(item, timeout=min(self.timeout_s, 5.0))
                except queue.Full:
                    break
        for callback in self._on_finish:
            callback()


class _ByteBudget:
    """Bytes held in one queue: ``acquire`` waits while adding ``size`` would pass the bound.

    A single item larger than the bound is let through when the queue is empty, so a
    message up to the Channel's own limit can still pass (alone).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._closed = False
        self._cond = threading.Condition()

    def acquire(self, size: int, stop: threading.Event, wait_s: float | None = None) -> bool:
        """Reserve ``size`` bytes; False if ``stop`` is set, the budget closed, or ``wait_s`` ran out."""
        waited = 0.0
        with self._cond:
            while self.held > 0 and self.held + size > self.limit:
                if stop.is_set() or self._closed or (wait_s is not None and waited >= wait_s):
                    return False
                self._cond.wait(_POLL_S)
                waited += _POLL_S
            if stop.is_set() or self._closed:
                return False
            self.held += size
            return True

    def release(self, size: int) -> None:
        with self._cond:
            self.held = max(self.held - size, 0)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def _stream_failure(peer: str, exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else "") or str(exc)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return f"stream with peer {peer} broke: a message exceeded the size limit ({details})"
    if code == grpc.StatusCode.CANCELLED:
        return f"connection to peer {peer} was cancelled (its daemon stopped or was killed)"
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"connection to peer {peer} lost (its daemon stopped or was killed, or the link dropped): {details}"
    name = code.name if code is not None else "ERROR"
    return f"stream with peer {peer} failed: {name}: {details}"
