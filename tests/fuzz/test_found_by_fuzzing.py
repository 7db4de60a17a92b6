"""Regressions for what the fuzzer found in the protocol code, reproduced without daemons."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.protocols import arith, ring
from ppbn.protocols.channel import ProtocolError, memory_channel_pair
from ppbn.protocols.fixedpoint import STAT_BITS


@pytest.mark.parametrize("value", [2**100, 2**127, 1 << (20 + STAT_BITS + 1)])
def test_a_reshared_value_out_of_range_is_a_protocol_error(value):
    """A flipped byte in alice's 'arith.reshare' message made bob's OLE raise ValueError
    (an internal error of the job). The message now carries only the low 61 bits of each
    value (``arith._reshare``), so a full 16-byte element is refused for its size, and
    whatever 8 bytes arrive, bob's share is a signed 61-bit number that fits his OLE."""
    alice_end, bob_end = memory_channel_pair(timeout_s=5)
    alice_end.send_array("arith.reshare", ring.from_ints([3, value]))
    bob = arith.ArithSession(bob_end, "bob")
    with pytest.raises(ProtocolError, match="arith.reshare"):
        arith._reshare(bob, ring.from_ints([0, 0]), 20)
    alice_end, bob_end = memory_channel_pair(timeout_s=5)
    alice_end.send_array("arith.reshare", ring.from_ints([3, value]).view(np.uint8).reshape(2, 16)[:, :8].copy())
    shares = arith._reshare(arith.ArithSession(bob_end, "bob"), ring.from_ints([0, 0]), 20)
    assert np.all(ring.sar(shares, 20 + STAT_BITS) == ring.sar(shares, 127))  # in range


def test_an_honest_reshare_passes_the_range_check():
    alice_end, bob_end = memory_channel_pair(timeout_s=5)
    alice = arith.ArithSession(alice_end, "alice")
    bob = arith.ArithSession(bob_end, "bob")
    x = ring.from_ints([5, (1 << 128) - 7, (1 << 20) - 1])  # 5, -7, 2^20 - 1 (alice's shares)
    mine = arith._reshare(alice, x, 20)
    theirs = arith._reshare(bob, ring.from_ints([0, 0, 0]), 20)
    assert ring.to_signed(ring.add(mine, theirs)) == [5, -7, (1 << 20) - 1]
    assert np.all(ring.sar(theirs, 20 + STAT_BITS) == ring.sar(theirs, 127))  # in range
