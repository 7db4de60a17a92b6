"""One party's state for share arithmetic, and alice's lifts awaiting bob's bits.

The session owns the two OT extensions (forward: alice sends, bob chooses; reverse: bob
sends, alice chooses), the randomness and the counters, and keeps the lifts alice has
deferred (``lift.lift_share``) so that everything she computes from their results completes
with them.

Domain separation: the lookup pads hash with ``FixedKeyHash(LOOKUP_PROTOCOL,
channel.session)`` and the OT extension is the instance b"arith" of ``ppbn.protocols.ot``,
so neither shares a fixed-key permutation (nor tweaks) with the garbling of ``yao`` or
with another job (``ppbn.circuits.garble``, GKWY20).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppbn.circuits.garble import FixedKeyHash
from ppbn.protocols import ring
from ppbn.protocols.base_ot import DEFAULT_DH_BITS, dh_group
from ppbn.protocols.channel import Channel
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS
from ppbn.protocols.executor import ExecutorSource
from ppbn.protocols.fixedpoint import RING_BITS
from ppbn.protocols.ot import OT_INLINE_BELOW, OTReceiver, OTSender, check_subfield_bits
from ppbn.protocols.seeds import TaskSeeds

ALICE = "alice"
BOB = "bob"
LOOKUP_PROTOCOL = b"ppbn/arith/lookup"
OT_INSTANCE = b"arith"
REVERSE_OT_INSTANCE = b"arith.reverse"  # bob sends, alice receives (``products.bit_mul``)
WRAP_BITS_KIND = "arith.wrap.d"  # bob's bits d = t_B XOR c of a lift (``lift.lift_share``)


@dataclass
class ArithCounters:
    """How much work a session did: the job's statistics report it and the tests check costs by it."""

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
    ``dh_bits`` is the job's base-OT group (``base_ot.dh_bits_for(key_bits)``) and ``ot_k``
    SoftSpokenOT's k of its OT extension, each the same at both parties. ``seeds``,
    ``executor`` and ``ot_inline_below`` go to this party's end of the OT extension
    (``ot.OTSender``, ``ot.OTReceiver``).
    """

    def __init__(
        self,
        channel: Channel,
        role: str,
        keep_openings: bool = False,
        *,
        dh_bits: int = DEFAULT_DH_BITS,
        ot_k: int = DEFAULT_SUBFIELD_BITS,
        seeds: TaskSeeds | None = None,
        executor: ExecutorSource | None = None,
        ot_inline_below: int = OT_INLINE_BELOW,
    ) -> None:
        if role not in (ALICE, BOB):
            raise ValueError(f"role must be {ALICE!r} or {BOB!r}, got {role!r}")
        self.channel = channel
        self.role = role
        self.dh_bits = dh_group(dh_bits).bits  # checked now, used when the OT starts
        self.ot_k = check_subfield_bits(ot_k)
        self.counters = ArithCounters()
        self.random = ring.RandomRing()
        self.hash = FixedKeyHash(LOOKUP_PROTOCOL, channel.session)
        self._sender: OTSender | None = None
        self._receiver: OTReceiver | None = None
        self._reverse: OTSender | OTReceiver | None = None
        self._lookup_tweak = 0
        self._ot_options = {
            "dh_bits": self.dh_bits,
            "subfield_bits": self.ot_k,
            "instance": OT_INSTANCE,
            "seeds": seeds,
            "executor": executor,
            "inline_below": ot_inline_below,
        }
        self.openings: list[tuple[str, np.ndarray]] | None = [] if keep_openings else None
        # alice's lifted results still awaiting bob's bits (``lift.lift_share``), oldest first
        self.defer_lifts = False
        self._deferred: list[DeferredLift] = []

    def opened(self, what: str, values: np.ndarray) -> np.ndarray:
        """Record a value this party reconstructs (``keep_openings``) and pass it on."""
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
        done on first use by both parties at the same point (``products.bit_mul``)."""
        if self._reverse is None:
            options = {**self._ot_options, "instance": REVERSE_OT_INSTANCE}
            self._reverse = (
                OTReceiver(self.channel, **options)
                if self.is_alice
                else OTSender(self.channel, **options)
            )
            self._reverse.start()
        return self._reverse

    def settle(self, *values: np.ndarray) -> None:
        """Alice: complete deferred lifts (``lift.lift_share``) with bob's bits, in place, oldest first
        (the order his bits arrive in): all of them, or with ``values`` only as far as the
        last lift any of them is a result of. A no-op for bob and when nothing is deferred.
        In deferral mode (``defer_lifts``) whoever reads alice's results calls this first:
        until then they are right only in their low n bits; every arith operation settles
        all before it reads from the channel."""
        last = len(self._deferred)
        if values and self._deferred:
            owners = [
                i
                for i, lift in enumerate(self._deferred)
                if any(part.target is v for part in lift.parts for v in values)
            ]
            last = owners[-1] + 1 if owners else 0
        for _ in range(last):
            self._deferred.pop(0).complete(self)

    def hold(self, lift: DeferredLift) -> None:
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

    @property
    def awaiting_bits(self) -> bool:
        """Alice: whether some lifted values still await bob's bits (``settle``)."""
        return bool(self._deferred)

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
                            fix, n = (
                                ring.mul_int(part.fix, c),
                                min(RING_BITS, part.n + _trailing_zeros(c)),
                            )
                        else:
                            fix, n = ring.mul(part.fix, c), part.n
                        derived.append(DeferredPart(result, fix, n, part.start))
            lift.parts += derived
        return result

    def low_bits_final(self, x: np.ndarray, bits: int) -> bool:
        """Whether x's low ``bits`` bits are final: x is not a deferred result, or it is one
        whose n-bit share is at least that wide (``lift.reshare`` reads no more)."""
        return all(
            part.n >= bits for lift in self._deferred for part in lift.parts if part.target is x
        )

    def extensions_started(self, forward: bool = True, reverse: bool = True) -> bool:
        """Whether the OT extensions asked for are set up already (``gilboa.ole_extensions``)."""
        ours = self._sender if self.is_alice else self._receiver
        return (not forward or (ours is not None and ours.started)) and (
            not reverse or self._reverse is not None
        )

    def next_tweaks(self, count: int) -> int:
        """Reserve ``count`` hash tweaks for lookups (both parties advance in step)."""
        base = self._lookup_tweak
        self._lookup_tweak += count
        return base


