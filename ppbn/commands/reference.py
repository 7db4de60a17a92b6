"""``ppbn reference``: the non-private learner on the joined data, the yardstick for every
private result."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ppbn.commands.options import (
    add_learning_options,
    add_missing_options,
    missing_rule,
    parse_order,
    search_options,
)
from ppbn.commands.unused_flags import refuse_unused_flags
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.bn.schema import Schema


def format_text(result: dict) -> str:
    lines = [f"score {result['score']}, tau {result['tau']:g}, search {result.get('search', 'k2')}"]
    if result.get("search", "k2") == "k2":
        lines.append("order: " + ", ".join(result["order"]))
        lines.append("edges in the order added:")
        lines += [f"  {i + 1:3d}. {p} -> {c}" for i, (p, c) in enumerate(result["edges"])] or [
            "  (none)"
        ]
    else:
        lines.append(f"moves in the order applied (total score {result['total_score']:.4f}):")
        lines += [
            f"  {i + 1:3d}. {m['kind']:7s} {m['edge'][0]} -> {m['edge'][1]}  {m['delta']:+.4f}"
            for i, m in enumerate(result["moves"])
        ] or ["  (none)"]
        lines.append(f"edges: {len(result['edges'])}")
    lines.append("parameters:")
    for v, spec in result["parameters"].items():
        given = f" | {', '.join(spec['parents'])}" if spec["parents"] else ""
        flag = (
            f"  [{len(spec['unobserved'])} unobserved parent configurations: uniform]"
            if spec["unobserved"]
            else ""
        )
        lines.append(f"  P({v}{given}): {len(spec['table'])} x {len(spec['states'])}{flag}")
        if len(spec["table"]) <= 4:
            for row in spec["table"]:
                lines.append("      " + "  ".join(f"{p:.4f}" for p in row))
    records = result.get("family_records")
    if records and records["rule"] == "available-case":
        lines.append(f"records per family (available-case, of {records['records']}):")
        lines += [f"  {v}: {k}" for v, k in records["families"].items()]
    return "\n".join(lines)


def _reference(args: argparse.Namespace) -> int:
    from ppbn.bn.io import network_json, write_bif
    from ppbn.bn.learn import learn_reference
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
    result = network_json(network, order, learned.search.edges, args.score, args.tau, owners)
    result["search"] = args.search
    if args.score == "bdeu":
        result["ess"] = args.ess
    if args.search == "hc":
        found = learned.search
        result["moves"] = [
            {"kind": m.move.kind, "edge": list(m.move.edge), "delta": m.delta} for m in found.moves
        ]
        result["total_score"] = found.score
        result["tabu"] = args.tabu
        result["start"] = [[p, c] for c in names for p in found.start[c]]
        result["families_scored"] = found.families_scored
    result["stats"] = {"wall_s": time.perf_counter() - start, "records": int(codes.shape[0])}
    result["family_records"] = {
        "rule": rule,
        "records": int(codes.shape[0]),
        "families": learned.family_records(),
    }
    if args.out:
        with atomic_output_dir(args.out, force=args.force) as out:
            write_bif(network, out / "network.bif")
            (out / "network.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        _plot(args, result, schema)
    print(json.dumps(result, indent=2) if args.format == "json" else format_text(result))
    return 0


def _plot(args: argparse.Namespace, result: dict, schema: Schema) -> None:
    """Draw the learned network, marked against the data set's truth.bif when it has one."""
    from ppbn.api.result import NetworkResult, load_result

    truth_file = Path(args.data) / "truth.bif"
    truth = load_result(truth_file) if truth_file.is_file() else None
    title = (
        f"reference ({args.search}, {args.score}, max {args.max_parents} parents) on "
        f"{Path(args.data).resolve().name}" + (" vs truth.bif" if truth else "")
    )
    owners = {v.name: v.owner for v in schema.variables}
    NetworkResult.from_document(result, owners, source="reference").plot(args.plot, truth, title)
    print(f"wrote {args.plot}", file=sys.stderr)


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
