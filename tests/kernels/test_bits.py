"""The compiled bit kernels against their definitions: the transpose against numpy's
unpacked transpose, the SoftSpokenOT fold against the XOR over the rows with each bit set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.kernels.bits import FOLD_TILE_WORDS, fold_leaves, transpose_bits, xor_into_rows


def _unpacked_transpose(matrix: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(matrix, axis=1, bitorder="little")
    return np.packbits(bits.T, axis=1, bitorder="little")


@pytest.mark.parametrize(("rows", "cols"), [(128, 8), (128, 1000 * 8), (16, 24), (8, 8)])
def test_transpose_bits_matches_unpacked_transpose(rows: int, cols: int) -> None:
    rng = np.random.default_rng(rows + cols)
    matrix = rng.integers(0, 256, size=(rows, cols // 8), dtype=np.uint8)
    assert (transpose_bits(matrix) == _unpacked_transpose(matrix)).all()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(1, 16), st.data())
def test_transpose_keeps_the_first_rows_asked_for(groups: int, col_bytes: int, data) -> None:
    """``out_rows`` is the transpose's first rows, also where it ends inside a byte."""
    rng = np.random.default_rng(groups * 100 + col_bytes)
    matrix = rng.integers(0, 256, size=(8 * groups, col_bytes), dtype=np.uint8)
    out_rows = data.draw(st.integers(0, 8 * col_bytes))
    expected = _unpacked_transpose(matrix)[:out_rows]
    assert (transpose_bits(matrix, out_rows) == expected).all()


def test_transpose_refuses_bad_shapes() -> None:
    with pytest.raises(ValueError, match="multiple of 8"):
        transpose_bits(np.zeros((12, 2), dtype=np.uint8))
    with pytest.raises(ValueError, match="out_rows"):
        transpose_bits(np.zeros((8, 2), dtype=np.uint8), 17)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 3 * FOLD_TILE_WORDS + 5))
def test_fold_is_the_xor_over_the_rows_with_each_bit_set(bits: int, width: int) -> None:
    """Any k (2^k rows) and any width, across tile edges."""
    rng = np.random.default_rng(bits * 1000 + width)
    leaves = rng.integers(0, 2**64, size=(1 << bits, width), dtype=np.uint64)
    sums = np.full((bits, width), 7, dtype=np.uint64)
    total = np.full(width, 7, dtype=np.uint64)
    fold_leaves(leaves, sums, total)
    rows = np.arange(1 << bits)
    for bit in range(bits):
        with_bit = leaves[(rows >> bit) & 1 == 1]
        np.testing.assert_array_equal(sums[bit], np.bitwise_xor.reduce(with_bit, axis=0))
    np.testing.assert_array_equal(total, np.bitwise_xor.reduce(leaves, axis=0))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 8), st.integers(1, 40), st.integers(0, 2**32))
def test_xor_into_rows_adds_each_chunk_value_where_set(per_chunk: int, width: int, seed: int):
    rng = np.random.default_rng(seed)
    chunks = 3
    rows = rng.integers(0, 256, size=(chunks * per_chunk, width + 5), dtype=np.uint8)
    where = rng.integers(0, 2, size=chunks * per_chunk).astype(np.uint8)
    values = rng.integers(0, 256, size=(chunks, width), dtype=np.uint8)
    expected = rows.copy()
    for r in np.flatnonzero(where):
        expected[r, :width] ^= values[r // per_chunk]
    xor_into_rows(rows, where, values)
    np.testing.assert_array_equal(rows, expected)
