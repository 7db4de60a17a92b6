"""``bench chunk-cost``'s engine: the CPU seconds of one chunk of each task of the table
phase, in one process (so other load on the host does not count), and the wall-time
model they give: wall = chunks x max(parallel work / cores, serial work per chunk)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ppbn.errors import UserError

if TYPE_CHECKING:
    import numpy as np

MODEL_RECORDS = (1_000_000, 10_000_000)
MODEL_CORES = (1, 2, 4, 16)


@dataclass(frozen=True)
class ChunkCostSettings:
    """What ``bench chunk-cost`` times: the data, the key, the chunk and how often."""

    network: str = "asia"
    max_family: int = 2
    split: str = "alternate"
    key_bits: int = 2048
    chunk_size: int = 4096
    repeat: int = 3
    executor: str | None = None  # also time the encryption inside a worker of this executor


def cpu_seconds(fn: Callable[[], object], repeat: int) -> float:
    """Median CPU time of ``fn()`` in this process (load on the host does not count)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return sorted(times)[len(times) // 2]


def timed_encryption(spec: tuple, positions: np.ndarray, seed: bytes) -> float:
    """CPU seconds of one encryption task, measured inside the worker that runs it (after a
    first run that builds the worker's fixed-base tables)."""
    from ppbn.protocols.paillier import encrypt_bit_rows

    encrypt_bit_rows(spec, positions[:1], seed)
    start = time.process_time()
    encrypt_bit_rows(spec, positions, seed)
    return time.process_time() - start


def chunk_cost(settings: ChunkCostSettings) -> dict:
    """Each task's CPU per chunk, the modelled wall time of 1M and 10M records on 1 to 16
    cores per party, and (with an executor) the encryption's CPU inside a worker; the
    report ``--format json`` prints."""
    import pickle
    import statistics

    from ppbn.bench.tables import split_network
    from ppbn.bn.networks import sample
    from ppbn.protocols.paillier import (
        FastEncryptor,
        KeyPair,
        combine_products,
        encrypt_bit_rows,
        multiply_by_label,
        remember_encryptor,
    )
    from ppbn.protocols.tables import TREE_FANIN, TablesConfig, chunk_inputs

    s = settings
    if s.repeat < 1 or s.chunk_size < 1:
        raise UserError("--repeat and --chunk-size must be at least 1")
    net, schema, families = split_network(s.network, s.split, s.max_family)
    full = sample(net, s.chunk_size, 7)
    column = {name: i for i, name in enumerate(net.names)}
    codes = {r: full[:, [column[v.name] for v in schema.owned_by(r)]] for r in ("alice", "bob")}
    config = TablesConfig(key_bits=s.key_bits, chunk_size=s.chunk_size)
    encrypter, positions, labels, sizes = chunk_inputs(
        schema, codes, families, config, MODEL_RECORDS[0]
    )
    # both parties' chunk inputs (positions, labels), counted in full against each party's thread
    inputs_s = cpu_seconds(
        lambda: chunk_inputs(schema, codes, families, config, MODEL_RECORDS[0]), s.repeat
    )
    keys = KeyPair.generate(s.key_bits)
    encryptor = FastEncryptor(keys.public, factors=(int(keys.private.p), int(keys.private.q)))
    remember_encryptor(encryptor)
    seed = secrets.token_bytes(32)
    payload = encrypt_bit_rows(encryptor.spec, positions, seed)
    products = multiply_by_label(keys.public.n, payload, labels, sizes)
    task_args = (encryptor.spec, positions, seed, b"")
    costs = {
        "encrypt_s": cpu_seconds(lambda: encrypt_bit_rows(*task_args), s.repeat),
        "multiply_s": cpu_seconds(
            lambda: multiply_by_label(keys.public.n, payload, labels, sizes), s.repeat
        ),
        "combine_s": cpu_seconds(
            lambda: combine_products(keys.public.n, *[products] * TREE_FANIN), s.repeat
        )
        / TREE_FANIN,
        # a worker task costs the party's own thread: its inputs, its arguments and result
        # pickled (Ray or a local pool) and the ciphertexts sent or received once more
        "serial_x_s": inputs_s
        + cpu_seconds(
            lambda: (
                pickle.loads(pickle.dumps(task_args)),
                pickle.loads(pickle.dumps(payload)),
                bytes(payload),
            ),
            s.repeat,
        ),
        "serial_y_s": inputs_s
        + cpu_seconds(
            lambda: (
                pickle.loads(pickle.dumps((keys.public.n, payload, labels, sizes))),
                bytes(payload),
            ),
            s.repeat,
        ),
    }
    in_worker = None
    if s.executor:
        from ppbn.protocols.executor import ExecutorSpec, make_executor

        with make_executor(ExecutorSpec(s.executor, workers=2)) as executor:
            times = list(executor.map(timed_encryption, [task_args[:3]] * max(2, s.repeat)))
        in_worker = {
            "executor": s.executor,
            "encrypt_s": round(statistics.fmean(times), 4),
            "samples": len(times),
        }
    parallel = {"x": costs["encrypt_s"], "y": costs["multiply_s"] + costs["combine_s"]}
    model = {}
    for records in MODEL_RECORDS:
        chunks = -(-records // s.chunk_size)
        for cores in MODEL_CORES:
            per_chunk = max(
                parallel["x"] / cores,
                parallel["y"] / cores,
                costs["serial_x_s"],
                costs["serial_y_s"],
            )
            model[f"{records}/{cores}"] = round(chunks * per_chunk, 1)
    return {
        "network": s.network,
        "max_family": s.max_family,
        "key_bits": s.key_bits,
        "chunk_size": s.chunk_size,
        "encrypter": encrypter,
        "slices_per_record": int(positions.shape[1]),
        "clusters": len(sizes),
        "per_chunk_cpu_s": {k: round(v, 4) for k, v in costs.items()},
        "per_record_encrypt_ms": round(costs["encrypt_s"] / s.chunk_size * 1e3, 4),
        "model_wall_s": model,
        "serial_share": round(
            statistics.fmean([costs["serial_x_s"], costs["serial_y_s"]]) / parallel["x"], 4
        ),
        "in_worker": in_worker,
    }


def chunk_cost_rows(report: dict) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The two tables ``bench chunk-cost`` prints for people: CPU per chunk of each task,
    and the model's wall time by records and cores."""
    in_worker = report["in_worker"]
    costs = [(name, f"{value * 1e3:.1f} ms") for name, value in report["per_chunk_cpu_s"].items()]
    if in_worker:
        costs.append(
            (
                f"encrypt_s in a {in_worker['executor']} worker",
                f"{in_worker['encrypt_s'] * 1e3:.1f} ms",
            )
        )
    model = report["model_wall_s"]
    walls = [
        (f"{records:,}", *(f"{model[f'{records}/{cores}']:,} s" for cores in MODEL_CORES))
        for records in MODEL_RECORDS
    ]
    return costs, walls
