"""``ppbn budget show`` and ``ppbn budget adopt``: a host's privacy budgets for its operator.

The daemon keeps the accounts itself (``ppbn.parties.budget``: one file per data set in
this host's privacy-budget folder); ``show`` reads them and sets them against the
policy's totals, telling releases from runs refunded or cut short; ``adopt`` moves an
account kept elsewhere (another state folder, or a file beside an audit log) into the
folder, where a daemon that refused DP jobs for want of it finds it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "budget", help="show or adopt this host's privacy budgets (what DP jobs spent)"
    )
    sub = parser.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    show = sub.add_parser(
        "show",
        help="print epsilon and delta spent per data set, what the policy leaves, and the runs",
        description="Read this host's privacy budgets (one file per data set in the "
        "privacy-budget folder of $PPBN_STATE_DIR, else of ~/.local/state/ppbn) and print, "
        "per data set, the epsilon and delta its DP jobs spent, the policy's totals and what "
        "is left, and each run: released, refunded (ended before anything was opened) or "
        "reserved (ended without a record, counted as spent).",
    )
    _folder_option(show)
    show.add_argument(
        "--policy",
        metavar="FILE",
        help="the daemon's policy file, for its totals (default: built-in)",
    )
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.set_defaults(func=_show)
    adopt = sub.add_parser(
        "adopt",
        help="move a data set's account kept elsewhere into this host's budget folder",
        description="Append the charges of FILE (a data set's account from another state "
        "folder, or a privacy-budget.jsonl kept beside an audit log) to the accounts in the "
        "budget folder; each charge keeps counting as spent. A daemon that refused DP jobs "
        "because it found its data set's account elsewhere takes them again once the "
        "output folder's note names the adopted account (adopt rewrites it with --out).",
    )
    adopt.add_argument("file", metavar="FILE", help="the account to adopt")
    _folder_option(adopt)
    adopt.add_argument(
        "--out",
        metavar="DIR",
        help="the daemon's output folder, whose note of its budgets is pointed at the adopted "
        "accounts",
    )
    adopt.set_defaults(func=_adopt)


def _folder_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget-dir",
        metavar="DIR",
        help="the privacy-budget folder (default: STATE/privacy-budget, STATE from "
        "$PPBN_STATE_DIR, else $XDG_STATE_HOME/ppbn, else ~/.local/state/ppbn)",
    )


def _budget(args: argparse.Namespace, total_epsilon: float = 0.0, total_delta: float = 0.0):
    from ppbn.parties.budget import PrivacyBudget, budget_folder

    folder = Path(args.budget_dir) if args.budget_dir else budget_folder()
    return PrivacyBudget(folder, total_epsilon, total_delta)


def _show(args: argparse.Namespace) -> int:
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.parties.budget_report import budget_report, budget_text

    policy = LocalPolicy.load(args.policy)
    budget = _budget(args, policy.dp_total_epsilon, policy.dp_total_delta)
    report = budget_report(budget, policy)
    print(json.dumps(report, indent=2) if args.format == "json" else budget_text(report))
    return 0


def _adopt(args: argparse.Namespace) -> int:
    from ppbn.parties.budget_adopt import adopt_account
    from ppbn.parties.budget_report import DATASET_SHOWN

    budget = _budget(args)
    counts = adopt_account(budget, Path(args.file), Path(args.out) if args.out else None)
    for dataset, count in sorted(counts.items()):
        print(
            f"adopted {count} charge(s) of data set {dataset[:DATASET_SHOWN]} into "
            f"{budget.path(dataset)}"
        )
    return 0
