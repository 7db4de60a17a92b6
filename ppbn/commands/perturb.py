"""``ppbn perturb``: randomize data with a known mechanism, reconstruct distributions, and
learn from randomized data. ``randomize`` and ``reconstruct`` are in perturb_data.py,
``learn`` in perturb_learn.py; the MGAS example is here."""

from __future__ import annotations

import argparse
import json
import sys

from ppbn.commands import perturb_data, perturb_learn


def register(commands, bench) -> None:
    parser = commands.add_parser(
        "perturb",
        help="randomize a CSV with a known mechanism, reconstruct distributions, learn from randomized data",
    )
    sub = parser.add_subparsers(dest="perturb_command", metavar="WHAT")
    parser.set_defaults(func=lambda _args: _missing_subcommand(parser))
    perturb_data.add_parsers(sub)
    _add_mgas_example(sub)
    perturb_learn.add_parsers(sub)


def _missing_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


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
    from ppbn.lab.mgas_example import run_mgas_example

    report = run_mgas_example(args.seed, args.seeds, args.records, args.keep, args.width, args.plot)
    if args.format == "json":
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"MGAS two-triangle example: {args.records:,} samples, width {args.width:g}, "
        f"kept with {args.keep:g}"
    )
    for name in ("seed", "groups", "loss moment", "loss EM", "loss predicted", "L1 MGAS", "L1 EM"):
        table.add_column(name, justify="right")
    for r in report["runs"]:
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
    groups = [r["groups"] for r in report["runs"]]
    print(
        f"groups: {min(groups)}-{max(groups)}, mean {sum(groups) / len(groups):.1f} (text: 39); "
        f"loss = 1/2 sum|h - h_hat| on the groups; L1 = integral |f - f_hat| (Sec. 3.2.1)"
        + (f"; plot: {args.plot}" if args.plot else "")
    )
    return 0
