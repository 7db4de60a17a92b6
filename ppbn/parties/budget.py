"""This daemon's privacy budget: what its differentially private jobs spent of its data set.

A DP job's release is (epsilon, delta)-DP on its own; many releases of the same records
add up (basic composition: the epsilons sum, and so do the deltas, Dwork and Roth 2014,
Thm. 3.16). The local policy bounds both sums (``dp_total_epsilon``, ``dp_total_delta``),
and each daemon keeps its own account, whatever its peer keeps.

The account belongs to the data set, not to the daemon's flags: one JSON-lines file per
data set (``dataset_key``: schema and records), in this host's privacy-budget folder
(``budget_folder``), which a restart with any ``--out`` or ``--audit-log`` finds again.

Every run of a DP job is accounted as three events (``EVENTS``), one line each:
- ``reserve``: before the run sends anything derived from the data, its (epsilon, delta)
  is set aside; refused, writing nothing, when the totals would be exceeded;
- ``release``: before this party contributes its first noise word (the first value the
  run can open); from then on the reservation is spent for good;
- ``refund``: the run ended before that: nothing it computed was opened, and the
  reservation is given back.
A reservation with neither (the daemon died) stays spent. A resumed run is a new run with
its own reservation: one charge buys one draw of each noisy value, however often a job is
resumed (docs/decisions/dp-one-charge-one-draw.md).

Each write is checked and appended under a thread lock and an exclusive ``flock`` of the
folder, written whole and fsynced; a refusal or a failed write leaves the file as it was.
A line that cannot be read is an error naming the file and line: a budget is never read as
smaller than it is.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData
from ppbn.errors import UserError
from ppbn.jobs.checkpoint import data_digest
from ppbn.jobs.policy import PolicyRefusal, PrivacyCost, finite_non_negative

STATE_ENV = "PPBN_STATE_DIR"  # where this host keeps ppbn's state (budgets); see budget_folder
BUDGET_FOLDER = "privacy-budget"
BUDGET_SUFFIX = ".jsonl"
# relative slack of the sum against the total: 0.1 + 0.2 spent of a total 0.3 is all of it
ROUNDING = 1e-9
EVENTS = ("reserve", "release", "refund")
FIELDS = (
    "time",
    "job_id",
    "run",
    "event",
    "kind",
    "dataset",
    "epsilon",
    "delta",
    "initiator",
    "peer",
)
RATE_WINDOW = timedelta(hours=1)  # the policy's dp_peer_jobs_per_hour counts over this


def budget_folder(state_dir: str | Path | None = None) -> Path:
    """This host's privacy-budget folder: ``state_dir`` when given, else ``$PPBN_STATE_DIR``,
    else ``$XDG_STATE_HOME/ppbn``, else ``~/.local/state/ppbn``; then ``privacy-budget``."""
    if state_dir is None:
        state_dir = os.environ.get(STATE_ENV) or ""
    if not state_dir:
        xdg = os.environ.get("XDG_STATE_HOME") or ""
        base = Path(xdg) if xdg else Path.home() / ".local" / "state"
        state_dir = base / "ppbn"
    return Path(state_dir).expanduser().absolute() / BUDGET_FOLDER


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
    """One event of one run of a DP job on one data set (``EVENTS``)."""

    time: str
    job_id: str
    run: str
    event: str
    kind: str
    dataset: str
    epsilon: float
    delta: float
    initiator: str
    peer: str  # the peer that opened the job here; "" when this daemon's operator did


@dataclass(frozen=True)
class RunTicket:
    """One run of a DP job in a data set's account: what each of its lines names."""

    job_id: str
    run: str  # fresh for every run, a resumed one too
    kind: str
    dataset: str
    cost: PrivacyCost
    initiator: str = ""
    peer: str = ""  # the peer that opened the job here; "" when this daemon's operator did


@dataclass(frozen=True)
class RunAccount:
    """What the lines of one run add up to: spent unless refunded."""

    first: BudgetEntry
    released: bool
    refunded: bool

    @property
    def spent(self) -> bool:
        return not self.refunded

    @property
    def status(self) -> str:
        if self.released:
            return "released"
        if self.refunded:
            return "refunded (ended before anything was opened)"
        return "reserved (the run ended without a record: counted as spent)"


def parse_entry(raw: Any) -> BudgetEntry | None:
    """The entry a parsed line holds, or None when it is not one."""
    if not isinstance(raw, dict) or set(raw) != set(FIELDS):
        return None
    if not all(isinstance(raw[k], str) for k in FIELDS if k not in ("epsilon", "delta")):
        return None
    if raw["event"] not in EVENTS or not _is_key(raw["dataset"]):
        return None
    if not (finite_non_negative(raw["epsilon"]) and finite_non_negative(raw["delta"])):
        return None
    return BudgetEntry(**{k: raw[k] for k in FIELDS})


