"""A host's privacy budgets as one JSON report (``ppbn budget show``): per data set the
sums, the policy's totals and what is left, and every run with its status."""

from __future__ import annotations

import math
from typing import Any

from ppbn.jobs.policy import LocalPolicy
from ppbn.parties.budget import PrivacyBudget


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
