"""``ppbn show``: a learned network for a person: every edge, the parents and owner of each
variable, CPTs on request, the differences from a reference network, and a picture."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import itertools
import json
import sys
from typing import TYPE_CHECKING, Any

from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.api.result import Cpt, NetworkResult


def _owners(view: NetworkResult, schema_path: str | None) -> dict[str, str] | None:
    """The result's own owners, else the schema's (for the variables the network has)."""
    if view.owners or not schema_path:
        return dict(view.owners) or None
    from ppbn.bn.schema import Schema

    schema = Schema.load(schema_path)
    owners = {v.name: v.owner for v in schema.variables if v.name in view.parents}
    if not owners:
        raise UserError(f"{schema_path}: none of its variables is in {view.source}")
    return owners


def _compare(view: NetworkResult, reference: NetworkResult) -> dict[str, Any]:
    from ppbn.bn.model import structure_diff

    ours, theirs = set(view.variables), set(reference.variables)
    if ours != theirs:
        only = sorted(ours - theirs) or sorted(theirs - ours)
        where = view.source if only[0] in ours else reference.source
        raise UserError(
            f"{reference.source}: not a network of the same variables as {view.source} "
            f"({only[0]!r} is only in {where})"
        )
    return {"source": reference.source, **structure_diff(view.parents, reference.parents)}


def _cpt(view: NetworkResult, variable: str) -> Cpt:
    if variable not in view.parents:
        close = difflib.get_close_matches(variable, view.variables, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserError(f"--cpt {variable}: {view.source} has no such variable{hint}")
    spec = view.cpts.get(variable)
    if spec is None:
        raise UserError(f"{view.source}: the CPT of {variable!r} is withheld from this party")
    return spec


def _configurations(view: NetworkResult, parents: list[str], rows: int) -> tuple[list[str], list]:
    """Column heads and one tuple of parent states per CPT row (first parent slowest);
    row numbers where a parent's states are withheld."""
    known = [view.cpts.get(p) for p in parents]
    if all(known):
        configs = list(itertools.product(*(spec.states for spec in known)))
        if len(configs) == rows:
            return list(parents), configs
    return ["row"], [(str(j),) for j in range(rows)]


def format_cpt(view: NetworkResult, variable: str, spec: Cpt) -> list[str]:
    """The CPT as a table: one row per parent configuration (first parent slowest)."""
    parents, states, table = list(spec.parents), spec.states, spec.table
    given = f" | {', '.join(parents)}" if parents else ""
    lines = [f"P({variable}{given}): {len(table)} x {len(states)}"]
    heads, configs = _configurations(view, parents, len(table)) if parents else ([], [()])
    unobserved = set(spec.unobserved)
    widths = [max(len(h), *(len(c[i]) for c in configs)) for i, h in enumerate(heads)]
    cols = [max(len(s), 6) for s in states]

    def line(left: tuple[str, ...], right: list[str]) -> str:
        given = "  ".join(t.ljust(w) for t, w in zip(left, widths, strict=True))
        cells = "  ".join(t.rjust(w) for t, w in zip(right, cols, strict=True))
        return "  " + (given + " | " if heads else "") + cells

    lines.append(line(tuple(heads), list(states)))
    for j, (config, row) in enumerate(zip(configs, table, strict=True)):
        flag = "  (no records: uniform)" if j in unobserved else ""
        lines.append(line(config, [f"{p:.4f}" for p in row]) + flag)
    return lines


def format_text(
    view: NetworkResult,
    owners: dict[str, str] | None,
    diff: dict[str, Any] | None,
    cpts: dict[str, Cpt],
) -> str:
    """Every edge, never cut; parents and owner of each variable; the comparison; CPTs."""
    doc = view.document
    about = [f"{len(view.variables)} variables", f"{len(view.edges)} edges"]
    if doc.get("score"):
        about.append(f"score {doc['score']}, search {doc.get('search', 'k2')}")
    lines = [f"{view.source}: {', '.join(about)}"]
    if owners:
        lines.append("owners:")
        for party in sorted(set(owners.values())):
            mine = [v for v in view.variables if owners.get(v) == party]
            lines.append(f"  {party} ({len(mine)}): {', '.join(mine)}")
    marks: dict[tuple[str, str], str] = {}
    if diff:
        marks.update({tuple(e): "extra" for e in diff["extra_links"]})
        marks.update(
            {tuple(e): f"reversed (reference: {e[1]} -> {e[0]})" for e in diff["reversed_links"]}
        )
    added = " in the order added" if "edges" in doc and "score" in doc else ""
    lines.append(f"edges ({len(view.edges)}{added}):")
    width = len(str(len(view.edges)))
    for i, (p, c) in enumerate(view.edges, 1):
        mark = f"   [{marks[(p, c)]}]" if (p, c) in marks else ""
        lines.append(f"  {i:{width}d}. {p} -> {c}{mark}")
    if not view.edges:
        lines.append("  (none)")
    lines.append("parents:")
    name_width = max(len(v) for v in view.variables)
    for v in view.variables:
        owner = f" [{owners[v]}]" if owners and v in owners else ""
        ps = ", ".join(view.parents[v]) or "(none)"
        lines.append(f"  {(v + owner).ljust(name_width + 8)} {ps}")
    if diff:
        lines.append(
            f"compared with {diff['source']}: structural Hamming distance {diff['shd']} "
            f"({diff['extra']} extra, {diff['missing']} missing, {diff['reversed']} reversed)"
        )
        for p, c in diff["missing_links"]:
            lines.append(f"  missing: {p} -> {c}")
    for v, spec in cpts.items():
        lines += format_cpt(view, v, spec)
    return "\n".join(lines)


def _show(args: argparse.Namespace) -> int:
    from ppbn.api.result import load_result

    view = load_result(args.result)
    owners = _owners(view, args.schema)
    reference = load_result(args.reference) if args.reference else None
    diff = _compare(view, reference) if reference else None
    cpts = {v: _cpt(view, v) for v in args.cpt or ()}
    if args.plot:
        view = dataclasses.replace(view, owners=owners or {})
        view.plot(args.plot, reference, view.source)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.format == "json":
        out: dict[str, Any] = {
            "source": view.source,
            "variables": list(view.variables),
            "owners": owners,
            "edges": [list(e) for e in view.edges],
            "parents": {v: list(ps) for v, ps in view.parents.items()},
        }
        if diff:
            out["reference"] = diff
        if cpts:
            out["cpts"] = {v: dataclasses.asdict(spec) for v, spec in cpts.items()}
        print(json.dumps(out, indent=2))
    else:
        print(format_text(view, owners, diff, cpts))
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
