"""``ppbn reference``: the non-private learner on the joined data, the yardstick for every
private result."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ppbn.commands.data_options import add_missing_options, missing_rule
from ppbn.commands.learning_options import add_learning_options, parse_order, search_options
from ppbn.commands.unused_flags import refuse_unused_flags
from ppbn.errors import UserError


def _reference(args: argparse.Namespace) -> int:
    from ppbn.api.show import plot_reference
    from ppbn.bn.io import write_bif
    from ppbn.bn.learn import learn_reference, reference_document, reference_text
    from ppbn.bn.schema import Schema
    from ppbn.data.outputs import atomic_output_dir, check_output_dir, check_output_file
    from ppbn.data.party_data import load_joined_with_bins

    refuse_unused_flags(args, "reference")
    if args.out:  # before any work: a bad --out must not cost the computed result
        check_output_dir(args.out, force=args.force)
    if args.plot:
        check_output_file(args.plot, "--plot")
    data = Path(args.data)
    schema = Schema.load(str(data / "schema.json"))
    rule = missing_rule(args)
    # each party's file is discretized exactly as its daemon does (its whole own file)
    names, codes, cuts = load_joined_with_bins(
        schema,
        data / "alice.csv",
        data / "bob.csv",
        missing_rule=rule,
        intersect=args.align == "psi",
    )
    order = parse_order(args.order, names)
    states = {v.name: v.states for v in schema.variables}
    if args.max_parents < 0:
        raise UserError("--max-parents must be >= 0")
    start = time.perf_counter()
    try:
        learned = learn_reference(
            names,
            states,
            codes,
            args.max_parents,
            args.score,
            args.tau,
            order,
            args.c_star,
            args.dirichlet,
            available_case=rule == "available-case",
            ess=args.ess,
            **search_options(args),
        )
    except ValueError as exc:  # bad start DAG, lists or --ess
        raise UserError(str(exc)) from None
    network = learned.network.with_state_names(schema.state_names(cuts))  # both owners' intervals
    owners = {v.name: v.owner for v in schema.variables}
    result = reference_document(
        network,
        learned,
        order,
        owners,
        score=args.score,
        tau=args.tau,
        search=args.search,
        ess=args.ess,
        tabu=args.tabu,
        rule=rule,
        wall_s=time.perf_counter() - start,
    )
    if args.out:
        with atomic_output_dir(args.out, force=args.force) as out:
            write_bif(network, out / "network.bif")
            (out / "network.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        title = (
            f"reference ({args.search}, {args.score}, max {args.max_parents} parents) on "
            f"{data.resolve().name}"
        )
        plot_reference(result, owners, data, args.plot, title)
        print(f"wrote {args.plot}", file=sys.stderr)
    print(json.dumps(result, indent=2) if args.format == "json" else reference_text(result))
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reference",
        help="learn the network from the joined data, non-privately (the yardstick)",
        description="K2 (or hill-climbing) structure learning and parameters on the joined "
        "plaintext data of both parties. Every private result is compared with this one.",
    )
    parser.add_argument("--data", required=True, help="folder with schema.json, alice.csv, bob.csv")
    add_learning_options(parser)
    add_missing_options(parser)
    parser.add_argument(
        "--align",
        choices=("strict", "psi"),
        default="strict",
        help="strict (default): both files must hold the same record ids; psi: learn on the records "
        "whose id is in both files (what daemons run with --align psi learn on)",
    )
    parser.add_argument(
        "--out",
        help="also write network.bif and network.json to this folder (new or empty; "
        "written whole or not at all)",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw the learned network, owners coloured, edges marked against the data "
        "folder's truth.bif when it has one",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=_reference)
