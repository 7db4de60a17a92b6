"""The plaintext model of the secure scores matches the float scores (the fixed-point precision)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.bn.scores import family_score
from ppbn.protocols.fixedpoint import (
    FACTORIAL_TABLE,
    FRAC,
    RECIPROCALS,
    SCORE_FRAC,
    PlainBackend,
    Shift,
    count_bits_for,
    exact_c_index,
    inv_on,
    ln_fixed,
    normalise,
    reduced_argument_of_power,
    reduced_argument_on,
    shift_frac_for,
    term_fixed,
)

K = count_bits_for(200_000)


@given(st.integers(min_value=1, max_value=200_000))
@settings(max_examples=300, deadline=None)
def test_ln_is_within_a_few_ulp(x):
    assert abs(ln_fixed(x, K) / 2**FRAC - math.log(x)) < 8 * 2.0**-FRAC


@given(st.integers(min_value=0, max_value=200_000), st.sampled_from(["yw", "yw0", "bic", "exact"]))
@settings(max_examples=300, deadline=None)
def test_terms_match_the_real_functions(x, mode):
    got = term_fixed(x, K, mode) / 2**SCORE_FRAC
    if mode == "exact":
        want = math.lgamma(x + 1)
    elif mode == "bic":
        want = x * math.log(x) if x else 0.0
    else:
        want = (x + 0.5) * math.log(x) if x else (-1.0 if mode == "yw0" else 0.0)
    assert abs(got - want) <= 1e-13 * max(1.0, abs(want)) + 1e-13 * x + 1e-12


def test_normalisation_keeps_u_small_and_gates_below_threshold():
    for x in range(1, 5000):
        nm = normalise(x, K, "yw")
        assert abs(nm.u) <= 2 ** (FRAC - 6)
        assert nm.j < len(RECIPROCALS) and nm.k == x.bit_length() - 1
    # yw's 0 is normalised as 1 (x1 = 1, k = 0, p = 2^(K-1)), whose ln part is 0 too
    assert normalise(0, K, "yw") == normalise(1, K, "yw").__class__(
        0, 0, 0, 0, 0, 0, 0, 0, 1 << (K - 1), 1
    )
    assert normalise(63, K, "exact") == normalise(0, K, "exact").__class__(
        0, 0, 0, 0, 0, 0, 0, 63, 0, 0
    )
    assert normalise(63, K, "exact").gate == 0 and normalise(64, K, "exact").gate == 1
    assert RECIPROCALS[0] == 1 << 12  # r_0 = 1: gated entries look up ln 1 = 0


@pytest.mark.parametrize("mode", ["yw", "yw0", "bic", "exact"])
def test_family_scores_from_terms_match_bn_scores(mode):
    """Assemble family scores from fixed-point terms as the secure oracle does."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        q, d = int(rng.integers(1, 9)), int(rng.integers(2, 5))
        table = rng.integers(0, 400, size=(q, d)) * (rng.random((q, d)) < 0.7)
        rows = table.sum(axis=1)
        cells = sum(term_fixed(int(a), K, mode) for a in table.ravel())
        if mode == "bic":
            row_terms = sum(term_fixed(int(a), K, mode) for a in rows)
        else:
            row_terms = sum(term_fixed(int(a) + d - 1, K, mode) for a in rows)
        fixed = (cells - row_terms) / 2**SCORE_FRAC
        plain = family_score(table, mode)
        public = plain - fixed  # pub(d, q), the lgamma(d) terms or the BIC penalty
        if mode in ("yw", "yw0"):
            from ppbn.bn.scores import pub

            expected_public = pub(d, q)
        elif mode == "exact":
            expected_public = q * math.lgamma(d)
        else:
            n = table.sum()
            expected_public = -(math.log(n) / 2 if n > 1 else 0.0) * q * (d - 1)
        assert public == pytest.approx(expected_public, abs=1e-8)


@pytest.mark.parametrize("mode", ["yw", "bic", "exact", "bdeu"])
@pytest.mark.parametrize("count_bits", [8, 11, 24])
def test_u_and_inv_from_f_and_the_tables_are_the_normalised_values(mode, count_bits):
    """The share arithmetic forms u = (2^(K'-1) + f) r_j - 2^P and inv = r_j p 2^z (exact,
    bdeu) or u = x1 p r_j - 2^P (yw, bic) from the circuit's shared outputs and looked-up
    table entries: equal to ``normalise``'s u and inv for every
    count of 8 and 11 bits (bdeu: every count whose shifted value fits) and near 2^24."""
    shift = Shift(1.3, shift_frac_for(count_bits)) if mode == "bdeu" else None
    shift_frac = 0 if shift is None else shift.frac
    k_bits = count_bits + shift_frac
    xs = (
        range(1 << count_bits)
        if count_bits < 12
        else [*range(3000), *range((1 << count_bits) - 3000, 1 << count_bits)]
    )
    if shift is not None:
        xs = [x for x in xs if not ((x << shift.frac) + shift.numerator) >> k_bits]
    nms = [normalise(x, count_bits, mode, shift) for x in xs]
    be = PlainBackend()  # it also checks every operand bound the secure products rely on
    r = [RECIPROCALS[n.j] for n in nms]
    if mode in ("exact", "bdeu"):
        assert reduced_argument_on(be, [n.f for n in nms], r, k_bits) == [n.u for n in nms]
        assert inv_on(be, r, [n.p for n in nms], k_bits, shift_frac) == [n.inv for n in nms]
    else:
        x1, p = [n.x1 for n in nms], [n.p for n in nms]
        assert reduced_argument_of_power(be, x1, p, r, count_bits) == [n.u for n in nms]


def test_exact_c_table_has_64_entries_and_every_count_reads_its_own():
    """ln x! below 64 (x = 1 reading ln 0! = 0 at entry 0), the Stirling constant (its
    own entry, 1) from 64 up: a 6-bit index."""
    assert len(FACTORIAL_TABLE) == 64
    stirling = FACTORIAL_TABLE[exact_c_index(64)]
    assert stirling == FACTORIAL_TABLE[exact_c_index(10**6)] != 0
    for x in range(64):
        assert FACTORIAL_TABLE[exact_c_index(x)] == round(math.lgamma(x + 1) * 2**SCORE_FRAC), x
    assert exact_c_index(1) == 0 and exact_c_index(64) == 1
    assert len({exact_c_index(x) for x in range(65)}) == 64
