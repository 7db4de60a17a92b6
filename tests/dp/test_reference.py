"""The trusted curator's twin of the DP learn job (ppbn/dp/reference.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppbn.bn.k2 import CountsOracle, k2_search
from ppbn.bn.learn import joined_count_fn, learn_reference
from ppbn.bn.networks import load_network, sample
from ppbn.bn.params import estimate_parameters
from ppbn.dp.noise import geometric_spec
from ppbn.dp.reference import (
    NoisyMaxOracle,
    dp_learn,
    draws,
    fixed_point,
    noisy_counts,
    noisy_max,
)
from ppbn.protocols.fixedpoint import SCORE_FRAC


@pytest.fixture(scope="module")
def asia():
    truth = load_network("asia")
    return truth, sample(truth, 20000, 3)


def undirected(parents) -> set[frozenset[str]]:
    return {frozenset((p, c)) for c, ps in parents.items() for p in ps}


def test_noisy_max_takes_the_first_largest():
    assert noisy_max([5, 3, 4], [0, 2, 1]) == 0  # 5, 5, 5: stop wins the tie
    assert noisy_max([5, 3, 4], [0, 3, 0]) == 1
    assert fixed_point(-1.5, 2) == -6 and fixed_point(0.3, 1) == 1


@pytest.mark.parametrize("mode", ["exact", "bic"])
def test_without_noise_the_choices_are_k2s(asia, mode):
    """Noise of scale 1e-3 draws 0 always: report-noisy-max is then K2's own choice."""
    truth, codes = asia
    codes = codes[:3000]
    count = joined_count_fn(truth.names, truth.states, codes)
    scores = CountsOracle(count, mode, 1.0, n_records=len(codes))
    silent = geometric_spec(1e-3)
    oracle = NoisyMaxOracle(scores, silent, np.random.default_rng(0), SCORE_FRAC)
    ours = k2_search(truth.names, 2, oracle, 0.0).parents
    reference = learn_reference(truth.names, truth.states, codes, 2, mode, tau=0.0)
    assert ours == reference.search.parents
    assert oracle.decisions <= sum(min(2, i) for i in range(len(truth.names)))


def test_without_the_stop_option_every_child_takes_its_parents(asia):
    """A plan without "stop" (``DPPlan.stop_option``): even where K2 would stop (no
    noise, independent candidates), each child takes min(u, position) parents."""
    truth, codes = asia
    codes = codes[:3000]
    count = joined_count_fn(truth.names, truth.states, codes)
    scores = CountsOracle(count, "exact", 1.0, n_records=len(codes))
    silent = geometric_spec(1e-3)
    oracle = NoisyMaxOracle(scores, silent, np.random.default_rng(0), SCORE_FRAC, stop_option=False)
    parents = k2_search(truth.names, 2, oracle, 0.0).parents
    assert [len(parents[v]) for v in truth.names] == [min(2, i) for i in range(len(truth.names))]
    assert oracle.decisions == sum(min(2, i) for i in range(len(truth.names)))


def test_a_large_epsilon_finds_the_reference_edges(asia):
    """At the largest epsilon a plan takes (20), each choice's exponential noise is still
    ~40 nats on asia, above what a spurious parent costs, so the twin adds extra edges and
    rarely learns the non-private structure exactly; but it finds that structure's edges,
    far more of them than at a small epsilon."""
    truth, codes = asia
    reference = undirected(
        learn_reference(truth.names, truth.states, codes, 2, "exact").search.parents
    )

    def recall(epsilon: float) -> float:
        found = []
        for seed in range(5):
            rng = np.random.default_rng(seed)
            net, _ = dp_learn(
                truth.names, truth.states, codes, epsilon, 2, rng=rng, score_frac=SCORE_FRAC
            )
            found.append(len(undirected(net.parents) & reference) / len(reference))
        return float(np.mean(found))

    high, low = recall(20.0), recall(0.05)
    assert high >= 0.8
    assert high > low + 0.3


def ml_difference(truth, codes, net, min_rows: int) -> list[float]:
    """|DP CPT - ML CPT| on the twin's own structure, over rows with >= min_rows records."""
    count = joined_count_fn(truth.names, truth.states, codes)
    exact = estimate_parameters(truth.names, truth.states, net.parents, count)
    out = []
    for v in truth.names:
        rows = count((*net.parents[v], v)).reshape(-1, truth.cardinality(v)).sum(axis=1)
        keep = rows >= min_rows
        out.extend(np.abs(net.cpts[v][keep] - exact.cpts[v][keep]).ravel())
    return out


