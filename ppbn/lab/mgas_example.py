"""The dissertation's two-triangle example (Ma 2006, Sec. 2.5 (2), Fig. 2.3; Sec. 3.2.1).

100,000 samples of a two-triangle distribution are discretized by MGAS (at least 1,500
records and granularity 0.25 per group; the text gets 39 groups), each group randomized
to every other with probability (1 - p)/38, p = 0.3, i.e. kept with probability 0.3, and
the group counts are estimated by the moment and the maximum-likelihood (EM) estimators.

The figure holding the distribution is lost. We take two adjacent, equal-weight symmetric
triangles on [0, w] and [w, 2w]. With MGAS as in ``ppbn.bn.discretize`` the group count
grows with w and varies by a few groups from sample to sample (w = 10: 33-38 over ten
samples; w = 11: 36-40; w = 12: 37-42); w = 12 is the width whose typical count is the
text's 39, and is the default here (docs/user-guide.md, "Perturbation").

Distances reported: the information loss 1/2 sum |h - h_hat| between the MGAS group
fractions and their estimate (Wu Sec. 5; it excludes the loss by discretization), its
prediction from Theorem 2's covariance (E|N(0, s^2)| = s sqrt(2/pi) per group), and
the dissertation's integral of |f_X - f_hat| (Sec. 3.2.1), which includes discretization:
f_hat is the piecewise-constant density of the estimated fractions on the group intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.bn.discretize import assign, mgas_cuts
from ppbn.data.outputs import check_output_file
from ppbn.data.perturb_files import plot_mgas
from ppbn.errors import UserError
from ppbn.randomized.perturb.additive import information_loss
from ppbn.randomized.pram.estimators import (
    count_table,
    em_estimate,
    moment_covariance,
    moment_estimate,
)
from ppbn.randomized.pram.operators import (
    Block,
    RandomizationScheme,
    RandomSource,
    multi_category,
)

TEXT_GROUPS = 39


def two_triangle_density(x: np.ndarray, width: float = 12.0) -> np.ndarray:
    """Two symmetric triangles of weight 1/2 on [0, w] and [w, 2w] (peaks w/2 and 3w/2)."""
    x = np.asarray(x, dtype=float)
    half = width / 2
    u = np.mod(x, width)
    inside = (x >= 0) & (x <= 2 * width)
    tent = np.where(u <= half, u, width - u) / (half * half)  # unit-mass tent on [0, w]
    return np.where(inside, 0.5 * tent, 0.0)


def two_triangle_sample(n: int, rng: np.random.Generator, width: float = 12.0) -> np.ndarray:
    """n draws of ``two_triangle_density`` (the data, not the randomization: NumPy is fine)."""
    left = rng.triangular(0.0, width / 2, width, n)
    return np.where(rng.random(n) < 0.5, left, left + width)


@dataclass(frozen=True)
class MgasResult:
    """One run of the example; counts are per MGAS group, in order of the values."""

    seed: int
    width: float
    cuts: np.ndarray
    edges: np.ndarray  # group intervals: data minimum, the cuts, data maximum
    keep: float
    original: np.ndarray
    randomized: np.ndarray
    moment: np.ndarray
    em: np.ndarray
    predicted_loss: float  # E[1/2 sum |N_hat - N|] / N by Theorem 2

    @property
    def groups(self) -> int:
        return len(self.original)

    def loss(self, estimate: np.ndarray) -> float:
        """Information loss of an estimate against the MGAS group fractions."""
        n = self.original.sum()
        return information_loss(self.original / n, np.asarray(estimate) / n)

    def l1_to_density(self, counts: np.ndarray, points: int = 200_000) -> float:
        """Integral of |f_X - f_hat| over [0, 2w], f_hat piecewise constant on the groups."""
        grid = (np.arange(points) + 0.5) * (2 * self.width / points)
        fractions = np.clip(np.asarray(counts, dtype=float), 0.0, None)
        fractions = fractions / fractions.sum()
        inner = np.clip(np.searchsorted(self.edges, grid, side="right") - 1, 0, self.groups - 1)
        inside = (grid >= self.edges[0]) & (grid <= self.edges[-1])
        f_hat = np.where(inside, fractions[inner] / np.diff(self.edges)[inner], 0.0)
        return float(np.abs(two_triangle_density(grid, self.width) - f_hat).mean() * 2 * self.width)

    def summary(self) -> dict[str, float | int]:
        return {
            "seed": self.seed,
            "width": self.width,
            "groups": self.groups,
            "text_groups": TEXT_GROUPS,
            "keep_probability": self.keep,
            "information_loss_moment": self.loss(self.moment),
            "information_loss_em": self.loss(self.em),
            "information_loss_predicted": self.predicted_loss,
            "l1_discretized": self.l1_to_density(self.original),
            "l1_reconstructed_em": self.l1_to_density(self.em),
            "negative_moment_groups": int(np.sum(self.moment < 0)),
        }


def mgas_two_triangle(
    seed: int,
    *,
    n: int = 100_000,
    min_records: int = 1500,
    granularity: float = 0.25,
    keep: float = 0.3,
    width: float = 12.0,
) -> MgasResult:
    """Run the example once: sample, MGAS, M-category randomization, both estimators."""
    rng = np.random.default_rng(seed)
    x = two_triangle_sample(n, rng, width)
    cuts = mgas_cuts(x, min_records, granularity)
    codes = assign(x, cuts)
    groups = len(cuts) + 1
    matrix = multi_category(groups, 1.0 - keep)  # others get (1 - keep)/(K - 1) each
    scheme = RandomizationScheme({"x": groups}, [Block(("x",), (groups,), matrix)])
    randomized = scheme.randomize(codes[:, None], ["x"], RandomSource.from_seed(seed))
    original = count_table(codes[:, None], (groups,))
    observed = count_table(randomized, (groups,))
    operators = [((0,), matrix)]
    sd = np.sqrt(np.clip(np.diag(moment_covariance(original, operators)), 0.0, None))
    predicted = 0.5 * math.sqrt(2 / math.pi) * float(sd.sum()) / n
    edges = np.concatenate([[x.min()], cuts, [x.max()]])
    return MgasResult(
        seed,
        width,
        cuts,
        edges,
        keep,
        original,
        observed,
        moment_estimate(observed, operators),
        em_estimate(observed, operators),
        predicted,
    )


def run_mgas_example(
    first_seed: int = 0,
    seeds: int = 1,
    records: int = 100_000,
    keep: float = 0.3,
    width: float = 12.0,
    plot_path: str | None = None,
) -> dict[str, Any]:
    """``ppbn perturb mgas-example``: one run per seed, summarised, and Fig. 2.3 of the
    first run plotted to ``plot_path`` if given."""
    if seeds < 1 or records < 2 or not (0 < keep <= 1) or not width > 0:
        raise UserError("--seeds >= 1, --records >= 2, 0 < --keep <= 1 and --width > 0 are needed")
    if plot_path:
        check_output_file(plot_path, "--plot")
    rows = []
    for seed in range(first_seed, first_seed + seeds):
        run = mgas_two_triangle(seed, n=records, keep=keep, width=width)
        if plot_path and not rows:
            grid = np.linspace(0, 2 * width, 2001)
            n = run.original.sum()
            plot_mgas(
                plot_path,
                f"two triangles, {records:,} samples, MGAS: {run.groups} groups "
                f"(text: {TEXT_GROUPS}), kept with p = {keep:g}",
                grid,
                two_triangle_density(grid, width),
                run.edges,
                run.original / n / np.diff(run.edges),
                run.em / n / np.diff(run.edges),
            )
        rows.append(run.summary())
    return {"runs": rows, "plot": plot_path}
