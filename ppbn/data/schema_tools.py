"""``ppbn schema infer``, ``merge`` and ``bins``: from two CSVs to one public schema, and a
party's own cut points.

Each party infers a partial schema from its own file alone (``infer_schema``) and sends
the other only the public part; ``merge_schemas`` joins the two. What crosses is what
the public schema holds anyway (Yang-Wright Sec. 4.2: domains are public): names,
owners, categorical domains, and for continuous variables the method and the number of
bins. A party's private bin fields (its unpublished edges, mgas parameters) are kept
only in its own merged copy (``keep_private_of``), never in the other's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppbn.bn.discretize import format_number, interval_labels
from ppbn.bn.io import (
    STATE_CHARS,
    bif_case_clash,
    bif_name_fix,
    bif_name_problem,
    bif_state_problem,
)
from ppbn.bn.schema import PARTIES, SCHEMA_VERSION, BinSpec, Schema, Variable
from ppbn.data.constants import (
    DEFAULT_BINS,
    DEFAULT_MISSING_MARKERS,
    DEFAULT_NUMERIC_LEVELS,
    ORDERS,
)
from ppbn.data.party_data import (
    MISSING_CODE,
    check_record_ids,
    load_party_data,
    missing_cells,
    raw_header,
    read_csv_cells,
)
from ppbn.errors import DataError, UserError

# a categorical column with more distinct values than this gets a warning
MANY_CATEGORIES = 20


@dataclass
class Inferred:
    schema: Schema
    warnings: list[str] = field(default_factory=list)
    # one line per column: what it was declared as (type, states or bins, why)
    decisions: list[str] = field(default_factory=list)


def _numbers(values: np.ndarray) -> np.ndarray | None:
    """The cells as finite floats, or None if any cell is not one."""
    parsed = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
        dtype=np.float64
    )
    return parsed if parsed.size and np.all(np.isfinite(parsed)) else None


def _domain(values: np.ndarray, order: str, numbers: np.ndarray | None) -> tuple[str, ...]:
    """Distinct cells in first-seen order, or sorted (numerically when all are numbers)."""
    seen = tuple(pd.unique(pd.Series(values, dtype=object)).tolist())
    if order == "first-seen":
        return seen
    if numbers is not None:
        first = dict(zip(values.tolist(), numbers.tolist(), strict=True))
        return tuple(sorted(seen, key=lambda s: (first[s], s)))
    return tuple(sorted(seen))


def infer_schema(
    csv_path: str | Path,
    owner: str,
    id_column: str,
    order: str = "first-seen",
    bins: int = DEFAULT_BINS,
    numeric_levels: int = DEFAULT_NUMERIC_LEVELS,
    missing_markers: Sequence[str] = DEFAULT_MISSING_MARKERS,
) -> Inferred:
    """A partial schema of ``owner``'s variables from its own CSV.

    Categorical: the domain of the column (``order``). Numeric (every present cell a
    finite number) with more than ``numeric_levels`` distinct values: continuous, quantile
    bins, ``bins`` of them. Empty cells and cells equal to one of ``missing_markers`` are
    missing: left out of domains, with a warning naming the column and the markers found;
    the markers found go into the schema's ``missing`` list, so the loader reads them the
    same way.
    """
    if owner not in PARTIES:
        raise UserError(f"--owner must be alice or bob, got {owner!r}")
    if order not in ORDERS:
        raise UserError(f"--order must be one of {', '.join(ORDERS)}")
    if bins < 2:
        raise UserError("--bins must be at least 2")
    path = Path(csv_path)
    frame = read_csv_cells(path)
    header = raw_header(path)
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise DataError(f"{path}: line 1: column {dupes[0]!r} appears more than once")
    if id_column not in header:
        raise DataError(
            f"{path}: line 1: id column {id_column!r} is missing (columns: {', '.join(header)})"
        )
    check_record_ids(path, frame[id_column], id_column)
    _check_column_names(path, [name for name in header if name != id_column])
    variables: list[Variable] = []
    warnings: list[str] = []
    decisions: list[str] = []
    markers = tuple(dict.fromkeys(m for m in missing_markers if m))
    found: set[str] = set()
    for name in header:
        if name == id_column:
            continue
        cells = frame[name].to_numpy(dtype=object)
        absent = missing_cells(cells, markers)
        present = cells[~absent]
        if absent.any():
            counts = _marker_counts(cells[absent])
            found.update(m for m in counts if m)
            warnings.append(
                f"{path}: column {name!r} has {_describe_missing(counts)}, read as missing "
                "(run both daemons with --missing available-case, or declare 'missing_state' and "
                "use --missing category)"
            )
        numbers = _numbers(present)
        distinct = (
            int(np.unique(numbers).size) if numbers is not None else len(set(present.tolist()))
        )
        if distinct < 2:
            raise DataError(
                f"{path}: lines 2-{cells.size + 1}, column {name!r}: fewer than two distinct values: "
                "a variable needs at least two states (drop the column)"
            )
        gaps = f", {int(absent.sum())} missing" if absent.any() else ""
        levels = max(numeric_levels, bins - 1)  # more distinct numbers: continuous
        if numbers is not None and distinct > levels:
            variables.append(Variable.continuous(name, owner, BinSpec("quantile", bins)))
            decisions.append(
                f"column {name!r}: continuous, {bins} quantile bins ({distinct} distinct numbers{gaps})"
            )
            continue
        if distinct > MANY_CATEGORIES:
            hint = "declare it continuous" if numbers is not None else _text_hint(cells, absent)
            warnings.append(
                f"{path}: column {name!r} has {distinct} distinct values as a categorical variable "
                f"(sparse counts, large tables): {hint}"
            )
        domain = _domain(present, order, numbers)
        _check_states(path, name, cells, domain)
        variables.append(Variable(name, owner, domain))
        kind = f"numbers, at most {levels} distinct" if numbers is not None else "text"
        decisions.append(
            f"column {name!r}: categorical, {len(domain)} states, {order} order ({kind}{gaps})"
        )
    if not variables:
        raise DataError(f"{path}: line 1: no columns besides the id column {id_column!r}")
    missing = tuple(m for m in markers if m in found)
    return Inferred(Schema(id_column, tuple(variables), missing=missing), warnings, decisions)


def _text_hint(cells: np.ndarray, absent: np.ndarray) -> str:
    """What to do about a column of many distinct texts: group them, or, when most cells
    are numbers, name the first cell that is not (a missing marker --missing-markers lacks)."""
    parsed = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(
        dtype=np.float64
    )
    text = ~absent & ~np.isfinite(parsed)
    if text.sum() * 2 >= (~absent).sum():
        return "group its values"
    line = int(np.flatnonzero(text)[0])
    return (
        f"group its values; or, if {cells[line]!r} (line {line + 2}) means no value, add it to "
        "--missing-markers and the column is numeric"
    )


def _marker_counts(cells: np.ndarray) -> dict[str, int]:
    """How many of the missing ``cells`` hold each marker ('' for empty), most first."""
    values, counts = np.unique(cells.astype(str), return_counts=True)
    pairs = sorted(zip(values.tolist(), counts.tolist(), strict=True), key=lambda p: -p[1])
    return dict(pairs)


def _describe_missing(counts: dict[str, int]) -> str:
    """The missing cells of a column in words, for its warning: "12 cells 'NA', 3 empty cells"."""
    parts = []
    for marker, n in counts.items():
        cells = "cell" if n == 1 else "cells"
        parts.append(f"{n} empty {cells}" if marker == "" else f"{n} {cells} {marker!r}")
    return ", ".join(parts)


def _check_column_names(path: Path, names: list[str]) -> None:
    """Every variable column has a name the outputs can carry (the network's BIF file):
    refused here, on line 1, rather than when a learn job writes its result."""
    for name in names:
        if not name:
            raise DataError(f"{path}: line 1: a column has an empty name")
        problem = bif_name_problem(name)
        if problem:
            raise DataError(
                f"{path}: line 1, column {name!r}: the name {problem}; {bif_name_fix(name, ' in the file')}"
            )
    clash = bif_case_clash(names)
    if clash:
        raise DataError(
            f"{path}: line 1: columns {clash[0]!r} and {clash[1]!r} differ only in letter case, which "
            "pgmpy's BIF reader cannot tell apart; rename one of them"
        )


def _check_states(path: Path, name: str, cells: np.ndarray, domain: tuple[str, ...]) -> None:
    """Every state of a categorical column is a value the network's BIF file can carry;
    the first line holding a refused one is named."""
    for state in domain:
        problem = bif_state_problem(state)
        if problem:
            line = int(np.flatnonzero(cells == state)[0]) + 2
            raise DataError(
                f"{path}: line {line}, column {name!r}: value {state!r} {problem}; change it in the "
                f"file ({STATE_CHARS})"
            )


def _party_of(schema: Schema, source: str) -> str:
    owners = sorted({v.owner for v in schema.variables})
    if len(owners) != 1:
        raise UserError(
            f"{source}: declares variables of both alice and bob; a partial schema holds one party's variables"
        )
    return owners[0]


def merge_schemas(
    first: Schema, second: Schema, sources: tuple[str, str], keep_private_of: str | None = None
) -> dict[str, Any]:
    """One public schema from two parties' partial ones (as a JSON-ready dict).

    Refuses: different id columns, two partial schemas of the same party, a variable
    declared by both, different missing states, a missing marker of one party that is a
    state of the other's. Only ``keep_private_of``'s variables keep their private bin
    fields (that party's own copy); every other variable is written in its public form.
    The merged ``missing`` list holds both parties' markers.
    """
    if keep_private_of is not None and keep_private_of not in PARTIES:
        raise UserError(f"--party must be alice or bob, got {keep_private_of!r}")
    a, b = sources
    if first.id_column != second.id_column:
        raise UserError(
            f"the id columns differ: {a} uses {first.id_column!r}, {b} uses {second.id_column!r} "
            "(agree on one name and rename it in one schema and its CSV)"
        )
    party_a, party_b = _party_of(first, a), _party_of(second, b)
    if party_a == party_b:
        raise UserError(
            f"{a} and {b} both declare {party_a}'s variables: merge one partial schema of alice with one of bob"
        )
    names_b = {v.name: v for v in second.variables}
    folded_b = {v.name.lower(): v.name for v in second.variables}
    for v in first.variables:
        if v.name in names_b:
            raise UserError(
                f"variable {v.name!r} is declared by both {a} ({v.owner}) and {b} ({names_b[v.name].owner}): "
                "each variable belongs to one party; rename one column"
            )
        if v.name.lower() in folded_b:
            raise UserError(
                f"variable {v.name!r} of {a} and {folded_b[v.name.lower()]!r} of {b} differ only in letter "
                "case, which pgmpy's BIF reader cannot tell apart; rename one column"
            )
    missing = {s.missing_state for s in (first, second)} - {None}
    if len(missing) > 1:
        raise UserError(
            f"the missing states differ: {a} {first.missing_state!r}, {b} {second.missing_state!r}"
        )
    variables = [
        v.to_dict() if v.owner == keep_private_of else v.public_dict()
        for v in (*first.variables, *second.variables)
    ]
    merged: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "id_column": first.id_column,
        "variables": variables,
    }
    if missing:
        merged["missing_state"] = missing.pop()
    markers = list(dict.fromkeys((*first.missing, *second.missing)))
    for own, source, other, theirs in (
        (first, a, b, second.missing),
        (second, b, a, first.missing),
    ):
        for v in own.variables:
            clash = [s for s in v.states if s in theirs] if v.bins is None else []
            if clash:
                raise UserError(
                    f"variable {v.name!r} of {source} has the state {clash[0]!r}, which {other} "
                    f"lists as missing: remove it from the 'missing' list of {other}, or rename the state"
                )
    if markers:
        merged["missing"] = markers
    Schema.from_dict(json.loads(json.dumps(merged)), source="merged schema")  # the result must load
    return merged


def bin_report(schema_path: str, data_path: str, party: str, rule: str) -> dict[str, Any]:
    """The cut points of ``party``'s continuous variables in its own file, computed by the
    daemon's loader (``load_party_data``), and the records per bin; no other file is read."""
    schema = Schema.load(schema_path)
    own = [v for v in schema.owned_by(party) if v.bins is not None]
    if not own:
        raise UserError(f"{schema_path}: {party} owns no continuous variable")
    data = load_party_data(schema, party, data_path, missing_rule=rule)
    variables = []
    for v in own:
        codes, cuts = data.column(v.name), data.bins[v.name]
        present = codes[codes != MISSING_CODE]
        variables.append(
            {
                "variable": v.name,
                "method": v.bins.method,
                "bins": v.bins.count,
                "cut_points": list(cuts),
                "intervals": list(interval_labels(cuts)),
                "records": [int((present == k).sum()) for k in range(v.bins.count)],
                "missing": int(codes.size - present.size),
                "published": v.bins.publish_edges,
            }
        )
    return {
        "party": party,
        "data": str(data_path),
        "records": data.n_records,
        "variables": variables,
    }


def bins_text(report: dict[str, Any]) -> str:
    """``bin_report`` for a person: each variable's cut points and records per bin."""
    lines = [f"{report['data']} ({report['party']}): {report['records']} records"]
    for v in report["variables"]:
        cuts = ", ".join(format_number(c) for c in v["cut_points"])
        lines.append(f"{v['variable']}: {v['method']}, {v['bins']} bins, cut points {cuts}")
        width = max(len(label) for label in v["intervals"])
        lines += [
            f"  bin{k + 1}  {label.ljust(width)}  {n} records"
            for k, (label, n) in enumerate(zip(v["intervals"], v["records"], strict=True))
        ]
        if v["missing"]:
            lines.append(f"  missing cells (left out of this variable's families): {v['missing']}")
    private = [v["variable"] for v in report["variables"] if not v["published"]]
    if private:
        lines.append(
            f"cut points of {', '.join(private)} stay with {report['party']} (not published)"
        )
    return "\n".join(lines)


def with_party_names(
    schema: Mapping[str, Any], names: Mapping[str, str], source: str = "merged schema"
) -> dict[str, Any]:
    """A schema file's object (``merge_schemas``'s result) with these display names (role ->
    organisation) added, each replacing the role's old one; checked as the loader checks
    them (one DataError naming ``source``). Local and outside the fingerprint, so each
    party may write its own (docs/decisions/party-names.md)."""
    out = dict(schema)
    if names:
        out["party_names"] = {**out.get("party_names", {}), **names}
    Schema.from_dict(json.loads(json.dumps(out)), source=source)  # the result must load
    return out
