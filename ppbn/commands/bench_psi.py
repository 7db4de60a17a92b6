"""``ppbn bench psi``: private set intersection of record ids between two party processes,
next to openmined-psi's ECDH PSI when it is installed. The engine is ``ppbn/bench/psi.py``;
this module parses the flags and prints the report.
"""

from __future__ import annotations

import argparse
import json

from ppbn.commands.checked_numbers import non_negative_int, positive_int

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


def _bench_psi(args: argparse.Namespace) -> int:
    from ppbn.bench.psi import PsiSettings, bench_psi, psi_rows
    from ppbn.commands.tables import print_table

    report = bench_psi(PsiSettings(args.size, args.overlap, args.seed, not args.no_openmined))
    status = 0 if report["ppbn"]["correct"] else 1
    if args.format == "json":
        print(json.dumps(report))
        return status
    om = report["openmined_psi"]
    title = (
        f"PSI: {args.size:,} x {args.size:,} ids, {args.overlap:.0%} shared, "
        f"{report['cores']} cores, load {report['load_average_1min']}"
    )
    if om:
        title += f"; ppbn {report['speedup_over_openmined']}x faster than openmined-psi"
    header = ("", "ppbn (KKRT16 OT-extension PSI)", "openmined-psi (ECDH)")
    print_table(title, psi_rows(report), header if om else header[:2])
    if om is None and not args.no_openmined:
        print(OPENMINED_HINT)
    return status
