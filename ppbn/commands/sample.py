"""``ppbn sample``: a synthetic joint table from a released network (its structure and
CPTs), by forward sampling; a DP release's guarantee carries over (post-processing)."""

from __future__ import annotations

import argparse
import sys

from ppbn.commands.checked_numbers import non_negative_int, positive_int

FORMATS = ("csv", "parquet")  # ppbn.api.sample.FORMATS (not imported here: start-up)
MAX_CELLS = 100_000_000  # ppbn.api.result.MAX_CELLS, likewise


def _sample(args: argparse.Namespace) -> int:
    from ppbn.api.result import load_result
    from ppbn.api.sample import (
        check_output,
        check_size,
        guarantee,
        sample_columns,
        sample_messages,
        write_table,
    )

    target = check_output(args.out, args.force, args.format)  # before any work
    network = load_result(args.result, args.schema)
    check_size(network, args.records, "--records")
    columns = sample_columns(network, args.schema)
    guarantee(network)  # a malformed privacy object is refused before sampling
    frame = network.sample(args.records, args.seed, columns=columns)
    write_table(frame, *target)
    path, file_format, _ = target
    done, warning = sample_messages(network, path, file_format, args.records, frame.shape[1])
    print(done)
    if warning:
        print(warning, file=sys.stderr)
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "sample",
        help="sample a synthetic joint table from a learned network (DP releases stay DP)",
        description="Forward-sample records from a released network (a job folder, its "
        "network.json, or a BIF file): one column per variable, values the state names. The "
        "records are computed from the network alone, so a DP release's (epsilon, delta) "
        "guarantee carries over; an exact release gives none. Needs every CPT: a party that "
        "was not shown some is refused.",
    )
    parser.add_argument(
        "result", metavar="RESULT", help="network.json, a job folder, or a BIF file"
    )
    parser.add_argument(
        "--records",
        type=positive_int,
        required=True,
        metavar="N",
        help=f"how many records; at most {MAX_CELLS:,} cells (records x variables), as the "
        "table is built whole in memory before it is written: sample more as several files "
        "with different --seed",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the table to write (written whole or not at all; an existing file only with --force)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        help="sampling seed (the same seed gives the same file; default: fresh)",
    )
    parser.add_argument(
        "--schema",
        metavar="FILE",
        help="schema.json of the network's variables: the columns in its order (default: "
        "the file's order)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="csv or parquet (default: parquet for a .parquet or .pq --out, else csv; "
        "parquet needs pyarrow)",
    )
    parser.set_defaults(func=_sample)
