"""A running job's progress on stderr: a live bar on a terminal, readable lines in a log.

``progress_reporter(quiet)`` gives what ``DaemonClient.wait`` takes as ``on_progress``
(None when quiet). On a terminal it draws one rich progress bar (the search step and
phase, done of total of the current unit, the bytes so far, the time left) and removes it
when the job ends; each new search step also leaves a line above it. Anywhere else (a
pipe, a CI log) it prints a line when the phase, the step, the unit or the note changes,
and otherwise at most one per ``interval_s`` while the counts move and one per
``heartbeat_s`` while only the traffic does: a log gets the story, not every poll.
"""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Callable
from typing import IO

from rich.console import Console
from rich.progress import Progress, ProgressBar, ProgressColumn, Task, TextColumn
from rich.text import Text

from ppbn.jobs.progress import JobProgress

BAR_WIDTH = 30


def title(progress: JobProgress) -> str:
    """What the bar is about: 'K2 step 3/8 · ln terms (shares)', a phase, or the note."""
    if not progress.structured:
        return progress.describe() or progress.note
    return " · ".join(p for p in (progress.step_title, progress.phase) if p)


def status_line(progress: JobProgress) -> str:
    """The bar as one line of text, for ``ppbn learn --status``."""
    if not progress.structured:
        return progress.describe() or progress.note
    bar = ""
    if progress.total:
        filled = min(progress.done, progress.total) * 20 // progress.total
        bar = "[" + "#" * filled + "-" * (20 - filled) + "] "
    elapsed = f"{progress.elapsed_s:.0f} s elapsed"
    return f"{title(progress)} {bar}{', '.join(p for p in (progress.figures(), elapsed) if p)}"


class LinePrinter:
    """One line per change that matters (see the module docstring); ``clock`` for tests."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        interval_s: float = 1.0,
        heartbeat_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.interval_s, self.heartbeat_s = interval_s, heartbeat_s
        self.clock = clock
        self._shown: JobProgress | None = None
        self._at = 0.0

    def __call__(self, progress: JobProgress) -> None:
        if progress.finished:
            return  # the outcome follows
        now, shown = self.clock(), self._shown
        if shown is None or _stage(shown) != _stage(progress):
            due = True
        elif (shown.done, shown.total) != (progress.done, progress.total):
            due = now - self._at >= self.interval_s
        else:
            due = progress.bytes != shown.bytes and now - self._at >= self.heartbeat_s
        if due:
            self._shown, self._at = progress, now
            print(f"  {progress.describe() or progress.note}", file=self.stream or sys.stderr)

    def close(self) -> None:
        """Nothing to undo: lines stay."""


def _stage(progress: JobProgress) -> tuple:
    """The fields whose change deserves a line at once: phase, step, unit, note."""
    return (progress.phase, progress.step_kind, progress.step, progress.unit, progress.text)


class _UnitBar(ProgressColumn):
    """Done of total of the current unit; a pulse while there is none."""

    def render(self, task: Task) -> ProgressBar:
        total = task.fields.get("unit_total") or None
        return ProgressBar(
            total=total,
            completed=task.fields.get("unit_done", 0),
            width=BAR_WIDTH,
            pulse=total is None,
            animation_time=task.get_time(),
        )


class LiveBar:
    """The rich bar on a terminal; started at the first progress, stopped when the job
    ends, at ``close`` or, after an interrupt, when the process exits."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._bar: Progress | None = None
        self._task = None
        self._step = ("", 0)

    @property
    def shown(self) -> bool:
        """Whether the bar is on screen: from the first progress to the job's end or ``close``."""
        return self._bar is not None

    def __call__(self, progress: JobProgress) -> None:
        if progress.finished:
            self.close()
            return
        fields = {
            "description": f"  {title(progress)}",
            "figures": progress.figures(),
            "unit_done": progress.done,
            "unit_total": progress.total if progress.unit else 0,
        }
        if self._bar is None:
            self._bar = Progress(
                TextColumn("{task.description}", markup=False),
                _UnitBar(),
                TextColumn("{task.fields[figures]}", markup=False),
                console=self.console,
                transient=True,
            )
            self._task = self._bar.add_task(**fields)
            self._bar.start()
            atexit.register(self.close)
        step = (progress.step_kind, progress.step)
        if progress.step_kind and step != self._step:
            detail = f": {progress.detail}" if progress.detail else ""
            self._bar.console.print(Text(f"  {progress.step_title}{detail}"))
        self._step = step
        # each change drawn as it comes (the client polls ten times a second)
        self._bar.update(self._task, refresh=True, **fields)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
            atexit.unregister(self.close)


def progress_reporter(
    quiet: bool, stream: IO[str] | None = None
) -> Callable[[JobProgress], None] | None:
    """``on_progress`` for ``DaemonClient.wait``: None when ``quiet`` (JSON output), a
    live bar when stderr is a terminal, else a ``LinePrinter``."""
    if quiet:
        return None
    target = stream or sys.stderr
    if target.isatty():
        return LiveBar(Console(file=target))
    return LinePrinter(target)
