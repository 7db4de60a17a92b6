"""What a ``NetworkResult`` says about itself for a person (``ppbn show``): the owners of its
variables, a CPT's rows, the differences from a reference network, as text or as JSON.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from pathlib import Path
from typing import Any

from ppbn.api.result import Cpt, NetworkResult, load_result
from ppbn.errors import UserError


def result_owners(result: NetworkResult, schema_path: str | None) -> dict[str, str] | None:
    """The result's own owners, else the schema's (for the variables the network has)."""
    if result.owners or not schema_path:
        return dict(result.owners) or None
    from ppbn.bn.schema import Schema

    schema = Schema.load(schema_path)
    owners = {v.name: v.owner for v in schema.variables if v.name in result.parents}
    if not owners:
        raise UserError(f"{schema_path}: none of its variables is in {result.source}")
    return owners


def reference_diff(result: NetworkResult, reference: NetworkResult) -> dict[str, Any]:
    """The structural differences from ``reference`` (a network of the same variables)."""
    from ppbn.bn.model import structure_diff

    ours, theirs = set(result.variables), set(reference.variables)
    if ours != theirs:
        only = sorted(ours - theirs) or sorted(theirs - ours)
        where = result.source if only[0] in ours else reference.source
        raise UserError(
            f"{reference.source}: not a network of the same variables as {result.source} "
            f"({only[0]!r} is only in {where})"
        )
    return {"source": reference.source, **structure_diff(result.parents, reference.parents)}


def shown_cpt(result: NetworkResult, variable: str) -> Cpt:
    """The CPT of ``variable`` (``--cpt``); one line naming a misspelt or withheld one."""
    if variable not in result.parents:
        close = difflib.get_close_matches(variable, result.variables, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserError(f"--cpt {variable}: {result.source} has no such variable{hint}")
    spec = result.cpts.get(variable)
    if spec is None:
        raise UserError(f"{result.source}: the CPT of {variable!r} is withheld from this party")
    return spec


def _configurations(
    result: NetworkResult, parents: list[str], rows: int
) -> tuple[list[str], list[tuple[str, ...]]]:
    """Column heads and one tuple of parent states per CPT row (first parent slowest);
    row numbers where a parent's states are withheld."""
    known = [result.cpts.get(p) for p in parents]
    if all(known):
        configs = list(itertools.product(*(spec.states for spec in known)))
        if len(configs) == rows:
            return list(parents), configs
    return ["row"], [(str(j),) for j in range(rows)]


def cpt_lines(result: NetworkResult, variable: str, spec: Cpt) -> list[str]:
    """The CPT as a table: one row per parent configuration (first parent slowest)."""
    parents, states, table = list(spec.parents), spec.states, spec.table
    given = f" | {', '.join(parents)}" if parents else ""
    lines = [f"P({variable}{given}): {len(table)} x {len(states)}"]
    heads, configs = _configurations(result, parents, len(table)) if parents else ([], [()])
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


def network_text(
    result: NetworkResult,
    owners: dict[str, str] | None,
    diff: dict[str, Any] | None,
    cpts: dict[str, Cpt],
) -> str:
    """Every edge, never cut; parents and owner of each variable; the comparison; CPTs."""
    from ppbn.bn.schema import party_label

    doc = result.document
    about = [f"{len(result.variables)} variables", f"{len(result.edges)} edges"]
    if doc.get("score"):
        about.append(f"score {doc['score']}, search {doc.get('search', 'k2')}")
    lines = [f"{result.source}: {', '.join(about)}"]
    if owners:
        lines.append("owners:")
        for party in sorted(set(owners.values())):
            mine = [v for v in result.variables if owners.get(v) == party]
            label = party_label(party, result.party_names)
            lines.append(f"  {label} ({len(mine)}): {', '.join(mine)}")
    marks: dict[tuple[str, str], str] = {}
    if diff:
        marks.update({tuple(e): "extra" for e in diff["extra_links"]})
        marks.update(
            {tuple(e): f"reversed (reference: {e[1]} -> {e[0]})" for e in diff["reversed_links"]}
        )
    added = " in the order added" if "edges" in doc and "score" in doc else ""
    lines.append(f"edges ({len(result.edges)}{added}):")
    width = len(str(len(result.edges)))
    for i, (p, c) in enumerate(result.edges, 1):
        mark = f"   [{marks[(p, c)]}]" if (p, c) in marks else ""
        lines.append(f"  {i:{width}d}. {p} -> {c}{mark}")
    if not result.edges:
        lines.append("  (none)")
    lines.append("parents:")
    name_width = max(len(v) for v in result.variables)
    for v in result.variables:
        owner = f" [{owners[v]}]" if owners and v in owners else ""
        ps = ", ".join(result.parents[v]) or "(none)"
        lines.append(f"  {(v + owner).ljust(name_width + 8)} {ps}")
    if diff:
        lines.append(
            f"compared with {diff['source']}: structural Hamming distance {diff['shd']} "
            f"({diff['extra']} extra, {diff['missing']} missing, {diff['reversed']} reversed)"
        )
        lines += [f"  missing: {p} -> {c}" for p, c in diff["missing_links"]]
    for v, spec in cpts.items():
        lines += cpt_lines(result, v, spec)
    return "\n".join(lines)


def network_summary(
    result: NetworkResult,
    owners: dict[str, str] | None,
    diff: dict[str, Any] | None,
    cpts: dict[str, Cpt],
) -> dict[str, Any]:
    """What ``ppbn show --format json`` prints: the structure, the comparison, the CPTs."""
    out: dict[str, Any] = {
        "source": result.source,
        "variables": list(result.variables),
        "owners": owners,
        "edges": [list(e) for e in result.edges],
        "parents": {v: list(ps) for v, ps in result.parents.items()},
    }
    if diff:
        out["reference"] = diff
    if cpts:
        out["cpts"] = {v: dataclasses.asdict(spec) for v, spec in cpts.items()}
    return out


def plot_reference(
    document: dict[str, Any], owners: dict[str, str], data: Path, png: str, title: str
) -> None:
    """Draw a learned network (``ppbn reference --plot``), its edges marked against the data
    folder's truth.bif when it has one (the title then says so)."""
    truth_file = data / "truth.bif"
    truth = load_result(truth_file) if truth_file.is_file() else None
    title += " vs truth.bif" if truth else ""
    NetworkResult.from_document(document, owners, source="reference").plot(png, truth, title)


def privacy_text(value: dict[str, Any]) -> str | None:
    """A DP result's privacy object (``DPPlan.as_dict``) as one line; None when it lacks
    what the line needs."""
    pairs = value.get("release", "network") != "network"
    try:
        one_way = value.get("one_way_scale", value["count_scale"])
        return (
            f"({value['epsilon']:g}, {value['delta']:.1e})-DP "
            f"({value.get('accounting', 'pure')} accounting): "
            f"{value['decisions']} noisy {'pair' if pairs else 'parent'} choices of "
            f"epsilon {value['epsilon_per_decision']:.3g} each, "
            + value.get("parameters", "CPTs from counts")
            + f" with {value.get('count_noise', 'discrete Laplace')} noise of scale "
            + f"{value['count_scale']:.3g}"
            + (f" ({one_way:.3g} on the 1-way tables)" if one_way != value["count_scale"] else "")
        )
    except (KeyError, TypeError, ValueError):
        return None
