"""The loopback pair's listening ports come from below the host's ephemeral range, where
no outgoing connection can take one between the choice and the daemon's bind."""

from __future__ import annotations

import socket

from ppbn.pair.loopback import EPHEMERAL_RANGE, LISTEN_PORTS, free_port


def test_ports_are_free_and_below_the_ephemeral_range():
    first_ephemeral = (
        int(EPHEMERAL_RANGE.read_text().split()[0]) if EPHEMERAL_RANGE.exists() else 65536
    )
    for _ in range(20):
        port = free_port()
        if first_ephemeral - LISTEN_PORTS[0] >= 1000:  # else the kernel's choice is used
            assert LISTEN_PORTS[0] <= port < min(LISTEN_PORTS[1], first_ephemeral)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))  # free when returned


def test_a_busy_port_is_skipped(monkeypatch):
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    busy = held.getsockname()[1]
    choices = iter([busy, busy])

    class Fixed:
        def randrange(self, low, high):
            return next(choices, low + 7)

    monkeypatch.setattr("ppbn.pair.loopback.random.SystemRandom", Fixed)
    try:
        assert free_port() != busy
    finally:
        held.close()
