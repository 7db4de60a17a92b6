"""Loading and checking one party's CSV against the public schema.

Each party holds a CSV with the record-id column and exactly its own variables
(Yang-Wright Sec. 4.2: vertically partitioned, common record id). Loading checks
everything a later protocol step would otherwise trip over, and fails with one line that
names the file, the line and the column at fault. Rows are sorted by record id so that
both parties' row i is the same record without either side sending its ids.

Files are read in chunks of ``READ_CHUNK_ROWS`` records (CSV through pandas, Parquet
through pyarrow's record batches, the optional extra ``ppbn[parquet]``): only the coded
columns (8 bytes a cell), the sorted ids (one UTF-8 byte string each, ``RecordIds``) and,
for continuous columns, one float per cell stay in memory, never the whole file as text,
so ten million records load in a few hundred megabytes. Every check still names the file,
the line (CSV; the header is line 1) or row (Parquet; the first record is row 1) and the
column.

A continuous variable (``"type": "continuous"`` in the schema) is discretized here, by
its owner only, from the owner's whole file (``ppbn.bn.discretize``; Ma 2006, Ch. 2,
Sec. 2.3 for mgas): its codes are bin indices 0..K-1 and its cut points stay in
``PartyData.bins``, which never leaves this party.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
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
from ppbn.data.constants import MISSING_RULES  # how an empty cell is read (``--missing``)
from ppbn.errors import DataError, UserError
from ppbn.protocols.records import RecordIds

# "available-case" codes an empty cell ``MISSING_CODE``; every count table involving that
# variable leaves the record out (the rules: ``data.constants.MISSING_RULES``)
MISSING_CODE = -1
READ_CHUNK_ROWS = 1 << 16  # records parsed at a time
PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class PartyData:
    """One party's records, coded as state indices of the declared domains."""

    schema: Schema
    role: str
    columns: tuple[str, ...]
    ids: Sequence[str]  # sorted; RecordIds when loaded from a file
    codes: np.ndarray  # int64, shape (n, len(columns)), rows sorted by id; MISSING_CODE = empty
    missing_rule: str = "error"  # one of MISSING_RULES: how empty cells were read
    # the owner's cut points of its continuous variables: private unless the schema publishes them
    bins: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # the owner's numbers of its continuous variables, rows as ``codes`` (NaN: empty): a DP
    # job cuts them again under DP (``ppbn.dp.quantiles``) instead of at the exact cuts
    values: Mapping[str, np.ndarray] = field(default_factory=dict)

    def subset(self, rows: np.ndarray, ids: Sequence[str]) -> PartyData:
        """The records at ``rows`` (ids ``ids``), codes and numbers alike."""
        return dataclasses.replace(
            self,
            ids=ids,
            codes=self.codes[rows],
            values={name: numbers[rows] for name, numbers in self.values.items()},
        )

    @property
    def n_records(self) -> int:
        return len(self.ids)

    def column(self, name: str) -> np.ndarray:
        return self.codes[:, self.columns.index(name)]


# A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name.
CSV_ENCODING = "utf-8-sig"


@dataclass(frozen=True)
class Rows:
    """How a file names its records: CSV lines (the header is line 1, so the first record
    is line 2) or Parquet rows (from 1); ``first`` is the number of the record at index 0."""

    word: str = "line"
    first: int = 2

    def at(self, index: int) -> str:
        return f"{self.word} {self.first + int(index)}"

    def span(self, count: int) -> str:
        return f"{self.word}s {self.first}-{self.first + count - 1}"

    def shifted(self, offset: int) -> Rows:
        return Rows(self.word, self.first + offset)


CSV_ROWS = Rows("line", 2)
PARQUET_ROWS = Rows("row", 1)


def read_csv_cells(path: Path) -> pd.DataFrame:
    """Every cell of a party's CSV as text (nothing read as missing or as a number yet), after
    the row-length check, so that each later check can name the file, row and column."""
    if not path.is_file():
        raise DataError(f"{path}: data file not found")
    _check_row_lengths(path)
    with _csv_errors(path):
        frame = pd.read_csv(
            path, dtype=str, keep_default_na=False, na_filter=False, encoding=CSV_ENCODING
        )
    if frame.empty:
        raise DataError(f"{path}: no records after the header line")
    return frame


