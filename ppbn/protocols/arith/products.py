"""Products of shared values, and truncation: mul, square, bit_mul, mul_public, truncate.

- Products in the smallest ring that holds them with a known top bit (the bound plus 2,
  or 3 when truncated), their cross terms by Gilboa OLEs (``gilboa``), truncated locally
  there (the carry makes floor(x / 2^t) or one more), and lifted to Z_2^128 (``lift``).
- Truncation of a sum by masked opening (the probabilistic truncation of Catrina and
  Saxena, FC 2010, for two parties): bob opens x + r for alice's bounded mask r,
  statistically hiding with STAT_BITS; the result is floor(x / 2^t) or one more.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ppbn.circuits.ir import bits_to_values
from ppbn.protocols import ring
from ppbn.protocols.arith.checks import MAX_BOUND_BITS, check_bound, check_shares
from ppbn.protocols.arith.cot import short_cot_finish, short_cot_send
from ppbn.protocols.arith.gilboa import BIT_SHIFTS, OlePart, TwoWayOle, ole, ole_extensions
from ppbn.protocols.arith.lift import WrapOTs, lift_share, reshare, reshared_width, split_share
from ppbn.protocols.arith.session import ArithSession
from ppbn.protocols.fixedpoint import FRAC, RING_BITS, STAT_BITS


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
    (A mask in [0, 2^m) would do; centring it buys one bit of range.) c has m + 1
    signed bits, so x need only be right modulo 2^(m + 1) and alice sends only those bits
    (``opening_ring``). The secure terms truncate sums of products this way; a product is
    truncated locally in its own ring (``_finish_product``).

    Security: bob sees c = x + r, whose distribution is within statistical distance
    |x| / 2^m < 2^-STAT_BITS of r's, whatever x is. Alice sees nothing.
    """
    x = check_shares(x, "truncation input")
    if not 0 < bits < RING_BITS:
        raise ValueError("bits must lie in [1, 127]")
    check_bound(bound_bits)
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


def _operand_widths(operand_bits: int | tuple[int, int] | None) -> tuple[int, int] | None:
    """The pair (bx, by) of ``mul``'s ``operand_bits``, each checked, or None (no bounds)."""
    if operand_bits is None:
        return None
    pair = (operand_bits, operand_bits) if isinstance(operand_bits, int) else tuple(operand_bits)
    for bits in pair:
        check_bound(bits)
    return pair


LIFT_SAVING_BITS = 8  # an exact product is lifted only if its ring saves a byte per OT


def exact_ring(bound_bits: int) -> int:
    """The ring of an exact product below 2^bound_bits: Z_2^(b + 2), in which x + 2^b has a
    known top bit 0 (``lift_share``), when that is at least LIFT_SAVING_BITS short of 128 (each
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


def _wrap_ots(session: ArithSession, n: int, ring_bits: int) -> WrapOTs | None:
    """The wrap OTs of n results that end in a ``lift_share`` (None in the whole ring), started
    after both extensions are set up so that every party's set-up messages come first."""
    ole_extensions(session, True, True)
    return WrapOTs(session, n) if ring_bits < RING_BITS and n else None


def _before_first_read(session: ArithSession, wrap: WrapOTs | None) -> None:
    """Alice, before a product's first read: complete earlier lifts (bob's bits of them
    come before anything else he sent), then read the u of the product's wrap OTs."""
    session.settle()
    if wrap is not None:
        wrap.receive(session)


def _ole_each_way(
    session: ArithSession, choosing: OlePart, sending: Callable[[], OlePart], wrap: WrapOTs | None
) -> tuple[np.ndarray, np.ndarray]:
    """``ole_two_way`` for a product or square: this party's part as chooser, and its part as
    sender made only once alice has settled her deferred lifts (its values may be one of
    them) and read bob's wrap u (``WrapOTs``), after her first u messages are out.
    Returns (this party's forward shares, its reverse shares)."""
    run = TwoWayOle(session, choosing, True, True)
    _before_first_read(session, wrap)
    sent, chosen = run.finish(sending())
    return (sent, chosen) if session.is_alice else (chosen, sent)


