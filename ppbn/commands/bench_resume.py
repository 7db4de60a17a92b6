"""``ppbn bench resume``: the time a checkpoint saves when a daemon dies late in a job. The
engine is ``ppbn/bench/resume.py`` (the learn job once uninterrupted, then again with bob
killed at ``--kill-at`` of its wall time, restarted and resumed); this module parses the
flags and prints what it measured.
"""

from __future__ import annotations

import argparse
import json

from ppbn.commands.checked_numbers import positive_float
from ppbn.commands.learning_options import add_learn_run_options


def _bench_resume(args: argparse.Namespace) -> int:
    from ppbn.bench.resume import ResumeSettings, bench_resume, resumed_equal

    settings = ResumeSettings(
        network=args.network, records=args.records, seed=args.seed,
        max_parents=args.max_parents, score=args.score, tau=args.tau, key_bits=args.key_bits,
        kill_at=args.kill_at, timeout_s=args.timeout,
    )  # fmt: skip
    quiet = args.format == "json"
    report = bench_resume(settings, None if quiet else (lambda text: print(text, flush=True)))
    if quiet:
        print(json.dumps(report, indent=2))
    else:
        saved, diff = report["saved_vs_rerun_s"], report["max_abs_cpt_difference"]
        print(f"  restart {report['restart_s']:.1f} s; resumed run {report['resume_s']:.1f} s")
        print(
            f"saved against a rerun from the start: {saved:.1f} s ({report['saved_vs_rerun_share']:.0%})"
        )
        print(
            f"resumed result equals the uninterrupted one: edges {report['same_edges_and_order']}, largest CPT difference {diff:.2e}"
        )
    return 0 if resumed_equal(report) else 1


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser(
        "resume",
        help="the time a checkpoint saves: kill bob late in a learn job, restart, --resume",
        description="Run the learn job between two daemons over loopback TLS, then run it again, "
        "SIGKILL bob's daemon at --kill-at of the first run's wall time, restart it and resume; "
        "report the time saved against a rerun and check the resumed result.",
    )
    add_learn_run_options(parser)
    parser.add_argument(
        "--key-bits",
        type=int,
        default=2048,
        choices=(2048, 3072),
        help="Paillier key size (default 2048)",
    )
    parser.add_argument(
        "--kill-at",
        type=float,
        default=0.75,
        help="share of the uninterrupted wall time at which bob is killed (default 0.75)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=300.0,
        help="daemons' peer timeout in seconds (default 300)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_bench_resume)
