"""This daemon's privacy budget: what its differentially private jobs spent of its data set.

A DP job's release is (epsilon, delta)-DP on its own; many releases of the same records
add up (basic composition: the epsilons sum, and so do the deltas). The local policy bounds
the sum (``dp_total_epsilon``), and each daemon keeps its own account, whatever its peer
keeps: one JSON object per line in ``privacy-budget.jsonl`` beside the audit log (time,
job, kind, data set, epsilon, delta, initiator). A job is charged once, before it sends
anything derived from the data (``ppbn.parties.runner``), and counts even when it fails
later: part of the release may have left. A resumed job is not charged twice.

A charge is checked and appended under a thread lock and an exclusive ``flock`` of the
folder (another process appending to the same file waits), written whole and fsynced; a
refusal or a failed write leaves the file byte for byte as it was. A line that cannot be
read is an error naming the file and line: a budget is never read as smaller than it is.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData
from ppbn.errors import UserError
from ppbn.jobs.checkpoint import data_digest
from ppbn.jobs.policy import PolicyRefusal, PrivacyCost, finite_non_negative

BUDGET_FILE = "privacy-budget.jsonl"
AUDIT_LOG = "audit.log"  # the audit log's default name in the output folder (DaemonConfig)
# relative slack of the sum against the total: 0.1 + 0.2 spent of a total 0.3 is all of it
ROUNDING = 1e-9
FIELDS = ("time", "job_id", "kind", "dataset", "epsilon", "delta", "initiator")


def budget_path(out_dir: str | Path, audit_log: str | Path | None = None) -> Path:
    """The budget file of a daemon: in the folder of its audit log (default OUT/audit.log)."""
    log = Path(audit_log) if audit_log else Path(out_dir) / AUDIT_LOG
    return log.parent / BUDGET_FILE


def dataset_key(schema: Schema, data: PartyData) -> str:
    """The data set a budget is spent on: this party's records (ids and values) under the
    schema. Other data, or the same data under another schema, is another account."""
    pair = f"{schema.fingerprint()}\n{data_digest(data.ids, data.codes)}"
    return hashlib.sha256(pair.encode()).hexdigest()


class DatasetKey:
    """``dataset_key`` of a daemon's data, computed once, on its first DP job (the digest
    reads every record)."""

    def __init__(self, schema: Schema, data: PartyData) -> None:
        self._schema, self._data = schema, data
        self._key = ""
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            if not self._key:
                self._key = dataset_key(self._schema, self._data)
            return self._key


@dataclass(frozen=True)
class BudgetEntry:
    """One charge: a job's epsilon and delta, spent on one data set."""

    time: str
    job_id: str
    kind: str
    dataset: str
    epsilon: float
    delta: float
    initiator: str


def _entry(raw: Any) -> BudgetEntry | None:
    """The entry a parsed line holds, or None when it is not one."""
    if not isinstance(raw, dict) or set(raw) != set(FIELDS):
        return None
    if not all(isinstance(raw[k], str) for k in FIELDS if k not in ("epsilon", "delta")):
        return None
    if not (finite_non_negative(raw["epsilon"]) and finite_non_negative(raw["delta"])):
        return None
    return BudgetEntry(**{k: raw[k] for k in FIELDS})


