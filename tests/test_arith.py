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
from ppbn.protocols.arith import ALICE, BOB, MAX_BOUND_BITS, ArithSession
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.fixedpoint import (
    FRAC,
    INV1P_MINUS_1,
    LN1P,
    STAT_BITS,
    PlainBackend,
    powers_on,
)
from ppbn.protocols.k2 import SecureBackend

M = ring.MODULUS


def share(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly random additive shares of the given (signed) ints."""
    alice = ring.RandomRing().uniform(len(values))
    return alice, ring.sub(ring.from_ints(values), alice)


def reveal(a: np.ndarray, b: np.ndarray) -> list[int]:
    return ring.to_signed(ring.add(a, b))


def two_party(protocol, alice_args, bob_args, pair=None):
    """Run ``protocol(session, *args)`` at both parties; returns (alice_out, bob_out, sessions)."""

    def side(role, args):
        def run(channel):
            session = ArithSession(channel, role)
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
    assert sa.counters.ots == 2 * len(x) * (44 + STAT_BITS + 1)


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


def test_squares_take_one_ole_and_products_take_each_operands_width():
    x = [2**43 - 1, -(2**43) + 1, 0, 1, -1] + [random.randrange(-(2**43), 2**43) for _ in range(2000)]
    xa, xb = share(x)
    za, zb, (sa, _) = two_party(arith.square, (xa, FRAC, 87, 44), (xb, FRAC, 87, 44))
    floor_check(reveal(za, zb), [v * v for v in x], FRAC)
    assert sa.counters.ots == len(x) * (44 + STAT_BITS + 1)
    za, zb, _ = two_party(arith.square, (xa, 0), (xb, 0))
    assert reveal(za, zb) == [v * v for v in x]
    # a count-sized operand (x2 < 2^17) times an ln-sized one (< 2^54), exact
    small = [2**17 - 1, 1, 0, 2**17 - 1] + [random.randrange(2**17) for _ in range(2000)]
    large = [2**54 - 1, -(2**54) + 1, 5, -1] + [random.randrange(-(2**54), 2**54) for _ in range(2000)]
    (sa_, sb_), (la, lb) = share(small), share(large)
    za, zb, (sa, _) = two_party(arith.mul, (sa_, la, 0, 87, (17, 54)), (sb_, lb, 0, 87, (17, 54)))
    assert reveal(za, zb) == [p * q for p, q in zip(small, large, strict=True)]
    assert sa.counters.ots == len(small) * (17 + 54 + 2 * (STAT_BITS + 1))


def test_ole_sends_only_the_correction_bits_that_survive_the_shift():
    n, bits = 300, 84
    a = [random.randrange(M) for _ in range(n)]
    b = [random.randrange(2**bits) for _ in range(n)]
    pair = memory_channel_pair(keep_transcript=True)
    za, zb, _ = two_party(arith.ole, (ring.from_ints(a), bits), (ring.from_ints(b), bits), pair=pair)
    assert ring.to_ints(ring.add(za, zb)) == [(p * q) % M for p, q in zip(a, b, strict=True)]
    sent = sum(len(m) for m in _bob_messages(pair, "arith.ole.y"))
    assert sent == n * sum(-(-(128 - i) // 8) for i in range(bits))  # 10,752 bytes would be 16 per OT
    # widths per value, the widest and narrowest included
    widths = np.array([1, 128, 8, 64, 65])
    b = [1, M - 1, 255, 2**64 - 1, 2**64]
    a = [M - 1] * len(b)
    za, zb, _ = two_party(arith.ole, (ring.from_ints(a), widths), (ring.from_ints(b), widths))
    assert ring.to_ints(ring.add(za, zb)) == [(p * q) % M for p, q in zip(a, b, strict=True)]
    with pytest.raises(ValueError, match="OLE input 2 does not fit in 8 bits"):
        two_party(arith.ole, (ring.from_ints(a), widths), (ring.from_ints([1, 1, 256, 1, 1]), widths))


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
    size = 1 << width
    table = [random.randrange(-(2**100), 2**100) for _ in range(size)]
    j = np.array([random.randrange(size) for _ in range(instances)])
    mu = np.array([random.randrange(size) for _ in range(instances)])
    za, zb, (sa, sb) = two_party(arith.lookup, (table, mu), (table, mu ^ j))
    assert reveal(za, zb) == [table[k] for k in j]
    assert sa.counters.ots == sb.counters.ots == instances * width
    assert sa.counters.lookups == instances


def test_lookup_refuses_bad_tables_and_indices():
    xa = ArithSession(memory_channel_pair()[0], ALICE)
    with pytest.raises(ValueError, match="power of two"):
        arith.lookup(xa, [1, 2, 3], [0])
    with pytest.raises(ValueError, match="indices"):
        arith.lookup(xa, [1, 2, 3, 4], [4])


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
        return p, LN1P.evaluate(be, u_share, *p), INV1P_MINUS_1.evaluate(be, u_share, *p)

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
    """Bob's ciphertexts and decrypted share: the same distribution for an all-zero table
    read at j = 0 and for a random table read at random j."""
    n, width = 1500, 3
    size = 1 << width
    views = []
    for table, j in (
        ([0] * size, np.zeros(n, dtype=np.int64)),
        (
            [random.randrange(2**90) for _ in range(size)],
            np.array([random.randrange(size) for _ in range(n)]),
        ),
    ):
        mu = np.array([random.randrange(size) for _ in range(n)])
        pair = memory_channel_pair(keep_transcript=True)
        _, zb, _ = two_party(arith.lookup, (table, mu), (table, mu ^ j), pair=pair)
        (msg,) = _bob_messages(pair, "arith.lookup")
        cipher = np.frombuffer(msg, dtype=np.uint64).reshape(n, size, 2)
        views.append((cipher[:, :, 1].ravel() / 2.0**64, zb[:, 1] / 2.0**64))
    (c0, s0), (c1, s1) = views
    assert stats.ks_2samp(c0, c1).pvalue > 1e-4
    assert stats.ks_2samp(s0, s1).pvalue > 1e-4
    assert stats.kstest(s0, "uniform").pvalue > 1e-4
