"""``ppbn bench scale``: how each phase of a secure job scales with workers per party. The
engine is ``ppbn/bench/scale.py`` (the same learn job between two daemons once per worker
count, every run checked to learn the same network); this module parses the flags and
prints each phase's seconds per W (speed-up over the smallest W), CPU and Amdahl's bound.
"""

from __future__ import annotations

import argparse
from typing import Any

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TAU, SCORE_MODES
from ppbn.bn.networks import NETWORKS
from ppbn.commands.checked_numbers import non_negative_int, positive_float, positive_int
from ppbn.commands.executor_options import MAX_WORKERS
from ppbn.commands.learning_options import SEARCHES, add_hc_options, hc_job_params
from ppbn.commands.secure_options import add_overlap_option


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


def _bench_scale(args: argparse.Namespace) -> int:
    from ppbn.bench.pair_runs import LearnJob
    from ppbn.bench.scale import ScaleSettings, bench_scale
    from ppbn.jobs.policy import LocalPolicy

    job = LearnJob(
        max_parents=args.max_parents, score=args.score, tau=args.tau, ess=args.ess,
        key_bits=args.key_bits, overlap_tables=args.overlap_tables == "on",
        split_terms=args.split_terms == "on", term_lanes=args.term_lanes, ot_k=args.ot_k,
        search_params=hc_job_params(args),
    )  # fmt: skip
    settings = ScaleSettings(
        network=args.network, records=args.records, seed=args.seed, job=job,
        workers=args.workers, executor=args.executor, lanes=args.lanes, repeat=args.repeat,
        policy=LocalPolicy.load(args.policy), timeout_s=args.timeout,
    )  # fmt: skip
    quiet = args.format == "json"
    report = bench_scale(settings, None if quiet else (lambda line: print(line, flush=True)))
    if quiet:
        import json

        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0 if report["same_results"] else 1


def _print(report: dict[str, Any]) -> None:
    from ppbn.bench.scale import scale_header, scale_legend, scale_rows
    from ppbn.commands.tables import print_table

    runs = f", median of {report['repeat']}" if report["repeat"] > 1 else ""
    print(
        f"ppbn bench scale: {report['network']}, {report['records']:,} records, "
        f"u = {report['max_parents']}, {report['score']}, {report['search']}, executor "
        f"{report['executor']} at W workers per party"
    )
    title = f"seconds (slower party{runs}; speed-up vs W = {report['baseline_workers']})"
    print_table(title, scale_rows(report), scale_header(report))
    print(scale_legend(report))
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
        "network, and print each phase's seconds per W (speed-up over the smallest W), each "
        "party's serial and parallel CPU at the smallest W, and the speed-up Amdahl's law "
        "allows from them at 8 and 16 workers. A measurement, never a test of the times.",
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
        help="terms lanes per party at each W: job (default) keeps --term-lanes at every W "
        "(auto: what the parties agree on at that W); workers runs W lanes at W workers, so "
        "the ln-term phase scales with W too",
    )
    scale.add_argument("--format", choices=("table", "json"), default="table")
    scale.set_defaults(func=_bench_scale)
