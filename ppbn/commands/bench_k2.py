"""``ppbn bench k2`` and ``ppbn bench ln``: measurements of the secure path.

``bench k2`` runs the whole private K2 + parameters job between two daemon processes over
loopback mutual TLS (as ``simulate`` does) and reports wall time, phases, traffic, and the
Paillier encryptions next to what the paper's per-alpha method would need on the same
families; ``--check-reference`` also learns the non-private reference on the same data
and says whether structure, edge order and parameters agree.

``bench ln`` measures the batched secure ln / x ln x pipeline alone (normalisation
circuit, OT table lookups, share series and products), the two parties in two processes
joined by a pipe as two daemons are in two processes (``--parties threads``: both in this
process over the in-memory channel): evaluations per second per score mode, and the CPU
seconds each party's process (or thread) spent on them, which shows the party that sets
the pace (its pool workers are not counted; with the default inline thresholds every
block runs in the party's process).

``--link RATE[/RTT]`` (both) models a network between the parties (``ppbn.pair.shaper``):
``bench k2`` routes the daemons through ppbn's shaping TCP relay, ``bench ln`` delays each
in-memory message as the same link model would. Both report where the bytes went, per
phase and message kind.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bn.constants import DEFAULT_ESS, SCORE_MODES
from ppbn.commands.options import (
    MAX_WORKERS,
    SEARCHES,
    add_alignment_options,
    add_dp_options,
    add_hc_options,
    add_learn_run_options,
    add_missing_options,
    add_ot_k_option,
    add_overlap_option,
    add_pair_policy_options,
    add_term_lanes_option,
    int_in,
    missing_rule,
    non_negative_int,
    pair_policy,
    positive_float,
    positive_int,
    refuse_on_private_paths,
)
from ppbn.errors import UserError

if TYPE_CHECKING:
    import numpy as np


def _bench_k2(args: argparse.Namespace) -> int:
    from ppbn.commands._bench_common import bench_learn_params, run_learn, sample_pair_files
    from ppbn.commands.unused_flags import refuse_unused_flags
    from ppbn.pair.loopback import LocalPair
    from ppbn.pair.shaper import parse_link

    refuse_unused_flags(args)
    rule = missing_rule(args)
    link = parse_link(args.link) if args.link else None
    if args.records < 2:
        raise UserError("--records must be at least 2")
    if args.check_reference and args.dp_epsilon is not None:
        raise UserError(
            "--check-reference compares with the exact reference; a --dp-epsilon release is "
            "noisy by design (measure its utility with `ppbn bench dp`)"
        )
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-k2-"))
    try:
        made, blanked, files = sample_pair_files(args, work)
        refuse_on_private_paths(args)
        params = bench_learn_params(args)
        pair = LocalPair(
            files,
            args.timeout,
            policy=pair_policy(args),
            missing_rule=rule,
            align=args.align,
            link=link,
        )
        with pair:
            run = run_learn(pair, params, quiet=args.format == "json")
        wall, learned, outcome = run.wall_s, run.learned, run.outcome
        parties = {s["role"]: s for s in (outcome.stats, outcome.peer_stats) if s}
        inner = learned["stats"]
        report: dict[str, Any] = {
            "network": args.network,
            "records": args.records,
            "max_parents": args.max_parents,
            "score": args.score,
            "tau": args.tau,
            "key_bits": args.key_bits,
            "missing": rule,
            "missing_rate": args.missing_rate,
            "cells_emptied": blanked,
            "transport": "gRPC over mutual TLS, loopback, two daemon processes"
            + (f", through ppbn's link model {link.text}" if link else ""),
            "executor": pair.policy.executor if pair.policy else "local",
            "workers": pair.policy.workers if pair.policy else None,
            "overlap_tables": args.overlap_tables,
            "split_terms": args.split_terms,
            "term_lanes": args.term_lanes,
            "ot_k": args.ot_k,
            "wall_s": round(wall, 2),
            "phases_s": {k: round(v, 2) for k, v in inner["phases"].items()},
            "bytes_sent": {r: s["bytes_sent"] for r, s in parties.items()},
            "rounds": max(s["rounds"] for s in parties.values()),
            "paillier_encryptions": sum(s["paillier_encryptions"] for s in parties.values()),
            "per_alpha_encryptions": inner["per_alpha_encryptions"],
            "and_gates": inner["and_gates"],
            "ots": inner["ots"],
            "ln_evaluations": inner["ln_evaluations"],
            "families_scored": inner["families_scored"],
            "search": args.search,
            "edges": len(learned["edges"]),
            **({"moves": len(learned["moves"])} if "moves" in learned else {}),
            **({"privacy": learned["privacy"]} if "privacy" in learned else {}),
        }
        if pair.link is not None:
            report["link"] = pair.link.stats()
        report["bytes_by_phase_and_kind"] = breakdown_rows(
            parties["alice"].get("bytes_by_phase_and_kind", {})
        )
        ln_bytes = sum(
            r["total"]
            for r in report["bytes_by_phase_and_kind"]
            if r["phase"].startswith("ln terms")
        )
        total = sum(report["bytes_sent"].values())
        if report["ln_evaluations"]:
            report["bytes_per_ln_term"] = {
                "ln_terms_phase": round(ln_bytes / report["ln_evaluations"]),
                "whole_job": round(total / report["ln_evaluations"]),
            }
        enc = report["paillier_encryptions"]
        report["fewer_encryptions_than_per_alpha"] = (
            round(report["per_alpha_encryptions"] / enc, 1) if enc else None
        )
        if args.check_reference:
            report["reference"] = _reference_check(learned, outcome, files, rule, args.align)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _print(report, args.format)
    return 0 if not args.check_reference or report["reference"]["equal"] else 1


def breakdown_rows(
    by_phase: dict[str, dict[str, dict[str, int]]], phase: str | None = None
) -> list[dict[str, Any]]:
    """Alice's per-(phase, tag) counters as rows, largest first: what she sent is
    alice -> bob, what she received bob -> alice (the channel is between the two only)."""
    rows = [
        {
            "phase": section if phase is None else phase,
            "kind": tag,
            "alice_to_bob": c["bytes_sent"],
            "bob_to_alice": c["bytes_received"],
            "total": c["bytes_sent"] + c["bytes_received"],
            "messages": c["messages_sent"] + c["messages_received"],
        }
        for section, kinds in by_phase.items()
        for tag, c in kinds.items()
    ]
    grand = sum(r["total"] for r in rows) or 1
    for row in rows:
        row["share_pct"] = round(100 * row["total"] / grand, 2)
    return sorted(rows, key=lambda r: -r["total"])


def _reference_check(learned: dict, outcome, files, rule: str, align: str) -> dict[str, Any]:
    """The non-private reference on the data the daemons loaded (read back from the CSVs,
    so emptied cells and the --missing rule are the daemons'), as ``ppbn simulate``
    checks it (``ppbn.api.simulate.reference_check``)."""
    from ppbn.api.result import NetworkResult
    from ppbn.api.simulate import DataFiles, reference_check

    data = DataFiles(files.schema, files.data["alice"], files.data["bob"])
    _, check = reference_check(data, outcome, NetworkResult.from_document(learned), rule, align)
    diff = check["max_abs_cpt_difference"]
    same = check["same_structure_and_order"]
    return {
        "equal": bool(same and diff is not None and diff < 1e-9 and check["same_family_records"]),
        "same_structure_and_order": same,
        "max_abs_cpt_difference": diff,
        "same_family_records": check["same_family_records"],
    }


def _ln_spec(args: argparse.Namespace, mode: str, gc_below: int, ot_below: int) -> dict[str, Any]:
    return {
        "mode": mode,
        "max_count": args.max_count,
        "executor": args.executor,
        "workers": args.workers,
        "gc_below": gc_below,
        "ot_below": ot_below,
        "link": args.link or "",
        "term_lanes": args.term_lanes,
        "ot_k": args.ot_k,
    }


def _ln_scorer(role: str, channel, spec: dict[str, Any]):
    """One party's scorer for ``bench ln``: two binary variables, counts below max_count."""
    import numpy as np

    from ppbn.bn.schema import Schema, Variable
    from ppbn.protocols.learning.config import SecureLearnConfig
    from ppbn.protocols.learning.scorer import SecureScorer
    from ppbn.protocols.ledger import Ledger
    from ppbn.protocols.tables import TablesConfig

    schema = Schema("id", (Variable("a", "alice", ("0", "1")), Variable("b", "bob", ("0", "1"))))
    tables = TablesConfig(executor=spec["executor"], workers=spec["workers"])
    config = SecureLearnConfig(
        mode=spec["mode"],
        tables=tables,
        gc_inline_below=spec["gc_below"],
        ot_inline_below=spec["ot_below"],
        term_lanes=spec["term_lanes"],
        ot_k=spec["ot_k"],
    )
    codes = np.zeros((spec["max_count"], 1), dtype=np.int64)
    return SecureScorer(
        channel,
        role,
        schema,
        codes,
        spec["max_count"],
        config,
        Ledger(role),
        _phase_labeller(channel, spec["mode"]),
    )


def _ln_outcome(scorer, channel, seconds: float, cpu_seconds: float) -> dict[str, Any]:
    """What the parent needs of one party's run (picklable). ``cpu_seconds``: the CPU time
    the party's own process (or thread) and its terms lanes spent on the terms; its pool
    workers' is not in it."""
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds + scorer.lanes_cpu_seconds,
        "lanes_cpu_seconds": scorer.lanes_cpu_seconds,
        "count_bits": scorer.count_bits,
        "and_gates": scorer.yao.counters.and_gates,
        "ots": scorer.yao.counters.ots + scorer.arith.counters.ots,
        "stats": channel.stats.as_dict(),
        "breakdown": channel.stats.breakdown(),
    }


