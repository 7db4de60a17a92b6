"""Read and write circuits in the Bristol Fashion format (SCALE-MAMBA, MP-SPDZ, EMP-toolkit).

Format (docs/conventions.md, "Bristol Fashion bit order"): ``#gates #wires``; the number of inputs and
their widths; the number of outputs and their widths; one gate per line
``nin nout in... out... OP``. Input wires are numbered first, output wires last. Within a
bundle, wire k carries bit k of the value (least significant bit first), which reproduces
the published known answers.

Reading lowers EQ (constant assignment), EQW (wire copy) and MAND (several ANDs) to the
XOR/AND/INV gates of ``ppbn.circuits.ir``; the constant zero is XOR(w, w) of input wire w.
Bundles read from a file are named ``in0, in1, ...`` and ``out0, out1, ...``. This module
works on text only (``ppbn.circuits`` does no I/O); callers read the file.
"""

from __future__ import annotations

from ppbn.circuits.ir import Bundle, Circuit, CircuitError, Op
from ppbn.errors import UserError


class BristolError(CircuitError):
    """The text is not a valid Bristol Fashion circuit; the message names the line."""


def parse_bristol(text: str, source: str = "<text>") -> Circuit:
    lines = [ln.split() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    if len(lines) < 3:
        raise BristolError(f"{source}: a Bristol Fashion file needs at least three header lines")

    def ints(row: list[str], lineno: int) -> list[int]:
        try:
            return [int(x) for x in row]
        except ValueError as exc:
            raise BristolError(f"{source}: header line {lineno}: expected integers") from exc

    n_gates, n_wires = ints(lines[0][:2], 1)
    in_spec = ints(lines[1], 2)
    out_spec = ints(lines[2], 3)
    if in_spec[0] != len(in_spec) - 1 or out_spec[0] != len(out_spec) - 1:
        raise BristolError(f"{source}: input/output count does not match the listed widths")
    in_widths, out_widths = in_spec[1:], out_spec[1:]
    if sum(in_widths) + sum(out_widths) > n_wires:
        raise BristolError(f"{source}: more input and output wires than wires")
    if len(lines) - 3 != n_gates:
        raise BristolError(f"{source}: header says {n_gates} gates, file has {len(lines) - 3}")

    ops: list[int] = []
    in0: list[int] = []
    in1: list[int] = []
    out: list[int] = []
    extra = n_wires  # fresh wires for lowering EQ/EQW
    zero_wire = -1

    def zero() -> int:
        nonlocal extra, zero_wire
        if zero_wire < 0:
            if not in_widths or sum(in_widths) == 0:
                raise BristolError(f"{source}: EQ gate in a circuit without inputs")
            zero_wire = extra
            extra += 1
            ops.append(Op.XOR)
            in0.append(0)
            in1.append(0)
            out.append(zero_wire)
        return zero_wire

    for lineno, row in enumerate(lines[3:], start=4):
        op = row[-1]
        try:
            nin, nout = int(row[0]), int(row[1])
            wires = [int(x) for x in row[2:-1]]
        except (ValueError, IndexError) as exc:
            raise BristolError(f"{source}: line {lineno}: malformed gate") from exc
        if len(wires) != nin + nout:
            raise BristolError(f"{source}: line {lineno}: expected {nin + nout} wire numbers")
        if op in ("XOR", "AND") and nin == 2 and nout == 1:
            ops.append(Op.XOR if op == "XOR" else Op.AND)
            in0.append(wires[0])
            in1.append(wires[1])
            out.append(wires[2])
        elif op == "INV" and nin == 1 and nout == 1:
            ops.append(Op.INV)
            in0.append(wires[0])
            in1.append(-1)
            out.append(wires[1])
        elif op == "EQ" and nin == 1 and nout == 1:
            if wires[0] not in (0, 1):
                raise BristolError(f"{source}: line {lineno}: EQ constant must be 0 or 1")
            z = zero()
            ops.append(Op.XOR if wires[0] == 0 else Op.INV)
            in0.append(z)
            in1.append(z if wires[0] == 0 else -1)
            out.append(wires[1])
        elif op == "EQW" and nin == 1 and nout == 1:
            ops.append(Op.XOR)
            in0.append(wires[0])
            in1.append(zero())
            out.append(wires[1])
        elif op == "MAND" and nin == 2 * nout:
            for k in range(nout):
                ops.append(Op.AND)
                in0.append(wires[k])
                in1.append(wires[nout + k])
                out.append(wires[nin + k])
        else:
            raise BristolError(
                f"{source}: line {lineno}: unsupported gate {op!r} with {nin} in, {nout} out"
            )

    inputs, w = [], 0
    for i, width in enumerate(in_widths):
        inputs.append(Bundle(f"in{i}", tuple(range(w, w + width))))
        w += width
    outputs, w = [], n_wires - sum(out_widths)
    for i, width in enumerate(out_widths):
        outputs.append(Bundle(f"out{i}", tuple(range(w, w + width))))
        w += width
    try:
        return Circuit(extra, ops, in0, in1, out, inputs, outputs)
    except CircuitError as exc:
        raise BristolError(f"{source}: {exc}") from exc


def write_bristol(circuit: Circuit) -> str:
    """Bristol Fashion text of ``circuit``: inputs renumbered first, outputs last.

    An output bit that is not the sole output of its own gate (an input wire, or a wire
    listed twice) is copied with an EQW gate, which the format provides for this purpose.
    """
    n_in = sum(b.width for b in circuit.inputs)
    out_wires = [w for b in circuit.outputs for w in b.wires]
    n_out = len(out_wires)
    gate_of = {int(w): g for g, w in enumerate(circuit.out.tolist())}
    rename: dict[int, int] = {}
    for i, w in enumerate(w for b in circuit.inputs for w in b.wires):
        rename[w] = i
    # Each output position either takes over its gate's output wire or needs a copy.
    claimed: set[int] = set()
    copies: list[tuple[int, int]] = []  # (source wire, output position)
    for pos, w in enumerate(out_wires):
        if w in gate_of and w not in claimed:
            claimed.add(w)
        else:
            copies.append((w, pos))
    internal = [g for g in range(circuit.n_gates) if int(circuit.out[g]) not in claimed]
    next_wire = n_in
    for g in internal:
        rename[int(circuit.out[g])] = next_wire
        next_wire += 1
    first_out = next_wire
    n_total = first_out + n_out
    for pos, w in enumerate(out_wires):
        if w in claimed and w not in rename:
            rename[w] = first_out + pos

    lines = [f"{circuit.n_gates + len(copies)} {n_total}"]
    lines.append(
        " ".join(str(x) for x in [len(circuit.inputs), *(b.width for b in circuit.inputs)])
    )
    lines.append(
        " ".join(str(x) for x in [len(circuit.outputs), *(b.width for b in circuit.outputs)])
    )
    ops = circuit.ops.tolist()
    a_list = circuit.in0.tolist()
    b_list = circuit.in1.tolist()
    for g in range(circuit.n_gates):
        o = rename[int(circuit.out[g])]
        if ops[g] == Op.INV:
            lines.append(f"1 1 {rename[a_list[g]]} {o} INV")
        else:
            name = "XOR" if ops[g] == Op.XOR else "AND"
            lines.append(f"2 1 {rename[a_list[g]]} {rename[b_list[g]]} {o} {name}")
    for w, pos in copies:
        lines.append(f"1 1 {rename[w]} {first_out + pos} EQW")
    return "\n".join(lines) + "\n"


def hex_to_value(text: str) -> int:
    """A hex input string (optional 0x) as the integer whose bit k feeds wire k of the bundle."""
    cleaned = text.strip().lower().removeprefix("0x")
    try:
        return int(cleaned, 16) if cleaned else 0
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a hex string") from exc


def value_to_hex(value: int, width: int) -> str:
    """Hex string of an output bundle value, zero-padded to ceil(width/4) digits."""
    return format(int(value), f"0{(width + 3) // 4}x")


def parse_inputs(circuit: Circuit, texts: list[str]) -> dict[str, list[int]]:
    """One hex ``--input`` per input bundle, in order, each fitting its width: the values
    (one instance) by bundle name; one UserError naming the input otherwise."""
    if len(texts) != len(circuit.inputs):
        widths = ", ".join(str(b.width) for b in circuit.inputs)
        raise UserError(
            f"the circuit has {len(circuit.inputs)} inputs (widths {widths}); got {len(texts)} --input"
        )
    values = {}
    for bundle, text in zip(circuit.inputs, texts, strict=True):
        try:
            value = hex_to_value(text)
        except ValueError as exc:
            raise UserError(f"--input {text!r}: not a hex string") from exc
        if value >> bundle.width:
            raise UserError(
                f"--input {text!r} does not fit in the {bundle.width}-bit input {bundle.name}"
            )
        values[bundle.name] = [value]
    return values


def split_inputs(
    circuit: Circuit, values: dict[str, list[int]], garbler_inputs: str
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """The garbler's and the evaluator's inputs: ``garbler_inputs`` is a comma list of the
    input indices the garbler holds (``--garbler-inputs``), the evaluator holds the rest."""
    try:
        garbler = {int(i) for i in garbler_inputs.split(",") if i.strip()}
    except ValueError as exc:
        raise UserError(
            f"--garbler-inputs {garbler_inputs!r}: expected comma-separated indices"
        ) from exc
    if any(i < 0 or i >= len(circuit.inputs) for i in garbler):
        raise UserError(f"--garbler-inputs: indices must lie in 0..{len(circuit.inputs) - 1}")
    names = [b.name for b in circuit.inputs]
    return (
        {n: values[n] for i, n in enumerate(names) if i in garbler},
        {n: values[n] for i, n in enumerate(names) if i not in garbler},
    )


def load_bristol_file(path: str) -> Circuit:
    """Read and parse a Bristol Fashion file; problems become one-line user errors."""
    from pathlib import Path

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return parse_bristol(text, source=path)
    except BristolError as exc:
        raise UserError(str(exc)) from exc
