"""Synthetic records from a released network: forward (ancestral) sampling of its CPTs, in
a topological order, with the sampler ``ppbn datasets make`` uses (``ppbn.bn.networks``).
What ``ppbn sample`` runs.

The records are a function of the released network alone (structure and CPTs), so they
are post-processing of the release: a DP release (``network.json`` with a ``privacy``
object holding ``epsilon`` and ``delta``) keeps its (epsilon, delta) guarantee; an exact
release gives none (the records carry whatever its CPTs disclose). Sampling needs every
CPT: a party that was not shown some (owner disclosure) is refused (``WithheldCptsError``).
The sampling itself is ``NetworkResult.sample`` (ppbn/api/result.py); this module adds the
column order of a schema, the release's privacy figures and the output file.

    network = ppbn.load_result("ppbn-out/JOB")
    frame = network.sample(20_000, seed=7)           # pandas, one column per variable
    ppbn.sample("ppbn-out/JOB", 20_000, seed=7, out="synth.csv")
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ppbn.api.result import NetworkResult, check_size, load_result
from ppbn.errors import DataError, UserError

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "parquet")
PARQUET_SUFFIXES = (".parquet", ".pq")
# records x variables: the sampler holds 8 bytes a cell and the CSV text a few more, the
# whole table in memory before it is written, so 1e8 cells take a few GB at the peak


def sample(
    result: NetworkResult | str | Path,
    records: int,
    seed: int | None = None,
    out: str | Path | None = None,
    *,
    schema: str | Path | None = None,
    force: bool = False,
    file_format: str | None = None,
) -> pd.DataFrame:
    """``records`` synthetic records from ``result`` (a ``NetworkResult``, or what
    ``load_result`` reads: a job folder, a network.json, a BIF file), one column per
    variable (the schema's order with ``schema``, else the file's), values the state names.
    With ``out``, also written there (CSV, or Parquet for a .parquet/.pq name or
    ``file_format="parquet"``) whole or not at all; an existing file only with ``force``.
    At most ``MAX_CELLS`` cells (records x variables): the table is built in memory; a
    larger sample is several calls with different seeds."""
    if not isinstance(result, NetworkResult):
        result = load_result(result, schema)
    check_size(result, records)
    columns = sample_columns(result, schema)
    guarantee(result)  # a malformed privacy object is refused before any work
    target = check_output(out, force, file_format) if out is not None else None
    frame = result.sample(records, seed, columns=columns)
    if target is not None:
        write_table(frame, *target)
    return frame


def sample_columns(
    result: NetworkResult, schema: str | Path | None = None
) -> tuple[str, ...] | None:
    """The output's columns: the schema's variables in its order (they must be the
    network's), else None (``NetworkResult.sample``'s default: the file's order)."""
    if schema is not None:
        from ppbn.bn.schema import Schema

        names = tuple(v.name for v in Schema.load(str(schema)).variables)
        ours = set(result.variables)
        extra = [n for n in names if n not in ours]
        missing = [v for v in result.variables if v not in set(names)]
        if extra or missing:
            what = (
                f"{extra[0]!r} is not in {result.source}" if extra else f"{missing[0]!r} is missing"
            )
            raise DataError(f"{schema}: not the schema of the network's variables ({what})")
        return names
    return None


def guarantee(result: NetworkResult) -> tuple[float, float] | None:
    """(epsilon, delta) when the release is a DP one (a ``privacy`` object in network.json),
    else None (an exact release, or the PRAM path's per-block ``privacy`` list). A
    ``privacy`` object without a positive epsilon and a delta in [0, 1) is refused."""
    privacy = result.document.get("privacy")
    if not isinstance(privacy, dict):
        return None
    epsilon, delta = privacy.get("epsilon"), privacy.get("delta")
    numbers = all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
        for x in (epsilon, delta)
    )
    if not numbers or not epsilon > 0 or not 0 <= delta < 1:
        raise DataError(
            f"{result.source}: its 'privacy' object needs a positive 'epsilon' and a 'delta' "
            f"in [0, 1) (found epsilon {epsilon!r}, delta {delta!r})"
        )
    return float(epsilon), float(delta)


def table_format(path: str | Path, file_format: str | None = None) -> str:
    """``file_format`` when given, else Parquet for a .parquet/.pq name, else CSV."""
    if file_format is None:
        return "parquet" if Path(path).suffix.lower() in PARQUET_SUFFIXES else "csv"
    if file_format not in FORMATS:
        raise UserError(f"unknown format {file_format!r}; choose one of: {', '.join(FORMATS)}")
    return file_format


def check_output(
    out: str | Path, force: bool = False, file_format: str | None = None, flag: str = "--out"
) -> tuple[Path, str, str]:
    """Before any work: refuse an existing file (unless ``force``), a folder, a place this
    user cannot write, or Parquet without pyarrow. The path, format and flag to write with."""
    from ppbn.data.outputs import check_output_file

    path = Path(out)
    if (path.exists() or path.is_symlink()) and not path.is_dir() and not force:
        raise UserError(f"{flag} {path}: exists (choose another, or --force to replace it)")
    check_output_file(path, flag)
    chosen = table_format(path, file_format)
    if chosen == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UserError(
                f"{flag} {path}: writing Parquet needs the optional package pyarrow: "
                "pip install 'ppbn[parquet]'"
            ) from None
    return path, chosen, flag


def write_table(frame: pd.DataFrame, path: Path, file_format: str, flag: str = "--out") -> None:
    """Write ``frame`` through a temporary sibling and a rename: never half a file."""
    from ppbn.data.outputs import atomic_write_bytes, reason

    if file_format == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        data = buffer.getvalue()
    else:
        data = frame.to_csv(index=False).encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise UserError(
            f"{flag} {path}: cannot write ({reason(exc)}); nothing was written"
        ) from None


def sample_messages(
    result: NetworkResult, path: Path, file_format: str, records: int, variables: int
) -> tuple[str, str | None]:
    """What ``ppbn sample`` says after writing: the file and the guarantee the synthetic
    records carry, and a warning (None for a DP release) that they carry none."""
    wrote = f"wrote {path} ({file_format}): {records}"
    dp = guarantee(result)
    if dp is not None:
        epsilon, delta = dp
        return (
            f"{wrote} records of {variables} variables, synthetic records under the "
            f"network's (epsilon, delta)-DP guarantee (epsilon = {epsilon:g}, delta = "
            f"{delta:g}; sampling is post-processing)"
        ), None
    kind = (
        "a PRAM-path release (its privacy figures are per-block gamma, not (epsilon, delta))"
        if isinstance(result.document.get("privacy"), list)
        else "an exact release"
    )
    return f"{wrote} synthetic records of {variables} variables", (
        f"warning: {result.source} is {kind}: no DP guarantee, the synthetic records carry "
        "whatever its CPTs disclose"
    )
