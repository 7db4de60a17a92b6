"""Pad kernels of the masked table lookup (``ppbn.protocols.arith.table_lookup``), compiled
by numba: the hash inputs of every entry's pad written in one pass, and the pads folded
from the hashes in another, around one AES call (the lookup's fixed-key hash).

The pad of entry e of instance j, block b, is the XOR over index bits i of H(key, tweak)
with tweak = base + ((j N + e) blocks + b) w + i (Naor and Pinkas's 1-out-of-N OT from
log N OTs). numpy built the same rows through a gather, a broadcast copy and a per-bit
loop of XORs.
"""

from __future__ import annotations

import numpy as np

from ppbn.kernels.jit import kernel


@kernel
def entry_pad_inputs(
    keys: np.ndarray, base: np.uint64, blocks: int, rows: np.ndarray, tweaks: np.ndarray
) -> None:
    """Alice's hash inputs for every entry of every instance: ``keys`` (k, w, 2, 2) are the
    two keys of each index bit; entry e takes the key of bit i of e. Row ((j N + e) blocks
    + b) w + i of ``rows`` and ``tweaks`` (k N blocks w, 2) is entry e of instance j, block
    b, bit i; its tweak is base plus the row number."""
    count, width = keys.shape[0], keys.shape[1]
    size = 1 << width
    for instance in range(count):
        for entry in range(size):
            first = (instance * size + entry) * blocks * width
            for block in range(blocks):
                for bit in range(width):
                    row = first + block * width + bit
                    choice = (entry >> bit) & 1
                    rows[row, 0] = keys[instance, bit, choice, 0]
                    rows[row, 1] = keys[instance, bit, choice, 1]
                    tweaks[row, 0] = base + np.uint64(row)
                    tweaks[row, 1] = 0


@kernel
def chosen_pad_inputs(
    keys: np.ndarray,
    chosen: np.ndarray,
    base: np.uint64,
    blocks: int,
    rows: np.ndarray,
    tweaks: np.ndarray,
) -> None:
    """Bob's hash inputs for the one entry he can decrypt per instance: ``keys`` (k, w, 2)
    his key of each index bit, ``chosen`` (k,) his masked indices y; row (j blocks + b) w
    + i, with the tweak of entry y_j of instance j as in ``entry_pad_inputs``."""
    count, width = keys.shape[0], keys.shape[1]
    size = 1 << width
    for instance in range(count):
        first = (instance * size + chosen[instance]) * blocks * width
        for block in range(blocks):
            for bit in range(width):
                row = (instance * blocks + block) * width + bit
                rows[row, 0] = keys[instance, bit, 0]
                rows[row, 1] = keys[instance, bit, 1]
                tweaks[row, 0] = base + np.uint64(first + block * width + bit)
                tweaks[row, 1] = 0


@kernel
def fold_pads(hashed: np.ndarray, width: int, pads: np.ndarray) -> None:
    """pads[p] = XOR of hashed[p w .. p w + w): each pad block from its w hashes."""
    for pad in range(pads.shape[0]):
        low = np.uint64(0)
        high = np.uint64(0)
        for bit in range(width):
            low ^= hashed[pad * width + bit, 0]
            high ^= hashed[pad * width + bit, 1]
        pads[pad, 0] = low
        pads[pad, 1] = high
