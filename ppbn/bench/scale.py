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


@dataclass(frozen=True)
class ScaleSettings:
    """One ``bench scale`` run: the ``job`` on ``records`` of ``network`` (``seed``) once per
    count of ``workers`` (ascending, distinct) and ``repeat`` times each, the daemons under
    ``policy`` (None: the built-in one) with ``executor`` (local or ray) at W > 1; ``lanes``
    job keeps the job's terms lanes at every W, workers runs W lanes at W workers."""

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
    base: LocalPolicy, executor: str, workers: int, term_lanes: int = 1
) -> LocalPolicy:
    """The daemons' policy at W workers: inline at 1; else ``executor`` at W with every
    garbled run and OT-extension call sent to it (a private Ray instance of W CPUs per
    daemon for ray, so that W means the same for both executors); and room for the job's
    ``term_lanes``."""
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
                result = _result(run.learned)
                baseline = baseline or result
                runs.append(
                    _figures(run, workers, repeat, result == baseline)
                    | {"term_lanes": lanes[workers]}
                )
                if progress is not None:
                    progress(
                        f"  W = {workers}, run {repeat + 1}/{settings.repeat}: {run.wall_s:.2f} s"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _report(settings, runs)


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
        "runs": runs,
    }


def _cell(seconds: float | None, base: float | None) -> str:
    if seconds is None:
        return "-"
    text = f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"
    return f"{text} ({base / seconds:.1f}x)" if base and seconds else text


def scale_rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """The table for people: each phase's median seconds per W, with the speed-up over the
    baseline W."""
    columns = report["median_seconds"]
    base = columns[str(report["baseline_workers"])]
    phases = list(dict.fromkeys(p for s in columns.values() for p in s if p != WHOLE_JOB))
    return [
        (phase, *(_cell(s.get(phase), base.get(phase)) for s in columns.values()))
        for phase in [*phases, WHOLE_JOB]
    ]
