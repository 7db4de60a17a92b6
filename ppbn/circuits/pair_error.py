"""The garbled circuit of the marginal release's utility (``ppbn.dp.marginal_release``):
the L1 error sum |x_c - e_c| of a pair's counts x against the public estimate e, from
additive shares of the counts, so that neither party sees a count or the error itself.

The error leaves as additive shares (``Reveal.SHARES``): the noisy choice that follows
(``noise.noisy_argmax_circuit``) takes shares, and the errors are computed once for every
pair while the choices run round after round.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ppbn.circuits import builders as bl
from ppbn.circuits.builders import CircuitBuilder
from ppbn.circuits.ir import Circuit


def pair_error_width(count_bits: int, cells: int) -> int:
    """Bits of the error as a signed value: each |x - e| < 2^count_bits (both in
    [0, 2^count_bits)), ``cells`` of them, and a zero sign bit."""
    return count_bits + max(math.ceil(math.log2(cells)), 0) + 1


@lru_cache(maxsize=32)
def pair_error_circuit(count_bits: int, cells: int, width: int | None = None) -> Circuit:
    """Inputs x{c}_a, x{c}_b (shares mod 2^count_bits of a count 0 <= x < 2^count_bits) and
    e{c}_a (the garbler's copy of the public estimate, 0 <= e < 2^count_bits) for
    c < ``cells``; output error = sum |x_c - e_c| in ``width`` bits (default and at least
    ``pair_error_width``: pairs of every size then share one width)."""
    if count_bits < 1 or cells < 1:
        raise ValueError("need a count width of at least one bit and at least one cell")
    wide = pair_error_width(count_bits, cells) if width is None else width
    if wide < pair_error_width(count_bits, cells):
        raise ValueError(
            f"{cells} errors of {count_bits}-bit counts need {pair_error_width(count_bits, cells)} bits"
        )
    b = CircuitBuilder()
    total = bl.constant(0, wide)
    for c in range(cells):
        x = bl.add(b, b.input(f"x{c}_a", count_bits), b.input(f"x{c}_b", count_bits))
        e = b.input(f"e{c}_a", count_bits)
        diff = bl.sub(b, bl.zero_extend(x, count_bits + 1), bl.zero_extend(e, count_bits + 1))
        total = bl.add(b, total, bl.zero_extend(bl.absolute(b, diff), wide))
    b.output("error", total)
    return b.build()
