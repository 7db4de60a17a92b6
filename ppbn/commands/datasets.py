"""``ppbn datasets make``: a two-party data set sampled from a reference network (one
shipped with pgmpy, or the user's own BIF file).

Top-level imports stay light (``ppbn --help`` imports every command module): the network
readers, numpy and pgmpy are imported when the command runs.
"""

from __future__ import annotations

import argparse

from ppbn.bn.networks import NETWORKS  # light: numpy and pgmpy load inside its functions
from ppbn.commands.checked_numbers import non_negative_int, positive_int
from ppbn.errors import UserError


def _make(args: argparse.Namespace) -> int:
    from ppbn.data.datasets import make_dataset

    if not 0.0 <= args.missing_rate < 1.0:  # before sampling: a bad rate must not cost the data set
        raise UserError(f"--missing-rate must be in [0, 1), not {args.missing_rate:g}")
    if args.bif is not None:
        from ppbn.bn.networks import read_bif

        network, name = read_bif(args.bif)  # refused here, before any output is made
    else:
        network, name = args.network, args.network
    made = make_dataset(
        network,
        args.records,
        args.seed,
        args.out,
        args.split,
        force=args.force,
        continuous=args.continuous,
        bins_method=args.bins_method,
        overlap=args.overlap,
        missing_rate=args.missing_rate,
        name=name,
    )
    blanked = made.blanked
    alice = len(made.schema.owned_by("alice"))
    bob = len(made.schema.owned_by("bob"))
    shared = "" if args.overlap == 1 else f" each, {len(made.ids)} of them at both parties"
    numeric = [v.name for v in made.schema.continuous()]
    print(
        f"wrote {args.out}/schema.json, alice.csv ({alice} variables), bob.csv ({bob} variables), "
        f"truth.bif: {args.records} records{shared} from {args.network or args.bif}, "
        f"seed {args.seed}"
        + (f"; continuous ({args.bins_method} bins): {', '.join(numeric)}" if numeric else "")
        + (f"; {blanked:,} cells emptied at random" if blanked else "")
    )
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "datasets", help="make two-party data sets from reference networks"
    )
    sub = parser.add_subparsers(dest="datasets_command", metavar="ACTION", required=True)
    make = sub.add_parser(
        "make",
        help="sample records from a network (shipped with pgmpy, or a BIF file) and split its "
        "variables",
        description="Sample records from a bnlearn network shipped with pgmpy (--network) or from "
        "your own BIF file (--bif), shuffle them with the seed, give each an id, split the "
        "variables between alice and bob, and write schema.json, alice.csv, bob.csv and the true "
        "network truth.bif.",
    )
    source = make.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--network", help=f"a network shipped with pgmpy, one of: {', '.join(NETWORKS)}"
    )
    source.add_argument(
        "--bif",
        metavar="FILE",
        help="instead of --network: sample from your own discrete Bayesian network in this BIF "
        "file (read with pgmpy's BIF reader and refused unless its check_model passes: no "
        "cycle, every CPT row sums to 1); variable names of letters, digits, '_', '-', '.', "
        'states without , ; ( ) { } | " or comments, at least two states each',
    )
    make.add_argument(
        "--records", type=positive_int, required=True, help="number of records to sample"
    )
    make.add_argument("--seed", type=non_negative_int, default=7, help="random seed (default 7)")
    make.add_argument(
        "--out",
        required=True,
        help="output folder (created; an existing non-empty folder only with --force)",
    )
    make.add_argument("--force", action="store_true", help="replace an existing --out folder")
    make.add_argument(
        "--split",
        default="alternate",
        help="alternate (default: variables in topological order alternate alice, bob), halves "
        "(first half alice), or a JSON file mapping each variable to alice or bob",
    )
    make.add_argument(
        "--overlap",
        type=float,
        default=1.0,
        help="share of each party's records the other party holds too (default 1: the same "
        "records at both); below 1 each party also holds records of its own, for --align psi",
    )
    make.add_argument(
        "--continuous",
        metavar="N|NAMES",
        help="write numeric values for N variables (taken alternately from alice's and bob's) or "
        "for a comma list of variables: state k becomes a value uniform in its own interval, and "
        "the schema declares the variable continuous with as many bins as it had states",
    )
    make.add_argument(
        "--bins-method",
        choices=("quantile", "equal-width", "edges"),
        default="quantile",
        help="bins declared for --continuous variables (default quantile; edges: the true cut "
        "points, as the owner's private edges, recover the states exactly)",
    )
    make.add_argument(
        "--missing-rate",
        type=float,
        default=0.0,
        metavar="R",
        help="empty each variable cell with probability R (missing completely at random), to try "
        "--missing available-case (default 0)",
    )
    make.set_defaults(func=_make)
