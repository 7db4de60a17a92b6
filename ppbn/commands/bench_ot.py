"""``ppbn bench ot``: throughput of OT extension (SoftSpokenOT) between the two parties,
measured by ``ppbn/bench/ot.py``; this module parses the flags and prints the report."""

from __future__ import annotations

import argparse

from ppbn.commands.checked_numbers import positive_int
from ppbn.commands.secure_options import add_ot_k_option
from ppbn.commands.tables import kernels_text, report_measures
from ppbn.protocols.constants import SECURITY_LEVELS, SEMI_HONEST

WHAT = "OT extension (SoftSpokenOT, k = {k}), {m:,} OTs of 128-bit messages, {where}"
WHERE = {
    "processes": "two party processes joined by a pipe",
    "threads": "two threads of one process (in-memory channel)",
}


def _bench_ot(args: argparse.Namespace) -> int:
    from ppbn.bench.ot import OtSettings, bench_ot

    settings = OtSettings(
        args.count, args.repeats, args.parties, args.seed, args.ot_k, args.security
    )
    report = bench_ot(settings)
    title = WHAT.format(k=args.ot_k, m=args.count, where=WHERE[args.parties])
    if args.security != SEMI_HONEST:
        title += f", {args.security} (checked blocks)"
    return report_measures(
        report,
        args.format,
        title,
        [
            ("chosen-message OTs/s", f"{report['ot_per_s']:,.0f}"),
            ("correlated OTs/s", f"{report['correlated_ot_per_s']:,.0f}"),
            ("bytes per chosen-message OT", f"{report['bytes_per_ot']:.1f}"),
            ("base OTs (128, once per session), s", f"{report['base_ot_seconds']:.3f}"),
            *(
                (
                    f"compiled kernels, first load at {role}, s",
                    kernels_text(report["kernels"][role]),
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
    ot.add_argument(
        "--security",
        choices=SECURITY_LEVELS,
        default=SEMI_HONEST,
        help="the level both ends run at: covert and malicious add the consistency check "
        "against a malicious receiver to every block (default semi-honest)",
    )
    ot.add_argument("--format", choices=("table", "json"), default="table")
    ot.set_defaults(func=_bench_ot)
