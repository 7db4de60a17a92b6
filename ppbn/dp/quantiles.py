"""Cut points of a continuous column under differential privacy, for a DP release.

A column binned at its exact quantiles (or between its exact extremes) makes the binning
itself a function of every record: one changed value can move a cut point, shift other
records into another bin, and show through the cut points that label the states. A DP
job therefore cuts each data-dependent column again (``needs_private_cuts``), each cut
point the private quantile of OpenDP (``make_private_quantile``: the exponential mechanism
over candidate cut points scored by how far their rank is from the quantile's; Smith 2011,
permute-and-flip of McKenna and Sheldon 2020) at quantile k / K for k = 1 .. K - 1.

The candidates are fixed before any record is read (``CANDIDATES``): zero and every number
of three significant digits from 1e-6 to 9.99e9 in magnitude, of either sign, so the cut
points read well and depend on the data only through the mechanism. A value beyond the
grid falls into the first or last bin. Sorting the K - 1 draws and moving a repeated one up
to the next candidate (so no bin is empty by construction) is post-processing.

Neighbours differ in one record's values (docs/security-dp.md), a symmetric distance of 2
on the column with its size known; each cut point's epsilon is OpenDP's privacy map at
that distance, and the cut points of a job add up by sequential composition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np

# each private cut point's share of a DP job's epsilon, and the most all of them may take:
# a cut point drawn with less is far from its quantile unless the records are many (the
# mechanism's error in rank is about 2 ln(len(candidates())) / epsilon)
CUT_SHARE, MAX_BINS_SHARE = 0.05, 0.5


def bins_share(cuts: int) -> float:
    """The share of a DP job's epsilon its ``cuts`` private cut points take together."""
    return min(MAX_BINS_SHARE, CUT_SHARE * cuts)


DATA_DEPENDENT_METHODS = ("quantile", "equal-width", "mgas")  # ``bn.discretize.METHODS``
NEIGHBOUR_DISTANCE = 2  # one record's value replaced: one removed, one added
SIGNIFICANT = 3
EXPONENTS = range(-6, 10)


@cache
def candidates() -> tuple[float, ...]:
    """The fixed grid of cut points a private quantile chooses from, ascending."""
    mantissas = [
        m / 10 ** (SIGNIFICANT - 1) for m in range(10 ** (SIGNIFICANT - 1), 10**SIGNIFICANT)
    ]
    magnitudes = {round(m * 10.0**e, SIGNIFICANT - 1 - e) for e in EXPONENTS for m in mantissas}
    return tuple(sorted({0.0, *magnitudes, *(-x for x in magnitudes)}))


def needs_private_cuts(method: str) -> bool:
    """Whether a bins method places its cut points from the records (else the owner gave them)."""
    return method in DATA_DEPENDENT_METHODS


def _quantile(n: int, alpha: float, scale: float):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n), dp.symmetric_distance()
    return dp.m.make_private_quantile(
        *space, dp.max_divergence(), candidates=list(candidates()), alpha=alpha, scale=scale
    )


def scale_for(n: int, epsilon: float) -> float:
    """The noise scale at which one private quantile of ``n`` values is ``epsilon``-DP for
    one record's change (OpenDP's map is inversely proportional to the scale)."""
    if not epsilon > 0:
        raise ValueError("each cut point needs an epsilon above 0")
    at_one = float(_quantile(n, 0.5, 1.0).map(NEIGHBOUR_DISTANCE))
    return at_one / epsilon * (1 + 1e-9)


def private_cuts(values: np.ndarray, count: int, epsilon_per_cut: float) -> tuple[float, ...]:
    """K - 1 = ``count`` - 1 increasing cut points of ``values`` (finite numbers), each an
    ``epsilon_per_cut``-DP quantile (OpenDP's map checked at the scale used)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("private cut points need finite values")
    n = int(x.size)
    scale = scale_for(n, epsilon_per_cut)
    data = x.tolist()
    draws = []
    for k in range(1, count):
        mechanism = _quantile(n, k / count, scale)
        if mechanism.map(NEIGHBOUR_DISTANCE) > epsilon_per_cut * (1 + 1e-6):
            raise ValueError("OpenDP's map of a cut point is above its epsilon")
        draws.append(float(mechanism(data)))
    return increasing(draws)


def increasing(draws: Sequence[float]) -> tuple[float, ...]:
    """Sorted, each repeated cut moved up to the next candidate (post-processing)."""
    grid = candidates()
    out: list[float] = []
    for cut in sorted(draws):
        if out and cut <= out[-1]:
            index = min(int(np.searchsorted(grid, out[-1], side="right")), len(grid) - 1)
            cut = grid[index] if grid[index] > out[-1] else math.nextafter(out[-1], math.inf)
        out.append(cut)
    return tuple(out)
