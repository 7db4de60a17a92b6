"""``ppbn bench gc``: throughput of the garbling engine.

``bench gc`` garbles and evaluates K instances of a Bristol Fashion circuit in one thread
(one core), as one batch, and reports AND gates per second for each side (best of
``--repeats`` timed runs after a warm-up; the garbler reuses its table buffer as a
garbler streaming batch after batch would), the same for a single instance, bytes of
garbled table per AND gate, and a full two-party Yao run of the same batch over the
in-memory Channel (both parties in threads, OT included) with its bytes per AND gate.
"""

from __future__ import annotations

import argparse
import time

from ppbn.commands.options import load_bristol, positive_int
from ppbn.commands.tables import kernels_text, report_measures
from ppbn.errors import UserError


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    gc = bench.add_parser(
        "gc",
        help="AND gates per second garbled and evaluated (half-gates, batched)",
        description="Garble and evaluate --instances copies of a Bristol Fashion circuit as "
        "one batch on one core; report AND gates per second for garbling and evaluation, the "
        "single-instance figures, bytes per AND gate, and a two-party run over the memory Channel.",
    )
    gc.add_argument("--bristol", required=True, metavar="FILE")
    gc.add_argument("--instances", type=positive_int, default=1000)
    gc.add_argument(
        "--repeats",
        type=positive_int,
        default=3,
        help="timed runs; the best is reported (default 3)",
    )
    gc.add_argument("--format", choices=("table", "json"), default="table")
    gc.set_defaults(func=_bench_gc)


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _garble_rates(circuit, k: int, repeats: int) -> tuple[float, float, int]:
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
    tables, out_zero = garble(
        sched, zero, delta, 0, garbler_hash
    )  # warm-up, allocates the table buffer
    out = evaluate_garbled(sched, active, tables, 0, evaluator_hash)
    if not (permute_bits(out) ^ permute_bits(out_zero) == evaluate_bits(circuit, bits)).all():
        raise RuntimeError("garbled evaluation disagrees with the plaintext evaluator")
    garble_s = _best(
        lambda: garble(sched, zero, delta, 0, garbler_hash, tables_out=tables), repeats
    )
    eval_s = _best(lambda: evaluate_garbled(sched, active, tables, 0, evaluator_hash), repeats)
    ands = sched.n_and * k
    return ands / garble_s, ands / eval_s, tables.nbytes


def _two_party(circuit, k: int) -> tuple[float, int]:
    import numpy as np

    from ppbn.protocols.channel import memory_channel_pair, run_two_party
    from ppbn.protocols.yao import YaoParty

    rng = np.random.default_rng()
    first, rest = circuit.inputs[0], circuit.inputs[1:]

    def values(bundle):
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
        lambda ch: YaoParty(ch).run(
            circuit, garbler=True, inputs=alice_inputs, outputs=modes, instances=k
        ),
        lambda ch: YaoParty(ch).run(
            circuit, garbler=False, inputs=bob_inputs, outputs=modes, instances=k
        ),
        pair=pair,
        timeout_s=600,
    )
    seconds = time.perf_counter() - start
    stats = pair[0].stats
    return seconds, stats.bytes_sent + stats.bytes_received


def _bench_gc(args: argparse.Namespace) -> int:
    from ppbn.circuits.schedule import schedule_of
    from ppbn.kernels.warm import warm_up

    if args.instances < 1 or args.repeats < 1:
        raise UserError("--instances and --repeats must be at least 1")
    circuit = load_bristol(args.bristol)
    sched = schedule_of(circuit)
    if sched.n_and == 0:
        raise UserError(f"{args.bristol}: the circuit has no AND gates to measure")
    k = args.instances
    kernels = warm_up()  # their first load (or compile) is reported, not timed with the runs
    garble_rate, eval_rate, table_bytes = _garble_rates(circuit, k, args.repeats)
    single_garble, single_eval, _ = _garble_rates(circuit, 1, max(5, args.repeats))
    protocol_s, protocol_bytes = _two_party(circuit, k)
    ands = sched.n_and * k
    result = {
        "circuit": args.bristol,
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
        "repeats": args.repeats,
        "kernels": kernels,
    }
    return report_measures(
        result,
        args.format,
        f"garbling {args.bristol}: {sched.n_and:,} AND gates x {k:,} instances (one core)",
        [
            ("garble, AND gates/s", f"{garble_rate:,.0f}"),
            ("evaluate, AND gates/s", f"{eval_rate:,.0f}"),
            ("garble, single instance, AND gates/s", f"{single_garble:,.0f}"),
            ("evaluate, single instance, AND gates/s", f"{single_eval:,.0f}"),
            ("garbled table bytes per AND gate", f"{table_bytes / ands:.1f}"),
            ("two-party run (threads, OT included), s", f"{protocol_s:.2f}"),
            ("two-party run, AND gates/s", f"{ands / protocol_s:,.0f}"),
            ("two-party run, bytes per AND gate", f"{protocol_bytes / ands:.1f}"),
            ("compiled kernels, first load, s", kernels_text(kernels)),
        ],
    )
