"""alice and bob as in-process daemons over loopback without TLS, each with its own local
policy, for the tests that drive a daemon pair through its client (refusals, budgets,
messages); the mutual-TLS pairs are in tests/parties/test_audit.py and daemon_trio.py."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until

from ppbn.jobs.policy import LocalPolicy
from ppbn.pair.loopback import free_port
from ppbn.parties.daemon import DaemonConfig, PartyDaemon


@contextlib.contextmanager
def insecure_pair(
    data: Path,
    out: Path,
    policies: Mapping[str, LocalPolicy],
    handshake_s: float = WAIT_S,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[tuple[dict[str, PartyDaemon], dict[str, int]]]:
    """The two daemons on ``data``'s schema.json and alice.csv / bob.csv, writing under
    ``out``/out-ROLE and keeping their budgets in ``out``/state-ROLE (``settings``: other
    ``DaemonConfig`` fields per role), once both see their peer; both stopped on the way
    out."""
    ports = {"alice": free_port(), "bob": free_port()}
    daemons: dict[str, PartyDaemon] = {}
    try:
        for role, peer in (("alice", "bob"), ("bob", "alice")):
            daemons[role] = PartyDaemon(
                DaemonConfig(
                    role=role,
                    schema_path=str(data / "schema.json"),
                    data_path=str(data / f"{role}.csv"),
                    listen=f"127.0.0.1:{ports[role]}",
                    peer=f"127.0.0.1:{ports[peer]}",
                    insecure=True,
                    out_dir=str(out / f"out-{role}"),
                    timeout_s=PEER_TIMEOUT_S,
                    probe_interval_s=0.2,
                    policy=policies[role],
                    **{
                        "state_dir": str(out / f"state-{role}"),
                        **((settings or {}).get(role) or {}),
                    },
                )
            )
            daemons[role].start()
        wait_until(
            lambda: all(d.peer_state == "ok" for d in daemons.values()), handshake_s, "handshake"
        )
        yield daemons, ports
    finally:
        for daemon in daemons.values():
            daemon.stop(grace_s=0.5)
