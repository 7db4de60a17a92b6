"""Bristol Fashion reading and writing, the plaintext evaluator's known answers (SHA-256
from the project's own generated netlist, tests/support/sha256_bristol.py), the IR's
validation, value conversion and the layered schedule."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sha256_bristol import (
    ABC_BLOCK,
    ABC_DIGEST,
    SHA256_IV,
    padded_blocks,
    sha256_circuit,
)

from ppbn.circuits.bristol import (
    BristolError,
    hex_to_value,
    parse_bristol,
    value_to_hex,
    write_bristol,
)
from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.ir import (
    Bundle,
    Circuit,
    CircuitError,
    Op,
    bits_to_values,
    to_signed,
    to_unsigned,
    values_to_bits,
)
from ppbn.circuits.schedule import schedule_of


def sha256_digests(blocks: list[str], chaining: list[int]) -> list[int]:
    """One compression per instance through the generated circuit."""
    circuit = sha256_circuit()
    inputs = {"in0": [hex_to_value(b) for b in blocks], "in1": chaining}
    return [int(v) for v in evaluate(circuit, inputs)["out0"]]


def test_sha256_plaintext_known_answer_and_round_trip() -> None:
    """FIPS 180-4's SHA-256("abc"): the standard's answer, not the code's, through a
    generated netlist of 24,621 AND gates, then again after write_bristol/parse_bristol."""
    circuit = sha256_circuit()
    assert circuit.and_count == 24621
    inputs = {"in0": [hex_to_value(ABC_BLOCK)], "in1": [hex_to_value(SHA256_IV)]}
    out = evaluate(circuit, inputs)["out0"][0]
    assert value_to_hex(out, 256) == ABC_DIGEST
    again = parse_bristol(write_bristol(circuit))
    assert again.and_count == circuit.and_count
    assert evaluate(again, inputs)["out0"][0] == out


def test_sha256_matches_hashlib_on_random_messages() -> None:
    """One block from the IV is the whole digest of a message under 56 bytes; a two-block
    message also feeds the first compression's output back in as the chaining value."""
    rng = random.Random(1804)
    short = [rng.randbytes(rng.randrange(56)) for _ in range(6)]
    iv = hex_to_value(SHA256_IV)
    digests = sha256_digests([padded_blocks(m)[0] for m in short], [iv] * len(short))
    assert [value_to_hex(d, 256) for d in digests] == [hashlib.sha256(m).hexdigest() for m in short]
    long = [rng.randbytes(rng.randrange(56, 120)) for _ in range(3)]
    blocks = [padded_blocks(m) for m in long]
    assert all(len(b) == 2 for b in blocks)
    middle = sha256_digests([b[0] for b in blocks], [iv] * len(long))
    digests = sha256_digests([b[1] for b in blocks], middle)
    assert [value_to_hex(d, 256) for d in digests] == [hashlib.sha256(m).hexdigest() for m in long]


def test_eq_eqw_mand_are_lowered() -> None:
    text = "\n".join(
        [
            "5 9",
            "2 2 2",
            "1 4",
            "4 2 0 1 2 3 4 5 MAND",  # w4 = a0 & b0, w5 = a1 & b1
            "1 1 1 6 EQ",  # w6 = 1
            "1 1 4 7 EQW",  # w7 = w4
            "2 1 5 6 8 XOR",  # w8 = ~w5
            "1 1 0 5 EQ",  # rejected below: w5 driven twice
        ]
    )
    with pytest.raises(BristolError, match="driven"):
        parse_bristol(text)
    good = text.rsplit("\n", 1)[0].replace("5 9", "4 9", 1)
    circuit = parse_bristol(good)
    # outputs are the last 4 wires: 5, 6, 7, 8
    for a in range(4):
        for b in range(4):
            out = int(evaluate(circuit, {"in0": [a], "in1": [b]})["out0"][0])
            w5 = (a >> 1) & (b >> 1)
            expected = w5 | (1 << 1) | ((a & b & 1) << 2) | ((1 - w5) << 3)
            assert out == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 3\n2 1\n1 1\n2 1 0 1 2 XOR", "count does not match"),
        ("2 3\n1 2\n1 1\n2 1 0 1 2 XOR", "2 gates"),
        ("1 3\n1 2\n1 1\n2 1 0 1 2 NAND", "unsupported gate"),
        ("1 3\n1 2\n1 1\n2 1 0 x 2 XOR", "line 4"),
        ("1 3\n1 2\n1 1\n2 1 0 2 2 XOR", "not defined before"),
    ],
)
def test_malformed_files_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(BristolError, match=message):
        parse_bristol(text)


def test_writer_copies_outputs_that_are_inputs_or_repeated() -> None:
    circuit = Circuit(
        3,
        [Op.AND],
        [0],
        [1],
        [2],
        [Bundle("a", (0,)), Bundle("b", (1,))],
        [Bundle("o", (2, 0, 2))],
    )
    again = parse_bristol(write_bristol(circuit))
    for a in (0, 1):
        for b in (0, 1):
            assert (
                evaluate(again, {"in0": [a], "in1": [b]})["out0"][0]
                == evaluate(circuit, {"a": [a], "b": [b]})["o"][0]
            )


def test_ir_rejects_bad_structure() -> None:
    with pytest.raises(CircuitError, match="defined before"):
        Circuit(3, [Op.XOR], [0], [2], [2], [Bundle("a", (0, 1))], [Bundle("o", (2,))])
    with pytest.raises(CircuitError, match="duplicate"):
        Circuit(
            3, [Op.XOR], [0], [1], [2], [Bundle("a", (0,)), Bundle("a", (1,))], [Bundle("o", (2,))]
        )
    with pytest.raises(CircuitError, match="undefined"):
        Circuit(4, [Op.XOR], [0], [1], [2], [Bundle("a", (0, 1))], [Bundle("o", (3,))])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 200), st.lists(st.integers(min_value=0), min_size=1, max_size=20))
def test_value_bit_conversion_round_trips(width: int, raw: list[int]) -> None:
    values = [v % (1 << width) for v in raw]
    bits = values_to_bits(values, width)
    assert bits.shape == (width, len(values))
    back = bits_to_values(bits, width)
    assert [int(v) for v in back] == values
    assert back.dtype == (np.uint64 if width <= 64 else object)
    signed = [v - (1 << (width - 1)) for v in values]
    assert to_signed(to_unsigned(signed, width), width) == [
        ((s + (1 << (width - 1))) % (1 << width)) - (1 << (width - 1)) for s in signed
    ]


def test_values_out_of_range_are_rejected() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        values_to_bits([4], 2)
    with pytest.raises(ValueError, match="does not fit"):
        values_to_bits([-1], 8)


def test_schedule_layers_by_and_depth_and_reuses_slots() -> None:
    circuit = sha256_circuit()
    sched = schedule_of(circuit)
    and_steps = [s for s in sched.steps if s.is_and]
    assert sum(len(s.a) for s in and_steps) == sched.n_and == circuit.and_count
    assert len(and_steps) == sched.and_depth
    assert sched.n_slots < circuit.n_wires // 10  # slots are recycled after a wire's last use
    firsts = [s.first_and for s in and_steps]
    assert firsts == sorted(firsts) and firsts[0] == 0
    assert hex_to_value("0x0f") == 15
