"""Where a data set's privacy budget lives, and a daemon that cannot find it.

The budget of a data set is one file in this host's privacy-budget folder
(``budget.budget_folder``), keyed by the data set, so no flag of ``ppbn party serve``
starts a new account. Each output folder also keeps a note, ``privacy-budget.json``, of
the accounts its daemon used: a daemon that finds its data set's account named there
but missing from its folder, or kept in another folder, or an account of the data set in
the place where earlier versions kept it (``privacy-budget.jsonl`` beside the audit log),
says so and refuses DP jobs until its operator acts (``ppbn budget adopt``, or the state
folder restored); it never starts the data set over at zero.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ppbn.errors import UserError
from ppbn.parties.budget import STATE_ENV, PrivacyBudget

NOTE_FILE = "privacy-budget.json"  # in the daemon's output folder: data set -> account file
LEGACY_FILE = "privacy-budget.jsonl"  # one file of every data set, beside the audit log
AUDIT_LOG = "audit.log"  # the audit log's default name in the output folder (DaemonConfig)


class BudgetNotFound(UserError):
    """The data set had an account this daemon cannot see: no DP job until it can."""


def legacy_paths(out_dir: str | Path, audit_log: str | Path | None) -> list[Path]:
    """Where an account of every data set was kept beside the audit log."""
    folders = {Path(out_dir)}
    if audit_log:
        folders.add(Path(audit_log).parent)
    return sorted(folder / LEGACY_FILE for folder in folders)


def _note(out_dir: str | Path) -> dict[str, str]:
    path = Path(out_dir) / NOTE_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BudgetNotFound(
            f"{path}: cannot read this output folder's note of its privacy budgets ({exc}); "
            "restore it or remove it once the budgets are in place"
        ) from None
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise BudgetNotFound(f"{path}: not a JSON object of data set -> budget file")
    return raw


def check_home(
    budget: PrivacyBudget, dataset: str, out_dir: str | Path, audit_log: str | Path | None
) -> None:
    """Refuse (``BudgetNotFound``) when ``dataset``'s account is known to be elsewhere or
    missing; nothing to say for a data set never charged anywhere this daemon can see."""
    own = budget.path(dataset)
    noted = _note(out_dir).get(dataset)
    act = (
        f"move the account into this daemon's folder with `ppbn budget adopt FILE "
        f"--budget-dir {budget.folder}`, or start the daemon with {STATE_ENV} set to the "
        "state folder that holds it"
    )
    if noted and Path(noted) != own:
        raise BudgetNotFound(
            f"the privacy budget of this data set is kept in {noted}, and this daemon's "
            f"budget folder is {budget.folder}: DP jobs are refused until one account is in "
            f"place; {act}"
        )
    if noted and not own.exists():
        raise BudgetNotFound(
            f"the privacy budget of this data set, {own}, is missing (this output folder "
            "noted it): DP jobs are refused until it is restored from a backup, or the "
            "operator adopts the account with `ppbn budget adopt`"
        )
    if own.exists():
        return
    for legacy in legacy_paths(out_dir, audit_log):
        if _mentions(legacy, dataset):
            raise BudgetNotFound(
                f"{legacy} holds charges of this data set, outside this daemon's budget "
                f"folder {budget.folder}: DP jobs are refused until they are adopted; {act}"
            )


def _mentions(path: Path, dataset: str) -> bool:
    try:
        return dataset.encode() in path.read_bytes()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise BudgetNotFound(f"cannot read {path}: {exc.strerror or exc}") from None


def note_home(budget: PrivacyBudget, dataset: str, out_dir: str | Path) -> None:
    """Write down, in the output folder, where ``dataset``'s account is (written whole:
    a temporary file renamed over the note)."""
    note = _note(out_dir)
    path = str(budget.path(dataset))
    if note.get(dataset) == path:
        return
    note[dataset] = path
    target = Path(out_dir) / NOTE_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{NOTE_FILE}.tmp")
    temporary.write_text(json.dumps(note, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, target)
