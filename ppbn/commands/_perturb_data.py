"""``ppbn perturb randomize``, ``reconstruct`` and ``mgas-example`` (see ppbn/commands/perturb.py).

Argument plumbing only: the mechanisms and estimators are ``ppbn.randomized.perturb``,
the files ``ppbn.data.perturb_files``.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ppbn.errors import UserError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from ppbn.randomized.perturb.mechanisms import Mechanisms

ADDITIVE_METHODS = ("em", "binned-em", "richardson-lucy", "fourier")
CATEGORICAL_METHODS = ("moment", "em")

MECHANISM_HELP = (
    "JSON mechanism file: for each column its states and PRAM kind (warner, multi_category, "
    "matrix, ...) or 'additive' with its noise, plus Zhan 'groups' (docs/user-guide.md, 'Perturbation')"
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to ``ppbn perturb``."""
    _add_randomize(sub)
    _add_reconstruct(sub)
    _add_mgas_example(sub)


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
    from ppbn.data.outputs import check_output_file
    from ppbn.data.perturb_files import column_values, read_mechanisms, read_table, write_randomized
    from ppbn.randomized.pram.operators import RandomizationError, RandomSource

    check_output_file(args.out)
    mechanisms = read_mechanisms(args.mechanism)
    frame = read_table(args.input)
    if args.columns:
        columns = [c.strip() for c in args.columns.split(",") if c.strip()]
        for c in columns:
            if c not in mechanisms.columns:
                raise UserError(f"--columns: {c!r} has no mechanism in {args.mechanism}")
    else:
        columns = list(mechanisms.columns)
    values = {c: column_values(args.input, frame, c, mechanisms) for c in columns}
    source = RandomSource() if args.seed is None else RandomSource.from_seed(args.seed)
    try:
        randomized = mechanisms.randomize(values, source)
    except RandomizationError as exc:
        raise UserError(f"--columns: {exc}") from None
    write_randomized(args.out, frame, randomized, mechanisms)
    done = ", ".join(f"{c} ({mechanisms.describe(c)})" for c in columns)
    key = (
        f"seed {args.seed} (reproducible: whoever knows the seed can undo the randomization)"
        if args.seed is not None
        else "a fresh secret key"
    )
    print(f"wrote {args.out}: {len(frame):,} records; {done}; {key}")
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
    from ppbn.data.outputs import check_output_file
    from ppbn.data.perturb_files import read_mechanisms, read_table

    if args.plot:
        check_output_file(args.plot, "--plot")
    mechanisms = read_mechanisms(args.mechanism)
    columns = list(dict.fromkeys(args.column))
    for c in columns:
        if c not in mechanisms.columns:
            raise UserError(f"--column {c!r}: no mechanism for it in {args.mechanism}")
    frame = read_table(args.input)
    additive = [c for c in columns if mechanisms.is_additive(c)]
    if additive and len(columns) > 1:
        raise UserError(f"--column {additive[0]!r} is additive: reconstruct it on its own")
    if additive:
        from ppbn.randomized.pram.operators import RandomizationError

        try:
            result = _reconstruct_additive(args, mechanisms, frame, columns[0])
        except RandomizationError as exc:  # the estimators' errors: name the column and files
            raise UserError(
                f"{args.input}, column {columns[0]!r} ({args.mechanism}): {exc}"
            ) from None
    else:
        result = _reconstruct_categorical(args, mechanisms, frame, columns)
    if args.plot:
        result["plot"] = args.plot
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        _print_reconstruction(result)
    return 0


def _reconstruct_categorical(
    args: argparse.Namespace, mechanisms: Mechanisms, frame: pd.DataFrame, columns: list[str]
) -> dict[str, Any]:
    import numpy as np

    from ppbn.data.perturb_files import column_values, plot_categorical, read_table
    from ppbn.randomized.perturb.additive import information_loss
    from ppbn.randomized.perturb.categorical import reconstruct
    from ppbn.randomized.pram.estimators import count_table

    method = args.method or "em"
    if method not in CATEGORICAL_METHODS:
        raise UserError(f"--method {method}: {columns[0]!r} is categorical (use moment or em)")
    needed = list(dict.fromkeys(p for c in columns for p in mechanisms.partners(c)))
    codes = np.column_stack([column_values(args.input, frame, c, mechanisms) for c in needed])
    scheme = mechanisms.scheme.restricted(needed)
    estimate = reconstruct(codes, needed, scheme, method, of=columns)
    received = estimate.randomized.reshape(-1) / estimate.records
    fractions = estimate.fractions.reshape(-1)
    cells = _cells([mechanisms.states[c] for c in columns], len(columns) > 1, columns)
    result: dict[str, Any] = {
        "columns": columns,
        "kind": "categorical",
        "method": method,
        "mechanism": {c: mechanisms.describe(c) for c in columns},
        "records": estimate.records,
        "cells": cells,
        "randomized": received.tolist(),
        "estimate": fractions.tolist(),
        "estimated_counts": estimate.counts.reshape(-1).tolist(),
    }
    original = None
    if args.original:
        table = read_table(args.original)
        orig = np.column_stack(
            [column_values(args.original, table, c, mechanisms) for c in columns]
        )
        cards = tuple(len(mechanisms.states[c]) for c in columns)
        original = count_table(orig, cards).reshape(-1) / len(orig)
        result["original"] = original.tolist()
        result["information_loss"] = information_loss(original, fractions)
    if args.plot:
        plot_categorical(args.plot, _title(result), cells, received, fractions, original)
    return result


