"""``ppbn bench order``: how much K2's result depends on its node order. The engine and
its plot are in ``ppbn/bench/order.py``; this module parses the flags and prints the
structural Hamming distance of each run.
"""

from __future__ import annotations

import argparse
import json

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TABU, DEFAULT_TAU, SCORE_MODES
from ppbn.commands.checked_numbers import non_negative_int, positive_int


def _bench_order(args: argparse.Namespace) -> int:
    from ppbn.bench.order import order_sensitivity, plot

    result = order_sensitivity(
        args.network,
        args.records,
        args.orders,
        args.score,
        args.max_parents,
        args.seed,
        args.tau,
        args.tabu,
        args.ess,
    )
    if args.plot:
        plot(result, args.plot)
        result["plot"] = args.plot
    if args.format == "json":
        print(json.dumps(result, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"{args.network}, {args.records} records, seed {args.seed}, score {args.score}, "
        f"u={args.max_parents}, tau {args.tau:g}: SHD to the true network ({result['true_edges']} edges)"
    )
    for column, justify in (
        ("search", "left"),
        ("order", "left"),
        ("SHD", "right"),
        ("edges", "right"),
        ("total score", "right"),
        ("wall s", "right"),
    ):
        table.add_column(column, justify=justify)
    for r in result["runs"]:
        extra = f" ({r['moves']} moves)" if "moves" in r else ""
        table.add_row(
            r["search"],
            r["order"] + extra,
            str(r["shd"]),
            str(r["edges"]),
            f"{r['score']:.1f}",
            f"{r['wall_s']:.2f}",
        )
    Console().print(table)
    s = result["summary"]
    if s["k2_random_shd_min"] is not None:
        print(
            f"K2 random orders: SHD {s['k2_random_shd_min']}..{s['k2_random_shd_max']} (median "
            f"{s['k2_random_shd_median']:g}); topological {s['k2_topological_shd']}; hc {s['hc_shd']}"
        )
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser(
        "order",
        help="K2's dependence on the node order: SHD under the true and random orders, and hc",
        description="Sample --records from --network, learn with the plaintext K2 reference under "
        "the topological order and --orders random orders, and with hill climbing once; report "
        "each result's structural Hamming distance to the true network, total score and wall time.",
    )
    parser.add_argument("--network", required=True, help="a bundled network, e.g. alarm")
    parser.add_argument(
        "--records", type=positive_int, default=20000, help="records to sample (default 20000)"
    )
    parser.add_argument(
        "--orders", type=positive_int, default=10, help="random K2 orders (default 10)"
    )
    parser.add_argument(
        "--score", choices=SCORE_MODES, default="bic", help="score mode (default bic)"
    )
    parser.add_argument(
        "--max-parents", type=non_negative_int, default=3, help="parent limit (default 3)"
    )
    parser.add_argument(
        "--tau", type=float, default=DEFAULT_TAU, help=f"tolerance (default {DEFAULT_TAU:g})"
    )
    parser.add_argument(
        "--tabu",
        type=non_negative_int,
        default=DEFAULT_TABU,
        help=f"hc tabu length (default {DEFAULT_TABU})",
    )
    parser.add_argument(
        "--ess", type=float, default=DEFAULT_ESS, help=f"BDeu ess (default {DEFAULT_ESS:g})"
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=7, help="sampling and order seed (default 7)"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="also draw the SHD of each run (matplotlib)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_bench_order)
