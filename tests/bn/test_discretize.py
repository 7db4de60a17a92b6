"""Properties of the discretizers (ppbn.bn.discretize; MGAS: Ma 2006, Ch. 2, Sec. 2.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.bn.discretize import (
    DiscretizationError,
    assign,
    bin_labels,
    check_edges,
    cuts_for,
    equal_width_cuts,
    format_number,
    interval_labels,
    mgas_cuts,
    quantile_cuts,
)

# values with ties on purpose: small integers scaled, plus some spread
values_strategy = st.lists(
    st.one_of(
        st.integers(-50, 50).map(float), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    ),
    min_size=2,
    max_size=300,
).map(lambda xs: np.array(xs, dtype=np.float64))


def _check_codes(values: np.ndarray, cuts: np.ndarray, count: int) -> np.ndarray:
    codes = assign(values, cuts)
    assert codes.min() >= 0 and codes.max() <= count - 1  # codes in range
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(codes[order]) >= 0)  # monotone in the value
    assert np.all(np.diff(cuts) > 0)
    return codes


@settings(max_examples=150, deadline=None)
@given(values_strategy, st.integers(2, 8))
def test_quantile_bins_are_in_range_monotone_and_balanced_within_ties(values, count):
    distinct, multiplicity = np.unique(values, return_counts=True)
    if distinct.size < count:
        with pytest.raises(DiscretizationError, match="distinct values"):
            quantile_cuts(values, count)
        return
    cuts = quantile_cuts(values, count)
    assert cuts.size == count - 1
    codes = _check_codes(values, cuts, count)
    sizes = np.bincount(codes, minlength=count)
    assert np.all(sizes > 0)  # every bin holds records
    n = values.size
    cumulative = np.cumsum(sizes)[:-1]
    # every cut is within the largest run of ties of its ideal position k n / K
    targets = np.arange(1, count) * n / count
    assert np.all(np.abs(cumulative - targets) <= multiplicity.max())
    if multiplicity.max() == 1:  # no ties: sizes differ by at most one
        assert set(sizes.tolist()) <= {n // count, -(-n // count)}


@settings(max_examples=100, deadline=None)
@given(values_strategy, st.integers(2, 8))
def test_equal_width_bins_are_in_range_and_monotone(values, count):
    if np.unique(values).size < count:
        with pytest.raises(DiscretizationError):
            equal_width_cuts(values, count)
        return
    try:
        cuts = equal_width_cuts(values, count)
    except DiscretizationError as exc:  # a range a few ulps wide cannot be cut in K
        assert "too narrow" in str(exc) and values.max() - values.min() < 1e-300
        return
    _check_codes(values, cuts, count)
    widths = np.diff(np.concatenate([[values.min()], cuts, [values.max()]]))
    assert np.allclose(widths, widths[0], rtol=1e-6, atol=1e-9 * max(1.0, abs(values).max()))


@settings(max_examples=150, deadline=None)
@given(values_strategy, st.integers(1, 40), st.sampled_from([0.0, 0.5, 3.0, 100.0]))
def test_mgas_groups_meet_min_records_and_min_granularity(values, min_records, granularity):
    distinct = np.unique(values)
    try:
        cuts = mgas_cuts(values, min_records, granularity)
    except DiscretizationError:  # only when the whole column cannot form one group
        assert values.size < min_records or distinct[-1] - distinct[0] < granularity
        return
    count = cuts.size + 1
    codes = _check_codes(values, cuts, count)
    for k in range(count):
        group = values[codes == k]
        assert group.size >= min_records
        assert group.max() - group.min() >= granularity
    for c in cuts:  # cut points are not record values (unless no float lies between two)
        assert not np.any(values == c) or np.nextafter(values[values < c].max(), np.inf) == c


def test_mgas_merges_the_closest_clusters_first():
    # three tight clumps: with min_records 3 each clump is one group
    values = np.array([1.0, 1.1, 1.2, 5.0, 5.1, 5.2, 9.0, 9.1, 9.3])
    cuts = mgas_cuts(values, 3, 0.0)
    assert cuts.tolist() == [3.0, 7.0]  # midpoints 3.1, 7.1 rounded as far as they stay between
    # a granularity of 4 cannot be met by a clump: neighbouring clumps merge until it is,
    # and a clump left alone (9.x) joins its finished neighbour
    assert mgas_cuts(values, 1, 4.0).size == 0
    four = np.concatenate([values, [13.0, 13.1, 13.2]])
    assert mgas_cuts(four, 1, 4.0).tolist() == [7.0]  # clumps 1+2 and 3+4
    with pytest.raises(DiscretizationError, match="no group can have 10 records"):
        mgas_cuts(values, 10, 0.0)


def test_cut_points_and_labels_are_deterministic():
    assert (
        format_number(18.0) == "18"
        and format_number(0.1) == "0.1"
        and format_number(-2.5) == "-2.5"
    )
    assert interval_labels([18, 35]) == ("x<18", "18<=x<35", "x>=35")
    assert bin_labels(3) == ("bin1", "bin2", "bin3")
    values = np.array([10.0, 20.0, 30.0, 40.0])
    assert quantile_cuts(values, 2).tolist() == [25.0]  # midpoint of the neighbouring values
    assert assign(np.array([24.9, 25.0, 25.1]), np.array([25.0])).tolist() == [0, 1, 1]  # [25, inf)
    assert cuts_for("edges", values, 3, [15, 35]).tolist() == [15.0, 35.0]


@pytest.mark.parametrize(
    ("edges", "count", "message"),
    [
        ([3, 2], 3, "strictly increasing"),
        ([1, 1], 3, "strictly increasing"),
        ([1, 2, 3], 3, "3 bins need 2 edges"),
        ([1, math.inf], 3, "finite"),
    ],
)
def test_bad_edges(edges, count, message):
    with pytest.raises(DiscretizationError, match=message):
        check_edges(edges, count)


def test_a_large_point_mass_keeps_a_bin_of_its_own_and_the_rest_share_evenly():
    """A column that is 83% zero: the zeros fill the first bin and the other three bins
    split the remaining records evenly (not 128 / 124 / 3,019)."""
    rng = np.random.default_rng(7)
    values = np.concatenate([np.zeros(15_909), rng.lognormal(5.0, 1.0, 3_271)])
    cuts = quantile_cuts(values, 4)
    sizes = np.bincount(np.searchsorted(cuts, values, side="right"), minlength=4)
    assert sizes[0] == 15_909
    assert sizes[1:].max() - sizes[1:].min() <= 1
