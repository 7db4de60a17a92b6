"""``ppbn.bench.gc`` from Python, on an 8-bit adder built with ``ppbn.circuits``."""

from __future__ import annotations

import pytest

from ppbn.bench.gc import bench_gc
from ppbn.circuits import builders
from ppbn.circuits.ir import Circuit
from ppbn.errors import UserError
from ppbn.protocols.constants import COVERT
from ppbn.protocols.probe_encoding import probe_encoding
from ppbn.protocols.yao_covert import COVERT_COPIES, PROBE_RESISTANCE


def adder(width: int = 8) -> Circuit:
    b = builders.CircuitBuilder()
    x, y = b.input("x", width), b.input("y", width)
    b.output("sum", builders.add(b, x, y))
    return b.build()


def test_bench_gc_garbles_evaluates_and_runs_two_parties() -> None:
    circuit = adder()
    report = bench_gc(circuit, "adder", instances=4, repeats=1)
    assert report["circuit"] == "adder" and report["instances"] == 4
    assert report["and_gates"] == builders.and_counts(8)["add"]
    assert report["bytes_per_and"] == 32.0  # half-gates: two 128-bit rows per AND gate
    assert report["garble_and_per_s"] > 0 and report["two_party_and_per_s"] > 0


def test_bench_gc_runs_the_two_party_run_covert() -> None:
    """Two copies and probe-resistant evaluator inputs: each of the encoded bits of the 8
    evaluator bits costs an OT with two messages of COVERT_COPIES 16-byte labels, well above
    the garbled table bytes of the adder."""
    report = bench_gc(adder(), "adder", instances=2, repeats=1, security=COVERT)
    assert report["security"] == COVERT and report["bytes_per_and"] == 32.0
    ot_bytes = (
        probe_encoding(8, PROBE_RESISTANCE).width * 2 * COVERT_COPIES * 16 / report["and_gates"]
    )
    assert report["two_party_bytes_per_and"] > 32.0 + ot_bytes
    assert report["two_party_and_per_s"] > 0


def test_bench_gc_refuses_a_circuit_without_and_gates() -> None:
    b = builders.CircuitBuilder()
    x, y = b.input("x", 1), b.input("y", 1)
    b.output("xor", [b.xor(x[0], y[0])])
    with pytest.raises(UserError, match="no AND gates"):
        bench_gc(b.build(), "xor", instances=1, repeats=1)
