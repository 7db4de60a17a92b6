"""Loading and checking one party's CSV against the public schema.

Each party holds a CSV with the record-id column and exactly its own variables
(Yang-Wright Sec. 4.2: vertically partitioned, common record id). Loading checks
everything a later protocol step would otherwise trip over, and fails with one line that
names the file, the line and the column at fault. Rows are sorted by record id so that
both parties' row i is the same record without either side sending its ids.

A continuous variable (``"type": "continuous"`` in the schema) is discretized here, by
its owner only, from the owner's whole file (``ppbn.bn.discretize``; Ma 2006, Ch. 2,
Sec. 2.3 for mgas): its codes are bin indices 0..K-1 and its cut points stay in
``PartyData.bins``, which never leaves this party.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ppbn.bn.discretize import (
    DiscretizationError,
    assign,
    check_enough_distinct,
    cuts_for,
    format_number,
)
from ppbn.bn.schema import PARTIES, BinSpec, Schema
from ppbn.errors import DataError

# How an empty cell is read (``--missing``): "error" refuses it; "category" reads it as the
# schema's ``missing_state``, an ordinary declared state; "available-case" codes it
# ``MISSING_CODE`` and every count table involving that variable leaves the record out.
MISSING_RULES = ("error", "category", "available-case")
MISSING_CODE = -1
MISSING_HELP = (
    "how an empty cell is read: error (refuse it; the default), category (the schema's "
    "missing_state becomes an ordinary state), available-case (the record is left out of "
    "exactly the families, child + parents, that contain the variable; secure path only)"
)


@dataclass(frozen=True)
class PartyData:
    """One party's records, coded as state indices of the declared domains."""

    schema: Schema
    role: str
    columns: tuple[str, ...]
    ids: tuple[str, ...]
    codes: np.ndarray  # int64, shape (n, len(columns)), rows sorted by id; MISSING_CODE = empty
    missing_rule: str = "error"  # one of MISSING_RULES: how empty cells were read
    # the owner's cut points of its continuous variables: private unless the schema publishes them
    bins: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    @property
    def n_records(self) -> int:
        return len(self.ids)

    def column(self, name: str) -> np.ndarray:
        return self.codes[:, self.columns.index(name)]


# A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name.
CSV_ENCODING = "utf-8-sig"


