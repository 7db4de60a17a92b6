"""Adopting a data set's privacy account kept elsewhere (``ppbn budget adopt``).

The operator's act a daemon asks for when it refuses DP jobs because its data set's account
is not in its budget folder (``budget_home``). Every charge of the file keeps counting:
an account in the per-run form (``budget.FIELDS``) is appended as it is; a line of one
charge per job (time, job, kind, data set, epsilon, delta, initiator), the form kept beside
an audit log, becomes a run reserved and released.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppbn.errors import UserError
from ppbn.jobs.policy import finite_non_negative
from ppbn.parties.budget import FIELDS, BudgetEntry, PrivacyBudget, parse_entry
from ppbn.parties.budget_home import note_home

CHARGE_FIELDS = ("time", "job_id", "kind", "dataset", "epsilon", "delta", "initiator")


def _charge(raw: Any, number: int) -> list[BudgetEntry] | None:
    """A one-charge-per-job line as a reserved and released run, or None."""
    if not isinstance(raw, dict) or set(raw) != set(CHARGE_FIELDS):
        return None
    if not all(isinstance(raw[k], str) for k in CHARGE_FIELDS if k not in ("epsilon", "delta")):
        return None
    if not (finite_non_negative(raw["epsilon"]) and finite_non_negative(raw["delta"])):
        return None
    base = {k: raw[k] for k in CHARGE_FIELDS}
    run = f"adopted-{number}"
    return [
        BudgetEntry(**base, run=run, event="reserve", peer=""),
        BudgetEntry(**{**base, "initiator": ""}, run=run, event="release", peer=""),
    ]


def read_account(path: Path) -> list[BudgetEntry]:
    """Every charge of ``path``, in either form; one line naming file and line otherwise."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    out: list[BudgetEntry] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raw = None
        entry = parse_entry(raw)
        entries = [entry] if entry is not None else _charge(raw, number)
        if not entries:
            raise UserError(
                f"{path}: line {number} is not a budget entry (the fields "
                f"{', '.join(FIELDS)}, or {', '.join(CHARGE_FIELDS)}); nothing was adopted"
            )
        out.extend(entries)
    return out


def adopt_account(budget: PrivacyBudget, path: Path, out_dir: Path | None) -> dict[str, int]:
    """Append every charge of ``path`` to the folder's accounts (and point ``out_dir``'s
    note at them); the number of runs adopted per data set."""
    entries = read_account(path)
    if not entries:
        raise UserError(f"{path}: holds no charge; nothing to adopt")
    counts: dict[str, int] = {}
    for dataset in sorted({e.dataset for e in entries}):
        if budget.path(dataset).absolute() == path.absolute():
            raise UserError(f"{path} is this folder's account already; nothing to adopt")
    for dataset in sorted({e.dataset for e in entries}):
        own = [e for e in entries if e.dataset == dataset]
        budget.append_entries(dataset, own)
        counts[dataset] = sum(1 for e in own if e.event == "reserve")
    if out_dir is not None:
        for dataset in counts:
            note_home(budget, dataset, out_dir)
    return counts
