"""Ring kernels of the share arithmetic (``ppbn.protocols.arith``), compiled by numba, on
Z_2^128 elements held as two little-endian uint64 words (``ppbn.protocols.ring``).

Gilboa's OLE (CRYPTO 1999) gives each party one OT output x_i per bit i of the chooser's
value; its share is the sum of 2^i x_i. numpy shifted every output as a 128-bit number,
scattered them into a dense (values, bits) array and summed it in 32-bit halves: five
passes where this kernel makes one.
"""

from __future__ import annotations

import numpy as np

from ppbn.kernels.jit import kernel


@kernel
def shifted_sums(outputs: np.ndarray, widths: np.ndarray, negate: bool, sums: np.ndarray) -> None:
    """sums[v] = (-1 if negate) * sum over i < widths[v] of 2^i outputs[o_v + i] mod 2^128,
    o_v the sum of the widths before v: each value's OT outputs in bit order, one after
    another as the OLE ran them."""
    row = 0
    for value in range(widths.size):
        low = np.uint64(0)
        high = np.uint64(0)
        for bit in range(widths[value]):
            x_low, x_high = outputs[row, 0], outputs[row, 1]
            row += 1
            if bit == 0:
                s_low, s_high = x_low, x_high
            elif bit < 64:
                shift = np.uint64(bit)
                s_low = x_low << shift
                s_high = (x_high << shift) | (x_low >> (np.uint64(64) - shift))
            else:
                s_low = np.uint64(0)
                s_high = x_low << np.uint64(bit - 64)
            low += s_low
            high += s_high + np.uint64(low < s_low)
        if negate:
            low = ~low + np.uint64(1)
            high = ~high + np.uint64(low == 0)
        sums[value, 0] = low
        sums[value, 1] = high