def _read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise DataError(f"{path}: data file not found")
    _check_row_lengths(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, encoding=CSV_ENCODING)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: file is empty (no header line)") from None
    except pd.errors.ParserError as exc:
        raise DataError(f"{path}: not a valid CSV: {str(exc).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    if frame.empty:
        raise DataError(f"{path}: no records after the header line")
    return frame


def _raw_header(path: Path) -> list[str]:
    """The header as written (pandas renames a repeated column, hiding the repetition)."""
    with open(path, encoding=CSV_ENCODING, newline="") as fh:
        return next(csv.reader(fh), [])


def _check_row_lengths(path: Path) -> None:
    """Every non-blank line has as many fields as the header: a short row would otherwise
    read as missing values, a long one as a parser error without the line."""
    try:
        with open(path, encoding=CSV_ENCODING, newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return  # reported as an empty file by the reader
            for row in reader:
                if row and len(row) != len(header):
                    raise DataError(
                        f"{path}: line {reader.line_num} has {len(row)} fields, the header has {len(header)}"
                    )
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise DataError(f"{path}: not a valid CSV: {exc}") from None


def _check_header(path: Path, schema: Schema, role: str) -> tuple[str, ...]:
    header = _raw_header(path)
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise DataError(f"{path}: line 1: column {dupes[0]!r} appears more than once")
    if schema.id_column not in header:
        raise DataError(f"{path}: line 1: id column {schema.id_column!r} is missing")
    declared = set(schema.names)
    own = [v.name for v in schema.owned_by(role)]
    for name in header:
        if name == schema.id_column:
            continue
        if name not in declared:
            raise DataError(f"{path}: line 1: column {name!r} is not a variable of the schema")
        if schema.owner(name) != role:
            raise DataError(
                f"{path}: line 1: column {name!r} is declared for {schema.owner(name)}, not {role}"
            )
    for name in own:
        if name not in header:
            raise DataError(f"{path}: line 1: column {name!r} of {role} is missing")
    return tuple(own)


def _check_ids(path: Path, ids: pd.Series, id_column: str) -> None:
    empty = np.flatnonzero((ids.str.strip() == "").to_numpy())
    if empty.size:
        raise DataError(f"{path}: line {empty[0] + 2}, column {id_column!r}: empty record id")
    dup_mask = ids.duplicated(keep=False).to_numpy()
    if dup_mask.any():
        rows = np.flatnonzero(dup_mask)
        first = ids.iloc[rows[0]]
        lines = [int(r) + 2 for r in rows if ids.iloc[r] == first][:2]
        raise DataError(
            f"{path}: line {lines[1]}, column {id_column!r}: duplicate record id {first!r} "
            f"(first on line {lines[0]})"
        )


def _code_column(path: Path, values: pd.Series, name: str, states: tuple[str, ...]) -> np.ndarray:
    """State indices of one column; empty cells become MISSING_CODE (the rule decides later)."""
    lookup = {s: i for i, s in enumerate(states)}
    raw = values.to_numpy(dtype=object)
    codes = pd.Series(raw).map(lookup)
    bad = np.flatnonzero(codes.isna().to_numpy() & (raw != ""))
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{path}: line {row + 2}, column {name!r}: value {raw[row]!r} is not in the declared "
            f"domain {list(states)}"
        )
    return codes.fillna(MISSING_CODE).to_numpy(dtype=np.int64)


def check_missing_rule(rule: str) -> str:
    if rule not in MISSING_RULES:
        raise DataError(f"--missing must be one of {', '.join(MISSING_RULES)}, not {rule!r}")
    return rule


def apply_missing_rule(path: Path, schema: Schema, columns: tuple[str, ...], codes: np.ndarray, rule: str) -> None:
    """The one place that decides what an empty cell (``MISSING_CODE`` from ``_code_column``)
    becomes, in place: an error, the schema's ``missing_state``, or left as MISSING_CODE for
    available-case analysis (``bn.k2.count_table`` and ``protocols.tables`` skip such a
    record in every family containing that column)."""
    check_missing_rule(rule)
    if rule == "category" and schema.missing_state is None:
        raise DataError("--missing category needs 'missing_state' declared in the schema")
    for j, name in enumerate(columns):
        empty = np.flatnonzero(codes[:, j] == MISSING_CODE)
        if not empty.size or rule == "available-case":
            continue
        line = int(empty[0]) + 2
        if rule == "error":
            raise DataError(
                f"{path}: line {line}, column {name!r}: missing value (pass --missing available-case "
                "to leave the record out of the families of this variable, or declare 'missing_state' "
                "in the schema and pass --missing category to treat it as a category)"
            )
        states = schema.variable(name).states
        if schema.missing_state not in states:
            raise DataError(
                f"{path}: line {line}, column {name!r}: missing value, and the missing "
                f"state {schema.missing_state!r} is not in this variable's domain"
            )
        codes[empty, j] = states.index(schema.missing_state)


def missing_rule_from(missing: str | None, missing_as_category: bool = False) -> str:
    """The rule of ``--missing`` with the older ``--missing-as-category`` as an alias."""
    if missing_as_category:
        if missing not in (None, "category"):
            raise DataError(f"--missing-as-category contradicts --missing {missing}")
        return "category"
    return check_missing_rule(missing or "error")


def _continuous_missing(path: Path, name: str, raw: np.ndarray, rule: str) -> np.ndarray:
    """MISSING CELLS OF A CONTINUOUS COLUMN: the mask of present cells.

    Under ``--missing available-case`` an empty cell is left MISSING_CODE (the caller
    discretizes only the present cells, from the owner's file); otherwise it is refused
    with one line: no bin can stand for "missing", so ``--missing category`` cannot either.
    """
    present = raw != ""
    if rule != "available-case" and not present.all():
        row = int(np.flatnonzero(~present)[0])
        raise DataError(
            f"{path}: line {row + 2}, column {name!r}: missing value (a continuous column has no "
            "missing state: pass --missing available-case, fill the cell or drop the record)"
        )
    return present


def _parse_numbers(path: Path, name: str, raw: np.ndarray) -> np.ndarray:
    """The cells as finite floats; the first that is not one is reported with its line."""
    numbers = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(numbers))
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{path}: line {row + 2}, column {name!r}: value {raw[row]!r} is not a finite number "
            f"({name!r} is declared continuous)"
        )
    return numbers


