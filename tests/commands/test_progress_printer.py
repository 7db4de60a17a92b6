"""Progress on stderr: lines in a log (a line per phase or step, the counts at most once a
second), a rich bar on a terminal, one line for ``ppbn learn --status``."""

from __future__ import annotations

import atexit
import io
from dataclasses import replace

from rich.console import Console

from ppbn.commands.progress import LinePrinter, LiveBar, progress_reporter, status_line
from ppbn.jobs.progress import JobProgress

STEP = JobProgress(
    phase="ln terms (shares)",
    step_kind="K2 step",
    step=1,
    steps=2,
    unit="ln terms",
    total=1000,
    bytes=5_000_000,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def printer() -> tuple[LinePrinter, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    return LinePrinter(out, interval_s=1.0, heartbeat_s=10.0, clock=clock), out, clock


def test_counts_print_at_most_once_a_second():
    show, out, clock = printer()
    for i in range(50):  # 50 polls 0.1 s apart, the count moving at each
        show(replace(STEP, done=i * 10, bytes=STEP.bytes + i))
        clock.now += 0.1
    lines = out.getvalue().splitlines()
    assert 4 <= len(lines) <= 6  # about one per second over 5 s, not 50
    assert lines[0] == "  K2 step 1/2: phase ln terms (shares), ln terms 0/1,000, 5.0 MB"


def test_a_phase_or_step_prints_at_once():
    show, out, clock = printer()
    show(STEP)
    show(replace(STEP, phase="ln terms (Yao)"))
    show(replace(STEP, step=2, unit="", total=0))
    show(replace(STEP, step=2, unit="", total=0, text="checkpoint after K2 step 1"))
    assert len(out.getvalue().splitlines()) == 4


def test_traffic_alone_prints_only_a_heartbeat():
    show, out, clock = printer()
    for i in range(200):  # 20 s of polls in which only the bytes move
        show(replace(STEP, bytes=STEP.bytes + 1000 * i))
        clock.now += 0.1
    assert len(out.getvalue().splitlines()) == 2  # the first, then one after 10 s


def test_the_end_prints_nothing_and_old_daemons_notes_print_as_before():
    show, out, _ = printer()
    show(JobProgress(note="phase tables", text="phase tables"))
    show(JobProgress(note="encrypt 2000/12000", text="encrypt 2000/12000"))
    show(JobProgress(note="encrypt 2000/12000", text="encrypt 2000/12000", finished=True))
    assert out.getvalue() == "  phase tables\n  encrypt 2000/12000\n"


def test_reporter_kinds():
    assert progress_reporter(True) is None
    assert isinstance(progress_reporter(False, io.StringIO()), LinePrinter)  # not a terminal


def test_live_bar_draws_and_goes_away():
    out = io.StringIO()
    bar = LiveBar(Console(file=out, force_terminal=True, width=120))
    bar(replace(STEP, done=250, eta_s=12.0))
    bar(replace(STEP, step=2, detail="5 nodes still adding parents", done=500))
    assert bar.shown
    bar(replace(STEP, finished=True))
    assert not bar.shown
    text = out.getvalue()
    assert "K2 step 2/2: 5 nodes still adding parents" in text  # a step leaves a line
    assert "ln terms 250/1,000" in text and "~12 s left" in text
    atexit.unregister(bar.close)  # nothing left to close at exit


def test_status_line():
    line = status_line(replace(STEP, done=500, elapsed_s=42.4, eta_s=30.0))
    assert line == (
        "K2 step 1/2 · ln terms (shares) [##########----------] "
        "ln terms 500/1,000, 5.0 MB, ~30 s left, 42 s elapsed"
    )
    assert status_line(JobProgress(note="stalling", text="stalling")) == "stalling"
