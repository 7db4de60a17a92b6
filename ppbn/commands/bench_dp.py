"""``ppbn bench dp``: how useful the differentially private network is, against epsilon.
The engine is ``ppbn/bench/dp.py`` (per network, seed and epsilon, each method's release
measured against the real records) and ``ppbn/bench/dp_report.py`` (tables, files of
``--out``); this module parses the flags and prints the tables.
"""

from __future__ import annotations

import argparse

from ppbn.bench.constants import DP_METHODS
from ppbn.bn.networks import NETWORKS
from ppbn.commands.checked_numbers import non_negative_int, positive_int
from ppbn.dp.constants import DP_SCORES


def epsilon_list(text: str) -> tuple[float, ...]:
    """``--epsilons``: a comma list of distinct positive numbers, in ascending order."""
    try:
        values = [float(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a comma list of numbers (got {text!r})"
        ) from None
    if not values or not all(v > 0 and v < float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"every epsilon must be a positive number (got {text!r})")
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"an epsilon appears twice (got {text!r})")
    return tuple(sorted(values))


def method_list(text: str) -> tuple[str, ...]:
    """``--methods``: a comma list of ``DP_METHODS``, each once, kept in ``DP_METHODS`` order."""
    chosen = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [m for m in chosen if m not in DP_METHODS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(
            f"methods are a comma list of {', '.join(DP_METHODS)} (got {text!r})"
        )
    return tuple(m for m in DP_METHODS if m in chosen)


def network_list(text: str) -> tuple[str, ...]:
    """``--networks``: a comma list of bundled networks, each once."""
    chosen = tuple(p.strip() for p in text.split(",") if p.strip())
    if not chosen or not set(chosen) <= set(NETWORKS) or len(set(chosen)) < len(chosen):
        known = ", ".join(NETWORKS)
        raise argparse.ArgumentTypeError(f"distinct networks of: {known} (got {text!r})")
    return chosen


def _bench_dp(args: argparse.Namespace) -> int:
    from ppbn.bench.dp import DpSettings, bench_dp, bench_dp_networks

    network, name = args.network or "asia", None
    if args.bif is not None:
        from ppbn.bn.networks import read_bif

        network, name = read_bif(args.bif)  # refused in one line, before any run
    settings = DpSettings(
        network=network, records=args.records, synthetic_records=args.synthetic_records,
        max_parents=args.max_parents, score=args.score, epsilons=args.epsilons,
        seeds=args.seeds, seed=args.seed, methods=args.methods, secure_seeds=args.secure_seeds,
        target=args.target, name=name,
    )  # fmt: skip
    quiet = args.format == "json"
    progress = None if quiet else (lambda line: print(line, flush=True))
    if args.networks:
        report = bench_dp_networks(settings, args.networks, progress, args.out, args.force)
    else:
        report = bench_dp(settings, progress, args.out, args.force)
    if quiet:
        import json

        print(json.dumps(report, indent=2))
    else:
        _print(list(report["by_network"].values()) if args.networks else [report])
    return 0


def _print(reports: list[dict]) -> None:
    from ppbn.bench.dp_report import TABLE_HEADER, dp_notes, dp_rows
    from ppbn.commands.tables import print_table

    for report in reports:
        print(
            f"ppbn bench dp: {report['network']}, {report['records']:,} records, "
            f"u = {report['max_parents']}, {report['score']}; median (IQR) over seeds; "
            f"accuracy: naive Bayes predicting {report['target']} on held-out real records"
        )
        for eps, rows in dp_rows(report).items():
            print_table(f"epsilon {eps}", rows, TABLE_HEADER)
    print("\n".join(dp_notes(reports[0])))


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    dp = bench.add_parser(
        "dp",
        help="utility of the differentially private network against epsilon, with PrivBayes",
        description="For each seed and epsilon, release a network with each method (the "
        "secure DP job, its twin, PrivBayes, MST, AIM, the exact non-private network), sample "
        "synthetic records from it, and measure them against the real records: 2-way and "
        "3-way marginal TVD, SHD, a naive Bayes classifier's accuracy on held-out real "
        "records, seconds, and the secure job's bytes. A measurement, never a test.",
    )
    which = dp.add_mutually_exclusive_group()
    which.add_argument("--network", help=f"one of: {', '.join(NETWORKS)} (default asia)")
    which.add_argument(
        "--networks",
        type=network_list,
        metavar="N,N,...",
        help="run the matrix on each of these bundled networks",
    )
    which.add_argument("--bif", metavar="FILE", help="your own network, a BIF file")
    dp.add_argument("--target", help="the variable to classify (default: largest Markov blanket)")
    dp.add_argument(
        "--records", type=positive_int, default=20000, help="records sampled (default 20000)"
    )
    dp.add_argument(
        "--synthetic-records",
        type=positive_int,
        help="records sampled from each released network (default: --records)",
    )
    dp.add_argument(
        "--max-parents", type=non_negative_int, default=2, help="parent limit u (default 2)"
    )
    dp.add_argument("--score", choices=DP_SCORES, default="exact")
    dp.add_argument(
        "--epsilons",
        type=epsilon_list,
        default="0.1,0.2,0.5,1,2,5",
        metavar="E,E,...",
        help="privacy budgets of the whole release, a comma list (default 0.1,0.2,0.5,1,2,5)",
    )
    dp.add_argument("--seeds", type=positive_int, default=5, help="data sets (default 5)")
    dp.add_argument("--seed", type=non_negative_int, default=7, help="the first seed (default 7)")
    dp.add_argument(
        "--methods",
        type=method_list,
        default=",".join(DP_METHODS),
        metavar="M,M,...",
        help=f"a comma list of {', '.join(DP_METHODS)} (default all)",
    )
    dp.add_argument(
        "--secure-seeds",
        type=non_negative_int,
        default=1,
        help="how many of the seeds run the real two-party secure job (default 1)",
    )
    dp.add_argument("--out", metavar="DIR", help="write runs.csv, report.json, tvd*.png")
    dp.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    dp.add_argument("--format", choices=("table", "json"), default="table")
    dp.set_defaults(func=_bench_dp)
