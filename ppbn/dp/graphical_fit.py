"""A graphical model fitted to noisy marginals with private-pgm (``mbi``): the
post-processing step of the marginal-based releases (docs/security-dp.md).

Private-PGM (McKenna, Sheldon and Miklau 2019, "Graphical-model based estimation and
inference for differential privacy") finds the distribution of a Markov random field on
the measured cliques whose marginals are closest, in noise-weighted L2, to the noisy
measurements. It reads only released values, so it costs no privacy. The curator's MST
and AIM of ``ppbn bench dp`` fit with it, and so does the two-party marginal release.

    model = fit_marginals({"a": 2, "b": 3}, [Measured(("a", "b"), noisy, 4.0)], 1000)
    table = marginal(model, ("a",))
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

FIT_ITERATIONS = 3000  # mirror-descent steps; the fits of the bundled networks settle well before
MAX_JOINT_CELLS = 2**24  # the largest domain whose full joint ``joint_counts`` builds


@dataclass(frozen=True)
class Measured:
    """One released marginal: the counts of ``clique`` (C order over its variables'
    states) plus noise of standard deviation ``stddev``."""

    clique: tuple[str, ...]
    noisy: np.ndarray
    stddev: float


@cache
def load_mbi() -> Any:
    """Import ``mbi`` with JAX in double precision (its own warning: float32 stalls on large
    counts) and without JAX's persistent compilation cache (its other warning). Once per
    process: JAX reads its configuration before the first array."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import mbi
    return mbi


def fit_marginals(
    domain: Mapping[str, int],
    measurements: Sequence[Measured],
    total: float,
    iterations: int = FIT_ITERATIONS,
) -> Any:
    """The Markov random field over ``domain`` (name -> number of states, in column order)
    that best explains ``measurements``, its total fixed at ``total`` (the record count is
    public). Deterministic: the same measurements give the same model."""
    mbi = load_mbi()
    names = tuple(domain)
    space = mbi.Domain(names, tuple(int(domain[v]) for v in names))
    for m in measurements:
        expected = int(np.prod([domain[v] for v in m.clique]))
        if np.size(m.noisy) != expected:
            raise ValueError(
                f"the marginal of {', '.join(m.clique)} has {np.size(m.noisy)} cells, not {expected}"
            )
    linear = [
        mbi.LinearMeasurement(
            np.asarray(m.noisy, dtype=np.float64).reshape(-1), tuple(m.clique), float(m.stddev)
        )
        for m in measurements
    ]
    return mbi.estimation.MirrorDescent().estimate(
        space, linear, known_total=float(total), iters=iterations
    )


def marginal(model: Any, clique: Sequence[str]) -> np.ndarray:
    """The model's counts over ``clique``, shaped by its variables' states in that order."""
    factor = model.project(tuple(clique))
    return np.asarray(factor.transpose(tuple(clique)).datavector(flatten=False), dtype=np.float64)


def joint_counts(model: Any, names: Sequence[str]) -> np.ndarray:
    """The model's counts over every variable (axes in ``names`` order), from its log
    potentials: exp(sum of potentials), scaled to the model's total."""
    shape = tuple(model.domain.size(v) for v in names)
    cells = int(np.prod(shape))
    if cells > MAX_JOINT_CELLS:
        raise ValueError(
            f"the model's full joint would have {cells:,} cells, more than {MAX_JOINT_CELLS:,}"
        )
    log = np.zeros(shape)
    for clique, factor in model.potentials.tables.items():
        values = np.asarray(factor.transpose(tuple(v for v in names if v in clique)).values)
        log = log + values.reshape([shape[i] if v in clique else 1 for i, v in enumerate(names)])
    log -= log.max()
    joint = np.exp(log)
    return joint * (float(model.total) / joint.sum())


def project(joint: np.ndarray, names: Sequence[str], clique: Sequence[str]) -> np.ndarray:
    """The joint's counts over ``clique`` (C order over its variables), flattened."""
    axes = [list(names).index(v) for v in clique]
    others = tuple(i for i in range(joint.ndim) if i not in axes)
    summed = joint.sum(axis=others)  # the kept axes stay in column order
    order = np.argsort(axes)
    return np.transpose(summed, np.argsort(order)).ravel()


def synthetic_codes(model: Any, names: Sequence[str], rows: int, seed: int) -> np.ndarray:
    """``rows`` records drawn from ``model`` (rows x len(names), each cell a state index),
    by private-pgm's own generator, seeded through numpy's global stream it uses."""
    np.random.seed(seed)
    data = model.synthetic_data(rows, method="sample")
    frame = data.to_dict()
    return np.column_stack([np.asarray(frame[v]) for v in names]).astype(np.int64)


def forget_compiled() -> None:
    """Drop JAX's compiled programs (private-pgm compiles one per fit shape). A process that
    fits many shapes (``ppbn bench dp`` over networks and seeds) grows by megabytes a second
    while it keeps them; a long matrix died of it (LLVM: cannot allocate memory). Nothing to
    do before the first fit."""
    import sys

    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
