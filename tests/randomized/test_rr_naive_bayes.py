"""Zhan-Chang-Matwin naive Bayes on randomized-response data: the paper's checks
(theta in {0, 1} is plain naive Bayes, mirror about 0.5, variance theta(1-theta)/(2theta-1)^2)
and the estimator against closed forms and exact enumeration."""

import itertools

import numpy as np
import pytest

from ppbn.randomized.perturb.estimated import RandomizedData
from ppbn.randomized.perturb.naive_bayes import fit_naive_bayes
from ppbn.randomized.perturb.response import scheme_for
from ppbn.randomized.pram.operators import RandomizationError, RandomSource

ATTRS = ["a", "b", "c", "d"]
COLUMNS = [*ATTRS, "y"]
CARDS = dict.fromkeys(COLUMNS, 2)


def _records(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    lift = np.array([0.5, 0.3, 0.1, 0.4])
    x = (rng.random((n, 4)) < 0.25 + lift * y[:, None]).astype(np.int64)
    return np.column_stack([x, y])


def _plain(codes: np.ndarray) -> RandomizedData:
    return RandomizedData.plain(COLUMNS, codes, [2] * 5)


def _randomized(codes, theta, groups=(), seed=0):
    scheme = scheme_for(CARDS, ATTRS, theta=theta, groups=groups)
    return RandomizedData(
        COLUMNS, scheme.randomize(codes, COLUMNS, RandomSource.from_seed(seed)), scheme
    )


def test_plain_model_is_textbook_naive_bayes():
    """Brute force: P(c) and P(a|c) by counting, Laplace smoothed, Bayes rule per record."""
    codes = _records(400, 1)
    model = fit_naive_bayes(_plain(codes), "y", alpha=1.0)
    y = codes[:, -1]
    for record in codes[:20]:
        joint = []
        for c in (0, 1):
            p = (np.sum(y == c) + 1) / (len(y) + 2)
            for j in range(4):
                p *= (np.sum((codes[:, j] == record[j]) & (y == c)) + 1) / (np.sum(y == c) + 2)
            joint.append(p)
        expected = np.array(joint) / sum(joint)
        got = model.predict_proba(_plain(record[None, :]))[0]
        assert np.allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("theta", [0.0, 1.0])
@pytest.mark.parametrize("groups", [(), (("a", "b", "c", "d"),), (("a", "b"), ("c", "d"))])
def test_theta_zero_or_one_is_plain_naive_bayes_exactly(theta, groups):
    """Zhan Sec. 4.3.1: at theta = 1 the data are the original, at theta = 0 its opposite;
    the learned model is then the plain one bit for bit (identical probabilities)."""
    codes = _records(1000, 2)
    test = _plain(_records(300, 3))
    plain = fit_naive_bayes(_plain(codes), "y")
    data = _randomized(codes, theta, groups)
    if theta == 0.0:
        assert np.array_equal(data.codes[:, :4], 1 - codes[:, :4])
    model = fit_naive_bayes(data, "y")
    assert np.array_equal(model.predict_proba(test), plain.predict_proba(test))
    assert np.array_equal(model.predict(test), plain.predict(test))


def test_estimator_flips_only_the_attribute():
    """docs/conventions.md, "Randomized-response naive Bayes": class not randomized, P(A=a, C=c) = [theta P*(a,c) - (1-theta) P*(1-a,c)] / (2 theta - 1)."""
    codes = _records(2000, 4)
    for theta in (0.2, 0.65, 0.9):
        data = _randomized(codes, theta, seed=int(theta * 100))
        for attr in ATTRS:
            star = data.randomized_counts([attr, "y"]) / data.records
            expected = (theta * star - (1 - theta) * star[::-1]) / (2 * theta - 1)
            got = data.estimate([attr, "y"]) / data.records
            assert np.allclose(got, expected, atol=1e-14)


@pytest.mark.parametrize("groups", [(), (("a", "b", "c", "d"),), (("a", "c"), ("b", "d"))])
def test_mirror_about_one_half(groups):
    """Randomizing with theta and flipping every attribute gives data distributed as
    randomizing with 1 - theta; from the same randomized records the two readings give
    the same estimates, hence the same classifier and the same accuracy."""
    codes = _records(1500, 5)
    test = _plain(_records(500, 6))
    for theta in (0.15, 0.3, 0.45):
        data = _randomized(codes, theta, groups, seed=7)
        flipped = data.codes.copy()
        flipped[:, :4] = 1 - flipped[:, :4]
        mirror_scheme = scheme_for(CARDS, ATTRS, theta=1 - theta, groups=groups)
        mirror = RandomizedData(COLUMNS, flipped, mirror_scheme)
        for attr in ATTRS:
            assert np.allclose(data.estimate([attr, "y"]), mirror.estimate([attr, "y"]), atol=1e-9)
        a, b = fit_naive_bayes(data, "y"), fit_naive_bayes(mirror, "y")
        assert np.allclose(a.predict_proba(test), b.predict_proba(test), atol=1e-12)
        assert np.array_equal(a.predict(test), b.predict(test))


def test_em_estimates_mirror_too_and_are_exact_at_theta_zero():
    """The MLE does not depend on how the randomized records are read, so EM mirrors as
    the moment estimate does; this needs an interior start (from N_tilde / N the cells
    empty in the randomized data stay empty, and at theta < 0.5 the truth is elsewhere)."""
    codes = _records(2000, 13)
    codes[:, 1] |= codes[
        :, 0
    ]  # a = 1 implies b = 1: cells (a, b) = (1, 0) are empty, (0, 1) are not
    group = (("a", "b", "c", "d"),)
    plain = _plain(codes).estimate(COLUMNS)
    assert np.allclose(_randomized(codes, 0.0, group, seed=1).estimate(COLUMNS, "em"), plain)
    for theta in (0.2, 0.35):
        data = _randomized(codes, theta, group, seed=2)
        flipped = data.codes.copy()
        flipped[:, :4] = 1 - flipped[:, :4]
        mirror = RandomizedData(
            COLUMNS, flipped, scheme_for(CARDS, ATTRS, theta=1 - theta, groups=group)
        )
        assert np.allclose(data.estimate(COLUMNS, "em"), mirror.estimate(COLUMNS, "em"), atol=0.01)


def test_mean_accuracy_mirrors_over_independent_randomizations():
    """The statistical form of the mirror (Zhan Fig. 1-2): mean accuracy over 20 fresh
    randomizations at theta and at 1 - theta agree within 4 standard errors."""
    codes = _records(1000, 8)
    test = _plain(_records(2000, 9))
    truth = test.column("y")
    for theta in (0.3, 0.4):
        acc = {}
        for t in (theta, 1 - theta):
            runs = [
                np.mean(
                    fit_naive_bayes(_randomized(codes, t, seed=1000 * t + r), "y").predict(test)
                    == truth
                )
                for r in range(20)
            ]
            acc[t] = (np.mean(runs), np.std(runs, ddof=1) / np.sqrt(20))
        (m1, s1), (m2, s2) = acc[theta], acc[1 - theta]
        assert abs(m1 - m2) <= 4 * np.hypot(s1, s2)


def _variance_formula(class_count: int, n: int, theta: float) -> float:
    """Var P_hat(A = a, C = c) = n_c theta (1 - theta) / (n^2 (2 theta - 1)^2)."""
    return class_count * theta * (1 - theta) / (n**2 * (2 * theta - 1) ** 2)


def _repeated_estimates(codes: np.ndarray, theta: float, reps: int) -> np.ndarray:
    """P_hat(A=1, C=c) for a, b, c over ``reps`` independent randomizations of ``codes``:
    one randomization of ``reps`` stacked copies, cut back into copies."""
    n = codes.shape[0]
    scheme = scheme_for(CARDS, ATTRS, theta=theta)
    stacked = scheme.randomize(
        np.tile(codes, (reps, 1)), COLUMNS, RandomSource.from_seed(f"var-{theta}")
    )
    out = np.empty((reps, 3, 2))
    for r in range(reps):
        data = RandomizedData(COLUMNS, stacked[r * n : (r + 1) * n], scheme)
        joint = data.estimate(["a", "b", "c", "y"]) / n  # its margins are the (A_j, C) estimates
        out[r] = [joint.sum(axis=(1, 2))[1], joint.sum(axis=(0, 2))[1], joint.sum(axis=(0, 1))[1]]
    return out


def test_variance_is_theta_one_minus_theta_over_two_theta_minus_one_squared():
    """Empirical variance of P_hat(A=1, C=c) over 400 randomizations of one data set, for
    3 attributes x 2 classes = 6 cells per theta, against the closed form
    n_c theta (1 - theta) / (n^2 (2 theta - 1)^2). Each cell's sample variance has relative
    sd sqrt(2/399) = 7%: every ratio must be within 0.3 of 1 and their mean within 0.12
    (both about 4 sd); mirrored thetas (0.1-0.4) give the same variances by the mirror."""
    n, reps = 600, 400
    codes = _records(n, 10)
    class_counts = np.bincount(codes[:, -1], minlength=2)
    variances = {}
    for theta in (0.6, 0.7, 0.8, 0.9):
        empirical = _repeated_estimates(codes, theta, reps).var(axis=0, ddof=1)
        formula = np.array([_variance_formula(class_counts[c], n, theta) for c in (0, 1)])
        ratio = empirical / formula[None, :]
        assert np.all(np.abs(ratio - 1) < 0.3), (theta, ratio)
        assert abs(ratio.mean() - 1) < 0.12, (theta, ratio.mean())
        variances[theta] = empirical.mean()
    # it grows as theta nears 0.5, by the formula's factor (6 / 0.140625 = 42.7 from 0.9 to 0.6)
    assert variances[0.6] > variances[0.7] > variances[0.8] > variances[0.9]
    growth = variances[0.6] / variances[0.9]
    assert growth == pytest.approx(
        _variance_formula(1, 1, 0.6) / _variance_formula(1, 1, 0.9), rel=0.25
    )


def test_exact_distribution_over_all_randomizations():
    """Brute force on 3 records: enumerate the 2^3 keep/flip outcomes with their
    probabilities; the estimator's exact mean is the true count and its exact variance is
    n_c theta (1 - theta) / (2 theta - 1)^2, also Theorem 2's covariance at the truth."""
    codes = np.array([[1, 0, 0, 0, 1], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0]])
    theta = 0.75
    scheme = scheme_for(CARDS, ["a"], theta=theta)
    values, weights = [], []
    for flips in itertools.product((0, 1), repeat=3):
        randomized = codes.copy()
        randomized[:, 0] ^= np.array(flips)
        prob = np.prod([1 - theta if f else theta for f in flips])
        values.append(RandomizedData(COLUMNS, randomized, scheme).estimate(["a", "y"]))
        weights.append(prob)
    values, weights = np.array(values), np.array(weights)
    mean = np.tensordot(weights, values, axes=1)
    truth = RandomizedData.plain(COLUMNS, codes, [2] * 5).estimate(["a", "y"])
    assert np.allclose(mean, truth, atol=1e-12)
    variance = np.tensordot(weights, (values - mean) ** 2, axes=1)
    n_c = np.array([1, 2])
    expected = n_c * theta * (1 - theta) / (2 * theta - 1) ** 2
    assert np.allclose(variance, np.vstack([expected, expected]), atol=1e-12)
    theorem2 = RandomizedData(COLUMNS, codes, scheme)
    from ppbn.randomized.pram.estimators import moment_covariance

    cov = moment_covariance(truth, theorem2.operators(["a", "y"]))
    assert np.allclose(np.diag(cov), variance.reshape(-1), atol=1e-12)


