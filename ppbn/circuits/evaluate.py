"""Plaintext evaluation of a circuit over many instances at once.

Instances are bit-sliced: slot s holds one uint64 word per 64 instances, so a step of the
schedule is a handful of numpy operations whatever the batch size. This is the reference
the garbled path is tested against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ppbn.circuits.ir import Circuit, bits_to_values, values_to_bits
from ppbn.circuits.schedule import ONE_SLOT, schedule_of

ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def evaluate_bits(circuit: Circuit, input_bits: np.ndarray) -> np.ndarray:
    """(n_input_bits, K) 0/1 array -> (n_output_bits, K) uint8, bundles concatenated in order."""
    sched = schedule_of(circuit)
    input_bits = np.asarray(input_bits, dtype=np.uint8)
    n_in, k = input_bits.shape
    if n_in != len(sched.input_slots):
        raise ValueError(f"circuit has {len(sched.input_slots)} input bits, got {n_in}")
    n_words = max(1, (k + 63) // 64)
    packed = np.packbits(input_bits, axis=1, bitorder="little")
    padded = np.zeros((n_in, n_words * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    state = np.zeros((sched.n_slots, n_words), dtype=np.uint64)
    state[ONE_SLOT] = ALL_ONES
    state[sched.input_slots] = padded.view(np.uint64)
    for step in sched.steps:
        if step.is_and:
            state[step.out] = state[step.a] & state[step.b]
        else:
            state[step.out] = state[step.a] ^ state[step.b]
    out_words = state[sched.output_slots]
    bits = np.unpackbits(out_words.view(np.uint8), axis=1, bitorder="little")
    return bits[:, :k]


def evaluate(
    circuit: Circuit, inputs: Mapping[str, Iterable[int] | np.ndarray]
) -> dict[str, np.ndarray]:
    """Evaluate every instance; ``inputs`` maps each input bundle name to its values.

    Returns each output bundle's values (uint64 arrays up to 64 bits, object arrays above).
    """
    bits = gather_input_bits(circuit, inputs)
    out = evaluate_bits(circuit, bits)
    return split_output_bits(circuit, out)


def gather_input_bits(
    circuit: Circuit, inputs: Mapping[str, Iterable[int] | np.ndarray]
) -> np.ndarray:
    missing = [b.name for b in circuit.inputs if b.name not in inputs]
    unknown = sorted(set(inputs) - {b.name for b in circuit.inputs})
    if missing or unknown:
        raise ValueError(f"inputs missing {missing}, unknown {unknown}")
    rows = [values_to_bits(inputs[b.name], b.width) for b in circuit.inputs]
    counts = {r.shape[1] for r in rows}
    if len(counts) > 1:
        raise ValueError(f"input bundles have different instance counts {sorted(counts)}")
    return np.concatenate(rows, axis=0)


def split_output_bits(circuit: Circuit, bits: np.ndarray) -> dict[str, np.ndarray]:
    result: dict[str, np.ndarray] = {}
    pos = 0
    for b in circuit.outputs:
        result[b.name] = bits_to_values(bits[pos : pos + b.width], b.width)
        pos += b.width
    return result
