"""Executors: ordered bounded maps, tree reductions, failures, and the table phase
bit-identical under the inline executor and the local process pool for the same seed."""

from __future__ import annotations

import os

import numpy as np
import pytest
from executor_util import (
    assert_same_learning,
    config_for,
    learn_run,
    network_schema,
    parts,
    tables_run,
)

from ppbn.bn.networks import sample
from ppbn.errors import UserError
from ppbn.jobs.base import check_known
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal
from ppbn.protocols.channel import ProtocolError, run_two_party
from ppbn.protocols.executor import (
    ExecutorError,
    ExecutorSpec,
    InlineExecutor,
    LocalExecutor,
    make_executor,
)
from ppbn.protocols.paillier import OpCounters
from ppbn.protocols.seeds import RandomStream, TaskSeeds
from ppbn.protocols.tables import TablesSession, crossing_families, reconstruct, run_tables

PRIME = 2**61 - 1


def product_mod(*values: int) -> int:
    out = 1
    for v in values:
        out = out * v % PRIME
    return out


def square(x: int) -> int:
    return x * x


def refuse(x: int) -> int:
    raise ProtocolError(f"bad value {x}")


def die(x: int) -> int:
    os._exit(3)


@pytest.fixture(scope="module")
def local() -> LocalExecutor:
    with LocalExecutor(2) as pool:
        yield pool


def test_map_keeps_order_and_bounds_the_tasks_in_flight(local: LocalExecutor) -> None:
    for executor in (InlineExecutor(), local):
        taken: list[int] = []

        def items(taken: list[int] = taken):
            for i in range(40):
                taken.append(i)
                yield (i,)

        out = []
        for value in executor.map(square, items(), inflight=3):
            out.append(value)
            assert len(taken) - len(out) <= 3  # never more than 3 submitted and not yet returned
        assert out == [i * i for i in range(40)]


@pytest.mark.parametrize("leaves", [1, 2, 15, 16, 17, 100])
def test_tree_reduce_equals_the_sequential_product(local: LocalExecutor, leaves: int) -> None:
    values = [(7 + 3 * i) ** 5 % PRIME for i in range(leaves)]
    expected = product_mod(*values)
    for executor in (InlineExecutor(), local):
        submitted = (executor.submit(product_mod, v) for v in values)
        assert executor.tree_reduce(product_mod, submitted, fanin=4) == expected


def test_a_task_error_reaches_the_caller_unchanged(local: LocalExecutor) -> None:
    for executor in (InlineExecutor(), local):
        with pytest.raises(ProtocolError, match="bad value 2"):
            list(executor.map(refuse, [(2,)]))


def test_a_dead_worker_fails_the_work_with_a_clear_error() -> None:
    with LocalExecutor(1) as pool, pytest.raises(ExecutorError, match="worker process died"):
        list(pool.map(die, [(1,), (2,)]))


def test_executor_spec_and_make_executor() -> None:
    assert isinstance(make_executor(ExecutorSpec("local", workers=1)), InlineExecutor)
    assert make_executor(ExecutorSpec("local", workers=3)).workers == 3
    with pytest.raises(ValueError, match="executor must be one of"):
        ExecutorSpec("spark")
    with pytest.raises(ValueError, match="only for the ray executor"):
        ExecutorSpec("local", ray_address="10.0.0.1:6379")


def test_seeds_repeat_only_when_fixed() -> None:
    one, two = TaskSeeds(bytes(32)), TaskSeeds(bytes(32))
    drawn = [one.next() for _ in range(3)]
    assert drawn == [two.next() for _ in range(3)] and len(set(drawn)) == 3
    assert TaskSeeds().next() != TaskSeeds().next()
    stream = RandomStream(bytes(32))
    draws = [stream.randbelow(1000) for _ in range(2000)]
    assert min(draws) >= 0 and max(draws) < 1000 and len(set(draws)) > 800


def test_table_phase_is_bit_identical_inline_and_on_the_local_pool() -> None:
    inline = tables_run("inline", "sachs")
    local = tables_run("local", "sachs")
    for got, want in zip(local[:2], inline[:2], strict=True):
        assert set(got) == set(want)
        for family in want:
            np.testing.assert_array_equal(got[family], want[family])
    assert local[2] == inline[2]  # every message of both transcripts, byte for byte
    schema, _ = network_schema("sachs")
    assert set(inline[3]) == set(crossing_families(schema, 2))


def test_learn_job_is_the_same_inline_and_on_the_local_pool() -> None:
    expected = learn_run("inline", "asia")
    assert_same_learning(learn_run("local", "asia"), expected)


def test_spilled_ciphertexts_serve_a_later_call(tmp_path) -> None:
    schema, net = network_schema("asia")
    split = parts(schema, sample(net, 200, 1))
    families = crossing_families(schema, 2)
    config = config_for("inline", cache_bytes=0, spill_bytes=2**24, spill_dir=str(tmp_path))
    sessions = {role: TablesSession(config) for role in ("alice", "bob")}

    def call() -> tuple[dict, int]:
        counters = {role: OpCounters() for role in sessions}

        def side(role):
            return lambda ch: run_tables(
                ch,
                role,
                schema,
                split[role],
                families,
                config,
                counters[role],
                session=sessions[role],
            )

        counts = reconstruct(*run_two_party(side("alice"), side("bob"), timeout_s=60))
        return counts, sum(c.ciphertexts_sent for c in counters.values())

    try:
        first, _ = call()
        assert any(s.spilled_bytes for s in sessions.values()) and not any(
            s.held_bytes for s in sessions.values()
        )
        assert list(tmp_path.iterdir()) == []  # the spill file is unlinked from the start
        second, sent = call()
    finally:
        for session in sessions.values():
            session.close()
    for family in families:
        np.testing.assert_array_equal(first[family], second[family])
    assert sent < 200  # nothing re-encrypted: the chunks came from the spill file


def test_executor_settings_are_local_only() -> None:
    for name in (
        "executor",
        "ray_address",
        "workers",
        "cache_mb",
        "spill_mb",
        "gc_inline_below",
        "ot_inline_below",
    ):
        with pytest.raises(PolicyRefusal, match="local setting"):
            check_known("tables", {"max_family": 2, name: "ray"}, {"max_family"})
    with pytest.raises(UserError, match="executor must be one of"):
        LocalPolicy.from_mapping({"executor": "spark"}, "p.toml")
    with pytest.raises(UserError, match="ray_address"):
        LocalPolicy.from_mapping({"ray_address": "10.0.0.1:6379"}, "p.toml")
    settings = LocalPolicy.from_mapping(
        {"executor": "inline", "cache_mb": 1, "spill_mb": 2}, "p.toml"
    ).tables_settings()
    assert (
        settings["executor"] == "inline"
        and settings["cache_bytes"] == 2**20
        and settings["spill_bytes"] == 2**21
    )
    batches = LocalPolicy.from_mapping(
        {"gc_inline_below": 0, "ot_inline_below": 5}, "p.toml"
    ).batch_settings()
    assert batches == {"gc_inline_below": 0, "ot_inline_below": 5}
    with pytest.raises(UserError, match="gc_inline_below must be an integer"):
        LocalPolicy.from_mapping({"gc_inline_below": -1}, "p.toml")


def test_asking_for_ray_without_ray_is_one_line(monkeypatch) -> None:
    import builtins

    from ppbn.commands.executor_options import check_executor_flags

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(UserError, match=r"pip install 'ppbn\[ray\]'") as err:
        check_executor_flags("ray", None)
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="only for --executor ray"):
        check_executor_flags("local", "10.0.0.1:6379")
