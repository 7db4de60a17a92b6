"""``ppbn bench k2`` and ``ppbn bench ln``: measurements of the secure path. The engines
are ``ppbn/bench/k2.py`` (the whole learn job between two daemons, against the paper's
per-alpha method and, with ``--check-reference``, the non-private reference) and
``ppbn/bench/ln.py`` (the batched secure ln / x ln x terms alone, the parties in two
processes or two threads); this module parses their flags and prints their reports.
``--link RATE[/RTT]`` (both) models a network between the parties (``ppbn.pair.shaper``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ppbn.commands.checked_numbers import int_in, non_negative_int, positive_float, positive_int
from ppbn.commands.data_options import (
    add_alignment_options,
    add_missing_options,
    missing_rule,
    sample_overlap,
)
from ppbn.commands.executor_options import MAX_WORKERS, add_pair_policy_options, pair_policy
from ppbn.commands.job_options import add_dp_options, dp_params
from ppbn.commands.learning_options import (
    SEARCHES,
    add_hc_options,
    add_learn_run_options,
    hc_job_params,
)
from ppbn.commands.secure_options import add_ot_k_option, add_overlap_option, add_term_lanes_option


def _bench_k2(args: argparse.Namespace) -> int:
    from ppbn.bench.k2 import K2Settings, bench_k2
    from ppbn.bench.pair_runs import LearnJob
    from ppbn.commands.unused_flags import refuse_unused_flags

    refuse_unused_flags(args)
    job = LearnJob(
        max_parents=args.max_parents, score=args.score, tau=args.tau, ess=args.ess,
        key_bits=args.key_bits, overlap_tables=args.overlap_tables == "on",
        split_terms=args.split_terms == "on", term_lanes=args.term_lanes, ot_k=args.ot_k,
        search_params=hc_job_params(args), dp_params=dp_params(args),
    )  # fmt: skip
    settings = K2Settings(
        network=args.network, records=args.records, seed=args.seed, job=job,
        missing=missing_rule(args), missing_rate=args.missing_rate, align=args.align,
        overlap=sample_overlap(args), link=args.link, policy=pair_policy(args),
        timeout_s=args.timeout, check_reference=args.check_reference,
    )  # fmt: skip
    quiet = args.format == "json"
    report = bench_k2(settings, None if quiet else (lambda note: print(f"  {note}", flush=True)))
    if quiet:
        print(json.dumps(report, indent=2))
    else:
        title = f"ppbn bench k2: {report['network']}, {report['records']:,} records, u = {report['max_parents']}, {report['score']}"
        _print_rows(title, _figures(report), ("figure",))
        rows = report["bytes_by_phase_and_kind"]
        _print_rows("bytes by phase and message kind (top 15)", rows[:15], ("phase", "kind"))
    return 0 if not args.check_reference or report["reference"]["equal"] else 1


def _bench_ln(args: argparse.Namespace) -> int:
    from ppbn.bench.ln import LnSettings, bench_ln

    settings = LnSettings(
        count=args.count, max_count=args.max_count, modes=tuple(args.modes.split(",")),
        seed=args.seed, parties=args.parties, link=args.link, executor=args.executor,
        workers=args.workers, gc_inline_below=args.gc_inline_below,
        ot_inline_below=args.ot_inline_below, term_lanes=args.term_lanes, ot_k=args.ot_k,
    )  # fmt: skip
    report = bench_ln(settings)
    if args.format == "json":
        print(json.dumps(report, indent=2))
        return 0
    _print_rows(f"ppbn bench ln ({report['transport']})", report["modes"], ())
    title = "bytes by score mode and message kind"
    _print_rows(title, report["bytes_by_mode_and_kind"], ("phase", "kind"))
    return 0


def _figures(report: dict[str, Any]) -> list[dict[str, Any]]:
    """``bench k2``'s figures but those its title and breakdown table show, one row each."""
    shown = ("network", "records", "max_parents", "score", "bytes_by_phase_and_kind")
    return [
        {"figure": key.replace("_", " "), "value": json.dumps(v) if isinstance(v, dict) else v}
        for key, v in report.items()
        if key not in shown
    ]


def _print_rows(title: str, rows: list[dict[str, Any]], left: tuple[str, ...]) -> None:
    """A rich table of rows (none: no table), the ``left`` columns left-aligned."""
    from rich.console import Console
    from rich.table import Table

    if not rows:
        return
    table = Table(title=title)
    for key in rows[0]:
        table.add_column(key.replace("_", " "), justify="left" if key in left else "right")
    for row in rows:
        table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()))
    Console().print(table)


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
