"""Z_2^128 vectors: every operation agrees with Python integers mod 2^128."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.protocols import ring

M = ring.MODULUS
EDGES = [0, 1, 2, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 2**64, 2**127 - 1, 2**127, M - 1]
elements = st.one_of(st.integers(0, M - 1), st.sampled_from(EDGES))
vectors = st.lists(elements, min_size=1, max_size=40)
pairs = st.lists(st.tuples(elements, elements), min_size=1, max_size=40)


def signed(v: int) -> int:
    return v - M if v >= M // 2 else v


@given(st.lists(st.integers(-(2**200), 2**200), max_size=30))
@settings(max_examples=60, deadline=None)
def test_int_round_trip_reduces_mod_2_128(values):
    x = ring.from_ints(values)
    assert x.shape == (len(values), 2) and x.dtype == np.uint64
    assert ring.to_ints(x) == [v % M for v in values]
    assert ring.to_signed(x) == [signed(v % M) for v in values]


@given(pairs)
@settings(max_examples=120, deadline=None)
def test_add_sub_neg_mul(pairs_):
    a, b = (list(t) for t in zip(*pairs_, strict=True))
    x, y = ring.from_ints(a), ring.from_ints(b)
    assert ring.to_ints(ring.add(x, y)) == [(p + q) % M for p, q in zip(a, b, strict=True)]
    assert ring.to_ints(ring.sub(x, y)) == [(p - q) % M for p, q in zip(a, b, strict=True)]
    assert ring.to_ints(ring.neg(x)) == [(-p) % M for p in a]
    assert ring.to_ints(ring.mul(x, y)) == [(p * q) % M for p, q in zip(a, b, strict=True)]


@given(vectors, st.integers(-(2**130), 2**130))
@settings(max_examples=80, deadline=None)
def test_mul_by_public_int(values, c):
    got = ring.to_ints(ring.mul_int(ring.from_ints(values), c))
    assert got == [(v * c) % M for v in values]


@given(vectors, st.integers(0, 127))
@settings(max_examples=80, deadline=None)
def test_shifts(values, s):
    x = ring.from_ints(values)
    assert ring.to_ints(ring.shl(x, s)) == [(v << s) % M for v in values]
    assert ring.to_signed(ring.sar(x, s)) == [signed(v) >> s for v in values]


@given(st.lists(st.tuples(elements, st.integers(0, 127)), min_size=1, max_size=40))
@settings(max_examples=60, deadline=None)
def test_shift_per_element(items):
    values, shifts = (list(t) for t in zip(*items, strict=True))
    got = ring.to_ints(ring.shl(ring.from_ints(values), np.array(shifts)))
    assert got == [(v << s) % M for v, s in zip(values, shifts, strict=True)]


def test_shift_out_of_range_is_refused():
    with pytest.raises(ValueError):
        ring.shl(ring.from_ints([1]), 128)
    with pytest.raises(ValueError):
        ring.sar(ring.from_ints([1]), -1)


@given(
    st.lists(vectors.filter(lambda v: len(v) >= 3).map(lambda v: v[:3]), min_size=1, max_size=12)
)
@settings(max_examples=60, deadline=None)
def test_sum_along_each_axis(rows):
    x = np.stack([ring.from_ints(r) for r in rows])  # (rows, 3, 2)
    assert ring.to_ints(ring.sum(x, axis=0)) == [sum(c) % M for c in zip(*rows, strict=True)]
    assert ring.to_ints(ring.sum(x, axis=1)) == [sum(r) % M for r in rows]


def test_sum_of_many_maximal_elements_carries():
    x = ring.from_ints([M - 1] * 5000)
    assert ring.to_ints(ring.sum(x)) == [(5000 * (M - 1)) % M]


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=30))
@settings(max_examples=40, deadline=None)
def test_uint64_embedding(values):
    a = np.array(values, dtype=np.uint64)
    assert ring.to_ints(ring.from_uint64(a)) == values
    assert ring.to_signed(ring.from_uint64(a, signed=True)) == [
        v - 2**64 if v >= 2**63 else v for v in values
    ]
    assert ring.to_uint64(ring.from_ints(values)).tolist() == values


@given(vectors)
@settings(max_examples=40, deadline=None)
def test_bits_are_little_endian(values):
    b = ring.bits(ring.from_ints(values))
    assert b.shape == (len(values), 128)
    for v, row in zip(values, b, strict=True):
        assert sum(int(bit) << i for i, bit in enumerate(row)) == v


def test_to_float_reads_signed_fixed_point():
    x = ring.from_ints([3 << 48, -(5 << 47), 1])
    assert ring.to_float(x, 48).tolist() == [3.0, -2.5, 2.0**-48]


def test_constant_broadcasts():
    x = ring.from_ints([1, 2, 3])
    assert ring.to_ints(ring.add(x, ring.constant(-1))) == [0, 1, 2]


def test_bad_layout_is_refused():
    with pytest.raises(ValueError, match="uint64"):
        ring.add(np.zeros((3, 2), dtype=np.int64), np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="uint64"):
        ring.add(np.zeros((3, 3), dtype=np.uint64), np.zeros((3, 3), dtype=np.uint64))


def test_random_ring_ranges_and_spread():
    rnd = ring.RandomRing()
    u = ring.to_ints(rnd.uniform(4000))
    assert len(set(u)) == 4000
    assert 0.2 < sum(v >> 127 for v in u) / 4000 < 0.8  # top bit is used
    small = ring.to_signed(rnd.signed_below(4000, 20))
    assert min(small) >= -(2**19) and max(small) < 2**19
    assert min(small) < -(2**18) and max(small) > 2**18
    with pytest.raises(ValueError):
        rnd.signed_below(1, 129)
