"""The discrete Gaussian count circuit draws exactly ``GaussianSpec.draw`` from the XOR of
both parties' words, in plaintext and garbled, at the cost of its comparisons; its noisy
counts pass a chi-square test against the exact discrete Gaussian, and the same test
rejects a wrong sigma."""

from __future__ import annotations

import numpy as np
import pytest
from gaussian_law import gaussian_chisquare_p

from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.ir import to_signed
from ppbn.circuits.noise import count_draws, draw_width, noisy_count_circuit, noisy_width
from ppbn.circuits.schedule import schedule_of
from ppbn.dp.gaussian import GaussianSpec, gaussian_spec
from ppbn.protocols.channel import run_two_party
from ppbn.protocols.yao import Reveal, YaoParty


def _objects(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = [int(v) for v in values]
    return out


def _words(rng: np.random.Generator, count: int, bits: int) -> np.ndarray:
    raw = rng.bytes(count * (-(-bits // 8)))
    size = -(-bits // 8)
    mask = (1 << bits) - 1
    return _objects(
        [int.from_bytes(raw[i * size : (i + 1) * size], "little") & mask for i in range(count)]
    )


def _inputs(rng: np.random.Generator, xs: list[int], count_bits: int, spec: GaussianSpec):
    """Count shares of ``xs`` and both parties' words; the XOR of the words hits every
    threshold, one below each, zero and the largest word, with either sign."""
    modulus = 1 << count_bits
    na = rng.integers(0, modulus, len(xs))
    nb = (np.array(xs) - na) % modulus
    ua = _words(rng, len(xs), draw_width(spec))
    targets = [*spec.thresholds, *(max(t - 1, 0) for t in spec.thresholds), 0]
    targets.append((1 << spec.precision) - 1)
    u = _words(rng, len(xs), draw_width(spec))
    for i, t in enumerate(targets[: len(xs) // 2]):
        u[i] = t | (int(i % 2) << spec.precision)
    u[-1], u[-2] = targets[-1], targets[-1] | (1 << spec.precision)  # +M and -M
    return {"na": _objects(na), "nb": _objects(nb), "u_a": ua, "u_b": _objects(u ^ ua)}


@pytest.mark.parametrize(("sigma", "count_bits"), [(1.5, 1), (4.0, 8), (25.0, 14)])
def test_the_noisy_count_is_x_plus_the_draw_of_the_xored_words(sigma, count_bits):
    spec = gaussian_spec(sigma, precision=24, tail=2.0**-24)
    assert count_draws(spec) == ("",)
    rng = np.random.default_rng(count_bits)
    xs = rng.integers(0, 1 << count_bits, 4 * spec.support + 40).tolist()
    inputs = _inputs(rng, xs, count_bits, spec)
    circuit = noisy_count_circuit(count_bits, spec)
    width = noisy_width(count_bits, spec)
    got = np.array(to_signed(evaluate(circuit, inputs)["noisy"], width))
    want = np.array(xs) + spec.draw(inputs["u_a"] ^ inputs["u_b"]).astype(np.int64)
    np.testing.assert_array_equal(got, want)
    assert {int(v) for v in spec.draw(inputs["u_a"] ^ inputs["u_b"])} >= {
        spec.support,
        -spec.support,
        0,
    }
    # the comparisons are the cost: at most `precision` ANDs each, and the two adders
    assert schedule_of(circuit).n_and <= spec.support * spec.precision + 3 * width


def test_the_garbled_circuit_computes_the_same_counts():
    spec = gaussian_spec(3.0, precision=32, tail=2.0**-32)
    rng = np.random.default_rng(4)
    xs = rng.integers(0, 256, 50).tolist()
    inputs = _inputs(rng, xs, 8, spec)
    circuit = noisy_count_circuit(8, spec)

    def party(garbler: bool):
        suffix = "a" if garbler else "b"
        mine = {k: v for k, v in inputs.items() if k.endswith(suffix)}

        def run(channel):
            yao = YaoParty(channel)
            return yao.run(circuit, garbler=garbler, inputs=mine, outputs={"noisy": Reveal.BOTH})

        return run

    garbled, evaluated = run_two_party(party(True), party(False))
    want = evaluate(circuit, inputs)["noisy"]
    np.testing.assert_array_equal(garbled["noisy"], want)
    np.testing.assert_array_equal(evaluated["noisy"], want)


def test_the_circuits_noise_is_the_discrete_gaussian_and_a_wrong_sigma_is_rejected():
    spec = gaussian_spec(3.0)
    n = 20000
    rng = np.random.default_rng(11)
    inputs = {
        "na": _objects([0] * n),
        "nb": _objects([0] * n),
        "u_a": _words(rng, n, draw_width(spec)),
        "u_b": _words(rng, n, draw_width(spec)),
    }
    circuit = noisy_count_circuit(4, spec)
    noise = np.array(to_signed(evaluate(circuit, inputs)["noisy"], noisy_width(4, spec)))
    assert gaussian_chisquare_p(noise, 3.0) > 1e-4
    assert gaussian_chisquare_p(noise, 3.4) < 1e-6