def runs_of(entries: list[BudgetEntry]) -> list[RunAccount]:
    """Each run's account, in the order the runs were reserved. A release or refund without
    its reservation counts nothing; a refund after a release gives nothing back."""
    firsts: dict[tuple[str, str], BudgetEntry] = {}
    released: set[tuple[str, str]] = set()
    refunded: set[tuple[str, str]] = set()
    for e in entries:
        key = (e.job_id, e.run)
        if e.event == "reserve":
            firsts.setdefault(key, e)
        elif key in firsts and e.event == "release":
            released.add(key)
        elif key in firsts and e.event == "refund" and key not in released:
            refunded.add(key)
    return [RunAccount(first, key in released, key in refunded) for key, first in firsts.items()]


class PrivacyBudget:
    """The budget files of one daemon (one per data set) and the policy's totals."""

    def __init__(self, folder: Path, total_epsilon: float, total_delta: float = 0.0) -> None:
        for name, value in (("epsilon", total_epsilon), ("delta", total_delta)):
            if not finite_non_negative(value):
                raise ValueError(f"total {name} must be finite and >= 0, not {value!r}")
        self.folder = Path(folder)
        self.total_epsilon = float(total_epsilon)
        self.total_delta = float(total_delta)
        self._lock = threading.Lock()

    def path(self, dataset: str) -> Path:
        """The file of one data set's account."""
        if not _is_key(dataset):
            raise ValueError(f"a data set key is 64 lower-case hex digits, not {dataset!r}")
        return self.folder / f"{dataset}{BUDGET_SUFFIX}"

    def datasets(self) -> list[str]:
        """The data sets with an account in the folder."""
        try:
            names = sorted(p.name for p in self.folder.iterdir())
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UserError(
                f"cannot read the privacy-budget folder {self.folder}: {exc.strerror or exc}"
            ) from None
        keys = [n[: -len(BUDGET_SUFFIX)] for n in names if n.endswith(BUDGET_SUFFIX)]
        return [k for k in keys if _is_key(k)]

    # -- reading -------------------------------------------------------------------
    def entries(self, dataset: str) -> list[BudgetEntry]:
        """Every event of ``dataset``, oldest first; none when it has no file yet."""
        path = self.path(dataset)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UserError(
                f"cannot read the privacy budget {path}: {exc.strerror or exc}"
            ) from None
        if data and not data.endswith(b"\n"):
            line = data.count(b"\n") + 1
            raise UserError(
                f"{path}: line {line} is cut short (no newline at its end); the budget is "
                "not read as smaller than it is: restore the file, or finish the line by hand"
            )
        out = []
        for number, line in enumerate(data.splitlines(), start=1):
            try:
                entry = parse_entry(json.loads(line))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, TypeError):
                entry = None
            if entry is None or entry.dataset != dataset:
                raise UserError(
                    f"{path}: line {number} is not a budget entry of this data set (a JSON "
                    f"object of {', '.join(FIELDS)}); the budget is not read as smaller than "
                    "it is: restore the file"
                )
            out.append(entry)
        return out

    def runs(self, dataset: str) -> list[RunAccount]:
        return runs_of(self.entries(dataset))

    def spent(self, dataset: str) -> tuple[float, float]:
        """Epsilon and delta spent on ``dataset``: every run not refunded."""
        return _sums([r.first for r in self.runs(dataset) if r.spent])

    def remaining(self, dataset: str) -> float:
        """Epsilon ``dataset`` has left under the policy's total."""
        return max(self.total_epsilon - self.spent(dataset)[0], 0.0)

    def job_ids(self, dataset: str) -> frozenset[str]:
        """Every job with a run in ``dataset``'s account."""
        return frozenset(e.job_id for e in self.entries(dataset))

    # -- spending ------------------------------------------------------------------
    def check(
        self, job_id: str, dataset: str, cost: PrivacyCost, peer: str = "", per_hour: int = 0
    ) -> None:
        """Refuse a run that would take ``dataset`` over either total, or (``peer``: opened
        by that peer) the peer's ``per_hour``-th DP job within the last hour."""
        self._admit(self.entries(dataset), job_id, cost, peer, per_hour)

    def reserve(self, ticket: RunTicket, per_hour: int = 0) -> None:
        """Check and append a run's reservation (``PolicyRefusal``, nothing written, when it
        would overspend or, opened by a peer, go over its ``per_hour`` rate)."""
        with self._lock, self._folder_lock():
            entries = self.entries(ticket.dataset)
            self._admit(entries, ticket.job_id, ticket.cost, ticket.peer, per_hour)
            self._write("reserve", ticket)

    def release(self, ticket: RunTicket) -> None:
        """The run is about to let a noisy value be opened: its reservation is spent."""
        with self._lock, self._folder_lock():
            self._write("release", ticket)

    def refund(self, ticket: RunTicket) -> None:
        """The run ended before anything of it was opened: its reservation comes back."""
        with self._lock, self._folder_lock():
            self._write("refund", ticket)

    def _admit(
        self,
        entries: list[BudgetEntry],
        job_id: str,
        cost: PrivacyCost,
        peer: str,
        per_hour: int,
    ) -> None:
        name = f"job {job_id or '(new)'}"
        if not (finite_non_negative(cost.epsilon) and finite_non_negative(cost.delta)):
            raise PolicyRefusal("dp_epsilon", f"{name}: epsilon and delta must be finite and >= 0")
        runs = runs_of(entries)
        epsilon, delta = _sums([r.first for r in runs if r.spent])
        where = f"(privacy budget {self.folder})"
        if epsilon + cost.epsilon > self.total_epsilon * (1 + ROUNDING):
            left = max(self.total_epsilon - epsilon, 0.0)
            raise PolicyRefusal(
                "dp_epsilon",
                f"{name} would spend epsilon {cost.epsilon:g} on this data set; spent "
                f"{epsilon:g} of the policy's total {self.total_epsilon:g}, {left:g} left {where}",
            )
        if delta + cost.delta > self.total_delta * (1 + ROUNDING):
            left = max(self.total_delta - delta, 0.0)
            raise PolicyRefusal(
                "dp_delta",
                f"{name} would spend delta {cost.delta:g} on this data set; spent {delta:g} of "
                f"the policy's total dp_total_delta {self.total_delta:g}, {left:g} left {where}",
            )
        if peer:
            since = datetime.now(UTC) - RATE_WINDOW
            recent = sum(1 for r in runs if r.first.peer == peer and _time(r.first) >= since)
            if recent >= per_hour:
                raise PolicyRefusal(
                    "dp_epsilon",
                    f"{peer} opened {recent} DP jobs here within the last hour, the policy's "
                    f"dp_peer_jobs_per_hour {per_hour}; try again later",
                )

    def append_entries(self, dataset: str, entries: list[BudgetEntry]) -> None:
        """Append entries as they are (``ppbn budget adopt``): one write, under the lock."""
        data = b"".join(json.dumps(asdict(e), sort_keys=True).encode() + b"\n" for e in entries)
        with self._lock, self._folder_lock():
            self._append(self.path(dataset), data)

    def _write(self, event: str, ticket: RunTicket) -> None:
        entry = BudgetEntry(
            datetime.now(UTC).isoformat(timespec="seconds"),
            ticket.job_id,
            ticket.run,
            event,
            ticket.kind,
            ticket.dataset,
            float(ticket.cost.epsilon),
            float(ticket.cost.delta),
            ticket.initiator,
            ticket.peer,
        )
        line = json.dumps(asdict(entry), sort_keys=True).encode() + b"\n"
        self._append(self.path(ticket.dataset), line)

    @contextmanager
    def _folder_lock(self) -> Iterator[None]:
        """An exclusive ``flock`` of the budget's folder (not of a lock file: a refusal
        leaves the folder as it was), for other processes with the same files."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.folder, os.O_RDONLY)
        except OSError as exc:
            raise UserError(
                f"cannot open the privacy-budget folder {self.folder}: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    @staticmethod
    def _append(path: Path, line: bytes) -> None:
        """Write one line whole and fsync it; on any failure put the file back as it was."""
        created = not path.exists()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UserError(
                f"cannot write the privacy budget {path}: {exc.strerror or exc}"
            ) from None
        size = os.fstat(fd).st_size
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            _put_back(fd, size, path if created else None)
            raise UserError(
                f"cannot write the privacy budget {path}: {exc.strerror or exc}; "
                "the job is not charged and does not run"
            ) from None
        finally:
            os.close(fd)
        if created:
            _fsync_folder(path.parent)


def _is_key(dataset: str) -> bool:
    """A data set key: a SHA-256 in lower-case hex (``dataset_key``)."""
    return len(dataset) == 64 and all(c in "0123456789abcdef" for c in dataset)


def _time(entry: BudgetEntry) -> datetime:
    try:
        return datetime.fromisoformat(entry.time)
    except ValueError:
        return datetime.now(UTC)  # unreadable: counted as recent (the stricter reading)


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
