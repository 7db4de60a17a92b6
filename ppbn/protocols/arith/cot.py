"""Additive correlated OT with shortened corrections, the OT that OLEs and lifts run on.

On top of the OT extension of ``ot`` (the correlated-OT variant of Asharov, Lindell,
Schneider and Zohner, CCS 2013, Sec. 5.4, with an additive instead of an XOR
correlation): alice's output is the random pad H(q_j), bob's is H(q_j) + c_j delta_j,
from ``OTSender.pads`` and ``OTReceiver.pads``. One correction per OT, at most 16 bytes,
half of what a chosen-message OT sends; the OT of bit i of a Gilboa product works mod
2^(128 - i) and sends only those bits (the shortened messages of the OT-based
multiplication triples of Demmler, Schneider and Zohner, ABY, NDSS 2015).
"""

from __future__ import annotations

import numpy as np

from ppbn.protocols import ring
from ppbn.protocols.arith.session import ArithSession
from ppbn.protocols.fixedpoint import RING_BITS
from ppbn.protocols.ot import OTSender


def _kept_bytes(remaining: np.ndarray) -> np.ndarray:
    """Bytes of an OT correction that must be right in its low ``remaining`` bits: the OT of
    bit i of a Gilboa product in the ring Z_2^L has its outputs multiplied by 2^i, so only
    the low L - i bits count and the correction (little-endian, as ``ring`` lays elements
    out) is cut to ceil((L - i) / 8) bytes."""
    return (remaining + 7) // 8


_KEPT_BY_REMAINING = (
    np.arange(16)[None, :] < _kept_bytes(np.arange(RING_BITS + 1))[:, None]
)  # (129, 16)


def _kept_mask(remaining: np.ndarray) -> np.ndarray:
    """(m, 16) bool: the correction bytes each OT sends (``_kept_bytes``), row by row from a
    table of the 129 lengths (a take is 20x faster than comparing per OT)."""
    return _KEPT_BY_REMAINING.take(remaining, axis=0)


def short_cot_send(
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
    send_corrections(session, pad0, pad1, delta, remaining, kind)
    return pad0


def send_corrections(
    session: ArithSession,
    pad0: np.ndarray,
    pad1: np.ndarray,
    delta: np.ndarray,
    remaining: np.ndarray,
    kind: str,
) -> None:
    """The correction message of ``short_cot_send`` for pads received earlier."""
    m = delta.shape[0]
    correction = ring.add(pad0, delta)
    correction ^= pad1
    session.channel.send_array(
        kind, correction.view(np.uint8).reshape(m, 16)[_kept_mask(remaining)]
    )
    session.counters.ots += m


def short_cot_finish(
    session: ArithSession, pads: np.ndarray, choices: np.ndarray, remaining: np.ndarray, kind: str
) -> np.ndarray:
    """The receiving side of ``short_cot_send``, after ``OTReceiver.pads`` sent the u
    messages of ``choices`` (``gilboa._OleChunk.prepare``, so that he can send the next chunk's u
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
