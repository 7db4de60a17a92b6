"""Discretizing one continuous column into K ordered bins (pure numpy, no I/O).

Only the owner of a continuous variable runs this, on its own values, at load time: the
bins become the variable's states, coded 0..K-1 like any categorical state. Every method
returns the K-1 interior cut points c_1 < ... < c_{K-1}; bin k is [c_k, c_{k+1}) with
c_0 = -inf and c_K = +inf, so a value on a cut point goes to the upper bin.

Methods:

- ``quantile``: cuts between distinct values, each as close as possible to the k/K
  quantile (a run of tied values is never split, so bins are balanced up to ties).
- ``equal-width``: K equal intervals between the smallest and largest value.
- ``mgas``: the Modified Agglomerative Scheme of Ma's dissertation (Ch. 2, Sec. 2.3,
  "Implementing PRAM to Discretized Quantitative Data"): agglomerative clustering that
  sets aside every group meeting both privacy requirements, a minimum number of records
  (K-anonymity) and a minimum granularity (the smallest interval width). See
  ``mgas_cuts`` for the two points where the dissertation is silent.
- ``edges``: cut points given by the owner.

Cut points from data (quantile, mgas) are midpoints between neighbouring distinct values,
rounded to as few decimals as keep them strictly between, so they are not themselves
record values.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

METHODS = ("quantile", "equal-width", "mgas", "edges")


class DiscretizationError(ValueError):
    """The values cannot be cut as asked; the caller adds file and column."""


def _finite_sorted(values: np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise DiscretizationError("no values to discretize")
    if not np.all(np.isfinite(x)):
        raise DiscretizationError("values must be finite numbers")
    return np.sort(x)


def _between(lo: float, hi: float) -> float:
    """A cut strictly between neighbouring values ``lo`` < ``hi``: their midpoint, rounded to
    the fewest decimals that keep it strictly between (readable labels); ``hi`` itself
    only when no float lies strictly between."""
    mid = lo + (hi - lo) / 2.0
    for digits in range(-15, 18):
        c = round(mid, digits)
        if lo < c < hi:
            return float(c)
    return mid if lo < mid < hi else hi


def check_enough_distinct(values: np.ndarray, count: int) -> None:
    """K bins need at least K distinct values (otherwise some bin is empty by construction)."""
    distinct = int(np.unique(np.asarray(values, dtype=np.float64)).size)
    if distinct < count:
        raise DiscretizationError(f"only {distinct} distinct values for {count} bins")


def quantile_cuts(values: np.ndarray, count: int) -> np.ndarray:
    """Cut k (k = 1..K-1) at the boundary between distinct values whose cumulative count is
    nearest to k n / K, keeping every bin non-empty. Once a run of tied values has carried
    a cut past its place, the next cuts share the records not yet placed evenly: a large
    point mass (a column that is mostly zero) fills a bin of its own and the other bins
    split the rest, instead of two almost empty bins and one holding the rest. Without ties
    the bin sizes are floor(n/K) or ceil(n/K)."""
    x = _finite_sorted(values)
    check_enough_distinct(x, count)
    distinct, counts = np.unique(x, return_counts=True)
    cum = np.cumsum(counts)  # records up to and including distinct value j
    d, n = distinct.size, x.size
    cuts = []
    prev = -1
    for k in range(1, count):
        low, high = prev + 1, d - 1 - (count - k)  # boundary "after j" must leave room for the rest
        placed = int(cum[prev]) if prev >= 0 else 0
        target = k * n / count
        if placed > (k - 1) * n / count + 1:  # a run of ties carried the last cut past its place
            target = placed + (n - placed) / (count - k + 1)
        i = int(np.searchsorted(cum, target))
        best = None
        for j in (i - 1, i):
            j = min(max(j, low), high)
            if best is None or abs(cum[j] - target) < abs(cum[best] - target):
                best = j
        assert best is not None
        cuts.append(_between(float(distinct[best]), float(distinct[best + 1])))
        prev = best
    return np.array(cuts, dtype=np.float64)


def equal_width_cuts(values: np.ndarray, count: int) -> np.ndarray:
    """K equal intervals over [min, max] (empty bins are possible when values cluster)."""
    x = _finite_sorted(values)
    check_enough_distinct(x, count)
    lo, hi = float(x[0]), float(x[-1])
    cuts = np.array([lo + (hi - lo) * k / count for k in range(1, count)], dtype=np.float64)
    if np.any(np.diff(cuts) <= 0) or cuts[0] <= lo:
        raise DiscretizationError(
            f"the range [{lo!r}, {hi!r}] is too narrow for {count} equal bins"
        )
    return cuts


def mgas_cuts(values: np.ndarray, min_records: int, min_granularity: float) -> np.ndarray:
    """MGAS (Ma 2006, Ch. 2, Sec. 2.3, steps (a)-(d)) in one dimension.

    Start from one cluster per distinct value (equal values are at distance 0, so the
    scheme's first merges would join them anyway); repeatedly merge the two closest
    clusters (Euclidean distance between cluster means); after each merge set aside, as
    final, any cluster with at least ``min_records`` records and a granularity (its value
    span, max - min) of at least ``min_granularity``; stop when no two unfinished clusters
    remain to merge.

    Two decisions the dissertation leaves open, made so that every group is an interval:
    (1) only neighbouring unfinished clusters merge (a merge across a finished group would
    make a group that is not an interval); (2) an unfinished cluster left with no
    unfinished neighbour joins its nearer finished neighbour (by mean), which keeps both
    requirements met. If no group can meet them at all, it is an error.
    """
    if min_records < 1:
        raise DiscretizationError("mgas: min_records must be at least 1")
    if not min_granularity >= 0:
        raise DiscretizationError("mgas: min_granularity must be >= 0")
    x = _finite_sorted(values)
    distinct, counts = np.unique(x, return_counts=True)
    d = distinct.size
    at = distinct.tolist()  # plain floats: the loop below is scalar work
    lo = list(range(d))  # cluster c (identified by its first distinct index) spans lo[c]..hi[c]
    hi = list(range(d))
    size = counts.astype(np.int64).tolist()
    total = (distinct * counts).tolist()
    prev = [i - 1 for i in range(d)]
    nxt = [i + 1 if i + 1 < d else -1 for i in range(d)]
    alive = [True] * d
    final = [False] * d
    version = [0] * d

    def meets(c: int) -> bool:
        return size[c] >= min_records and at[hi[c]] - at[lo[c]] >= min_granularity

    def mean(c: int) -> float:
        return total[c] / size[c]

    heap: list[tuple[float, int, int, int, int]] = []

    def push(left: int, right: int) -> None:
        heapq.heappush(heap, (mean(right) - mean(left), left, right, version[left], version[right]))

    for c in range(d):
        final[c] = meets(c)
    for c in range(d - 1):
        if not final[c] and not final[c + 1]:
            push(c, c + 1)
    while heap:
        _, left, right, v_left, v_right = heapq.heappop(heap)
        if not (alive[left] and alive[right]) or (v_left, v_right) != (
            version[left],
            version[right],
        ):
            continue
        if final[left] or final[right] or nxt[left] != right:
            continue
        _absorb(left, right, hi, size, total, nxt, prev, alive)
        version[left] += 1
        if meets(left):
            final[left] = True
            continue
        if prev[left] >= 0 and not final[prev[left]]:
            push(prev[left], left)
        if nxt[left] >= 0 and not final[nxt[left]]:
            push(left, nxt[left])
    if not any(final[c] for c in range(d) if alive[c]):
        span = float(distinct[-1] - distinct[0])
        raise DiscretizationError(
            f"mgas: no group can have {min_records} records and granularity {min_granularity!r} "
            f"({x.size} records spanning {span!r})"
        )
    c = 0
    while c >= 0:  # leftovers join their nearer finished neighbour, left to right
        following = nxt[c]
        if alive[c] and not final[c]:
            left, right = prev[c], nxt[c]
            go_left = right < 0 or (left >= 0 and mean(c) - mean(left) <= mean(right) - mean(c))
            if go_left:
                _absorb(left, c, hi, size, total, nxt, prev, alive)
            else:
                _absorb_into_right(c, right, lo, size, total, nxt, prev, alive)
        c = following
    cuts = []
    c = 0 if alive[0] else nxt[0]
    while c >= 0 and nxt[c] >= 0:
        cuts.append(_between(at[hi[c]], at[lo[nxt[c]]]))
        c = nxt[c]
    return np.array(cuts, dtype=np.float64)


def _absorb(
    left: int, right: int, hi: list, size: list, total: list, nxt: list, prev: list, alive: list
) -> None:
    """Merge cluster ``right`` into its left neighbour ``left`` (which keeps its id)."""
    hi[left] = hi[right]
    size[left] += size[right]
    total[left] += total[right]
    nxt[left] = nxt[right]
    if nxt[right] >= 0:
        prev[nxt[right]] = left
    alive[right] = False


def _absorb_into_right(
    left: int, right: int, lo: list, size: list, total: list, nxt: list, prev: list, alive: list
) -> None:
    """Merge cluster ``left`` into its right neighbour ``right`` (which keeps its id)."""
    lo[right] = lo[left]
    size[right] += size[left]
    total[right] += total[left]
    prev[right] = prev[left]
    if prev[left] >= 0:
        nxt[prev[left]] = right
    alive[left] = False


def check_edges(edges: Sequence[float], count: int | None = None) -> tuple[float, ...]:
    """Given cut points: finite, strictly increasing, and K-1 of them when K is given."""
    out = tuple(float(e) for e in edges)
    if not all(math.isfinite(e) for e in out):
        raise DiscretizationError("edges must be finite numbers")
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise DiscretizationError("edges must be strictly increasing")
    if count is not None and len(out) != count - 1:
        raise DiscretizationError(
            f"{count} bins need {count - 1} edges (interior cut points), got {len(out)}"
        )
    return out


def cuts_for(
    method: str,
    values: np.ndarray,
    count: int,
    edges: Sequence[float] | None = None,
    min_records: int | None = None,
    min_granularity: float = 0.0,
) -> np.ndarray:
    """The cut points of ``method`` for these values (mgas: whatever number of groups it
    yields; the caller compares it with the declared count)."""
    if method == "quantile":
        return quantile_cuts(values, count)
    if method == "equal-width":
        return equal_width_cuts(values, count)
    if method == "mgas":
        if min_records is None:
            raise DiscretizationError("mgas needs 'min_records'")
        return mgas_cuts(values, min_records, min_granularity)
    if method == "edges":
        if edges is None:
            raise DiscretizationError("method 'edges' needs the 'edges' list")
        check_enough_distinct(values, count)
        return np.array(check_edges(edges, count), dtype=np.float64)
    raise DiscretizationError(f"unknown method {method!r} (one of {', '.join(METHODS)})")


def assign(values: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Bin index of each value: k such that c_k <= x < c_{k+1} (int64, 0..len(cuts))."""
    return np.searchsorted(
        np.asarray(cuts, dtype=np.float64), np.asarray(values, dtype=np.float64), side="right"
    ).astype(np.int64)


def format_number(x: float) -> str:
    """Deterministic, round-trippable text of a cut point: integers without '.0', else
    Python's shortest repr."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def interval_labels(cuts: Sequence[float]) -> tuple[str, ...]:
    """State names of the bins for whoever knows the cut points: 'x<18', '18<=x<35',
    'x>=35'. Interval brackets such as '[18, 35)' would be clearer, but ',', '(' and ')'
    cannot appear in a BIF state name, and the same names go into BIF and JSON."""
    text = [format_number(c) for c in cuts]
    if not text:
        return ("x",)
    labels = [f"x<{text[0]}"]
    labels += [f"{a}<=x<{b}" for a, b in zip(text, text[1:], strict=False)]
    labels.append(f"x>={text[-1]}")
    return tuple(labels)


def bin_labels(count: int) -> tuple[str, ...]:
    """The public state names of a continuous variable: bin1..binK."""
    return tuple(f"bin{k}" for k in range(1, count + 1))
