"""``ppbn perturb randomize`` and ``reconstruct`` (the group: ppbn/commands/perturb.py).

Flags and printing only: the files and the work on them are ``ppbn.data.perturb_files``,
the estimators ``ppbn.randomized.perturb``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ppbn.randomized.constants import ADDITIVE_METHODS, CATEGORICAL_METHODS

MECHANISM_HELP = (
    "JSON mechanism file: for each column its states and PRAM kind (warner, multi_category, "
    "matrix, ...) or 'additive' with its noise, plus Zhan 'groups' (docs/user-guide.md, 'Perturbation')"
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``randomize`` and ``reconstruct`` to ``ppbn perturb``."""
    _add_randomize(sub)
    _add_reconstruct(sub)


# -- randomize ---------------------------------------------------------------------------------


def _add_randomize(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "randomize",
        help="randomize columns of a CSV with a known mechanism (PRAM, randomized response, noise)",
        description="Randomize the columns a mechanism file describes: categorical columns by "
        "their PRAM matrix (Warner randomized response, M-category, grouped, Zhan's groups of "
        "binary columns, any matrix), numeric columns by adding noise of a known distribution. "
        "Other columns are copied unchanged. The output is written atomically.",
    )
    parser.add_argument(
        "--in", dest="input", required=True, metavar="CSV", help="the original data"
    )
    parser.add_argument("--mechanism", required=True, metavar="FILE", help=MECHANISM_HELP)
    parser.add_argument(
        "--out", required=True, metavar="CSV", help="where to write the randomized CSV"
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="reproducible randomization for experiments (whoever knows the seed can undo it); "
        "default: a fresh secret key",
    )
    parser.add_argument(
        "--columns",
        metavar="A,B,...",
        help="randomize only these columns (comma list; default: every column the mechanism "
        "file describes, all of which must be in the CSV)",
    )
    parser.set_defaults(func=_randomize)


def _randomize(args: argparse.Namespace) -> int:
    from ppbn.data.perturb_files import randomize_file

    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    report = randomize_file(args.input, args.mechanism, args.out, args.seed, columns)
    done = ", ".join(f"{c} ({how})" for c, how in report["columns"].items())
    key = (
        f"seed {args.seed} (reproducible: whoever knows the seed can undo the randomization)"
        if args.seed is not None
        else "a fresh secret key"
    )
    print(f"wrote {args.out}: {report['records']:,} records; {done}; {key}")
    return 0


# -- reconstruct -------------------------------------------------------------------------------


def _add_reconstruct(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "reconstruct",
        help="estimate the original distribution of a randomized column",
        description="Estimate the distribution of the original values of a randomized column "
        "from the randomized CSV and the public mechanism file. Categorical columns: moment "
        "(unbiased, may be negative) or em (maximum likelihood). Additive columns (Wu): em on "
        "every value, binned-em or richardson-lucy on the histogram (the same estimate), or "
        "the direct fourier estimate. With --original the information loss 1/2 sum|h - h_hat| "
        "against the original values is reported.",
    )
    parser.add_argument(
        "--in", dest="input", required=True, metavar="CSV", help="the randomized data"
    )
    parser.add_argument("--mechanism", required=True, metavar="FILE", help=MECHANISM_HELP)
    parser.add_argument(
        "--column",
        action="append",
        required=True,
        metavar="C",
        help="the column to reconstruct; repeat for the joint distribution of categorical columns",
    )
    parser.add_argument(
        "--method",
        choices=sorted({*ADDITIVE_METHODS, *CATEGORICAL_METHODS}),
        help="categorical: moment or em (default em); additive: em, binned-em (default), "
        "richardson-lucy or fourier",
    )
    parser.add_argument(
        "--bins",
        default="20",
        metavar="K|E0,E1,...",
        help="additive: the number of equal bins over --range (default 20), or the bin edges",
    )
    parser.add_argument(
        "--range",
        nargs=2,
        type=float,
        metavar=("LO", "HI"),
        help="additive: the support of the original values (default: the range of the data "
        "narrowed by the noise's 0.1%% and 99.9%% quantiles)",
    )
    parser.add_argument(
        "--z-bins",
        type=int,
        metavar="M",
        help="binned-em, richardson-lucy: bins of the randomized values (default: 8 per bin of "
        "the estimate, over their range)",
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=100,
        help="em methods: at most this many iterations (default 100, as Wu's Fig. 1)",
    )
    parser.add_argument(
        "--tol",
        type=float,
        default=1e-6,
        help="em methods: stop when no bin probability moves more (default 1e-6)",
    )
    parser.add_argument(
        "--harmonics",
        type=int,
        default=12,
        help="fourier (and --start fourier): harmonics kept (default 12, Wu's Fig. 1)",
    )
    parser.add_argument(
        "--max-gain",
        type=float,
        default=10.0,
        help="fourier: cap on the inverse gain 1/|phi| (default 10)",
    )
    parser.add_argument(
        "--start",
        choices=("uniform", "fourier"),
        default="uniform",
        help="em methods: start from the uniform distribution (default) or from the Fourier "
        "estimate (Wu Sec. 3.1)",
    )
    parser.add_argument(
        "--original",
        metavar="CSV",
        help="the original data, to report the information loss and plot it",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    parser.add_argument(
        "--plot",
        metavar="PNG",
        help="plot randomized vs reconstructed (and original) distributions",
    )
    parser.set_defaults(func=_reconstruct)


def _reconstruct(args: argparse.Namespace) -> int:
    from ppbn.data.perturb_files import reconstruct_file
    from ppbn.randomized.perturb.reconstruction import ReconstructionSettings

    settings = ReconstructionSettings(
        method=args.method,
        bins=args.bins,
        value_range=tuple(args.range) if args.range else None,
        z_bins=args.z_bins,
        iterations=args.iterations,
        tol=args.tol,
        harmonics=args.harmonics,
        max_gain=args.max_gain,
        start=args.start,
    )
    result = reconstruct_file(
        args.input, args.mechanism, args.column, settings, args.original, args.plot
    )
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        _print_reconstruction(result)
    return 0


def _print_reconstruction(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ppbn.randomized.perturb.reconstruction import reconstruction_title

    print(reconstruction_title(result))
    table = Table()
    categorical = result["kind"] == "categorical"
    if categorical:
        labels = result["cells"]
    else:
        edges = result["edges"]
        labels = [f"[{a:.4g}, {b:.4g})" for a, b in zip(edges, edges[1:], strict=False)]
    series = [("randomized", result["randomized"])] if categorical else []
    series.append(("estimate", result["estimate"]))
    if "original" in result:
        series.append(("original", result["original"]))
    table.add_column("state" if categorical else "bin")
    for name, _ in series:
        table.add_column(name, justify="right")
    for k, label in enumerate(labels):
        table.add_row(label, *(f"{values[k]:.4f}" for _, values in series))
    console = Console(width=120)
    console.print(table)
    notes = []
    if "information_loss" in result:
        notes.append(f"information loss 1/2 sum|h - h_hat| = {result['information_loss']:.4f}")
    if "iterations" in result:
        state = "converged" if result["converged"] else "stopped at --iterations"
        notes.append(f"{result['iterations']} iterations ({state})")
    if result.get("fourier", {}).get("capped_harmonics"):
        notes.append(f"inverse gain capped at harmonics {result['fourier']['capped_harmonics']}")
    if "plot" in result:
        notes.append(f"plot: {result['plot']}")
    if notes:
        print("; ".join(notes))
