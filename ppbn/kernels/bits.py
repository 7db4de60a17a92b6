"""Bit-matrix kernels of the OT extension (``ppbn.protocols.ot``): the SoftSpokenOT fold of
each chunk's leaf streams, the 128 x m bit transposition and the weighted column sums of
its consistency check (``ppbn.protocols.ot_check``), compiled by numba.

The fold and the transpose replace numpy passes that each read and wrote the whole block:
the fold keeps a tile of the halving in L1 and reads every leaf word once (2x numpy's speed
on a k = 8 chunk); the transpose moves 64 x 64 bit blocks of words in a local buffer
(Eklundh's halving) without temporaries (9x numpy's unpacked transpose, 3x 8 x 8 byte
blocks).
"""

from __future__ import annotations

import numpy as np

from ppbn.kernels.jit import kernel

# uint64 words of each leaf row folded at a time: half the leaves of a k = 8 chunk (128
# rows) of this many words is 32 KB, inside a 48 KB L1 data cache
FOLD_TILE_WORDS = 32


@kernel
def fold_leaves(leaves: np.ndarray, sums: np.ndarray, total: np.ndarray) -> None:
    """SoftSpokenOT's sums over one chunk's 2^k leaf streams (Roy, CRYPTO 2022, Sec. 4), on
    uint64 words: ``sums[b]`` = XOR of the rows x of ``leaves`` (2^k, w) with bit b of x
    set, ``total`` = XOR of all rows (written in place).

    By halving: the rows with the top bit set are the upper half; XORing the upper half onto
    the lower keeps, for every lower bit, the XOR over the rows with that bit set. One tile
    of columns at a time, so the halves stay in L1: 2 (2^k - 1) row XORs per column."""
    n_leaves, width = leaves.shape
    bits = sums.shape[0]
    half_rows = n_leaves // 2
    scratch = np.empty((half_rows, FOLD_TILE_WORDS), dtype=np.uint64)
    acc = np.empty(FOLD_TILE_WORDS, dtype=np.uint64)
    for start in range(0, width, FOLD_TILE_WORDS):
        tile = min(FOLD_TILE_WORDS, width - start)
        acc[:] = 0
        for row in range(half_rows):
            low = leaves[row, start : start + tile]
            high = leaves[half_rows + row, start : start + tile]
            folded = scratch[row]
            for col in range(tile):
                acc[col] ^= high[col]
                folded[col] = low[col] ^ high[col]
        sums[bits - 1, start : start + tile] = acc[:tile]
        rows = half_rows
        for bit in range(bits - 2, -1, -1):
            half = rows // 2
            acc[:] = 0
            for row in range(half):
                low = scratch[row]
                high = scratch[half + row]
                for col in range(tile):
                    acc[col] ^= high[col]
                    low[col] ^= high[col]
            sums[bit, start : start + tile] = acc[:tile]
            rows = half
        total[start : start + tile] = scratch[0, :tile]


