"""Share arithmetic over Z_2^128: OLE, multiplication with truncation, public products,
masked-index lookup, the ln series of the spec, and what bob sees of alice's masks."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ppbn.protocols import arith, fixedpoint, ring
from ppbn.protocols.arith import ALICE, BOB, MAX_BOUND_BITS, ArithSession, table_lookup
from ppbn.protocols.arith.lift import reshare
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.fixedpoint import (
    FRAC,
    INV1P_MINUS_1,
    LN1P,
    STAT_BITS,
    PlainBackend,
    powers_on,
)
from ppbn.protocols.learning.terms import SecureBackend

M = ring.MODULUS


def share(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly random additive shares of the given (signed) ints."""
    alice = ring.RandomRing().uniform(len(values))
    return alice, ring.sub(ring.from_ints(values), alice)


def reveal(a: np.ndarray, b: np.ndarray) -> list[int]:
    return ring.to_signed(ring.add(a, b))


def two_party(protocol, alice_args, bob_args, pair=None, keep_openings=False):
    """Run ``protocol(session, *args)`` at both parties; returns (alice_out, bob_out, sessions)."""

    def side(role, args):
        def run(channel):
            session = ArithSession(channel, role, keep_openings)
            return protocol(session, *args), session

        return run

    (a, sa), (b, sb) = run_two_party(side(ALICE, alice_args), side(BOB, bob_args), pair=pair)
    return a, b, (sa, sb)


def floor_check(got: list[int], exact: list[int], bits: int) -> None:
    diffs = {g - (e >> bits) for g, e in zip(got, exact, strict=True)}
    assert diffs <= {0, 1}, diffs


# -- OLE and exact products --------------------------------------------------------------
def test_ole_at_edge_values():
    edges = [0, 1, 2**127, M - 1]
    a = [p for p in edges for _ in edges]
    b = [q for _ in edges for q in edges]
    za, zb, _ = two_party(arith.ole, (ring.from_ints(a),), (ring.from_ints(b),))
    assert ring.to_ints(ring.add(za, zb)) == [(p * q) % M for p, q in zip(a, b, strict=True)]


def test_products_are_exact_without_truncation():
    rng = random.Random(5)
    x = [rng.randrange(M) for _ in range(3000)] + [0, M - 1, 2**127]
    y = [rng.randrange(M) for _ in range(3000)] + [M - 1, M - 1, 2**127]
    (xa, xb), (ya, yb) = share(x), share(y)
    za, zb, (sa, sb) = two_party(arith.mul, (xa, ya, 0), (xb, yb, 0))
    assert ring.to_ints(ring.add(za, zb)) == [(p * q) % M for p, q in zip(x, y, strict=True)]
    n = len(x)
    for s in (sa, sb):
        assert s.counters.as_dict() == {
            "ots": 256 * n,
            "multiplications": n,
            "truncations": 0,
            "lifts": 0,
            "lookups": 0,
        }


fixed = st.integers(-(2**43), 2**43)


@given(st.lists(st.tuples(fixed, fixed), min_size=1, max_size=60))
@settings(max_examples=12, deadline=None)
def test_mul_is_within_one_ulp(pairs):
    x, y = (list(t) for t in zip(*pairs, strict=True))
    (xa, xb), (ya, yb) = share(x), share(y)
    za, zb, _ = two_party(arith.mul, (xa, ya), (xb, yb))
    floor_check(reveal(za, zb), [p * q for p, q in zip(x, y, strict=True)], FRAC)


@given(st.lists(st.tuples(fixed, fixed), min_size=1, max_size=60))
@settings(max_examples=8, deadline=None)
def test_mul_with_operand_bounds_is_within_one_ulp(pairs):
    x, y = (list(t) for t in zip(*pairs, strict=True))
    (xa, xb), (ya, yb) = share(x), share(y)
    za, zb, (sa, _) = two_party(arith.mul, (xa, ya, FRAC, 87, 44), (xb, yb, FRAC, 87, 44))
    floor_check(reveal(za, zb), [p * q for p, q in zip(x, y, strict=True)], FRAC)
    assert sa.counters.ots == 2 * len(x) * (arith.reshared_width(44) + 1) + len(
        x
    )  # 44 + 3 each way, one lift


def test_exact_mul_with_operand_bounds_at_the_edges():
    """x2 (up to 2^18) times ln values (up to 2^60), exact: the shape of a score term."""
    x = [2**60 - 1, -(2**60) + 1, 0, 1, -1] + [
        random.randrange(-(2**60), 2**60) for _ in range(3000)
    ]
    y = [2**60 - 1, 2**60 - 1, -(2**60) + 1, -1, 2**18] + [
        random.randrange(2**18) for _ in range(3000)
    ]
    (xa, xb), (ya, yb) = share(x), share(y)
    za, zb, _ = two_party(arith.mul, (xa, ya, 0, 87, 60), (xb, yb, 0, 87, 60))
    assert reveal(za, zb) == [p * q for p, q in zip(x, y, strict=True)]


def test_ole_refuses_inputs_wider_than_declared():
    with pytest.raises(ValueError, match="fit"):
        two_party(arith.ole, (ring.from_ints([3]), 8), (ring.from_ints([256]), 8))


