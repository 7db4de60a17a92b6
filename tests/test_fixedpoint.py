"""The plaintext model of the secure scores matches the float scores (issue 5 precision)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.bn.scores import family_score
from ppbn.protocols.fixedpoint import (
    FRAC,
    RECIPROCALS,
    SCORE_FRAC,
    count_bits_for,
    ln_fixed,
    normalise,
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
    assert normalise(0, K, "yw") == normalise(0, K, "yw").__class__(0, 0, 0, 0, 0, 0, 0)
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
