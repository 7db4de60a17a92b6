"""``bench ot``'s engine: throughput of OT extension (SoftSpokenOT, ``ppbn.protocols.ot``).

The base OTs (timed on their own), then ``count`` chosen-message OTs of 128-bit messages
and ``count`` correlated OTs, best of ``repeats``. With ``parties="processes"`` each party
runs in its own process and the two talk over a pipe, as two daemons do: each has its own
interpreter, so neither waits on the other's interpreter lock (AES under ``cryptography``
holds it). ``parties="threads"`` puts both in this process over the in-memory channel.
Both sides start each timed run together (a one-byte message each way) and the run takes
as long as the slower side. The receiver checks every chosen message it got. ``security``
is the level both ends run at: above semi-honest each block carries the consistency check
against a malicious receiver (``ppbn.protocols.ot_check``), whose cost this measures.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ppbn.errors import UserError
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS, SECURITY_LEVELS, SEMI_HONEST

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    import numpy as np

    from ppbn.protocols.channel import Channel

PARTIES = ("processes", "threads")


@dataclass(frozen=True)
class OtSettings:
    """One ``bench ot`` run: how many OTs, how often, where the parties run, the seed of
    their inputs, the SoftSpokenOT subfield bits and the security level."""

    count: int = 1_000_000
    repeats: int = 3
    parties: str = "processes"
    seed: int = 0
    ot_k: int = DEFAULT_SUBFIELD_BITS
    security: str = SEMI_HONEST


def side_inputs(seed: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Both parties' inputs from one seed, so each process draws the same ones."""
    import numpy as np

    rng = np.random.default_rng(seed)
    m0 = rng.integers(0, 2**63, size=(m, 2), dtype=np.uint64)
    m1 = rng.integers(0, 2**63, size=(m, 2), dtype=np.uint64)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    delta = rng.integers(0, 2**63, size=2, dtype=np.uint64)
    return m0, m1, choices, delta


def run_side(
    role: str, channel: Channel, m: int, repeats: int, seed: int, k: int, security: str
) -> dict[str, Any]:
    """One party's part of the bench: its seconds for the base OTs and for each timed run
    of each kind, and (the receiver) whether every chosen message was the chosen one."""
    import numpy as np

    from ppbn.kernels.warm import warm_up
    from ppbn.protocols.ot import OTReceiver, OTSender

    kernels = warm_up()  # the first load (or compile) is reported, not timed with the runs
    m0, m1, choices, delta = side_inputs(seed, m)
    alice = role == "alice"
    end = OTSender if alice else OTReceiver
    party = end(channel, subfield_bits=k, security=security)

    def timed(work: Callable[[], object]) -> float:
        channel.send("bench.go", b"")
        channel.recv("bench.go", max_bytes=0)
        started = time.perf_counter()
        work()
        return time.perf_counter() - started

    seconds: dict[str, Any] = {"base": timed(party.start)}
    expected = np.where(choices[:, None] == 1, m1, m0)
    correct = True

    def chosen() -> None:
        nonlocal correct
        if alice:
            party.send(m0, m1)
        else:
            correct &= bool((party.receive(choices) == expected).all())

    before = channel.stats.bytes_sent + channel.stats.bytes_received
    seconds["chosen"] = [timed(chosen) for _ in range(repeats)]
    chosen_bytes = (channel.stats.bytes_sent + channel.stats.bytes_received - before) / repeats
    seconds["correlated"] = [
        timed(
            (lambda: party.send_correlated(m, delta))
            if alice
            else (lambda: party.receive_correlated(choices))
        )
        for _ in range(repeats)
    ]
    return {
        "role": role,
        "seconds": seconds,
        "chosen_bytes": chosen_bytes,
        "correct": correct,
        "kernels": kernels,
    }


def side_process(
    role: str,
    m: int,
    repeats: int,
    seed: int,
    k: int,
    security: str,
    connection: Connection,
    report: Connection,
    parent_pid: int,
) -> None:
    """One party process over a pipe; it reports its side, or its error as one line."""
    from ppbn.protocols.executor import exit_with_parent
    from ppbn.protocols.pipe_channel import PipeChannel, close_party_end

    exit_with_parent(parent_pid)
    channel = None
    try:
        channel = PipeChannel(connection, None, timeout_s=600)
        report.send(run_side(role, channel, m, repeats, seed, k, security))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        report.send({"role": role, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        close_party_end(channel, connection)


def in_processes(m: int, repeats: int, seed: int, k: int, security: str) -> dict[str, dict]:
    """Both sides in spawned processes joined by a pipe; their reports by role."""
    import multiprocessing

    from ppbn.bench.processes import collect_reports

    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    processes = [
        context.Process(
            target=side_process,
            name=f"ppbn-ot-{role}",
            args=(role, m, repeats, seed, k, security, end, report_out, os.getpid()),
        )
        for role, end in (("alice", alice_end), ("bob", bob_end))
    ]
    for process in processes:
        process.start()
    return collect_reports(processes, report_in)


def in_threads(m: int, repeats: int, seed: int, k: int, security: str) -> dict[str, dict]:
    """Both sides in threads of this process over the in-memory channel."""
    from ppbn.protocols.channel import memory_channel_pair, run_two_party

    pair = memory_channel_pair(timeout_s=600)
    reports: dict[str, dict] = {}

    def side(role: str) -> Callable[[Channel], None]:
        def run(channel: Channel) -> None:
            reports[role] = run_side(role, channel, m, repeats, seed, k, security)

        return run

    run_two_party(side("alice"), side("bob"), pair=pair, timeout_s=600)
    return reports


def bench_ot(settings: OtSettings) -> dict:
    """OTs per second of each kind (the best run, as long as its slower side), bytes per
    chosen-message OT and the base OTs' seconds; the report ``--format json`` prints."""
    s = settings
    if s.count < 1 or s.repeats < 1:
        raise UserError("--count and --repeats must be at least 1")
    if s.parties not in PARTIES:
        raise UserError(f"--parties {s.parties!r}: one of {', '.join(PARTIES)}")
    if s.security not in SECURITY_LEVELS:
        raise UserError(f"--security {s.security!r}: one of {', '.join(SECURITY_LEVELS)}")
    m = s.count
    run = in_processes if s.parties == "processes" else in_threads
    reports = run(m, s.repeats, s.seed, s.ot_k, s.security)
    alice, bob = reports["alice"]["seconds"], reports["bob"]["seconds"]
    if not reports["bob"]["correct"]:
        raise RuntimeError("OT extension returned messages other than the chosen ones")
    # a run lasts as long as its slower side; the best run of each kind is reported
    chosen_s = min(map(max, zip(alice["chosen"], bob["chosen"], strict=True)))
    correlated_s = min(map(max, zip(alice["correlated"], bob["correlated"], strict=True)))
    base_s = max(alice["base"], bob["base"])
    chosen_bytes = reports["alice"]["chosen_bytes"]
    return {
        "count": m,
        "parties": s.parties,
        "ot_per_s": round(m / chosen_s),
        "correlated_ot_per_s": round(m / correlated_s),
        "bytes_per_ot": round(chosen_bytes / m, 2),
        "base_ot_seconds": round(base_s, 3),
        "repeats": s.repeats,
        "ot_k": s.ot_k,
        "security": s.security,
        "kernels": {role: reports[role]["kernels"] for role in ("alice", "bob")},
    }
