"""Files of ``ppbn perturb randomize`` and ``reconstruct``: the mechanism file, plain CSVs
(any columns; no schema needed), the reconstruction plots, and the two commands' work on
them (``randomize_file``, ``reconstruct_file``).

Every error is one line naming the file, and the line and column when there is one. The
randomized CSV is written through a temporary file and a rename (``parties.outputs``).
"""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppbn.bn.discretize import format_number
from ppbn.data.outputs import atomic_write_bytes, atomic_write_text, check_output_file
from ppbn.data.party_data import MISSING_CODE, code_column, raw_header, read_csv_cells
from ppbn.errors import DataError, UserError
from ppbn.randomized.perturb.mechanisms import Mechanisms, parse_mechanisms
from ppbn.randomized.perturb.reconstruction import (
    ReconstructionSettings,
    needed_columns,
    reconstruct_additive,
    reconstruct_categorical,
    reconstruction_title,
)
from ppbn.randomized.pram.operators import RandomizationError, RandomSource


def read_mechanisms(path: str | Path) -> Mechanisms:
    """Read and check a mechanism file (format: ``ppbn.randomized.perturb.mechanisms``)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: mechanism file not found")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{p}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: not UTF-8 text") from None
    return parse_mechanisms(data, str(p))


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV as text cells, with the checks of the party loader (row lengths, encoding)."""
    p = Path(path)
    frame = read_csv_cells(p)
    header = raw_header(p)
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise DataError(f"{p}: line 1: column {dupes[0]!r} appears more than once")
    return frame


def column_values(
    path: str | Path, frame: pd.DataFrame, column: str, mechanisms: Mechanisms
) -> np.ndarray:
    """One column as its mechanism reads it: state codes 0..K-1 (categorical) or floats
    (additive). An empty cell, a value outside the declared states or a non-number is a
    one-line error naming the file, line and column."""
    p = Path(path)
    if column not in frame.columns:
        raise DataError(f"{p}: line 1: no column {column!r}")
    raw = frame[column]
    if mechanisms.is_additive(column):
        numbers = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(numbers))
        if bad.size:
            row = int(bad[0])
            raise DataError(
                f"{p}: line {row + 2}, column {column!r}: value {raw.iloc[row]!r} is not a finite "
                "number (the column has additive noise)"
            )
        return numbers
    codes = code_column(p, raw, column, mechanisms.states[column])
    empty = np.flatnonzero(codes == MISSING_CODE)
    if empty.size:
        raise DataError(f"{p}: line {int(empty[0]) + 2}, column {column!r}: empty cell")
    return codes


def write_randomized(
    path: str | Path,
    frame: pd.DataFrame,
    randomized: Mapping[str, np.ndarray],
    mechanisms: Mechanisms,
) -> None:
    """``frame`` with the randomized columns replaced (states by name, numbers in their
    shortest round-trip form), written atomically."""
    out = frame.copy()
    for column, values in randomized.items():
        if mechanisms.is_additive(column):
            out[column] = [format_number(v) for v in values]
        else:
            out[column] = np.array(mechanisms.states[column], dtype=object)[values]
    atomic_write_text(path, out.to_csv(index=False))


