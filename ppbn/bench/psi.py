"""``bench psi``'s engine: private set intersection of record ids (protocols/psi.py).

Both parties run in two processes joined by a pipe (``ppbn/protocols/pipe_channel.py``), on
synthetic id sets of ``size`` ids each, a fraction ``overlap`` of them shared, in shuffled
order. It measures wall time, bytes each way, messages and rounds, throughput and a
correctness check (intersection size as expected, and both sides list the same ids in
the same order). When the optional ``openmined-psi`` package (the ``bench`` extra) is
importable, the same sets go through its ECDH PSI (client/server, reveal_intersection)
in the same run.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ppbn.errors import UserError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.synchronize import Barrier


@dataclass(frozen=True)
class PsiSettings:
    """One ``bench psi`` run: ids per side, the shared fraction, the seed of the ids, and
    whether to run openmined-psi too (when it is installed)."""

    size: int = 100_000
    overlap: float = 0.5
    seed: int = 7
    openmined: bool = True


def synthetic_ids(role: str, size: int, shared: int, seed: int) -> list[str]:
    """``shared`` ids common to both roles, the rest private to ``role``, shuffled per role."""
    common = [f"rec-c{i:09d}" for i in range(shared)]
    own = [f"rec-{role[0]}{i:09d}" for i in range(size - shared)]
    ids = common + own
    random.Random(f"{seed}/{role}").shuffle(ids)
    return ids


def ids_digest(ids: list[str]) -> str:
    """One hash of an ordered id list: both sides' matches compare without sending them."""
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def party_process(
    role: str,
    spec: dict,
    connection: Connection,
    report: Connection,
    barrier: Barrier,
    parent_pid: int,
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
                "digest": ids_digest(matched),
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


def run_ppbn(size: int, shared: int, seed: int) -> dict[str, dict]:
    """ppbn's PSI between two spawned party processes; their reports by role."""
    import multiprocessing

    from ppbn.bench.processes import collect_reports

    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    barrier = context.Barrier(2)
    spec = {"size": size, "shared": shared, "seed": seed, "key": os.urandom(32)}
    processes = [
        context.Process(
            target=party_process,
            args=(role, spec, end, report_out, barrier, os.getpid()),
            name=f"ppbn-psi-{role}",
        )
        for role, end in (("alice", alice_end), ("bob", bob_end))
    ]
    for p in processes:
        p.start()
    return collect_reports(processes, report_in)


def run_openmined(size: int, shared: int, seed: int) -> dict | None:
    """The same sets through openmined-psi's ECDH PSI, client = alice, server = bob; None
    when openmined-psi is not installed.

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


def bench_psi(settings: PsiSettings) -> dict:
    """ppbn's PSI (and openmined-psi's, where asked and installed) on the same synthetic
    sets; the report ``--format json`` prints, ``report["ppbn"]["correct"]`` its verdict."""
    s = settings
    if s.size < 1:
        raise UserError("--size must be at least 1")
    if not 0.0 <= s.overlap <= 1.0:
        raise UserError("--overlap must be between 0 and 1")
    shared = int(round(s.overlap * s.size))
    reports = run_ppbn(s.size, shared, s.seed)
    a, b = reports["alice"], reports["bob"]
    wall = max(a["wall_s"], b["wall_s"])
    correct = (
        a["size"] == b["size"] == shared
        and a["digest"] == b["digest"]
        and a["all_shared"]
        and b["all_shared"]
        and a["peer_set_size"] == b["peer_set_size"] == s.size
    )
    ours = {
        "wall_s": wall,
        "cpu_s": {"alice": a["cpu_s"], "bob": b["cpu_s"]},
        "bytes_alice_to_bob": a["channel"]["bytes_sent"],
        "bytes_bob_to_alice": b["channel"]["bytes_sent"],
        "messages": a["channel"]["messages_sent"] + b["channel"]["messages_sent"],
        "rounds": a["channel"]["rounds"] + b["channel"]["rounds"],
        "ids_per_s_per_side": round(s.size / wall),
        "intersection": a["size"],
        "expected": shared,
        "correct": correct,
        "parties": {
            r: {k: v for k, v in reports[r].items() if k != "role"} for r in ("alice", "bob")
        },
    }
    om = run_openmined(s.size, shared, s.seed) if s.openmined else None
    report = {
        "size": s.size,
        "overlap": s.overlap,
        "seed": s.seed,
        "cores": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "ppbn": ours,
        "openmined_psi": om,
    }
    if om is not None:
        report["speedup_over_openmined"] = round(om["critical_path_s"] / wall, 1)
    return report


def psi_rows(report: dict) -> list[tuple[str, ...]]:
    """The table ``bench psi`` prints for people: ppbn's figures, and openmined-psi's next
    to them when it ran."""
    ours, om, size = report["ppbn"], report["openmined_psi"], report["size"]
    a, b = ours["parties"]["alice"], ours["parties"]["bob"]
    shared = ours["expected"]

    def mb(x: int) -> str:
        return f"{x / 1e6:,.1f} MB"

    rows = [
        (
            "wall time (both parties, concurrent)",
            f"{ours['wall_s']:.2f} s",
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
            f"{round(size / om['critical_path_s']):,}" if om else "",
        ),
        (
            "intersection (expected)",
            f"{ours['intersection']:,} ({shared:,})",
            f"{om['size']:,} ({shared:,})" if om else "",
        ),
        (
            "correct (same ids, same order on both sides)",
            "yes" if ours["correct"] else "NO",
            ("yes" if om["correct"] else "NO") if om else "",
        ),
        ("peak RSS alice / bob", f"{a['peak_rss_mib']} / {b['peak_rss_mib']} MiB", ""),
    ]
    return rows if om else [row[:2] for row in rows]
