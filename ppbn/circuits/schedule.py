"""Compile a circuit once into layers that evaluation and garbling process vectorised.

Layering: a wire's AND depth is the number of AND gates on its longest path from an input.
All AND gates of depth d form one step (their inputs are all ready once depth d-1 is done);
the XOR gates of depth d follow in sub-steps ordered by their XOR-chain length inside that
depth. Each step is then one numpy pass over all its gates and all instances.

INV gates become XOR with the constant-one slot (slot 0). In
garbling that slot's zero-label is the global offset R and the evaluator holds the all-zero
label, so an inverter costs exactly what a free XOR costs.

Slots: wires are mapped to a compact array of slots, reusing the slot of a wire after its
last reader, so a batch of many instances needs memory for the live wires only. Gates whose
outputs reach no output bundle are dropped.

``schedule_of`` compiles a circuit on first use and keeps the result while the circuit
lives, so the many batches of one circuit share one schedule.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ppbn.circuits.ir import Circuit, Op

ONE_SLOT = 0


@dataclass(frozen=True)
class Step:
    """One vectorised pass: out[i] = a[i] OP b[i] for every gate i of the step."""

    is_and: bool
    a: np.ndarray
    b: np.ndarray
    out: np.ndarray
    first_and: int  # position of this step's first AND gate in the garbled-table order


@dataclass(frozen=True)
class Schedule:
    n_slots: int
    input_slots: np.ndarray  # slot of each input bit, input bundles concatenated in order
    output_slots: np.ndarray  # slot of each output bit, output bundles concatenated in order
    steps: tuple[Step, ...]
    n_and: int
    and_depth: int


_COMPILED: weakref.WeakKeyDictionary[Circuit, Schedule] = weakref.WeakKeyDictionary()


def schedule_of(circuit: Circuit) -> Schedule:
    """The circuit's schedule, compiled once per circuit object (circuits are immutable)."""
    schedule = _COMPILED.get(circuit)
    if schedule is None:
        schedule = _COMPILED.setdefault(circuit, compile_schedule(circuit))
    return schedule


def compile_schedule(circuit: Circuit) -> Schedule:
    """Layer the live gates by AND depth and XOR-chain level, and allocate reusable slots."""
    ops = circuit.ops.tolist()
    in0 = circuit.in0.tolist()
    in1 = circuit.in1.tolist()
    out = circuit.out.tolist()
    n_gates = len(ops)
    n_wires = circuit.n_wires
    input_wires = [w for b in circuit.inputs for w in b.wires]
    output_wires = [w for b in circuit.outputs for w in b.wires]

    # Dead-gate elimination (reverse sweep).
    needed = bytearray(n_wires)
    for w in output_wires:
        needed[w] = 1
    live = bytearray(n_gates)
    for g in range(n_gates - 1, -1, -1):
        if needed[out[g]]:
            live[g] = 1
            needed[in0[g]] = 1
            if ops[g] != Op.INV:
                needed[in1[g]] = 1

    # AND depth and XOR-chain level of every wire; step key of every live gate.
    depth = [0] * n_wires
    chain = [0] * n_wires
    keys: list[tuple[int, int]] = []
    gates: list[int] = []
    andop = int(Op.AND)
    for g in range(n_gates):
        if not live[g]:
            continue
        a = in0[g]
        b = in1[g] if ops[g] != Op.INV else -1
        da = depth[a]
        db = depth[b] if b >= 0 else 0
        d = da if da > db else db
        w = out[g]
        if ops[g] == andop:
            depth[w] = d + 1
            chain[w] = 0
            keys.append((d + 1, 0))
        else:
            ca = chain[a] if da == d else 0
            cb = chain[b] if b >= 0 and db == d else 0
            c = 1 + (ca if ca > cb else cb)
            depth[w] = d
            chain[w] = c
            keys.append((d, c))
        gates.append(g)

    order = sorted(range(len(gates)), key=keys.__getitem__)
    step_of_key: dict[tuple[int, int], int] = {}
    step_gates: list[list[int]] = []
    for i in order:
        key = keys[i]
        if key not in step_of_key:
            step_of_key[key] = len(step_gates)
            step_gates.append([])
        step_gates[step_of_key[key]].append(gates[i])
    n_steps = len(step_gates)

    # Last step reading each wire; outputs live to the end.
    never = -1
    last_use = [never] * n_wires
    for s, members in enumerate(step_gates):
        for g in members:
            last_use[in0[g]] = s
            if ops[g] != Op.INV:
                last_use[in1[g]] = s
    for w in output_wires:
        last_use[w] = n_steps
    dying: list[list[int]] = [[] for _ in range(n_steps + 1)]

    slot = [-1] * n_wires
    next_slot = ONE_SLOT + 1
    free: list[int] = []
    for w in input_wires:
        slot[w] = next_slot
        next_slot += 1
        if last_use[w] == never:
            free.append(slot[w])
        elif last_use[w] < n_steps:
            dying[last_use[w]].append(w)

    steps: list[Step] = []
    and_seen = 0
    for s, members in enumerate(step_gates):
        is_and = ops[members[0]] == andop
        a_slots = [slot[in0[g]] for g in members]
        b_slots = [slot[in1[g]] if ops[g] != Op.INV else ONE_SLOT for g in members]
        out_slots = []
        for g in members:
            if free:
                new = free.pop()
            else:
                new = next_slot
                next_slot += 1
            w = out[g]
            slot[w] = new
            out_slots.append(new)
            lu = last_use[w]
            if lu == never:
                dying[s].append(w)
            elif lu < n_steps:
                dying[lu].append(w)
        steps.append(
            Step(
                is_and=is_and,
                a=np.array(a_slots, dtype=np.intp),
                b=np.array(b_slots, dtype=np.intp),
                out=np.array(out_slots, dtype=np.intp),
                first_and=and_seen,
            )
        )
        if is_and:
            and_seen += len(members)
        free.extend(slot[w] for w in dying[s])

    return Schedule(
        n_slots=next_slot,
        input_slots=np.array([slot[w] for w in input_wires], dtype=np.intp),
        output_slots=np.array([slot[w] for w in output_wires], dtype=np.intp),
        steps=tuple(steps),
        n_and=and_seen,
        and_depth=max((k[0] for k in keys), default=0),
    )
