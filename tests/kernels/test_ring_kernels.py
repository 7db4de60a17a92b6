"""The OLE sum kernel against Python integers: each value's outputs shifted by their bit
and summed mod 2^128, negated on request."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.kernels.ring import shifted_sums
from ppbn.protocols import ring


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 128), min_size=1, max_size=6), st.booleans(), st.integers(0, 2**32))
def test_shifted_sums_equal_integer_arithmetic(widths: list[int], negate: bool, seed: int):
    rng = np.random.default_rng(seed)
    outputs = rng.integers(0, 2**64, size=(sum(widths), 2), dtype=np.uint64)
    if seed % 3 == 0:
        outputs[:] = np.uint64(2**64 - 1)  # every carry taken
    sums = np.empty((len(widths), 2), dtype=np.uint64)
    shifted_sums(outputs, np.array(widths, dtype=np.int64), negate, sums)
    values = ring.to_ints(outputs)
    row, expected = 0, []
    for width in widths:
        total = sum(values[row + i] << i for i in range(width))
        row += width
        expected.append((-total if negate else total) % 2**128)
    assert ring.to_ints(sums) == expected
