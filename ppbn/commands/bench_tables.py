"""``ppbn bench paillier`` and ``ppbn bench tables``: the cost of the count-table layer.

``bench paillier`` times ppbn's fast encryption (protocols/paillier.py) against phe's
``encrypt`` with the same key in the same run. ``bench tables`` runs the secure
contingency-table protocol (protocols/tables.py) between two party processes joined by
a pipe, on records sampled from a bnlearn network, and reports throughput, traffic,
public-key operations and peak memory per party, next to the figures of the paper's
one-scalar-product-per-alpha method for the same family list (computed, not run).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import time
from typing import TYPE_CHECKING

from ppbn.commands.options import (
    add_executor_options,
    check_executor_flags,
    non_negative_int,
    positive_int,
)
from ppbn.errors import UserError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    paillier = bench.add_parser(
        "paillier",
        help="time ppbn's fast Paillier encryption against phe's, same key, same run",
        description="Encrypt random 64-bit plaintexts with ppbn's fast path (short-exponent "
        "fixed-base randomizers, CRT, as the key owner uses it in the table protocol), with "
        "the public-key-only fast path, with precomputed randomizers, and with phe's encrypt.",
    )
    paillier.add_argument("--key-bits", type=int, default=2048, choices=(1024, 2048, 3072))
    paillier.add_argument(
        "--count", type=positive_int, default=600, help="fast encryptions to time (default 600)"
    )
    paillier.add_argument(
        "--phe-count", type=positive_int, default=60, help="phe encryptions to time (default 60)"
    )
    paillier.add_argument("--format", choices=("table", "json"), default="table")
    paillier.set_defaults(func=_bench_paillier)

    tables = bench.add_parser(
        "tables",
        help="secure count-table shares between two party processes on sampled data",
        description="Sample records from a network shipped with pgmpy, split its variables "
        "between alice and bob, and compute shares of every crossing family of at most "
        "--max-family variables with the packed Paillier protocol, the parties in two "
        "processes joined by a pipe. Reports records/s, ciphertexts, bytes, public-key "
        "operations and peak resident memory per party, and the per-alpha method's figures.",
    )
    tables.add_argument("--network", required=True, help="e.g. asia, sachs, child, alarm")
    tables.add_argument("--records", type=positive_int, required=True)
    tables.add_argument("--max-family", type=positive_int, default=3)
    tables.add_argument("--seed", type=non_negative_int, default=7)
    tables.add_argument(
        "--split", default="alternate", help="alternate, halves or a JSON owner map"
    )
    tables.add_argument("--key-bits", type=int, default=2048, choices=(1024, 2048, 3072))
    tables.add_argument("--chunk-size", type=positive_int, default=4096)
    add_executor_options(tables, "each party's")
    tables.add_argument(
        "--precompute",
        action="store_true",
        help="precompute one randomizer per record before the job (reported as setup time)",
    )
    tables.add_argument("--format", choices=("table", "json"), default="table")
    tables.add_argument(
        "--link",
        metavar="RATE[/RTT]",
        help="delay each message as a link of that rate and round-trip time would: e.g. 100mbit/20ms",
    )
    tables.set_defaults(func=_bench_tables)

    cost = bench.add_parser(
        "chunk-cost",
        help="per-chunk CPU cost of the table phase's tasks, and the wall-time model it gives",
        description="Time, in one process and in CPU seconds (so other load on the host does not "
        "count), one chunk of each task of the table phase on records sampled from a network: the "
        "encrypting party's packed encryption, the aggregating party's products by label, a node of "
        "the combine tree, and the serialisation a worker task costs the party's own thread. Prints "
        "the model wall = chunks x max(parallel work / cores, serial work per chunk) for 1M and 10M "
        "records on 1, 2, 4 and 16 worker cores per party.",
    )
    cost.add_argument("--network", default="asia")
    cost.add_argument("--max-family", type=positive_int, default=2)
    cost.add_argument("--split", default="alternate", help="alternate, halves or a JSON owner map")
    cost.add_argument("--key-bits", type=int, default=2048, choices=(1024, 2048, 3072))
    cost.add_argument("--chunk-size", type=positive_int, default=4096)
    cost.add_argument(
        "--repeat", type=positive_int, default=3, help="chunks timed per task (median; default 3)"
    )
    cost.add_argument(
        "--executor",
        choices=("local", "ray"),
        help="also time the encryption task inside a worker of this executor (2 workers), to "
        "see what the executor adds to a task's CPU",
    )
    cost.add_argument("--format", choices=("table", "json"), default="table")
    cost.set_defaults(func=_bench_chunk_cost)


# -- bench paillier -----------------------------------------------------------------------


def _bench_paillier(args: argparse.Namespace) -> int:
    from ppbn.commands.tables import print_table
    from ppbn.protocols.paillier import FastEncryptor, KeyPair

    if args.count < 1 or args.phe_count < 1:
        raise UserError("--count and --phe-count must be at least 1")
    keys = KeyPair.generate(args.key_bits)
    start = time.perf_counter()
    fast = FastEncryptor(keys.public, factors=(int(keys.private.p), int(keys.private.q)))
    fast.build_tables()
    setup_s = time.perf_counter() - start
    public_only = FastEncryptor(keys.public, base=int(fast.base))
    public_only.build_tables()  # outside the timed runs, as the key owner's
    phe_key = keys.public.phe_key()
    messages = [secrets.randbits(64) for _ in range(max(args.count, args.phe_count))]
    totals = {"ppbn": 0.0, "public_only": 0.0, "phe": 0.0}
    rounds = 3  # interleaved, so machine noise hits both paths alike
    for r in range(rounds):
        batch = messages[r * args.count // rounds : (r + 1) * args.count // rounds]
        start = time.perf_counter()
        cts = fast.encrypt_many(batch)
        totals["ppbn"] += time.perf_counter() - start
        start = time.perf_counter()
        public_only.encrypt_many(batch)
        totals["public_only"] += time.perf_counter() - start
        for m in messages[r * args.phe_count // rounds : (r + 1) * args.phe_count // rounds]:
            start = time.perf_counter()
            phe_key.encrypt(m)
            totals["phe"] += time.perf_counter() - start
    if keys.decrypt(cts[0]) != batch[0]:
        raise RuntimeError("fast encryption did not decrypt to its plaintext")
    fast.precompute(args.count)
    start = time.perf_counter()
    fast.encrypt_many(messages[: args.count])
    pooled_ms = (time.perf_counter() - start) / args.count * 1e3
    ppbn_ms = totals["ppbn"] / args.count * 1e3
    phe_ms = totals["phe"] / args.phe_count * 1e3
    public_ms = totals["public_only"] / args.count * 1e3
    result = {
        "key_bits": args.key_bits,
        "ppbn_encrypt_ms": round(ppbn_ms, 4),
        "phe_encrypt_ms": round(phe_ms, 4),
        "ratio": round(phe_ms / ppbn_ms, 1),
        "ppbn_public_key_only_encrypt_ms": round(public_ms, 4),
        "ratio_public_key_only": round(phe_ms / public_ms, 1),
        "ppbn_precomputed_encrypt_ms": round(pooled_ms, 4),
        "ratio_precomputed": round(phe_ms / pooled_ms, 1),
        "table_setup_s": round(setup_s, 3),
        "exponent_bits": fast.windows * fast.window_bits,
        "window_bits": fast.window_bits,
        "ppbn_count": args.count,
        "phe_count": args.phe_count,
    }
    if args.format == "json":
        print(json.dumps(result))
        return 0
    print_table(
        f"Paillier encryption, {args.key_bits}-bit key (same key, same run)",
        [
            ("phe encrypt", f"{phe_ms:.3f} ms", "1x"),
            ("ppbn fast path (key owner, CRT)", f"{ppbn_ms:.4f} ms", f"{result['ratio']}x"),
            (
                "ppbn fast path (public key only)",
                f"{public_ms:.4f} ms",
                f"{result['ratio_public_key_only']}x",
            ),
            (
                "ppbn with precomputed randomizers",
                f"{pooled_ms:.4f} ms",
                f"{result['ratio_precomputed']}x",
            ),
            ("fixed-base table setup (once per key)", f"{setup_s:.2f} s", ""),
            (
                "short exponent",
                f"{result['exponent_bits']} bits, windows of {fast.window_bits}",
                "",
            ),
        ],
        ("what", "time", "speed-up over phe"),
    )
    return 0


# -- bench chunk-cost -------------------------------------------------------------------------

MODEL_RECORDS = (1_000_000, 10_000_000)
MODEL_CORES = (1, 2, 4, 16)


def _cpu_seconds(fn, repeat: int) -> float:
    """Median CPU time of ``fn()`` in this process (load on the host does not count)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return sorted(times)[len(times) // 2]


def timed_encryption(spec: tuple, positions, seed: bytes) -> float:  # noqa: ANN001 - np.ndarray
    """CPU seconds of one encryption task, measured inside the worker that runs it (after a
    first run that builds the worker's fixed-base tables)."""
    from ppbn.protocols.paillier import encrypt_bit_rows

    encrypt_bit_rows(spec, positions[:1], seed)
    start = time.process_time()
    encrypt_bit_rows(spec, positions, seed)
    return time.process_time() - start


def _split_network(args: argparse.Namespace):
    """The network of --network, split between the parties by --split, and its families of
    up to --max-family variables that cross the split (both table benchmarks use them)."""
    from ppbn.bn.networks import load_network
    from ppbn.bn.schema import Schema, Variable
    from ppbn.data.datasets import split_owners
    from ppbn.protocols.tables import crossing_families

    net = load_network(args.network)
    owners = split_owners(net.names, args.split)
    schema = Schema("record_id", tuple(Variable(n, owners[n], net.states[n]) for n in net.names))
    families = crossing_families(schema, args.max_family)
    if not families:
        raise UserError("the split leaves no family that crosses the parties")
    return net, schema, families


def _bench_chunk_cost(args: argparse.Namespace) -> int:
    import pickle
    import statistics

    from ppbn.bn.networks import sample
    from ppbn.commands.tables import print_table
    from ppbn.protocols.paillier import (
        FastEncryptor,
        KeyPair,
        combine_products,
        encrypt_bit_rows,
        multiply_by_label,
        remember_encryptor,
    )
    from ppbn.protocols.tables import TREE_FANIN, TablesConfig, chunk_inputs

    if args.repeat < 1 or args.chunk_size < 1:
        raise UserError("--repeat and --chunk-size must be at least 1")
    net, schema, families = _split_network(args)
    full = sample(net, args.chunk_size, 7)
    column = {name: i for i, name in enumerate(net.names)}
    codes = {r: full[:, [column[v.name] for v in schema.owned_by(r)]] for r in ("alice", "bob")}
    config = TablesConfig(key_bits=args.key_bits, chunk_size=args.chunk_size)
    encrypter, positions, labels, sizes = chunk_inputs(
        schema, codes, families, config, MODEL_RECORDS[0]
    )
    # both parties' chunk inputs (positions, labels), counted in full against each party's thread
    inputs_s = _cpu_seconds(
        lambda: chunk_inputs(schema, codes, families, config, MODEL_RECORDS[0]), args.repeat
    )
    keys = KeyPair.generate(args.key_bits)
    encryptor = FastEncryptor(keys.public, factors=(int(keys.private.p), int(keys.private.q)))
    remember_encryptor(encryptor)
    seed = secrets.token_bytes(32)
    payload = encrypt_bit_rows(encryptor.spec, positions, seed)
    products = multiply_by_label(keys.public.n, payload, labels, sizes)
    task_args = (encryptor.spec, positions, seed, b"")
    costs = {
        "encrypt_s": _cpu_seconds(lambda: encrypt_bit_rows(*task_args), args.repeat),
        "multiply_s": _cpu_seconds(
            lambda: multiply_by_label(keys.public.n, payload, labels, sizes), args.repeat
        ),
        "combine_s": _cpu_seconds(
            lambda: combine_products(keys.public.n, *[products] * TREE_FANIN), args.repeat
        )
        / TREE_FANIN,
        # a worker task costs the party's own thread: its inputs, its arguments and result
        # pickled (Ray or a local pool) and the ciphertexts sent or received once more
        "serial_x_s": inputs_s
        + _cpu_seconds(
            lambda: (
                pickle.loads(pickle.dumps(task_args)),
                pickle.loads(pickle.dumps(payload)),
                bytes(payload),
            ),
            args.repeat,
        ),
        "serial_y_s": inputs_s
        + _cpu_seconds(
            lambda: (
                pickle.loads(pickle.dumps((keys.public.n, payload, labels, sizes))),
                bytes(payload),
            ),
            args.repeat,
        ),
    }
    in_worker = None
    if args.executor:
        from ppbn.protocols.executor import ExecutorSpec, make_executor

        check_executor_flags(args.executor, None)
        with make_executor(ExecutorSpec(args.executor, workers=2)) as executor:
            times = list(executor.map(timed_encryption, [task_args[:3]] * max(2, args.repeat)))
        in_worker = {
            "executor": args.executor,
            "encrypt_s": round(statistics.fmean(times), 4),
            "samples": len(times),
        }
    parallel = {"x": costs["encrypt_s"], "y": costs["multiply_s"] + costs["combine_s"]}
    model = {}
    for records in MODEL_RECORDS:
        chunks = -(-records // args.chunk_size)
        for cores in MODEL_CORES:
            per_chunk = max(
                parallel["x"] / cores,
                parallel["y"] / cores,
                costs["serial_x_s"],
                costs["serial_y_s"],
            )
            model[f"{records}/{cores}"] = round(chunks * per_chunk, 1)
    result = {
        "network": args.network,
        "max_family": args.max_family,
        "key_bits": args.key_bits,
        "chunk_size": args.chunk_size,
        "encrypter": encrypter,
        "slices_per_record": int(positions.shape[1]),
        "clusters": len(sizes),
        "per_chunk_cpu_s": {k: round(v, 4) for k, v in costs.items()},
        "per_record_encrypt_ms": round(costs["encrypt_s"] / args.chunk_size * 1e3, 4),
        "model_wall_s": model,
        "serial_share": round(
            statistics.fmean([costs["serial_x_s"], costs["serial_y_s"]]) / parallel["x"], 4
        ),
        "in_worker": in_worker,
    }
    if args.format == "json":
        print(json.dumps(result))
        return 0
    print_table(
        f"Per-chunk CPU cost ({args.network}, families <= {args.max_family}, {args.key_bits}-bit keys, "
        f"{args.chunk_size} records a chunk; {encrypter} encrypts)",
        [(name, f"{value * 1e3:.1f} ms") for name, value in costs.items()]
        + (
            [(f"encrypt_s in a {args.executor} worker", f"{in_worker['encrypt_s'] * 1e3:.1f} ms")]
            if in_worker
            else []
        ),
        ("task", "CPU per chunk"),
    )
    print_table(
        "Model wall time of the table phase: chunks x max(work / cores, serial per chunk)",
        [
            (f"{records:,}", *(f"{model[f'{records}/{cores}']:,} s" for cores in MODEL_CORES))
            for records in MODEL_RECORDS
        ],
        ("records", *(f"{c} core{'s' if c > 1 else ''} per party" for c in MODEL_CORES)),
    )
    return 0


# -- bench tables ---------------------------------------------------------------------------


def _party_process(
    role: str, spec: dict, codes, connection: Connection, report: Connection, parent_pid: int
) -> None:
    """One party process: run the protocol on its own columns, report counters and memory.
    It ends with the bench command, however that ends (no orphans after a SIGKILL)."""
    from ppbn.bench.processes import children_peak_rss_mib, peak_rss_mib
    from ppbn.bn.schema import Schema
    from ppbn.pair.shaper import Direction, parse_link
    from ppbn.protocols.executor import exit_with_parent
    from ppbn.protocols.paillier import OpCounters
    from ppbn.protocols.pipe_channel import PipeChannel, close_party_end
    from ppbn.protocols.tables import TablesConfig, TablesSession, run_tables

    exit_with_parent(parent_pid)
    channel = None
    try:
        schema = Schema.from_dict(spec["schema"])
        config = TablesConfig(
            key_bits=spec["key_bits"],
            chunk_size=spec["chunk_size"],
            workers=spec["workers"],
            executor=spec["executor"],
            ray_address=spec["ray_address"],
        )
        link = None
        if spec["link"]:
            other = "bob" if role == "alice" else "alice"
            link = Direction(f"{role}->{other}", parse_link(spec["link"]))
        channel = PipeChannel(connection, link, timeout_s=600)
        counters = OpCounters()
        with TablesSession(config) as session:
            start = time.perf_counter()
            session.prepare(randomizers=spec["precompute"])
            setup = time.perf_counter() - start
            start = time.perf_counter()
            shares = run_tables(
                channel, role, schema, codes, spec["families"], config, counters, session=session
            )
            wall = time.perf_counter() - start
            workers_rss = children_peak_rss_mib()
        report.send(
            {
                "role": role,
                "setup_s": round(setup, 3),
                "wall_s": round(wall, 3),
                "tables": len(shares),
                "counters": counters.as_dict(),
                "channel": channel.stats.as_dict(),
                "peak_rss_mib": peak_rss_mib(),
                "workers_peak_rss_mib": workers_rss,
            }
        )
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        report.send({"role": role, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        close_party_end(channel, connection)


def _bench_tables(args: argparse.Namespace) -> int:
    import multiprocessing

    import numpy as np

    from ppbn.bench.processes import collect_reports
    from ppbn.bn.networks import sample
    from ppbn.commands.tables import print_table
    from ppbn.protocols.tables import per_alpha_cost

    if args.records < 1:
        raise UserError("--records must be at least 1")
    if args.link:
        from ppbn.pair.shaper import parse_link

        parse_link(args.link)  # refuse a bad --link before sampling
    if args.max_family < 2:
        raise UserError("--max-family must be at least 2 (a crossing family has two variables)")
    check_executor_flags(args.executor or "local", args.ray_address)
    net, schema, families = _split_network(args)
    full = sample(net, args.records, args.seed)
    column = {name: i for i, name in enumerate(net.names)}
    codes = {
        role: np.ascontiguousarray(full[:, [column[v.name] for v in schema.owned_by(role)]])
        for role in ("alice", "bob")
    }
    del full
    spec = {
        "schema": schema.to_dict(),
        "families": families,
        "key_bits": args.key_bits,
        "chunk_size": args.chunk_size,
        "workers": args.workers,
        "executor": args.executor or "local",
        "ray_address": args.ray_address,
        "precompute": args.records if args.precompute else 0,
        "link": args.link or "",
    }
    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    start = time.perf_counter()
    processes = [
        context.Process(
            target=_party_process,
            args=(role, spec, codes[role], end, report_out, os.getpid()),
            name=f"ppbn-{role}",
        )
        for role, end in (("alice", alice_end), ("bob", bob_end))
    ]
    for p in processes:
        p.start()
    del codes
    reports = collect_reports(processes, report_in)
    elapsed = time.perf_counter() - start
    ours = {
        key: reports["alice"]["counters"][key] + reports["bob"]["counters"][key]
        for key in (
            "encryptions",
            "decryptions",
            "ciphertext_multiplications",
            "public_key_operations",
        )
    }
    ours["ciphertexts"] = (
        reports["alice"]["counters"]["ciphertexts_sent"]
        + reports["bob"]["counters"]["ciphertexts_sent"]
    )
    ours["bytes"] = (
        reports["alice"]["channel"]["bytes_sent"] + reports["bob"]["channel"]["bytes_sent"]
    )
    paper = per_alpha_cost(schema, families, args.records, args.key_bits).as_dict()
    wall = max(r["wall_s"] for r in reports.values())
    result = {
        "network": args.network,
        "records": args.records,
        "max_family": args.max_family,
        "key_bits": args.key_bits,
        "crossing_families": len(families),
        "executor": spec["executor"],
        "link": args.link or None,
        "bytes_alice_to_bob": reports["alice"]["channel"]["bytes_sent"],
        "bytes_bob_to_alice": reports["bob"]["channel"]["bytes_sent"],
        "rounds": max(r["channel"]["rounds"] for r in reports.values()),
        "setup_s": round(max(r["setup_s"] for r in reports.values()), 2),
        "protocol_wall_s": round(wall, 2),
        "elapsed_s": round(elapsed, 2),
        "records_per_s": round(args.records / wall, 1),
        "ppbn": ours,
        "per_alpha": paper,
        "encryption_ratio": round(paper["encryptions"] / max(1, ours["encryptions"]), 1),
        "public_key_operation_ratio": round(
            paper["public_key_operations"] / max(1, ours["public_key_operations"]), 1
        ),
        "parties": {
            role: {k: v for k, v in reports[role].items() if k != "role"}
            for role in ("alice", "bob")
        },
    }
    if args.format == "json":
        print(json.dumps(result))
        return 0
    rows = [
        ("alphas (crossing cells)", "", f"{paper['alphas']:,}"),
        ("Paillier encryptions", f"{ours['encryptions']:,}", f"{paper['encryptions']:,}"),
        ("decryptions", f"{ours['decryptions']:,}", f"{paper['decryptions']:,}"),
        (
            "ciphertext multiplications",
            f"{ours['ciphertext_multiplications']:,}",
            f"{paper['ciphertext_multiplications']:,}",
        ),
        (
            "public-key operations",
            f"{ours['public_key_operations']:,}",
            f"{paper['public_key_operations']:,}",
        ),
        ("ciphertexts sent", f"{ours['ciphertexts']:,}", f"{paper['ciphertexts']:,}"),
        ("bytes sent", f"{ours['bytes']:,}", f"{paper['bytes']:,}"),
        (
            "bytes alice -> bob / bob -> alice, rounds",
            f"{result['bytes_alice_to_bob']:,} / {result['bytes_bob_to_alice']:,}, {result['rounds']}",
            "",
        ),
        (
            "set-up (keys, tables, workers, precomputed randomizers)",
            f"{result['setup_s']:.2f} s",
            "",
        ),
        (
            "protocol wall time" + (f" (link model {args.link})" if args.link else ""),
            f"{wall:.2f} s",
            "(not run)",
        ),
        ("elapsed, including sampling and processes", f"{elapsed:.2f} s", ""),
        ("records per second", f"{result['records_per_s']:,}", ""),
    ]
    for role in ("alice", "bob"):
        r = reports[role]
        rows.append(
            (
                f"{role} peak RSS (workers)",
                f"{r['peak_rss_mib']} MiB ({r['workers_peak_rss_mib']} MiB)",
                "",
            )
        )
    print_table(
        f"Secure count tables: {args.network}, {args.records:,} records, {len(families)} crossing "
        f"families of <= {args.max_family} variables, {args.key_bits}-bit keys, {spec['executor']} executor "
        f"(encryptions {result['encryption_ratio']}x fewer than per-alpha)",
        rows,
        ("", "ppbn (packed tables)", "per-alpha (paper, computed)"),
    )
    return 0
