"""Shares whose sum has a known top bit: resharing into a narrow ring, lifting back.

A value reshared in Z_2^(b + 2) with a known top bit 0 (``reshare``) feeds an OLE with
b + 3 OTs, and a product or table entry computed in such a ring is lifted to Z_2^128 by
one OT per value on the known-top-bit wrap identity (SiRNN, Rathee et al., IEEE S&P
2021, Sec. 4), that OT precomputed on a random choice (Beaver, CRYPTO 1995) so that its
last bit rides with bob's next message (``lift_share``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.protocols import ring
from ppbn.protocols.arith.cot import send_corrections, short_cot_finish
from ppbn.protocols.arith.session import WRAP_BITS_KIND, ArithSession, DeferredLift, DeferredPart
from ppbn.protocols.fixedpoint import RING_BITS

WRAP_KIND = "arith.wrap"  # alice's corrections of the wrap OTs


class WrapOTs:
    """The OTs of one ``lift_share``, one per value on the forward extension, precomputed with
    random choices (Beaver, "Precomputing oblivious transfer", CRYPTO 1995): bob draws his
    choices c and sends their u messages when the operation starts, before he knows his
    top bits; alice reads them (``receive``) when she is ready to read, so neither waits."""

    def __init__(self, session: ArithSession, count: int) -> None:
        self.count = count
        self.choices: np.ndarray | None = None
        self.pads: np.ndarray | tuple[np.ndarray, np.ndarray] | None = None
        if not session.is_alice:
            self.choices = (session.random.uint64(count) & np.uint64(1)).astype(np.uint8)
            self.pads = session.ot_receiver().pads(self.choices)

    def receive(self, session: ArithSession) -> None:
        """Alice: read bob's u messages (once)."""
        if session.is_alice and self.pads is None:
            sender = session.ot_sender()
            self.pads = sender.pads(self.count)


@dataclass(frozen=True)
class NarrowShare:
    """One party's share of x, |x| < 2^b, in Z_2^m, m = ``reshared_width``(b) (``reshare``):
    its share u in [0, 2^m) read as a signed m-bit number s = u - 2^m t, and t, the top
    bit of u; x + 2^b = s_alice + s_bob + 2^m t_alice t_bob."""

    signed: np.ndarray  # (n, 2) ring vector
    top: np.ndarray  # (n,) uint64, 0 or 1

    def choices(self, width: int) -> np.ndarray:
        """This party's input to an OLE it chooses in, ``width`` = m: s + 2^(m - 1), in
        [0, 2^m), plus t at bit m, so that the OLE's top OT (position m) multiplies by t."""
        offset = ring.add(self.signed, ring.constant(1 << (width - 1)))
        return ring.add(offset, ring.shl(ring.from_uint64(self.top), width))

    def top_times(self, y: np.ndarray) -> np.ndarray:
        """t y per value: the correlation of the top OT of an OLE this party sends in."""
        return y & np.negative(self.top)[:, None]


def split_share(u: np.ndarray, n: int) -> NarrowShare:
    """u's low n bits as a signed n-bit number and its top bit (``NarrowShare``)."""
    spare = RING_BITS - n
    mine = ring.shl(u, spare)
    return NarrowShare(ring.sar(mine, spare), mine[:, 1] >> np.uint64(63))


