"""Where a running job is: its phase, its search step, the unit of work at hand, its traffic
and the time left.

The job thread feeds a ``ProgressTracker`` (``JobContext.progress`` and
``JobContext.advance``); each call takes a lock and sets a few fields, and the secure
loops call it once per batch, never per term. Rates, the time left and the one-line note
are computed only when someone asks for a ``JobProgress`` (the daemon's JobStatus and its
log). The operator's client reads the same fields back from ``JobInfo.progress_json``
with ``JobProgress.from_json``, which trusts nothing in it: to its client a daemon is a
remote party.

A time left is an estimate from what the job has done so far (the rate of the current
unit, the mean time of the completed search steps), and None while there is nothing to
estimate from: never a guess.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from ppbn.errors import printable

STEP_KINDS = ("K2 step", "hc move")  # labels of search steps: "K2 step 3: ...", "hc move 12: ..."
STEPS_DONE = ("K2 done", "hc done")  # the search is over
MAX_JSON_CHARS = 16_384  # a larger progress_json is ignored whole
MAX_TEXT_CHARS = 200  # each text field from a daemon, cut to this
_TEXT_FIELDS = ("note", "text", "phase", "step_kind", "detail", "unit")
_INT_FIELDS = ("step", "steps", "done", "total", "bytes")
_ETA_FIELDS = ("eta_s", "steps_eta_s")


@dataclass(frozen=True)
class JobProgress:
    """One look at a running job. ``steps`` and ``total`` are 0 when unknown; ``text`` is
    the job's last free-text note, ``detail`` what its search step is about;
    ``finished`` is set by the client when the job has ended (never sent)."""

    note: str = ""
    text: str = ""
    phase: str = ""
    step_kind: str = ""
    step: int = 0
    steps: int = 0
    detail: str = ""
    unit: str = ""
    done: int = 0
    total: int = 0
    bytes: int = 0
    elapsed_s: float = 0.0
    eta_s: float | None = None  # seconds left in the current unit
    steps_eta_s: float | None = None  # seconds for the search steps after the current one
    finished: bool = False

    @property
    def structured(self) -> bool:
        return bool(self.step_kind or self.unit)

    @property
    def step_title(self) -> str:
        """'K2 step 3/8', 'hc move 12', or '' outside a search."""
        if not self.step_kind:
            return ""
        return f"{self.step_kind} {self.step}" + (f"/{self.steps}" if self.steps else "")

    @property
    def counts(self) -> str:
        """'ln terms 1,200/2,016', or '' without a unit."""
        if not self.unit:
            return ""
        return f"{self.unit} {self.done:,}" + (f"/{self.total:,}" if self.total else "")

    def time_left(self) -> str:
        """'~12 s left', with the search steps after this one when they are known."""
        finished = self.total and self.done >= self.total
        out = "" if self.eta_s is None or finished else f"{about(self.eta_s)} left"
        more = self.steps - self.step if self.steps else 0
        if self.steps_eta_s is not None and more > 0:
            plural = "s" if more > 1 else ""
            out += f"{' ' if out else ''}(+{about(self.steps_eta_s)} for {more} more step{plural})"
        return out

    def figures(self) -> str:
        """'ln terms 1,200/2,016, 4.3 MB, ~12 s left' (whatever of it is known)."""
        return ", ".join(p for p in (self.counts, size(self.bytes), self.time_left()) if p)

    def describe(self) -> str:
        """The one-line note: 'K2 step 2/2 (31 nodes still adding parents): phase ln
        terms (shares), ln terms 6,144/24,576, 41.2 MB, ~12 s left'; a job that reports
        no step and no unit is described by its last note, as it gave it."""
        if not self.structured:
            return self.text
        head = self.step_title + (f" ({self.detail})" if self.step_title and self.detail else "")
        phase = f"phase {self.phase}" if self.phase and self.phase != self.unit else ""
        if not head:
            head, phase = phase, ""
        parts = [p for p in (phase, self.figures()) if p]
        return (head + ": " if head else "") + ", ".join(parts)

    def __str__(self) -> str:
        """The one-line note, so that ``print`` shows what a person reads."""
        return self.note or self.describe()

    def as_dict(self) -> dict[str, Any]:
        """The fields as JSON (``progress_json``, the daemon's log, ``ppbn learn --status``)."""
        out = asdict(self)
        del out["finished"]
        out["elapsed_s"] = round(self.elapsed_s, 3)
        for name in _ETA_FIELDS:
            if out[name] is not None:
                out[name] = round(out[name], 1)
        return out

    @classmethod
    def from_json(cls, text: str, note: str = "") -> JobProgress:
        """The progress a daemon sent (``JobInfo.progress_json`` and ``.progress``): fields
        of the wrong type, out of range or unknown are dropped, text is made printable and
        cut short, and JSON that does not parse leaves just the note."""
        note = printable(note, MAX_TEXT_CHARS)
        base = cls(note=note, text=note)
        if not text or len(text) > MAX_JSON_CHARS:
            return base
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return base
        if not isinstance(value, dict):
            return base
        fields: dict[str, Any] = {"text": ""}  # the note is not the job's own text
        for name in _TEXT_FIELDS:
            if isinstance(value.get(name), str):
                fields[name] = printable(value[name], MAX_TEXT_CHARS)
        for name in _INT_FIELDS:
            number = value.get(name)
            if isinstance(number, int) and not isinstance(number, bool) and 0 <= number < 2**63:
                fields[name] = number
        for name in ("elapsed_s", *_ETA_FIELDS):
            number = value.get(name)
            if _seconds(number):
                fields[name] = float(number)
        fields["note"] = note or fields.get("note", "")
        return replace(base, **fields)


def _seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value < 1e9
    )


