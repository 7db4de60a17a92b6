"""Boolean circuit representation: wires, XOR/AND/INV gates, named input and output bundles.

A circuit is a list of gates over integer wires. Every bundle (an input or an output) is a
named, ordered tuple of wires, least significant bit first: bit k of a bundle's value sits
on its k-th wire (docs/conventions.md, "Bristol Fashion bit order"). Inputs are
owned by nobody here: which party feeds which bundle is decided when a protocol runs.

``ppbn.circuits.schedule.schedule_of`` compiles a circuit once into the layers that the
plaintext evaluator and the garbling engine both loop over; this module knows nothing of it.

Values cross this API as numpy ``uint64`` arrays (one value per instance) for bundles of at
most 64 bits and as numpy ``object`` arrays of Python ints for wider bundles;
``values_to_bits`` and ``bits_to_values`` convert to and from (width, instances) bit arrays.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property

import numpy as np


class Op(IntEnum):
    """Gate kinds of the IR; Bristol's EQ, EQW and MAND are lowered to these on reading."""

    XOR = 0
    AND = 1
    INV = 2


@dataclass(frozen=True)
class Bundle:
    """A named group of wires carrying one value, least significant bit first."""

    name: str
    wires: tuple[int, ...]

    @property
    def width(self) -> int:
        return len(self.wires)


class CircuitError(ValueError):
    """A malformed circuit: undefined wire, wire driven twice, duplicate bundle name."""


class Circuit:
    """An immutable Boolean circuit with named input and output bundles.

    Gates are stored as four parallel int arrays (op, first input, second input, output);
    an INV gate's second input is -1. Gates must be in topological order.
    """

    def __init__(
        self,
        n_wires: int,
        ops: Sequence[int] | np.ndarray,
        in0: Sequence[int] | np.ndarray,
        in1: Sequence[int] | np.ndarray,
        out: Sequence[int] | np.ndarray,
        inputs: Iterable[Bundle],
        outputs: Iterable[Bundle],
    ) -> None:
        self.n_wires = int(n_wires)
        self.ops = np.asarray(ops, dtype=np.int8)
        self.in0 = np.asarray(in0, dtype=np.int64)
        self.in1 = np.asarray(in1, dtype=np.int64)
        self.out = np.asarray(out, dtype=np.int64)
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        for arr in (self.ops, self.in0, self.in1, self.out):
            arr.setflags(write=False)
        self._validate()

    # -- structure -------------------------------------------------------------------
    def _validate(self) -> None:
        n = len(self.ops)
        if not (len(self.in0) == len(self.in1) == len(self.out) == n):
            raise CircuitError("gate arrays differ in length")
        for kind, bundles in (("input", self.inputs), ("output", self.outputs)):
            names = [b.name for b in bundles]
            if len(set(names)) != len(names):
                raise CircuitError(f"duplicate {kind} bundle name in {names}")
        defined = np.zeros(self.n_wires, dtype=bool)
        for bundle in self.inputs:
            w = np.asarray(bundle.wires, dtype=np.int64)
            if w.size and (w.min() < 0 or w.max() >= self.n_wires):
                raise CircuitError(
                    f"input {bundle.name!r} names a wire outside 0..{self.n_wires - 1}"
                )
            if defined[w].any() or len(set(bundle.wires)) != len(bundle.wires):
                raise CircuitError(f"input wire of {bundle.name!r} is defined twice")
            defined[w] = True
        if n and (self.out.min() < 0 or self.out.max() >= self.n_wires):
            raise CircuitError("a gate output is outside the wire range")
        # Topological order: each gate reads only wires defined before it. A vectorised check:
        # the defining position of every wire (inputs at -1) must precede each reader.
        position = np.full(self.n_wires, n, dtype=np.int64)
        position[defined] = -1
        order = np.arange(n, dtype=np.int64)
        if np.unique(self.out).size != n or defined[self.out].any():
            raise CircuitError("a wire is driven by more than one gate or input")
        position[self.out] = order
        is_inv = self.ops == Op.INV
        for operand in (self.in0, np.where(is_inv, self.in0, self.in1)):
            if n and (operand.min() < 0 or operand.max() >= self.n_wires):
                raise CircuitError("a gate reads a wire outside the wire range")
            if n and (position[operand] >= order).any():
                bad = int(np.argmax(position[operand] >= order))
                raise CircuitError(f"gate {bad} reads a wire that is not defined before it")
        for bundle in self.outputs:
            w = np.asarray(bundle.wires, dtype=np.int64)
            if w.size and (w.min() < 0 or w.max() >= self.n_wires or (position[w] == n).any()):
                raise CircuitError(f"output {bundle.name!r} names an undefined wire")

    @property
    def n_gates(self) -> int:
        return len(self.ops)

    @property
    def and_count(self) -> int:
        return int(np.count_nonzero(self.ops == Op.AND))

    def input(self, name: str) -> Bundle:
        return _find(self.inputs, name, "input")

    def output(self, name: str) -> Bundle:
        return _find(self.outputs, name, "output")

    @cached_property
    def fingerprint(self) -> bytes:
        """SHA-256 over gates and bundles: both parties check they run the same circuit."""
        h = hashlib.sha256()
        h.update(np.int64(self.n_wires).tobytes())
        for arr in (self.ops, self.in0, self.in1, self.out):
            h.update(np.ascontiguousarray(arr).tobytes())
        for kind, bundles in ((b"in", self.inputs), (b"out", self.outputs)):
            for b in bundles:
                h.update(kind + b.name.encode() + b"\0" + np.asarray(b.wires, np.int64).tobytes())
        return h.digest()

    def __repr__(self) -> str:
        ins = ", ".join(f"{b.name}:{b.width}" for b in self.inputs)
        outs = ", ".join(f"{b.name}:{b.width}" for b in self.outputs)
        return f"Circuit({self.n_gates} gates, {self.and_count} AND, in[{ins}], out[{outs}])"


