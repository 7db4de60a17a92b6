"""``ppbn schema infer`` / ``ppbn schema merge``: write the public schema from two parties'
own CSVs without either seeing the other's file (see ppbn.data.schema_tools); ``ppbn
schema bins``: one party's cut points of its continuous variables, from its own file."""

from __future__ import annotations

import argparse
import json
import sys

from ppbn.commands.data_options import add_missing_options
from ppbn.data.constants import (
    DEFAULT_BINS,
    DEFAULT_MISSING_MARKERS,
    DEFAULT_NUMERIC_LEVELS,
    ORDERS,
)


def _emit(text: str, out: str | None) -> None:
    from ppbn.data.outputs import atomic_write_text

    if out:
        atomic_write_text(out, text + "\n")
        print(f"wrote {out}", file=sys.stderr)
    else:
        print(text)


def _markers(text: str) -> tuple[str, ...]:
    """``--missing-markers NA,?``: the markers, blanks around each dropped."""
    return tuple(m.strip() for m in text.split(",") if m.strip())


def _party_name(text: str) -> tuple[str, str]:
    """``--party-name ROLE=NAME``: a display name for one party (checked in full on merge)."""
    role, sep, name = text.partition("=")
    if not sep or role.strip() not in ("alice", "bob", "miner"):
        raise argparse.ArgumentTypeError(
            f"must be ROLE=NAME with ROLE alice, bob or miner (got {text!r})"
        )
    return role.strip(), name.strip()


def _infer(args: argparse.Namespace) -> int:
    from ppbn.data.outputs import check_output_file
    from ppbn.data.schema_tools import infer_schema

    if args.out:
        check_output_file(args.out)
    inferred = infer_schema(
        args.data,
        args.owner,
        args.id,
        args.order,
        args.bins,
        args.numeric_levels,
        args.missing_markers,
    )
    for line in inferred.decisions:
        print(f"{args.data}: {line}", file=sys.stderr)
    for line in inferred.warnings:
        print(f"warning: {line}", file=sys.stderr)
    _emit(inferred.schema.to_json(), args.out)
    return 0


def _merge(args: argparse.Namespace) -> int:
    from ppbn.bn.schema import Schema
    from ppbn.data.outputs import check_output_file
    from ppbn.data.schema_tools import merge_schemas, with_party_names

    if args.out:
        check_output_file(args.out)
    first, second = Schema.load(args.first), Schema.load(args.second)
    merged = merge_schemas(first, second, (args.first, args.second), args.party)
    merged = with_party_names(merged, dict(args.party_name), "--party-name")
    _emit(json.dumps(merged, indent=2), args.out)
    fingerprint = Schema.from_dict(merged).fingerprint()
    print(
        f"public fingerprint {fingerprint} (both parties' merged schemas must show the same)",
        file=sys.stderr,
    )
    return 0


def _bins(args: argparse.Namespace) -> int:
    from ppbn.commands.data_options import missing_rule
    from ppbn.data.schema_tools import bin_report, bins_text

    report = bin_report(args.schema, args.data, args.party, missing_rule(args))
    print(json.dumps(report, indent=2) if args.format == "json" else bins_text(report))
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "schema",
        help="infer a partial schema from one party's CSV; merge two partial schemas; "
        "show a party's cut points",
        description="Write the public schema from the two parties' own files: each runs "
        "`schema infer` on its CSV, they exchange the partial schemas, and `schema merge` "
        "joins them. Only names, owners, domains and bin counts cross.",
    )
    sub = parser.add_subparsers(dest="schema_command", metavar="ACTION", required=True)
    infer = sub.add_parser(
        "infer",
        help="a partial schema of one party's variables from its own CSV",
        description="Categorical columns get their domain (first-seen or sorted order); "
        "numeric columns with many distinct values are proposed as continuous with quantile "
        "bins. One line per column (stderr) says what it was declared as; warnings name "
        "columns with missing cells (empty, or one of --missing-markers) or too many "
        "categories.",
    )
    infer.add_argument("--data", required=True, help="this party's CSV")
    infer.add_argument(
        "--owner", required=True, choices=("alice", "bob"), help="the party that holds the file"
    )
    infer.add_argument("--id", required=True, help="the record-id column")
    infer.add_argument(
        "--order",
        choices=ORDERS,
        default="first-seen",
        help="order of categorical domains (default first-seen)",
    )
    infer.add_argument(
        "--bins",
        type=int,
        default=DEFAULT_BINS,
        help=f"bins of proposed continuous variables (default {DEFAULT_BINS})",
    )
    infer.add_argument(
        "--numeric-levels",
        type=int,
        default=DEFAULT_NUMERIC_LEVELS,
        help="a numeric column with more distinct values than this is proposed as continuous, "
        f"otherwise categorical (default {DEFAULT_NUMERIC_LEVELS})",
    )
    infer.add_argument(
        "--missing-markers",
        type=_markers,
        default=DEFAULT_MISSING_MARKERS,
        metavar="LIST",
        help="comma-separated cell texts read as missing besides the empty cell; those found "
        "are written into the schema's 'missing' list ('' for none; default "
        f"{','.join(DEFAULT_MISSING_MARKERS)})",
    )
    infer.add_argument("--out", help="write the partial schema here (default: stdout)")
    infer.set_defaults(func=_infer)
    merge = sub.add_parser(
        "merge",
        help="join alice's and bob's partial schemas into the public schema",
        description="Refuses different id columns, two files of the same party, and a variable "
        "declared by both. The result holds only public fields, except the private bin fields "
        "of --party (that party's own copy).",
    )
    merge.add_argument("first", help="one party's partial schema")
    merge.add_argument("second", help="the other party's partial schema")
    merge.add_argument(
        "--party",
        choices=("alice", "bob"),
        help="keep this party's private bin fields (its unpublished edges, mgas parameters): "
        "for its own copy only (default: public fields only)",
    )
    merge.add_argument(
        "--party-name",
        type=_party_name,
        action="append",
        default=[],
        metavar="ROLE=NAME",
        help="a display name for a party (e.g. 'alice=Acme Insurance'), used in this copy's "
        "tables, pictures and logs; local, outside the fingerprint (repeatable)",
    )
    merge.add_argument("--out", help="write the merged schema here (default: stdout)")
    merge.set_defaults(func=_merge)
    bins = sub.add_parser(
        "bins",
        help="the cut points of one party's continuous variables, from its own file",
        description="Compute the cut points of the continuous variables --party owns exactly "
        "as its daemon will (from its whole own file, before any job), and the records per "
        "bin. Reads only this party's file.",
    )
    bins.add_argument("--schema", required=True, help="this party's schema.json")
    bins.add_argument("--data", required=True, help="this party's CSV or Parquet file")
    bins.add_argument(
        "--party", required=True, choices=("alice", "bob"), help="the party that holds the file"
    )
    add_missing_options(bins)
    bins.add_argument("--format", choices=("text", "json"), default="text")
    bins.set_defaults(func=_bins)