def _save(fig, path: str | Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png", dpi=110)
    atomic_write_bytes(path, buffer.getvalue())


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_categorical(
    path: str | Path,
    title: str,
    cells: Sequence[str],
    randomized: np.ndarray,
    estimate: np.ndarray,
    original: np.ndarray | None,
) -> None:
    """Bars per state (or state combination): randomized, reconstructed, original."""
    plt = _pyplot()
    series = [("randomized (as received)", randomized, "C7"), ("reconstructed", estimate, "C0")]
    if original is not None:
        series.append(("original", original, "C2"))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(cells) * len(series)), 4.2))
    width = 0.8 / len(series)
    for k, (label, values, color) in enumerate(series):
        ax.bar(
            np.arange(len(cells)) + (k - (len(series) - 1) / 2) * width,
            values,
            width,
            label=label,
            color=color,
        )
    turn = len(cells) > 6
    ax.set_xticks(
        range(len(cells)), cells, rotation=30 if turn else 0, ha="right" if turn else "center"
    )
    ax.set_ylabel("fraction of records")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.legend(fontsize=8)
    ax.set_title(textwrap.fill(title, 90), fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_additive(
    path: str | Path,
    title: str,
    z: np.ndarray,
    edges: np.ndarray,
    density: np.ndarray,
    original: np.ndarray | None,
) -> None:
    """The histogram of the randomized values against the reconstructed density (steps on
    the bins) and the original values' histogram on the same bins."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.hist(
        z,
        bins=min(100, max(10, len(edges) * 2)),
        density=True,
        color="C7",
        alpha=0.45,
        label="randomized values (as received)",
    )
    ax.stairs(density, edges, color="C0", linewidth=2, label="reconstructed")
    if original is not None:
        counts, _ = np.histogram(np.clip(original, edges[0], edges[-1]), bins=edges)
        ax.stairs(
            counts / counts.sum() / np.diff(edges),
            edges,
            color="C2",
            linewidth=1.5,
            linestyle="--",
            label="original",
        )
    ax.set_ylim(0, 1.25 * ax.get_ylim()[1])  # room for the legend
    _finish_density_plot(plt, fig, ax, title, path)


def _finish_density_plot(plt, fig, ax, title: str, path: str | Path) -> None:
    """Label, title and save a density plot, then free it."""
    ax.set_ylabel("density")
    ax.legend(fontsize=8, loc="upper center", ncols=3)
    ax.set_title(textwrap.fill(title, 90), fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def plot_mgas(
    path: str | Path,
    title: str,
    grid: np.ndarray,
    truth: np.ndarray,
    edges: np.ndarray,
    discretized: np.ndarray,
    reconstructed: np.ndarray,
) -> None:
    """Dissertation Fig. 2.3: the density, after MGAS, and reconstructed after PRAM."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.plot(grid, truth, color="black", linewidth=1, label="two-triangle density")
    ax.stairs(discretized, edges, color="C2", linewidth=1.5, label="after MGAS")
    ax.stairs(
        reconstructed,
        edges,
        color="C0",
        linewidth=1.5,
        linestyle="--",
        label="reconstructed (EM) after randomization",
    )
    ax.set_ylim(0, 1.35 * max(truth.max(), discretized.max(), reconstructed.max()))
    ax.set_xlabel("x")
    _finish_density_plot(plt, fig, ax, title, path)


def randomize_file(
    input_path: str,
    mechanism_path: str,
    out_path: str,
    seed: int | None = None,
    columns: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Randomize ``columns`` of a CSV (None: every column the mechanism file describes)
    and write the result atomically; the report says what was done to each column."""
    check_output_file(out_path)
    mechanisms = read_mechanisms(mechanism_path)
    frame = read_table(input_path)
    if columns is not None:
        for c in columns:
            if c not in mechanisms.columns:
                raise UserError(f"--columns: {c!r} has no mechanism in {mechanism_path}")
    else:
        columns = list(mechanisms.columns)
    values = {c: column_values(input_path, frame, c, mechanisms) for c in columns}
    source = RandomSource() if seed is None else RandomSource.from_seed(seed)
    try:
        randomized = mechanisms.randomize(values, source)
    except RandomizationError as exc:
        raise UserError(f"--columns: {exc}") from None
    write_randomized(out_path, frame, randomized, mechanisms)
    return {
        "out": out_path,
        "records": len(frame),
        "columns": {c: mechanisms.describe(c) for c in columns},
        "seed": seed,
    }


def reconstruct_file(
    input_path: str,
    mechanism_path: str,
    columns: Sequence[str],
    settings: ReconstructionSettings,
    original_path: str | None = None,
    plot_path: str | None = None,
) -> dict[str, Any]:
    """Reconstruct the distribution of randomized columns of a CSV (all categorical, or one
    additive), against the original CSV if given, and plot it if asked."""
    if plot_path:
        check_output_file(plot_path, "--plot")
    mechanisms = read_mechanisms(mechanism_path)
    columns = list(dict.fromkeys(columns))
    for c in columns:
        if c not in mechanisms.columns:
            raise UserError(f"--column {c!r}: no mechanism for it in {mechanism_path}")
    frame = read_table(input_path)
    additive = [c for c in columns if mechanisms.is_additive(c)]
    if additive and len(columns) > 1:
        raise UserError(f"--column {additive[0]!r} is additive: reconstruct it on its own")
    truth = read_table(original_path) if original_path else None

    def read_original(column: str) -> np.ndarray:
        return column_values(str(original_path), truth, column, mechanisms)

    if additive:
        column = columns[0]
        z = column_values(input_path, frame, column, mechanisms)
        original = read_original(column) if truth is not None else None
        try:
            result = reconstruct_additive(mechanisms, column, z, settings, original)
        except RandomizationError as exc:  # the estimators' errors: name the column and files
            raise UserError(f"{input_path}, column {column!r} ({mechanism_path}): {exc}") from None
        if plot_path:
            edges, density = np.asarray(result["edges"]), np.asarray(result["density"])
            title = reconstruction_title(result)
            plot_additive(plot_path, title, z, edges, density, original)
    else:
        needed = needed_columns(mechanisms, columns)
        codes = np.column_stack([column_values(input_path, frame, c, mechanisms) for c in needed])
        original = (
            np.column_stack([read_original(c) for c in columns]) if truth is not None else None
        )
        result = reconstruct_categorical(mechanisms, columns, codes, settings.method, original)
        if plot_path:
            plot_categorical(
                plot_path,
                reconstruction_title(result),
                result["cells"],
                np.asarray(result["randomized"]),
                np.asarray(result["estimate"]),
                np.asarray(result["original"]) if original is not None else None,
            )
    if plot_path:
        result["plot"] = plot_path
    return result