def raw_header(path: Path) -> list[str]:
    """The header as written (pandas renames a repeated column, hiding the repetition)."""
    with open(path, encoding=CSV_ENCODING, newline="") as fh:
        return next(csv.reader(fh), [])


@contextmanager
def _csv_errors(path) -> Iterator[None]:
    """pandas' CSV errors as one-line DataErrors naming the file."""
    try:
        yield
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: file is empty (no header line)") from None
    except pd.errors.ParserError as exc:
        raise DataError(f"{path}: not a valid CSV: {str(exc).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None


# separators other programs write (a spreadsheet with a ';' locale, a TSV export)
OTHER_DELIMITERS = {";": "';'", "\t": "a tab", "|": "'|'"}


def _other_delimiter(fields: list[str]) -> str | None:
    """The other separator a line read as one field holds (its description), or None."""
    if len(fields) != 1:
        return None
    return next((word for sep, word in OTHER_DELIMITERS.items() if sep in fields[0]), None)


def _check_delimiter(path: Path, header: list[str]) -> None:
    """A header read as one column that holds another separator: the file was saved with
    that separator, and every later message (row lengths, missing columns) would mislead."""
    word = _other_delimiter(header)
    if word:
        raise DataError(
            f"{path}: line 1 has one column, but {word} appears in it: ppbn reads comma-separated "
            "files; save the file with commas as separators"
        )


def _check_row_lengths(path: Path) -> int:
    """Every non-blank line has as many fields as the header: a short row would otherwise
    read as missing values, a long one as a parser error without the line. Returns the
    number of records (non-blank lines after the header)."""
    records = 0
    try:
        with open(path, encoding=CSV_ENCODING, newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return 0  # reported as an empty file by the reader
            _check_delimiter(path, header)
            for row in reader:
                if row and len(row) != len(header):
                    word = _other_delimiter(row)
                    hint = (
                        f" ({word} appears in it: save the file with commas as separators)"
                        if word
                        else ""
                    )
                    raise DataError(
                        f"{path}: line {reader.line_num} has {len(row)} fields, the header has {len(header)}{hint}"
                    )
                records += bool(row)
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise DataError(f"{path}: not a valid CSV: {exc}") from None
    return records


def _csv_chunks(path: Path, chunk_rows: int) -> Iterator[pd.DataFrame]:
    """The records of a CSV (rows already checked), ``chunk_rows`` at a time, cells as text."""
    with (
        _csv_errors(path),
        pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            encoding=CSV_ENCODING,
            chunksize=chunk_rows,
        ) as reader,
    ):
        yield from reader


def _parquet_file(path: Path):  # noqa: ANN202 - pyarrow.parquet.ParquetFile; pyarrow is optional
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(
            f"{path}: reading Parquet needs the optional package pyarrow: pip install 'ppbn[parquet]'"
        ) from None
    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...: all one line
        raise DataError(f"{path}: not a valid Parquet file: {str(exc).splitlines()[0]}") from None


def _parquet_chunks(
    path: Path, file, columns: list[str], chunk_rows: int
) -> Iterator[pd.DataFrame]:  # noqa: ANN001
    """The records of a Parquet file in record batches, every cell as its text (null: empty)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        for batch in file.iter_batches(batch_size=chunk_rows, columns=columns):
            frame = {}
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                text = pc.fill_null(pc.cast(column, pa.string()), "")
                frame[name] = pd.Series(text.to_numpy(zero_copy_only=False), dtype=object)
            yield pd.DataFrame(frame)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise DataError(
            f"{path}: cannot read the Parquet data as text: {str(exc).splitlines()[0]}"
        ) from None


def _check_header(
    path: Path, schema: Schema, role: str, header: list[str] | None = None
) -> tuple[str, ...]:
    header = raw_header(path) if header is None else header
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


def check_record_ids(path: Path, ids: pd.Series, id_column: str, rows: Rows = CSV_ROWS) -> None:
    """Refuse an empty, NUL-holding or repeated record id, naming the row."""
    empty = np.flatnonzero((ids.str.strip() == "").to_numpy())
    if empty.size:
        raise DataError(f"{path}: {rows.at(empty[0])}, column {id_column!r}: empty record id")
    nul = np.flatnonzero(ids.str.contains("\0", regex=False).to_numpy())
    if nul.size:
        raise DataError(
            f"{path}: {rows.at(nul[0])}, column {id_column!r}: record id contains a NUL character"
        )
    dup_mask = ids.duplicated(keep=False).to_numpy()
    if dup_mask.any():
        at = np.flatnonzero(dup_mask)
        first = ids.iloc[at[0]]
        pair = [int(r) for r in at if ids.iloc[r] == first][:2]
        raise DataError(
            f"{path}: {rows.at(pair[1])}, column {id_column!r}: duplicate record id {first!r} "
            f"(first on {rows.at(pair[0])})"
        )


def _sorted_ids(
    path: Path, ids: np.ndarray, id_column: str, rows: Rows
) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts ``ids`` (UTF-8 bytes, file order) and the sorted ids; a duplicate
    across chunks is reported as ``check_record_ids`` reports one inside a chunk (the earliest
    duplicated id)."""
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    same = ordered[1:] == ordered[:-1]
    if same.any():
        starts = np.flatnonzero(same & ~np.concatenate(([False], same[:-1])))
        pick = starts[np.argmin(order[starts])]
        first, second = int(order[pick]), int(order[pick + 1])
        raise DataError(
            f"{path}: {rows.at(second)}, column {id_column!r}: duplicate record id "
            f"{bytes(ordered[pick]).decode('utf-8')!r} (first on {rows.at(first)})"
        )
    return order, ordered


def missing_cells(raw: np.ndarray, markers: Sequence[str] = ()) -> np.ndarray:
    """The mask of cells that hold no value: empty, or one of the schema's ``missing``
    markers ("NA", "?")."""
    if not markers:
        return raw == ""
    return pd.Series(raw, dtype=object).isin(("", *markers)).to_numpy()


def code_column(
    path: Path,
    values: pd.Series,
    name: str,
    states: tuple[str, ...],
    rows: Rows = CSV_ROWS,
    markers: Sequence[str] = (),
) -> np.ndarray:
    """State indices of one column; empty cells and ``markers`` become MISSING_CODE (the
    rule decides later)."""
    lookup = {s: i for i, s in enumerate(states)}
    raw = values.to_numpy(dtype=object)
    codes = pd.Series(raw).map(lookup)
    bad = np.flatnonzero(codes.isna().to_numpy() & ~missing_cells(raw, markers))
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{path}: {rows.at(row)}, column {name!r}: value {raw[row]!r} is not in the declared "
            f"domain {list(states)}"
        )
    return codes.fillna(MISSING_CODE).to_numpy(dtype=np.int64)


