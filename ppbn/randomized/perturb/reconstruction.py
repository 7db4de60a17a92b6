"""One reconstruction as a report: the estimated distribution of randomized columns,
the information loss against the original values when they are known.

``ppbn perturb reconstruct`` reads the files (``ppbn.data.perturb_files``) and prints the
report; the estimators are ``categorical`` (moment, EM) and ``additive`` (Wu). Errors name
the command's flags, since a bad setting is the operator's to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.errors import UserError
from ppbn.randomized.constants import ADDITIVE_METHODS, CATEGORICAL_METHODS
from ppbn.randomized.perturb import additive
from ppbn.randomized.perturb.categorical import reconstruct
from ppbn.randomized.perturb.mechanisms import Mechanisms
from ppbn.randomized.perturb.noise import Noise
from ppbn.randomized.pram.estimators import count_table


@dataclass(frozen=True)
class ReconstructionSettings:
    """How to estimate: ``method`` (None: em for categorical columns, binned-em for
    additive ones); the rest applies to additive columns only."""

    method: str | None = None
    bins: str = "20"  # a number of equal bins over ``value_range``, or the edges "E0,E1,..."
    value_range: tuple[float, float] | None = None
    z_bins: int | None = None
    iterations: int = 100
    tol: float = 1e-6
    harmonics: int = 12
    max_gain: float = 10.0
    start: str = "uniform"  # or "fourier"


def needed_columns(mechanisms: Mechanisms, columns: list[str]) -> list[str]:
    """The columns randomized together with ``columns``: the estimate needs them all."""
    return list(dict.fromkeys(p for c in columns for p in mechanisms.partners(c)))


def reconstruct_categorical(
    mechanisms: Mechanisms,
    columns: list[str],
    codes: np.ndarray,
    method: str | None,
    original: np.ndarray | None = None,
) -> dict[str, Any]:
    """The joint distribution of ``columns`` from the randomized ``codes`` of their
    ``needed_columns`` (one column each); ``original``: the original codes of ``columns``."""
    method = method or "em"
    if method not in CATEGORICAL_METHODS:
        raise UserError(f"--method {method}: {columns[0]!r} is categorical (use moment or em)")
    needed = needed_columns(mechanisms, columns)
    scheme = mechanisms.scheme.restricted(needed)
    estimate = reconstruct(codes, needed, scheme, method, of=columns)
    fractions = estimate.fractions.reshape(-1)
    result: dict[str, Any] = {
        "columns": columns,
        "kind": "categorical",
        "method": method,
        "mechanism": {c: mechanisms.describe(c) for c in columns},
        "records": estimate.records,
        "cells": joint_cells([mechanisms.states[c] for c in columns], columns),
        "randomized": (estimate.randomized.reshape(-1) / estimate.records).tolist(),
        "estimate": fractions.tolist(),
        "estimated_counts": estimate.counts.reshape(-1).tolist(),
    }
    if original is not None:
        cards = tuple(len(mechanisms.states[c]) for c in columns)
        truth = count_table(original, cards).reshape(-1) / len(original)
        result["original"] = truth.tolist()
        result["information_loss"] = additive.information_loss(truth, fractions)
    return result


def joint_cells(states: list[tuple[str, ...]], columns: list[str]) -> list[str]:
    """The labels of a column's states, or of every combination of several columns'."""
    if len(columns) == 1:
        return list(states[0])
    grids = np.array(np.meshgrid(*[np.arange(len(s)) for s in states], indexing="ij"))
    combos = grids.reshape(len(states), -1).T
    return [
        ", ".join(
            f"{c}={states[j][k]}" for j, (c, k) in enumerate(zip(columns, combo, strict=True))
        )
        for combo in combos
    ]


def parse_bins(text: str) -> int | np.ndarray:
    """``--bins``: a positive number of bins, or two or more edges."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        if len(parts) == 1:
            count = int(parts[0])
            if count < 1:
                raise ValueError
            return count
        return np.array([float(p) for p in parts])
    except ValueError:
        raise UserError(
            f"--bins {text!r}: give a positive number of bins or two or more increasing edges"
        ) from None


