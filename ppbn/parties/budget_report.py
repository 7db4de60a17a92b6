"""A host's privacy budgets as one JSON report (``ppbn budget show``): per data set the
sums, the policy's totals and what is left, and every run with its status; and as text."""

from __future__ import annotations

import math
from typing import Any

from ppbn.jobs.policy import LocalPolicy
from ppbn.parties.budget import PrivacyBudget

DATASET_SHOWN = 16  # hex digits of a data set's key in the text view (json: all of them)


def budget_report(budget: PrivacyBudget, policy: LocalPolicy) -> dict[str, Any]:
    """The budgets as JSON: per data set the sums, the totals and what is left, the runs."""
    out = []
    for dataset in budget.datasets():
        runs = budget.runs(dataset)
        spent = [r.first for r in runs if r.spent]
        epsilon = math.fsum(e.epsilon for e in spent)
        delta = math.fsum(e.delta for e in spent)
        out.append(
            {
                "dataset": dataset,
                "epsilon_spent": epsilon,
                "delta_spent": delta,
                "epsilon_left": max(budget.total_epsilon - epsilon, 0.0),
                "delta_left": max(budget.total_delta - delta, 0.0),
                "runs": [
                    {
                        "job_id": r.first.job_id,
                        "run": r.first.run,
                        "kind": r.first.kind,
                        "epsilon": r.first.epsilon,
                        "delta": r.first.delta,
                        "time": r.first.time,
                        "initiator": r.first.initiator,
                        "status": r.status.split(" ")[0],
                        "spent": r.spent,
                    }
                    for r in runs
                ],
            }
        )
    return {
        "budget_dir": str(budget.folder),
        "exists": budget.folder.exists(),
        "policy": policy.source,
        "total_epsilon": budget.total_epsilon,
        "total_delta": budget.total_delta,
        "max_epsilon_per_job": policy.dp_max_epsilon,
        "max_delta_per_job": policy.dp_max_delta,
        "datasets": out,
    }


STATUS_WORDS = {
    "released": "released",
    "refunded": "refunded: ended before anything was opened",
    "reserved": "reserved: ended without a record, counted as spent",
}


def budget_text(report: dict[str, Any]) -> str:
    """``budget_report`` for a person: per data set what was spent and is left, each run."""
    lines = [
        f"privacy budgets in {report['budget_dir']} (policy {report['policy']}: per data set "
        f"epsilon {report['total_epsilon']:g} and delta {report['total_delta']:g} in all; per "
        f"job epsilon {report['max_epsilon_per_job']:g}, delta {report['max_delta_per_job']:g})"
    ]
    if not report["datasets"]:
        lines.append("nothing spent: no data set has an account here")
    for item in report["datasets"]:
        lines.append(
            f"data set {item['dataset'][:DATASET_SHOWN]}: epsilon {item['epsilon_spent']:g} spent "
            f"of {report['total_epsilon']:g}, {item['epsilon_left']:g} left; delta "
            f"{item['delta_spent']:g} spent of {report['total_delta']:g}, "
            f"{item['delta_left']:g} left"
        )
        for run in item["runs"]:
            lines.append(
                f"  {run['time']}  job {run['job_id']}  {run['kind']}  epsilon {run['epsilon']:g}  "
                f"delta {run['delta']:g}  by {run['initiator']}  ({STATUS_WORDS[run['status']]})"
            )
    return "\n".join(lines)
