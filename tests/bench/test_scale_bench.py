"""``ppbn.bench.scale`` from Python: what is refused before any data or daemon, the table
for people, and each party's CPU per phase with Amdahl's bound on the speed-up: the law's
arithmetic, CPU in pool tasks, inline tasks, lanes and the phase's own thread each counted
where it belongs (``learning/clock.py``), and a small job's report (a job per worker count
also runs in tests/commands/test_bench_scale.py)."""

from __future__ import annotations

import time

import pytest
from executor_util import network_schema, parts
from known_files import TEST_POLICY

from ppbn.bench.pair_runs import LearnJob
from ppbn.bench.scale import (
    WHOLE_JOB,
    ScaleSettings,
    amdahl_bound,
    amdahl_by_phase,
    bench_scale,
    scale_header,
    scale_rows,
)
from ppbn.bn.networks import sample
from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy
from ppbn.protocols.channel import run_two_party
from ppbn.protocols.executor import InlineExecutor, LocalExecutor
from ppbn.protocols.learning import term_lanes as lanes_module
from ppbn.protocols.learning.clock import OUTSIDE, SHARE_TERMS, PhaseClock
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.learn import learn_secure
from ppbn.protocols.ledger import Ledger

BURN_S = 0.15  # CPU seconds of one task of ``burn``


def burn(seconds: float) -> float:
    """Spin this thread for ``seconds`` of its own CPU time (a pool task, or inline)."""
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass
    return seconds


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (ScaleSettings(workers=(2, 1)), "--workers: distinct worker counts"),
        (ScaleSettings(lanes="all"), "--lanes must be one of job, workers"),
        (ScaleSettings(workers=(1, 65), lanes="workers"), "at most 64 terms lanes"),
        (ScaleSettings(job=LearnJob(key_bits=1024)), "key_bits 1024 is below"),
    ],
)
def test_refused_before_any_work(settings: ScaleSettings, message: str, monkeypatch) -> None:
    def no_work(*_args):
        raise AssertionError("data sampled for refused settings")

    monkeypatch.setattr("ppbn.bench.scale.sample_pair_files", no_work)
    with pytest.raises(UserError, match=message):
        bench_scale(settings)


def test_amdahls_law() -> None:
    assert amdahl_bound(1.0, 0.0, 8) == 1.0  # all serial: no speed-up
    assert amdahl_bound(0.0, 3.0, 8) == 8.0  # all parallel: the workers
    assert amdahl_bound(1.0, 1.0, 8) == pytest.approx(1 / (0.5 + 0.5 / 8))  # 16/9
    assert amdahl_bound(1.0, 9.0, 16) == pytest.approx(1 / (0.1 + 0.9 / 16))
    assert amdahl_bound(0.0, 0.0, 8) is None  # no CPU to divide
    for serial, parallel in [(0.01, 5.0), (2.0, 0.3), (1e-9, 1e-9)]:
        for workers in (1, 8, 16):
            assert 1.0 <= amdahl_bound(serial, parallel, workers) <= workers


def _cpu(serial: float, parallel: float) -> dict[str, float]:
    return {"serial_s": serial, "parallel_s": parallel}


def test_the_bound_is_the_lower_partys_and_the_whole_job_counts_what_no_phase_took() -> None:
    runs = [
        {
            "phase_cpu": {
                "alice": {"tables": _cpu(1.0, 9.0), OUTSIDE: _cpu(2.0, 0.0)},
                "bob": {"tables": _cpu(1.0, 3.0), OUTSIDE: _cpu(0.0, 0.0)},
            }
        },
        {
            "phase_cpu": {
                "alice": {"tables": _cpu(3.0, 9.0), OUTSIDE: _cpu(2.0, 0.0)},
                "bob": {"tables": _cpu(1.0, 3.0), OUTSIDE: _cpu(0.0, 0.0)},
            }
        },
    ]
    table = amdahl_by_phase(runs)
    assert list(table) == ["tables", OUTSIDE, WHOLE_JOB]
    alice = table["tables"]["alice"]  # the median of the two runs
    assert (alice["serial_s"], alice["parallel_s"], alice["serial_fraction"]) == (2.0, 9.0, 0.1818)
    bob = table["tables"]["bob"]
    assert bob["bound_at_8"] == round(amdahl_bound(1.0, 3.0, 8), 2)
    assert table["tables"]["bound_at_8"] == min(alice["bound_at_8"], bob["bound_at_8"])
    whole = table[WHOLE_JOB]["alice"]
    assert (whole["serial_s"], whole["parallel_s"]) == (4.0, 9.0)  # 2 in tables, 2 outside
    assert table[OUTSIDE]["bob"]["bound_at_16"] is None  # no CPU at all
    assert table[OUTSIDE]["bound_at_16"] == 1.0  # alice's: all serial