def _cells(states: list[tuple[str, ...]], joint: bool, columns: list[str]) -> list[str]:
    import numpy as np

    if not joint:
        return list(states[0])
    grids = np.array(np.meshgrid(*[np.arange(len(s)) for s in states], indexing="ij"))
    combos = grids.reshape(len(states), -1).T
    return [
        ", ".join(
            f"{c}={states[j][k]}" for j, (c, k) in enumerate(zip(columns, combo, strict=True))
        )
        for combo in combos
    ]


def _bins(text: str) -> int | np.ndarray:
    import numpy as np

    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        if len(parts) == 1:
            count = int(parts[0])
            if count < 1:
                raise ValueError
            return count
        return np.array([float(p) for p in parts])
    except ValueError:
        raise UserError(
            f"--bins {text!r}: give a positive number of bins or two or more increasing edges"
        ) from None


def _reconstruct_additive(
    args: argparse.Namespace, mechanisms: Mechanisms, frame: pd.DataFrame, column: str
) -> dict[str, Any]:
    import numpy as np

    from ppbn.data.perturb_files import column_values, plot_additive, read_table
    from ppbn.randomized.perturb import additive

    method = args.method or "binned-em"
    if method not in ADDITIVE_METHODS:
        raise UserError(
            f"--method {method}: {column!r} is additive (use em, binned-em, richardson-lucy or fourier)"
        )
    if args.iterations < 1:
        raise UserError(f"--iterations must be at least 1, got {args.iterations}")
    noise = mechanisms.noise[column]
    z = column_values(args.input, frame, column, mechanisms)
    bins = _bins(args.bins)
    if isinstance(bins, int):
        lo, hi = args.range if args.range else additive.default_range(z, noise)
        edges = additive.uniform_edges(lo, hi, bins)
    else:
        if args.range:
            raise UserError(
                "give either --range with a number of --bins, or the bin edges, not both"
            )
        edges = additive.check_edges(bins)
    z_edges = None
    if args.z_bins is not None:
        if args.z_bins < 1:
            raise UserError(f"--z-bins must be at least 1, got {args.z_bins}")
        z_edges = np.linspace(z.min(), z.max(), args.z_bins + 1)
    result: dict[str, Any] = {
        "columns": [column],
        "kind": "additive",
        "method": method,
        "mechanism": {column: mechanisms.describe(column)},
        "records": len(z),
    }
    fourier = None
    if method == "fourier" or args.start == "fourier":
        fourier = additive.fourier_estimate(
            z, noise, edges[0], edges[-1], harmonics=args.harmonics, max_gain=args.max_gain
        )
        result["fourier"] = {
            "harmonics": args.harmonics,
            "max_gain": args.max_gain,
            "capped_harmonics": list(fourier.capped),
        }
    if method == "fourier":
        estimate = additive.Reconstruction("fourier", edges, fourier.bin_probabilities(edges))
    else:
        start = fourier.bin_probabilities(edges) if fourier is not None else None
        options = {"max_iter": args.iterations, "tol": args.tol, "start": start}
        if method == "em":
            estimate = additive.em_individual(z, noise, edges, **options)
        else:
            run = (
                additive.binned_em
                if method == "binned-em"
                else additive.richardson_lucy_reconstruction
            )
            z_edges = additive.z_histogram_edges(z, edges) if z_edges is None else z_edges
            estimate = run(z, noise, edges, z_edges=z_edges, **options)
            result["z_bins"] = len(z_edges) - 1
        result.update(
            {
                "start": args.start,
                "iterations": estimate.iterations,
                "converged": estimate.converged,
            }
        )
    result.update(
        {
            "edges": edges.tolist(),
            "estimate": estimate.probabilities.tolist(),
            "density": estimate.density.tolist(),
        }
    )
    original = None
    if args.original:
        original = column_values(args.original, read_table(args.original), column, mechanisms)
        truth = additive.histogram(original, edges)
        outside = int(np.sum((original < edges[0]) | (original > edges[-1])))
        result.update(
            {
                "original": truth.tolist(),
                "original_outside_range": outside,
                "information_loss": additive.information_loss(truth, estimate.probabilities),
            }
        )
    if args.plot:
        plot_additive(args.plot, _title(result), z, edges, estimate.density, original)
    return result


