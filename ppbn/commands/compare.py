"""``ppbn compare``: the secure and the PRAM path side by side (see ppbn.lab.compare)."""

from __future__ import annotations

import argparse
import sys

from ppbn.bn.constants import DEFAULT_TAU, SCORE_MODES
from ppbn.commands.checked_numbers import non_negative_int, positive_float, positive_int
from ppbn.protocols.constants import DEFAULT_TIMEOUT_S


def _compare(args: argparse.Namespace) -> int:
    from ppbn.data.outputs import atomic_output_dir, check_output_dir
    from ppbn.lab.compare import CompareSettings, parse_ps, run_comparison
    from ppbn.lab.compare_report import comparison_text, write_report

    settings = CompareSettings(
        network=args.network,
        records=args.records,
        ps=parse_ps(args.p),
        seed=args.seed,
        max_parents=args.max_parents,
        score=args.score,
        tau=args.tau,
        eta=args.eta,
        c_star=args.c_star,
        secure=not args.no_secure,
        timeout_s=args.timeout,
        hc=args.hc,
    )
    out = check_output_dir(args.out or f"compare-{args.network}-{args.records}", force=args.force)
    quiet = args.format == "json"
    say = (lambda _m: None) if quiet else (lambda message: print(f"  {message}", file=sys.stderr))
    with atomic_output_dir(out, force=args.force) as folder:
        comparison = run_comparison(settings, folder / "work", say)
        written = [out / path.relative_to(folder) for path in write_report(comparison, folder)]
    if quiet:
        print((out / "results.json").read_text(encoding="utf-8"))
    else:
        print(comparison_text(comparison, written))
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "compare",
        help="secure path vs PRAM path (setups I and II, with and without the extra-link fix)",
        description="Sample one data set, learn the exact reference in process, run the PRAM "
        "path (both setups, each p, plain and with eta or C*) and the secure path as jobs over "
        "local alice, bob and miner daemons, and write report.md, results.json and PNG plots: "
        "structural Hamming distance to the reference, extra and missing links, KL divergence "
        "from the generating network, wall time, bytes, gamma and K_p against p.",
    )
    parser.add_argument(
        "--network", required=True, help="bnlearn network to sample from (e.g. asia, alarm)"
    )
    parser.add_argument("--records", type=positive_int, required=True, help="number of records")
    parser.add_argument("--p", required=True, help="randomization levels, e.g. 0.1,0.2,0.3")
    parser.add_argument(
        "--out", help="report folder (default compare-NETWORK-RECORDS; new or empty, written whole)"
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    parser.add_argument("--seed", type=non_negative_int, default=7, help="data seed (default 7)")
    parser.add_argument(
        "--max-parents", type=non_negative_int, default=2, help="K2 parent limit (default 2)"
    )
    parser.add_argument(
        "--score", choices=SCORE_MODES, default="exact", help="score mode (default exact)"
    )
    parser.add_argument(
        "--tau", type=float, default=DEFAULT_TAU, help=f"K2 tolerance (default {DEFAULT_TAU:g})"
    )
    parser.add_argument(
        "--eta",
        type=float,
        help="fixed eta for the fix (Bayesian scores); default: the paper's schedule 0.99/0.98/0.97 over p",
    )
    parser.add_argument(
        "--c-star",
        type=float,
        help="fixed C* for the fix (bic); default: 4 up to p = 0.15, 8 beyond",
    )
    parser.add_argument(
        "--no-secure", action="store_true", help="skip the secure path (it is the slow one)"
    )
    parser.add_argument(
        "--hc",
        action="store_true",
        help="also hill climbing (no order): the reference, PRAM setup II for each p and the secure "
        "path, rows marked [hc] and measured against the hill-climbing reference",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"daemons' peer timeout in seconds (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_compare)