def _find(bundles: tuple[Bundle, ...], name: str, kind: str) -> Bundle:
    for b in bundles:
        if b.name == name:
            return b
    raise KeyError(f"no {kind} bundle named {name!r}; have {[b.name for b in bundles]}")


# -- value <-> bit conversion -----------------------------------------------------------
def as_values(values: Iterable[int] | np.ndarray | int, width: int) -> np.ndarray:
    """Normalise caller values to the API form: uint64 array (width <= 64) or object array.

    Values must lie in [0, 2^width); use ``to_unsigned`` first for negative two's
    complement values.
    """
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "iuO":
            raise ValueError(f"values must be integers, got dtype {values.dtype}")
        if width <= 64 and values.dtype == np.uint64:
            flat = values.ravel()
            if width < 64 and (flat >> np.uint64(width)).any():
                raise ValueError(f"a value does not fit in {width} unsigned bits")
            return flat
        items = [int(v) for v in values.ravel()]
    else:
        items = [int(values)] if isinstance(values, int | np.integer) else [int(v) for v in values]
    if any(v < 0 or v >> width for v in items):
        raise ValueError(f"a value does not fit in {width} unsigned bits")
    if width <= 64:
        return np.array(items, dtype=np.uint64)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def values_to_bits(values: Iterable[int] | np.ndarray, width: int) -> np.ndarray:
    """(width, instances) uint8 array: row k holds bit k of every value."""
    vals = as_values(values, width)
    if width <= 64:
        shifts = np.arange(width, dtype=np.uint64)[:, None]
        return ((vals[None, :] >> shifts) & np.uint64(1)).astype(np.uint8)
    n_words = (width + 63) // 64
    mask = (1 << 64) - 1
    words = np.array(
        [[(int(v) >> (64 * j)) & mask for v in vals] for j in range(n_words)], dtype=np.uint64
    )
    shifts = np.arange(64, dtype=np.uint64)[None, :, None]
    bits = ((words[:, None, :] >> shifts) & np.uint64(1)).astype(np.uint8)
    return bits.reshape(n_words * 64, len(vals))[:width]


def bits_to_values(bits: np.ndarray, width: int | None = None) -> np.ndarray:
    """Inverse of ``values_to_bits``: (width, instances) bits to API values."""
    bits = np.asarray(bits, dtype=np.uint64)
    width = bits.shape[0] if width is None else width
    if width <= 64:
        shifts = np.arange(width, dtype=np.uint64)[:, None]
        return (
            np.bitwise_or.reduce(bits << shifts, axis=0)
            if width
            else np.zeros(bits.shape[1], np.uint64)
        )
    n_words = (width + 63) // 64
    padded = np.zeros((n_words * 64, bits.shape[1]), dtype=np.uint64)
    padded[:width] = bits
    shifts = np.arange(64, dtype=np.uint64)[None, :, None]
    words = np.bitwise_or.reduce(padded.reshape(n_words, 64, -1) << shifts, axis=1)
    out = np.empty(bits.shape[1], dtype=object)
    for i in range(bits.shape[1]):
        out[i] = sum(int(words[j, i]) << (64 * j) for j in range(n_words))
    return out


def to_unsigned(values: Iterable[int], width: int) -> np.ndarray:
    """Two's complement encoding of signed ints in ``width`` bits, as API values."""
    return as_values([int(v) % (1 << width) for v in values], width)


def to_signed(values: Iterable[int] | np.ndarray, width: int) -> list[int]:
    """Read API values of ``width`` bits as two's complement signed Python ints."""
    half = 1 << (width - 1)
    return [int(v) - (1 << width) if int(v) >= half else int(v) for v in values]