def _title(result: dict[str, Any]) -> str:
    loss = result.get("information_loss")
    tail = f", information loss {loss:.4f}" if loss is not None else ""
    mechanism = "; ".join(dict.fromkeys(result["mechanism"].values()))
    return (
        f"{', '.join(result['columns'])} ({mechanism}): {result['records']:,} records, "
        f"{result['method']}{tail}"
    )


def _print_reconstruction(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    print(_title(result))
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


# -- mgas-example ------------------------------------------------------------------------------


def _add_mgas_example(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "mgas-example",
        help="reproduce the dissertation's two-triangle MGAS example (Ma 2006, Sec. 2.5)",
        description="100,000 samples of two adjacent triangles, discretized by MGAS (1,500 "
        "records and granularity 0.25 per group), each group kept with probability 0.3 and "
        "otherwise moved to any other group, group counts estimated by moment and EM. Reports "
        "the group count (the text: 39), the information loss against its prediction, and the "
        "integral of |f - f_hat| with and without the randomization. Takes seconds per seed.",
    )
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--seeds", type=int, default=1, help="number of seeds to run (default 1)")
    parser.add_argument("--records", type=int, default=100_000, help="samples (default 100,000)")
    parser.add_argument(
        "--keep",
        type=float,
        default=0.3,
        help="probability a group is kept (default 0.3, the text's p)",
    )
    parser.add_argument(
        "--width",
        type=float,
        default=12.0,
        help="each triangle's width (default 12; the text's figure is lost)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    parser.add_argument("--plot", metavar="PNG", help="Fig. 2.3 for the first seed")
    parser.set_defaults(func=_mgas_example)


def _mgas_example(args: argparse.Namespace) -> int:
    import numpy as np

    from ppbn.data.outputs import check_output_file
    from ppbn.data.perturb_files import plot_mgas
    from ppbn.lab.mgas_example import mgas_two_triangle, two_triangle_density

    if args.seeds < 1 or args.records < 2 or not (0 < args.keep <= 1) or not args.width > 0:
        raise UserError("--seeds >= 1, --records >= 2, 0 < --keep <= 1 and --width > 0 are needed")
    if args.plot:
        check_output_file(args.plot, "--plot")
    runs = []
    for seed in range(args.seed, args.seed + args.seeds):
        run = mgas_two_triangle(seed, n=args.records, keep=args.keep, width=args.width)
        runs.append(run)
        if args.plot and len(runs) == 1:
            grid = np.linspace(0, 2 * args.width, 2001)
            n = run.original.sum()
            plot_mgas(
                args.plot,
                f"two triangles, {args.records:,} samples, MGAS: {run.groups} groups "
                f"(text: 39), kept with p = {args.keep:g}",
                grid,
                two_triangle_density(grid, args.width),
                run.edges,
                run.original / n / np.diff(run.edges),
                run.em / n / np.diff(run.edges),
            )
    rows = [run.summary() for run in runs]
    if args.format == "json":
        print(json.dumps({"runs": rows, "plot": args.plot}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"MGAS two-triangle example: {args.records:,} samples, width {args.width:g}, "
        f"kept with {args.keep:g}"
    )
    for name in ("seed", "groups", "loss moment", "loss EM", "loss predicted", "L1 MGAS", "L1 EM"):
        table.add_column(name, justify="right")
    for r in rows:
        table.add_row(
            str(r["seed"]),
            str(r["groups"]),
            *(
                f"{r[k]:.4f}"
                for k in (
                    "information_loss_moment",
                    "information_loss_em",
                    "information_loss_predicted",
                    "l1_discretized",
                    "l1_reconstructed_em",
                )
            ),
        )
    Console(width=120).print(table)
    groups = [r["groups"] for r in rows]
    print(
        f"groups: {min(groups)}-{max(groups)}, mean {sum(groups) / len(groups):.1f} (text: 39); "
        f"loss = 1/2 sum|h - h_hat| on the groups; L1 = integral |f - f_hat| (Sec. 3.2.1)"
        + (f"; plot: {args.plot}" if args.plot else "")
    )
    return 0