def test_squares_take_one_ole_and_products_choose_with_the_narrower_operand():
    """A square: b + 3 OTs in reverse (alice chooses with her reshared share and its top
    bit), one forward OT for the wrap term and one to lift the result; a product: b + 3
    OTs each way, b the narrower operand's bound, and the lift."""
    x = [2**43 - 1, -(2**43) + 1, 0, 1, -1] + [
        random.randrange(-(2**43), 2**43) for _ in range(2000)
    ]
    xa, xb = share(x)
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, (sa, _) = two_party(arith.square, (xa, FRAC, 87, 44), (xb, FRAC, 87, 44), pair=pair)
    floor_check(reveal(za, zb), [v * v for v in x], FRAC)
    assert sa.counters.ots == len(x) * (44 + 4 + 1)
    # a square's OLE runs in reverse: bob sends its corrections, in the ring of 87 + 3 bits;
    # alice sends only the wrap OT's, one per value in the ring's top 90 - 46 bits
    ring_bits = arith.product_ring(FRAC, 87, (44, 44))
    assert ring_bits == 87 + 3
    assert sum(len(m) for m in _alice_messages(pair, "arith.ole.r")) == len(x) * sum(
        -(-(ring_bits - i) // 8) for i in range(44 + 3)
    )
    assert sum(len(m) for m in _bob_messages(pair, "arith.ole.y")) == len(x) * -(
        -(ring_bits - 46) // 8
    )
    za, zb, _ = two_party(arith.square, (xa, 0), (xb, 0))
    assert reveal(za, zb) == [v * v for v in x]
    # a count-sized operand (x2 < 2^17) times an ln-sized one (< 2^54), exact
    small = [2**17 - 1, 1, 0, 2**17 - 1] + [random.randrange(2**17) for _ in range(2000)]
    large = [2**54 - 1, -(2**54) + 1, 5, -1] + [
        random.randrange(-(2**54), 2**54) for _ in range(2000)
    ]
    (sa_, sb_), (la, lb) = share(small), share(large)
    za, zb, (sa, _) = two_party(arith.mul, (sa_, la, 0, 87, (17, 54)), (sb_, lb, 0, 87, (17, 54)))
    assert reveal(za, zb) == [p * q for p, q in zip(small, large, strict=True)]
    assert sa.counters.ots == len(small) * (
        2 * (17 + 3) + 1
    )  # both cross terms choose with x2's bits
    za, zb, _ = two_party(
        arith.mul, (la, sa_, 0, 87, (54, 17)), (lb, sb_, 0, 87, (54, 17))
    )  # the other order
    assert reveal(za, zb) == [p * q for p, q in zip(small, large, strict=True)]


@pytest.mark.parametrize(
    ("forward_n", "reverse_n"), [(2500, 300), (300, 2500), (0, 1100), (1100, 0)]
)
def test_ole_two_way_interleaves_directions_of_different_lengths(forward_n, reverse_n):
    """Forward (alice's a, bob's b) and reverse (bob's a, alice's b) batches at once, with
    128-bit choices (1,024 values per chunk), so one direction has more chunks than the
    other: each product is right, and each direction's corrections go its own way."""
    a_f, b_f = (
        [random.randrange(M) for _ in range(forward_n)],
        [random.randrange(M) for _ in range(forward_n)],
    )
    a_r, b_r = (
        [random.randrange(M) for _ in range(reverse_n)],
        [random.randrange(2**60) for _ in range(reverse_n)],
    )
    pair = memory_channel_pair(keep_transcript=True)
    (fa, ra), (fb, rb), (sa, sb) = two_party(
        arith.ole_two_way,
        (arith.OlePart(ring.from_ints(a_f)), arith.OlePart(ring.from_ints(b_r), 60, 100)),
        (arith.OlePart(ring.from_ints(b_f)), arith.OlePart(ring.from_ints(a_r), 60, 100)),
        pair=pair,
    )
    assert ring.to_ints(ring.add(fa, fb)) == [(p * q) % M for p, q in zip(a_f, b_f, strict=True)]
    assert [v % 2**100 for v in ring.to_ints(ring.add(ra, rb))] == [
        (p * q) % 2**100 for p, q in zip(a_r, b_r, strict=True)
    ]
    assert sum(len(m) for m in _bob_messages(pair, "arith.ole.y")) == forward_n * sum(
        -(-(128 - i) // 8) for i in range(128)
    )
    assert sum(len(m) for m in _alice_messages(pair, "arith.ole.r")) == reverse_n * sum(
        -(-(100 - i) // 8) for i in range(60)
    )
    assert sa.counters.ots == sb.counters.ots == 128 * forward_n + 60 * reverse_n


def test_ole_sends_only_the_correction_bits_that_survive_the_shift():
    n, bits = 300, 84
    a = [random.randrange(M) for _ in range(n)]
    b = [random.randrange(2**bits) for _ in range(n)]
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, _ = two_party(
        arith.ole, (ring.from_ints(a), bits), (ring.from_ints(b), bits), pair=pair
    )
    assert ring.to_ints(ring.add(za, zb)) == [(p * q) % M for p, q in zip(a, b, strict=True)]
    sent = sum(len(m) for m in _bob_messages(pair, "arith.ole.y"))
    assert sent == n * sum(
        -(-(128 - i) // 8) for i in range(bits)
    )  # 10,752 bytes would be 16 per OT
    # widths per value, the widest and narrowest included
    widths = np.array([1, 128, 8, 64, 65])
    b = [1, M - 1, 255, 2**64 - 1, 2**64]
    a = [M - 1] * len(b)
    za, zb, _ = two_party(arith.ole, (ring.from_ints(a), widths), (ring.from_ints(b), widths))
    assert ring.to_ints(ring.add(za, zb)) == [(p * q) % M for p, q in zip(a, b, strict=True)]
    with pytest.raises(ValueError, match="OLE input 2 does not fit in 8 bits"):
        two_party(
            arith.ole, (ring.from_ints(a), widths), (ring.from_ints([1, 1, 256, 1, 1]), widths)
        )


def test_ole_in_a_smaller_ring_is_right_there_and_sends_its_bits_only():
    """A product that ends in an opening of L bits needs its OLE only mod 2^L: OT i's
    correction keeps ceil((L - i) / 8) bytes, per value's own ring."""
    n, bits, ring_bits = 300, 54, 69
    a = [random.randrange(M) for _ in range(n)]
    b = [random.randrange(2**bits) for _ in range(n)]
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, _ = two_party(
        arith.ole,
        (ring.from_ints(a), bits, ring_bits),
        (ring.from_ints(b), bits, ring_bits),
        pair=pair,
    )
    low = (1 << ring_bits) - 1
    assert [v & low for v in ring.to_ints(ring.add(za, zb))] == [
        (p * q) & low for p, q in zip(a, b, strict=True)
    ]
    sent = sum(len(m) for m in _bob_messages(pair, "arith.ole.y"))
    assert sent == n * sum(-(-(ring_bits - i) // 8) for i in range(bits))
    widths, rings = np.array([1, 60, 8, 64]), np.array([1, 128, 9, 100])
    b = [1, 2**60 - 1, 255, 2**64 - 1]
    a = [M - 1] * len(b)
    za, zb, _ = two_party(
        arith.ole, (ring.from_ints(a), widths, rings), (ring.from_ints(b), widths, rings)
    )
    got = ring.to_ints(ring.add(za, zb))
    assert [g % (1 << int(r)) for g, r in zip(got, rings, strict=True)] == [
        (p * q) % (1 << int(r)) for p, q, r in zip(a, b, rings, strict=True)
    ]
    with pytest.raises(ValueError, match="wider than its ring"):
        two_party(arith.ole, (ring.from_ints([3]), 9, 8), (ring.from_ints([3]), 9, 8))


def _garbage_above(values: list[int], ring_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Shares of values that are right only mod 2^ring_bits: both carry random high bits."""
    xa, xb = share(values)
    noise = ring.from_ints([random.randrange(M) >> ring_bits << ring_bits for _ in values])
    return ring.add(xa, noise), ring.add(xb, noise)


def test_truncation_opens_in_the_ring_of_its_bound():
    bound = 28
    ring_bits = arith.opening_ring(bound)
    edge = 2**bound - 1
    x = [edge, -edge, 0, 1, -1] + [random.randrange(-edge, edge) for _ in range(2000)]
    xa, xb = _garbage_above(x, ring_bits)
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, _ = two_party(arith.truncate, (xa, 10, bound), (xb, 10, bound), pair=pair)
    floor_check(reveal(za, zb), x, 10)
    (msg,) = _bob_messages(pair, "arith.trunc")
    assert len(msg) == len(x) * -(-ring_bits // 8)  # 9 bytes, not 16


def test_exact_products_of_small_operands_run_in_a_small_ring_and_are_lifted():
    """m r_j (K' x 13 bits), exact: the OLE runs mod 2^(K' + 13 + 2), then one lift: a wrap
    OT whose correction keeps 128 - 30 bits, and one bit from bob per value."""
    bounds = (15, 13)
    x = [2**15 - 1, -(2**15) + 1, 0, 1] + [random.randrange(-(2**15), 2**15) for _ in range(1500)]
    y = [2**13 - 1, 2**13 - 1, -5, -(2**13) + 1] + [
        random.randrange(-(2**13), 2**13) for _ in range(1500)
    ]
    (xa, xb), (ya, yb) = share(x), share(y)
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, (sa, _) = two_party(
        arith.mul, (xa, ya, 0, 0, bounds), (xb, yb, 0, 0, bounds), pair=pair
    )
    assert reveal(za, zb) == [p * q for p, q in zip(x, y, strict=True)]
    assert sa.counters.lifts == len(x)
    ring_bits = arith.product_ring(0, 0, bounds)
    assert ring_bits == 28 + 2
    assert sum(len(m) for m in _bob_messages(pair, "arith.wrap")) == len(x) * -(
        -(128 - ring_bits) // 8
    )
    assert sum(len(m) for m in _alice_messages(pair, "arith.wrap.d")) == -(-len(x) // 8)
    # one OLE each way, each choosing with the narrower operand's reshared 13 + 2 bits and their top bit
    per_direction = len(x) * sum(
        -(-(ring_bits - i) // 8) for i in range(arith.reshared_width(13) + 1)
    )
    assert sum(len(m) for m in _bob_messages(pair, "arith.ole.y")) == per_direction
    assert sum(len(m) for m in _alice_messages(pair, "arith.ole.r")) == per_direction
    # an exact product near the ring's top keeps the full ring and needs no lift
    assert arith.product_ring(0, 0, (59, 60)) == 128


@given(st.integers(1, 60), st.integers(1, 60), st.data())
@settings(max_examples=6, deadline=None)
def test_products_and_squares_of_operands_at_their_bounds_are_exact(x_bits, y_bits, data):
    """The reshared operand's wrap identity (x + 2^b = s_A + s_B + 2^m t_A t_B) at every
    width: operands up to +-(2^b - 1), the narrower on either side, exact products and
    squares against plain integers (random shares make every wrap case occur)."""

    def values(bits):
        edge = 2**bits - 1
        rest = data.draw(st.lists(st.integers(-edge, edge), min_size=1, max_size=40))
        return [edge, -edge, 0, 1, -1, edge, -edge, edge] + rest

    x, y = values(x_bits), values(y_bits)
    n = min(len(x), len(y))
    x, y = x[:n], y[:n]
    (xa, xb), (ya, yb) = share(x), share(y)
    za, zb, (sa, sb) = two_party(
        arith.mul, (xa, ya, 0, 0, (x_bits, y_bits)), (xb, yb, 0, 0, (x_bits, y_bits))
    )
    assert reveal(za, zb) == [p * q for p, q in zip(x, y, strict=True)]
    lifts = n if arith.exact_ring(x_bits + y_bits) < 128 else 0
    assert sa.counters.ots == sb.counters.ots == 2 * n * (min(x_bits, y_bits) + 3) + lifts
    za, zb, _ = two_party(arith.square, (xa, 0, 0, x_bits), (xb, 0, 0, x_bits))
    assert reveal(za, zb) == [v * v for v in x]


def test_what_bob_receives_when_a_value_is_reshared_is_uniform():
    """Bob's reshared share is x + 2^b + r mod 2^m for r uniform in Z_2^m: its top bit
    and its low byte are uniform whether x is 0 or at the bound (chi-square), and it
    carries exactly ceil(m / 8) bytes per value."""
    n, bits = 4000, 30
    for x in ([0] * n, [2**bits - 1] * n, [-(2**bits) + 1] * n):
        xa, xb = ring.from_ints(x), ring.from_ints([0] * n)  # alice holds x: only the mask hides it
        pair = memory_channel_pair(keep_transcript=True)
        _, bobs, _ = two_party(reshare, (xa, bits), (xb, bits), pair=pair)
        (msg,) = _bob_messages(pair, "arith.reshare")
        assert len(msg) == n * -(-(bits + 2) // 8)
        top = np.bincount(bobs.top.astype(np.int64), minlength=2)
        assert stats.chisquare(top).pvalue > 1e-4
        low = np.bincount(np.frombuffer(msg, dtype=np.uint8).reshape(n, -1)[:, 0], minlength=256)
        assert stats.chisquare(low).pvalue > 1e-4


def test_what_each_party_receives_from_a_lift_is_uniform():
    """A lift's wrap OT: bob receives alice's corrections, alice bob's bits d = t_B XOR c.
    Both are uniform (chi-square) whether the product is 0 or at its bound, so the top bits
    they hide stay hidden; and a product ends in one correction of ceil((128 - n) / 8)
    bytes and one bit per value."""
    n, bits = 4000, 30
    bound = 2 * bits
    for x in ([0] * n, [2**bits - 1] * n):
        (xa, xb), (ya, yb) = share(x), share(x)
        pair = memory_channel_pair(keep_transcript=True)
        za, zb, _ = two_party(arith.mul, (xa, ya, 0, 0, bits), (xb, yb, 0, 0, bits), pair=pair)
        assert reveal(za, zb) == [v * v for v in x]
        (corrections,) = _bob_messages(pair, "arith.wrap")
        (flips,) = _alice_messages(pair, "arith.wrap.d")
        assert len(corrections) == n * -(-(128 - (bound + 2)) // 8) and len(flips) == -(-n // 8)
        d = np.unpackbits(np.frombuffer(flips, dtype=np.uint8), count=n, bitorder="little")
        assert stats.chisquare(np.bincount(d, minlength=2)).pvalue > 1e-4
        assert (
            stats.chisquare(
                np.bincount(np.frombuffer(corrections, dtype=np.uint8), minlength=256)
            ).pvalue
            > 1e-4
        )


def test_deferred_lifts_complete_in_place_and_save_alice_a_round_per_product():
    """Three chained products (u^2, u^3 = u^2 u with u^2 the narrower operand, then u^3 u^2):
    with ``defer_lifts`` alice completes each lift in place when she next reads, after her
    next product's first messages are out; the results are the same, and she waits for
    bob's lift bits once less per product that follows a lift (her rounds: sends after a
    read)."""
    n = 500
    u = [2**42 - 1, -(2**42) + 1, 0, 1] + [random.randrange(-(2**42), 2**42) for _ in range(n - 4)]
    ua, ub = share(u)
    alice_rounds = []
    for deferred in (False, True):

        def chain(session, shares, deferred=deferred):
            session.defer_lifts = deferred
            square = arith.square(session, shares, FRAC, 85, 43)
            cube = arith.mul(session, square, shares, FRAC, 79, (37, 43))
            fifth = arith.mul(session, cube, square, FRAC, 67, (31, 37))
            session.settle()
            return square, cube, fifth

        pair = memory_channel_pair()
        (sa, ca, fa), (sb, cb, fb), _ = two_party(chain, (ua,), (ub,), pair=pair)
        squares, cubes, fifths = reveal(sa, sb), reveal(ca, cb), reveal(fa, fb)
        floor_check(squares, [v * v for v in u], FRAC)
        floor_check(cubes, [p * v for p, v in zip(squares, u, strict=True)], FRAC)
        floor_check(fifths, [p * q for p, q in zip(cubes, squares, strict=True)], FRAC)
        alice_rounds.append(pair[0].stats.rounds)
    eager, deferred = alice_rounds
    assert deferred == eager - 2


def test_local_arithmetic_on_results_awaiting_lift_bits_completes_with_them():
    """In the secure backend alice computes sums and multiples of a product's result before
    bob's lift bits arrive (``ArithSession.derive``); they complete with the bits, to the
    values they would have had after settling first."""
    n = 400
    u = [2**42 - 1, -(2**42) + 1, 0, 1] + [random.randrange(-(2**42), 2**42) for _ in range(n - 4)]
    ua, ub = share(u)

    def run(session, shares):
        be = SecureBackend(session, session.role)
        squared = be.square(shares, FRAC, 85, 43)
        awaiting = session.awaiting_bits
        combined = be.sub(be.scale(be.add(squared, shares), 3), be.scale_each(squared, [2] * n))
        # the square's share is final in its low 88 - 48 bits, and 2^8 times it in 8 more
        scaled = be.scale(squared, 1 << 8)
        final = [
            session.low_bits_final(v, bits)
            for v, bits in ((squared, 40), (scaled, 48), (squared, 41))
        ]
        session.settle()
        return squared, combined, (awaiting, final)

    (sa, ca, alice_saw), (sb, cb, bob_saw), _ = two_party(run, (ua,), (ub,))
    assert alice_saw == (True, [True, True, False])
    assert bob_saw == (False, [True, True, True])  # bob's results are complete at once
    squares = reveal(sa, sb)
    floor_check(squares, [v * v for v in u], FRAC)
    assert reveal(ca, cb) == [3 * (q + v) - 2 * q for q, v in zip(squares, u, strict=True)]


def _xor_bits(values: list[int], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Random XOR shares of the bits of each value, (n, width) 0/1 each."""
    plain = (
        np.array(values, dtype=np.uint64)[:, None] >> np.arange(width, dtype=np.uint64)
    ) & np.uint64(1)
    alice = np.random.default_rng(len(values)).integers(0, 2, plain.shape).astype(np.uint8)
    return alice, plain.astype(np.uint8) ^ alice


@pytest.mark.parametrize(("width", "y_bits"), [(16, 54), (14, 13), (1, 1), (40, 87)])
def test_bit_mul_multiplies_xor_shared_bits_exactly(width, y_bits):
    """x2 (K + 1 bits) times ln, f (K' - 1 bits) times r_j, and the edges: exact, 2w OTs
    per value, one lift when the product's ring is short of 128 (not at 40 + 87 bits)."""
    top = 2**width - 1
    edge = 2**y_bits - 1
    x = [top, top, 0, 1, top] + [random.randrange(2**width) for _ in range(700)]
    y = [edge, -edge, edge, -1, 0] + [random.randrange(-edge, edge + 1) for _ in range(700)]
    a, b = _xor_bits(x, width)
    ya, yb = share(y)
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, (sa, sb) = two_party(arith.bit_mul, (a, ya, y_bits), (b, yb, y_bits), pair=pair)
    assert reveal(za, zb) == [p * q for p, q in zip(x, y, strict=True)]
    ring_bits = arith.exact_ring(width + y_bits)
    lifted = ring_bits < 128
    assert ring_bits == (width + y_bits + 2 if lifted else 128)
    assert sa.counters.ots == sb.counters.ots == 2 * width * len(x) + (len(x) if lifted else 0)
    assert sa.counters.lifts == (len(x) if lifted else 0)
    forward = sum(len(m) for m in _bob_messages(pair, "arith.bits.y"))
    assert forward == len(x) * sum(-(-(ring_bits - i) // 8) for i in range(width))


def test_bit_mul_corrections_do_not_depend_on_the_values():
    """Each party's corrections are masked by pads of choices it does not hold: uniform
    bytes, whether the bits and y are all zero or random."""
    n, width = 500, 12
    seen = []
    for x, y in (
        ([0] * n, [0] * n),
        (
            [random.randrange(2**width) for _ in range(n)],
            [random.randrange(-(2**40), 2**40) for _ in range(n)],
        ),
    ):
        a, b = _xor_bits(x, width)
        ya, yb = share(y)
        pair = memory_channel_pair(keep_transcript=True)
        two_party(arith.bit_mul, (a, ya, 41), (b, yb, 41), pair=pair)
        to_bob = np.frombuffer(b"".join(_bob_messages(pair, "arith.bits.y")), dtype=np.uint8)
        to_alice = np.frombuffer(
            b"".join(p for t, p in pair[0].transcript if t == "arith.bits.r"), dtype=np.uint8
        )
        seen.append((to_bob, to_alice))
    for received in (r for pair_ in seen for r in pair_):
        assert stats.chisquare(np.bincount(received, minlength=256)).pvalue > 1e-4
    for side in range(2):
        assert stats.ks_2samp(seen[0][side], seen[1][side]).pvalue > 1e-4


def test_truncation_holds_up_to_the_bound():
    edge = 2**MAX_BOUND_BITS - 1
    x = [edge, -edge, 0, -1, 1, 2**FRAC, -(2**FRAC)] + [
        random.randrange(-edge, edge) for _ in range(2000)
    ]
    xa, xb = share(x)
    za, zb, _ = two_party(arith.truncate, (xa, 30), (xb, 30))
    floor_check(reveal(za, zb), x, 30)


def test_bound_beyond_the_mask_headroom_is_refused():
    xa, xb = share([1])
    with pytest.raises(ValueError, match="bound_bits"):
        two_party(arith.truncate, (xa, 8, MAX_BOUND_BITS + 1), (xb, 8, MAX_BOUND_BITS + 1))


@pytest.mark.parametrize("c", [2**FRAC - 1, -(2**FRAC), 3, int(0.2 * 2**FRAC), -(2**FRAC) // 4 - 7])
def test_mul_public_is_within_one_ulp_for_coefficients_near_one(c):
    x = [random.randrange(-(2**42), 2**42) for _ in range(500)] + [2**42 - 1, -(2**42), 0]
    xa, xb = share(x)
    za, zb, _ = two_party(arith.mul_public, (xa, c), (xb, c))
    floor_check(reveal(za, zb), [c * v for v in x], FRAC)


def test_mul_public_without_truncation_is_local_and_exact():
    x = [random.randrange(M) for _ in range(100)]
    xa, xb = share(x)
    pair = memory_channel_pair()
    za, zb, _ = two_party(arith.mul_public, (xa, -12345, 0), (xb, -12345, 0), pair=pair)
    assert ring.to_ints(ring.add(za, zb)) == [(v * -12345) % M for v in x]
    assert pair[0].stats.messages_sent == pair[1].stats.messages_sent == 0


# -- lookup ----------------------------------------------------------------------------
@pytest.mark.parametrize(("width", "instances"), [(1, 50), (4, 300), (7, 2500)])
def test_lookup_returns_shares_of_the_entry(width, instances):
    """Entries wider than MAX_BOUND_BITS: a uniform mask and 16 bytes per entry."""
    size = 1 << width
    table = [random.randrange(-(2**100), 2**100) for _ in range(size)]
    j = np.array([random.randrange(size) for _ in range(instances)])
    mu = np.array([random.randrange(size) for _ in range(instances)])
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, (sa, sb) = two_party(arith.lookup, (table, mu), (table, mu ^ j), pair=pair)
    assert reveal(za, zb) == [table[k] for k in j]
    assert sa.counters.ots == sb.counters.ots == instances * width
    assert sa.counters.lookups == instances
    assert sum(len(m) for m in _bob_messages(pair, "arith.lookup")) == instances * size * 16


def _extreme_table(size: int, bits: int) -> list[int]:
    """Random entries of |entry| < 2^bits, with the most negative and most positive at 0 and 1."""
    top = 2**bits - 1
    return [-top, top] + [random.randint(-top, top) for _ in range(size - 2)]


@pytest.mark.parametrize(
    ("width", "bits", "instances"),
    [(1, 0, 40), (3, 1, 300), (6, 48, 800), (7, 57, 500), (10, 13, 60), (2, 87, 200)],
)
def test_narrow_lookup_reconstructs_exactly_and_sends_the_predicted_bytes(width, bits, instances):
    size = 1 << width
    table = [0] * size if bits == 0 else _extreme_table(size, bits)
    j = np.array([0, 1, size - 1] + [random.randrange(size) for _ in range(instances - 3)])
    mu = np.array([random.randrange(size) for _ in range(instances)])
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, (sa, _) = two_party(arith.lookup, (table, mu), (table, mu ^ j), pair=pair)
    assert reveal(za, zb) == [table[k] for k in j]
    per_entry = -(-(bits + 2) // 8)  # an element of Z_2^(e + 2)
    assert arith.entry_bytes(bits) == per_entry
    assert sum(len(m) for m in _bob_messages(pair, "arith.lookup")) == instances * size * per_entry
    assert sa.counters.ots == instances * (width + 1)  # and one to lift each entry
    assert sa.counters.lifts == instances


def test_lookup_width_is_read_off_the_table():
    """A table given as ring elements is read as signed; one entry one bit wider costs a byte
    more at a byte boundary, and a table beyond MAX_BOUND_BITS falls back to 16 bytes."""
    for entries, per_entry in (
        ([0, 2**45 - 1, -(2**45) + 1, 5], 6),  # e = 45: 47 bits
        ([0, 2**46, 3, -1], 7),  # e = 47: 49 bits
        ([0, -(2**87) + 1, 1, 2], 12),  # e = 87: 89 bits
        ([0, 2**87, 1, 2], 16),  # e = 88: uniform mask
    ):
        j, mu = np.array([1, 2, 3, 0] * 5), np.array([random.randrange(4) for _ in range(20)])
        pair = memory_channel_pair(keep_transcript=True)
        za, zb, _ = two_party(
            arith.lookup,
            (ring.from_ints(entries), mu),
            (ring.from_ints(entries), mu ^ j),
            pair=pair,
        )
        assert reveal(za, zb) == [entries[k] for k in j]
        assert sum(len(m) for m in _bob_messages(pair, "arith.lookup")) == 20 * 4 * per_entry


def _lookup_rounds(protocol, alice_args, bob_args):
    """Run a warm-up lookup (the base OTs) and then ``protocol``; returns its outputs, the
    rounds and the transcript of the second part only."""

    def side(role, args):
        def run(channel):
            session = ArithSession(channel, role)
            arith.lookup(session, [1, 2], [0])
            before = channel.stats.rounds, len(channel.transcript or [])
            return protocol(session, *args), session, before

        return run

    pair = memory_channel_pair(keep_transcript=True)
    (a, sa, (ra, _)), (b, sb, (rb, tb)) = run_two_party(
        side(ALICE, alice_args), side(BOB, bob_args), pair=pair
    )
    rounds = max(pair[0].stats.rounds - ra, pair[1].stats.rounds - rb)
    return a, b, (sa, sb), rounds, pair[1].transcript[tb:]


def test_lookup_many_shares_the_ots_and_the_message():
    size, n = 64, 700
    widths = (48, 13, 0, 87)
    tables = [_extreme_table(size, w) if w else [0] * size for w in widths]
    j = np.array([0, 1] + [random.randrange(size) for _ in range(n - 2)])
    mu = np.array([random.randrange(size) for _ in range(n)])
    za, zb, (sa, sb), rounds, seen = _lookup_rounds(
        arith.lookup_many, (tables, mu), (tables, mu ^ j)
    )
    for table, a, b in zip(tables, za, zb, strict=True):
        assert reveal(a, b) == [table[k] for k in j]
    assert rounds == 1  # bob's lift bits go with his next message
    (msg,) = [payload for tag, payload in seen if tag == "arith.lookup"]
    assert len(msg) == n * size * sum(-(-(w + 2) // 8) for w in widths)
    assert (
        sa.counters.ots - 2 == sb.counters.ots - 2 == n * 6 + n * 4
    )  # once for the four tables, and the lifts
    assert sa.counters.lookups - 1 == n * 4


def test_lookup_batch_is_one_round_for_several_indices():
    requests_a, requests_b, want = [], [], []
    for width, count, tables in ((4, 300, 2), (6, 500, 2), (7, 400, 1), (1, 10, 1)):
        size = 1 << width
        ts = [_extreme_table(size, random.randrange(1, 60)) for _ in range(tables)]
        j = np.array([random.randrange(size) for _ in range(count)])
        mu = np.array([random.randrange(size) for _ in range(count)])
        requests_a.append((ts, mu))
        requests_b.append((ts, mu ^ j))
        want.append([[t[k] for k in j] for t in ts])
    za, zb, _, rounds, _ = _lookup_rounds(arith.lookup_batch, (requests_a,), (requests_b,))
    assert [
        [reveal(a, b) for a, b in zip(ra, rb, strict=True)] for ra, rb in zip(za, zb, strict=True)
    ] == want
    assert rounds == 1


def test_lookup_chunks_and_rounds_keep_the_tweaks_in_step(monkeypatch):
    """Small chunk and round limits: many messages and OT calls, then another lookup in the
    same sessions; every share must still reconstruct (both parties reserve the same tweaks)."""
    monkeypatch.setattr(table_lookup, "LOOKUP_CHUNK_HASHES", 1000)
    monkeypatch.setattr(table_lookup, "LOOKUP_ROUND_OTS", 700)
    size, n = 32, 400
    tables = [_extreme_table(size, 52), _extreme_table(size, 9), _extreme_table(size, 120)]
    j = np.array([random.randrange(size) for _ in range(n)])
    mu = np.array([random.randrange(size) for _ in range(n)])
    other = _extreme_table(8, 30)

    def protocol(session, masks, small_masks):
        many = arith.lookup_many(session, tables, masks)
        return many, arith.lookup(session, other, small_masks)

    small_j = np.array([random.randrange(8) for _ in range(n)])
    small_mu = np.array([random.randrange(8) for _ in range(n)])
    (ma, oa), (mb, ob), _, rounds, _ = _lookup_rounds(
        protocol, (mu, small_mu), (mu ^ j, small_mu ^ small_j)
    )
    for table, a, b in zip(tables, ma, mb, strict=True):
        assert reveal(a, b) == [table[k] for k in j]
    assert reveal(oa, ob) == [other[k] for k in small_j]
    assert rounds == -(-n * 5 // 700) + -(-n * 3 // 700)


def test_lookup_refuses_bad_tables_and_indices():
    xa = ArithSession(memory_channel_pair()[0], ALICE)
    with pytest.raises(ValueError, match="power of two"):
        arith.lookup(xa, [1, 2, 3], [0])
    with pytest.raises(ValueError, match="indices"):
        arith.lookup(xa, [1, 2, 3, 4], [4])
    with pytest.raises(ValueError, match="same length"):
        arith.lookup_many(xa, [[1, 2, 3, 4], [1, 2]], [0])
    with pytest.raises(ValueError, match="at least one table"):
        arith.lookup_many(xa, [], [0])


def test_session_checks_role_and_shapes():
    with pytest.raises(ValueError, match="role"):
        ArithSession(memory_channel_pair()[0], "carol")
    s = ArithSession(memory_channel_pair()[0], ALICE)
    with pytest.raises(ValueError, match="ring vector"):
        arith.mul(s, np.zeros(3, dtype=np.uint64), np.zeros(3, dtype=np.uint64))
    with pytest.raises(ValueError, match="differ"):
        arith.mul(s, ring.from_ints([1, 2]), ring.from_ints([1]))


# -- the spec end to end ---------------------------------------------------------------
def test_series_on_shares_reproduces_the_fixedpoint_model():
    """u from the normalisation of random counts, shared; u^2..u^4 and the series of
    ln(1 + u) and 1/(1 + u) - 1 computed with ``arith`` equal the plaintext model within a
    few ulp (one per truncation, propagated)."""
    count_bits = fixedpoint.count_bits_for(200_000)
    counts = [random.randrange(1, 200_000) for _ in range(400)] + [1, 2, 3, 64, 65, 127, 199_999]
    u = [fixedpoint.normalise(x, count_bits, "yw").u for x in counts]
    ua, ub = share(u)

    def protocol(session, u_share):
        be = SecureBackend(session, session.role)
        p = powers_on(be, u_share)
        results = p, LN1P.evaluate(be, u_share, *p), INV1P_MINUS_1.evaluate(be, u_share, *p)
        session.settle()  # alice's last results await bob's lift bits
        return results

    (pa, ln_a, inv_a), (pb, ln_b, inv_b), _ = two_party(protocol, (ua,), (ub,))
    plain = PlainBackend()
    p = powers_on(plain, u)
    for i in range(3):
        got = reveal(pa[i], pb[i])
        assert max(abs(g - w) for g, w in zip(got, p[i], strict=True)) <= 2
    for series, (a, b) in ((LN1P, (ln_a, ln_b)), (INV1P_MINUS_1, (inv_a, inv_b))):
        want = series.evaluate(plain, u, *p)
        got = reveal(a, b)
        assert max(abs(g - w) for g, w in zip(got, want, strict=True)) <= 4


# -- what bob sees ---------------------------------------------------------------------
def _bob_messages(pair, tag: str) -> list[bytes]:
    return [payload for t, payload in pair[1].transcript if t == tag]


def _alice_messages(pair, tag: str) -> list[bytes]:
    return [payload for t, payload in pair[0].transcript if t == tag]


def test_ole_corrections_do_not_depend_on_bobs_input_in_reverse():
    """The reverse direction of ``ole_two_way``: alice's choice bits are all 0, so the
    corrections she receives must be uniform, for bob's a = 0 as for a random a."""
    n = 400
    seen = []
    empty = arith.OlePart(np.zeros((0, 2), dtype=np.uint64))
    for a in ([0] * n, [random.randrange(M) for _ in range(n)]):
        pair = memory_channel_pair(keep_transcript=True)
        two_party(
            arith.ole_two_way,
            (empty, arith.OlePart(ring.from_ints([0] * n), 64)),
            (empty, arith.OlePart(ring.from_ints(a), 64)),
            pair=pair,
        )
        seen.append(np.frombuffer(b"".join(_alice_messages(pair, "arith.ole.r")), dtype=np.uint8))
        assert not _bob_messages(pair, "arith.ole.y")
    for received in seen:
        assert stats.chisquare(np.bincount(received, minlength=256)).pvalue > 1e-4
    assert stats.ks_2samp(seen[0], seen[1]).pvalue > 1e-4


def test_ole_corrections_do_not_depend_on_alices_input():
    """Bob's choice bits are all 0 here, so each correction is masked by a pad he does not
    hold: the bytes he receives must be uniform, for alice's a = 0 as for a random a."""
    n = 400
    seen = []
    for a in ([0] * n, [random.randrange(M) for _ in range(n)]):
        pair = memory_channel_pair(keep_transcript=True)
        two_party(arith.ole, (ring.from_ints(a), 64), (ring.from_ints([0] * n), 64), pair=pair)
        seen.append(np.frombuffer(b"".join(_bob_messages(pair, "arith.ole.y")), dtype=np.uint8))
    for received in seen:
        assert stats.chisquare(np.bincount(received, minlength=256)).pvalue > 1e-4
    assert stats.ks_2samp(seen[0], seen[1]).pvalue > 1e-4


def test_truncation_opening_does_not_depend_on_the_value():
    """Bob learns c = x + r (his share plus alice's message): its distribution must be the
    mask's whatever x is, here x = 0 against x = +-2^86."""
    n = 3000
    opened = []
    for values in (
        [0] * n,
        [random.choice([-1, 1]) * (2**86 - random.randrange(2**40)) for _ in range(n)],
    ):
        xa, xb = share(values)
        pair = memory_channel_pair(keep_transcript=True)
        two_party(arith.truncate, (xa, FRAC), (xb, FRAC), pair=pair)
        (msg,) = _bob_messages(pair, "arith.trunc")
        c = ring.add(xb, np.frombuffer(msg, dtype=np.uint64).reshape(n, 2))
        opened.append(ring.to_float(c, 0) / 2.0 ** (MAX_BOUND_BITS + STAT_BITS - 1))
    zero, large = opened
    assert stats.kstest(zero, "uniform", args=(-1, 2)).pvalue > 1e-4
    assert stats.ks_2samp(zero, large).pvalue > 1e-4


def test_lookup_messages_do_not_depend_on_table_or_index():
    """Bob's ciphertexts and decrypted entries: the same distribution for tables of the same
    width whose entries are all the most negative value, read at j = 0, and all the most
    positive one, read at random j; his entry T[j] + 2^e - rho is uniform in Z_2^m,
    m = e + 2 (read as signed), and the ciphertext bytes are uniform."""
    n, width, bits = 1500, 3, 48
    size = 1 << width
    top = 2**bits - 1
    views = []
    for tables, j in (
        ([[-top] * size, [5] * (size - 1) + [-top]], np.zeros(n, dtype=np.int64)),
        (
            [[top] * size, [top] + [-5] * (size - 1)],
            np.array([random.randrange(size) for _ in range(n)]),
        ),
    ):
        mu = np.array([random.randrange(size) for _ in range(n)])
        pair = memory_channel_pair(keep_transcript=True)
        (ra, rb), (sa, sb), (_, bob) = two_party(
            arith.lookup_many, (tables, mu), (tables, mu ^ j), pair=pair, keep_openings=True
        )
        assert reveal(ra, sa) == [tables[0][k] for k in j]
        assert reveal(rb, sb) == [tables[1][k] for k in j]
        (msg,) = _bob_messages(pair, "arith.lookup")
        entries = [values for what, values in bob.openings if what == "lookup"]
        assert len(entries) == 2
        scale = 2.0 ** (bits + 1)  # signed elements of Z_2^(e + 2)
        views.append(
            (np.frombuffer(msg, dtype=np.uint8), *(ring.to_float(e, 0) / scale for e in entries))
        )
    (c0, *entries0), (c1, *entries1) = views
    for cipher in (c0, c1):
        assert stats.chisquare(np.bincount(cipher, minlength=256)).pvalue > 1e-4
    assert stats.ks_2samp(c0, c1).pvalue > 1e-4
    for e0, e1 in zip(entries0, entries1, strict=True):
        assert stats.ks_2samp(e0, e1).pvalue > 1e-4
        for e in (e0, e1):
            assert stats.kstest(e, "uniform", args=(-1, 2)).pvalue > 1e-4
