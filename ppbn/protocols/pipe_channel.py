"""A Channel over a multiprocessing pipe: the two parties of a benchmark in two processes.

The daemons talk over gRPC (``ppbn/parties/grpc_channel.py``); the benchmarks that measure
a protocol between two local processes use this one, optionally slowed by a link model.
"""

from __future__ import annotations

import queue
import threading
import time
from multiprocessing.connection import Connection
from typing import Protocol

from ppbn.protocols.channel import Channel, PeerGone


class LinkModel(Protocol):
    """One sending direction of a link (``ppbn/pair/shaper.py``'s ``Direction``)."""

    def schedule(self, size: int, now: float) -> float:
        """When ``size`` bytes sent at ``now`` arrive at the other end (monotonic seconds)."""
        ...


class PipeChannel(Channel):
    """A Channel over a multiprocessing pipe: the two parties in two processes.

    Sends go through a queue that a thread drains into the pipe, so that ``send`` does not
    wait for the peer to read, as on the daemons' gRPC channel: a protocol may send its next
    message before it reads the peer's (the pipelined OLE chunks of ``arith.ole``), which
    over a bare pipe would leave both ends blocked in ``send``."""

    def __init__(self, connection: Connection, link: LinkModel | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._connection = connection
        self._link = link  # --link: this process's sending direction of the link model
        self._outgoing: queue.Queue = queue.Queue()
        self._send_failure: str | None = None
        self._sender = threading.Thread(target=self._drain, daemon=True, name="pipe-sender")
        self._sender.start()

    def _drain(self) -> None:
        while (item := self._outgoing.get()) is not None:
            try:
                self._connection.send(item)
            except (BrokenPipeError, OSError) as exc:
                self._send_failure = f"peer closed the pipe: {exc}"
                return

    def _put(self, seq: int, tag: str, payload: bytes) -> None:
        if self._send_failure:
            raise PeerGone(self._send_failure)
        # the monotonic clock is system-wide on Linux, so the receiver can wait for the stamp
        arrives = (
            self._link.schedule(len(payload) + len(tag), time.monotonic()) if self._link else 0.0
        )
        self._outgoing.put((seq, tag, payload, arrives))

    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        try:
            if not self._connection.poll(timeout_s):
                raise PeerGone(f"peer sent nothing within {timeout_s:g} s")
            seq, tag, payload, arrives = self._connection.recv()
        except (EOFError, OSError) as exc:
            raise PeerGone(f"peer closed the pipe: {exc}") from None
        wait = arrives - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        return seq, tag, payload

    def close(self) -> None:
        """Send what is queued (up to the timeout), then close the pipe."""
        self._outgoing.put(None)
        self._sender.join(self.timeout_s)
        self._connection.close()


def close_party_end(channel: PipeChannel | None, connection: Connection) -> None:
    """End of a party process: send what the channel still queues, then close the pipe."""
    if channel is not None:
        channel.close()
    else:
        connection.close()