def _finish_product(
    session: ArithSession,
    wrap: WrapOTs | None,
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
    Then ``lift_share`` (one OT per value) makes shares mod 2^128. Security: that of ``lift_share``;
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
    return lift_share(session, wrap, [(split_share(product, n), n, offset - truncate)])[0]


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
    Z_2^m, m = by + 2 (one short message from alice, ``reshare``): y + 2^by = s_A + s_B +
    2^m t_A t_B. Then x y = (s_A - 3 2^by) x_A + (s_B - 3 2^by) x_B (local) + one OLE each
    way (``ole_two_way``): bob chooses with s_B + 2^(m - 1) and, at bit m, t_B against
    alice's x_A, whose top OT carries t_A x_A instead; alice chooses likewise against bob's
    x_B. Each OLE is m + 1 = by + 3 OTs, and the corrections split evenly between the two
    directions of the link. The OLEs run in the smallest ring that holds the product with
    a known top bit (``product_ring``: the bound plus 3 bits where a statistically masked
    opening needed 41), the truncation is local and a lift by one OT per value brings the
    result to the whole ring (``_finish_product``); the wider operand enters as it is,
    shares mod 2^128 being right mod any 2^L.

    Security: that of ``ole`` (nothing but uniform OT traffic), of ``reshare`` (bob sees
    a uniform element of Z_2^m) and of ``lift_share``.
    """
    x = check_shares(x, "x")
    y = check_shares(y, "y")
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
    share = reshare(session, narrow, narrow_bits)
    # as chooser: its narrow share; as sender: its wide share, t times it on the top OT
    choosing = OlePart(share.choices(width), width + 1, ring_bits)
    forward, reverse = _ole_each_way(
        session,
        choosing,
        lambda: OlePart(wide, width + 1, ring_bits, top=share.top_times(wide)),
        wrap,
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
    x = check_shares(x, "x")
    if operand_bits is None:
        product = ring.add(ring.mul(x, x), ring.shl(ole(session, x), 1))
        return _finish_product(session, None, product, truncate, bound_bits, RING_BITS, 0)
    check_bound(operand_bits)
    width = reshared_width(operand_bits)
    ring_bits, exact_bits = (
        product_ring(truncate, bound_bits, (operand_bits, operand_bits)),
        2 * operand_bits,
    )
    wrap = _wrap_ots(session, x.shape[0], ring_bits)
    session.settle_unless_final(x, width)
    share = reshare(session, x, operand_bits)
    twice = ring.shl(share.signed, 1)
    if session.is_alice:
        wrap_ot = OlePart(share.top_times(twice), 1, ring_bits - width)
        halves = OlePart(share.choices(width), width + 1, ring_bits)
        local = ring.add(
            ring.mul(share.signed, ring.sub(share.signed, ring.constant(2 << operand_bits))),
            ring.constant(1 << 2 * operand_bits),
        )
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
    works mod 2^(L - i), L = ``exact_ring``(w + y_bits), and a ``lift_share`` follows when
    L < 128 (``_finish_product``). 2w OTs per value and y needs no resharing, where ``mul``
    costs 2 (min(w, y_bits) + 3) OTs and the circuit b + 40 AND gates to make ring shares
    of x (Yao's ``integer-shares``). Both parties send their u, then their corrections:
    one round trip.

    Security: each party sees only the u messages and corrections of OTs in which it holds
    the choice bits or the correlation, uniform given its inputs (OT security, as in
    ``ole``), and the lift's (``lift_share``).
    """
    y = check_shares(y, "y")
    bits = np.asarray(bits, dtype=np.uint8)
    n = y.shape[0]
    if (
        bits.ndim != 2
        or bits.shape[0] != n
        or not 1 <= bits.shape[1] <= 64
        or bits.max(initial=0) > 1
    ):
        raise ValueError(
            f"bits must be an ({n}, w) array of 0/1 with 1 <= w <= 64, got {bits.shape}"
        )
    check_bound(y_bits)
    if n == 0:
        return np.zeros((0, 2), dtype=np.uint64)
    width = bits.shape[1]
    ring_bits = exact_ring(width + y_bits)
    positions = np.tile(BIT_SHIFTS[:width], n)
    remaining = ring_bits - positions
    choices = np.ascontiguousarray(bits.reshape(-1))
    wrap = _wrap_ots(session, n, ring_bits)  # both set-ups before either party's u goes out
    forward = session.ot_sender() if session.is_alice else session.ot_receiver()
    reverse = session.reverse_ot()
    if session.is_alice:  # her u first, then the forward OTs, then the reverse corrections
        reverse_pads = reverse.pads(choices)
        _before_first_read(session, wrap)  # y may be a deferred result
        sent = short_cot_send(
            session, forward, _bit_correlation(y, choices, width), remaining, "arith.bits.y"
        )
        received = short_cot_finish(session, reverse_pads, choices, remaining, "arith.bits.r")
    else:
        forward_pads = forward.pads(choices)
        sent = short_cot_send(
            session, reverse, _bit_correlation(y, choices, width), remaining, "arith.bits.r"
        )
        received = short_cot_finish(session, forward_pads, choices, remaining, "arith.bits.y")
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
    x = check_shares(x, "x")
    if not truncate:
        return ring.mul_int(x, c)
    half = 1 << (truncate - 1)
    whole, rest = divmod(int(c) + half, 1 << truncate)
    rest -= half
    product = ring.mul_int(x, whole)
    if not rest:
        return product
    return ring.add(product, _truncate(session, ring.mul_int(x, rest), truncate, bound_bits))
