"""``ppbn bench scale``: how each phase of a secure job scales with workers per party.

For each worker count W of ``--workers`` the same learn job (same data, seed and
parameters) runs between two daemon processes over loopback mutual TLS, as ``bench k2``
runs it, each daemon's executor at W workers. W = 1 is the inline executor, the serial
baseline. At W > 1 every phase that can use the executor does: the policy's
``gc_inline_below`` and ``ot_inline_below`` are 0, so garbled runs and OT-extension
blocks go to the pool as well (by default they stay in the job thread). The table phase
goes to the pool from ``TablesConfig.serial_below`` records on, which is no policy setting.

Every run must learn what the smallest W learned (edges, hill-climbing moves, CPTs): the
executor never changes results, and a run that does makes the bench exit 1. The times are
measurements, never checked against anything.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TAU, SCORE_MODES
from ppbn.bn.networks import NETWORKS
from ppbn.commands.options import (
    MAX_WORKERS,
    SEARCHES,
    add_hc_options,
    add_overlap_option,
    non_negative_int,
    positive_float,
    positive_int,
)
from ppbn.errors import UserError
from ppbn.protocols.constants import MAX_TERM_LANES

if TYPE_CHECKING:
    from ppbn.commands._bench_common import LearnRun
    from ppbn.jobs.policy import LocalPolicy

WHOLE_JOB = "whole job"


def worker_counts(text: str) -> tuple[int, ...]:
    """``--workers``: a comma list of distinct counts in 1..MAX_WORKERS, in ascending order."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(parts):
        raise argparse.ArgumentTypeError(f"must be a comma list of worker counts (got {text!r})")
    counts = []
    for part in parts:
        if not part.isdigit() or not 1 <= int(part) <= MAX_WORKERS:
            raise argparse.ArgumentTypeError(
                f"each worker count must be an integer in 1..{MAX_WORKERS} (got {part!r})"
            )
        counts.append(int(part))
    if len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"a worker count appears twice (got {text!r})")
    return tuple(sorted(counts))


def scale_policy(
    base: LocalPolicy, executor: str, workers: int, term_lanes: int = 1
) -> LocalPolicy:
    """The daemons' policy at W workers: inline at 1; else ``executor`` at W with every
    garbled run and OT-extension call sent to it (a private Ray instance of W CPUs per
    daemon for ray, so that W means the same for both executors); and room for the job's
    ``term_lanes``."""
    from dataclasses import replace

    base = replace(base, max_term_lanes=max(base.max_term_lanes, term_lanes))
    if workers == 1:
        policy = replace(base, executor="inline", workers=1, ray_address=None)
    else:
        policy = replace(
            base,
            executor=executor,
            workers=workers,
            ray_address=None,
            gc_inline_below=0,
            ot_inline_below=0,
        )
    policy.validate()
    return policy


