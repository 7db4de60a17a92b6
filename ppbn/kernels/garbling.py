"""Label kernels of half-gates garbling (``ppbn.circuits.garble``), compiled by numba.

Per schedule step of a block of instances, state (n_slots, kb, 2) uint64 labels: an XOR
step in one pass, and an AND step as two passes around the fixed-key hash (AES in
OpenSSL): one gathers the labels to hash and writes their tweaks, one turns the hashes
into the half-gates tables and the output labels (Zahur, Rosulek and Evans, EUROCRYPT
2015, Sec. 3). numpy needed about ten passes over the step for the same work.
"""

from __future__ import annotations

import numpy as np

from ppbn.kernels.jit import kernel


@kernel
def xor_gates(state: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """Free-XOR: label[out[g]] = label[a[g]] ^ label[b[g]] for every instance."""
    for gate in range(a.size):
        left, right, dest = state[a[gate]], state[b[gate]], state[out[gate]]
        for j in range(state.shape[1]):
            dest[j, 0] = left[j, 0] ^ right[j, 0]
            dest[j, 1] = left[j, 1] ^ right[j, 1]


@kernel
def and_hash_inputs(
    state: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    delta: np.ndarray,
    first_tweak: np.uint64,
    gate_stride: np.uint64,
    blocks: np.ndarray,
    tweaks: np.ndarray,
    garbler: bool,
) -> None:
    """The blocks an AND step hashes and their tweaks, gate g of instance j at row g kb + j
    of each run of ``count`` = n kb rows. The garbler hashes A0, A1 = A0 ^ R (tweak T_G =
    first + g stride + 2 j) and B0, B1 (tweak T_G + 1 = T_E): four runs; the evaluator its
    labels A (T_G) and B (T_E): two runs. Tweaks go in word 0 of ``tweaks``, word 1 zero."""
    n, kb = a.size, state.shape[1]
    count = n * kb
    half = 2 * count if garbler else count
    for gate in range(n):
        left, right = state[a[gate]], state[b[gate]]
        tweak_g = first_tweak + np.uint64(gate) * gate_stride
        for j in range(kb):
            row = gate * kb + j
            tweak = tweak_g + np.uint64(2 * j)
            blocks[row, 0], blocks[row, 1] = left[j, 0], left[j, 1]
            blocks[half + row, 0], blocks[half + row, 1] = right[j, 0], right[j, 1]
            tweaks[row, 0], tweaks[row, 1] = tweak, 0
            tweaks[half + row, 0], tweaks[half + row, 1] = tweak + np.uint64(1), 0
            if garbler:
                blocks[count + row, 0] = left[j, 0] ^ delta[0]
                blocks[count + row, 1] = left[j, 1] ^ delta[1]
                blocks[3 * count + row, 0] = right[j, 0] ^ delta[0]
                blocks[3 * count + row, 1] = right[j, 1] ^ delta[1]
                tweaks[count + row, 0], tweaks[count + row, 1] = tweak, 0
                tweaks[3 * count + row, 0] = tweak + np.uint64(1)
                tweaks[3 * count + row, 1] = 0


@kernel
def garble_and_outputs(
    blocks: np.ndarray,
    hashed: np.ndarray,
    delta: np.ndarray,
    tables: np.ndarray,
    first_and: int,
    state: np.ndarray,
    out: np.ndarray,
) -> None:
    """Half gates at the garbler from the hashes of ``and_hash_inputs`` (pa, pb the permute
    bits of A0, B0): T_G = H(A0) ^ H(A1) ^ pb R, W_G = H(A0) ^ pa T_G; T_E = H(B0) ^ H(B1)
    ^ A0, W_E = H(B0) ^ pb (T_E ^ A0); the output zero-label W_G ^ W_E."""
    n, kb = out.size, state.shape[1]
    count = n * kb
    for gate in range(n):
        dest = state[out[gate]]
        for j in range(kb):
            row = gate * kb + j
            mask_a = np.uint64(0) - (blocks[row, 0] & np.uint64(1))
            mask_b = np.uint64(0) - (blocks[2 * count + row, 0] & np.uint64(1))
            for w in range(2):
                h_a0, h_a1 = hashed[row, w], hashed[count + row, w]
                h_b0, h_b1 = hashed[2 * count + row, w], hashed[3 * count + row, w]
                a0 = blocks[row, w]
                gen = h_a0 ^ h_a1 ^ (delta[w] & mask_b)
                evl = h_b0 ^ h_b1 ^ a0
                tables[0, first_and + gate, j, w] = gen
                tables[1, first_and + gate, j, w] = evl
                dest[j, w] = h_a0 ^ (gen & mask_a) ^ h_b0 ^ ((evl ^ a0) & mask_b)


@kernel
def evaluate_and_outputs(
    blocks: np.ndarray,
    hashed: np.ndarray,
    tables: np.ndarray,
    first_and: int,
    state: np.ndarray,
    out: np.ndarray,
) -> None:
    """Half gates at the evaluator (sa, sb the permute bits of its labels A, B):
    W = H(A) ^ sa T_G ^ H(B) ^ sb (T_E ^ A)."""
    n, kb = out.size, state.shape[1]
    count = n * kb
    for gate in range(n):
        dest = state[out[gate]]
        for j in range(kb):
            row = gate * kb + j
            mask_a = np.uint64(0) - (blocks[row, 0] & np.uint64(1))
            mask_b = np.uint64(0) - (blocks[count + row, 0] & np.uint64(1))
            for w in range(2):
                gen = tables[0, first_and + gate, j, w]
                evl = tables[1, first_and + gate, j, w] ^ blocks[row, w]
                dest[j, w] = (
                    hashed[row, w] ^ (gen & mask_a) ^ hashed[count + row, w] ^ (evl & mask_b)
                )
