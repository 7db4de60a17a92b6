"""``ppbn bench psi``: private set intersection of record ids (protocols/psi.py).

Both parties run in two processes joined by a pipe (``ppbn/protocols/pipe_channel.py``), on
synthetic id sets of ``--size`` ids each, ``--overlap`` of them shared, in shuffled
order. Reports wall time, bytes each way, messages and rounds, throughput and a
correctness check (intersection size as expected, and both sides list the same ids in
the same order). When the optional ``openmined-psi`` package is importable, the same sets
go through its ECDH PSI (client/server, reveal_intersection) in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time
from typing import TYPE_CHECKING

from ppbn.commands.options import non_negative_int, positive_int
from ppbn.errors import UserError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

OPENMINED_HINT = (
    "openmined-psi is not installed: pip install 'ppbn[bench]' to compare with its ECDH PSI"
)


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    psi = bench.add_parser(
        "psi",
        help="private set intersection of record ids (KKRT16 OT-extension PSI), vs openmined-psi",
        description="Run ppbn's PSI (protocols/psi.py) between two party processes on "
        "synthetic id sets of --size ids each with --overlap of them shared; report wall "
        "time, bytes, rounds and a correctness check. If openmined-psi is installed, run the "
        "same sets through its ECDH PSI in the same run and print the speed ratio.",
    )
    psi.add_argument(
        "--size", type=positive_int, default=100_000, help="ids on each side (default 100000)"
    )
    psi.add_argument("--overlap", type=float, default=0.5, help="shared fraction (default 0.5)")
    psi.add_argument("--seed", type=non_negative_int, default=7)
    psi.add_argument("--no-openmined", action="store_true", help="skip the openmined-psi run")
    psi.add_argument("--format", choices=("table", "json"), default="table")
    psi.set_defaults(func=_bench_psi)


def synthetic_ids(role: str, size: int, shared: int, seed: int) -> list[str]:
    """``shared`` ids common to both roles, the rest private to ``role``, shuffled per role."""
    common = [f"rec-c{i:09d}" for i in range(shared)]
    own = [f"rec-{role[0]}{i:09d}" for i in range(size - shared)]
    ids = common + own
    random.Random(f"{seed}/{role}").shuffle(ids)
    return ids


def _digest(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def _party(
    role: str, spec: dict, connection: Connection, report: Connection, barrier, parent_pid: int
) -> None:
    """One party process: build its ids, wait for the peer, run the PSI, report."""
    from ppbn.bench.processes import peak_rss_mib
    from ppbn.protocols.executor import exit_with_parent
    from ppbn.protocols.pipe_channel import PipeChannel, close_party_end
    from ppbn.protocols.psi import align_records

    exit_with_parent(parent_pid)
    channel = None
    try:
        ids = synthetic_ids(role, spec["size"], spec["shared"], spec["seed"])
        channel = PipeChannel(connection, timeout_s=600, session=b"bench-psi")
        phases: list[tuple[float, str]] = []
        barrier.wait(timeout=600)
        start, cpu = time.perf_counter(), time.process_time()
        result = align_records(
            channel,
            role,
            ids,
            spec["key"],
            progress=lambda msg: phases.append((round(time.perf_counter() - start, 3), msg)),
        )
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        matched = [ids[i] for i in result.positions]
        report.send(
            {
                "role": role,
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "size": result.size,
                "peer_set_size": result.peer_set_size,
                "digest": _digest(matched),
                "all_shared": all(x.startswith("rec-c") for x in matched),
                "channel": channel.stats.as_dict(),
                "phases": phases,
                "peak_rss_mib": peak_rss_mib(),
            }
        )
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        report.send({"role": role, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        close_party_end(channel, connection)


def _run_ppbn(size: int, shared: int, seed: int) -> dict:
    import multiprocessing

    from ppbn.bench.processes import collect_reports

    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    barrier = context.Barrier(2)
    spec = {"size": size, "shared": shared, "seed": seed, "key": os.urandom(32)}
    processes = [
        context.Process(
            target=_party,
            args=(role, spec, end, report_out, barrier, os.getpid()),
            name=f"ppbn-psi-{role}",
        )
        for role, end in (("alice", alice_end), ("bob", bob_end))
    ]
    for p in processes:
        p.start()
    return collect_reports(processes, report_in)


def _run_openmined(size: int, shared: int, seed: int) -> dict | None:
    """The same sets through openmined-psi's ECDH PSI, client = alice, server = bob.

    Steps timed one after the other in this process; ``critical_path_s`` also credits it
    with running the client's request and the server's setup at the same time."""
    try:
        import private_set_intersection.python as om
    except ImportError:
        return None
    alice = synthetic_ids("alice", size, shared, seed)
    bob = synthetic_ids("bob", size, shared, seed)
    steps: dict[str, float] = {}
    start = time.perf_counter()
    client = om.client.CreateWithNewKey(True)  # reveal_intersection
    server = om.server.CreateWithNewKey(True)
    request = client.CreateRequest(alice)
    steps["client_request_s"] = time.perf_counter() - start
    start = time.perf_counter()
    setup = server.CreateSetupMessage(1e-9, len(alice), bob, om.DataStructure.RAW)
    steps["server_setup_s"] = time.perf_counter() - start
    start = time.perf_counter()
    response = server.ProcessRequest(request)
    steps["server_response_s"] = time.perf_counter() - start
    start = time.perf_counter()
    intersection = client.GetIntersection(setup, response)
    steps["client_intersection_s"] = time.perf_counter() - start
    total = sum(steps.values())
    critical = (
        max(steps["client_request_s"], steps["server_setup_s"])
        + steps["server_response_s"]
        + steps["client_intersection_s"]
    )
    return {
        "wall_s": round(total, 3),
        "critical_path_s": round(critical, 3),
        "steps": {k: round(v, 3) for k, v in steps.items()},
        "bytes_alice_to_bob": request.ByteSize(),
        "bytes_bob_to_alice": setup.ByteSize() + response.ByteSize(),
        "size": len(intersection),
        "correct": len(intersection) == shared,
        "version": getattr(om, "__version__", "?"),
    }


def _bench_psi(args: argparse.Namespace) -> int:
    from ppbn.commands.tables import print_table

    if args.size < 1:
        raise UserError("--size must be at least 1")
    if not 0.0 <= args.overlap <= 1.0:
        raise UserError("--overlap must be between 0 and 1")
    shared = int(round(args.overlap * args.size))
    reports = _run_ppbn(args.size, shared, args.seed)
    a, b = reports["alice"], reports["bob"]
    wall = max(a["wall_s"], b["wall_s"])
    correct = (
        a["size"] == b["size"] == shared
        and a["digest"] == b["digest"]
        and a["all_shared"]
        and b["all_shared"]
        and a["peer_set_size"] == b["peer_set_size"] == args.size
    )
    ours = {
        "wall_s": wall,
        "cpu_s": {"alice": a["cpu_s"], "bob": b["cpu_s"]},
        "bytes_alice_to_bob": a["channel"]["bytes_sent"],
        "bytes_bob_to_alice": b["channel"]["bytes_sent"],
        "messages": a["channel"]["messages_sent"] + b["channel"]["messages_sent"],
        "rounds": a["channel"]["rounds"] + b["channel"]["rounds"],
        "ids_per_s_per_side": round(args.size / wall),
        "intersection": a["size"],
        "expected": shared,
        "correct": correct,
        "parties": {
            r: {k: v for k, v in reports[r].items() if k != "role"} for r in ("alice", "bob")
        },
    }
    om = None if args.no_openmined else _run_openmined(args.size, shared, args.seed)
    result = {
        "size": args.size,
        "overlap": args.overlap,
        "seed": args.seed,
        "cores": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "ppbn": ours,
        "openmined_psi": om,
    }
    if om is not None:
        result["speedup_over_openmined"] = round(om["critical_path_s"] / wall, 1)
    if args.format == "json":
        print(json.dumps(result))
        return 0 if correct else 1

    def mb(x: int) -> str:
        return f"{x / 1e6:,.1f} MB"

    rows = [
        (
            "wall time (both parties, concurrent)",
            f"{wall:.2f} s",
            f"{om['critical_path_s']:.2f} s ({om['wall_s']:.2f} s one step after another)"
            if om
            else "",
        ),
        (
            "bytes alice -> bob",
            mb(ours["bytes_alice_to_bob"]),
            mb(om["bytes_alice_to_bob"]) if om else "",
        ),
        (
            "bytes bob -> alice",
            mb(ours["bytes_bob_to_alice"]),
            mb(om["bytes_bob_to_alice"]) if om else "",
        ),
        (
            "messages / rounds",
            f"{ours['messages']} / {ours['rounds']}",
            "3 messages / 2 rounds" if om else "",
        ),
        (
            "CPU time alice / bob (independent of other load)",
            f"{a['cpu_s']:.2f} / {b['cpu_s']:.2f} s",
            "",
        ),
        (
            "ids per second per side",
            f"{ours['ids_per_s_per_side']:,}",
            f"{round(args.size / om['critical_path_s']):,}" if om else "",
        ),
        (
            "intersection (expected)",
            f"{a['size']:,} ({shared:,})",
            f"{om['size']:,} ({shared:,})" if om else "",
        ),
        (
            "correct (same ids, same order on both sides)",
            "yes" if correct else "NO",
            ("yes" if om["correct"] else "NO") if om else "",
        ),
        ("peak RSS alice / bob", f"{a['peak_rss_mib']} / {b['peak_rss_mib']} MiB", ""),
    ]
    title = (
        f"PSI: {args.size:,} x {args.size:,} ids, {args.overlap:.0%} shared, "
        f"{os.cpu_count()} cores, load {result['load_average_1min']}"
    )
    if om:
        title += f"; ppbn {result['speedup_over_openmined']}x faster than openmined-psi"
    header = ("", "ppbn (KKRT16 OT-extension PSI)", "openmined-psi (ECDH)")
    if om is None:
        rows, header = [row[:2] for row in rows], header[:2]
    print_table(title, rows, header)
    if om is None and not args.no_openmined:
        print(OPENMINED_HINT)
    return 0 if correct else 1