def test_parameters_close_at_a_large_epsilon_noisy_at_a_small_one(asia):
    truth, codes = asia
    net, plan = dp_learn(
        truth.names,
        truth.states,
        codes,
        20.0,
        2,
        rng=np.random.default_rng(1),
        score_frac=SCORE_FRAC,
    )
    assert plan.count_scale == pytest.approx(2 * 8 / 14.0)
    assert max(ml_difference(truth, codes, net, 500)) < 0.02
    for v in truth.names:
        assert np.allclose(net.cpts[v].sum(axis=1), 1.0) and (net.cpts[v] >= 0).all()
    small = codes[:2000]
    noisy, plan = dp_learn(
        truth.names,
        truth.states,
        small,
        0.01,
        2,
        rng=np.random.default_rng(1),
        score_frac=SCORE_FRAC,
    )
    assert plan.count_scale > 2000  # the noise is of the order of the whole table
    assert np.mean(ml_difference(truth, small, noisy, 0)) > 0.1


def test_an_all_zero_row_is_uniform():
    truth = load_network("cancer")
    codes = sample(truth, 50, 1)
    net, _ = dp_learn(
        truth.names,
        truth.states,
        codes,
        0.01,
        0,
        rng=np.random.default_rng(4),
        score_frac=SCORE_FRAC,
    )
    assert all(not ps for ps in net.parents.values())  # u = 0: no structure decisions
    for v in truth.names:
        for j in net.unobserved.get(v, ()):
            assert np.allclose(net.cpts[v][j], 1.0 / truth.cardinality(v))


def test_a_seeded_rng_gives_the_same_release(asia):
    truth, codes = asia
    codes = codes[:2000]

    def run(seed: int):
        return dp_learn(
            truth.names,
            truth.states,
            codes,
            1.0,
            2,
            "bic",
            rng=np.random.default_rng(seed),
            score_frac=SCORE_FRAC,
        )[0]

    a, b, c = run(5), run(5), run(6)
    assert a.parents == b.parents
    assert all(np.array_equal(a.cpts[v], b.cpts[v]) for v in truth.names)
    assert a.parents != c.parents or any(
        not np.array_equal(a.cpts[v], c.cpts[v]) for v in truth.names
    )


def test_the_order_is_k2s():
    truth = load_network("cancer")
    codes = sample(truth, 500, 2)
    order = tuple(reversed(truth.names))
    net, _ = dp_learn(
        truth.names,
        truth.states,
        codes,
        1.0,
        2,
        order=order,
        rng=np.random.default_rng(0),
        score_frac=SCORE_FRAC,
    )
    position = {v: i for i, v in enumerate(order)}
    assert all(position[p] < position[c] for c, ps in net.parents.items() for p in ps)


def test_refusals():
    truth = load_network("cancer")
    codes = sample(truth, 200, 2)
    with pytest.raises(ValueError, match="epsilon must lie"):
        dp_learn(
            truth.names,
            truth.states,
            codes,
            100.0,
            2,
            rng=np.random.default_rng(0),
            score_frac=SCORE_FRAC,
        )
    with pytest.raises(ValueError, match="no stated sensitivity"):
        dp_learn(
            truth.names,
            truth.states,
            codes,
            1.0,
            2,
            "bdeu",
            rng=np.random.default_rng(0),
            score_frac=SCORE_FRAC,
        )
    holes = codes.copy()
    holes[0, 0] = -1
    with pytest.raises(ValueError, match="complete records"):
        dp_learn(
            truth.names,
            truth.states,
            holes,
            1.0,
            2,
            rng=np.random.default_rng(0),
            score_frac=SCORE_FRAC,
        )


def test_draws_beyond_int64():
    """A small epsilon's decision noise has more than 62 digits: drawn as Python ints."""
    spec = geometric_spec(2.0**60)
    assert spec.bits > 62
    values = draws(spec, np.random.default_rng(0), 3000)
    assert all(isinstance(x, int) and x >= 0 for x in values)
    assert max(values) >= 2**63  # ~ a third of them are
    assert np.mean(np.array(values, dtype=float)) / spec.scale == pytest.approx(1.0, rel=0.1)


def test_count_noise_is_discrete_laplace():
    spec = geometric_spec(4.0)
    table = np.full(20000, 1000, dtype=np.int64)
    noise = noisy_counts(table, spec, np.random.default_rng(0)) - 1000  # never clipped here
    q = math.exp(-1 / 4.0)
    assert abs(noise.mean()) < 0.15
    assert noise.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.1)
