"""The private-K2 circuits evaluate exactly to the fixed-point model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.schedule import schedule_of
from ppbn.circuits.scoring import (
    PARAM_FRAC,
    decision_circuit,
    division_circuit,
    normalisation_circuit,
    shared_outputs,
)
from ppbn.protocols.fixedpoint import (
    Shift,
    count_bits_for,
    normalisation_spec,
    normalise,
    shift_frac_for,
)

MASK64 = (1 << 64) - 1


def _split64(values, rng):
    a = [int(v) for v in rng.integers(0, 2**63, size=len(values), dtype=np.uint64)]
    return a, [(v - s) & MASK64 for v, s in zip(values, a, strict=True)]


def _normalise_shared(circuit, xs, k_bits, rng):
    """Evaluate the normalisation circuit on random shares of ``xs`` and random pads."""
    xa, xb = _split64(xs, rng)
    low = (1 << k_bits) - 1
    xa, xb = [v & low for v in xa], [v & low for v in xb]
    pads = {
        b.name: rng.integers(0, 1 << b.width, size=len(xs)).astype(np.uint64)
        for b in circuit.inputs
        if b.name.startswith("mu_")
    }
    return evaluate(
        circuit, {"xa": np.array(xa, dtype=np.uint64), "xb": np.array(xb, dtype=np.uint64), **pads}
    ), pads


def _shared(out, spec, i: int) -> dict[str, int]:
    """The shared outputs of instance i (``shared_outputs``: unsigned, bit-shared)."""
    return {name: int(out[name][i]) for name in shared_outputs(spec)}


def _model_shared(nm, spec) -> dict[str, int]:
    """The model's values of the same outputs (``fixedpoint.Normalised`` names them alike)."""
    return {name: getattr(nm, name) for name in shared_outputs(spec)}


@pytest.mark.parametrize("mode", ["yw", "yw0", "bic", "exact"])
@pytest.mark.parametrize("max_count", [200, 20_000])
def test_normalisation_circuit_matches_model(mode, max_count):
    rng = np.random.default_rng(1)
    k_bits = count_bits_for(max_count)
    circuit_spec = normalisation_spec(k_bits, mode)
    circuit = normalisation_circuit(circuit_spec)
    xs = sorted(
        {0, 1, 2, 3, 63, 64, 65, 127, 128, max_count, (1 << k_bits) - 1}
        | set(rng.integers(0, max_count, 200).tolist())
    )
    out, pads = _normalise_shared(circuit, xs, k_bits, rng)
    for i, x in enumerate(xs):
        nm = normalise(x, k_bits, mode)
        assert _shared(out, circuit_spec, i) == _model_shared(nm, circuit_spec), x
        assert int(out["k_masked"][i]) ^ int(pads["mu_k"][i]) == nm.k
        assert int(out["j_masked"][i]) ^ int(pads["mu_j"][i]) == nm.j
        if mode in ("exact", "yw0"):
            assert int(out["c_masked"][i]) ^ int(pads["mu_c"][i]) == nm.c_index


def test_the_circuit_costs_what_the_cost_model_page_states():
    """AND gates at counts below 2^15 (docs/protocols/cost-model.md): yw, yw0 and bic
    shift only the bits of j; exact and bdeu gate the value, not each output."""
    k_bits = 15
    counts = {
        mode: schedule_of(normalisation_circuit(normalisation_spec(k_bits, mode))).n_and
        for mode in ("yw", "yw0", "bic", "exact")
    }
    bdeu = normalisation_spec(k_bits, "bdeu", Shift(2.5, shift_frac_for(k_bits)))
    counts["bdeu"] = schedule_of(normalisation_circuit(bdeu)).n_and
    assert counts == {"yw": 64, "yw0": 64, "bic": 64, "exact": 89, "bdeu": 109}


@pytest.mark.parametrize("a", [10 / 6, 0.3, 10.0, 10 / 256])
@pytest.mark.parametrize("max_count", [200, 20_000])
def test_bdeu_normalisation_circuit_matches_model(a, max_count):
    """bdeu normalises X = (x << F) + round(a 2^F), gated and indexed on x (fixedpoint)."""
    rng = np.random.default_rng(2)
    k_bits = count_bits_for(max_count + 11)
    shift = Shift(a, shift_frac_for(k_bits))
    spec = normalisation_spec(k_bits, "bdeu", shift)
    circuit = normalisation_circuit(spec)
    xs = sorted(
        {0, 1, 63, 64, 65, 127, 128, max_count} | set(rng.integers(0, max_count, 100).tolist())
    )
    out, pads = _normalise_shared(circuit, xs, k_bits, rng)
    for i, x in enumerate(xs):
        nm = normalise(x, k_bits, "bdeu", shift)
        assert _shared(out, spec, i) == _model_shared(nm, spec), x
        assert int(out["k_masked"][i]) ^ int(pads["mu_k"][i]) == nm.k
        assert int(out["j_masked"][i]) ^ int(pads["mu_j"][i]) == nm.j
        assert int(out["c_masked"][i]) ^ int(pads["mu_c"][i]) == nm.c_index


