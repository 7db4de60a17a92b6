"""The lookup pad kernels against the pads' definition: entry e of instance j, block b
hashes the key of bit i of e under tweak base + ((j N + e) blocks + b) w + i, and its
pad is the XOR over i; bob's pad of his entry y_j equals alice's pad of that entry."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.circuits.garble import FixedKeyHash
from ppbn.kernels.lookup import chosen_pad_inputs, entry_pad_inputs, fold_pads


def _pads(hasher, rows, tweaks, width):
    hashed = np.empty_like(rows)
    hasher.hash_into(rows, tweaks, hashed)
    pads = np.empty((rows.shape[0] // width, 2), dtype=np.uint64)
    fold_pads(hashed, width, pads)
    return pads


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**40))
def test_pads_follow_the_definition(count: int, width: int, blocks: int, base: int) -> None:
    rng = np.random.default_rng(count * 100 + width * 10 + blocks)
    hasher = FixedKeyHash(b"lookup kernel test", b"session")
    keys = rng.integers(0, 2**64, size=(count, width, 2, 2), dtype=np.uint64)
    size = 1 << width
    n = count * size * blocks * width
    rows, tweaks = np.empty((n, 2), np.uint64), np.empty((n, 2), np.uint64)
    entry_pad_inputs(keys, np.uint64(base), blocks, rows, tweaks)
    pads = _pads(hasher, rows, tweaks, width).reshape(count, size, blocks, 2)
    for j in range(count):
        for e in range(size):
            for b in range(blocks):
                expected = np.zeros(2, dtype=np.uint64)
                for i in range(width):
                    tweak = base + ((j * size + e) * blocks + b) * width + i
                    key = keys[j, i, (e >> i) & 1][None, :]
                    expected ^= hasher.hash(key, np.array([tweak], dtype=np.uint64))[0]
                np.testing.assert_array_equal(pads[j, e, b], expected)
    chosen = rng.integers(0, size, size=count)
    bob_keys = keys[
        np.arange(count)[:, None],
        np.arange(width)[None, :],
        (chosen[:, None] >> np.arange(width)) & 1,
    ]
    m = count * blocks * width
    rows, tweaks = np.empty((m, 2), np.uint64), np.empty((m, 2), np.uint64)
    chosen_pad_inputs(bob_keys, chosen.astype(np.int64), np.uint64(base), blocks, rows, tweaks)
    bob = _pads(hasher, rows, tweaks, width).reshape(count, blocks, 2)
    np.testing.assert_array_equal(bob, pads[np.arange(count), chosen])
