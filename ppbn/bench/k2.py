"""The ``bench k2`` engine: the whole private K2 + parameters job between two daemon
processes over loopback mutual TLS (as ``ppbn simulate`` runs it), optionally through
ppbn's shaping TCP relay (``ppbn.pair.shaper``), and its report: wall time, phases,
traffic (per phase and message kind), AND gates, OTs and the Paillier encryptions next
to what the paper's per-alpha method would need on the same families. With
``check_reference`` it also learns the non-private reference on the same data and says
whether structure, edge order and parameters agree.

    report = bench_k2(K2Settings("asia", 2000, job=LearnJob(max_parents=2, score="bic")))
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bench.pair_runs import LearnJob, LearnRun, run_learn, sample_pair_files
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.jobs.progress import JobProgress
    from ppbn.pair.loopback import LocalPair, PairFiles


@dataclass(frozen=True)
class K2Settings:
    """One ``bench k2`` run: ``records`` of ``network`` (``seed``), each party holding
    ``overlap`` of its records at the other too and ``missing_rate`` of the cells emptied,
    the daemons under ``policy`` (None: the built-in one) with the ``missing`` rule and
    ``align``; ``link`` a link model as ``RATE[/RTT]`` (``100mbit/20ms``)."""

    network: str
    records: int
    seed: int = 7
    job: LearnJob = field(default_factory=LearnJob)
    missing: str = "error"
    missing_rate: float = 0.0
    align: str = "strict"
    overlap: float = 1.0
    link: str | None = None
    policy: LocalPolicy | None = None
    timeout_s: float = 600.0
    check_reference: bool = False


def bench_k2(
    settings: K2Settings, progress: Callable[[JobProgress], None] | None = None
) -> dict[str, Any]:
    """Sample the data, start both daemons, run the learn job (its progress to
    ``progress``) and return the report; the daemons and the data are gone afterwards."""
    from ppbn.pair.loopback import LocalPair
    from ppbn.pair.shaper import parse_link

    link = parse_link(settings.link) if settings.link else None
    if settings.records < 2:
        raise UserError("--records must be at least 2")
    if settings.check_reference and settings.job.dp_params.get("dp_epsilon") is not None:
        raise UserError(
            "--check-reference compares with the exact reference; a --dp-epsilon release is "
            "noisy by design (measure its utility with `ppbn bench dp`)"
        )
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-k2-"))
    try:
        _, blanked, files = sample_pair_files(
            settings.network,
            settings.records,
            settings.seed,
            work,
            settings.overlap,
            settings.missing_rate,
        )
        pair = LocalPair(
            files,
            settings.timeout_s,
            policy=settings.policy,
            missing_rule=settings.missing,
            align=settings.align,
            link=link,
        )
        with pair:
            run = run_learn(pair, settings.job.params(), progress)
        report = _report(settings, run, blanked, pair)
        if settings.check_reference:
            report["reference"] = reference_agreement(run, files, settings.missing, settings.align)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _report(settings: K2Settings, run: LearnRun, blanked: int, pair: LocalPair) -> dict[str, Any]:
    """The run's figures: the job's own (alice's network.json), each party's, the link's."""
    job, learned, outcome, policy = settings.job, run.learned, run.outcome, pair.policy
    parties = {s["role"]: s for s in (outcome.stats, outcome.peer_stats) if s}
    inner = learned["stats"]
    link = f", through ppbn's link model {pair.link_spec.text}" if pair.link_spec else ""
    report: dict[str, Any] = {
        "network": settings.network,
        "records": settings.records,
        "max_parents": job.max_parents,
        "score": job.score,
        "tau": job.tau,
        "key_bits": job.key_bits,
        "missing": settings.missing,
        "missing_rate": settings.missing_rate,
        "cells_emptied": blanked,
        "transport": "gRPC over mutual TLS, loopback, two daemon processes" + link,
        "executor": policy.executor if policy else "local",
        "workers": policy.workers if policy else None,
        "overlap_tables": "on" if job.overlap_tables else "off",
        "split_terms": "on" if job.split_terms else "off",
        # what the job ran with ("auto" becomes the parties' agreement), else what it asked
        "term_lanes": (outcome.stats or {}).get("term_lanes", job.term_lanes),
        "ot_k": job.ot_k,
        "wall_s": round(run.wall_s, 2),
        "phases_s": {k: round(v, 2) for k, v in inner["phases"].items()},
        "bytes_sent": {r: s["bytes_sent"] for r, s in parties.items()},
        "rounds": max(s["rounds"] for s in parties.values()),
        "paillier_encryptions": sum(s["paillier_encryptions"] for s in parties.values()),
        "per_alpha_encryptions": inner["per_alpha_encryptions"],
        "and_gates": inner["and_gates"],
        "ots": inner["ots"],
        "ln_evaluations": inner["ln_evaluations"],
        "families_scored": inner["families_scored"],
        "search": job.search,
        "edges": len(learned["edges"]),
        **({"moves": len(learned["moves"])} if "moves" in learned else {}),
        **({"privacy": learned["privacy"]} if "privacy" in learned else {}),
    }
    if pair.link is not None:
        report["link"] = pair.link.stats()
    report["bytes_by_phase_and_kind"] = breakdown_rows(
        parties["alice"].get("bytes_by_phase_and_kind", {})
    )
    ln_bytes = sum(
        r["total"] for r in report["bytes_by_phase_and_kind"] if r["phase"].startswith("ln terms")
    )
    total = sum(report["bytes_sent"].values())
    if report["ln_evaluations"]:
        report["bytes_per_ln_term"] = {
            "ln_terms_phase": round(ln_bytes / report["ln_evaluations"]),
            "whole_job": round(total / report["ln_evaluations"]),
        }
    enc = report["paillier_encryptions"]
    report["fewer_encryptions_than_per_alpha"] = (
        round(report["per_alpha_encryptions"] / enc, 1) if enc else None
    )
    return report


def breakdown_rows(
    by_phase: dict[str, dict[str, dict[str, int]]], phase: str | None = None
) -> list[dict[str, Any]]:
    """Alice's per-(phase, tag) counters as rows, largest first: what she sent is
    alice -> bob, what she received bob -> alice (the channel is between the two only)."""
    rows = [
        {
            "phase": section if phase is None else phase,
            "kind": tag,
            "alice_to_bob": c["bytes_sent"],
            "bob_to_alice": c["bytes_received"],
            "total": c["bytes_sent"] + c["bytes_received"],
            "messages": c["messages_sent"] + c["messages_received"],
        }
        for section, kinds in by_phase.items()
        for tag, c in kinds.items()
    ]
    grand = sum(r["total"] for r in rows) or 1
    for row in rows:
        row["share_pct"] = round(100 * row["total"] / grand, 2)
    return sorted(rows, key=lambda r: -r["total"])


def reference_agreement(
    run: LearnRun, files: PairFiles, missing: str, align: str
) -> dict[str, Any]:
    """The non-private reference on the data the daemons loaded (read back from the CSVs,
    so emptied cells and the ``missing`` rule are the daemons'), under the parameters the
    job ran with (``pair.reference``), against the secure result."""
    import numpy as np

    from ppbn.pair.reference import learn_pair_reference

    ref, _, _ = learn_pair_reference(
        files.schema,
        files.data["alice"],
        files.data["bob"],
        run.job_params(),
        missing,
        align,
    )
    learned = run.learned
    same_moves = ref.same_moves(learned["moves"]) if "moves" in learned else None
    same = [list(e) for e in learned["edges"]] == [list(e) for e in ref.search.edges]
    same = same and same_moves is not False
    parents = {v: tuple(ps) for v, ps in learned["parents"].items()}
    diff = None
    if learned.get("parameters") and parents == dict(ref.network.parents):
        diff = max(
            float(np.max(np.abs(np.asarray(p["table"], dtype=float) - ref.network.cpts[v])))
            for v, p in learned["parameters"].items()
        )
    same_records = (learned.get("family_records") or {}).get("families") == ref.family_records()
    return {
        "equal": bool(same and diff is not None and diff < 1e-9 and same_records),
        "same_structure_and_order": same,
        "max_abs_cpt_difference": diff,
        "same_family_records": same_records,
    }