def check_missing_rule(rule: str) -> str:
    if rule not in MISSING_RULES:
        raise DataError(f"--missing must be one of {', '.join(MISSING_RULES)}, not {rule!r}")
    return rule


def apply_missing_rule(
    path: Path,
    schema: Schema,
    columns: tuple[str, ...],
    codes: np.ndarray,
    rule: str,
    rows: Rows = CSV_ROWS,
) -> None:
    """The one place that decides what an empty cell (``MISSING_CODE`` from ``code_column``)
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
        line = rows.at(empty[0])
        if rule == "error":
            raise DataError(
                f"{path}: {line}, column {name!r}: missing value (pass --missing available-case "
                "to leave the record out of the families of this variable, or declare 'missing_state' "
                "in the schema and pass --missing category to treat it as a category)"
            )
        states = schema.variable(name).states
        if schema.missing_state not in states:
            raise DataError(
                f"{path}: {line}, column {name!r}: missing value, and the missing "
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


def _continuous_missing(
    path: Path, name: str, raw: np.ndarray, rule: str, rows: Rows, markers: Sequence[str] = ()
) -> np.ndarray:
    """MISSING CELLS OF A CONTINUOUS COLUMN: the mask of present cells.

    Under ``--missing available-case`` an empty cell (or a ``missing`` marker) is left
    MISSING_CODE (the caller discretizes only the present cells, from the owner's file);
    otherwise it is refused with one line: no bin can stand for "missing", so ``--missing
    category`` cannot either.
    """
    present = ~missing_cells(raw, markers)
    if rule != "available-case" and not present.all():
        row = int(np.flatnonzero(~present)[0])
        raise DataError(
            f"{path}: {rows.at(row)}, column {name!r}: missing value (a continuous column has no "
            "missing state: pass --missing available-case, fill the cell or drop the record)"
        )
    return present


def _parse_numbers(
    path: Path, name: str, raw: np.ndarray, present: np.ndarray, rows: Rows
) -> np.ndarray:
    """The present cells as finite floats (NaN where a cell is empty); the first that is not
    a finite number is reported with its line."""
    numbers = np.full(raw.shape[0], np.nan)
    numbers[present] = pd.to_numeric(
        pd.Series(raw[present], dtype=object), errors="coerce"
    ).to_numpy(dtype=np.float64)
    bad = np.flatnonzero(present & ~np.isfinite(numbers))
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{path}: {rows.at(row)}, column {name!r}: value {raw[row]!r} is not a finite number "
            f"({name!r} is declared continuous)"
        )
    return numbers


def _cut_points(
    path: Path, name: str, spec: BinSpec, values: np.ndarray, lines: str
) -> tuple[float, ...]:
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
        raise DataError(
            f"{where}: method 'mgas' needs 'min_records' (and optionally 'min_granularity') in the owner's schema"
        )
    try:
        cuts = cuts_for(
            spec.method,
            values,
            spec.count,
            spec.edges,
            spec.min_records,
            spec.min_granularity or 0.0,
        )
    except DiscretizationError as exc:
        raise DataError(f"{where}: {exc}") from None
    if len(cuts) + 1 != spec.count:  # only mgas chooses its own number of groups
        fewer = (
            "raise min_records or min_granularity"
            if len(cuts) + 1 > spec.count
            else "lower min_records or min_granularity"
        )
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


def _continuous_numbers(
    path: Path, values: pd.Series, name: str, rule: str, rows: Rows, markers: Sequence[str] = ()
) -> np.ndarray:
    """One chunk of a continuous column as floats, NaN where the cell is missing (the cut
    points need the whole column: ``_code_continuous_column``)."""
    raw = values.to_numpy(dtype=object)
    present = _continuous_missing(path, name, raw, rule, rows, markers)
    return _parse_numbers(path, name, raw, present, rows)


def _code_continuous_column(
    path: Path, numbers: np.ndarray, name: str, spec: BinSpec, rows: Rows
) -> tuple[np.ndarray, tuple[float, ...]]:
    """Bin indices of a continuous column (NaN: missing) and the cut points, from this file alone."""
    present = ~np.isnan(numbers)
    codes = np.full(numbers.shape[0], MISSING_CODE, dtype=np.int64)
    cuts = _cut_points(path, name, spec, numbers[present], rows.span(numbers.shape[0]))
    codes[present] = assign(numbers[present], np.array(cuts, dtype=np.float64))
    return codes, cuts


def load_party_data(
    schema: Schema,
    role: str,
    data_path: str | Path,
    missing_as_category: bool = False,
    missing_rule: str | None = None,
    chunk_rows: int = READ_CHUNK_ROWS,
) -> PartyData:
    """Load ``role``'s CSV or Parquet file, check it against ``schema``, code it, sort rows
    by record id, reading ``chunk_rows`` records at a time.

    Empty cells, and cells holding one of the schema's ``missing`` markers, follow
    ``missing_rule`` (``apply_missing_rule``); ``missing_as_category``
    is the older spelling of ``missing_rule="category"``.
    """
    if role not in PARTIES:
        raise DataError(f"role must be 'alice' or 'bob', got {role!r}")
    rule = missing_rule_from(missing_rule, missing_as_category)
    path = Path(data_path)
    if rule == "category" and schema.missing_state is None:
        raise DataError("--missing category needs 'missing_state' declared in the schema")
    if not path.is_file():
        raise DataError(f"{path}: data file not found")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        parquet = _parquet_file(path)
        rows = PARQUET_ROWS
        columns = _check_header(path, schema, role, list(parquet.schema_arrow.names))
        total = int(parquet.metadata.num_rows)
        chunks = _parquet_chunks(path, parquet, [schema.id_column, *columns], chunk_rows)
    else:
        rows = CSV_ROWS
        total = _check_row_lengths(path)
        chunks = _csv_chunks(path, chunk_rows)
        columns = ()
    codes = np.empty((total, len(columns)), dtype=np.int64)
    id_parts: list[np.ndarray] = []
    numbers: dict[str, list[np.ndarray]] = {}
    done = 0
    for frame in chunks:
        if not columns:  # CSV: the header, checked once pandas has read it
            columns = _check_header(path, schema, role)
            codes = np.empty((total, len(columns)), dtype=np.int64)
        if done + len(frame) > total:
            raise DataError(f"{path}: changed while it was read")
        where = rows.shifted(done)
        ids = frame[schema.id_column]
        check_record_ids(path, ids, schema.id_column, where)
        id_parts.append(np.array([i.encode("utf-8") for i in ids.tolist()], dtype=bytes))
        block = codes[done : done + len(frame)]
        for j, name in enumerate(columns):
            variable = schema.variable(name)
            if variable.bins is not None:
                numbers.setdefault(name, []).append(
                    _continuous_numbers(path, frame[name], name, rule, where, schema.missing)
                )
            else:
                block[:, j] = code_column(
                    path, frame[name], name, variable.states, where, schema.missing
                )
        done += len(frame)
    if not columns and path.suffix.lower() not in PARQUET_SUFFIXES:
        columns = _check_header(path, schema, role)  # a header line and nothing else
    if done == 0:
        raise DataError(f"{path}: no records after the header line")
    if done != total:
        raise DataError(f"{path}: changed while it was read")
    order, sorted_ids = _sorted_ids(path, np.concatenate(id_parts), schema.id_column, rows)
    del id_parts
    bins: dict[str, tuple[float, ...]] = {}
    values: dict[str, np.ndarray] = {}
    for j, name in enumerate(columns):
        if name in numbers:
            column = np.concatenate(numbers.pop(name))
            codes[:, j], bins[name] = _code_continuous_column(
                path, column, name, schema.variable(name).bins, rows
            )
            values[name] = column[order]
    apply_missing_rule(path, schema, columns, codes, rule, rows)
    for j in range(codes.shape[1]):  # column by column: no second copy of the whole table
        codes[:, j] = codes[order, j]
    return PartyData(schema, role, columns, RecordIds(sorted_ids), codes, rule, bins, values)


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
    names, codes, _ = load_joined_with_bins(
        schema, alice_csv, bob_csv, missing_as_category, missing_rule, intersect
    )
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
        hint = "; to learn on the records both files hold, use --align psi"
        if only_a:
            raise DataError(f"{alice_csv}: record id {only_a[0]!r} has no row in {bob_csv}{hint}")
        raise DataError(f"{bob_csv}: record id {only_b[0]!r} has no row in {alice_csv}{hint}")
    by_name = {name: alice.column(name) for name in alice.columns}
    by_name.update({name: bob.column(name) for name in bob.columns})
    codes = np.column_stack([by_name[name] for name in schema.names]).astype(np.int64)
    return schema.names, codes, {**alice.bins, **bob.bins}


def _restrict(data: PartyData, ids: list[str]) -> PartyData:
    """``data`` with only the records of ``ids`` (all of them present), in the order given."""
    row = {record_id: i for i, record_id in enumerate(data.ids)}
    rows = np.array([row[record_id] for record_id in ids], dtype=np.int64)
    return data.subset(rows, tuple(ids))


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
