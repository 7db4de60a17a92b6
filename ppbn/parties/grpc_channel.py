"""``Channel`` over one gRPC ``Exchange`` stream: the transport the protocols never see.

Both ends look the same to a protocol. Underneath, the initiating daemon holds the
client side of the bidirectional stream and the peer the server side; either way
outgoing frames go through a bounded queue that gRPC drains (so a slow peer applies
back-pressure instead of filling memory) and a reader thread moves incoming frames into
a second bounded queue that ``_get`` waits on with the job's timeout.

Every way a job can end on the wire maps to ``PeerGone`` with a line saying which:
the peer finished (CLOSE), gave up with a reason (ABORT), its process or connection
died (the stream fails), or it went silent longer than the timeout.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator

import grpc

from ppbn.parties.net import describe_rpc_error
from ppbn.proto import party_pb2
from ppbn.protocols.channel import Channel, PeerGone, ProtocolError

Frame = party_pb2.Frame

QUEUE_DEPTH = 16
_POLL_S = 0.25


class _End:
    """Marker in the incoming queue: the stream is over, ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _StopSending:
    """Marker in the outgoing queue: finish the stream after what is already queued."""


class GrpcChannel(Channel):
    """One side of a job's Exchange stream, with the typed-message checks of ``Channel``."""

    def __init__(self, job_id: str, peer: str, address: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id
        self.peer = peer
        self.address = address or peer
        self._got_frame = False
        self._incoming: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self._outgoing: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self._finished = threading.Event()  # we queued CLOSE or ABORT
        self._stream_dead = threading.Event()  # the transport is gone; stop waiting on it
        self._dead_reason = ""
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
            yield item

    def pump(self, frames: Iterable[Frame], first_expected: int | None = None) -> None:
        """Move frames from the stream into the incoming queue until it ends (run in a thread).

        ``first_expected`` is the control frame kind the opener waits for (ACCEPT); it is
        passed through to ``next_control``. Anything else that is not DATA ends the stream.
        """
        reason = f"peer {self.peer} ended the stream without closing the job"
        try:
            for frame in frames:
                self._got_frame = True
                if frame.job_id != self.job_id:
                    reason = f"peer {self.peer} sent a frame for job {frame.job_id!r}, not {self.job_id!r}"
                    break
                if frame.kind == Frame.DATA:
                    if not self._deliver((int(frame.seq), frame.tag, bytes(frame.payload))):
                        return
                elif first_expected is not None and frame.kind == first_expected:
                    first_expected = None
                    if not self._deliver(frame):
                        return
                elif frame.kind == Frame.CLOSE:
                    reason = f"peer {self.peer} closed the job's channel"
                    break
                elif frame.kind == Frame.ABORT:
                    reason = f"peer {self.peer} aborted the job: {frame.error or 'no reason given'}"
                    break
                else:
                    reason = f"peer {self.peer} sent an unexpected {Frame.Kind.Name(frame.kind)} frame"
                    break
        except grpc.RpcError as exc:
            if self._got_frame:
                reason = _stream_failure(self.peer, exc)
            else:
                reason = describe_rpc_error(exc, self.address, self.peer)
        except Exception as exc:  # noqa: BLE001 - any transport failure ends the job the same way
            reason = f"connection to peer {self.peer} failed: {exc}"
        self.mark_dead(reason)

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

    def _deliver(self, item: object) -> bool:
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
        frame = Frame(kind=Frame.DATA, job_id=self.job_id, seq=seq, tag=tag, payload=payload)
        waited = 0.0
        while True:
            try:
                self._outgoing.put(frame, timeout=_POLL_S)
                return
            except queue.Full:
                waited += _POLL_S
                if self._stream_dead.is_set():
                    raise PeerGone(self._dead_reason) from None
                if waited >= self.timeout_s:
                    raise PeerGone(
                        f"peer {self.peer} took no messages for {self.timeout_s:g} s"
                    ) from None

    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        item = self._next_item(timeout_s, what="a message")
        if isinstance(item, Frame):
            raise ProtocolError(f"peer {self.peer} sent a second {Frame.Kind.Name(item.kind)} frame")
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
                if waited >= timeout_s:
                    raise PeerGone(
                        f"peer {self.peer} sent nothing for {timeout_s:g} s (waiting for {what})"
                    ) from None
                continue
            if isinstance(item, _End):
                raise PeerGone(item.reason)
            return item

    def close(self) -> None:
        """Finish normally: tell the peer with CLOSE and end our half of the stream."""
        self._finish(Frame(kind=Frame.CLOSE, job_id=self.job_id))

    def abort(self, reason: str) -> None:
        """Give up: send ABORT with a one-line reason so the peer's job fails with it too."""
        self._finish(Frame(kind=Frame.ABORT, job_id=self.job_id, error=reason[:2000]))

    def _finish(self, frame: Frame) -> None:
        with self._lock:
            if self._finished.is_set():
                return
            self._finished.set()
        if not self._stream_dead.is_set():
            for item in (frame, _StopSending()):
                try:
                    self._outgoing.put(item, timeout=min(self.timeout_s, 5.0))
                except queue.Full:
                    break
        for callback in self._on_finish:
            callback()


def _stream_failure(peer: str, exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else "") or str(exc)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return f"stream with peer {peer} broke: a message exceeded the size limit ({details})"
    if code == grpc.StatusCode.CANCELLED:
        return f"connection to peer {peer} was cancelled (its daemon stopped or was killed)"
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"connection to peer {peer} lost (its daemon stopped or was killed): {details}"
    name = code.name if code is not None else "ERROR"
    return f"stream with peer {peer} failed: {name}: {details}"
