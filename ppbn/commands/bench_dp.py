"""``ppbn bench dp``: how useful the differentially private network is, against epsilon.
The engine is ``ppbn/bench/dp.py`` (per seed and epsilon, each method's release sampled
from and measured against the real records: marginal TVDs and SHD; ``--out DIR`` keeps
runs.csv, report.json and tvd.png); this module parses the flags and prints the tables.
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


def _bench_dp(args: argparse.Namespace) -> int:
    from ppbn.bench.dp import DpSettings, bench_dp

    settings = DpSettings(
        network=args.network, records=args.records, synthetic_records=args.synthetic_records,
        max_parents=args.max_parents, score=args.score, epsilons=args.epsilons,
        seeds=args.seeds, seed=args.seed, methods=args.methods, secure_seeds=args.secure_seeds,
    )  # fmt: skip
    quiet = args.format == "json"
    progress = None if quiet else (lambda line: print(line, flush=True))
    report = bench_dp(settings, progress, args.out, args.force)
    if quiet:
        import json

        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return 0


def _print(report: dict) -> None:
    from ppbn.bench.dp import TABLE_HEADER, dp_rows
    from ppbn.commands.tables import print_table

    print(
        f"ppbn bench dp: {report['network']}, {report['records']:,} records, "
        f"u = {report['max_parents']}, {report['score']}; median (IQR) over seeds"
    )
    for eps, rows in dp_rows(report).items():
        print_table(f"epsilon {eps}", rows, TABLE_HEADER)
    if report["exact"]:
        print(
            "exact: the non-private network (the secure job's without DP), the same at every epsilon"
        )
    if "privbayes" in report["methods"]:
        print(
            "privbayes: DataSynthesizer at the epsilon it is given; under ppbn's neighbours "
            "(one record changed) its synthetic records are 1.5 epsilon-DP"
        )
    if "privbayes-matched" in report["methods"]:
        print("privbayes-matched: given epsilon / 1.5, so its synthetic records are epsilon-DP")


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    dp = bench.add_parser(
        "dp",
        help="utility of the differentially private network against epsilon, with PrivBayes",
        description="For each seed and epsilon, release a network with each method (the "
        "secure DP job, its trusted-curator twin, DataSynthesizer's PrivBayes, and the "
        "exact non-private network), sample synthetic records from it, and measure them "
        "against the real records: 2-way and 3-way marginal TVD, SHD to the true network, "
        "seconds, and the secure job's bytes. A measurement, never a test.",
    )
    dp.add_argument(
        "--network", default="asia", help=f"one of: {', '.join(NETWORKS)} (default asia)"
    )
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
    dp.add_argument("--out", metavar="DIR", help="write runs.csv, report.json and tvd.png")
    dp.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    dp.add_argument("--format", choices=("table", "json"), default="table")
    dp.set_defaults(func=_bench_dp)
