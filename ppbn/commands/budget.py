"""``ppbn budget show``: what a daemon's differentially private jobs spent of its data sets.

The daemon keeps the account itself (``ppbn.parties.budget``, one line per charged job
beside its audit log); this reads it and sets it against the policy's total.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

DATASET_SHOWN = 16  # hex digits of a data set's key in the text view (json: all of them)


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "budget", help="show what a daemon's differentially private jobs spent (privacy budget)"
    )
    sub = parser.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    show = sub.add_parser(
        "show",
        help="print epsilon and delta spent per data set, what the policy leaves, and the jobs",
        description="Read a daemon's privacy budget (privacy-budget.jsonl, beside its audit "
        "log) and print, per data set, the epsilon and delta its DP jobs spent, the policy's "
        "total and what is left, and each charged job.",
    )
    where = show.add_mutually_exclusive_group()
    where.add_argument(
        "--out-dir",
        "--out",
        dest="out_dir",
        metavar="DIR",
        default="ppbn-out",
        help="the daemon's output folder: its budget is DIR/privacy-budget.jsonl (default ppbn-out)",
    )
    where.add_argument(
        "--budget", metavar="FILE", help="the budget file (of a daemon with its own --audit-log)"
    )
    show.add_argument(
        "--policy",
        metavar="FILE",
        help="the daemon's policy file, for its totals (default: built-in)",
    )
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.parties.budget import PrivacyBudget, budget_path

    policy = LocalPolicy.load(args.policy)
    path = Path(args.budget) if args.budget else budget_path(args.out_dir)
    budget = PrivacyBudget(path, policy.dp_total_epsilon)
    report = budget_report(budget, policy.dp_max_epsilon, policy.source)
    print(json.dumps(report, indent=2) if args.format == "json" else budget_text(report))
    return 0


def budget_report(budget: Any, max_epsilon: float, policy_source: str) -> dict[str, Any]:
    """The budget as JSON: per data set the sums, the total and what is left, the entries."""
    entries = budget.entries()
    datasets: dict[str, list[Any]] = {}
    for entry in entries:
        datasets.setdefault(entry.dataset, []).append(entry)
    out = []
    for dataset, own in datasets.items():  # sums of this one reading of the file
        epsilon = math.fsum(e.epsilon for e in own)
        out.append(
            {
                "dataset": dataset,
                "epsilon_spent": epsilon,
                "delta_spent": math.fsum(e.delta for e in own),
                "epsilon_left": max(budget.total_epsilon - epsilon, 0.0),
                "jobs": [
                    {
                        "job_id": e.job_id,
                        "kind": e.kind,
                        "epsilon": e.epsilon,
                        "delta": e.delta,
                        "time": e.time,
                        "initiator": e.initiator,
                    }
                    for e in own
                ],
            }
        )
    return {
        "budget": str(budget.path),
        "exists": budget.path.exists(),
        "policy": policy_source,
        "total_epsilon": budget.total_epsilon,
        "max_epsilon_per_job": max_epsilon,
        "datasets": out,
    }


def budget_text(report: dict[str, Any]) -> str:
    lines = [
        f"privacy budget {report['budget']} (policy {report['policy']}: epsilon "
        f"{report['total_epsilon']:g} in all per data set, {report['max_epsilon_per_job']:g} per job)"
    ]
    if not report["exists"]:
        lines.append("nothing spent: the file does not exist (no DP job has run with this daemon)")
    elif not report["datasets"]:
        lines.append("nothing spent: the file holds no charge")
    for item in report["datasets"]:
        lines.append(
            f"data set {item['dataset'][:DATASET_SHOWN]}: epsilon {item['epsilon_spent']:g} spent "
            f"of {report['total_epsilon']:g}, {item['epsilon_left']:g} left; "
            f"delta {item['delta_spent']:g} spent"
        )
        for job in item["jobs"]:
            lines.append(
                f"  {job['time']}  job {job['job_id']}  {job['kind']}  epsilon {job['epsilon']:g}  "
                f"delta {job['delta']:g}  by {job['initiator']}"
            )
    return "\n".join(lines)