def _ln_party_process(
    role: str, spec: dict, share: np.ndarray, shifts, connection, report, parent_pid: int
) -> None:
    """One party of ``bench ln --parties processes``: its scorer over a pipe (and the link
    model's direction it sends on), a one-message start signal so that both clocks start
    together, then its terms; reports counters and traffic."""
    from ppbn.kernels.warm import warm_up
    from ppbn.pair.shaper import Direction, parse_link
    from ppbn.protocols.executor import exit_with_parent
    from ppbn.protocols.pipe_channel import PipeChannel, close_party_end

    exit_with_parent(parent_pid)
    channel = None
    try:
        other = "bob" if role == "alice" else "alice"
        link = Direction(f"{role}->{other}", parse_link(spec["link"])) if spec["link"] else None
        channel = PipeChannel(connection, link, timeout_s=600)
        kernels = warm_up()  # the first load (or compile) is reported, not timed with the terms
        scorer = _ln_scorer(role, channel, spec)
        try:
            scorer.wait_for_term_lanes()  # their start is not timed with the terms
            channel.send("bench.ready", b"")
            channel.recv("bench.ready", max_bytes=0)
            channel.stats = type(channel.stats)()  # the start signal is not the protocol's
            channel.stats.section = f"{spec['mode']}: setup"
            started, cpu = time.perf_counter(), time.process_time()
            scorer.terms(share, shifts)
            outcome = _ln_outcome(
                scorer, channel, time.perf_counter() - started, time.process_time() - cpu
            )
            report.send({"role": role, **outcome, "kernels": kernels})
        finally:
            scorer.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        report.send({"role": role, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        close_party_end(channel, connection)


def _ln_in_processes(spec: dict, shares: dict[str, np.ndarray], shifts) -> dict[str, dict]:
    import multiprocessing
    import os

    from ppbn.bench.processes import collect_reports

    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    processes = [
        context.Process(
            target=_ln_party_process,
            name=f"ppbn-{role}",
            args=(role, spec, shares[role], shifts, end, report_out, os.getpid()),
        )
        for role, end in (("alice", alice_end), ("bob", bob_end))
    ]
    for process in processes:
        process.start()
    return collect_reports(processes, report_in)


def _ln_in_threads(spec: dict, shares: dict[str, np.ndarray], shifts) -> dict[str, dict]:
    from ppbn.kernels.warm import warm_up
    from ppbn.pair.shaper import parse_link, shaped_memory_pair
    from ppbn.protocols.channel import memory_channel_pair, run_two_party

    kernels = warm_up()  # one process: one load for both parties
    pair = (
        memory_channel_pair(timeout_s=600)
        if not spec["link"]
        else shaped_memory_pair(parse_link(spec["link"]), timeout_s=600)[0]
    )
    scorers = {
        role: _ln_scorer(role, end, spec) for role, end in zip(("alice", "bob"), pair, strict=True)
    }
    for scorer in scorers.values():
        scorer.wait_for_term_lanes()
    cpu: dict[str, float] = {}

    def party(role: str):
        def run(_) -> None:
            started = time.thread_time()  # the party's own thread: the other's is not in it
            scorers[role].terms(shares[role], shifts)
            cpu[role] = time.thread_time() - started

        return run

    started = time.perf_counter()
    try:
        run_two_party(party("alice"), party("bob"), pair=pair)
        seconds = time.perf_counter() - started
    finally:
        for scorer in scorers.values():
            scorer.close()
    return {
        role: {**_ln_outcome(scorers[role], end, seconds, cpu[role]), "kernels": kernels}
        for role, end in zip(("alice", "bob"), pair, strict=True)
    }


def _bench_ln(args: argparse.Namespace) -> int:
    import numpy as np

    from ppbn.pair.shaper import parse_link
    from ppbn.protocols.learning.cost import term_cost
    from ppbn.protocols.ot import OT_INLINE_BELOW
    from ppbn.protocols.yao import GC_INLINE_BELOW

    if args.count < 1:
        raise UserError("--count must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise UserError("--workers must be at least 1")
    gc_below = GC_INLINE_BELOW if args.gc_inline_below is None else args.gc_inline_below
    ot_below = OT_INLINE_BELOW if args.ot_inline_below is None else args.ot_inline_below
    link = parse_link(args.link) if args.link else None
    rng = np.random.default_rng(args.seed)
    counts = rng.integers(0, args.max_count + 1, size=args.count).astype(np.uint64)
    alice_share = rng.integers(0, 2**63, size=args.count, dtype=np.uint64)
    shares = {"alice": alice_share, "bob": counts - alice_share}  # wraps mod 2^64
    rows: list[dict[str, Any]] = []
    by_kind: list[dict[str, Any]] = []
    run = _ln_in_processes if args.parties == "processes" else _ln_in_threads
    for mode in args.modes.split(","):
        if mode not in SCORE_MODES:
            raise UserError(f"--modes: unknown score mode {mode!r}")
        shifts = (
            [DEFAULT_ESS / 4] * args.count if mode == "bdeu" else None
        )  # a_jk of a binary child, q = 2
        parties = run(_ln_spec(args, mode, gc_below, ot_below), shares, shifts)
        alice, bob = parties["alice"], parties["bob"]
        seconds = max(alice["seconds"], bob["seconds"])
        model = term_cost(alice["count_bits"], mode, shifts[0] if shifts else None, args.ot_k)
        rows.append(
            {
                "mode": mode,
                "evaluations": args.count,
                "seconds": round(seconds, 2),
                "evaluations_per_s": round(args.count / seconds),
                "bytes_per_evaluation": round(
                    (alice["stats"]["bytes_sent"] + bob["stats"]["bytes_sent"]) / args.count
                ),
                "model_bytes_per_evaluation": round(model.total),
                "and_gates_per_evaluation": round(alice["and_gates"] / args.count),
                "ots_per_evaluation": round(bob["ots"] / args.count),
                "bytes_alice_to_bob": alice["stats"]["bytes_sent"],
                "bytes_bob_to_alice": alice["stats"]["bytes_received"],
                "rounds": alice["stats"]["rounds"],
                "alice_cpu_seconds": round(alice["cpu_seconds"], 3),
                "bob_cpu_seconds": round(bob["cpu_seconds"], 3),
                "term_lanes": args.term_lanes,
                "ot_k": args.ot_k,
                # of which in the terms lanes' processes (the rest: the party's own, relaying)
                "alice_lanes_cpu_seconds": round(alice["lanes_cpu_seconds"], 3),
                "bob_lanes_cpu_seconds": round(bob["lanes_cpu_seconds"], 3),
                # the compiled kernels' first load (or compile) in each party's process
                "kernels_first_load_s": max(alice["kernels"]["seconds"], bob["kernels"]["seconds"]),
                "kernels_compiled": alice["kernels"]["compiled"] + bob["kernels"]["compiled"],
            }
        )
        kinds = breakdown_rows(alice["breakdown"])
        for row in kinds:
            row["bytes_per_evaluation"] = round(row["total"] / args.count, 1)
            predicted = model.bytes_by_kind.get((row["phase"].split(": ", 1)[-1], row["kind"]))
            row["model_bytes_per_evaluation"] = None if predicted is None else round(predicted, 1)
        by_kind.extend(kinds)
    transport = {
        "processes": "two party processes joined by a pipe (each with its own pool)",
        "threads": "in-memory channel, both parties in this process (2 threads)",
    }[args.parties]
    report = {
        "what": "batched secure ln x and x ln x terms (normalisation circuit, OT lookups, share series)",
        "transport": transport
        + (f", each message delayed by the link model {link.text}" if link else ""),
        "executor": {
            "kind": args.executor,
            "workers": args.workers,
            "gc_inline_below": gc_below,
            "ot_inline_below": ot_below,
        },
        **({"link": link.as_dict()} if link else {}),
        "max_count": args.max_count,
        "modes": rows,
        "bytes_by_mode_and_kind": by_kind,
    }
    _print(report, args.format)
    return 0


def _phase_labeller(channel, mode: str):
    """Count the channel's bytes under "MODE: PHASE" as the scorer announces its phases."""

    def progress(label: str, done: int, total: int) -> None:
        if label.startswith("phase "):
            channel.stats.section = f"{mode}: {label[len('phase ') :]}"

    return progress


def _print(report: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(report, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if "modes" in report:
        table = Table(title=f"ppbn bench ln ({report['transport']})")
        for key in report["modes"][0]:
            table.add_column(key.replace("_", " "), justify="right")
        for row in report["modes"]:
            table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()))
        console.print(table)
        _print_breakdown(
            console, report["bytes_by_mode_and_kind"], "bytes by score mode and message kind"
        )
        return
    table = Table(
        title=f"ppbn bench k2: {report['network']}, {report['records']:,} records, u = {report['max_parents']}, {report['score']}"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in report.items():
        if key in ("network", "records", "max_parents", "score", "bytes_by_phase_and_kind"):
            continue
        text = (
            json.dumps(value)
            if isinstance(value, dict)
            else (f"{value:,}" if isinstance(value, int) else str(value))
        )
        table.add_row(key.replace("_", " "), text)
    console.print(table)
    _print_breakdown(
        console, report["bytes_by_phase_and_kind"], "bytes by phase and message kind (top 15)", 15
    )


def _print_breakdown(
    console, rows: list[dict[str, Any]], title: str, top: int | None = None
) -> None:
    from rich.table import Table

    if not rows:
        return
    table = Table(title=title)
    for key in rows[0]:
        table.add_column(
            key.replace("_", " "), justify="left" if key in ("phase", "kind") else "right"
        )
    for row in rows[:top]:
        table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()))
    console.print(table)


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    k2 = bench.add_parser(
        "k2",
        help="the whole private K2 + parameters job between two daemons over loopback TLS",
        description="Sample data, start both daemons over loopback mutual TLS, run the learn "
        "job and report wall time, phases, traffic, AND gates, OTs and Paillier encryptions "
        "(next to the paper's per-alpha method on the same families).",
    )
    add_learn_run_options(k2)
    k2.add_argument(
        "--search",
        choices=SEARCHES,
        default="k2",
        help="k2 (schema order; the default) or hc: private hill climbing, no order",
    )
    add_hc_options(k2)
    k2.add_argument(
        "--key-bits",
        type=int,
        default=2048,
        choices=(1024, 2048, 3072),
        help="Paillier key size (1024 only for quick checks; default 2048)",
    )
    k2.add_argument(
        "--timeout", type=positive_float, default=600.0, help="daemons' peer timeout in seconds"
    )
    k2.add_argument(
        "--check-reference",
        action="store_true",
        help="also learn the non-private reference and compare (exit 1 when they differ)",
    )
    k2.add_argument("--format", choices=("table", "json"), default="table")
    k2.add_argument(
        "--link",
        metavar="RATE[/RTT]",
        help="route the daemons through ppbn's shaping relay: e.g. 100mbit/20ms, 1gbit (kbit, mbit, gbit; ms, s)",
    )
    add_missing_options(k2, rate=True)
    add_alignment_options(k2)
    add_pair_policy_options(k2)
    add_overlap_option(k2)
    add_dp_options(k2)
    k2.set_defaults(func=_bench_k2)

    ln = bench.add_parser(
        "ln",
        help="batched secure ln x / x ln x evaluations per second",
        description="Shares of random counts through the secure term pipeline of each score "
        "mode, the two parties in two processes joined by a pipe (or in two threads of this "
        "process over the in-memory channel); reports evaluations per second, bytes, rounds "
        "and each party's CPU seconds.",
    )
    ln.add_argument(
        "--count", type=positive_int, default=20000, help="evaluations per mode (default 20000)"
    )
    ln.add_argument(
        "--max-count",
        type=positive_int,
        default=20000,
        help="counts are uniform in [0, max] (default 20000)",
    )
    ln.add_argument(
        "--modes", default="yw,exact", help="comma list of score modes (default yw,exact)"
    )
    ln.add_argument("--seed", type=non_negative_int, default=1)
    ln.add_argument(
        "--parties",
        choices=("processes", "threads"),
        default="processes",
        help="processes: each party its own process, as two daemons are (default); threads: "
        "both in this process, sharing one interpreter lock",
    )
    ln.add_argument("--format", choices=("table", "json"), default="table")
    ln.add_argument(
        "--link",
        metavar="RATE[/RTT]",
        help="delay each message as a link of that rate and round-trip time would: e.g. 100mbit/20ms",
    )
    ln.add_argument(
        "--executor",
        choices=("local", "inline"),
        default="local",
        help="where each party's garbling, evaluation and OT-extension blocks run: its own "
        "process pool (the default, as a daemon's) or its job thread",
    )
    ln.add_argument(
        "--workers",
        type=int_in(1, MAX_WORKERS),
        help="worker processes of each party's pool (default: one per core)",
    )
    ln.add_argument(
        "--gc-inline-below",
        type=non_negative_int,
        metavar="N",
        help="garbled runs of fewer AND gates x instances stay inline (default: yao.GC_INLINE_BELOW)",
    )
    ln.add_argument(
        "--ot-inline-below",
        type=non_negative_int,
        metavar="N",
        help="OT-extension calls of fewer OTs stay inline (default: ot.OT_INLINE_BELOW)",
    )
    add_term_lanes_option(
        ln,
        "each party runs the terms across N processes, each on a lane of its own "
        "(default 1: its own thread)",
    )
    add_ot_k_option(ln)
    ln.set_defaults(func=_bench_ln)
