"""The tournament circuits (circuits/noisy_tournament.py) and the pair-error circuit
(circuits/pair_error.py), in plaintext: a choice among many options played as blocks of
noisy scores, then blocks of block winners, gives the first index of the largest noisy
score, as the one-circuit report-noisy-max does; padding never wins; the pair error is
sum |x - e| from shares of x."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.ir import to_signed
from ppbn.circuits.noise import draw_width
from ppbn.circuits.noisy_tournament import (
    TOURNAMENT_BLOCK,
    block_max_circuit,
    lowest_value,
    noisy_block_circuit,
    noisy_value_width,
)
from ppbn.circuits.pair_error import pair_error_circuit, pair_error_width
from ppbn.dp.noise import geometric_spec

SPEC = geometric_spec(3.0, precision=16)
INDEX_BITS = 7


def _objects(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = [int(v) for v in values]
    return out


def _noise(spec, ua: int, ub: int) -> int:
    """G of one draw from the two parties' words, as the circuit draws it."""
    u = ua ^ ub
    p = spec.precision
    uniforms = np.array([[(u >> (k * p)) & ((1 << p) - 1) for k in range(spec.bits)]], dtype=object)
    return int(spec.draw_bits(uniforms)[0])


def _tournament(
    scores: list[int], width: int, rng: np.random.Generator, same_noise: bool = False
) -> tuple[int, list[int]]:
    """Play one choice in plaintext: the winner's index and the noisy scores it beat. With
    ``same_noise`` both parties feed the same words: every draw is the same (U = 0)."""
    n = len(scores)
    blocks = -(-n // TOURNAMENT_BLOCK)
    mask = (1 << width) - 1
    inputs, noisy = {}, []
    for slot in range(TOURNAMENT_BLOCK):
        idx = [b * TOURNAMENT_BLOCK + slot for b in range(blocks)]
        s = [scores[i] if i < n else 0 for i in idx]
        a = [int(x) for x in rng.integers(0, 1 << width, size=blocks)]
        inputs[f"s{slot}_a"] = _objects(a)
        inputs[f"s{slot}_b"] = _objects([(v - x) & mask for v, x in zip(s, a, strict=True)])
        ua = [int(rng.integers(0, 2**62)) % (1 << draw_width(SPEC)) for _ in range(blocks)]
        ub = (
            ua
            if same_noise
            else [int(rng.integers(0, 2**62)) % (1 << draw_width(SPEC)) for _ in range(blocks)]
        )
        inputs[f"u{slot}_a"], inputs[f"u{slot}_b"] = _objects(ua), _objects(ub)
        inputs[f"j{slot}_a"] = _objects(idx)
        for b, i in enumerate(idx):
            if i < n:
                noisy.append((i, scores[i] + _noise(SPEC, ua[b], ub[b])))
    real = [min(TOURNAMENT_BLOCK, n - b * TOURNAMENT_BLOCK) for b in range(blocks)]
    inputs["valid_a"] = _objects([(1 << r) - 1 for r in real])
    out = evaluate(noisy_block_circuit(TOURNAMENT_BLOCK, width, SPEC, INDEX_BITS), inputs)
    wide = noisy_value_width(width, SPEC)
    values, indices = [int(v) for v in out["value"]], [int(i) for i in out["index"]]
    while len(values) > 1:
        blocks = -(-len(values) // TOURNAMENT_BLOCK)
        inputs = {}
        for slot in range(TOURNAMENT_BLOCK):
            pos = [b * TOURNAMENT_BLOCK + slot for b in range(blocks)]
            inputs[f"v{slot}_a"] = _objects(
                [values[p] if p < len(values) else lowest_value(wide) for p in pos]
            )
            inputs[f"j{slot}_a"] = _objects([indices[p] if p < len(values) else 0 for p in pos])
            inputs[f"v{slot}_b"] = inputs[f"j{slot}_b"] = _objects([0] * blocks)
        out = evaluate(block_max_circuit(TOURNAMENT_BLOCK, wide, INDEX_BITS), inputs)
        values, indices = [int(v) for v in out["value"]], [int(i) for i in out["index"]]
    assert to_signed([values[0]], wide)[0] == max(v for _, v in noisy)
    return indices[0], [v for _, v in sorted(noisy)]


@pytest.mark.parametrize("options", [1, 5, 8, 9, 23, 70])
def test_the_tournament_winner_is_the_first_largest_noisy_score(options: int) -> None:
    rng = np.random.default_rng(options)
    width = 8
    for trial in range(12):
        low = -3 if trial % 2 else -100
        scores = [int(s) for s in rng.integers(low, -low + 1, size=options)]
        winner, noisy = _tournament(scores, width, rng)
        assert winner == int(np.argmax(noisy)), (scores, noisy)
    # ties for the largest go to the first index, across blocks too
    scores = [int(s) for s in rng.integers(-5, 0, size=options)]
    scores[options // 2] = scores[-1] = 3
    winner, noisy = _tournament(scores, width, rng, same_noise=True)
    assert winner == options // 2 == int(np.argmax(noisy))


def test_padding_never_wins_even_against_the_lowest_real_scores() -> None:
    rng = np.random.default_rng(5)
    width = 10
    for options in (1, 3, 9, 17):
        winner, noisy = _tournament([-(1 << (width - 1))] * options, width, rng)
        assert winner < options and winner == int(np.argmax(noisy))


@pytest.mark.parametrize("cells", [1, 4, 9])
def test_pair_error_is_the_l1_distance_from_shares(cells: int) -> None:
    rng = np.random.default_rng(cells)
    count_bits, n = 12, 40
    mask = (1 << count_bits) - 1
    x = rng.integers(0, 1 << count_bits, size=(n, cells))
    e = rng.integers(0, 1 << count_bits, size=(n, cells))
    x[:5] = e[:5]  # no error at all
    inputs = {}
    for c in range(cells):
        a = rng.integers(0, 1 << count_bits, size=n)
        inputs[f"x{c}_a"], inputs[f"x{c}_b"] = _objects(a), _objects((x[:, c] - a) & mask)
        inputs[f"e{c}_a"] = _objects(e[:, c])
    width = pair_error_width(count_bits, 16)
    got = evaluate(pair_error_circuit(count_bits, cells, width), inputs)["error"]
    want = np.abs(x - e).sum(axis=1)
    np.testing.assert_array_equal(np.array([int(g) for g in got]), want)
    assert int(want.max()) < 1 << (width - 1)
    with pytest.raises(ValueError, match="need"):
        pair_error_circuit(count_bits, 16, pair_error_width(count_bits, 16) - 1)