def lift_share(
    session: ArithSession, wrap: WrapOTs, values: Sequence[tuple[NarrowShare, int, int]]
) -> list[np.ndarray]:
    """Shares mod 2^128 of each v from n-bit shares of v + 2^c, given as (share, n, c) with
    v + 2^c in [0, 2^(n - 1)): then v + 2^c = s_A + s_B + 2^n t_A t_B exactly (the wrap of
    shares whose sum has a known top bit: SiRNN, Rathee et al., IEEE S&P 2021, Sec. 4), and
    one OT per value makes shares of t_A t_B in Z_2^(128 - n).

    The OT is ``WrapOTs``'s, on bob's random choice c: alice sends the correction for
    her correlation t_A (``cot._kept_bytes`` of 128 - n bits), so bob holds o = p + c t_A and
    alice p; bob sends d = t_B XOR c, one bit. With d = 0 (c = t_B) the shares of t_A t_B
    are (-p, o); with d = 1 (c = 1 - t_B) t_B t_A = (t_A + p) - o, so (t_A + p, -o). Alice
    needs d to finish: with ``defer_lifts`` she keeps her result as if d = 0 and completes
    it in place when she next reads (``ArithSession.settle``), so the bit rides with bob's
    next message; otherwise she settles now. Her result is right in its low n bits before
    that.

    Security: bob sees the OT's correction, uniform given his choice (OT security), and
    his own d; alice sees d = t_B XOR c with c uniform and hidden from her by the OT."""
    sizes = [share.signed.shape[0] for share, _, _ in values]
    widths = np.repeat([n for _, n, _ in values], sizes).astype(np.int64)
    tops = np.concatenate([share.top for share, _, _ in values])
    remaining = RING_BITS - widths
    session.counters.lifts += tops.shape[0]
    bounds = np.cumsum([0, *sizes])
    results = []
    if session.is_alice:
        wrap.receive(session)
        pad0, pad1 = wrap.pads
        delta = ring.from_uint64(tops)
        send_corrections(session, pad0, pad1, delta, remaining, WRAP_KIND)
        parts = []
        for (share, n, offset), start, stop in zip(values, bounds[:-1], bounds[1:], strict=True):
            pad = ring.shl(pad0[start:stop], n)
            mine = ring.sub(ring.sub(share.signed, ring.constant(1 << offset)), pad)
            fix = ring.add(ring.shl(delta[start:stop], n), ring.shl(pad, 1))
            parts.append(DeferredPart(mine, fix, n, int(start)))
            results.append(mine)
        session.hold(DeferredLift(tops.shape[0], parts))
        return results
    received = short_cot_finish(session, wrap.pads, wrap.choices, remaining, WRAP_KIND)
    flips = tops.astype(np.uint8) ^ wrap.choices
    session.channel.send_array(WRAP_BITS_KIND, np.packbits(flips, bitorder="little"))
    ell = np.where(flips[:, None] == 1, ring.neg(received), received)
    for (share, n, _), start, stop in zip(values, bounds[:-1], bounds[1:], strict=True):
        results.append(ring.add(share.signed, ring.shl(ell[start:stop], n)))
    return results


def reshared_width(bound_bits: int) -> int:
    """Bits m of a reshared share of a value below 2^bound_bits in magnitude (``reshare``):
    x + 2^b lies in [0, 2^(b + 1)), and one bit more keeps the top bit of the sum 0. An OLE
    that chooses with the share takes m + 1 OTs (``NarrowShare.choices``)."""
    return bound_bits + 2


def reshare(session: ArithSession, x: np.ndarray, bits: int) -> NarrowShare:
    """Shares of x, |x| < 2^bits, in Z_2^m, m = bits + 2 (``reshared_width``): alice sends
    x_A + 2^bits + r mod 2^m (ceil(m / 8) bytes) for r uniform in Z_2^m and keeps
    u_A = -r mod 2^m; bob keeps u_B = x_B plus what arrived, mod 2^m. Then u_A + u_B =
    x' + 2^m w for x' = x + 2^bits in [0, 2^(m - 1)) and a wrap bit w, and w is the OR of
    the two top bits: if either is set the sum is at least 2^(m - 1), which x' is not, so
    it wrapped. Hence x' = s_A + s_B + 2^m t_A t_B with s the shares read as signed m-bit
    numbers and t their top bits (the wrap of shares whose sum has a known top bit, as in
    SiRNN, Rathee et al., IEEE S&P 2021, Sec. 4). An OLE with x's share as the choice then
    needs m + 1 OTs (``NarrowShare.choices``) where a statistically masked integer share
    needed bits + 41. Bob keeps only m bits of what arrives, so any message is a share.

    Security: bob sees x' + r mod 2^m, uniform whatever x is (perfectly hiding); alice
    sees nothing."""
    n = x.shape[0]
    width = reshared_width(bits)
    size = (width + 7) // 8
    if session.is_alice:
        mask = session.random.uniform(n)
        masked = ring.add(ring.add(x, ring.constant(1 << bits)), mask).view(np.uint8).reshape(n, 16)
        session.channel.send_array("arith.reshare", np.ascontiguousarray(masked[:, :size]))
        mine = ring.neg(mask)
    else:
        received = np.zeros((n, 16), dtype=np.uint8)
        received[:, :size] = session.channel.recv_array("arith.reshare", np.uint8, (n, size))
        mine = ring.add(x, received.view(np.uint64))
    share = split_share(mine, width)
    if not session.is_alice:
        session.opened("reshare", share.signed)
    return share