@pytest.mark.parametrize("mode", ["yw", "yw0", "bic", "exact", "bdeu"])
@pytest.mark.parametrize("k_bits", [8, 9])
def test_narrow_outputs_hold_every_count_exactly(mode, k_bits):
    """Every x < 2^K (bdeu: every x whose shifted value fits): f and x2 read as unsigned
    integers of their ``shared_outputs`` width are the model's values, and
    (except bdeu, whose counts reach only some mantissas) every width is needed by some x."""
    shift = Shift(1.3, shift_frac_for(k_bits)) if mode == "bdeu" else None
    spec = normalisation_spec(k_bits, mode, shift)
    circuit = normalisation_circuit(spec)
    xs = list(range(1 << k_bits))
    if shift is not None:
        xs = [x for x in xs if not ((x << shift.frac) + shift.numerator) >> (k_bits + shift.frac)]
    out, pads = _normalise_shared(circuit, xs, k_bits, np.random.default_rng(k_bits))
    needed = dict.fromkeys(shared_outputs(spec), 0)
    for i, x in enumerate(xs):
        nm = normalise(x, k_bits, mode, shift)
        assert _shared(out, spec, i) == _model_shared(nm, spec), x
        assert int(out["k_masked"][i]) ^ int(pads["mu_k"][i]) == nm.k
        assert int(out["j_masked"][i]) ^ int(pads["mu_j"][i]) == nm.j
        for name in shared_outputs(spec):
            needed[name] = max(needed[name], int(out[name][i]).bit_length())
    if mode != "bdeu":
        assert needed == {name: o.width for name, o in shared_outputs(spec).items()}


@given(
    st.lists(st.integers(-(2**80), 2**80), min_size=1, max_size=6),
    st.integers(-(2**80), 2**80),
    st.integers(0, 2**20),
)
@settings(max_examples=40, deadline=None)
def test_decision_circuit_applies_the_tie_rule(scores, current, tolerance):
    rng = np.random.default_rng(len(scores))
    circuit = decision_circuit(len(scores), tolerance, 96)
    inputs = {}
    for name, value in [("cur", current)] + [(f"s{i}", s) for i, s in enumerate(scores)]:
        a = int(rng.integers(0, 2**62)) * 2**66 + int(rng.integers(0, 2**62))
        inputs[f"{name}_a"] = np.array([a % 2**96], dtype=object)
        inputs[f"{name}_b"] = np.array([(value - a) % 2**96], dtype=object)
    out = evaluate(circuit, inputs)
    best = max(scores)
    add = best - current > tolerance
    assert int(out["add"][0]) == int(add)
    # the index is revealed only with an added parent: a stop says nothing about the best
    winner = next(i for i, s in enumerate(scores) if s >= best - tolerance)
    assert int(out["index"][0]) == (winner if add else 0)


def test_division_circuit():
    rng = np.random.default_rng(2)
    k_bits = count_bits_for(5000)
    circuit = division_circuit(k_bits, 3)
    nums = [0, 1, 7, 5000, 0, 3, 2500]
    dens = [0, 1, 9, 5000, 5, 3, 4999]
    low = (1 << k_bits) - 1
    shares = {
        **dict(zip(("na", "nb"), _split64(nums, rng), strict=True)),
        **dict(zip(("da", "db"), _split64(dens, rng), strict=True)),
    }
    out = evaluate(
        circuit, {k: np.array(v, dtype=np.uint64) & np.uint64(low) for k, v in shares.items()}
    )
    for i, (n, d) in enumerate(zip(nums, dens, strict=True)):
        expected = round(2**PARAM_FRAC / 3) if d == 0 else (n << PARAM_FRAC) // d
        assert int(out["theta"][i]) == expected
        assert int(out["unobserved"][i]) == int(d == 0)
    # the division, the two share adders, is_zero and the mux; the common-width division was 3,397 at 13 bits
    assert circuit.and_count == (PARAM_FRAC + 1) * k_bits + 3 * (k_bits - 1) + PARAM_FRAC + 1
