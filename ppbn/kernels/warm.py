"""Load (or compile) every kernel once, on tiny inputs, and say what that cost: a bench
times this apart from its runs, so the first call's compile or cache load is reported,
not folded into a throughput figure."""

from __future__ import annotations

import time

import numpy as np

from ppbn.kernels import bits, garbling, lookup, ring


def _calls() -> list:
    """One call of each kernel with the argument types the protocols pass."""
    words = np.zeros((2, 1), dtype=np.uint64)
    labels = np.zeros((3, 1, 2), dtype=np.uint64)
    gates = np.zeros(1, dtype=np.int64)
    blocks = np.zeros((4, 2), dtype=np.uint64)
    tables = np.zeros((2, 1, 1, 2), dtype=np.uint64)
    # a block of a larger batch's tables is a strided view (numba compiles it apart)
    block_tables = np.zeros((2, 1, 2, 2), dtype=np.uint64)[:, :, :1]
    delta = np.zeros(2, dtype=np.uint64)
    return [
        lambda: bits.fold_leaves(words, np.zeros((1, 1), np.uint64), np.zeros(1, np.uint64)),
        lambda: bits.transpose_bits(np.zeros((8, 1), dtype=np.uint8)),
        lambda: bits.xor_into_rows(
            np.zeros((8, 1), np.uint8), np.zeros(8, np.uint8), np.zeros((1, 1), np.uint8)
        ),
        lambda: bits.weighted_row_sums(words, np.zeros((64, 2), np.uint64), blocks[:2]),
        lambda: garbling.xor_gates(labels, gates, gates, gates + 1),
        lambda: garbling.and_hash_inputs(
            labels, gates, gates, delta, np.uint64(0), np.uint64(2), blocks, blocks.copy(), True
        ),
        *(
            call
            for table in (tables, block_tables)
            for call in (
                lambda t=table: garbling.garble_and_outputs(
                    blocks, blocks, delta, t, 0, labels, gates + 2
                ),
                lambda t=table: garbling.evaluate_and_outputs(
                    blocks, blocks, t, 0, labels, gates + 2
                ),
            )
        ),
        lambda: lookup.entry_pad_inputs(
            np.zeros((1, 1, 2, 2), np.uint64), np.uint64(0), 1, blocks, blocks.copy()
        ),
        lambda: lookup.chosen_pad_inputs(
            np.zeros((1, 1, 2), np.uint64), gates, np.uint64(0), 1, blocks, blocks.copy()
        ),
        lambda: lookup.fold_pads(blocks, 1, blocks.copy()),
        lambda: ring.shifted_sums(blocks, np.ones(1, np.int64), False, blocks.copy()),
    ]


def warm_up() -> dict[str, float | int]:
    """Call every kernel once; returns the seconds it took and how many signatures were
    compiled here and how many loaded from numba's cache."""
    dispatchers = [
        bits.fold_leaves,
        bits.transpose_words,
        bits.xor_into_rows,
        bits.weighted_row_sums,
        garbling.xor_gates,
        garbling.and_hash_inputs,
        garbling.garble_and_outputs,
        garbling.evaluate_and_outputs,
        lookup.entry_pad_inputs,
        lookup.chosen_pad_inputs,
        lookup.fold_pads,
        ring.shifted_sums,
    ]
    started = time.perf_counter()
    for call in _calls():
        call()
    seconds = time.perf_counter() - started
    compiled = sum(sum(d.stats.cache_misses.values()) for d in dispatchers)
    loaded = sum(sum(d.stats.cache_hits.values()) for d in dispatchers)
    return {"seconds": round(seconds, 3), "compiled": compiled, "from_cache": loaded}
