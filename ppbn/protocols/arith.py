"""Secure arithmetic on additive shares over Z_2^128: multiplication, truncation, lookup.

Two parties, semi-honest (DESIGN.md "Security model"). A shared vector x is held as
x = x_alice + x_bob mod 2^128, each share an (n, 2) uint64 ring vector (``ring``), values
in the fixed-point format of ``fixedpoint`` (two's complement, FRAC fractional bits). Both
parties call the same function with their own share and their own ``ArithSession``. Two OT
extensions run over the channel: the forward one (alice sends, bob chooses) and the
reverse one (bob sends, alice chooses); a product puts one of its two OLEs on each
(``ole_two_way``) and a square its one on the reverse extension, so the OLE bytes lean
towards bob's direction, which carries less of the rest. Everything is batched over n
values.

Building blocks and where they come from:
- Additive correlated OT on top of the OT extension of ``ot`` (the correlated-OT
  variant of Asharov, Lindell, Schneider and Zohner, CCS 2013, Sec. 5.4, with an additive
  instead of an XOR correlation): alice's output is the random pad H(q_j), bob's is
  H(q_j) + c_j delta_j, from ``OTSender.pads`` and ``OTReceiver.pads``. One correction per
  OT, at most 16 bytes, half of what a chosen-message OT sends; the OT of bit i of a
  Gilboa product works mod 2^(128 - i) and sends only those bits (the shortened messages of
  the OT-based multiplication triples of Demmler, Schneider and Zohner, ABY, NDSS 2015).
- Gilboa's OT-based oblivious linear evaluation (Gilboa, CRYPTO 1999; the OT-based
  multiplication that Yang-Wright 5.4 allows for the ln series): shares of a b from one
  party's a and the other's b with one correlated OT per bit of b. A product's two cross
  terms both choose with the narrower operand's share, reshared in Z_2^(b + 2), and its
  top bit (the known-top-bit wrap of SiRNN, Rathee et al., IEEE S&P 2021), one OLE each
  way; a square needs one cross term and one wrap OT instead of two OLEs.
- Products in the smallest ring that holds them with a known top bit (the bound plus 2,
  or 3 when truncated), truncated locally there (the carry makes floor(x / 2^t) or one
  more), and lifted to Z_2^128 by one OT per value on the known-top-bit wrap identity
  (``_lift``; SiRNN's, Rathee et al., IEEE S&P 2021), that OT precomputed on a random
  choice (Beaver, CRYPTO 1995) so that its last bit rides with bob's next message.
- Truncation of a sum by masked opening (the probabilistic truncation of Catrina and
  Saxena, FC 2010, for two parties): bob opens x + r for alice's bounded mask r,
  statistically hiding with STAT_BITS; the result is floor(x / 2^t) or one more.
- Table lookup with a masked index (the table step of Lindell and Pinkas's ln protocol,
  Yang-Wright 5.4 and 6.5): 1-out-of-N OT of a rotated, masked table, built from log N
  random OTs in the manner of Naor and Pinkas (1-out-of-N from 1-out-of-2 OT). Entries
  are shared in the ring of their own width plus 2 bits and lifted as products are, so
  each is sent in ceil((e + 2) / 8) bytes, and several tables and indices share one round.

Each protocol function states what each party sees; the counters say how much work was
done (OTs, multiplications, truncations, lookups).

Domain separation: the lookup pads hash with ``FixedKeyHash(LOOKUP_PROTOCOL,
channel.session)`` and the OT extension is the instance b"arith" of ``ppbn.protocols.ot``,
so neither shares a fixed-key permutation (nor tweaks) with the garbling of ``yao`` or
with another job (``ppbn.circuits.garble``, GKWY20).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.circuits.garble import FixedKeyHash
from ppbn.circuits.ir import bits_to_values
from ppbn.protocols import ring
from ppbn.protocols.channel import Channel
from ppbn.protocols.executor import ExecutorSource
from ppbn.protocols.fixedpoint import FRAC, RING_BITS, STAT_BITS
from ppbn.protocols.ot import (
    CHUNK_OTS,
    DEFAULT_DH_BITS,
    OT_INLINE_BELOW,
    OTReceiver,
    OTSender,
    dh_group,
)
from ppbn.protocols.seeds import TaskSeeds

ALICE = "alice"
BOB = "bob"
MAX_BOUND_BITS = RING_BITS - 1 - STAT_BITS  # |x| < 2^87: x + mask never wraps
LOOKUP_CHUNK_HASHES = 1 << 20  # hashes per lookup message, to bound memory and message size
LOOKUP_ROUND_OTS = 1 << 20  # lookup OTs per round: alice holds 32 bytes of keys per OT
MAX_TABLE_BITS = 10
_BIT_SHIFTS = np.arange(RING_BITS, dtype=np.int64)
LOOKUP_PROTOCOL = b"ppbn/arith/lookup"
OT_INSTANCE = b"arith"
REVERSE_OT_INSTANCE = b"arith.reverse"  # bob sends, alice receives (``bit_mul``)


@dataclass
class ArithCounters:
    ots: int = 0
    multiplications: int = 0
    truncations: int = 0
    lifts: int = 0
    lookups: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "ots": self.ots,
            "multiplications": self.multiplications,
            "truncations": self.truncations,
            "lifts": self.lifts,
            "lookups": self.lookups,
        }


class ArithSession:
    """One party's state for share arithmetic: channel, role, OT extension, randomness.

    The OT extension (and its 128 base OTs) is set up on first use. Masks and shares come
    from ``ring.RandomRing`` (AES-CTR under an os.urandom key). With ``keep_openings`` the
    session records every masked value this party reconstructs (bob's x + r in truncation,
    his share of a resharing, his entry T[j] + 2^e - rho in lookups): with the channel
    transcript that is its whole view, which the leak tests examine. With ``defer_lifts``
    alice completes her lifts when she next reads (``settle``) instead of at once.
    ``dh_bits`` is the job's base-OT group (``ot.dh_bits_for(key_bits)``,
    the same at both parties). ``seeds``, ``executor`` and ``ot_inline_below`` go to this
    party's end of the OT extension (``ot.OTSender``, ``ot.OTReceiver``).
    """

    def __init__(
        self,
        channel: Channel,
        role: str,
        keep_openings: bool = False,
        *,
        dh_bits: int = DEFAULT_DH_BITS,
        seeds: TaskSeeds | None = None,
        executor: ExecutorSource | None = None,
        ot_inline_below: int = OT_INLINE_BELOW,
    ) -> None:
        if role not in (ALICE, BOB):
            raise ValueError(f"role must be {ALICE!r} or {BOB!r}, got {role!r}")
        self.channel = channel
        self.role = role
        self.dh_bits = dh_group(dh_bits).bits  # checked now, used when the OT starts
        self.counters = ArithCounters()
        self.random = ring.RandomRing()
        self.hash = FixedKeyHash(LOOKUP_PROTOCOL, channel.session)
        self._sender: OTSender | None = None
        self._receiver: OTReceiver | None = None
        self._reverse: OTSender | OTReceiver | None = None
        self._lookup_tweak = 0
        self._ot_options = {
            "dh_bits": self.dh_bits, "instance": OT_INSTANCE, "seeds": seeds,
            "executor": executor, "inline_below": ot_inline_below,
        }  # fmt: skip
        self.openings: list[tuple[str, np.ndarray]] | None = [] if keep_openings else None
        # alice's lifted results still awaiting bob's bits (``_lift``), oldest first
        self.defer_lifts = False
        self._deferred: list[_DeferredLift] = []

    def opened(self, what: str, values: np.ndarray) -> np.ndarray:
        if self.openings is not None:
            self.openings.append((what, values.copy()))
        return values

    @property
    def is_alice(self) -> bool:
        return self.role == ALICE

    def ot_sender(self) -> OTSender:
        if not self.is_alice:
            raise ValueError("only alice sends OTs")
        if self._sender is None:
            self._sender = OTSender(self.channel, **self._ot_options)
        return self._sender

    def ot_receiver(self) -> OTReceiver:
        if self.is_alice:
            raise ValueError("only bob receives OTs")
        if self._receiver is None:
            self._receiver = OTReceiver(self.channel, **self._ot_options)
        return self._receiver

    def reverse_ot(self) -> OTSender | OTReceiver:
        """The extension that runs the other way (bob sends, alice receives), its set-up
        done on first use by both parties at the same point (``bit_mul``)."""
        if self._reverse is None:
            options = {**self._ot_options, "instance": REVERSE_OT_INSTANCE}
            self._reverse = OTReceiver(self.channel, **options) if self.is_alice else OTSender(self.channel, **options)
            self._reverse.start()
        return self._reverse

    def settle(self, *values: np.ndarray) -> None:
        """Alice: complete deferred lifts (``_lift``) with bob's bits, in place, oldest first
        (the order his bits arrive in): all of them, or with ``values`` only as far as the
        last lift any of them is a result of. A no-op for bob and when nothing is deferred.
        In deferral mode (``defer_lifts``) whoever reads alice's results calls this first:
        until then they are right only in their low n bits; every arith operation settles
        all before it reads from the channel."""
        last = len(self._deferred)
        if values and self._deferred:
            owners = [i for i, lift in enumerate(self._deferred) if any(part.target is v for part in lift.parts for v in values)]
            last = owners[-1] + 1 if owners else 0
        for _ in range(last):
            self._deferred.pop(0).complete(self)

    def hold(self, lift: _DeferredLift) -> None:
        """Alice: keep a lift's results awaiting bob's bits until she next reads
        (``defer_lifts``), or complete them now."""
        self._deferred.append(lift)
        if not self.defer_lifts:
            self.settle()

    def settle_unless_final(self, x: np.ndarray, bits: int) -> None:
        """Alice: complete the lifts x awaits, unless its low ``bits`` bits are final
        already (``low_bits_final``): all a resharing in that width reads."""
        if not self.low_bits_final(x, bits):
            self.settle(x)

    def derive(self, result: np.ndarray, *terms: tuple[np.ndarray, int | np.ndarray]) -> np.ndarray:
        """Alice: result = sum c x (plus a public constant) over ``terms`` (x, c), c an int
        or a ring vector of per-value factors, computed locally from values some of which
        await bob's bits: the result awaits them too, with the fixes scaled alike, and
        completes with them (``settle``). Returns result."""
        for lift in self._deferred:
            derived = []
            for part in lift.parts:
                for x, c in terms:
                    if part.target is x:
                        if isinstance(c, int):  # a factor 2^z keeps z more low bits final
                            fix, n = ring.mul_int(part.fix, c), min(RING_BITS, part.n + _trailing_zeros(c))
                        else:
                            fix, n = ring.mul(part.fix, c), part.n
                        derived.append(_DeferredPart(result, fix, n, part.start))
            lift.parts += derived
        return result

    def low_bits_final(self, x: np.ndarray, bits: int) -> bool:
        """Whether x's low ``bits`` bits are final: x is not a deferred result, or it is one
        whose n-bit share is at least that wide (``_reshare`` reads no more)."""
        return all(part.n >= bits for lift in self._deferred for part in lift.parts if part.target is x)

    def extensions_started(self, forward: bool = True, reverse: bool = True) -> bool:
        """Whether the OT extensions asked for are set up already (``_ole_extensions``)."""
        ours = self._sender if self.is_alice else self._receiver
        return (not forward or (ours is not None and ours.started)) and (not reverse or self._reverse is not None)

    def next_tweaks(self, count: int) -> int:
        """Reserve ``count`` hash tweaks for lookups (both parties advance in step)."""
        base = self._lookup_tweak
        self._lookup_tweak += count
        return base


def _trailing_zeros(c: int) -> int:
    """The z of c = 2^z times an odd number (RING_BITS for c = 0 modulo 2^128)."""
    c %= 1 << RING_BITS
    return (c & -c).bit_length() - 1 if c else RING_BITS


def _check_shares(x: np.ndarray, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.uint64 or x.ndim != 2 or x.shape[1] != 2:
        raise ValueError(f"{what} must be an (n, 2) uint64 ring vector, got {x.shape} {x.dtype}")
    return x


def _check_bound(bound_bits: int) -> None:
    if not 1 <= bound_bits <= MAX_BOUND_BITS:
        raise ValueError(f"bound_bits must lie in [1, {MAX_BOUND_BITS}] (STAT_BITS = {STAT_BITS})")


# -- correlated OT for Gilboa products --------------------------------------------------
def _kept_bytes(remaining: np.ndarray) -> np.ndarray:
    """Bytes of an OT correction that must be right in its low ``remaining`` bits: the OT of
    bit i of a Gilboa product in the ring Z_2^L has its outputs multiplied by 2^i, so only
    the low L - i bits count and the correction (little-endian, as ``ring`` lays elements
    out) is cut to ceil((L - i) / 8) bytes."""
    return (remaining + 7) // 8


_KEPT_BY_REMAINING = np.arange(16)[None, :] < _kept_bytes(np.arange(RING_BITS + 1))[:, None]  # (129, 16)


def _kept_mask(remaining: np.ndarray) -> np.ndarray:
    """(m, 16) bool: the correction bytes each OT sends (``_kept_bytes``), row by row from a
    table of the 129 lengths (a take is 20x faster than comparing per OT)."""
    return _KEPT_BY_REMAINING.take(remaining, axis=0)


def _short_cot_send(
    session: ArithSession, sender: OTSender, delta: np.ndarray, remaining: np.ndarray, kind: str
) -> np.ndarray:
    """The OT sender (alice, or bob on the reverse extension): random x0 (m, 2); the
    receiver obtains x0 + c_j delta_j mod 2^(L_j - i_j) (``remaining`` = L_j - i_j for bit
    position i_j in the ring Z_2^L_j), the only bits that count after the shift by i_j.

    Uses the extension pads of ``OTSender.pads`` (pad0 = H(q_j), pad1 = H(q_j ^ s)) and sends
    the correction pad1 ^ (pad0 + delta_j), cut to ``_kept_bytes`` of its position, in one
    ``kind`` message: a receiver with c_j = 1 holds pad1 and recovers pad0 + delta_j in
    those bytes; pad1 is unknown to one with c_j = 0, so the correction is uniform.
    """
    m = delta.shape[0]
    pad0, pad1 = sender.pads(m)
    _send_corrections(session, pad0, pad1, delta, remaining, kind)
    sender.ots += m
    return pad0


def _send_corrections(
    session: ArithSession, pad0: np.ndarray, pad1: np.ndarray, delta: np.ndarray, remaining: np.ndarray, kind: str
) -> None:
    """The correction message of ``_short_cot_send`` for pads received earlier."""
    m = delta.shape[0]
    correction = ring.add(pad0, delta)
    correction ^= pad1
    session.channel.send_array(kind, correction.view(np.uint8).reshape(m, 16)[_kept_mask(remaining)])
    session.counters.ots += m


def _short_cot_finish(
    session: ArithSession, pads: np.ndarray, choices: np.ndarray, remaining: np.ndarray, kind: str
) -> np.ndarray:
    """The receiving side of ``_short_cot_send``, after ``OTReceiver.pads`` sent the u
    messages of ``choices`` (``_OleChunk.prepare``, so that he can send the next chunk's u
    before this chunk's corrections arrive): receive the corrections and apply them to
    ``pads`` (in place);
    bytes beyond each kept length hold garbage that the caller's shift by the position
    removes."""
    m = choices.shape[0]
    kept = _kept_mask(remaining)
    full = np.zeros((m, 16), dtype=np.uint8)
    full[kept] = session.channel.recv_array(kind, np.uint8, (int(kept.sum()),))
    correction = full.view(np.uint64)
    pads ^= correction & np.negative(choices.astype(np.uint64))[:, None]
    session.counters.ots += m
    return pads


# -- Gilboa OLE -------------------------------------------------------------------------
def _widths(bits: int | np.ndarray, n: int) -> np.ndarray:
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
    (``mul`` on a ``NarrowShare``)."""

    values: np.ndarray
    bits: int | np.ndarray = RING_BITS
    ring_bits: int | np.ndarray = RING_BITS
    top: np.ndarray | None = None


def ole(
    session: ArithSession, values: np.ndarray, bits: int | np.ndarray = RING_BITS, ring_bits: int | np.ndarray = RING_BITS
) -> np.ndarray:
    """Shares of a * b mod 2^ring_bits from alice's a and bob's b ((n, 2) ring vectors
    each); bob's b must lie in [0, 2^bits) (all of Z_2^128 by default). ``bits`` and
    ``ring_bits`` may differ per value, with bits <= ring_bits; the shares' bits above
    ring_bits are garbage (``mul`` opens such a product through a ring of its bound).

    Gilboa: for each bit b_i, a correlated OT with correlation a (alice) and choice b_i
    (bob), in the ring Z_2^(L - i), L = ring_bits: alice gets x_i, bob x_i + b_i a; alice's
    share is -sum 2^i x_i, bob's sum 2^i (x_i + b_i a); they add up to a b mod 2^L, and the
    correction of OT i carries only ceil((L - i) / 8) bytes (``_kept_bytes``). ``bits``
    OTs per value in chunks of ``CHUNK_OTS`` OTs: one extension block per call, because
    larger calls (8 blocks, 16 MB arrays) cost 40% more CPU here (cache misses). The chunks
    are pipelined: bob sends chunk i + 1's u messages before he waits for chunk i's
    corrections, so on a slow link alice's work and the transfer overlap.

    Security: bob sees OT outputs and corrections, uniform given his bits (OT security);
    alice sees only the messages of the OT extension, uniform given her inputs.
    """
    empty = OlePart(np.zeros((0, 2), dtype=np.uint64))
    return ole_two_way(session, OlePart(values, bits, ring_bits), empty)[0]


def ole_two_way(session: ArithSession, forward: OlePart, reverse: OlePart) -> tuple[np.ndarray, np.ndarray]:
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
    run = _TwoWayOle(session, choosing, forward.values.shape[0] > 0, reverse.values.shape[0] > 0)
    sent, chosen = run.finish(sending)
    return (sent, chosen) if session.is_alice else (chosen, sent)


def _before_first_read(session: ArithSession, wrap: _WrapOTs | None) -> None:
    """Alice, before a product's first read: complete earlier lifts (bob's bits of them
    come before anything else he sent), then read the u of the product's wrap OTs."""
    session.settle()
    if wrap is not None:
        wrap.receive(session)


class _TwoWayOle:
    """One party's end of ``ole_two_way`` in two steps: the constructor sets up the
    extensions in use and sends the u messages of the first chunk this party chooses in;
    ``finish`` takes the part it sends in and does the rest. In between a party may do
    what must precede its first read (alice settles deferred lifts, ``mul``), so her first
    messages are not held up by it."""

    def __init__(self, session: ArithSession, choosing: OlePart, forward: bool, reverse: bool) -> None:
        self.session = session
        self.choosing_values = _check_shares(choosing.values, "OLE input")
        self.choose_chunks, _ = _ole_chunks(choosing)
        self.send_ext, self.choose_ext = _ole_extensions(session, forward, reverse)
        first = self.choose_chunks[0] if self.choose_chunks else None
        self.pending = first.prepare(self.choose_ext, self.choosing_values) if first is not None else None

    def finish(self, sending: OlePart) -> tuple[np.ndarray, np.ndarray]:
        """(this party's shares of the OLEs it sends in, of those it chooses in)."""
        session, peer = self.session, BOB if self.session.is_alice else ALICE
        sending_values = _check_shares(sending.values, "OLE input")
        send_chunks, send_widths = _ole_chunks(sending)
        choose_chunks, choosing_values, pending = self.choose_chunks, self.choosing_values, self.pending
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
                pads = _short_cot_send(session, self.send_ext, delta, chunk.remaining, send_kind)
                sent[rows] = ring.neg(chunk.gather(ring.shl(pads, chunk.positions)))
            if step < len(choose_chunks):
                # the next chunk's u goes out before this chunk's corrections are awaited, so
                # the peer works on chunk i + 1 while chunk i's corrections are on the wire
                following = (
                    choose_chunks[step + 1].prepare(self.choose_ext, choosing_values) if step + 1 < len(choose_chunks) else None
                )
                chunk = choose_chunks[step]
                choices, pads = pending
                received = _short_cot_finish(session, pads, choices, chunk.remaining, choose_kind)
                chosen[chunk.start : chunk.stop] = chunk.gather(ring.shl(received, chunk.positions))
                pending = following
        return sent, chosen


def _ole_each_way(
    session: ArithSession, choosing: OlePart, sending: Callable[[], OlePart], wrap: _WrapOTs | None
) -> tuple[np.ndarray, np.ndarray]:
    """``ole_two_way`` for a product or square: this party's part as chooser, and its part as
    sender made only once alice has settled her deferred lifts (its values may be one of
    them) and read bob's wrap u (``_WrapOTs``), after her first u messages are out.
    Returns (this party's forward shares, its reverse shares)."""
    run = _TwoWayOle(session, choosing, True, True)
    _before_first_read(session, wrap)
    sent, chosen = run.finish(sending())
    return (sent, chosen) if session.is_alice else (chosen, sent)


def _ole_chunks(part: OlePart) -> tuple[list[_OleChunk], np.ndarray]:
    """The chunks of one direction's OLEs (at most ``CHUNK_OTS`` OTs each) and the widths."""
    n = part.values.shape[0]
    widths = _widths(part.bits, n)
    rings = _widths(part.ring_bits, n)
    if np.any(widths > rings):
        raise ValueError("an OLE input cannot be wider than its ring")
    per_chunk = max(1, CHUNK_OTS // int(widths.max(initial=1)))
    return [_OleChunk.of(widths, rings, start, min(n, start + per_chunk)) for start in range(0, n, per_chunk)], widths


def _ole_extensions(session: ArithSession, forward: bool, reverse: bool) -> tuple[OTSender | None, OTReceiver | None]:
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
    """Values [start, stop) of an OLE: ``used`` (k, top) marks the OTs of each value (one
    per bit below its width), ``positions`` the bit position of each OT in that order and
    ``remaining`` its value's ring bits minus that position (the bits its correction keeps)."""

    start: int
    stop: int
    used: np.ndarray
    positions: np.ndarray
    remaining: np.ndarray

    @staticmethod
    def of(widths: np.ndarray, rings: np.ndarray, start: int, stop: int) -> _OleChunk:
        chunk_widths = widths[start:stop]
        top = int(chunk_widths.max())
        used = _BIT_SHIFTS[None, :top] < chunk_widths[:, None]
        positions = np.broadcast_to(_BIT_SHIFTS[:top], used.shape)[used]
        remaining = (rings[start:stop, None] - _BIT_SHIFTS[None, :top])[used]
        return _OleChunk(start, stop, used, positions, remaining)

    def gather(self, shifted: np.ndarray) -> np.ndarray:
        """Per value, the sum of its OTs' shifted outputs."""
        if shifted.shape[0] == self.used.size:  # every value as wide as the widest: no gaps
            return ring.sum(shifted.reshape(*self.used.shape, 2), axis=1)
        dense = np.zeros((*self.used.shape, 2), dtype=np.uint64)
        dense[self.used] = shifted
        return ring.sum(dense, axis=1)

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


# -- lifting shares whose sum has a known top bit ---------------------------------------
WRAP_KIND = "arith.wrap"  # alice's corrections of the wrap OTs
WRAP_BITS_KIND = "arith.wrap.d"  # bob's bits d = t_B XOR c


class _WrapOTs:
    """The OTs of one ``_lift``, one per value on the forward extension, precomputed with
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
            sender.ots += self.count


@dataclass(frozen=True)
class _DeferredPart:
    """A vector that awaits bob's bits d[start : start + len] of a deferred lift: alice's
    result as if every d were 0, and what to add where d = 1 (a multiple of 2^n, so the low
    n bits are final already). A lift's results are parts, and so is each value alice
    computes from them locally before they complete (``ArithSession.derive``)."""

    target: np.ndarray
    fix: np.ndarray
    n: int
    start: int


@dataclass
class _DeferredLift:
    """Alice's side of one ``_lift`` until bob's bits arrive (``ArithSession.settle``)."""

    count: int
    parts: list[_DeferredPart]

    def complete(self, session: ArithSession) -> None:
        packed = session.channel.recv_array(WRAP_BITS_KIND, np.uint8, ((self.count + 7) // 8,))
        flips = np.unpackbits(packed, count=self.count, bitorder="little").astype(bool)
        for part in self.parts:
            rows = flips[part.start : part.start + part.target.shape[0]]
            part.target[rows] = ring.add(part.target[rows], part.fix[rows])


def _split(u: np.ndarray, n: int) -> NarrowShare:
    """u's low n bits as a signed n-bit number and its top bit (``NarrowShare``)."""
    spare = RING_BITS - n
    mine = ring.shl(u, spare)
    return NarrowShare(ring.sar(mine, spare), mine[:, 1] >> np.uint64(63))


def _lift(session: ArithSession, wrap: _WrapOTs, values: Sequence[tuple[NarrowShare, int, int]]) -> list[np.ndarray]:
    """Shares mod 2^128 of each v from n-bit shares of v + 2^c, given as (share, n, c) with
    v + 2^c in [0, 2^(n - 1)): then v + 2^c = s_A + s_B + 2^n t_A t_B exactly (the wrap of
    shares whose sum has a known top bit: SiRNN, Rathee et al., IEEE S&P 2021, Sec. 4), and
    one OT per value makes shares of t_A t_B in Z_2^(128 - n).

    The OT is ``_WrapOTs``'s, on bob's random choice c: alice sends the correction for
    her correlation t_A (``_kept_bytes`` of 128 - n bits), so bob holds o = p + c t_A and
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
        _send_corrections(session, pad0, pad1, delta, remaining, WRAP_KIND)
        parts = []
        for (share, n, offset), start, stop in zip(values, bounds[:-1], bounds[1:], strict=True):
            pad = ring.shl(pad0[start:stop], n)
            mine = ring.sub(ring.sub(share.signed, ring.constant(1 << offset)), pad)
            fix = ring.add(ring.shl(delta[start:stop], n), ring.shl(pad, 1))
            parts.append(_DeferredPart(mine, fix, n, int(start)))
            results.append(mine)
        session.hold(_DeferredLift(tops.shape[0], parts))
        return results
    received = _short_cot_finish(session, wrap.pads, wrap.choices, remaining, WRAP_KIND)
    flips = tops.astype(np.uint8) ^ wrap.choices
    session.channel.send_array(WRAP_BITS_KIND, np.packbits(flips, bitorder="little"))
    ell = np.where(flips[:, None] == 1, ring.neg(received), received)
    for (share, n, _), start, stop in zip(values, bounds[:-1], bounds[1:], strict=True):
        results.append(ring.add(share.signed, ring.shl(ell[start:stop], n)))
    return results


# -- truncation and multiplication -----------------------------------------------------
def opening_ring(bound_bits: int) -> int:
    """Bits of the ring in which a value below 2^bound_bits is opened (``truncate``):
    x + r, r of bound_bits + STAT_BITS bits, is a signed number of one bit more,
    so x need only be right modulo 2^(bound_bits + STAT_BITS + 1) and that is all alice sends."""
    return bound_bits + STAT_BITS + 1


def _truncate(
    session: ArithSession, x: np.ndarray, bits: int, bound_bits: int = MAX_BOUND_BITS
) -> np.ndarray:
    """Shares of floor(x / 2^bits) or floor(x / 2^bits) + 1, for shared x with |x| < 2^bound_bits.

    Alice draws r uniform in [-2^(m-1), 2^(m-1)), m = bound_bits + STAT_BITS <= 127, and
    sends x_alice + r; bob reads c = x + r (no wrap-around: |c| < 2^(m-1) + 2^bound_bits
    <= 2^m) as a signed value and keeps floor(c / 2^bits); alice keeps -floor(r / 2^bits).
    The two floors differ from floor(x / 2^bits) by the carry of the low bits: 0 or 1.
    (The brief's mask [0, 2^m) is centred here, which buys one bit of range.) c has m + 1
    signed bits, so x need only be right modulo 2^(m + 1) and alice sends only those bits
    (``opening_ring``). The secure terms truncate sums of products this way; a product is
    truncated locally in its own ring (``_finish_product``).

    Security: bob sees c = x + r, whose distribution is within statistical distance
    |x| / 2^m < 2^-STAT_BITS of r's, whatever x is. Alice sees nothing.
    """
    x = _check_shares(x, "truncation input")
    if not 0 < bits < RING_BITS:
        raise ValueError("bits must lie in [1, 127]")
    _check_bound(bound_bits)
    session.counters.truncations += x.shape[0]
    n = x.shape[0]
    ring_bits = opening_ring(bound_bits)
    width = (ring_bits + 7) // 8
    if session.is_alice:
        mask = session.random.signed_below(n, bound_bits + STAT_BITS)
        masked = ring.add(x, mask).view(np.uint8).reshape(n, 16)
        session.channel.send_array("arith.trunc", np.ascontiguousarray(masked[:, :width]))
        return ring.neg(ring.sar(mask, bits))
    received = np.zeros((n, 16), dtype=np.uint8)
    received[:, :width] = session.channel.recv_array("arith.trunc", np.uint8, (n, width))
    spare = RING_BITS - ring_bits  # sign-extend c from its L bits
    opened = ring.sar(ring.shl(ring.add(x, received.view(np.uint64)), spare), spare)
    return ring.sar(session.opened("truncate", opened), bits)


truncate = _truncate  # public name; ``mul`` and ``mul_public`` take a parameter of this name


@dataclass(frozen=True)
class NarrowShare:
    """One party's share of x, |x| < 2^b, in Z_2^m, m = ``reshared_width``(b) (``_reshare``):
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


def _reshare(session: ArithSession, x: np.ndarray, bits: int) -> NarrowShare:
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
    share = _split(mine, width)
    if not session.is_alice:
        session.opened("reshare", share.signed)
    return share


def _operand_widths(operand_bits: int | tuple[int, int] | None) -> tuple[int, int] | None:
    if operand_bits is None:
        return None
    pair = (operand_bits, operand_bits) if isinstance(operand_bits, int) else tuple(operand_bits)
    for bits in pair:
        _check_bound(bits)
    return pair


def reshared_width(bound_bits: int) -> int:
    """Bits m of a reshared share of a value below 2^bound_bits in magnitude (``_reshare``):
    x + 2^b lies in [0, 2^(b + 1)), and one bit more keeps the top bit of the sum 0. An OLE
    that chooses with the share takes m + 1 OTs (``NarrowShare.choices``)."""
    return bound_bits + 2


LIFT_SAVING_BITS = 8  # an exact product is lifted only if its ring saves a byte per OT


def exact_ring(bound_bits: int) -> int:
    """The ring of an exact product below 2^bound_bits: Z_2^(b + 2), in which x + 2^b has a
    known top bit 0 (``_lift``), when that is at least LIFT_SAVING_BITS short of 128 (each
    OT's correction is then a byte shorter, which pays for the lift), else the whole ring
    (no lift)."""
    if bound_bits + 2 <= RING_BITS - LIFT_SAVING_BITS:
        return bound_bits + 2
    return RING_BITS


def truncation_offset(truncate: int, bound_bits: int) -> int:
    """B = max(b, t): a product below 2^b truncated by t bits is offset by 2^B (``_finish_product``)."""
    return max(bound_bits, truncate)


def product_ring(truncate: int, bound_bits: int, bounds: tuple[int, int]) -> int:
    """The ring a product of operands below 2^bounds[0] and 2^bounds[1] is computed in:
    Z_2^(B + 3) for one truncated by t (B = ``truncation_offset``: the truncated value plus
    2^(B - t) then lies in [0, 2^(B - t + 1)], below the top bit of Z_2^(B + 3 - t)), or
    ``exact_ring`` of |x y| < 2^(bx + by) for an exact one (truncate = 0); never narrower
    than its OLEs' choices (``reshared_width`` of the narrower operand, plus the top bit)."""
    ring_bits = truncation_offset(truncate, bound_bits) + 3 if truncate else exact_ring(sum(bounds))
    return max(ring_bits, reshared_width(min(bounds)) + 1)


def _wrap_ots(session: ArithSession, n: int, ring_bits: int) -> _WrapOTs | None:
    """The wrap OTs of n results that end in a ``_lift`` (None in the whole ring), started
    after both extensions are set up so that every party's set-up messages come first."""
    _ole_extensions(session, True, True)
    return _WrapOTs(session, n) if ring_bits < RING_BITS and n else None


def _finish_product(
    session: ArithSession,
    wrap: _WrapOTs | None,
    product: np.ndarray,
    truncate: int,
    bound_bits: int,
    ring_bits: int,
    exact_bits: int,
) -> np.ndarray:
    """A product right mod 2^ring_bits as shares mod 2^128.

    In the whole ring (wrap None): as it is, or truncated by masked opening. Otherwise
    alice adds 2^B (B = ``truncation_offset``, or the exact bound), so the shares u in
    [0, 2^L) add up to z' = z + 2^B or z' + 2^L. A truncation is local: each party keeps
    floor(u / 2^t) mod 2^(L - t), alice adds 1, and the two add up to floor(z' / 2^t) + 1 - c
    with c the carry of the low bits, 0 or 1 (the wrap term 2^L w / 2^t vanishes modulo
    2^(L - t)), i.e. v + 2^(B - t) for v = floor(z / 2^t) or one more, as ``truncate`` gives.
    Then ``_lift`` (one OT per value) makes shares mod 2^128. Security: that of ``_lift``;
    nothing is opened.
    """
    session.counters.multiplications += product.shape[0]
    if wrap is None:
        return _truncate(session, product, truncate, bound_bits) if truncate else product
    offset = truncation_offset(truncate, bound_bits) if truncate else exact_bits
    if session.is_alice:
        product = ring.add(product, ring.constant(1 << offset))
    if truncate:
        session.counters.truncations += product.shape[0]
        product = ring.sar(product, truncate)
        if session.is_alice:
            product = ring.add(product, ring.constant(1))
    n = ring_bits - truncate
    return _lift(session, wrap, [(_split(product, n), n, offset - truncate)])[0]


def mul(
    session: ArithSession,
    x: np.ndarray,
    y: np.ndarray,
    truncate: int = FRAC,
    bound_bits: int = MAX_BOUND_BITS,
    operand_bits: int | tuple[int, int] | None = None,
) -> np.ndarray:
    """Shares of x * y (truncate = 0: exact mod 2^128) or of floor(x y / 2^truncate)
    (+1 possible), for shared (n, 2) vectors x and y; |x y| < 2^bound_bits when truncating.

    x y = x_A y_A + x_B y_B + x_A y_B + y_A x_B: the first two are local, the cross terms
    are one OLE of 2n values (alice's [x_A; y_A] times bob's [y_B; x_B]), then ``truncate``.
    With ``operand_bits`` (|x| < 2^bx and |y| < 2^by for a pair (bx, by), or one bound for
    both, each at most MAX_BOUND_BITS) the narrower operand, say y, is reshared in
    Z_2^m, m = by + 2 (one short message from alice, ``_reshare``): y + 2^by = s_A + s_B +
    2^m t_A t_B. Then x y = (s_A - 3 2^by) x_A + (s_B - 3 2^by) x_B (local) + one OLE each
    way (``ole_two_way``): bob chooses with s_B + 2^(m - 1) and, at bit m, t_B against
    alice's x_A, whose top OT carries t_A x_A instead; alice chooses likewise against bob's
    x_B. Each OLE is m + 1 = by + 3 OTs, and the corrections split evenly between the two
    directions of the link. The OLEs run in the smallest ring that holds the product with
    a known top bit (``product_ring``: the bound plus 3 bits where a statistically masked
    opening needed 41), the truncation is local and a lift by one OT per value brings the
    result to the whole ring (``_finish_product``); the wider operand enters as it is,
    shares mod 2^128 being right mod any 2^L.

    Security: that of ``ole`` (nothing but uniform OT traffic), of ``_reshare`` (bob sees
    a uniform element of Z_2^m) and of ``_lift``.
    """
    x = _check_shares(x, "x")
    y = _check_shares(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in shape: {x.shape} vs {y.shape}")
    n = x.shape[0]
    bounds = _operand_widths(operand_bits)
    if bounds is None:
        mine = np.concatenate([x, y] if session.is_alice else [y, x])
        cross = ole(session, mine)
        cross = ring.add(cross[:n], cross[n:])
        product = ring.add(ring.mul(x, y), cross)
        return _finish_product(session, None, product, truncate, bound_bits, RING_BITS, 0)
    narrow_bits = min(bounds)
    narrow, wide = (y, x) if bounds[1] <= bounds[0] else (x, y)
    width = reshared_width(narrow_bits)
    ring_bits, exact_bits = product_ring(truncate, bound_bits, bounds), sum(bounds)
    wrap = _wrap_ots(session, n, ring_bits)
    session.settle_unless_final(narrow, width)
    share = _reshare(session, narrow, narrow_bits)
    # as chooser: its narrow share; as sender: its wide share, t times it on the top OT
    choosing = OlePart(share.choices(width), width + 1, ring_bits)
    forward, reverse = _ole_each_way(
        session, choosing, lambda: OlePart(wide, width + 1, ring_bits, top=share.top_times(wide)), wrap
    )
    # s times its own wide share, less 2^b of it (x = x' - 2^b) and 2^(m - 1) of it
    # (the offset in the peer's choices): 3 2^b, as m - 1 = b + 1
    local = ring.mul(ring.sub(share.signed, ring.constant(3 << narrow_bits)), wide)
    product = ring.add(local, ring.add(forward, reverse))
    return _finish_product(session, wrap, product, truncate, bound_bits, ring_bits, exact_bits)


def square(
    session: ArithSession,
    x: np.ndarray,
    truncate: int = FRAC,
    bound_bits: int = MAX_BOUND_BITS,
    operand_bits: int | None = None,
) -> np.ndarray:
    """Shares of x^2 (truncate = 0) or floor(x^2 / 2^truncate) (+1 possible), as ``mul``
    (x, x) but with one OLE per value: x^2 = x_A^2 + x_B^2 + 2 x_A x_B. With
    ``operand_bits`` (|x| < 2^b) x is reshared as in ``mul`` (x + 2^b = s_A + s_B + 2^m
    t_A t_B, m = b + 2), and

        x^2 = s_A (s_A - 2^(b+1)) + 2^(2b) + s_B (s_B - 2^(b+1)) + 2 s_A s_B
              + 2^m t_A t_B (2 s_A + 2 s_B + 2^m - 2^(b+1)):

    alice chooses with s_A + 2^(m - 1) and, at bit m, t_A against bob's 2 s_B, whose top
    OT carries t_B (2 s_B + 2^m - 2^(b+1)) (m + 1 OTs in reverse: bob sends the
    corrections, as alice's direction of the link already carries the garbled tables and
    the lookups), and one forward OT, bob choosing with t_B against alice's t_A 2 s_A, in
    Z_2^(L - m) and shifted by m. b + 4 OTs, where an integer share cost b + 41; the ring,
    truncation and lift are ``mul``'s.

    Security: that of ``mul``.
    """
    x = _check_shares(x, "x")
    if operand_bits is None:
        product = ring.add(ring.mul(x, x), ring.shl(ole(session, x), 1))
        return _finish_product(session, None, product, truncate, bound_bits, RING_BITS, 0)
    _check_bound(operand_bits)
    width = reshared_width(operand_bits)
    ring_bits, exact_bits = product_ring(truncate, bound_bits, (operand_bits, operand_bits)), 2 * operand_bits
    wrap = _wrap_ots(session, x.shape[0], ring_bits)
    session.settle_unless_final(x, width)
    share = _reshare(session, x, operand_bits)
    twice = ring.shl(share.signed, 1)
    if session.is_alice:
        wrap_ot = OlePart(share.top_times(twice), 1, ring_bits - width)
        halves = OlePart(share.choices(width), width + 1, ring_bits)
        local = ring.add(ring.mul(share.signed, ring.sub(share.signed, ring.constant(2 << operand_bits))), ring.constant(1 << 2 * operand_bits))
        low, high = _ole_each_way(session, halves, lambda: wrap_ot, wrap)
    else:
        wrap_ot = OlePart(ring.from_uint64(share.top), 1, ring_bits - width)
        top = share.top_times(ring.add(twice, ring.constant((1 << width) - (2 << operand_bits))))
        halves = OlePart(twice, width + 1, ring_bits, top=top)
        # less 2^(m - 1) 2 s_B, the offset in alice's choices
        local = ring.mul(share.signed, ring.sub(share.signed, ring.constant(6 << operand_bits)))
        low, high = _ole_each_way(session, wrap_ot, lambda: halves, wrap)
    product = ring.add(local, ring.add(ring.shl(low, width), high))
    return _finish_product(session, wrap, product, truncate, bound_bits, ring_bits, exact_bits)


def bit_mul(session: ArithSession, bits: np.ndarray, y: np.ndarray, y_bits: int) -> np.ndarray:
    """Shares of x * y, exact, for x = sum_i 2^i (a_i XOR b_i) given as XOR shares of its w
    bits ((n, w) 0/1 arrays, w <= 64: alice's a, bob's b; Yao's ``bit-shares``) and shared
    y, |y| < 2^y_bits, as ring vectors.

    (a XOR b) y = a y_A + b (1 - 2a) y_A + b y_B + a (1 - 2b) y_B: a y_A and b y_B are
    local, the other two are correlated OTs, one per bit each way: bob chooses with b_i
    on alice's correlation (1 - 2a_i) y_A (the extension of ``ole``), alice with a_i on
    bob's (1 - 2b_i) y_B (``ArithSession.reverse_ot``). As in ``ole``, the OT of bit i
    works mod 2^(L - i), L = ``exact_ring``(w + y_bits), and a ``_lift`` follows when
    L < 128 (``_finish_product``). 2w OTs per value and y needs no resharing, where ``mul``
    costs 2 (min(w, y_bits) + 3) OTs and the circuit b + 40 AND gates to make ring shares
    of x (Yao's ``integer-shares``). Both parties send their u, then their corrections:
    one round trip.

    Security: each party sees only the u messages and corrections of OTs in which it holds
    the choice bits or the correlation, uniform given its inputs (OT security, as in
    ``ole``), and the lift's (``_lift``).
    """
    y = _check_shares(y, "y")
    bits = np.asarray(bits, dtype=np.uint8)
    n = y.shape[0]
    if bits.ndim != 2 or bits.shape[0] != n or not 1 <= bits.shape[1] <= 64 or bits.max(initial=0) > 1:
        raise ValueError(f"bits must be an ({n}, w) array of 0/1 with 1 <= w <= 64, got {bits.shape}")
    _check_bound(y_bits)
    if n == 0:
        return np.zeros((0, 2), dtype=np.uint64)
    width = bits.shape[1]
    ring_bits = exact_ring(width + y_bits)
    positions = np.tile(_BIT_SHIFTS[:width], n)
    remaining = ring_bits - positions
    choices = np.ascontiguousarray(bits.reshape(-1))
    wrap = _wrap_ots(session, n, ring_bits)  # both set-ups before either party's u goes out
    forward = session.ot_sender() if session.is_alice else session.ot_receiver()
    reverse = session.reverse_ot()
    if session.is_alice:  # her u first, then the forward OTs, then the reverse corrections
        reverse_pads = reverse.pads(choices)
        _before_first_read(session, wrap)  # y may be a deferred result
        sent = _short_cot_send(session, forward, _bit_correlation(y, choices, width), remaining, "arith.bits.y")
        received = _short_cot_finish(session, reverse_pads, choices, remaining, "arith.bits.r")
    else:
        forward_pads = forward.pads(choices)
        sent = _short_cot_send(session, reverse, _bit_correlation(y, choices, width), remaining, "arith.bits.r")
        received = _short_cot_finish(session, forward_pads, choices, remaining, "arith.bits.y")
    # own bits times own share, plus what this party's OTs received minus what they sent
    shifted = ring.shl(ring.sub(received, sent), positions)
    own = ring.mul(ring.from_uint64(bits_to_values(bits.T)), y)
    product = ring.add(own, ring.sum(shifted.reshape(n, width, 2), axis=1))
    return _finish_product(session, wrap, product, 0, 0, ring_bits, width + y_bits)


def _bit_correlation(y: np.ndarray, choices: np.ndarray, width: int) -> np.ndarray:
    """(1 - 2 c_i) y per bit c_i of each value's ``width`` bits (``bit_mul``)."""
    correlation = np.repeat(y, width, axis=0)
    flipped = choices == 1
    correlation[flipped] = ring.neg(correlation[flipped])
    return correlation


def mul_public(
    session: ArithSession,
    x: np.ndarray,
    c: int,
    truncate: int = FRAC,
    bound_bits: int = MAX_BOUND_BITS,
) -> np.ndarray:
    """Shares of floor(c x / 2^truncate) (+1 possible) for a public int c; the exact c x
    (a local product) when truncate = 0. |c x| < 2^bound_bits is enough.

    c = a 2^t + b with b in [-2^(t-1), 2^(t-1)), so floor(c x / 2^t) = a x + floor(b x / 2^t)
    exactly: only b x (|b x| <= |c x|) goes through the masked opening, so a coefficient
    near 1.0 = 2^FRAC times a 42-bit value stays within the mask's headroom.
    Security: that of ``truncate``; nothing is sent when b = 0.
    """
    x = _check_shares(x, "x")
    if not truncate:
        return ring.mul_int(x, c)
    half = 1 << (truncate - 1)
    whole, rest = divmod(int(c) + half, 1 << truncate)
    rest -= half
    product = ring.mul_int(x, whole)
    if not rest:
        return product
    return ring.add(product, _truncate(session, ring.mul_int(x, rest), truncate, bound_bits))


# -- table lookup with a masked index --------------------------------------------------
Table = Sequence[int] | np.ndarray
Index = np.ndarray | Sequence[int]


@dataclass(frozen=True)
class _Table:
    """A public table as sent: its entries, their width e (|entry| < 2^e; None for any ring
    element) and the bytes each masked entry takes on the wire."""

    values: np.ndarray
    entry_bits: int | None
    nbytes: int


def entry_width(entry_bits: int) -> int:
    """Bits m of the ring Z_2^m in which an entry below 2^e is shared (``lookup_batch``):
    T + 2^e lies in [0, 2^(e + 1)), so m = e + 2 leaves the top bit of the sum 0."""
    return entry_bits + 2


def entry_bytes(entry_bits: int | None) -> int:
    """Bytes of one masked entry of width e: bob's share in Z_2^m, m = ``entry_width``(e);
    16 for a full-ring table."""
    return 16 if entry_bits is None else (entry_width(entry_bits) + 7) // 8


def _check_table(table: Table) -> tuple[_Table, int]:
    values = table if isinstance(table, np.ndarray) else ring.from_ints(table)
    values = _check_shares(values, "table")
    size = values.shape[0]
    width = size.bit_length() - 1
    if size < 2 or size != 1 << width or width > MAX_TABLE_BITS:
        raise ValueError(
            f"table length must be a power of two in [2, 2^{MAX_TABLE_BITS}], got {size}"
        )
    entry_bits = table_entry_bits(ring.to_signed(values))
    return _Table(values, entry_bits, entry_bytes(entry_bits)), width


def table_entry_bits(table: Sequence[int]) -> int | None:
    """e with |entry| < 2^e for every entry, or None past MAX_BOUND_BITS (a uniform mask)."""
    bits = max(abs(v) for v in table).bit_length()
    return bits if bits <= MAX_BOUND_BITS else None


def _check_indices(index: Index, size: int) -> np.ndarray:
    idx = np.asarray(index).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ValueError(f"indices must lie in [0, {size})")
    return idx.astype(np.int64)


@dataclass
class _Request:
    """Tables read at one masked index: the unit that shares OTs and messages."""

    tables: list[_Table]
    index: np.ndarray  # alice's masks mu or bob's masked indices y
    width: int  # w: index bits, N = 2^w entries
    blocks: int  # 128-bit pad blocks per entry (all tables' bytes side by side)
    out: list[np.ndarray]

    @property
    def size(self) -> int:
        return 1 << self.width

    @property
    def entry_bytes(self) -> int:
        """Bytes of one entry number's masked entries, all tables side by side."""
        return sum(t.nbytes for t in self.tables)

    @property
    def entry_bits(self) -> np.ndarray:
        """(N, w) bits of every entry number."""
        return (np.arange(self.size)[:, None] >> np.arange(self.width)[None, :]) & 1


def _request(tables: Sequence[Table], index: Index) -> _Request:
    if not tables:
        raise ValueError("a lookup needs at least one table")
    checked = [_check_table(t) for t in tables]
    widths = {width for _, width in checked}
    if len(widths) != 1:
        raise ValueError("tables read at one index must have the same length")
    (width,) = widths
    idx = _check_indices(index, 1 << width)
    blocks = -(-sum(t.nbytes for t, _ in checked) // 16)
    out = [np.empty((idx.size, 2), dtype=np.uint64) for _ in checked]
    return _Request([t for t, _ in checked], idx, width, blocks, out)


def lookup(session: ArithSession, table: Table, index: Index) -> np.ndarray:
    """Shares of table[j] for K instances, where j = mu XOR y: alice passes her masks mu,
    bob the masked indices y (both K w-bit ints, N = 2^w = len(table), N <= 2^10).
    ``lookup_batch`` with one table; see there for the protocol and its security."""
    return lookup_batch(session, [([table], index)])[0][0]


def lookup_many(session: ArithSession, tables: Sequence[Table], index: Index) -> list[np.ndarray]:
    """Shares of T[j] for each of several tables of one length at the same masked index
    (one set of OTs, one message); ``lookup_batch`` with one request."""
    return lookup_batch(session, [(tables, index)])[0]


def lookup_batch(
    session: ArithSession, requests: Sequence[tuple[Sequence[Table], Index]]
) -> list[list[np.ndarray]]:
    """Shares of T[j] for every table T of every request (tables, index), in one round
    (while the OTs stay below LOOKUP_ROUND_OTS): per request, alice passes her masks mu,
    bob the masked indices y, j = mu XOR y (K w-bit ints, N = 2^w = len(T) <= 2^10).
    Returns one (K, 2) share vector per table, per request (of a full-ring table: alice's
    rho, bob's T[j] - rho).

    The 1-out-of-N OT of a rotated, masked table (Naor-Pinkas from log N random OTs; the
    table step of Lindell-Pinkas, Yang-Wright 5.4 and 6.5): per instance, w random OTs give
    alice key pairs (k_i^0, k_i^1) and bob k_i^(y_i) (``OTSender.pads``, the receiver's
    ``pads``: no correction message). For each table alice draws one rho per instance and
    sends T'[x] = T[x ^ mu] - rho for every entry x, encrypted under pad bytes of entry x:
    block b of the pad is XOR_i H(k_i^(x_i), tweak(instance, x, b, i)) (``FixedKeyHash``,
    tweaks unique per ArithSession), and the tables of a request take disjoint bytes of
    those blocks. Bob decrypts entry y: T'[y] = T[j] - rho is his share.

    Narrow entries (the wire diet of issue 12): for a table with |entry| < 2^e (e read off
    the public table, e <= MAX_BOUND_BITS) the entries are shared in Z_2^m, m = e + 2
    (``entry_width``): alice sends T[x ^ mu] + 2^e - rho mod 2^m in ``entry_bytes``(e) =
    ceil(m / 8) bytes, so the two shares add up to T[j] + 2^e, whose top bit is 0, and one
    ``_lift`` per entry (its wrap OTs' u go out with bob's index OTs, alice's corrections
    after her tables, bob's bits with his next message) makes shares mod 2^128 (alice's
    rho - 2^e and more, bob's the rest). A wider table's entries are masked by a uniform
    rho mod 2^128 and take 16 bytes.

    Security: bob knows one key per position, so every pad but pad_y has a term H(k, t)
    under a key he does not know, with a tweak used once: those entries are uniform
    (tweakable correlation robustness, Guo et al. S&P 2020). His entry T[j] + 2^e - rho is
    uniform in Z_2^m whatever the entry (perfectly hiding; uniform mod 2^128 for a
    full-ring table), each table has its own rho and its own pad bytes, and the lift shows
    him only OT messages. Alice sees only the OT-extension messages and bob's lift bits,
    uniform (``_lift``). Cost: K w OTs per request and one per narrow entry, K N
    sum(entry_bytes) bytes, K N w ceil(sum(entry_bytes) / 16) hashes.
    """
    plans = [_request(tables, index) for tables, index in requests]
    narrow = [(plan, i) for plan in plans for i, table in enumerate(plan.tables) if table.entry_bits is not None]
    for plan in plans:
        session.counters.lookups += plan.index.size * len(plan.tables)
    lifted = sum(plan.index.size for plan, _ in narrow)
    session.settle()  # alice: bob's bits of earlier lifts come before his set-up and u
    (session.ot_sender() if session.is_alice else session.ot_receiver()).start()
    wrap = _WrapOTs(session, lifted) if lifted else None  # bob's u first
    for group in _rounds(plans):
        ots = sum((stop - start) * plan.width for plan, start, stop in group)
        session.counters.ots += ots
        if session.is_alice:
            if wrap is not None:
                wrap.receive(session)
            sender = session.ot_sender()
            keys = np.stack(sender.pads(ots), axis=1)  # (ots, bit, 2)
            sender.ots += ots
        else:
            choices = np.concatenate([plan.entry_bits[plan.index[start:stop]].ravel() for plan, start, stop in group])
            keys = session.ot_receiver().pads(choices.astype(np.uint8))  # (ots, 2)
        used = 0
        for plan, start, stop in group:
            m = (stop - start) * plan.width
            mine = keys[used : used + m].reshape(stop - start, plan.width, *keys.shape[1:])
            used += m
            _serve(session, plan, start, stop, mine)
    if wrap is not None:
        values = []
        for plan, i in narrow:
            width = entry_width(plan.tables[i].entry_bits)
            values.append((_split(plan.out[i], width), width, plan.tables[i].entry_bits))
        if not session.is_alice:  # bob's entries T[j] + 2^e - rho: part of his view
            for share, _, _ in values:
                session.opened("lookup", share.signed)
        for (plan, i), share in zip(narrow, _lift(session, wrap, values), strict=True):
            plan.out[i] = share
    if not session.is_alice:
        for plan in plans:
            for table, share in zip(plan.tables, plan.out, strict=True):
                if table.entry_bits is None:
                    session.opened("lookup", share)
    return [plan.out for plan in plans]


def _rounds(plans: list[_Request]) -> Iterator[list[tuple[_Request, int, int]]]:
    """Instance ranges (plan, start, stop), grouped so that a group's OTs stay within
    LOOKUP_ROUND_OTS: each group is one OT call and then alice's messages, one round."""
    group: list[tuple[_Request, int, int]] = []
    ots = 0
    for plan in plans:
        start = 0
        while start < plan.index.size:
            room = (LOOKUP_ROUND_OTS - ots) // plan.width
            if room == 0:
                yield group
                group, ots = [], 0
                continue
            stop = min(plan.index.size, start + room)
            group.append((plan, start, stop))
            ots += (stop - start) * plan.width
            start = stop
    if group:
        yield group


def _serve(session: ArithSession, plan: _Request, start: int, stop: int, keys: np.ndarray) -> None:
    """Alice's messages (bob: their decryption) for instances [start, stop) of a request,
    chunked to LOOKUP_CHUNK_HASHES hashes; keys are (k, w, bit, 2) at alice, (k, w, 2) at bob."""
    per_chunk = max(1, LOOKUP_CHUNK_HASHES // (plan.size * plan.width * plan.blocks))
    for first in range(start, stop, per_chunk):
        last = min(stop, first + per_chunk)
        chunk = keys[first - start : last - start]
        base = session.next_tweaks((last - first) * plan.size * plan.blocks * plan.width)
        if session.is_alice:
            shares = _lookup_alice(session, plan, plan.index[first:last], chunk, base)
        else:
            shares = _lookup_bob(session, plan, plan.index[first:last], chunk, base)
        for out, share in zip(plan.out, shares, strict=True):
            out[first:last] = share


def _pad_bytes(session: ArithSession, keys: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    """Pads of shape tweaks.shape[:-1] + (16 blocks,) bytes: the XOR over the position axis
    of H(key, tweak), keys (..., w, 2) broadcast over the block axis of tweaks (..., blocks, w)."""
    keys = np.broadcast_to(keys[..., None, :, :], (*tweaks.shape, 2))
    hashed = session.hash.hash(keys.reshape(-1, 2), tweaks.reshape(-1)).reshape(keys.shape)
    # (..., blocks, 2): XORs position by position, 2.4x faster than np.bitwise_xor.reduce
    # over this short axis
    pads = hashed[..., 0, :].copy()
    for position in range(1, hashed.shape[-2]):
        pads ^= hashed[..., position, :]
    return pads.view(np.uint8).reshape(*tweaks.shape[:-2], -1)


def _tweaks(base: int, plan: _Request, instances: np.ndarray, entries: np.ndarray) -> np.ndarray:
    """tweak(instance, e, b, i) = base + ((instance N + e) blocks + b) w + i, for the
    broadcast (instances, entries) of the chunk; shape (..., blocks, w)."""
    first = (instances * plan.size + entries) * (plan.blocks * plan.width)
    offsets = np.arange(plan.blocks * plan.width).reshape(plan.blocks, plan.width)
    return (np.uint64(base) + first[..., None, None].astype(np.uint64) + offsets.astype(np.uint64))


def _lookup_alice(
    session: ArithSession, plan: _Request, mu: np.ndarray, keys: np.ndarray, base: int
) -> list[np.ndarray]:
    k, size = mu.size, plan.size
    chosen = keys[:, np.arange(plan.width)[None, :], plan.entry_bits]  # (k, N, w, 2)
    instances = np.arange(k)[:, None]
    pads = _pad_bytes(session, chosen, _tweaks(base, plan, instances, np.arange(size)[None, :]))
    message = np.empty((k, size, plan.entry_bytes), dtype=np.uint8)
    rotation = np.arange(size)[None, :] ^ mu[:, None]
    shares, offset = [], 0
    for table in plan.tables:
        rho = session.random.uniform(k)
        entries = table.values if table.entry_bits is None else ring.add(table.values, ring.constant(1 << table.entry_bits))
        masked = ring.sub(entries[rotation], rho[:, None, :])  # (k, N, 2): T[e ^ mu] (+ 2^e) - rho
        message[:, :, offset : offset + table.nbytes] = masked.view(np.uint8)[:, :, : table.nbytes]
        offset += table.nbytes
        shares.append(rho)
    message ^= pads[:, :, : message.shape[2]]
    session.channel.send_array("arith.lookup", message)
    return shares


def _lookup_bob(
    session: ArithSession, plan: _Request, y: np.ndarray, keys: np.ndarray, base: int
) -> list[np.ndarray]:
    k, size = y.size, plan.size
    total = plan.entry_bytes
    pad = _pad_bytes(session, keys, _tweaks(base, plan, np.arange(k), y))  # (k, 16 blocks)
    cipher = session.channel.recv_array("arith.lookup", np.uint8, (k, size, total))
    entry = cipher[np.arange(k), y] ^ pad[:, :total]
    shares, offset = [], 0
    for table in plan.tables:
        part = entry[:, offset : offset + table.nbytes]
        offset += table.nbytes
        full = np.zeros((k, 16), dtype=np.uint8)
        full[:, : table.nbytes] = part  # a narrow entry's share counts mod 2^m only (``_lift``)
        shares.append(full.view(np.uint64))
    return shares


__all__ = [
    "ALICE",
    "BOB",
    "MAX_BOUND_BITS",
    "ArithCounters",
    "ArithSession",
    "bit_mul",
    "entry_bytes",
    "entry_width",
    "exact_ring",
    "lookup",
    "lookup_batch",
    "lookup_many",
    "mul",
    "mul_public",
    "ole",
    "opening_ring",
    "product_ring",
    "reshared_width",
    "square",
    "table_entry_bits",
    "truncation_offset",
    "truncate",
]
