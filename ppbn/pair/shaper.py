"""A link model for benchmarks: ppbn's own shaping TCP relay, and a shaped in-memory channel.

The two daemons are meant for separate hosts, so the figures that matter are bytes on the
wire and round trips. ``ppbn bench ... --link RATE[/RTT]`` measures a run as if the two
parties were joined by a link of that rate and round-trip time, without root (no ``tc``,
no network namespaces). It is a measurement tool, not a transport option: the daemons
are unchanged and only see a different ``--peer`` address.

The model, per direction of the link: a FIFO that sends at RATE (each chunk leaves when
the chunks before it have left and its own bits have been clocked out: a token bucket one
chunk deep), then a fixed one-way delay of RTT/2. Every chunk carries its delivery time,
so rate and latency compose like a real link: a request/response costs RTT plus both
serialisations, a long transfer costs size/RATE plus RTT/2. Both relays of a pair (alice
dials bob through one, bob dials alice through the other) share the two directions, as
one physical link would. A relay reads no further ahead than ``BACKLOG_S`` of
serialisation, so a fast sender is slowed by TCP back-pressure instead of filling memory.

``ShapedMemoryChannel`` applies the same model per message to the in-memory channel of
``bench ln`` (both parties in one process): a message of S bytes arrives S/RATE after the
direction is free, plus RTT/2.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import re
import threading
import time
from dataclasses import dataclass

from ppbn.errors import UserError
from ppbn.protocols.channel import MemoryChannel

CHUNK_BYTES = 64 * 1024
BACKLOG_S = 0.05  # how far ahead of the wire a relay reads (a router's queue)
_UNITS_BPS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_UNITS_S = {"ms": 1e-3, "s": 1.0}
_LINK = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)(?:/(\d+(?:\.\d+)?)(ms|s))?$")


@dataclass(frozen=True)
class LinkSpec:
    """A link's rate in bits per second and its round-trip time in seconds."""

    rate_bps: float
    rtt_s: float
    text: str

    @property
    def one_way_s(self) -> float:
        return self.rtt_s / 2

    def as_dict(self) -> dict[str, float | str]:
        return {"link": self.text, "rate_mbit_s": self.rate_bps / 1e6, "rtt_ms": self.rtt_s * 1e3}


def parse_link(text: str) -> LinkSpec:
    """``100mbit/20ms``, ``1gbit``, ``10mbit/0.05s``: SI units, as ``tc`` reads them."""
    match = _LINK.match(text.strip().lower())
    if not match:
        raise UserError(
            f"--link {text!r}: expected RATE[/RTT] such as 100mbit/20ms or 1gbit "
            "(RATE in kbit, mbit or gbit; RTT in ms or s)"
        )
    rate = float(match.group(1)) * _UNITS_BPS[match.group(2)]
    rtt = float(match.group(3)) * _UNITS_S[match.group(4)] if match.group(3) else 0.0
    if rate <= 0:
        raise UserError(f"--link {text!r}: the rate must be above 0")
    if rtt > 60:
        raise UserError(f"--link {text!r}: a round-trip time over 60 s is not a link")
    return LinkSpec(rate, rtt, text.strip())


class Direction:
    """One direction of the link: when each chunk arrives, and what crossed."""

    def __init__(self, name: str, spec: LinkSpec) -> None:
        self.name = name
        self.spec = spec
        self.busy_until = 0.0  # when the last scheduled bit leaves (monotonic clock)
        self.bytes = 0
        self.chunks = 0
        self._lock = threading.Lock()

    def schedule(self, size: int, now: float) -> float:
        """Queue ``size`` bytes at ``now``; return when they arrive at the far end."""
        with self._lock:
            start = max(now, self.busy_until)
            self.busy_until = start + size * 8 / self.spec.rate_bps
            self.bytes += size
            self.chunks += 1
            return self.busy_until + self.spec.one_way_s

    def backlog_s(self, now: float) -> float:
        return max(self.busy_until - now, 0.0)


