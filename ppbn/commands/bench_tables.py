"""``ppbn bench paillier``, ``ppbn bench tables`` and ``ppbn bench chunk-cost``: the cost
of the count-table layer. The engines are in ``ppbn/bench/`` (``paillier.py``,
``tables.py``, ``chunk_cost.py``); this module parses their flags and prints their reports.
"""

from __future__ import annotations

import argparse
import json

from ppbn.commands.checked_numbers import non_negative_int, positive_int
from ppbn.commands.executor_options import add_executor_options, check_executor_flags
from ppbn.protocols.constants import SECURITY_LEVELS, SEMI_HONEST


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
    tables.add_argument(
        "--security",
        choices=SECURITY_LEVELS,
        default=SEMI_HONEST,
        help="the table phase's level (above semi-honest: the malicious-level checks)",
    )
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


def _bench_paillier(args: argparse.Namespace) -> int:
    from ppbn.bench.paillier import PaillierSettings, bench_paillier, paillier_rows
    from ppbn.commands.tables import print_table

    report = bench_paillier(PaillierSettings(args.key_bits, args.count, args.phe_count))
    if args.format == "json":
        print(json.dumps(report))
        return 0
    print_table(
        f"Paillier encryption, {args.key_bits}-bit key (same key, same run)",
        paillier_rows(report),
        ("what", "time", "speed-up over phe"),
    )
    return 0


def _bench_chunk_cost(args: argparse.Namespace) -> int:
    from ppbn.bench.chunk_cost import MODEL_CORES, ChunkCostSettings, chunk_cost, chunk_cost_rows
    from ppbn.commands.tables import print_table

    if args.executor:
        check_executor_flags(args.executor, None)
    report = chunk_cost(
        ChunkCostSettings(
            args.network,
            args.max_family,
            args.split,
            args.key_bits,
            args.chunk_size,
            args.repeat,
            args.executor,
        )
    )
    if args.format == "json":
        print(json.dumps(report))
        return 0
    costs, walls = chunk_cost_rows(report)
    print_table(
        f"Per-chunk CPU cost ({args.network}, families <= {args.max_family}, {args.key_bits}-bit keys, "
        f"{args.chunk_size} records a chunk; {report['encrypter']} encrypts)",
        costs,
        ("task", "CPU per chunk"),
    )
    print_table(
        "Model wall time of the table phase: chunks x max(work / cores, serial per chunk)",
        walls,
        ("records", *(f"{c} core{'s' if c > 1 else ''} per party" for c in MODEL_CORES)),
    )
    return 0


def _bench_tables(args: argparse.Namespace) -> int:
    from ppbn.bench.tables import TablesSettings, bench_tables, tables_rows
    from ppbn.commands.tables import print_table

    check_executor_flags(args.executor or "local", args.ray_address)
    report = bench_tables(
        TablesSettings(
            network=args.network,
            records=args.records,
            max_family=args.max_family,
            seed=args.seed,
            split=args.split,
            key_bits=args.key_bits,
            chunk_size=args.chunk_size,
            workers=args.workers,
            executor=args.executor or "local",
            ray_address=args.ray_address,
            precompute=args.precompute,
            link=args.link,
            security=args.security,
        )
    )
    if args.format == "json":
        print(json.dumps(report))
        return 0
    print_table(
        f"Secure count tables: {args.network}, {args.records:,} records, "
        f"{report['crossing_families']} crossing families of <= {args.max_family} variables, "
        f"{args.key_bits}-bit keys, {args.security}, {report['executor']} executor "
        f"(encryptions {report['encryption_ratio']}x fewer than per-alpha)",
        tables_rows(report),
        ("", "ppbn (packed tables)", "per-alpha (paper, computed)"),
    )
    return 0
