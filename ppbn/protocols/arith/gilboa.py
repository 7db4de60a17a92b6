"""Gilboa's OT-based oblivious linear evaluation (OLE), in one direction or both at once.

Gilboa, CRYPTO 1999 (the OT-based multiplication that Yang-Wright 5.4 allows for the ln
series): shares of a b from one party's a and the other's b with one correlated OT
(``cot``) per bit of b. A product's two cross terms both choose with the narrower
operand's share, reshared in Z_2^(b + 2), and its top bit, one OLE each way; a square
needs one cross term and one wrap OT instead of two OLEs (``products``). Putting one OLE
on each extension (``ole_two_way``) leans the OLE bytes towards bob's direction of the
link, which carries less of the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppbn.kernels.ring import shifted_sums
from ppbn.protocols import ring
from ppbn.protocols.arith.checks import check_shares
from ppbn.protocols.arith.cot import short_cot_finish, short_cot_send
from ppbn.protocols.arith.session import ALICE, BOB, ArithSession
from ppbn.protocols.fixedpoint import RING_BITS
from ppbn.protocols.ot import CHUNK_OTS, OTReceiver, OTSender

BIT_SHIFTS = np.arange(RING_BITS, dtype=np.int64)


def _widths(bits: int | np.ndarray, n: int) -> np.ndarray:
    """Per-value bit counts from one int or a vector, refused outside [1, 128]."""
    widths = np.broadcast_to(np.asarray(bits, dtype=np.int64), (n,))
    if widths.size and (widths.min() < 1 or widths.max() > RING_BITS):
        raise ValueError(f"bits must lie in [1, {RING_BITS}]")
    return widths


OLE_KINDS = {ALICE: "arith.ole.y", BOB: "arith.ole.r"}  # the corrections, by the OT sender


@dataclass(frozen=True)
class OlePart:
    """One party's inputs to the OLEs of one direction: its values (the sender's a, or the
    chooser's b, in [0, 2^bits)), each value's ``bits`` (OTs) and ``ring_bits``; the sender
    may give ``top``, per value the correlation of its top OT (bit bits - 1) in place of a
    (``products.mul`` on a ``lift.NarrowShare``)."""

    values: np.ndarray
    bits: int | np.ndarray = RING_BITS
    ring_bits: int | np.ndarray = RING_BITS
    top: np.ndarray | None = None


def ole(
    session: ArithSession,
    values: np.ndarray,
    bits: int | np.ndarray = RING_BITS,
    ring_bits: int | np.ndarray = RING_BITS,
) -> np.ndarray:
    """Shares of a * b mod 2^ring_bits from alice's a and bob's b ((n, 2) ring vectors
    each); bob's b must lie in [0, 2^bits) (all of Z_2^128 by default). ``bits`` and
    ``ring_bits`` may differ per value, with bits <= ring_bits; the shares' bits above
    ring_bits are garbage (``products.mul`` opens such a product through a ring of its bound).

    Gilboa: for each bit b_i, a correlated OT with correlation a (alice) and choice b_i
    (bob), in the ring Z_2^(L - i), L = ring_bits: alice gets x_i, bob x_i + b_i a; alice's
    share is -sum 2^i x_i, bob's sum 2^i (x_i + b_i a); they add up to a b mod 2^L, and the
    correction of OT i carries only ceil((L - i) / 8) bytes (``cot._kept_bytes``). ``bits``
    OTs per value in chunks of ``CHUNK_OTS`` OTs: one extension block per call, because
    larger calls (8 blocks, 16 MB arrays) cost 40% more CPU here (cache misses). The chunks
    are pipelined: bob sends chunk i + 1's u messages before he waits for chunk i's
    corrections, so on a slow link alice's work and the transfer overlap.

    Security: bob sees OT outputs and corrections, uniform given his bits (OT security);
    alice sees only the messages of the OT extension, uniform given her inputs.
    """
    empty = OlePart(np.zeros((0, 2), dtype=np.uint64))
    return ole_two_way(session, OlePart(values, bits, ring_bits), empty)[0]


def ole_two_way(
    session: ArithSession, forward: OlePart, reverse: OlePart
) -> tuple[np.ndarray, np.ndarray]:
    """Two batches of OLEs at once: ``forward`` as ``ole`` (alice's a, bob's b) and
    ``reverse`` with the roles swapped (bob's a, alice's b, on ``ArithSession.reverse_ot``).
    Returns this party's shares of each batch.

    Each party sends the corrections of the batch it is the OT sender of and the u messages
    of the one it chooses in, so the bytes of two products split evenly between the two
    directions of the link (with alice the sender of both, hers carried every correction).
    Message order, the same at both parties: the u of the first chunk it chooses in, then
    per step i the corrections of its chunk i as sender and the u of its chunk i + 1 as
    chooser; it reads the peer's u of chunk i, then the corrections of chunk i, which is the
    order in which the peer sent them. Both extensions are set up first, forward before
    reverse, at both parties.

    Security: that of ``ole`` in each direction.
    """
    peer = BOB if session.is_alice else ALICE
    by_sender = {ALICE: forward, BOB: reverse}
    sending, choosing = by_sender[session.role], by_sender[peer]
    run = TwoWayOle(session, choosing, forward.values.shape[0] > 0, reverse.values.shape[0] > 0)
    sent, chosen = run.finish(sending)
    return (sent, chosen) if session.is_alice else (chosen, sent)


class TwoWayOle:
    """One party's end of ``ole_two_way`` in two steps: the constructor sets up the
    extensions in use and sends the u messages of the first chunk this party chooses in;
    ``finish`` takes the part it sends in and does the rest. In between a party may do
    what must precede its first read (alice settles deferred lifts, ``products.mul``), so her first
    messages are not held up by it."""

    def __init__(
        self, session: ArithSession, choosing: OlePart, forward: bool, reverse: bool
    ) -> None:
        self.session = session
        self.choosing_values = check_shares(choosing.values, "OLE input")
        self.choose_chunks, _ = _ole_chunks(choosing)
        self.send_ext, self.choose_ext = ole_extensions(session, forward, reverse)
        first = self.choose_chunks[0] if self.choose_chunks else None
        self.pending = (
            first.prepare(self.choose_ext, self.choosing_values) if first is not None else None
        )

    def finish(self, sending: OlePart) -> tuple[np.ndarray, np.ndarray]:
        """(this party's shares of the OLEs it sends in, of those it chooses in)."""
        session, peer = self.session, BOB if self.session.is_alice else ALICE
        sending_values = check_shares(sending.values, "OLE input")
        send_chunks, send_widths = _ole_chunks(sending)
        choose_chunks, choosing_values, pending = (
            self.choose_chunks,
            self.choosing_values,
            self.pending,
        )
        send_kind, choose_kind = OLE_KINDS[session.role], OLE_KINDS[peer]
        sent = np.empty_like(sending_values)
        chosen = np.empty_like(choosing_values)
        for step in range(max(len(send_chunks), len(choose_chunks))):
            if step < len(send_chunks):
                chunk = send_chunks[step]
                rows = slice(chunk.start, chunk.stop)
                delta = np.repeat(sending_values[rows], send_widths[rows], axis=0)
                if sending.top is not None:
                    delta[np.cumsum(send_widths[rows]) - 1] = sending.top[rows]
                pads = short_cot_send(session, self.send_ext, delta, chunk.remaining, send_kind)
                shifted_sums(pads, chunk.widths, True, sent[rows])
            if step < len(choose_chunks):
                # the next chunk's u goes out before this chunk's corrections are awaited, so
                # the peer works on chunk i + 1 while chunk i's corrections are on the wire
                following = (
                    choose_chunks[step + 1].prepare(self.choose_ext, choosing_values)
                    if step + 1 < len(choose_chunks)
                    else None
                )
                chunk = choose_chunks[step]
                choices, pads = pending
                received = short_cot_finish(session, pads, choices, chunk.remaining, choose_kind)
                shifted_sums(received, chunk.widths, False, chosen[chunk.start : chunk.stop])
                pending = following
        return sent, chosen


def _ole_chunks(part: OlePart) -> tuple[list[_OleChunk], np.ndarray]:
    """The chunks of one direction's OLEs (at most ``CHUNK_OTS`` OTs each) and the widths."""
    n = part.values.shape[0]
    widths = _widths(part.bits, n)
    rings = _widths(part.ring_bits, n)
    if np.any(widths > rings):
        raise ValueError("an OLE input cannot be wider than its ring")
    per_chunk = max(1, CHUNK_OTS // int(widths.max(initial=1)))
    return [
        _OleChunk.of(widths, rings, start, min(n, start + per_chunk))
        for start in range(0, n, per_chunk)
    ], widths


def ole_extensions(
    session: ArithSession, forward: bool, reverse: bool
) -> tuple[OTSender | None, OTReceiver | None]:
    """(this party's sending end, its choosing end) of the directions in use; with both,
    the forward extension is set up before the reverse one at both parties."""
    if session.is_alice and not session.extensions_started(forward, reverse):
        session.settle()  # a set-up reads bob's messages, and his lift bits came first
    ends: dict[str, OTSender | OTReceiver] = {}
    if forward:
        ends[ALICE] = session.ot_sender() if session.is_alice else session.ot_receiver()
        if reverse:
            ends[ALICE].start()
    if reverse:
        ends[BOB] = session.reverse_ot()
    return ends.get(session.role), ends.get(BOB if session.is_alice else ALICE)


@dataclass(frozen=True)
class _OleChunk:
    """Values [start, stop) of an OLE: ``widths`` their OTs (one per bit below the width),
    ``used`` (k, top) marks them, and ``remaining`` is, per OT in that order, its value's
    ring bits minus its bit position (the bits its correction keeps). A party's share of a
    value is the sum of its OTs' outputs, each shifted by its position
    (``kernels.ring.shifted_sums``)."""

    start: int
    stop: int
    widths: np.ndarray
    used: np.ndarray
    remaining: np.ndarray

    @staticmethod
    def of(widths: np.ndarray, rings: np.ndarray, start: int, stop: int) -> _OleChunk:
        chunk_widths = widths[start:stop]
        top = int(chunk_widths.max())
        used = BIT_SHIFTS[None, :top] < chunk_widths[:, None]
        remaining = (rings[start:stop, None] - BIT_SHIFTS[None, :top])[used]
        return _OleChunk(start, stop, np.ascontiguousarray(chunk_widths), used, remaining)

    def prepare(self, receiver: OTReceiver, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chooser: its choice bits (each value's bits below its width, which must hold
        it), after sending their u messages; returns (choices, pads)."""
        top = self.used.shape[1]
        choices = ring.bits(values[self.start : self.stop])
        wide = choices[:, top:].any(axis=1) | (choices[:, :top] & ~self.used).any(axis=1)
        if wide.any():
            row = int(np.flatnonzero(wide)[0])
            width = int(self.used[row].sum())
            raise ValueError(f"OLE input {self.start + row} does not fit in {width} bits")
        selected = np.ascontiguousarray(choices[:, :top][self.used])
        return selected, receiver.pads(selected)
