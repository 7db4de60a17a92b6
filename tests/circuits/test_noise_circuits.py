"""The noise circuits draw exactly ``GeometricSpec.draw_bits`` from the XOR of both parties'
uniforms; the noisy count is x + G1 - G2 and the noisy argmax the first index of the largest
s_i + G_i, exactly in plaintext and garbled; their output laws match the exact discrete
Laplace and report-noisy-max probabilities (chi-square), and the same tests reject a wrong
scale, an altered threshold or permuted scores."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from ppbn.circuits import builders as bl
from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.ir import to_signed
from ppbn.circuits.noise import (
    draw_width,
    geometric_draw,
    noise_and_counts,
    noisy_argmax_circuit,
    noisy_count_circuit,
    noisy_width,
    uniform_words,
)
from ppbn.circuits.schedule import schedule_of
from ppbn.dp.noise import GeometricSpec, discrete_laplace_pmf, geometric_spec
from ppbn.protocols.channel import run_two_party
from ppbn.protocols.yao import YaoParty

SPECS = [geometric_spec(0.5), geometric_spec(3.0), geometric_spec(40.0, precision=16)]


def _objects(values: list[int]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _words(rng: np.random.Generator, count: int, bits: int) -> np.ndarray:
    """``count`` uniform ``bits``-bit integers from ``rng`` (deterministic)."""
    nbytes = -(-bits // 8)
    raw = rng.bytes(count * nbytes)
    mask = (1 << bits) - 1
    return _objects(
        [int.from_bytes(raw[i * nbytes : (i + 1) * nbytes], "little") & mask for i in range(count)]
    )


def _pair(
    rng: np.random.Generator, count: int, spec: GeometricSpec, edges: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Both parties' uniform words for ``count`` draws. With ``edges``, the XOR of the two
    has every U_k equal to 0 or 2^precision - 1 in even instances: all 0 (G = 2^bits - 1
    where every T_k > 0) when i % 4 == 0, else a random pattern (each bit of G at will)."""
    n = draw_width(spec)
    ua, ub = _words(rng, count, n), _words(rng, count, n)
    if edges:
        full = (1 << spec.precision) - 1
        for i in range(0, count, 2):
            pattern = 0 if i % 4 == 0 else int(rng.integers(0, 1 << min(spec.bits, 62)))
            target = sum(
                ((pattern >> k) & 1) * full << (k * spec.precision) for k in range(spec.bits)
            )
            ub[i] = int(ua[i]) ^ target
    return ua, ub


