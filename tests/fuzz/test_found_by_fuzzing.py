"""Regressions for what the fuzzer found in the protocol code, reproduced without daemons."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.protocols import arith, ring
from ppbn.protocols.arith.lift import reshare
from ppbn.protocols.arith.session import DeferredLift, DeferredPart
from ppbn.protocols.channel import ProtocolError, memory_channel_pair


@pytest.mark.parametrize("value", [2**100, 2**127, 1 << 23, (1 << 24) - 1])
def test_a_reshared_value_out_of_range_is_a_protocol_error(value):
    """A flipped byte in alice's 'arith.reshare' message made bob's OLE raise ValueError
    (an internal error of the job). The message carries only the low ceil(m / 8) bytes of
    each value, m = 20 + 2 (``arith.reshare``), so a full 16-byte element is refused for
    its size, and bob keeps only m bits of whatever 3 bytes arrive: his share is a signed
    m-bit number and a top bit, which fit his OLE."""
    alice_end, bob_end = memory_channel_pair(timeout_s=5)
    alice_end.send_array("arith.reshare", ring.from_ints([3, value]))
    bob = arith.ArithSession(bob_end, "bob")
    with pytest.raises(ProtocolError, match="arith.reshare"):
        reshare(bob, ring.from_ints([0, 0]), 20)
    alice_end, bob_end = memory_channel_pair(timeout_s=5)
    alice_end.send_array(
        "arith.reshare", ring.from_ints([3, value]).view(np.uint8).reshape(2, 16)[:, :3].copy()
    )
    share = reshare(arith.ArithSession(bob_end, "bob"), ring.from_ints([0, 0]), 20)
    assert np.all(ring.sar(share.signed, 21) == ring.sar(share.signed, 127))  # in range
    assert set(share.top.tolist()) <= {0, 1}


def test_an_honest_reshare_passes_the_range_check():
    alice_end, bob_end = memory_channel_pair(timeout_s=5)
    alice = arith.ArithSession(alice_end, "alice")
    bob = arith.ArithSession(bob_end, "bob")
    x = ring.from_ints([5, (1 << 128) - 7, (1 << 20) - 1])  # 5, -7, 2^20 - 1 (alice's shares)
    mine = reshare(alice, x, 20)
    theirs = reshare(bob, ring.from_ints([0, 0, 0]), 20)
    wrap = ring.shl(ring.from_uint64(mine.top & theirs.top), 22)
    assert ring.to_signed(ring.add(ring.add(mine.signed, theirs.signed), wrap)) == [
        5 + 2**20,
        -7 + 2**20,
        2**21 - 1,
    ]
    assert np.all(ring.sar(theirs.signed, 21) == ring.sar(theirs.signed, 127))  # in range


def test_a_lift_bits_message_of_the_wrong_size_is_a_protocol_error():
    """Alice completes a deferred lift (``arith.lift_share``) with bob's bits d, one per value,
    packed: a message of another size is refused naming it; any bytes of the right size
    are bits, the padding ones ignored, so a hostile bob can only pick d, which his own
    share already lets him do."""
    alice_end, bob_end = memory_channel_pair(timeout_s=5)
    alice = arith.ArithSession(alice_end, "alice")
    target = ring.from_ints([1, 2, 3])
    lift = DeferredLift(3, [DeferredPart(target, ring.from_ints([10, 20, 30]), 40, 0)])
    bob_end.send_array("arith.wrap.d", np.zeros(2, dtype=np.uint8))
    with pytest.raises(ProtocolError, match="arith.wrap.d"):
        lift.complete(alice)
    bob_end.send_array("arith.wrap.d", np.array([0b11111101], dtype=np.uint8))
    lift.complete(alice)
    assert ring.to_ints(target) == [11, 2, 33]
