"""``ppbn bench ot``: throughput of OT extension (SoftSpokenOT, ``ppbn.protocols.ot``).

The base OTs (timed on their own), then ``--count`` chosen-message OTs of 128-bit
messages and ``--count`` correlated OTs, best of ``--repeats``. By default each party runs
in its own process and the two talk over a pipe, as two daemons do: each has its own
interpreter, so neither waits on the other's interpreter lock (AES under ``cryptography``
holds it). ``--parties threads`` puts both in this process over the in-memory channel.
Both sides start each timed run together (a one-byte message each way) and the run takes
as long as the slower side. The receiver checks every chosen message it got.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from ppbn.commands.options import add_ot_k_option, positive_int
from ppbn.commands.tables import kernels_text, report_measures
from ppbn.errors import UserError

WHAT = "OT extension (SoftSpokenOT, k = {k}), {m:,} OTs of 128-bit messages, {where}"
WHERE = {
    "processes": "two party processes joined by a pipe",
    "threads": "two threads of one process (in-memory channel)",
}


def _inputs(seed: int, m: int):
    """Both parties' inputs from one seed, so each process draws the same ones."""
    import numpy as np

    rng = np.random.default_rng(seed)
    m0 = rng.integers(0, 2**63, size=(m, 2), dtype=np.uint64)
    m1 = rng.integers(0, 2**63, size=(m, 2), dtype=np.uint64)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    delta = rng.integers(0, 2**63, size=2, dtype=np.uint64)
    return m0, m1, choices, delta


def run_side(role: str, channel, m: int, repeats: int, seed: int, k: int) -> dict[str, Any]:
    """One party's part of the bench: its seconds for the base OTs and for each timed run
    of each kind, and (the receiver) whether every chosen message was the chosen one."""
    import numpy as np

    from ppbn.kernels.warm import warm_up
    from ppbn.protocols.ot import OTReceiver, OTSender

    kernels = warm_up()  # the first load (or compile) is reported, not timed with the runs
    m0, m1, choices, delta = _inputs(seed, m)
    alice = role == "alice"
    party = OTSender(channel, subfield_bits=k) if alice else OTReceiver(channel, subfield_bits=k)

    def timed(work) -> float:
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


def _side_process(role, m, repeats, seed, k, connection, report, parent_pid) -> None:
    from ppbn.protocols.executor import exit_with_parent
    from ppbn.protocols.pipe_channel import PipeChannel, close_party_end

    exit_with_parent(parent_pid)
    channel = None
    try:
        channel = PipeChannel(connection, None, timeout_s=600)
        report.send(run_side(role, channel, m, repeats, seed, k))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        report.send({"role": role, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        close_party_end(channel, connection)


def _in_processes(m: int, repeats: int, seed: int, k: int) -> dict[str, dict]:
    import multiprocessing

    from ppbn.bench.processes import collect_reports

    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    processes = [
        context.Process(
            target=_side_process,
            name=f"ppbn-ot-{role}",
            args=(role, m, repeats, seed, k, end, report_out, os.getpid()),
        )
        for role, end in (("alice", alice_end), ("bob", bob_end))
    ]
    for process in processes:
        process.start()
    return collect_reports(processes, report_in)


def _in_threads(m: int, repeats: int, seed: int, k: int) -> dict[str, dict]:
    from ppbn.protocols.channel import memory_channel_pair, run_two_party

    pair = memory_channel_pair(timeout_s=600)
    reports: dict[str, dict] = {}

    def side(role: str):
        def run(channel) -> None:
            reports[role] = run_side(role, channel, m, repeats, seed, k)

        return run

    run_two_party(side("alice"), side("bob"), pair=pair, timeout_s=600)
    return reports


def _bench_ot(args: argparse.Namespace) -> int:
    if args.count < 1 or args.repeats < 1:
        raise UserError("--count and --repeats must be at least 1")
    m = args.count
    run = _in_processes if args.parties == "processes" else _in_threads
    reports = run(m, args.repeats, args.seed, args.ot_k)
    alice, bob = reports["alice"]["seconds"], reports["bob"]["seconds"]
    if not reports["bob"]["correct"]:
        raise RuntimeError("OT extension returned messages other than the chosen ones")
    # a run lasts as long as its slower side; the best run of each kind is reported
    chosen_s = min(map(max, zip(alice["chosen"], bob["chosen"], strict=True)))
    correlated_s = min(map(max, zip(alice["correlated"], bob["correlated"], strict=True)))
    base_s = max(alice["base"], bob["base"])
    chosen_bytes = reports["alice"]["chosen_bytes"]
    result = {
        "count": m,
        "parties": args.parties,
        "ot_per_s": round(m / chosen_s),
        "correlated_ot_per_s": round(m / correlated_s),
        "bytes_per_ot": round(chosen_bytes / m, 2),
        "base_ot_seconds": round(base_s, 3),
        "repeats": args.repeats,
        "ot_k": args.ot_k,
        "kernels": {role: reports[role]["kernels"] for role in ("alice", "bob")},
    }
    return report_measures(
        result,
        args.format,
        WHAT.format(k=args.ot_k, m=m, where=WHERE[args.parties]),
        [
            ("chosen-message OTs/s", f"{m / chosen_s:,.0f}"),
            ("correlated OTs/s", f"{m / correlated_s:,.0f}"),
            ("bytes per chosen-message OT", f"{chosen_bytes / m:.1f}"),
            ("base OTs (128, once per session), s", f"{base_s:.3f}"),
            *(
                (
                    f"compiled kernels, first load at {role}, s",
                    kernels_text(reports[role]["kernels"]),
                )
                for role in ("alice", "bob")
            ),
        ],
    )


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    ot = bench.add_parser(
        "ot",
        help="OT extension (SoftSpokenOT): OTs per second between the two parties",
        description="Base OTs, then --count chosen-message OTs of 128-bit messages and --count "
        "correlated OTs between the two parties: two processes joined by a pipe, as two "
        "daemons are (default), or two threads of this process over the in-memory channel.",
    )
    ot.add_argument("--count", type=positive_int, default=1_000_000)
    ot.add_argument(
        "--repeats",
        type=positive_int,
        default=3,
        help="timed runs; the best is reported (default 3)",
    )
    ot.add_argument(
        "--parties",
        choices=tuple(WHERE),
        default="processes",
        help="processes: each party its own process, as two daemons are (default); threads: "
        "both in this process, sharing one interpreter lock",
    )
    ot.add_argument("--seed", type=int, default=0, help="seed of the messages and choices")
    add_ot_k_option(ot)
    ot.add_argument("--format", choices=("table", "json"), default="table")
    ot.set_defaults(func=_bench_ot)