def duration(seconds: float) -> str:
    """'<1 s', '12 s', '4 min', '1.5 h'."""
    if seconds < 1:
        return "<1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def about(seconds: float) -> str:
    """'~12 s', '<1 s': an estimate."""
    text = duration(seconds)
    return text if text.startswith("<") else f"~{text}"


def size(count: int) -> str:
    """Bytes as '640 B', '812 kB', '41.2 MB', '3.10 GB'; '' for none."""
    if count <= 0:
        return ""
    if count < 1000:
        return f"{count} B"
    if count < 1_000_000:
        return f"{count / 1e3:.0f} kB"
    if count < 1_000_000_000:
        return f"{count / 1e6:.1f} MB"
    return f"{count / 1e9:.2f} GB"


class ProgressTracker:
    """The latest progress of one job, written by its thread and read by the daemon's.

    ``note`` takes a free-text note ("phase X" starts a phase); ``update`` takes a
    structured one: a search step (a label of ``STEP_KINDS``, ``done`` = steps completed,
    ``total`` = the most steps or 0), the end of the search (``STEPS_DONE``), or ``done``
    of ``total`` of a unit of work named by the label ("ln terms", "encrypt", ...). Both
    return True when the call began a phase or a step (the daemon logs those at once)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.started = self._changed = clock()
        self.text = self.phase = self.step_kind = self.detail = self.unit = ""
        self.step = self.steps = self.done = self.total = 0
        self._step_started = self.started
        self._steps_timed, self._steps_seconds = 0, 0.0
        self._unit_started, self._unit_base = self.started, 0
        self._unit_at = self.started  # the current unit's last report
        self._units: dict[str, tuple[float, int, int, int]] = {}  # this step's units, set aside

    def note(self, text: str) -> bool:
        with self._lock:
            self.text = text
            if not text.startswith("phase "):
                return False
            self.phase = text[len("phase ") :]
            if self.unit and self.done >= self.total > 0:
                self._drop_unit()  # a finished unit says nothing about the new phase
            self._changed = self._clock()
            return True

    def update(self, label: str, done: int, total: int) -> bool:
        if label.startswith("phase "):
            return self.note(label)
        with self._lock:
            now = self._clock()
            kind = next((k for k in STEP_KINDS if label.startswith(k + " ")), "")
            if kind:
                self._end_step(now)
                self.step_kind, self.step, self.steps = kind, done + 1, max(total, 0)
                self.detail = label.partition(": ")[2]
                self.phase = ""  # the last step's; this one names its own
                self._step_started = self._changed = now
                self._drop_unit()
                self._units.clear()
                return True
            if label in STEPS_DONE:
                self._end_step(now)
                self.step_kind, self.step, self.steps, self.detail = "", 0, 0, ""
                self._drop_unit()
                self._changed = now
                return True
            if label.startswith("hc step "):  # the move just made: a note
                self.text = label
                return False
            if label != self.unit or total != self.total or done < self.done:
                self._switch_unit(label, done, total, now)
            self.done = done
            self._changed = self._unit_at = now
            return False

    def _end_step(self, now: float) -> None:
        if self.step_kind:
            self._steps_timed += 1
            self._steps_seconds += now - self._step_started

    def _drop_unit(self) -> None:
        self.unit, self.done, self.total = "", 0, 0

    def _switch_unit(self, label: str, done: int, total: int, now: float) -> None:
        """A unit starts, or comes back after another (its rate then counts from where it
        began). A new unit reported first with some work done began when the last thing
        before it was reported."""
        if self.unit:
            self._units[self.unit] = (self._unit_started, self._unit_base, self.total, self.done)
        saved = self._units.get(label)
        if saved is not None and saved[2] == total and done >= saved[3]:
            self._unit_started, self._unit_base = saved[0], saved[1]
        else:
            self._unit_started, self._unit_base = (now if done == 0 else self._changed), 0
        self.unit, self.total = label, total

    def snapshot(self, bytes_so_far: int = 0) -> JobProgress:
        """The job's progress now, with its note and time estimates."""
        with self._lock:
            now = self._clock()
            eta = None
            if self.unit and self.total > 0:
                worked, spent = self.done - self._unit_base, self._unit_at - self._unit_started
                if self.done >= self.total:
                    eta = 0.0
                elif worked > 0 and spent > 0:
                    # the unit's mean rate up to its last report, from then on; None once
                    # that time has run out (the rest is slower than what came before)
                    left = (self.total - self.done) * spent / worked - (now - self._unit_at)
                    eta = left if left > 0 else None
            steps_eta = None
            if self.step_kind and self.steps and self._steps_timed:
                mean = self._steps_seconds / self._steps_timed
                steps_eta = max(self.steps - self.step, 0) * mean
            progress = JobProgress(
                text=self.text,
                phase=self.phase,
                step_kind=self.step_kind,
                step=self.step,
                steps=self.steps,
                detail=self.detail,
                unit=self.unit,
                done=self.done,
                total=self.total,
                bytes=max(int(bytes_so_far), 0),
                elapsed_s=now - self.started,
                eta_s=eta,
                steps_eta_s=steps_eta,
            )
        return replace(progress, note=progress.describe())
