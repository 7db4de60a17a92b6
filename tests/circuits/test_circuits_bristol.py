"""Bristol Fashion reading and writing, the plaintext evaluator's known answers, the IR's
validation, value conversion and the layered schedule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from known_files import BRISTOL

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


def load(path: Path) -> Circuit:
    return parse_bristol(path.read_text(), source=str(path))


needs_bristol = pytest.mark.skipif(
    not BRISTOL.is_dir(),
    reason=f"public Bristol circuits not found at {BRISTOL} (optional test vectors; docs/conventions.md, 'Bristol Fashion bit order')",
)


@needs_bristol
def test_aes128_plaintext_known_answer_and_round_trip() -> None:
    circuit = load(BRISTOL / "aes_128.txt")
    assert circuit.and_count == 6400
    inputs = {
        "in0": [hex_to_value("000102030405060708090a0b0c0d0e0f")],
        "in1": [hex_to_value("00112233445566778899aabbccddeeff")],
    }
    out = evaluate(circuit, inputs)["out0"][0]
    assert value_to_hex(out, 128) == "69c4e0d86a7b0430d8cdb78070b4c55a"
    again = parse_bristol(write_bristol(circuit))
    assert again.and_count == 6400
    assert evaluate(again, inputs)["out0"][0] == out


@needs_bristol
def test_sha256_plaintext_known_answer() -> None:
    circuit = load(BRISTOL / "sha256.txt")
    assert circuit.and_count == 22573
    block = "616263" + "80" + "00" * 52 + "0000000000000018"
    iv = "6a09e667bb67ae853c6ef372a54ff53a510e527f9b05688c1f83d9ab5be0cd19"
    out = evaluate(circuit, {"in0": [hex_to_value(block)], "in1": [hex_to_value(iv)]})["out0"][0]
    assert (
        value_to_hex(out, 256) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


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


@needs_bristol
def test_schedule_layers_by_and_depth_and_reuses_slots() -> None:
    circuit = load(BRISTOL / "aes_128.txt")
    sched = schedule_of(circuit)
    and_steps = [s for s in sched.steps if s.is_and]
    assert sum(len(s.a) for s in and_steps) == sched.n_and == 6400
    assert len(and_steps) == sched.and_depth
    assert sched.n_slots < circuit.n_wires // 10  # slots are recycled after a wire's last use
    firsts = [s.first_and for s in and_steps]
    assert firsts == sorted(firsts) and firsts[0] == 0
    assert hex_to_value("0x0f") == 15
