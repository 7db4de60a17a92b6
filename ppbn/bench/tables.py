"""``bench tables``'s engine: the secure contingency-table protocol (protocols/tables/)
between two party processes joined by a pipe, on records sampled from a bundled network.
It reports throughput, traffic, public-key operations and peak memory per party, next to
the figures of the paper's one-scalar-product-per-alpha method for the same family list
(computed, not run)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ppbn.errors import UserError
from ppbn.protocols.constants import SECURITY_LEVELS

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    import numpy as np

    from ppbn.bn.model import BayesNet
    from ppbn.bn.schema import Schema

ROLES = ("alice", "bob")
COUNTED = ("encryptions", "decryptions", "ciphertext_multiplications", "public_key_operations")


@dataclass(frozen=True)
class TablesSettings:
    """One ``bench tables`` run: the data, the split, the key and how each party works."""

    network: str
    records: int
    max_family: int = 3
    seed: int = 7
    split: str = "alternate"
    key_bits: int = 2048
    chunk_size: int = 4096
    workers: int | None = None
    executor: str = "local"
    ray_address: str | None = None
    precompute: bool = False
    link: str | None = None
    security: str = "semi-honest"  # the table phase's level (protocols/security.py)


def split_network(network: str, split: str, max_family: int) -> tuple[BayesNet, Schema, list]:
    """The bundled network, split between the parties by ``split``, and its families of up
    to ``max_family`` variables that cross the split (both table benchmarks use them)."""
    from ppbn.bn.networks import load_network
    from ppbn.bn.schema import Schema, Variable
    from ppbn.data.datasets import split_owners
    from ppbn.protocols.tables import crossing_families

    net = load_network(network)
    owners = split_owners(net.names, split)
    schema = Schema("record_id", tuple(Variable(n, owners[n], net.states[n]) for n in net.names))
    families = crossing_families(schema, max_family)
    if not families:
        raise UserError("the split leaves no family that crosses the parties")
    return net, schema, families


def party_process(
    role: str,
    spec: dict,
    codes: np.ndarray,
    connection: Connection,
    report: Connection,
    parent_pid: int,
) -> None:
    """One party process: run the protocol on its own columns, report counters and memory.
    It ends with the bench, however that ends (no orphans after a SIGKILL)."""
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
            security=spec["security"],
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


def run_parties(codes: dict[str, np.ndarray], spec: dict) -> dict[str, dict]:
    """Both parties in their own spawned processes, joined by a pipe; their reports."""
    import multiprocessing

    from ppbn.bench.processes import collect_reports

    context = multiprocessing.get_context("spawn")
    alice_end, bob_end = context.Pipe(duplex=True)
    report_in, report_out = context.Pipe(duplex=False)
    processes = [
        context.Process(
            target=party_process,
            args=(role, spec, codes[role], end, report_out, os.getpid()),
            name=f"ppbn-{role}",
        )
        for role, end in zip(ROLES, (alice_end, bob_end), strict=True)
    ]
    for p in processes:
        p.start()
    codes.clear()  # the children have their copies; free the parent's
    return collect_reports(processes, report_in)


def bench_tables(settings: TablesSettings) -> dict:
    """Sample, split, run both parties and compare with the per-alpha method; the report
    ``--format json`` prints."""
    import numpy as np

    from ppbn.bn.networks import sample
    from ppbn.protocols.tables import per_alpha_cost

    s = settings
    if s.records < 1:
        raise UserError("--records must be at least 1")
    if s.security not in SECURITY_LEVELS:
        raise UserError(f"--security must be one of {', '.join(SECURITY_LEVELS)}")
    if s.link:
        from ppbn.pair.shaper import parse_link

        parse_link(s.link)  # refuse a bad link before sampling
    if s.max_family < 2:
        raise UserError("--max-family must be at least 2 (a crossing family has two variables)")
    net, schema, families = split_network(s.network, s.split, s.max_family)
    full = sample(net, s.records, s.seed)
    column = {name: i for i, name in enumerate(net.names)}
    codes = {
        role: np.ascontiguousarray(full[:, [column[v.name] for v in schema.owned_by(role)]])
        for role in ROLES
    }
    del full
    spec = {
        "schema": schema.to_dict(),
        "families": families,
        "key_bits": s.key_bits,
        "chunk_size": s.chunk_size,
        "workers": s.workers,
        "executor": s.executor,
        "ray_address": s.ray_address,
        "precompute": s.records if s.precompute else 0,
        "link": s.link or "",
        "security": s.security,
    }
    start = time.perf_counter()
    reports = run_parties(codes, spec)
    elapsed = time.perf_counter() - start
    ours = {key: sum(reports[r]["counters"][key] for r in ROLES) for key in COUNTED}
    ours["ciphertexts"] = sum(reports[r]["counters"]["ciphertexts_sent"] for r in ROLES)
    ours["bytes"] = sum(reports[r]["channel"]["bytes_sent"] for r in ROLES)
    paper = per_alpha_cost(schema, families, s.records, s.key_bits).as_dict()
    wall = max(r["wall_s"] for r in reports.values())
    return {
        "network": s.network,
        "records": s.records,
        "max_family": s.max_family,
        "key_bits": s.key_bits,
        "security": s.security,
        "crossing_families": len(families),
        "executor": s.executor,
        "link": s.link or None,
        "bytes_alice_to_bob": reports["alice"]["channel"]["bytes_sent"],
        "bytes_bob_to_alice": reports["bob"]["channel"]["bytes_sent"],
        "rounds": max(r["channel"]["rounds"] for r in reports.values()),
        "setup_s": round(max(r["setup_s"] for r in reports.values()), 2),
        "protocol_wall_s": round(wall, 2),
        "elapsed_s": round(elapsed, 2),
        "records_per_s": round(s.records / wall, 1),
        "ppbn": ours,
        "per_alpha": paper,
        "encryption_ratio": round(paper["encryptions"] / max(1, ours["encryptions"]), 1),
        "public_key_operation_ratio": round(
            paper["public_key_operations"] / max(1, ours["public_key_operations"]), 1
        ),
        "parties": {
            role: {k: v for k, v in reports[role].items() if k != "role"} for role in ROLES
        },
    }


def tables_rows(report: dict) -> list[tuple[str, str, str]]:
    """The table ``bench tables`` prints for people: ppbn's figures next to per-alpha's."""
    ours, paper, link = report["ppbn"], report["per_alpha"], report["link"]
    wall = max(party["wall_s"] for party in report["parties"].values())
    rows = [
        ("alphas (crossing cells)", "", f"{paper['alphas']:,}"),
        *(
            (what, f"{ours[key]:,}", f"{paper[key]:,}")
            for what, key in (
                ("Paillier encryptions", "encryptions"),
                ("decryptions", "decryptions"),
                ("ciphertext multiplications", "ciphertext_multiplications"),
                ("public-key operations", "public_key_operations"),
                ("ciphertexts sent", "ciphertexts"),
                ("bytes sent", "bytes"),
            )
        ),
        (
            "bytes alice -> bob / bob -> alice, rounds",
            f"{report['bytes_alice_to_bob']:,} / {report['bytes_bob_to_alice']:,}, "
            f"{report['rounds']}",
            "",
        ),
        (
            "set-up (keys, tables, workers, precomputed randomizers)",
            f"{report['setup_s']:.2f} s",
            "",
        ),
        (
            "protocol wall time" + (f" (link model {link})" if link else ""),
            f"{wall:.2f} s",
            "(not run)",
        ),
        ("elapsed, including sampling and processes", f"{report['elapsed_s']:.2f} s", ""),
        ("records per second", f"{report['records_per_s']:,}", ""),
    ]
    for role in ROLES:
        party = report["parties"][role]
        rows.append(
            (
                f"{role} peak RSS (workers)",
                f"{party['peak_rss_mib']} MiB ({party['workers_peak_rss_mib']} MiB)",
                "",
            )
        )
    return rows