def _cut_points(path: Path, name: str, spec: BinSpec, values: np.ndarray, lines: str) -> tuple[float, ...]:
    """The owner's cut points for ``values`` under ``spec``, with the load's one-line errors."""
    where = f"{path}: {lines}, column {name!r}"
    try:
        check_enough_distinct(values, spec.count)
    except DiscretizationError as exc:
        raise DataError(
            f"{where}: {exc}: lower the bins count in the schema, or declare {name!r} categorical"
        ) from None
    if spec.method == "edges" and spec.edges is None:
        raise DataError(f"{where}: method 'edges' needs the 'edges' list in the owner's schema")
    if spec.method == "mgas" and spec.min_records is None:
        raise DataError(f"{where}: method 'mgas' needs 'min_records' (and optionally 'min_granularity') in the owner's schema")
    try:
        cuts = cuts_for(spec.method, values, spec.count, spec.edges, spec.min_records, spec.min_granularity or 0.0)
    except DiscretizationError as exc:
        raise DataError(f"{where}: {exc}") from None
    if len(cuts) + 1 != spec.count:  # only mgas chooses its own number of groups
        fewer = "raise min_records or min_granularity" if len(cuts) + 1 > spec.count else "lower min_records or min_granularity"
        raise DataError(
            f"{where}: mgas made {len(cuts) + 1} groups but the schema's bins count is {spec.count}: "
            f"set count to {len(cuts) + 1} (in both parties' schemas), or {fewer}"
        )
    out = tuple(float(c) for c in cuts)
    if spec.publish_edges and spec.edges is not None and out != spec.edges:
        raise DataError(
            f"{where}: the {spec.method} cut points of this file [{', '.join(map(format_number, out))}] "
            "differ from the published 'edges': publish these, or use method 'edges'"
        )
    return out


def _code_continuous_column(
    path: Path, values: pd.Series, name: str, spec: BinSpec, rule: str
) -> tuple[np.ndarray, tuple[float, ...]]:
    """Bin indices of a continuous column and the cut points, from this file alone."""
    raw = values.to_numpy(dtype=object)
    present = _continuous_missing(path, name, raw, rule)
    codes = np.full(raw.shape[0], MISSING_CODE, dtype=np.int64)
    numbers = _parse_numbers(path, name, raw[present])
    lines = f"lines 2-{raw.shape[0] + 1}"
    cuts = _cut_points(path, name, spec, numbers, lines)
    codes[present] = assign(numbers, np.array(cuts, dtype=np.float64))
    return codes, cuts


def load_party_data(
    schema: Schema,
    role: str,
    csv_path: str | Path,
    missing_as_category: bool = False,
    missing_rule: str | None = None,
) -> PartyData:
    """Load ``role``'s CSV, check it against ``schema``, code it, sort rows by record id.

    Empty cells follow ``missing_rule`` (``apply_missing_rule``); ``missing_as_category``
    is the older spelling of ``missing_rule="category"``.
    """
    if role not in PARTIES:
        raise DataError(f"role must be 'alice' or 'bob', got {role!r}")
    rule = missing_rule_from(missing_rule, missing_as_category)
    path = Path(csv_path)
    if rule == "category" and schema.missing_state is None:
        raise DataError("--missing category needs 'missing_state' declared in the schema")
    frame = _read_csv(path)
    columns = _check_header(path, schema, role)
    ids = frame[schema.id_column]
    _check_ids(path, ids, schema.id_column)
    codes = np.empty((len(frame), len(columns)), dtype=np.int64)
    bins: dict[str, tuple[float, ...]] = {}
    for j, name in enumerate(columns):
        variable = schema.variable(name)
        if variable.bins is not None:
            codes[:, j], bins[name] = _code_continuous_column(path, frame[name], name, variable.bins, rule)
        else:
            codes[:, j] = _code_column(path, frame[name], name, variable.states)
    apply_missing_rule(path, schema, columns, codes, rule)
    order = np.argsort(ids.to_numpy(dtype=str), kind="stable")
    sorted_ids = tuple(ids.to_numpy(dtype=str)[order].tolist())
    return PartyData(schema, role, columns, sorted_ids, codes[order], rule, bins)