def reconstruct_additive(
    mechanisms: Mechanisms,
    column: str,
    z: np.ndarray,
    settings: ReconstructionSettings,
    original: np.ndarray | None = None,
) -> dict[str, Any]:
    """The distribution of an additive column's original values on bins, from the
    randomized values ``z``; ``original``: the original values. The estimators'
    ``RandomizationError`` is the caller's to name the files by."""
    method = settings.method or "binned-em"
    if method not in ADDITIVE_METHODS:
        raise UserError(
            f"--method {method}: {column!r} is additive (use em, binned-em, richardson-lucy or fourier)"
        )
    if settings.iterations < 1:
        raise UserError(f"--iterations must be at least 1, got {settings.iterations}")
    noise = mechanisms.noise[column]
    edges = _edges(z, noise, settings)
    z_edges = None
    if settings.z_bins is not None:
        if settings.z_bins < 1:
            raise UserError(f"--z-bins must be at least 1, got {settings.z_bins}")
        z_edges = np.linspace(z.min(), z.max(), settings.z_bins + 1)
    result: dict[str, Any] = {
        "columns": [column],
        "kind": "additive",
        "method": method,
        "mechanism": {column: mechanisms.describe(column)},
        "records": len(z),
    }
    fourier = None
    if method == "fourier" or settings.start == "fourier":
        fourier = additive.fourier_estimate(
            z, noise, edges[0], edges[-1], harmonics=settings.harmonics, max_gain=settings.max_gain
        )
        result["fourier"] = {
            "harmonics": settings.harmonics,
            "max_gain": settings.max_gain,
            "capped_harmonics": list(fourier.capped),
        }
    if method == "fourier":
        estimate = additive.Reconstruction("fourier", edges, fourier.bin_probabilities(edges))
    else:
        start = fourier.bin_probabilities(edges) if fourier is not None else None
        options = {"max_iter": settings.iterations, "tol": settings.tol, "start": start}
        if method == "em":
            estimate = additive.em_individual(z, noise, edges, **options)
        else:
            run = (
                additive.binned_em
                if method == "binned-em"
                else additive.richardson_lucy_reconstruction
            )
            z_edges = additive.z_histogram_edges(z, edges) if z_edges is None else z_edges
            estimate = run(z, noise, edges, z_edges=z_edges, **options)
            result["z_bins"] = len(z_edges) - 1
        result.update(
            {
                "start": settings.start,
                "iterations": estimate.iterations,
                "converged": estimate.converged,
            }
        )
    result.update(
        {
            "edges": edges.tolist(),
            "estimate": estimate.probabilities.tolist(),
            "density": estimate.density.tolist(),
        }
    )
    if original is not None:
        truth = additive.histogram(original, edges)
        outside = int(np.sum((original < edges[0]) | (original > edges[-1])))
        result.update(
            {
                "original": truth.tolist(),
                "original_outside_range": outside,
                "information_loss": additive.information_loss(truth, estimate.probabilities),
            }
        )
    return result


def _edges(z: np.ndarray, noise: Noise, settings: ReconstructionSettings) -> np.ndarray:
    """The estimate's bins: equal ones over the range (default: the data's, narrowed by
    the noise's tails), or the edges given."""
    bins = parse_bins(settings.bins)
    if isinstance(bins, int):
        lo, hi = settings.value_range or additive.default_range(z, noise)
        return additive.uniform_edges(lo, hi, bins)
    if settings.value_range:
        raise UserError("give either --range with a number of --bins, or the bin edges, not both")
    return additive.check_edges(bins)


def reconstruction_title(result: dict[str, Any]) -> str:
    """One line on the report: columns, mechanism, records, method, information loss."""
    loss = result.get("information_loss")
    tail = f", information loss {loss:.4f}" if loss is not None else ""
    mechanism = "; ".join(dict.fromkeys(result["mechanism"].values()))
    return (
        f"{', '.join(result['columns'])} ({mechanism}): {result['records']:,} records, "
        f"{result['method']}{tail}"
    )
