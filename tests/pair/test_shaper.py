"""The benchmarks' link model (ppbn/pair/shaper.py): a shaping TCP relay on loopback.

Timing tests assert only what a slow or loaded machine cannot break: a shaped transfer
never beats the link (>= 0.9 x the ideal time) and is not wildly slower (< 3x).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from timeouts import PEER_TIMEOUT_S, WAIT_S

from ppbn.errors import UserError
from ppbn.pair.shaper import Link, parse_link, shaped_memory_pair
from ppbn.protocols.channel import run_two_party


class _Server:
    """A loopback TCP server running ``handle(conn)`` for each connection in a thread."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.handle = handle
        self.closed = threading.Event()  # set when a handler saw end of stream
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self.sock.close()


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        part = conn.recv(min(size - got, 1 << 20))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(1 << 16):
            conn.sendall(data)


@pytest.fixture
def relay() -> Iterator[
    Callable[[str, Callable[[socket.socket], None]], tuple[Link, socket.socket]]
]:
    """relay(link_text, handler): a Link, and a client socket connected through it to a server."""
    made: list[tuple[Link, _Server, socket.socket]] = []

    def make(text: str, handle: Callable[[socket.socket], None]) -> tuple[Link, socket.socket]:
        server = _Server(handle)
        link = Link(parse_link(text))
        host, port = link.relay("alice", "127.0.0.1", server.port)
        client = socket.create_connection((host, port), timeout=WAIT_S)
        made.append((link, server, client))
        return link, client

    yield make
    for link, server, client in made:
        client.close()
        link.close()
        server.close()


def test_bytes_pass_unchanged_both_ways(relay):
    link, client = relay("1gbit/2ms", _echo)
    payload = os.urandom(3 * 1024 * 1024 + 17)
    sender = threading.Thread(target=client.sendall, args=(payload,))
    sender.start()
    assert _recv_exactly(client, len(payload)) == payload
    sender.join()
    deadline = time.monotonic() + WAIT_S
    while link.stats()["bytes"] != {"alice->bob": len(payload), "bob->alice": len(payload)}:
        assert time.monotonic() < deadline, link.stats()
        time.sleep(0.01)


def test_a_transfer_takes_its_size_over_the_rate(relay):
    size = 5_000_000

    def sink(conn: socket.socket) -> None:
        with conn:
            _recv_exactly(conn, size)
            conn.sendall(b"k")

    _, client = relay("40mbit", sink)
    started = time.perf_counter()
    client.sendall(os.urandom(size))
    assert client.recv(1) == b"k"
    elapsed = time.perf_counter() - started
    ideal = size * 8 / 40e6  # 1.0 s
    assert 0.9 * ideal <= elapsed < 3 * ideal, elapsed


def test_the_round_trip_time_is_added_to_a_request_and_response(relay):
    _, client = relay("1gbit/100ms", _echo)
    client.sendall(b"warm")
    assert _recv_exactly(client, 4) == b"warm"
    started = time.perf_counter()
    client.sendall(b"ping")
    assert _recv_exactly(client, 4) == b"ping"
    elapsed = time.perf_counter() - started
    assert 0.1 <= elapsed < 1.0, elapsed  # the RTT, plus a loaded host's scheduling delays


def test_closing_the_client_closes_the_server_side(relay):
    ended = threading.Event()

    def wait_for_end(conn: socket.socket) -> None:
        with conn:
            while conn.recv(1024):
                pass
            ended.set()

    _, client = relay("100mbit/10ms", wait_for_end)
    client.sendall(b"hello")
    client.close()
    assert ended.wait(WAIT_S)


def test_closing_the_server_closes_the_client_side(relay):
    _, client = relay("100mbit/10ms", lambda conn: (conn.recv(5), conn.close()))
    client.sendall(b"hello")
    client.settimeout(WAIT_S)
    assert client.recv(1024) == b""


@pytest.mark.parametrize(
    ("text", "rate", "rtt"),
    [
        ("100mbit/20ms", 100e6, 0.02),
        ("1gbit", 1e9, 0.0),
        ("10mbit/50ms", 10e6, 0.05),
        ("512kbit/0.2s", 512e3, 0.2),
        ("2.5Gbit/1ms", 2.5e9, 0.001),
    ],
)
def test_link_parsing(text, rate, rtt):
    spec = parse_link(text)
    assert spec.rate_bps == pytest.approx(rate) and spec.rtt_s == pytest.approx(rtt)


@pytest.mark.parametrize(
    "text",
    ["", "100", "100mb", "100mbit/", "100mbit/20", "fast", "0mbit", "100mbit/20ms/1", "-1mbit"],
)
def test_bad_links_are_refused_in_one_line(text):
    with pytest.raises(UserError, match="--link") as info:
        parse_link(text)
    assert "\n" not in str(info.value)


def test_the_shaped_memory_channel_delays_by_size_and_latency():
    (alice, bob), directions = shaped_memory_pair(
        parse_link("8mbit/100ms"), timeout_s=PEER_TIMEOUT_S
    )
    payload = os.urandom(200_000)  # 0.2 s at 8 Mbit/s

    def ping(ch):
        started = time.perf_counter()
        ch.send("x", payload)
        ch.recv("y")
        return time.perf_counter() - started

    def pong(ch):
        ch.send("y", ch.recv("x"))

    elapsed, _ = run_two_party(ping, pong, pair=(alice, bob))
    assert 0.45 <= elapsed < 1.5, elapsed  # two serialisations (0.4 s) plus one RTT (0.1 s)
    assert directions["alice->bob"].bytes == directions["bob->alice"].bytes == len(payload) + 1
