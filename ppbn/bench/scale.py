"""The ``bench scale`` engine: how each phase of a secure job scales with workers per party.

For each worker count W the same learn job (same data, seed and parameters) runs between
two daemon processes over loopback mutual TLS, as ``bench k2`` runs it, each daemon's
executor at W workers. W = 1 is the inline executor, the serial baseline. At W > 1 every
phase that can use the executor does: the policy's ``gc_inline_below`` and
``ot_inline_below`` are 0, so garbled runs and OT-extension blocks go to the pool as well
(by default they stay in the job thread). The table phase goes to the pool from
``TablesConfig.serial_below`` records on, which is no policy setting.

Every run must learn what the smallest W learned (edges, hill-climbing moves, CPTs): the
executor never changes results, and a run that does is reported (``same_results``). The
times are measurements, never checked against anything.

Each run also carries each party's CPU per phase (``stats.phase_cpu`` of its network.json,
``learning/clock.py``): serial, in the thread that runs the phase; parallel, in executor
tasks (inline at W = 1, in the pool above) and in lanes beside that thread. From those,
Amdahl's law bounds the speed-up a phase could reach at N workers per party
(``amdahl_bound``), so a design's scaling can be read on a small host; the bound assumes
the parallel work divides perfectly over N workers (enough tasks, no scheduling or pickling
cost) and that nothing else limits, the link and the peer included. The table bounds from
the smallest W, the JSON from every W: above W = 1 the pool's tasks also carry each
worker's first load of the compiled kernels, and an OT block task opens its own streams
at its offset where an inline one reads on the open ones.

    report = bench_scale(ScaleSettings("asia", 2000, workers=(1, 2)))
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bench.pair_runs import LearnJob, LearnRun, run_learn, sample_pair_files
from ppbn.errors import UserError
from ppbn.protocols.constants import MAX_TERM_LANES

if TYPE_CHECKING:
    from ppbn.jobs.policy import LocalPolicy

WHOLE_JOB = "whole job"
LANES = ("job", "workers")
AMDAHL_AT = (8, 16)  # the worker counts the report bounds the speed-up at
ROLES = ("alice", "bob")


@dataclass(frozen=True)
class ScaleSettings:
    """One ``bench scale`` run: the ``job`` on ``records`` of ``network`` (``seed``) once per
    count of ``workers`` (ascending, distinct) and ``repeat`` times each, the daemons under
    ``policy`` (None: the built-in one) with ``executor`` (local or ray) at W > 1; ``lanes``
    job keeps the job's terms lanes at every W (auto: agreed at that W), workers runs W
    lanes at W workers."""

    network: str = "asia"
    records: int = 20000
    seed: int = 7
    job: LearnJob = field(default_factory=LearnJob)
    workers: tuple[int, ...] = (1, 2, 4, 8)
    executor: str = "local"
    lanes: str = "job"
    repeat: int = 1
    policy: LocalPolicy | None = None
    timeout_s: float = 600.0


def scale_policy(
    base: LocalPolicy, executor: str, workers: int, term_lanes: int | str = 1
) -> LocalPolicy:
    """The daemons' policy at W workers: inline at 1; else ``executor`` at W with every
    garbled run and OT-extension call sent to it (a private Ray instance of W CPUs per
    daemon for ray, so that W means the same for both executors); and room for the job's
    ``term_lanes`` (a number; "auto" offers within the policy's own)."""
    if isinstance(term_lanes, int):
        base = replace(base, max_term_lanes=max(base.max_term_lanes, term_lanes))
    if workers == 1:
        policy = replace(base, executor="inline", workers=1, ray_address=None)
    else:
        policy = replace(
            base,
            executor=executor,
            workers=workers,
            ray_address=None,
            gc_inline_below=0,
            ot_inline_below=0,
        )
    policy.validate()
    return policy


def bench_scale(
    settings: ScaleSettings, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Every worker count's runs (a line to ``progress`` after each) and the report; what
    the policy or this host refuses is refused before any data or daemon."""
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.pair.loopback import LocalPair
    from ppbn.protocols.executor import ray_missing_message

    if (
        not settings.workers
        or list(settings.workers) != sorted(set(settings.workers))
        or settings.workers[0] < 1
    ):
        raise UserError("--workers: distinct worker counts from 1 up, in ascending order")
    base = settings.policy or LocalPolicy()
    base.require_key_bits(settings.job.key_bits)
    base.require_records(settings.records)
    if settings.lanes not in LANES:
        raise UserError(f"--lanes must be one of {', '.join(LANES)}")
    if settings.lanes == "workers" and max(settings.workers) > MAX_TERM_LANES:
        raise UserError(f"--lanes workers: at most {MAX_TERM_LANES} terms lanes, so W <= that")
    lanes = {
        w: w if settings.lanes == "workers" else settings.job.term_lanes for w in settings.workers
    }
    policies = {w: scale_policy(base, settings.executor, w, lanes[w]) for w in settings.workers}
    if settings.executor == "ray" and (missing := ray_missing_message()) is not None:
        raise UserError(missing)
    params = settings.job.params()
    runs: list[dict[str, Any]] = []
    baseline: dict[str, Any] | None = None
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-scale-"))
    try:
        _, _, files = sample_pair_files(settings.network, settings.records, settings.seed, work)
        for workers, policy in policies.items():
            for repeat in range(settings.repeat):
                with LocalPair(files, settings.timeout_s, policy=policy) as pair:
                    run = run_learn(pair, {**params, "term_lanes": lanes[workers]})
                    cpu = {r: _phase_cpu(pair.out_dir(r) / run.outcome.job_id) for r in ROLES}
                result = _result(run.learned)
                baseline = baseline or result
                runs.append(
                    _figures(run, workers, repeat, result == baseline)
                    | {"term_lanes": _agreed_lanes(run, lanes[workers]), "phase_cpu": cpu}
                )
                if progress is not None:
                    progress(
                        f"  W = {workers}, run {repeat + 1}/{settings.repeat}: {run.wall_s:.2f} s"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _report(settings, runs)


def _phase_cpu(job_dir: Path) -> dict[str, dict[str, float]]:
    """A party's CPU per phase, from the stats of the network.json it wrote."""
    import json

    return json.loads((job_dir / "network.json").read_text(encoding="utf-8"))["stats"]["phase_cpu"]


def amdahl_bound(serial_s: float, parallel_s: float, workers: int) -> float | None:
    """Amdahl's law: the speed-up at ``workers`` of work whose serial fraction is s =
    serial / (serial + parallel), 1 / (s + (1 - s) / workers), in [1, workers]. It assumes
    the parallel part divides perfectly over the workers and that nothing else (the link,
    the peer, the pool's own cost) limits. None without any CPU to divide."""
    total = serial_s + parallel_s
    if total <= 0:
        return None
    serial = max(0.0, serial_s) / total
    return 1 / (serial + (1 - serial) / workers)


def _cpu_of(cpu: dict[str, dict[str, float]], phase: str) -> tuple[float, float] | None:
    """A party's (serial, parallel) CPU seconds of ``phase``; of the whole job, the sum of
    every entry, the CPU outside the phases included."""
    entries = list(cpu.values()) if phase == WHOLE_JOB else [cpu[phase]] if phase in cpu else []
    if not entries:
        return None
    return sum(c["serial_s"] for c in entries), sum(c["parallel_s"] for c in entries)


def _bounded(serial: float, parallel: float) -> dict[str, float | None]:
    """The figures of one party's phase: its CPU, serial fraction and Amdahl bounds."""
    total = serial + parallel
    bounds = {f"bound_at_{n}": amdahl_bound(serial, parallel, n) for n in AMDAHL_AT}
    return {
        "serial_s": round(serial, 3),
        "parallel_s": round(parallel, 3),
        "serial_fraction": round(serial / total, 4) if total > 0 else None,
        **{key: None if b is None else round(b, 2) for key, b in bounds.items()},
    }


def amdahl_by_phase(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per phase and for the whole job: each party's median serial and parallel CPU over
    ``runs`` (those of one W) with its bounds at ``AMDAHL_AT``, and the phase's bound, the
    lower party's (each waits on the other)."""
    from statistics import median

    phases = list(dict.fromkeys(p for r in runs for cpu in r["phase_cpu"].values() for p in cpu))
    out: dict[str, dict[str, Any]] = {}
    for phase in [*phases, WHOLE_JOB]:
        entry: dict[str, Any] = {}
        for role in ROLES:
            figures = [f for r in runs if (f := _cpu_of(r["phase_cpu"][role], phase))]
            if figures:
                entry[role] = _bounded(median(f[0] for f in figures), median(f[1] for f in figures))
        for n in AMDAHL_AT:
            key = f"bound_at_{n}"
            bounds = [entry[r][key] for r in ROLES if entry.get(r, {}).get(key) is not None]
            entry[key] = min(bounds) if bounds else None
        out[phase] = entry
    return out


def _result(learned: dict[str, Any]) -> dict[str, Any]:
    """What the executor must not change: the structure, its order, and the CPTs."""
    return {
        "edges": learned["edges"],
        "moves": learned.get("moves"),
        "cpts": {v: p["table"] for v, p in learned["parameters"].items()},
    }


def _figures(run: LearnRun, workers: int, repeat: int, same: bool) -> dict[str, Any]:
    """One run's figures: the operator's wall time, and each party's own per-phase seconds."""
    parties = {s["role"]: s for s in (run.outcome.stats, run.outcome.peer_stats) if s}
    return {
        "workers": workers,
        "repeat": repeat + 1,
        "wall_s": round(run.wall_s, 3),
        "party_wall_s": {r: s["wall_s"] for r, s in parties.items()},
        "phases_s": {r: s["phases"] for r, s in parties.items()},
        "edges": len(run.learned["edges"]),
        "same_result_as_baseline": same,
    }


def _agreed_lanes(run: LearnRun, asked: int | str) -> int | str:
    """The terms lanes the job ran with (its statistics' ``term_lanes``: what "auto"
    became), else what it was asked for."""
    return (run.outcome.stats or {}).get("term_lanes", asked)


def _phase_seconds(run: dict[str, Any]) -> dict[str, float]:
    """Each phase's seconds at the slower party (the two wait on each other), and the job."""
    seconds: dict[str, float] = {}
    for phases in run["phases_s"].values():
        for phase, value in phases.items():
            seconds[phase] = max(seconds.get(phase, 0.0), value)
    return {**seconds, WHOLE_JOB: run["wall_s"]}


def _report(settings: ScaleSettings, runs: list[dict[str, Any]]) -> dict[str, Any]:
    from statistics import median

    from ppbn.protocols.tables.config import TablesConfig

    serial_below = TablesConfig.serial_below
    cores = os.cpu_count() or 1
    most = max(settings.workers)
    by_workers: dict[int, dict[str, float]] = {}
    for workers in settings.workers:
        each = [_phase_seconds(r) for r in runs if r["workers"] == workers]
        phases = list(dict.fromkeys(p for seconds in each for p in seconds))
        by_workers[workers] = {p: round(median(s[p] for s in each if p in s), 3) for p in phases}
    return {
        "network": settings.network,
        "records": settings.records,
        "max_parents": settings.job.max_parents,
        "score": settings.job.score,
        "search": settings.job.search,
        "key_bits": settings.job.key_bits,
        "executor": settings.executor,
        "workers": list(settings.workers),
        "lanes": settings.lanes,
        "repeat": settings.repeat,
        "cores": cores,
        "warning": (
            f"{most} workers per party on {cores} cores: the figures measure "
            "oversubscription, not scaling"
            if most > cores
            else None
        ),
        "note": (
            f"fewer than {serial_below:,} records: the table phase runs inline at every W"
            if settings.records < serial_below
            else None
        ),
        "baseline_workers": settings.workers[0],
        "same_results": all(r["same_result_as_baseline"] for r in runs),
        "median_seconds": {str(w): s for w, s in by_workers.items()},
        "amdahl_workers": list(AMDAHL_AT),
        "amdahl_assumes": "the parallel CPU divides perfectly over the workers; the serial "
        "CPU, the link and the peer limit nothing else",
        "amdahl": {
            str(w): amdahl_by_phase([r for r in runs if r["workers"] == w])
            for w in settings.workers
        },
        "runs": runs,
    }


def _cell(seconds: float | None, base: float | None) -> str:
    if seconds is None:
        return "-"
    text = f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"
    return f"{text} ({base / seconds:.1f}x)" if base and seconds else text


def _cpu_cell(figures: dict[str, Any] | None) -> str:
    if figures is None:
        return "-"
    return f"{figures['serial_s']:.2f} + {figures['parallel_s']:.2f}"


def _bound_cell(bound: float | None) -> str:
    return "-" if bound is None else f"{bound:.1f}x"


def scale_header(report: dict[str, Any]) -> tuple[str, ...]:
    """The columns of ``scale_rows``."""
    return (
        "phase",
        *(f"W = {w}" for w in report["median_seconds"]),
        *(f"{role} CPU" for role in ROLES),
        *(f"Amdahl {n}" for n in report["amdahl_workers"]),
    )


def scale_legend(report: dict[str, Any]) -> str:
    """What the CPU and Amdahl columns of ``scale_rows`` hold."""
    return (
        f"CPU: each party's serial + parallel CPU seconds at W = {report['baseline_workers']}; "
        "Amdahl N: the speed-up Amdahl's law allows from them at N workers per party (the "
        f"lower party's), assuming {report['amdahl_assumes']}"
    )


def scale_rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """The table for people: each phase's median seconds per W, with the speed-up over the
    baseline W; then, at the baseline W, each party's serial and parallel CPU and the
    speed-up Amdahl's law allows at each of ``amdahl_workers`` (``amdahl_bound``)."""
    columns = report["median_seconds"]
    base = columns[str(report["baseline_workers"])]
    amdahl = report["amdahl"][str(report["baseline_workers"])]
    sources = [*columns.values(), amdahl]
    phases = list(dict.fromkeys(p for s in sources for p in s if p != WHOLE_JOB))
    return [
        (
            phase,
            *(_cell(s.get(phase), base.get(phase)) for s in columns.values()),
            *(_cpu_cell(amdahl.get(phase, {}).get(role)) for role in ROLES),
            *(
                _bound_cell(amdahl.get(phase, {}).get(f"bound_at_{n}"))
                for n in report["amdahl_workers"]
            ),
        )
        for phase in [*phases, WHOLE_JOB]
    ]
