"""``ppbn show``: a learned network for a person: every edge, the parents and owner of each
variable, CPTs on request, the differences from a reference network, and a picture."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys


def _show(args: argparse.Namespace) -> int:
    from ppbn.api.result import load_result
    from ppbn.api.show import (
        network_summary,
        network_text,
        reference_diff,
        result_owners,
        shown_cpt,
    )

    view = load_result(args.result)
    owners = result_owners(view, args.schema)
    reference = load_result(args.reference) if args.reference else None
    diff = reference_diff(view, reference) if reference else None
    cpts = {v: shown_cpt(view, v) for v in args.cpt or ()}
    if args.plot:
        view = dataclasses.replace(view, owners=owners or {})
        view.plot(args.plot, reference, view.source)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(network_summary(view, owners, diff, cpts), indent=2))
    else:
        print(network_text(view, owners, diff, cpts))
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "show",
        help="print (and draw) a learned network: edges, parents, owners, CPTs, differences",
        description="Read a network.json (or a job folder holding one, or a BIF file) and print "
        "every edge, each variable's parents and owner, and CPTs on request; --reference marks "
        "the edges that differ from another network and prints the structural Hamming "
        "distance; --plot draws it.",
    )
    parser.add_argument(
        "result", metavar="RESULT", help="network.json, a job folder, or a BIF file"
    )
    parser.add_argument(
        "--cpt", action="append", metavar="VAR", help="also print the CPT of VAR (repeatable)"
    )
    parser.add_argument("--plot", metavar="FILE.png", help="draw the network into this PNG")
    parser.add_argument(
        "--reference",
        metavar="FILE",
        help="compare with this network (a BIF such as a data set's truth.bif, or a network.json)",
    )
    parser.add_argument(
        "--schema", metavar="FILE", help="schema.json giving the owners when the result has none"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=_show)
