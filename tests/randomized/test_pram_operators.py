"""PRAM matrices, their validation, schemes and the record randomizer."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.errors import UserError
from ppbn.randomized.pram.operators import (
    Block,
    RandomizationError,
    RandomizationScheme,
    RandomSource,
    binary,
    binary_symmetric,
    grouped,
    grouped_multi_category,
    identity,
    kron,
    multi_category,
    sample_rows,
    ternary_symmetric,
    validate_matrix,
)


def test_standard_matrices_have_the_papers_entries():
    assert np.allclose(binary_symmetric(0.2), [[0.8, 0.2], [0.2, 0.8]])
    assert np.allclose(binary(0.1, 0.25), [[0.9, 0.1], [0.25, 0.75]])
    t = ternary_symmetric(0.15, 0.05)
    assert np.allclose(t, [[0.8, 0.15, 0.05], [0.05, 0.8, 0.15], [0.15, 0.05, 0.8]])
    m = multi_category(4, 0.3)
    assert np.allclose(np.diag(m), 0.7)
    assert np.allclose(m[~np.eye(4, dtype=bool)], 0.1)
    assert np.array_equal(identity(3), np.eye(3))


def test_grouped_matrix_keeps_states_in_their_group():
    g = grouped_multi_category(5, [[0, 3], [1, 2, 4]], 0.2)
    assert np.allclose(g.sum(axis=1), 1.0)
    assert g[0, 1] == 0 and g[0, 3] == pytest.approx(0.2) and g[1, 3] == 0
    assert g[1, 2] == pytest.approx(0.1) and g[4, 4] == pytest.approx(0.8)
    block = grouped(4, [[0, 1], [2, 3]], [binary_symmetric(0.1), binary(0.2, 0.3)])
    assert np.allclose(block[2:, 2:], binary(0.2, 0.3)) and np.all(block[:2, 2:] == 0)


def test_kron_is_first_factor_slowest():
    a, b = binary(0.1, 0.2), ternary_symmetric(0.1, 0.05)
    k = kron(a, b)
    # combined state (x1, x2) = 3 * x1 + x2
    assert k[3 * 1 + 2, 3 * 0 + 1] == pytest.approx(a[1, 0] * b[2, 1])


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 0.45), st.floats(0.0, 0.45), st.integers(2, 6))
def test_constructed_matrices_pass_validation(p1, p2, k):
    for m in (binary(p1, p2), multi_category(k, p1), ternary_symmetric(p1 / 2, p2 / 2)):
        validate_matrix(m, "X")


@pytest.mark.parametrize(
    ("matrix", "fragment"),
    [
        ([[0.9, 0.1, 0.0]], "square"),
        ([[0.9, 0.2], [0.1, 0.9]], "row 0 sums to 1.1"),
        ([[1.1, -0.1], [0.0, 1.0]], "negative"),
        ([[0.5, 0.5], [0.5, 0.5]], "not invertible"),
        ([[np.nan, 1.0], [0.0, 1.0]], "non-finite"),
        ("abc", "not a numeric matrix"),
    ],
)
def test_validation_names_the_variable_and_the_fault(matrix, fragment):
    with pytest.raises(RandomizationError) as err:
        validate_matrix(matrix, "smoker")
    message = str(err.value)
    assert "smoker" in message and fragment in message and "\n" not in message
    assert isinstance(err.value, UserError) and isinstance(err.value, ValueError)


def test_binary_symmetric_half_is_rejected_as_singular():
    with pytest.raises(RandomizationError, match="not invertible"):
        Block(("A",), (2,), binary_symmetric(0.5))


def test_parameter_ranges_are_checked():
    with pytest.raises(RandomizationError, match="p1"):
        binary(1.2, 0.1)
    with pytest.raises(RandomizationError, match="p1 \\+ p2"):
        ternary_symmetric(0.6, 0.6)
    with pytest.raises(RandomizationError, match="partition"):
        grouped(3, [[0, 1]], [identity(2)])


def test_block_size_must_match_the_variables():
    with pytest.raises(RandomizationError, match="A\\+B.*6x6"):
        Block(("A", "B"), (2, 3), binary_symmetric(0.2))


def test_scheme_rejects_double_membership_and_unknown_variables():
    cards = {"A": 2, "B": 2}
    with pytest.raises(RandomizationError, match="two randomization blocks"):
        RandomizationScheme(
            cards,
            [
                Block(("A",), (2,), binary_symmetric(0.1)),
                Block(("A", "B"), (2, 2), multi_category(4, 0.2)),
            ],
        )
    with pytest.raises(RandomizationError, match="unknown variable 'Z'"):
        RandomizationScheme.from_spec(cards, {"Z": {"kind": "identity"}})
    with pytest.raises(
        RandomizationError,
        match="randomization spec for A: binary_symmetric needs a variable with 2 states",
    ):
        RandomizationScheme.from_spec({"A": 3}, {"A": {"kind": "binary_symmetric", "p": 0.1}})


def test_spec_roundtrip_through_json_revalidates():
    cards = {"A": 2, "B": 3, "C": 2, "D": 4}
    spec = {
        "A": {"kind": "binary", "p1": 0.1, "p2": 0.25},
        "B+C": {"kind": "multi_category", "p": 0.3},
        "D": {"kind": "grouped", "groups": [[0, 1], [2, 3]], "p": 0.2},
    }
    scheme = RandomizationScheme.from_spec(cards, spec)
    assert scheme.randomized == ("A", "B", "C", "D")
    assert scheme.block_of("B") is scheme.block_of("C")
    again = RandomizationScheme.from_dict(json.loads(json.dumps(scheme.to_dict())))
    for b1, b2 in zip(scheme.blocks, again.blocks, strict=True):
        assert b1.variables == b2.variables and np.array_equal(b1.matrix, b2.matrix)
    tampered = scheme.to_dict()
    tampered["blocks"][0]["matrix"] = [[0.9, 0.2], [0.25, 0.75]]
    with pytest.raises(RandomizationError, match="for A: rows must sum to 1"):
        RandomizationScheme.from_dict(tampered)
    with pytest.raises(RandomizationError, match="jointly"):
        scheme.matrix_for("B")
    assert np.array_equal(RandomizationScheme(cards).matrix_for("D"), np.eye(4))
    part = scheme.restricted(["A", "D"])
    assert part.names == ("A", "D") and part.randomized == ("A", "D")
    with pytest.raises(RandomizationError, match="only partly"):
        scheme.restricted(["A", "B"])


def test_random_source_is_reproducible_per_seed_and_uniform():
    a = RandomSource.from_seed(7).uniform(50_000)
    b = RandomSource.from_seed(7).uniform(50_000)
    c = RandomSource.from_seed(8).uniform(50_000)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 1
    hist = np.histogram(a, bins=10, range=(0, 1))[0]
    expected = len(a) / 10
    chi2 = float(np.sum((hist - expected) ** 2 / expected))
    assert chi2 < 27.9  # chi-square, 9 dof, p = 0.001
    assert not np.array_equal(RandomSource().uniform(4), RandomSource().uniform(4))


def test_sampling_never_draws_an_impossible_transition():
    matrix = grouped_multi_category(4, [[0, 1], [2, 3]], 0.4)
    states = np.repeat(np.arange(4), 5000)
    drawn = sample_rows(matrix, states, RandomSource.from_seed("zeros").uniform(len(states)))
    for s in range(4):
        freq = np.bincount(drawn[states == s], minlength=4) / 5000
        assert np.all(freq[matrix[s] == 0] == 0)
        assert np.allclose(freq, matrix[s], atol=0.03)


def test_randomize_joint_block_follows_the_combined_matrix():
    cards = {"A": 2, "B": 2, "C": 3}
    joint = kron(binary(0.1, 0.3), binary_symmetric(0.2))
    scheme = RandomizationScheme(cards, [Block(("B", "A"), (2, 2), joint)])
    n = 40_000
    codes = np.column_stack([np.zeros(n, int), np.ones(n, int), np.full(n, 2)])
    out = scheme.randomize(codes, ["A", "B", "C"], RandomSource.from_seed(3))
    assert np.all(out[:, 2] == 2)  # C is not randomized
    combined = out[:, 1] * 2 + out[:, 0]  # (B, A), B slowest
    freq = np.bincount(combined, minlength=4) / n
    assert np.allclose(freq, joint[1 * 2 + 0], atol=0.01)
    with pytest.raises(RandomizationError, match="outside"):
        scheme.randomize(codes + 1, ["A", "B", "C"], RandomSource.from_seed(3))


def test_uniform_scheme_covers_only_sensitive_variables():
    scheme = RandomizationScheme.uniform({"A": 2, "B": 3, "C": 2}, 0.2, sensitive=["A", "B"])
    assert scheme.randomized == ("A", "B")
    assert np.allclose(scheme.matrix_for("A"), binary_symmetric(0.2))
    with pytest.raises(RandomizationError, match="variable 'A'"):
        RandomizationScheme.uniform({"A": 2}, 1.5)


def test_policy_measures_change_against_the_most_likely_release():
    """A relabelling is no randomization: binary p = 0.95 (almost always flipped) is as weak
    as p = 0.05, Warner theta = 0 as theta = 1; M-category p <= (K-1)/K is its p; a joint
    block's variable is measured on its own component."""
    from ppbn.jobs.policy import change_probability
    from ppbn.randomized.perturb.response import scheme_for

    cards = {"a": 2, "b": 3, "c": 2}
    assert change_probability(scheme_for(cards, ["a"], p=0.95), "a") == pytest.approx(0.05)
    assert change_probability(scheme_for(cards, ["a"], p=0.3), "a") == pytest.approx(0.3)
    assert change_probability(scheme_for(cards, ["b"], p=0.6), "b") == pytest.approx(0.6)
    assert change_probability(scheme_for(cards, ["a"], theta=0.0), "a") == 0.0
    assert change_probability(scheme_for(cards, ["a"], theta=0.2), "a") == pytest.approx(0.2)
    grouped = scheme_for(cards, [], theta=0.7, groups=[("a", "c")])
    assert change_probability(grouped, "c") == pytest.approx(0.3)
    assert change_probability(scheme_for(cards, ["a"], p=0.3), "b") == 0.0