def test_theta_half_is_a_one_line_error():
    with pytest.raises(RandomizationError) as err:
        _randomized(_records(50, 11), 0.5)
    assert "theta = 0.5 is not invertible" in str(err.value)
    assert "\n" not in str(err.value)


def test_class_in_a_group_with_attributes_uses_the_same_group_model():
    """Zhan Sec. 3.4: A_j and C in one group are estimated from Eq. 2 with E = A_j and C,
    E-bar their joint opposite; the moment estimate over the 4 cells solves it."""
    codes = _records(3000, 12)
    scheme = scheme_for(CARDS, [], theta=0.8, groups=[("a", "b", "y"), ("c", "d")])
    data = RandomizedData(
        COLUMNS, scheme.randomize(codes, COLUMNS, RandomSource.from_seed(3)), scheme
    )
    star = data.randomized_counts(["a", "y"])
    theta = 0.8
    # P*(E) = theta P(E) + (1-theta) P(E-bar), solved for every E = (a, c)
    expected = (theta * star - (1 - theta) * star[::-1, ::-1]) / (2 * theta - 1)
    assert np.allclose(data.estimate(["a", "y"]), expected)
    truth = _plain(codes).estimate(["a", "y"])
    assert np.abs(data.estimate(["a", "y"]) - truth).max() < 5 * np.sqrt(3000 * 0.16 / 0.36)