class Link:
    """Both directions between two named ends, and TCP relays that route through them.

    ``relay(source, host, port)`` listens on a loopback port; whoever connects there is
    ``source`` dialing the other end at ``host:port``. All relays run on one asyncio loop
    in a daemon thread; ``close()`` stops them and every connection.
    """

    def __init__(self, spec: LinkSpec, ends: tuple[str, str] = ("alice", "bob")) -> None:
        self.spec = spec
        self.ends = ends
        a, b = ends
        self.directions = {
            f"{a}->{b}": Direction(f"{a}->{b}", spec),
            f"{b}->{a}": Direction(f"{b}->{a}", spec),
        }
        self.connections = 0
        self._servers: list[asyncio.AbstractServer] = []
        self._tasks: set[asyncio.Task] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ppbn-link", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def relay(self, source: str, host: str, port: int) -> tuple[str, int]:
        """Start a relay for ``source``'s connections to the other end; returns its address."""
        if source not in self.ends:
            raise ValueError(f"unknown end {source!r}")
        other = self.ends[1] if source == self.ends[0] else self.ends[0]
        forward, backward = (
            self.directions[f"{source}->{other}"],
            self.directions[f"{other}->{source}"],
        )

        async def start() -> tuple[str, int]:
            async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                await self._connection(reader, writer, host, port, forward, backward)

            server = await asyncio.start_server(accepted, "127.0.0.1", 0)
            self._servers.append(server)
            return server.sockets[0].getsockname()[:2]

        return asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)

    def stats(self) -> dict[str, object]:
        """Bytes and chunks per direction as the relays carried them (TLS and HTTP/2 included)."""
        return {
            **self.spec.as_dict(),
            "connections": self.connections,
            "bytes": {name: d.bytes for name, d in self.directions.items()},
            "ideal_transfer_s": {
                name: round(d.bytes * 8 / self.spec.rate_bps, 2)
                for name, d in self.directions.items()
            },
        }

    def close(self) -> None:
        if self._loop.is_closed():
            return

        async def stop() -> None:
            for server in self._servers:
                server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    # -- on the loop ------------------------------------------------------------------
    async def _connection(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        forward: Direction,
        backward: Direction,
    ) -> None:
        """Carry one TCP connection; when either side closes or fails, close both."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        upstream: asyncio.StreamWriter | None = None
        try:
            up_reader, upstream = await asyncio.open_connection(host, port)
            pumps = [
                asyncio.create_task(_pump(reader, upstream, forward)),
                asyncio.create_task(_pump(up_reader, writer, backward)),
            ]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except OSError:
            pass
        finally:
            for each in (writer, upstream):
                if each is not None:
                    each.close()
                    with contextlib.suppress(Exception):
                        await each.wait_closed()
            self._tasks.discard(task)


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, direction: Direction) -> None:
    """Move bytes one way: read, stamp with the arrival time, deliver at that time.

    Returns after the source's end of stream once everything read was delivered, or
    when the destination fails.
    """
    loop = asyncio.get_running_loop()
    pending: asyncio.Queue = asyncio.Queue()

    async def deliver() -> None:
        while True:
            item = await pending.get()
            if item is None:
                return
            chunk, arrives = item
            wait = arrives - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            dst.write(chunk)
            await dst.drain()

    delivery = asyncio.create_task(deliver())
    try:
        while not delivery.done():
            ahead = direction.backlog_s(loop.time()) - BACKLOG_S
            if ahead > 0:
                await asyncio.sleep(ahead)
                continue
            chunk = await src.read(CHUNK_BYTES)
            if not chunk:
                break
            pending.put_nowait((chunk, direction.schedule(len(chunk), loop.time())))
        pending.put_nowait(None)
        await delivery
    finally:
        delivery.cancel()
        with contextlib.suppress(BaseException):
            await delivery


class ShapedMemoryChannel(MemoryChannel):
    """An in-memory channel end whose messages arrive as over the link model.

    The sender does not wait (a message is handed to the link at once); the receiver
    waits until the message has crossed: its bytes clocked out after the ones before it
    in that direction, then the one-way delay.
    """

    def __init__(
        self, inbox: queue.Queue, outbox: queue.Queue, direction: Direction, **kwargs
    ) -> None:
        super().__init__(inbox, outbox, **kwargs)
        self.direction = direction

    def _put(self, seq: int, tag: str, payload: bytes) -> None:
        arrives = self.direction.schedule(len(payload) + len(tag), time.monotonic())
        super()._put(seq, tag, (arrives, payload))  # type: ignore[arg-type]

    def _get(self, timeout_s: float) -> tuple[int, str, bytes]:
        seq, tag, (arrives, payload) = super()._get(timeout_s)  # type: ignore[misc]
        wait = arrives - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        return seq, tag, payload


def shaped_memory_pair(
    spec: LinkSpec, **kwargs
) -> tuple[tuple[ShapedMemoryChannel, ShapedMemoryChannel], dict[str, Direction]]:
    """Two connected in-memory ends (alice's, bob's) over the link model, and the two
    directions (for the bytes each way)."""
    a_to_b: queue.Queue = queue.Queue()
    b_to_a: queue.Queue = queue.Queue()
    directions = {
        "alice->bob": Direction("alice->bob", spec),
        "bob->alice": Direction("bob->alice", spec),
    }
    alice = ShapedMemoryChannel(b_to_a, a_to_b, directions["alice->bob"], **kwargs)
    bob = ShapedMemoryChannel(a_to_b, b_to_a, directions["bob->alice"], **kwargs)
    return (alice, bob), directions