def _bench_scale(args: argparse.Namespace) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from ppbn.commands._bench_common import bench_learn_params, run_learn, sample_pair_files
    from ppbn.commands.options import check_executor_flags
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.pair.loopback import LocalPair

    base = LocalPolicy.load(args.policy)
    base.require_key_bits(args.key_bits)  # refused here, before data and daemons
    base.require_records(args.records)
    if args.lanes == "workers" and max(args.workers) > MAX_TERM_LANES:
        raise UserError(f"--lanes workers: at most {MAX_TERM_LANES} terms lanes, so W <= that")
    lanes = {w: w if args.lanes == "workers" else args.term_lanes for w in args.workers}
    policies = {w: scale_policy(base, args.executor, w, lanes[w]) for w in args.workers}
    check_executor_flags(args.executor, None)
    params = bench_learn_params(args)
    quiet = args.format == "json"
    runs: list[dict[str, Any]] = []
    baseline: dict[str, Any] | None = None
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-scale-"))
    try:
        _, _, files = sample_pair_files(args, work)
        for workers, policy in policies.items():
            for repeat in range(args.repeat):
                with LocalPair(files, args.timeout, policy=policy) as pair:
                    run = run_learn(pair, {**params, "term_lanes": lanes[workers]}, quiet=True)
                result = _result(run.learned)
                baseline = baseline or result
                runs.append(
                    _figures(run, workers, repeat, result == baseline)
                    | {"term_lanes": lanes[workers]}
                )
                if not quiet:
                    print(
                        f"  W = {workers}, run {repeat + 1}/{args.repeat}: {run.wall_s:.2f} s",
                        flush=True,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = _report(args, runs)
    _print(report, args.format)
    return 0 if report["same_results"] else 1


def _result(learned: dict[str, Any]) -> dict[str, Any]:
    """What the executor must not change: the structure, its order, and the CPTs."""
    return {
        "edges": learned["edges"],
        "moves": learned.get("moves"),
        "cpts": {v: p["table"] for v, p in learned["parameters"].items()},
    }


def _figures(run: LearnRun, workers: int, repeat: int, same: bool) -> dict[str, Any]:
    """One run's figures: the operator's wall time, and each party's own per-phase seconds."""
    parties = {s["role"]: s for s in (run.outcome.stats, run.outcome.peer_stats) if s}
    return {
        "workers": workers,
        "repeat": repeat + 1,
        "wall_s": round(run.wall_s, 3),
        "party_wall_s": {r: s["wall_s"] for r, s in parties.items()},
        "phases_s": {r: s["phases"] for r, s in parties.items()},
        "edges": len(run.learned["edges"]),
        "same_result_as_baseline": same,
    }


def _phase_seconds(run: dict[str, Any]) -> dict[str, float]:
    """Each phase's seconds at the slower party (the two wait on each other), and the job."""
    seconds: dict[str, float] = {}
    for phases in run["phases_s"].values():
        for phase, value in phases.items():
            seconds[phase] = max(seconds.get(phase, 0.0), value)
    return {**seconds, WHOLE_JOB: run["wall_s"]}


def _report(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    from statistics import median

    from ppbn.protocols.tables.config import TablesConfig

    serial_below = TablesConfig.serial_below
    cores = os.cpu_count() or 1
    most = max(args.workers)
    by_workers: dict[int, dict[str, float]] = {}
    for workers in args.workers:
        each = [_phase_seconds(r) for r in runs if r["workers"] == workers]
        phases = list(dict.fromkeys(p for seconds in each for p in seconds))
        by_workers[workers] = {p: round(median(s[p] for s in each if p in s), 3) for p in phases}
    return {
        "network": args.network,
        "records": args.records,
        "max_parents": args.max_parents,
        "score": args.score,
        "search": args.search,
        "key_bits": args.key_bits,
        "executor": args.executor,
        "workers": list(args.workers),
        "lanes": args.lanes,
        "repeat": args.repeat,
        "cores": cores,
        "warning": (
            f"{most} workers per party on {cores} cores: the figures measure "
            "oversubscription, not scaling"
            if most > cores
            else None
        ),
        "note": (
            f"fewer than {serial_below:,} records: the table phase runs inline at every W"
            if args.records < serial_below
            else None
        ),
        "baseline_workers": args.workers[0],
        "same_results": all(r["same_result_as_baseline"] for r in runs),
        "median_seconds": {str(w): s for w, s in by_workers.items()},
        "runs": runs,
    }


def _cell(seconds: float | None, base: float | None) -> str:
    if seconds is None:
        return "-"
    text = f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"
    return f"{text} ({base / seconds:.1f}x)" if base and seconds else text


def _print(report: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        import json

        print(json.dumps(report, indent=2))
        return
    from ppbn.commands.tables import print_table

    columns = report["median_seconds"]
    base = columns[str(report["baseline_workers"])]
    phases = list(dict.fromkeys(p for s in columns.values() for p in s if p != WHOLE_JOB))
    rows = [
        (phase, *(_cell(s.get(phase), base.get(phase)) for s in columns.values()))
        for phase in [*phases, WHOLE_JOB]
    ]
    runs = f", median of {report['repeat']}" if report["repeat"] > 1 else ""
    print(
        f"ppbn bench scale: {report['network']}, {report['records']:,} records, "
        f"u = {report['max_parents']}, {report['score']}, {report['search']}, executor "
        f"{report['executor']} at W workers per party"
    )
    print_table(
        f"seconds (slower party{runs}; speed-up vs W = {report['baseline_workers']})",
        rows,
        ("phase", *(f"W = {w}" for w in columns)),
    )
    print(f"cores: {report['cores']} (os.cpu_count); both daemons share this host")
    if report["note"]:
        print(f"note: {report['note']}")
    if report["warning"]:
        print(f"warning: {report['warning']}")
    print(
        "results: every run learned the same edges and CPTs"
        if report["same_results"]
        else "results DIFFER: "
        + ", ".join(
            f"W = {r['workers']} run {r['repeat']}"
            for r in report["runs"]
            if not r["same_result_as_baseline"]
        )
        + f" learned other edges or CPTs than W = {report['baseline_workers']}"
    )


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    scale = bench.add_parser(
        "scale",
        help="how each phase of the secure job scales with workers per party",
        description="Run the same learn job between two daemons over loopback mutual TLS "
        "once per worker count (each daemon's executor at W workers, garbling and OT "
        "extension sent to it too; W = 1 inline), check that every run learns the same "
        "network, and print each phase's seconds per W with the speed-up over the smallest "
        "W. A measurement, never a test of the times.",
    )
    scale.add_argument(
        "--network", default="asia", help=f"one of: {', '.join(NETWORKS)} (default asia)"
    )
    scale.add_argument(
        "--records", type=positive_int, default=20000, help="records sampled (default 20000)"
    )
    scale.add_argument(
        "--max-parents", type=non_negative_int, default=2, help="parent limit u (default 2)"
    )
    scale.add_argument("--score", choices=SCORE_MODES, default="exact")
    scale.add_argument(
        "--ess", type=positive_float, default=DEFAULT_ESS, help="BDeu equivalent sample size"
    )
    scale.add_argument("--tau", type=float, default=DEFAULT_TAU)
    scale.add_argument("--seed", type=non_negative_int, default=7)
    scale.add_argument(
        "--search",
        choices=SEARCHES,
        default="k2",
        help="k2 (schema order; the default) or hc: private hill climbing, no order",
    )
    add_hc_options(scale)
    scale.add_argument(
        "--key-bits",
        type=int,
        default=2048,
        choices=(1024, 2048, 3072),
        help="Paillier key size (1024 only with a --policy that allows it; default 2048)",
    )
    scale.add_argument(
        "--workers",
        type=worker_counts,
        default="1,2,4,8",
        metavar="W,W,...",
        help="worker counts per party, a comma list (default 1,2,4,8; 1 is the inline executor)",
    )
    scale.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="each daemon's executor at W > 1: a local process pool (default) or a private "
        "Ray instance of W CPUs (`pip install 'ppbn[ray]'`)",
    )
    scale.add_argument(
        "--repeat",
        type=positive_int,
        default=1,
        help="runs per worker count; the table shows the median (default 1)",
    )
    scale.add_argument(
        "--policy",
        metavar="FILE",
        help="local policy both daemons start from (default: the built-in); the executor, "
        "workers and inline thresholds are set per W on top",
    )
    scale.add_argument(
        "--timeout", type=positive_float, default=600.0, help="daemons' peer timeout in seconds"
    )
    add_overlap_option(scale)
    scale.add_argument(
        "--lanes",
        choices=("job", "workers"),
        default="job",
        help="terms lanes per party at each W: job (default) keeps --term-lanes at every W; "
        "workers runs W lanes at W workers, so the ln-term phase scales with W too",
    )
    scale.add_argument("--format", choices=("table", "json"), default="table")
    scale.set_defaults(func=_bench_scale)
