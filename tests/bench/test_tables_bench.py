"""``ppbn.bench.tables`` and ``ppbn.bench.chunk_cost`` from Python: the table protocol
between two party processes, and the per-chunk cost model, on a few records of asia."""

from __future__ import annotations

import pytest

from ppbn.bench.chunk_cost import ChunkCostSettings, chunk_cost, chunk_cost_rows
from ppbn.bench.tables import TablesSettings, bench_tables, split_network, tables_rows
from ppbn.errors import UserError


def test_bench_tables_runs_both_parties_and_counts_their_work() -> None:
    settings = TablesSettings(
        "asia", records=60, max_family=2, key_bits=1024, chunk_size=32, executor="inline"
    )
    report = bench_tables(settings)
    _, _, families = split_network("asia", "alternate", 2)
    assert report["crossing_families"] == len(families)
    assert {party["tables"] for party in report["parties"].values()} == {len(families)}
    assert report["ppbn"]["encryptions"] > 0 and report["ppbn"]["bytes"] == (
        report["bytes_alice_to_bob"] + report["bytes_bob_to_alice"]
    )
    assert report["per_alpha"]["encryptions"] >= report["ppbn"]["encryptions"]
    assert len(tables_rows(report)) == 14


def test_bench_tables_refuses_a_family_bound_below_two() -> None:
    with pytest.raises(UserError, match="at least 2"):
        bench_tables(TablesSettings("asia", records=10, max_family=1))


def test_chunk_cost_models_the_wall_time() -> None:
    report = chunk_cost(ChunkCostSettings("asia", key_bits=1024, chunk_size=16, repeat=1))
    assert set(report["per_chunk_cpu_s"]) == {
        "encrypt_s",
        "multiply_s",
        "combine_s",
        "serial_x_s",
        "serial_y_s",
    }
    assert len(report["model_wall_s"]) == 8 and report["in_worker"] is None
    costs, walls = chunk_cost_rows(report)
    assert len(costs) == 5 and [row[0] for row in walls] == ["1,000,000", "10,000,000"]
