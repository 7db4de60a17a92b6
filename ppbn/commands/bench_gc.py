"""``ppbn bench gc``: throughput of the garbling engine, measured by ``ppbn/bench/gc.py``
on a Bristol Fashion circuit; this module parses the flags and prints the report."""

from __future__ import annotations

import argparse

from ppbn.commands.checked_numbers import positive_int
from ppbn.commands.tables import kernels_text, report_measures
from ppbn.protocols.constants import COVERT, SEMI_HONEST


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    gc = bench.add_parser(
        "gc",
        help="AND gates per second garbled and evaluated (half-gates, batched)",
        description="Garble and evaluate --instances copies of a Bristol Fashion circuit as "
        "one batch on one core; report AND gates per second for garbling and evaluation, the "
        "single-instance figures, bytes per AND gate, and a two-party run over the memory Channel.",
    )
    gc.add_argument("--bristol", required=True, metavar="FILE")
    gc.add_argument("--instances", type=positive_int, default=1000)
    gc.add_argument(
        "--repeats",
        type=positive_int,
        default=3,
        help="timed runs; the best is reported (default 3)",
    )
    gc.add_argument(
        "--security",
        choices=(SEMI_HONEST, COVERT),
        default=SEMI_HONEST,
        help="the level of the two-party run: covert garbles two copies and opens one "
        "(default semi-honest)",
    )
    gc.add_argument("--format", choices=("table", "json"), default="table")
    gc.set_defaults(func=_bench_gc)


def _bench_gc(args: argparse.Namespace) -> int:
    from ppbn.bench.gc import bench_gc
    from ppbn.circuits.bristol import load_bristol_file

    circuit = load_bristol_file(args.bristol)
    report = bench_gc(circuit, args.bristol, args.instances, args.repeats, args.security)
    title = (
        f"garbling {args.bristol}: {report['and_gates']:,} AND gates x "
        f"{report['instances']:,} instances (one core)"
    )
    if args.security != SEMI_HONEST:
        title += f", two-party run {args.security}"
    return report_measures(
        report,
        args.format,
        title,
        [
            ("garble, AND gates/s", f"{report['garble_and_per_s']:,.0f}"),
            ("evaluate, AND gates/s", f"{report['eval_and_per_s']:,.0f}"),
            (
                "garble, single instance, AND gates/s",
                f"{report['single_instance_garble_and_per_s']:,.0f}",
            ),
            (
                "evaluate, single instance, AND gates/s",
                f"{report['single_instance_eval_and_per_s']:,.0f}",
            ),
            ("garbled table bytes per AND gate", f"{report['bytes_per_and']:.1f}"),
            ("two-party run (threads, OT included), s", f"{report['two_party_seconds']:.2f}"),
            ("two-party run, AND gates/s", f"{report['two_party_and_per_s']:,.0f}"),
            ("two-party run, bytes per AND gate", f"{report['two_party_bytes_per_and']:.1f}"),
            ("compiled kernels, first load, s", kernels_text(report["kernels"])),
        ],
    )
