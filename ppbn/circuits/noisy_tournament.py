"""Report-noisy-max over many options as a tournament of small garbled circuits.

Why: ``noise.noisy_argmax_circuit`` holds every option of a choice in one circuit, which is
built and scheduled in Python once per option count; a choice among hundreds of options
(the marginal release's pairs, ``protocols/learning/dp_marginals.py``) would build a
circuit of millions of gates for each count. Here a choice runs as rounds of one small
circuit over blocks of ``block`` entries, many blocks as instances of one run:

- ``noisy_block_circuit``: each option's score (additive shares) plus a geometric draw made
  from both parties' words (``noise.geometric_draw``); the block's first largest noisy
  value and its option index leave as additive shares (``Reveal.SHARES``);
- ``block_max_circuit``: the first largest of ``block`` shared (value, index) entries, again
  as shares; the last round opens the index alone.

The winner is the first index of the largest noisy value over all options, as in the one-
circuit version: blocks hold consecutive options, and the left entry of every match wins
ties. Only the final index is opened; every intermediate value and index is a uniform share.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ppbn.circuits import builders as bl
from ppbn.circuits.builders import Bits, CircuitBuilder
from ppbn.circuits.ir import Circuit
from ppbn.circuits.noise import draw_width, geometric_draw
from ppbn.dp.noise import GeometricSpec

TOURNAMENT_BLOCK = 8  # entries per match block: small circuits, few rounds


def noisy_value_width(width: int, spec: GeometricSpec) -> int:
    """Signed bits of score + G for a ``width``-bit signed score: nothing wraps."""
    return max(width, spec.bits) + 2


def lowest_value(wide: int) -> int:
    """-2^(wide-1) as a ``wide``-bit word: below every real noisy value, so an entry holding
    it (padding, or an invalid option) never wins against a real one."""
    return 1 << (wide - 1)


def _first_max(b: CircuitBuilder, entries: Sequence[tuple[Bits, Bits]]) -> tuple[Bits, Bits]:
    """(value, index) of the first largest signed value: adjacent matches, the left entry
    replaced only when strictly smaller."""
    level = [(list(v), list(i)) for v, i in entries]
    while len(level) > 1:
        nxt = []
        for (lv, li), (rv, ri) in zip(level[0::2], level[1::2], strict=False):
            right = bl.less_than(b, lv, rv, signed=True)
            nxt.append((bl.mux(b, right, rv, lv), bl.mux(b, right, ri, li)))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


@lru_cache(maxsize=16)
def noisy_block_circuit(block: int, width: int, spec: GeometricSpec, index_bits: int) -> Circuit:
    """Inputs valid_a (``block`` bits, public), s{i}_a, s{i}_b (``width``-bit shares of a
    signed score), u{i}_a, u{i}_b (``draw_width(spec)`` bits) and j{i}_a (the option's
    public index, ``index_bits``) for i < ``block``; outputs value (the block's first
    largest score + G, ``noisy_value_width`` bits; the lowest value where no option is
    valid) and index (that option's index)."""
    wide = noisy_value_width(width, spec)
    b = CircuitBuilder()
    valid = b.input("valid_a", block)
    lowest = bl.constant(lowest_value(wide), wide)
    entries = []
    for i in range(block):
        score = bl.add(b, b.input(f"s{i}_a", width), b.input(f"s{i}_b", width))
        g = geometric_draw(
            b, b.input(f"u{i}_a", draw_width(spec)), b.input(f"u{i}_b", draw_width(spec)), spec
        )
        value = bl.add(b, bl.sign_extend(score, wide), bl.zero_extend(g, wide))
        entries.append((bl.mux(b, valid[i], value, lowest), b.input(f"j{i}_a", index_bits)))
    value, index = _first_max(b, entries)
    b.output("value", value)
    b.output("index", index)
    return b.build()


@lru_cache(maxsize=16)
def block_max_circuit(block: int, wide: int, index_bits: int) -> Circuit:
    """Inputs v{i}_a, v{i}_b (``wide``-bit shares of a signed value) and j{i}_a, j{i}_b
    (``index_bits``-bit shares of its index) for i < ``block``; outputs value and index
    of the first largest."""
    b = CircuitBuilder()
    entries = []
    for i in range(block):
        value = bl.add(b, b.input(f"v{i}_a", wide), b.input(f"v{i}_b", wide))
        index = bl.add(b, b.input(f"j{i}_a", index_bits), b.input(f"j{i}_b", index_bits))
        entries.append((value, index))
    value, index = _first_max(b, entries)
    b.output("value", value)
    b.output("index", index)
    return b.build()