def test_scale_rows_show_each_phase_the_speed_up_the_cpu_and_the_bounds() -> None:
    both = {"alice": _cpu(0.5, 3.5), "bob": _cpu(1.0, 3.0)}
    report = {
        "baseline_workers": 1,
        "median_seconds": {
            "1": {"tables": 4.0, WHOLE_JOB: 12.0},
            "2": {"tables": 2.0, "parameters": 0.5, WHOLE_JOB: 6.0},
        },
        "amdahl_workers": [8, 16],
        "amdahl": {"1": {"tables": {**both, "bound_at_8": 2.9, "bound_at_16": 3.37}}},
    }
    assert scale_header(report) == (
        "phase", "W = 1", "W = 2", "alice CPU", "bob CPU", "Amdahl 8", "Amdahl 16"
    )  # fmt: skip
    assert scale_rows(report) == [
        ("tables", "4.00 s (1.0x)", "2.00 s (2.0x)", "0.50 + 3.50", "1.00 + 3.00", "2.9x", "3.4x"),
        ("parameters", "-", "0.50 s", "-", "-", "-", "-"),
        (WHOLE_JOB, "12.0 s (1.0x)", "6.00 s (2.0x)", "-", "-", "-", "-"),
    ]


@pytest.mark.parametrize("pooled", [False, True])
def test_task_cpu_is_parallel_wherever_it_ran_and_the_threads_own_is_serial(pooled) -> None:
    """Tasks in a pool's processes or inline in the phase's thread are its parallel CPU;
    the thread's own work around them is its serial CPU, and what it did before the phase
    began (its mark) counts toward neither."""
    clock = PhaseClock()
    burn(BURN_S)  # before the phase's mark: outside
    executor = LocalExecutor(2) if pooled else InlineExecutor()
    with executor:
        clock.mark()
        started = time.perf_counter()
        assert list(executor.map(burn, [(BURN_S,)] * 4)) == [BURN_S] * 4
        burn(BURN_S)  # the phase thread's own
        clock.add("work", started)
    used = clock.cpu["work"]
    assert 4 * BURN_S <= used.parallel_s < 4 * BURN_S + (1.0 if pooled else 0.05)
    assert BURN_S <= used.serial_s < BURN_S + (1.0 if pooled else 0.05)
    assert clock.seconds["work"] > 0
    split = clock.cpu_split()
    assert split[OUTSIDE]["serial_s"] >= BURN_S and split[OUTSIDE]["parallel_s"] == 0.0


def test_terms_lanes_cpu_is_parallel_to_the_job_thread(monkeypatch) -> None:
    """With terms lanes the share phase runs in the lanes' processes: their CPU and their
    relay threads' reach the job's phase_cpu as parallel CPU."""
    monkeypatch.setattr(lanes_module, "MIN_LANE_TERMS", 4)
    schema, net = network_schema("asia")
    split = parts(schema, sample(net, 300, 5))
    config = SecureLearnConfig(max_parents=1, mode="bic", term_lanes=2)

    def side(role):
        return lambda ch: learn_secure(ch, role, schema, split[role], config, Ledger(role))

    for result in run_two_party(side("alice"), side("bob"), timeout_s=300):
        shares = result.stats["phase_cpu"][SHARE_TERMS]
        assert shares["parallel_s"] > 0.2 and shares["parallel_s"] > 5 * shares["serial_s"]


def test_a_small_jobs_report_splits_every_phases_cpu_and_bounds_it() -> None:
    """asia, 500 records, W = 1 and 2: every phase of each party has serial and parallel
    CPU, some of it, and bounds between 1 and N; the bound is W = 1's."""
    settings = ScaleSettings(
        "asia",
        500,
        job=LearnJob(key_bits=1024),
        workers=(1, 2),
        policy=LocalPolicy.load(str(TEST_POLICY)),
    )
    report = bench_scale(settings)
    assert report["same_results"] and report["amdahl_workers"] == [8, 16]
    for run in report["runs"]:
        phases = {p for seconds in run["phases_s"].values() for p in seconds}
        assert set(run["phase_cpu"]) == {"alice", "bob"}
        for cpu in run["phase_cpu"].values():
            assert set(cpu) == phases | {OUTSIDE}
            for phase in phases:
                assert cpu[phase]["serial_s"] >= 0 and cpu[phase]["parallel_s"] >= 0
                assert cpu[phase]["serial_s"] + cpu[phase]["parallel_s"] > 0, phase
    for workers in ("1", "2"):
        table = report["amdahl"][workers]
        assert set(table) == set(report["median_seconds"][workers]) | {OUTSIDE}
        for phase, entry in table.items():
            for n in (8, 16):
                assert 1.0 <= entry[f"bound_at_{n}"] <= n, (phase, entry)
    rows = scale_rows(report)
    assert [row[0] for row in rows][-2:] == [OUTSIDE, WHOLE_JOB]
    assert all(len(row) == len(scale_header(report)) for row in rows)