def _trailing_zeros(c: int) -> int:
    """The z of c = 2^z times an odd number (RING_BITS for c = 0 modulo 2^128)."""
    c %= 1 << RING_BITS
    return (c & -c).bit_length() - 1 if c else RING_BITS


@dataclass(frozen=True)
class DeferredPart:
    """A vector that awaits bob's bits d[start : start + len] of a deferred lift: alice's
    result as if every d were 0, and what to add where d = 1 (a multiple of 2^n, so the low
    n bits are final already). A lift's results are parts, and so is each value alice
    computes from them locally before they complete (``ArithSession.derive``)."""

    target: np.ndarray
    fix: np.ndarray
    n: int
    start: int


@dataclass
class DeferredLift:
    """Alice's side of one ``lift.lift_share`` until bob's bits arrive (``ArithSession.settle``)."""

    count: int
    parts: list[DeferredPart]

    def complete(self, session: ArithSession) -> None:
        """Read bob's bits d and add each part's fix where d = 1, in place."""
        packed = session.channel.recv_array(WRAP_BITS_KIND, np.uint8, ((self.count + 7) // 8,))
        flips = np.unpackbits(packed, count=self.count, bitorder="little").astype(bool)
        for part in self.parts:
            rows = flips[part.start : part.start + part.target.shape[0]]
            part.target[rows] = ring.add(part.target[rows], part.fix[rows])
