"""The progress a job reports: search steps, units of work, time left and the one-line note."""

from __future__ import annotations

import json

import pytest

from ppbn.jobs.progress import JobProgress, ProgressTracker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_no_time_left_without_a_rate(clock):
    tracker = ProgressTracker(clock)
    assert tracker.snapshot().eta_s is None  # nothing reported
    tracker.note("phase tables")
    tracker.update("ln terms", 0, 100)
    clock.now += 30
    assert tracker.snapshot().eta_s is None  # a unit with nothing done yet: no rate
    tracker.update("hc move 1: 12 legal moves", 0, 0)
    assert tracker.snapshot().steps_eta_s is None  # no step completed, the count unknown


def test_time_left_follows_the_units_rate_and_expires(clock):
    tracker = ProgressTracker(clock)
    tracker.update("ln terms", 0, 100)
    clock.now += 10
    tracker.update("ln terms", 25, 100)  # 25 terms in 10 s: 75 more take 30 s
    assert tracker.snapshot().eta_s == pytest.approx(30.0)
    clock.now += 5
    assert tracker.snapshot().eta_s == pytest.approx(25.0)
    clock.now += 40  # slower than the rate so far: no estimate rather than a wrong one
    assert tracker.snapshot().eta_s is None
    tracker.update("ln terms", 100, 100)
    assert tracker.snapshot().eta_s == 0.0


def test_a_unit_first_seen_part_done_counts_from_the_last_report(clock):
    tracker = ProgressTracker(clock)
    tracker.note("phase tables")
    clock.now += 4
    tracker.update("encrypt", 2000, 12000)  # 2,000 in the 4 s since the phase began
    assert tracker.snapshot().eta_s == pytest.approx(20.0)


def test_k2_steps_and_their_estimate(clock):
    tracker = ProgressTracker(clock)
    assert tracker.update("K2 step 1: 8 nodes still adding parents", 0, 3)
    clock.now += 40
    assert tracker.update("K2 step 2: 5 nodes still adding parents", 1, 3)
    progress = tracker.snapshot()
    assert (progress.step_kind, progress.step, progress.steps) == ("K2 step", 2, 3)
    assert progress.detail == "5 nodes still adding parents"
    assert progress.steps_eta_s == pytest.approx(40.0)  # one step to come, 40 s each so far
    assert tracker.update("K2 done", 3, 3)
    done = tracker.snapshot()
    assert (done.step_kind, done.step, done.structured) == ("", 0, False)


def test_note_text_from_the_fields(clock):
    tracker = ProgressTracker(clock)
    tracker.update("K2 step 1: 8 nodes still adding parents", 0, 3)
    clock.now += 40
    tracker.update("K2 step 2: 5 nodes still adding parents", 1, 3)
    tracker.note("phase ln terms (shares)")
    tracker.update("ln terms", 0, 2016)
    clock.now += 10
    tracker.update("ln terms", 1200, 2016)
    assert tracker.snapshot(4_300_000).note == (
        "K2 step 2/3 (5 nodes still adding parents): phase ln terms (shares), "
        "ln terms 1,200/2,016, 4.3 MB, ~7 s left (+~40 s for 1 more step)"
    )


def test_a_job_without_fields_keeps_its_own_note(clock):
    tracker = ProgressTracker(clock)
    tracker.note("phase ping")
    tracker.note("ping round 65/100")
    progress = tracker.snapshot(1234)
    assert progress.note == "ping round 65/100" and not progress.structured
    assert progress.phase == "ping"


def test_a_finished_unit_ends_with_its_phase_an_unfinished_one_goes_on(clock):
    tracker = ProgressTracker(clock)
    tracker.update("ln terms", 10, 20)
    tracker.note("phase ln terms (shares)")
    assert tracker.snapshot().unit == "ln terms"
    tracker.update("ln terms", 20, 20)
    tracker.note("phase argmax")
    assert tracker.snapshot().unit == ""


def test_a_unit_that_comes_back_keeps_its_start(clock):
    tracker = ProgressTracker(clock)
    tracker.update("ln terms", 0, 100)
    clock.now += 10
    tracker.update("ln terms", 50, 100)
    tracker.update("encrypt", 5, 10)
    clock.now += 10
    tracker.update("ln terms", 60, 100)  # 60 in 20 s since the unit began
    assert tracker.snapshot().eta_s == pytest.approx(40 * 20 / 60)


def test_the_fields_survive_json():
    progress = JobProgress(
        note="n",
        text="t",
        phase="tables",
        step_kind="K2 step",
        step=2,
        steps=3,
        unit="encrypt",
        done=5,
        total=9,
        bytes=77,
        elapsed_s=1.5,
        eta_s=2.0,
    )
    text = json.dumps(progress.as_dict())
    assert JobProgress.from_json(text, "n") == progress