class PrivacyBudget:
    """The budget file of one daemon and the policy's total epsilon per data set."""

    def __init__(self, path: Path, total_epsilon: float) -> None:
        if not finite_non_negative(total_epsilon):
            raise ValueError(f"total epsilon must be finite and >= 0, not {total_epsilon!r}")
        self.path = Path(path)
        self.total_epsilon = float(total_epsilon)
        self._lock = threading.Lock()

    # -- reading -------------------------------------------------------------------
    def entries(self) -> list[BudgetEntry]:
        """Every charge, oldest first; none when the file does not exist yet."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UserError(
                f"cannot read the privacy budget {self.path}: {exc.strerror or exc}"
            ) from None
        if data and not data.endswith(b"\n"):
            line = data.count(b"\n") + 1
            raise UserError(
                f"{self.path}: line {line} is cut short (no newline at its end); the budget is "
                "not read as smaller than it is: restore the file, or finish the line by hand"
            )
        out = []
        for number, line in enumerate(data.splitlines(), start=1):
            try:
                entry = _entry(json.loads(line))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, TypeError):
                entry = None
            if entry is None:
                raise UserError(
                    f"{self.path}: line {number} is not a budget entry (a JSON object of "
                    f"{', '.join(FIELDS)}); the budget is not read as smaller than it is: "
                    "restore the file"
                )
            out.append(entry)
        return out

    def spent(self, dataset: str) -> tuple[float, float]:
        """Epsilon and delta spent on ``dataset``: the sums of its entries."""
        return _sums([e for e in self.entries() if e.dataset == dataset])

    def remaining(self, dataset: str) -> float:
        """Epsilon ``dataset`` has left under the policy's total."""
        return max(self.total_epsilon - self.spent(dataset)[0], 0.0)

    def charged(self, job_id: str, dataset: str | None = None) -> bool:
        """Whether job ``job_id`` was charged (on ``dataset``, or on any data set)."""
        return any(e.job_id == job_id and dataset in (None, e.dataset) for e in self.entries())

    # -- spending ------------------------------------------------------------------
    def check(self, job_id: str, dataset: str, cost: PrivacyCost) -> None:
        """Refuse a job that would spend more than ``dataset`` has left (a job already
        charged, resumed, passes: it spends nothing more)."""
        self._admit(self.entries(), job_id, dataset, cost)

    def charge(
        self, job_id: str, kind: str, dataset: str, cost: PrivacyCost, initiator: str
    ) -> bool:
        """Check and append the job's charge; False (nothing written) when it was charged
        before. Refuses with ``PolicyRefusal`` over the total, writing nothing."""
        with self._lock, self._folder_lock():
            entries = self.entries()
            if self._admit(entries, job_id, dataset, cost):
                return False
            entry = BudgetEntry(
                datetime.now(UTC).isoformat(timespec="seconds"),
                job_id,
                kind,
                dataset,
                float(cost.epsilon),
                float(cost.delta),
                initiator,
            )
            self._append(json.dumps(asdict(entry), sort_keys=True).encode() + b"\n")
            return True

    def _admit(
        self, entries: list[BudgetEntry], job_id: str, dataset: str, cost: PrivacyCost
    ) -> bool:
        """True when the job was charged already; PolicyRefusal when it would overspend."""
        if not (finite_non_negative(cost.epsilon) and finite_non_negative(cost.delta)):
            raise PolicyRefusal(
                "dp_epsilon", f"job {job_id or '(new)'}: epsilon and delta must be finite and >= 0"
            )
        own = [e for e in entries if e.dataset == dataset]
        if job_id and any(e.job_id == job_id for e in own):
            return True
        spent = _sums(own)[0]
        if spent + cost.epsilon > self.total_epsilon * (1 + ROUNDING):
            left = max(self.total_epsilon - spent, 0.0)
            raise PolicyRefusal(
                "dp_epsilon",
                f"job {job_id or '(new)'} would spend epsilon {cost.epsilon:g} on this data set; "
                f"spent {spent:g} of the policy's total {self.total_epsilon:g}, {left:g} left "
                f"(privacy budget {self.path})",
            )
        return False

    @contextmanager
    def _folder_lock(self) -> Iterator[None]:
        """An exclusive ``flock`` of the budget's folder (not of a lock file: a refusal
        leaves the folder as it was), for other processes with the same file."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError as exc:
            raise UserError(
                f"cannot open the folder of the privacy budget {self.path}: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _append(self, line: bytes) -> None:
        """Write one line whole and fsync it; on any failure put the file back as it was."""
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UserError(
                f"cannot write the privacy budget {self.path}: {exc.strerror or exc}"
            ) from None
        size = os.fstat(fd).st_size
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            _put_back(fd, size, self.path if created else None)
            raise UserError(
                f"cannot write the privacy budget {self.path}: {exc.strerror or exc}; "
                "the job is not charged and does not run"
            ) from None
        finally:
            os.close(fd)
        if created:
            _fsync_folder(self.path.parent)


def _sums(entries: list[BudgetEntry]) -> tuple[float, float]:
    return math.fsum(e.epsilon for e in entries), math.fsum(e.delta for e in entries)


def _put_back(fd: int, size: int, created: Path | None) -> None:
    """Cut a partly written line off again, or remove the file this write ``created``
    (best effort: the write already failed)."""
    try:
        if created is not None:
            created.unlink()
        else:
            os.ftruncate(fd, size)
            os.fsync(fd)
    except OSError:
        pass


def _fsync_folder(folder: Path) -> None:
    """Make a new file's name durable too."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