def load_joined(
    schema: Schema,
    alice_csv: str | Path,
    bob_csv: str | Path,
    missing_as_category: bool = False,
    missing_rule: str | None = None,
    intersect: bool = False,
) -> tuple[tuple[str, ...], np.ndarray]:
    """Join both parties' data (reference runs only): (names in schema order, codes (n, m));
    with ``missing_rule="available-case"`` empty cells stay MISSING_CODE.

    With ``intersect`` only the records whose id is in both files, in id order (what the
    daemons learn on with ``--align psi``); otherwise both must hold the same ids."""
    names, codes, _ = load_joined_with_bins(schema, alice_csv, bob_csv, missing_as_category, missing_rule, intersect)
    return names, codes


def load_joined_with_bins(
    schema: Schema,
    alice_csv: str | Path,
    bob_csv: str | Path,
    missing_as_category: bool = False,
    missing_rule: str | None = None,
    intersect: bool = False,
) -> tuple[tuple[str, ...], np.ndarray, dict[str, tuple[float, ...]]]:
    """``load_joined`` plus both owners' cut points (the reference names bins by interval).
    Each party's file is loaded exactly as its daemon loads it: continuous columns are cut
    from the owner's whole file, before any intersection."""
    alice = load_party_data(schema, "alice", alice_csv, missing_as_category, missing_rule)
    bob = load_party_data(schema, "bob", bob_csv, missing_as_category, missing_rule)
    if intersect:
        shared = sorted(set(alice.ids) & set(bob.ids))
        if not shared:
            raise DataError(f"{alice_csv} and {bob_csv} share no record id")
        alice, bob = _restrict(alice, shared), _restrict(bob, shared)
    if alice.ids != bob.ids:
        only_a = sorted(set(alice.ids) - set(bob.ids))
        only_b = sorted(set(bob.ids) - set(alice.ids))
        if only_a:
            raise DataError(f"{alice_csv}: record id {only_a[0]!r} has no row in {bob_csv}")
        raise DataError(f"{bob_csv}: record id {only_b[0]!r} has no row in {alice_csv}")
    by_name = {name: alice.column(name) for name in alice.columns}
    by_name.update({name: bob.column(name) for name in bob.columns})
    codes = np.column_stack([by_name[name] for name in schema.names]).astype(np.int64)
    return schema.names, codes, {**alice.bins, **bob.bins}


def _restrict(data: PartyData, ids: list[str]) -> PartyData:
    """``data`` with only the records of ``ids`` (all of them present), in the order given."""
    row = {record_id: i for i, record_id in enumerate(data.ids)}
    rows = np.array([row[record_id] for record_id in ids], dtype=np.int64)
    return dataclasses.replace(data, ids=tuple(ids), codes=data.codes[rows])


def write_party_csv(
    path: str | Path,
    schema: Schema,
    ids: list[str],
    names: tuple[str, ...],
    codes: np.ndarray,
    numbers: Mapping[str, np.ndarray] | None = None,
) -> None:
    """Write records (coded) as a party CSV with state names (used by ``datasets make``);
    a column in ``numbers`` (row-aligned values) is written as those numbers instead."""
    frame = pd.DataFrame({schema.id_column: ids})
    for j, name in enumerate(names):
        if numbers is not None and name in numbers:
            frame[name] = [format_number(x) for x in numbers[name]]
            continue
        states = np.array(schema.variable(name).states, dtype=object)
        frame[name] = states[codes[:, j]]
    frame.to_csv(path, index=False)
