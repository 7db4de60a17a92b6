"""The half-gates kernels against the gate's meaning: for every input pair (a, b), the
evaluator holding A0 ^ a R and B0 ^ b R decodes the garbler's output zero-label XOR (a and b) R,
and a free-XOR step XORs labels."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.circuits.garble import FixedKeyHash, random_delta, random_labels
from ppbn.kernels.garbling import (
    and_hash_inputs,
    evaluate_and_outputs,
    garble_and_outputs,
    xor_gates,
)


def _hash_step(state, a, b, delta, garbler: bool, hasher: FixedKeyHash):
    rows = (4 if garbler else 2) * a.size * state.shape[1]
    blocks = np.empty((rows, 2), dtype=np.uint64)
    tweaks = np.empty((rows, 2), dtype=np.uint64)
    and_hash_inputs(
        state, a, b, delta, np.uint64(10), np.uint64(2 * state.shape[1]), blocks, tweaks, garbler
    )
    hashed = np.empty_like(blocks)
    hasher.hash_into(blocks, tweaks, hashed)
    return blocks, tweaks, hashed


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5), st.integers(1, 7), st.integers(0, 2**32))
def test_and_gates_decode_to_the_and_of_the_inputs(gates: int, instances: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    hasher = FixedKeyHash(b"kernel test", b"session")
    delta = random_delta()
    slots = 2 * gates + gates
    zero = random_labels((slots, instances))
    a, b = np.arange(gates), np.arange(gates, 2 * gates)
    out = np.arange(2 * gates, 3 * gates)
    tables = np.empty((2, gates, instances, 2), dtype=np.uint64)
    blocks, tweaks, hashed = _hash_step(zero, a, b, delta, True, hasher)
    # the tweaks: T_G of gate g, instance j = 10 + 2 g K + 2 j, T_E one more, word 1 zero
    count = gates * instances
    expected_tg = (
        10
        + 2 * instances * np.repeat(np.arange(gates), instances)
        + 2 * np.tile(np.arange(instances), gates)
    )
    np.testing.assert_array_equal(tweaks[:count, 0], expected_tg)
    np.testing.assert_array_equal(tweaks[2 * count : 3 * count, 0], expected_tg + 1)
    assert not tweaks[:, 1].any()
    garble_and_outputs(blocks, hashed, delta, tables, 0, zero, out)
    bits_a = rng.integers(0, 2, size=(gates, instances)).astype(np.uint64)
    bits_b = rng.integers(0, 2, size=(gates, instances)).astype(np.uint64)
    held = np.zeros_like(zero)
    held[a] = zero[a] ^ (delta * bits_a[..., None])
    held[b] = zero[b] ^ (delta * bits_b[..., None])
    blocks_e, _, hashed_e = _hash_step(held, a, b, delta, False, hasher)
    evaluate_and_outputs(blocks_e, hashed_e, tables, 0, held, out)
    np.testing.assert_array_equal(held[out], zero[out] ^ (delta * (bits_a & bits_b)[..., None]))


def test_xor_gates_xor_labels_in_place_too() -> None:
    state = random_labels((4, 3))
    before = state.copy()
    xor_gates(state, np.array([0, 1]), np.array([1, 2]), np.array([3, 1]))
    np.testing.assert_array_equal(state[3], before[0] ^ before[1])
    np.testing.assert_array_equal(state[1], before[1] ^ before[2])