def _split(rng: np.random.Generator, values, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Additive shares mod 2^width of the (signed) values."""
    a = _words(rng, len(values), width)
    b = _objects([(int(v) - int(s)) % (1 << width) for v, s in zip(values, a, strict=True)])
    return a, b


def _draw(spec: GeometricSpec, ua: np.ndarray, ub: np.ndarray) -> np.ndarray:
    """The plaintext model: spec.draw_bits of the uniforms U_k = ua_k ^ ub_k."""
    p, mask = spec.precision, (1 << spec.precision) - 1
    uniforms = np.empty((len(ua), spec.bits), dtype=object)
    for i, (a, b) in enumerate(zip(ua, ub, strict=True)):
        w = int(a) ^ int(b)
        uniforms[i] = [(w >> (k * p)) & mask for k in range(spec.bits)]
    return np.array([int(g) for g in spec.draw_bits(uniforms)], dtype=np.int64)


def _signed(values, width: int) -> np.ndarray:
    """Two's complement ``width``-bit values as signed integers."""
    return np.array(to_signed(values, width))


def _count_inputs(
    rng: np.random.Generator, xs, count_bits: int, spec: GeometricSpec, edges: bool = False
) -> dict[str, np.ndarray]:
    na, nb = _split(rng, xs, count_bits)
    inputs = {"na": na, "nb": nb}
    for d in (1, 2):
        inputs[f"u{d}_a"], inputs[f"u{d}_b"] = _pair(rng, len(xs), spec, edges)
    return inputs


def _noisy_counts(circuit_spec: GeometricSpec, n: int, seed: int, count_bits: int = 8):
    rng = np.random.default_rng(seed)
    circuit = noisy_count_circuit(count_bits, circuit_spec)
    inputs = _count_inputs(rng, [0] * n, count_bits, circuit_spec)
    out = evaluate(circuit, inputs)["noisy"]
    return _signed(out, noisy_width(count_bits, circuit_spec))


def _chisquare_p(observed: np.ndarray, support: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness of fit: one bin per support value with expected count >= 5, the
    rest (with every value outside the support) pooled into one bin."""
    n = len(observed)
    keep = probs * n >= 5
    counts = np.array([np.count_nonzero(observed == z) for z in support[keep]])
    expected = probs[keep] * n
    rest_p = 1.0 - probs[keep].sum()
    if rest_p * n >= 5:
        counts = np.append(counts, n - counts.sum())
        expected = np.append(expected, rest_p * n)
    else:  # too small to stand alone: merge the rest into the smallest kept bin
        j = int(np.argmin(expected))
        counts[j] += n - counts.sum()
        expected[j] += rest_p * n
    return float(stats.chisquare(counts, expected * n / expected.sum()).pvalue)


# -- exact behaviour -----------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"scale{s.scale}-p{s.precision}")
def test_geometric_draw_equals_the_plaintext_model(spec: GeometricSpec) -> None:
    b = bl.CircuitBuilder()
    n = draw_width(spec)
    b.output("g", geometric_draw(b, b.input("ua", n), b.input("ub", n), spec))
    circuit = b.build()
    # each comparison with a constant costs at most `precision` ANDs
    assert b.and_gates <= spec.bits * spec.precision
    for k, t in enumerate(spec.thresholds):
        one = bl.CircuitBuilder()
        x = one.input("x", spec.precision)
        bl.less_than(one, x, bl.constant(t, spec.precision))
        assert one.and_gates <= spec.precision, k
    ua, ub = _pair(np.random.default_rng(3), 600, spec, edges=True)
    got = evaluate(circuit, {"ua": ua, "ub": ub})["g"]
    np.testing.assert_array_equal(got.astype(np.int64), _draw(spec, ua, ub))


def test_geometric_draw_checks_the_widths() -> None:
    spec = geometric_spec(3.0)
    b = bl.CircuitBuilder()
    with pytest.raises(ValueError, match="bits from each party"):
        geometric_draw(b, b.input("ua", 8), b.input("ub", 8), spec)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"scale{s.scale}-p{s.precision}")
@pytest.mark.parametrize("count_bits", [1, 6, 20])
def test_noisy_count_is_x_plus_g1_minus_g2(spec: GeometricSpec, count_bits: int) -> None:
    rng = np.random.default_rng(count_bits)
    top = (1 << count_bits) - 1
    xs = [0, top, 1 % (top + 1), *rng.integers(0, top + 1, 297).tolist()]
    inputs = _count_inputs(rng, xs, count_bits, spec, edges=True)
    circuit = noisy_count_circuit(count_bits, spec)
    assert [o.name for o in circuit.outputs] == ["noisy"]
    width = noisy_width(count_bits, spec)
    assert circuit.output("noisy").width == width == max(count_bits, spec.bits) + 2
    got = _signed(evaluate(circuit, inputs)["noisy"], width)
    want = (
        np.array(xs)
        + _draw(spec, inputs["u1_a"], inputs["u1_b"])
        - _draw(spec, inputs["u2_a"], inputs["u2_b"])
    )
    np.testing.assert_array_equal(got, want)


def _argmax_inputs(
    rng: np.random.Generator,
    scores: np.ndarray,
    width: int,
    spec: GeometricSpec,
    edges: bool = False,
) -> dict[str, np.ndarray]:
    n, options = scores.shape
    inputs: dict[str, np.ndarray] = {}
    for i in range(options):
        inputs[f"s{i}_a"], inputs[f"s{i}_b"] = _split(rng, scores[:, i], width)
        inputs[f"u{i}_a"], inputs[f"u{i}_b"] = _pair(rng, n, spec, edges)
    return inputs


def _noisy_scores(inputs, scores: np.ndarray, spec: GeometricSpec) -> np.ndarray:
    """s_i + G_i in the clear (exact integers)."""
    noise = np.stack(
        [_draw(spec, inputs[f"u{i}_a"], inputs[f"u{i}_b"]) for i in range(scores.shape[1])], 1
    )
    return scores.astype(np.int64) + noise


def _argmax_model(inputs, scores: np.ndarray, spec: GeometricSpec) -> np.ndarray:
    """The first index of the largest noisy score (np.argmax returns the first)."""
    return np.argmax(_noisy_scores(inputs, scores, spec), axis=1)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"scale{s.scale}-p{s.precision}")
@pytest.mark.parametrize(("options", "width"), [(1, 4), (2, 3), (3, 8), (5, 4), (8, 20)])
def test_noisy_argmax_is_the_first_index_of_the_largest_noisy_score(
    spec: GeometricSpec, options: int, width: int
) -> None:
    rng = np.random.default_rng(options * 100 + width)
    n, low, high = 300, -(1 << (width - 1)), (1 << (width - 1)) - 1
    scores = rng.integers(low, high + 1, size=(n, options))
    scores[: n // 3] = rng.integers(max(low, -2), min(high, 2) + 1, size=(n // 3, options))  # ties
    scores[n // 3 : n // 3 + 5] = np.array([low, high, low, high, 0])[:, None]  # the extremes
    inputs = _argmax_inputs(rng, scores, width, spec, edges=True)
    circuit = noisy_argmax_circuit(options, width, spec)
    assert [o.name for o in circuit.outputs] == ["index"]
    assert circuit.output("index").width == bl.index_width(options)
    got = evaluate(circuit, inputs)["index"].astype(np.int64)
    want = _argmax_model(inputs, scores, spec)
    np.testing.assert_array_equal(got, want)
    if options > 1:  # ties for the maximum happened (and were resolved to the first index)
        noisy = _noisy_scores(inputs, scores, spec)
        assert ((noisy == noisy.max(axis=1, keepdims=True)).sum(axis=1) > 1).sum() >= 5


def test_padding_options_never_win() -> None:
    """With validity bits, the first ``real`` options compete and the padding never wins,
    whatever its score and noise: the winner is the first argmax among the real ones."""
    spec = geometric_spec(2.0**12)  # large noise next to the scores
    rng = np.random.default_rng(17)
    n, options, width = 400, 8, 10
    scores = rng.integers(-(1 << 9), 1 << 9, size=(n, options))
    real = rng.integers(1, options + 1, size=n)
    inputs = _argmax_inputs(rng, scores, width, spec)
    inputs["valid_a"] = _objects([(1 << int(r)) - 1 for r in real])
    circuit = noisy_argmax_circuit(options, width, spec, with_validity=True)
    got = evaluate(circuit, inputs)["index"].astype(np.int64)
    noisy = _noisy_scores(inputs, scores, spec).astype(float)
    noisy[np.arange(options)[None, :] >= real[:, None]] = -np.inf
    np.testing.assert_array_equal(got, np.argmax(noisy, axis=1))
    assert (got < real).all() and (real < options).sum() > 100


def test_uniform_words_are_fresh_words_of_the_draw_width() -> None:
    spec = geometric_spec(3.0)
    words = uniform_words(200, spec)
    assert words.shape == (200,) and words.dtype == object
    n = draw_width(spec)
    assert all(0 <= int(w) < 1 << n for w in words)
    assert len({int(w) for w in words}) == 200
    assert max(int(w) for w in words).bit_length() > n - 10
    # its bits are balanced (a gross check of the source)
    ones = sum(bin(int(w)).count("1") for w in words)
    assert stats.binomtest(ones, 200 * n).pvalue > 1e-4


def test_and_counts_follow_the_precision() -> None:
    for scale in (100.0, 2.0**60):
        spec = geometric_spec(scale)
        counts = noise_and_counts(spec, options=10, width=70, count_bits=32)
        assert counts["geometric_draw"] <= spec.bits * spec.precision
        wide = max(70, spec.bits) + 2
        # ten draws, share sums, noisy sums, and a tournament of nine comparisons
        assert counts["noisy_argmax(options=10, width=70)"] <= (
            10 * counts["geometric_draw"] + 10 * (70 + wide) + 9 * 2 * wide + 9 * 4
        )
        assert counts["noisy_count(count_bits=32)"] <= (
            2 * counts["geometric_draw"] + 32 + 2 * noisy_width(32, spec)
        )


# -- the laws -------------------------------------------------------------------------------
STAT_N = 20_000


def _count_law_p(circuit_spec: GeometricSpec, scale: float, seed: int = 11) -> float:
    noisy = _noisy_counts(circuit_spec, STAT_N, seed)
    support = np.arange(-60, 61)
    return _chisquare_p(noisy, support, discrete_laplace_pmf(support, scale))


def test_noisy_count_follows_the_discrete_laplace_law() -> None:
    """x = 0: the output is G1 - G2, within ``deviation`` (~2^-60) of discrete Laplace."""
    spec = geometric_spec(3.0)
    assert _count_law_p(spec, 3.0) > 1e-4


def test_noisy_count_law_test_rejects_a_wrong_scale_or_threshold() -> None:
    """The same test fails for a circuit built for 1.25 times the scale, or with the
    threshold of bit 0 lowered by 2^-4: the test has power."""
    assert _count_law_p(geometric_spec(3.75), 3.0) < 1e-6
    spec = geometric_spec(3.0)
    altered = dataclasses.replace(
        spec, thresholds=(spec.thresholds[0] - (1 << 60), *spec.thresholds[1:])
    )
    assert _count_law_p(altered, 3.0) < 1e-6


def _noisy_max_probabilities(scores: list[int], spec: GeometricSpec) -> np.ndarray:
    """P(index = r) = sum_g pmf(g) prod_{s<r} P(v_s < v_r) prod_{s>r} P(v_s <= v_r), with
    v_r = scores[r] + g, from the exact pmf of the drawn G."""
    support = np.arange(1 << spec.bits)
    pmf = spec.pmf(support)
    cdf = np.cumsum(pmf)

    def at_most(t: np.ndarray) -> np.ndarray:  # P(G <= t)
        return np.where(t < 0, 0.0, cdf[np.clip(t, 0, support[-1])])

    out = []
    for r, score_r in enumerate(scores):
        term = pmf.copy()
        for s, score_s in enumerate(scores):
            if s != r:
                gap = score_r + support - score_s  # v_s < v_r  <=>  G_s < gap
                term *= at_most(gap - 1) if s < r else at_most(gap)
        out.append(term.sum())
    return np.array(out)


def _argmax_law_p(fed: list[int], circuit_scale: float, seed: int = 5) -> float:
    """Chi-square p of the circuit's index (scores ``fed``, noise of ``circuit_scale``)
    against the exact law for scores (0, 2, 3) and scale 2."""
    spec = geometric_spec(circuit_scale)
    probs = _noisy_max_probabilities(MODEL_SCORES, geometric_spec(2.0))
    assert math.isclose(probs.sum(), 1.0, rel_tol=1e-12)
    rng = np.random.default_rng(seed)
    scores = np.tile(np.array(fed), (STAT_N, 1))
    inputs = _argmax_inputs(rng, scores, 6, spec)
    got = evaluate(noisy_argmax_circuit(len(fed), 6, spec), inputs)["index"].astype(np.int64)
    return _chisquare_p(got, np.arange(len(fed)), probs)


MODEL_SCORES = [0, 2, 3]


def test_noisy_argmax_follows_the_report_noisy_max_law() -> None:
    assert _argmax_law_p(MODEL_SCORES, 2.0) > 1e-4


def test_noisy_argmax_law_test_rejects_permuted_scores_or_a_wrong_scale() -> None:
    assert _argmax_law_p([3, 2, 0], 2.0) < 1e-6
    assert _argmax_law_p(MODEL_SCORES, 2.5) < 1e-6


# -- garbled ----------------------------------------------------------------------------------
def _garbled(circuit, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Alice garbles with the *_a bundles (and na), Bob evaluates with the rest; both
    learn every output. Returns Bob's result after checking Alice's is the same."""
    mine = {name for name in inputs if name.endswith("_a") or name == "na"}
    outputs = {o.name: "both" for o in circuit.outputs}

    def alice(ch):
        return YaoParty(ch).run(
            circuit, garbler=True, inputs={k: inputs[k] for k in mine}, outputs=outputs
        )

    def bob(ch):
        theirs = {k: v for k, v in inputs.items() if k not in mine}
        return YaoParty(ch).run(circuit, garbler=False, inputs=theirs, outputs=outputs)

    ra, rb = run_two_party(alice, bob, timeout_s=120)
    for name in outputs:
        np.testing.assert_array_equal(ra[name], rb[name])
    return rb


def test_garbled_noisy_count_equals_plaintext() -> None:
    spec = geometric_spec(3.0)
    rng = np.random.default_rng(21)
    circuit = noisy_count_circuit(10, spec)
    xs = rng.integers(0, 1 << 10, 50).tolist()
    inputs = _count_inputs(rng, xs, 10, spec)
    for name in ("u1_a", "u1_b", "u2_a", "u2_b"):
        inputs[name] = uniform_words(50, spec)  # what the parties really feed
    got = _garbled(circuit, inputs)["noisy"]
    np.testing.assert_array_equal(got, evaluate(circuit, inputs)["noisy"])
    assert (
        schedule_of(circuit).n_and
        == noise_and_counts(spec, count_bits=10)["noisy_count(count_bits=10)"]
    )


def test_garbled_noisy_argmax_equals_plaintext() -> None:
    spec = geometric_spec(2.0)
    rng = np.random.default_rng(22)
    scores = rng.integers(-8, 8, size=(50, 4))
    inputs = _argmax_inputs(rng, scores, 16, spec)
    circuit = noisy_argmax_circuit(4, 16, spec)
    got = _garbled(circuit, inputs)["index"]
    np.testing.assert_array_equal(got, evaluate(circuit, inputs)["index"])
    np.testing.assert_array_equal(got.astype(np.int64), _argmax_model(inputs, scores, spec))
