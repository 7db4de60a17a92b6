"""``bench gc``'s engine: throughput of the garbling engine (circuits/garble.py).

It garbles and evaluates K instances of a circuit in one thread (one core), as one batch,
and measures AND gates per second for each side (best of ``repeats`` timed runs after a
warm-up; the garbler reuses its table buffer as a garbler streaming batch after batch
would), the same for a single instance, bytes of garbled table per AND gate, and a full
two-party Yao run of the same batch over the in-memory Channel (both parties in threads,
OT included) with its bytes per AND gate, at the security level asked for (``covert``:
the cut-and-choose of ``protocols/yao_covert.py``, two copies garbled, the evaluator's
input bits encoded to resist 40 probes (``protocols/probe_encoding.py``: n bits become
about n + 9 x 20 encoded bits), one checked OT per encoded bit and instance for both
copies).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ppbn.errors import UserError
from ppbn.protocols.constants import SEMI_HONEST

if TYPE_CHECKING:
    from ppbn.circuits.ir import Bundle, Circuit


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The shortest of ``repeats`` timed calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def garble_rates(circuit: Circuit, k: int, repeats: int) -> tuple[float, float, int]:
    """AND gates per second garbled and evaluated over ``k`` instances, and the bytes of
    their garbled tables; the garbled result is checked against the plaintext evaluator."""
    import numpy as np

    from ppbn.circuits.evaluate import evaluate_bits
    from ppbn.circuits.garble import (
        FixedKeyHash,
        evaluate_garbled,
        garble,
        permute_bits,
        random_delta,
        random_labels,
    )
    from ppbn.circuits.schedule import schedule_of
    from ppbn.protocols.yao import YAO_PROTOCOL

    sched = schedule_of(circuit)
    delta = random_delta()
    zero = random_labels((len(sched.input_slots), k))
    bits = np.random.default_rng().integers(0, 2, size=(len(sched.input_slots), k), dtype=np.uint64)
    active = zero ^ (np.negative(bits)[..., None] & delta)
    # the garbling hash as a Yao run keys it; both sides must use the same (protocol, session)
    garbler_hash = FixedKeyHash(YAO_PROTOCOL, b"bench")
    evaluator_hash = FixedKeyHash(YAO_PROTOCOL, b"bench")
    # warm-up, allocates the table buffer
    tables, out_zero = garble(sched, zero, delta, 0, garbler_hash)
    out = evaluate_garbled(sched, active, tables, 0, evaluator_hash)
    if not (permute_bits(out) ^ permute_bits(out_zero) == evaluate_bits(circuit, bits)).all():
        raise RuntimeError("garbled evaluation disagrees with the plaintext evaluator")
    garble_s = best_seconds(
        lambda: garble(sched, zero, delta, 0, garbler_hash, tables_out=tables), repeats
    )
    eval_s = best_seconds(
        lambda: evaluate_garbled(sched, active, tables, 0, evaluator_hash), repeats
    )
    ands = sched.n_and * k
    return ands / garble_s, ands / eval_s, tables.nbytes


def two_party_run(circuit: Circuit, k: int, security: str = SEMI_HONEST) -> tuple[float, int]:
    """Seconds and bytes of a Yao run of ``k`` instances between two threads at level
    ``security``: the first input bundle is the garbler's, the others the evaluator's,
    random values."""
    import numpy as np

    from ppbn.protocols.channel import memory_channel_pair, run_two_party
    from ppbn.protocols.yao import YaoParty

    rng = np.random.default_rng()
    first, rest = circuit.inputs[0], circuit.inputs[1:]

    def values(bundle: Bundle) -> list[int]:
        return [
            int.from_bytes(rng.bytes((bundle.width + 7) // 8), "little") % (1 << bundle.width)
            for _ in range(k)
        ]

    alice_inputs = {first.name: values(first)}
    bob_inputs = {b.name: values(b) for b in rest}
    modes = {b.name: "evaluator" for b in circuit.outputs}
    pair = memory_channel_pair(timeout_s=600)
    start = time.perf_counter()
    run_two_party(
        lambda ch: YaoParty(ch, security=security).run(
            circuit, garbler=True, inputs=alice_inputs, outputs=modes, instances=k
        ),
        lambda ch: YaoParty(ch, security=security).run(
            circuit, garbler=False, inputs=bob_inputs, outputs=modes, instances=k
        ),
        pair=pair,
        timeout_s=600,
    )
    seconds = time.perf_counter() - start
    stats = pair[0].stats
    return seconds, stats.bytes_sent + stats.bytes_received


def bench_gc(
    circuit: Circuit,
    name: str,
    instances: int = 1000,
    repeats: int = 3,
    security: str = SEMI_HONEST,
) -> dict:
    """Garbling, evaluation and two-party rates of ``circuit`` (``name`` says which, in the
    report and its errors), the two-party run at level ``security``; the report
    ``--format json`` prints."""
    from ppbn.circuits.schedule import schedule_of
    from ppbn.kernels.warm import warm_up

    if instances < 1 or repeats < 1:
        raise UserError("--instances and --repeats must be at least 1")
    sched = schedule_of(circuit)
    if sched.n_and == 0:
        raise UserError(f"{name}: the circuit has no AND gates to measure")
    k = instances
    kernels = warm_up()  # their first load (or compile) is reported, not timed with the runs
    garble_rate, eval_rate, table_bytes = garble_rates(circuit, k, repeats)
    single_garble, single_eval, _ = garble_rates(circuit, 1, max(5, repeats))
    protocol_s, protocol_bytes = two_party_run(circuit, k, security)
    ands = sched.n_and * k
    return {
        "circuit": name,
        "and_gates": sched.n_and,
        "and_depth": sched.and_depth,
        "instances": k,
        "garble_and_per_s": round(garble_rate),
        "eval_and_per_s": round(eval_rate),
        "bytes_per_and": table_bytes / ands,
        "single_instance_garble_and_per_s": round(single_garble),
        "single_instance_eval_and_per_s": round(single_eval),
        "two_party_seconds": round(protocol_s, 3),
        "two_party_and_per_s": round(ands / protocol_s),
        "two_party_bytes_per_and": round(protocol_bytes / ands, 2),
        "security": security,
        "repeats": repeats,
        "kernels": kernels,
    }
