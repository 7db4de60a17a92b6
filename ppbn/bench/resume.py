"""The ``bench resume`` engine: what a checkpoint saves when a daemon dies late in a job.

Two daemon processes over loopback mutual TLS (as ``bench k2``) run the learn job once
uninterrupted; then run it again, SIGKILL bob's daemon (with its workers, as the OOM
killer would) at a given share of the uninterrupted wall time, restart it, and continue
the job with ``resume`` from both daemons' checkpoints. The report gives the
uninterrupted wall time, when the kill came, how long alice took to report it, the
restart, the resumed run, and the time saved against running the job again from the
start; and whether the resumed result equals the uninterrupted one.

    report = bench_resume(ResumeSettings("asia", 2000, kill_at=0.5))
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bn.constants import DEFAULT_TAU
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.pair.loopback import LocalPair

POLL_S = 0.2


@dataclass(frozen=True)
class ResumeSettings:
    """One ``bench resume`` run: the learn job on ``records`` of ``network`` (``seed``),
    bob killed at ``kill_at`` (0.05 to 0.95) of the uninterrupted run's wall time."""

    network: str
    records: int
    seed: int = 7
    max_parents: int = 2
    score: str = "exact"
    tau: float = DEFAULT_TAU
    key_bits: int = 2048
    kill_at: float = 0.75
    timeout_s: float = 300.0


def bench_resume(
    settings: ResumeSettings, say: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Both runs, each step told to ``say`` as it ends; the report."""
    from ppbn.bench.pair_runs import sample_pair_files
    from ppbn.pair.loopback import LocalPair
    from ppbn.proto.party_pb2 import JobInfo

    if not 0.05 <= settings.kill_at <= 0.95:
        raise UserError("--kill-at must be between 0.05 and 0.95 of the uninterrupted run")
    tell = say or (lambda text: None)
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-resume-"))
    try:
        _, _, files = sample_pair_files(settings.network, settings.records, settings.seed, work)
        params = {
            "max_parents": settings.max_parents,
            "score": settings.score,
            "tau": settings.tau,
            "key_bits": settings.key_bits,
        }
        with LocalPair(files, settings.timeout_s) as pair, pair.client("alice") as client:
            tell(
                f"uninterrupted run: {settings.network}, {settings.records:,} records, u = {settings.max_parents}"
            )
            started = time.perf_counter()
            full_id = client.start("learn", params)
            full = client.wait(full_id)
            full_s = time.perf_counter() - started
            if full.state != "SUCCEEDED":
                raise UserError(f"the uninterrupted job failed: {full.error}")
            tell(
                f"  {full_s:.1f} s; now the same job, bob killed at {settings.kill_at:.0%} of that"
            )
            started = time.perf_counter()
            job_id = client.start("learn", params)
            while time.perf_counter() - started < settings.kill_at * full_s:
                if client.status(job_id).state != JobInfo.RUNNING:
                    raise UserError(
                        "the second run ended before the kill (a loaded machine varies run times): try a lower --kill-at"
                    )
                time.sleep(POLL_S)
            killed_at_s = time.perf_counter() - started
            pair.kill("bob")
            killed = time.perf_counter()
            failed = client.wait(job_id)
            detected_s = time.perf_counter() - killed
            if failed.state != "FAILED":
                raise UserError(f"the killed run ended {failed.state}, not FAILED")
            tell(
                f"  killed at {killed_at_s:.1f} s; alice reported it after {detected_s:.1f} s: {failed.error}"
            )
            started = time.perf_counter()
            pair.restart("bob")
            restart_s = time.perf_counter() - started
            started = time.perf_counter()
            try:
                client.start("learn", {}, job_id, resume=True)
            except UserError as exc:
                if "nothing to resume" not in str(exc):
                    raise
                raise UserError(
                    f"bob was killed at {killed_at_s:.1f} s ({settings.kill_at:.0%} of the "
                    "uninterrupted run), before the job's first checkpoint: nothing to resume; "
                    "try a higher --kill-at"
                ) from None
            resumed = client.wait(job_id)
            resume_s = time.perf_counter() - started
            if resumed.state != "SUCCEEDED":
                raise UserError(f"the resumed job failed: {resumed.error}")
            same_edges, cpt_diff = _same_network(_network(pair, full_id), _network(pair, job_id))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "network": settings.network,
        "records": settings.records,
        "max_parents": settings.max_parents,
        "score": settings.score,
        "uninterrupted_s": round(full_s, 2),
        "killed_at_s": round(killed_at_s, 2),
        "detected_after_s": round(detected_s, 2),
        "restart_s": round(restart_s, 2),
        "resume_s": round(resume_s, 2),
        "saved_vs_rerun_s": round(full_s - resume_s, 2),
        "saved_vs_rerun_share": round((full_s - resume_s) / full_s, 3),
        "same_edges_and_order": same_edges,
        "max_abs_cpt_difference": cpt_diff,
    }


def resumed_equal(report: dict[str, Any]) -> bool:
    """Whether the resumed job learned what the uninterrupted one did."""
    return report["same_edges_and_order"] and report["max_abs_cpt_difference"] < 1e-9


def _network(pair: LocalPair, job_id: str) -> dict[str, Any]:
    return json.loads((pair.out_dir("alice") / job_id / "network.json").read_text())


def _same_network(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, float]:
    """Same edges in the same order, and the largest CPT difference."""
    import numpy as np

    diff = max(
        float(
            np.max(
                np.abs(
                    np.array(a["parameters"][v]["table"]) - np.array(b["parameters"][v]["table"])
                )
            )
        )
        for v in a["parameters"]
    )
    return a["edges"] == b["edges"], diff