@kernel
def transpose_words(matrix: np.ndarray, out: np.ndarray) -> None:
    """``out`` (64 w, r / 64) uint64 = the transpose of the bit matrix ``matrix`` (r, w)
    uint64, r a multiple of 64, bit j of a row being bit j % 64 of word j // 64.

    One 64 x 64 block at a time in a local buffer, by Eklundh's recursive halving: at step s
    each pair of rows (i, i + s) swaps the upper s-bit halves of i's 2s-bit groups with the
    lower halves of i + s's (Hacker's Delight, 7-3, for 64-bit words). Six steps of 32 word
    swaps move a block in about a third of the time of 8 x 8 byte transposes."""
    rows, words = matrix.shape
    block = np.empty(64, dtype=np.uint64)
    for row_block in range(rows // 64):
        for word in range(words):
            for i in range(64):
                block[i] = matrix[row_block * 64 + i, word]
            step = 32
            mask = np.uint64(0x00000000FFFFFFFF)
            while step:
                shift = np.uint64(step)
                for base in range(0, 64, 2 * step):
                    for i in range(base, base + step):
                        swapped = ((block[i] >> shift) ^ block[i + step]) & mask
                        block[i] ^= swapped << shift
                        block[i + step] ^= swapped
                step //= 2
                mask ^= mask << np.uint64(step)
            for j in range(64):
                out[word * 64 + j, row_block] = block[j]


def transpose_bits(matrix: np.ndarray, out_rows: int | None = None) -> np.ndarray:
    """Transpose a bit matrix: (r, c/8) uint8 rows -> (c, r/8) uint8 rows; r a multiple of 8,
    bits little-endian within bytes (bit j of a row is bit j % 8 of byte j // 8).
    ``out_rows`` keeps only the first rows of the transpose (default: all c). A matrix whose
    rows are not a multiple of 64 or whose row bytes are not a multiple of 8 is padded with
    zeros first (the OT extension's 128-row blocks never are)."""
    rows, col_bytes = matrix.shape
    if rows % 8:
        raise ValueError("row count must be a multiple of 8")
    count = col_bytes * 8 if out_rows is None else out_rows
    if not 0 <= count <= col_bytes * 8:
        raise ValueError(f"out_rows must lie in [0, {col_bytes * 8}]")
    padded_rows, padded_bytes = -(-rows // 64) * 64, -(-col_bytes // 8) * 8
    if (padded_rows, padded_bytes) == (rows, col_bytes):
        padded = np.ascontiguousarray(matrix, dtype=np.uint8)
    else:
        padded = np.zeros((padded_rows, padded_bytes), dtype=np.uint8)
        padded[:rows, :col_bytes] = matrix
    out = np.empty((padded_bytes * 8, padded_rows // 64), dtype=np.uint64)
    transpose_words(padded.view(np.uint64), out)
    transposed = out.view(np.uint8)[:count, : rows // 8]
    return transposed if padded_rows == rows else np.ascontiguousarray(transposed)


@kernel
def xor_into_rows(rows: np.ndarray, where: np.ndarray, chunk_values: np.ndarray) -> None:
    """rows[r, :w] ^= chunk_values[r // k] for every row r with where[r] set, k = rows per
    chunk (rows.shape[0] / chunk_values.shape[0]), w = chunk_values.shape[1]: the sender's
    q columns take u_i ^ T_i where its bit of s is set (SoftSpokenOT, Roy, CRYPTO 2022)."""
    per_chunk = rows.shape[0] // chunk_values.shape[0]
    width = chunk_values.shape[1]
    for row in range(rows.shape[0]):
        if where[row]:
            values = chunk_values[row // per_chunk]
            for col in range(width):
                rows[row, col] ^= values[col]


@kernel
def weighted_row_sums(rows: np.ndarray, weights: np.ndarray, out: np.ndarray) -> None:
    """out[r] = XOR of the 128-bit ``weights[j]`` over the bits j set in row r of the bit
    matrix ``rows`` (uint64 words; bit j = bit j % 64 of word j // 64), for j <
    weights.shape[0] (a multiple of 64); ``out`` (rows, 2) uint64 is overwritten. The OT
    extension's consistency check (KOS15, Sec. 4) sums its challenge weights over each
    column of q this way.

    Method of the Four Russians: per word of OTs, a table per 4 bits of the 16 XORs of
    their 4 weights (each entry one weight more than a smaller one), then 16 lookups per
    row, so the tables serve every row. 4-bit tables cost 33 ns an OT here, 8-bit ones 41
    (their 255 XORs a byte outweigh the halved lookups). A word at a time, so the rows
    (far apart in memory) are read 8 bytes a visit."""
    n_rows = rows.shape[0]
    tables = np.zeros((16, 16, 2), dtype=np.uint64)
    acc = np.zeros((n_rows, 2), dtype=np.uint64)
    for word in range(weights.shape[0] // 64):
        for nibble in range(16):
            base = word * 64 + nibble * 4
            for bit in range(4):
                low, high = weights[base + bit, 0], weights[base + bit, 1]
                for entry in range(1 << bit, 2 << bit):
                    tables[nibble, entry, 0] = tables[nibble, entry - (1 << bit), 0] ^ low
                    tables[nibble, entry, 1] = tables[nibble, entry - (1 << bit), 1] ^ high
        for row in range(n_rows):
            value = rows[row, word]
            low, high = acc[row, 0], acc[row, 1]
            for nibble in range(16):
                entry = (value >> np.uint64(4 * nibble)) & np.uint64(15)
                low ^= tables[nibble, entry, 0]
                high ^= tables[nibble, entry, 1]
            acc[row, 0], acc[row, 1] = low, high
    out[:] = acc
