"""Privacy metrics: closed forms of the dissertation (Sec. 3.1) and the conventions of docs/conventions.md, "Gamma amplification"."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ppbn.randomized.pram.operators import (
    Block,
    RandomizationScheme,
    binary,
    binary_symmetric,
    grouped_multi_category,
    identity,
    multi_category,
    ternary_symmetric,
)
from ppbn.randomized.pram.privacy import (
    conditional_entropy,
    gamma_amplification,
    privacy_report,
    probabilistic_k_anonymity,
)


def _h(p):
    return 0.0 if p in (0.0, 1.0) else -(p * np.log2(p) + (1 - p) * np.log2(1 - p))


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 0.49))
def test_binary_symmetric_closed_forms(p):
    m = binary_symmetric(p)
    assert gamma_amplification(m).value == pytest.approx((1 - p) / p)
    assert probabilistic_k_anonymity(m).k_p == 2
    assert conditional_entropy(m) == pytest.approx(_h(p))


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 0.3), st.floats(0.01, 0.3))
def test_ternary_symmetric_closed_form(a, b):
    p1, p2 = max(a, b), min(a, b)  # the paper's condition 1 - p1 - p2 >= p1 >= p2
    gamma = gamma_amplification(ternary_symmetric(p1, p2))
    assert gamma.value == pytest.approx((1 - p1 - p2) / p2)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.floats(0.01, 0.6))
def test_multi_category_closed_forms(k, p):
    # p = (k - 1) / k makes every row uniform: singular, rejected by validation
    assume(abs((1 - p) - p / (k - 1)) > 0.02)
    m = multi_category(k, p)
    if 1 - p >= p / (k - 1):
        assert gamma_amplification(m).value == pytest.approx((1 - p) * (k - 1) / p)
    assert probabilistic_k_anonymity(m).k_p == k
    # uniform prior: H(X | X_tilde) = h(p) + p log2(K - 1)
    assert conditional_entropy(m) == pytest.approx(_h(p) + p * np.log2(k - 1))


def test_table_5_1_gammas():
    assert gamma_amplification(binary_symmetric(0.25)).value == pytest.approx(3)
    assert gamma_amplification(binary_symmetric(0.2)).value == pytest.approx(4)
    assert gamma_amplification(ternary_symmetric(0.15, 0.15)).value == pytest.approx(
        4.67, abs=0.005
    )


def test_papers_gamma_9_is_a_row_ratio_not_the_definition():
    # Table 5.1 prints gamma = 9 for binary p1 = 0.1, p2 = 0.25: that is (1-p1)/p1.
    # The column-ratio definition gives max(0.9/0.25, 0.75/0.1) = 7.5 (docs/conventions.md, "Gamma amplification").
    gamma = gamma_amplification(binary(0.1, 0.25))
    assert gamma.value == pytest.approx(7.5)
    assert gamma.value != pytest.approx((1 - 0.1) / 0.1)


def test_zero_entries_give_infinite_strict_gamma_and_a_nonzero_value():
    # Sec. 3.1.2: 6 states in 2 groups of 3 -> 2(1-p)/p when zeros are ignored
    p = 0.3
    gamma = gamma_amplification(grouped_multi_category(6, [[0, 1, 2], [3, 4, 5]], p))
    assert gamma.value == float("inf")
    assert gamma.value_ignoring_zeros == pytest.approx(2 * (1 - p) / p)
    assert "infinite" in gamma.convention
    plain = gamma_amplification(multi_category(6, p))
    assert plain.value == plain.value_ignoring_zeros == pytest.approx(5 * (1 - p) / p)
    assert gamma_amplification(identity(3)).value == float("inf")


def test_grouping_lowers_k_anonymity_and_entropy():
    p = 0.3
    grouped = grouped_multi_category(6, [[0, 1, 2], [3, 4, 5]], p)
    assert probabilistic_k_anonymity(grouped).k_p == 3
    assert conditional_entropy(grouped) < conditional_entropy(multi_category(6, p))
    assert probabilistic_k_anonymity(identity(4)).k_p == 1
    assert conditional_entropy(identity(4)) == pytest.approx(0.0)


def test_prior_matters_for_entropy_and_k_anonymity():
    m = binary_symmetric(0.2)
    assert conditional_entropy(m, [0.9, 0.1]) < conditional_entropy(m, [0.5, 0.5])
    skew = probabilistic_k_anonymity(m, [1.0, 0.0])
    assert skew.k_p == 1 and skew.dist_k == pytest.approx(0.0)
    uniform = probabilistic_k_anonymity(m)
    assert uniform.dist_k == pytest.approx(1 - _h(0.2))
    with pytest.raises(ValueError, match="prior"):
        conditional_entropy(m, [0.7, 0.7])


def test_report_covers_each_block():
    scheme = RandomizationScheme(
        {"A": 2, "B": 3, "C": 2},
        [
            Block(("A",), (2,), binary_symmetric(0.25), "bs"),
            Block(("B", "C"), (3, 2), multi_category(6, 0.3), "joint"),
        ],
    )
    rows = privacy_report(scheme, {"A": [0.7, 0.3]})
    assert [r.variables for r in rows] == [("A",), ("B", "C")]
    assert rows[0].gamma.value == pytest.approx(3) and rows[1].k_anonymity.k_p == 6
    assert rows[0].prior_entropy_bits == pytest.approx(_h(0.7))
    assert rows[1].prior_entropy_bits == pytest.approx(np.log2(6))
    assert 0 < rows[0].entropy_bits < rows[0].prior_entropy_bits
