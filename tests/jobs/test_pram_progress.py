"""The PRAM jobs report their search as structured progress: the search driver's (done,
total, label) become the tracker's K2 step or hill-climbing move."""

from __future__ import annotations

from ppbn.jobs.progress import ProgressTracker
from ppbn.jobs.randomized_job import search_progress


class Context:
    """The one method of JobContext the adapter calls, on a real tracker."""

    def __init__(self) -> None:
        self.tracker = ProgressTracker()

    def advance(self, label: str, done: int = 0, total: int = 0) -> None:
        self.tracker.update(label, done, total)


def test_k2_and_hc_steps_reach_the_tracker():
    context = Context()
    report = search_progress(context)
    report(1, 3, "K2 step 2: 5 nodes still adding parents")
    shown = context.tracker.snapshot()
    assert shown.step_title == "K2 step 2/3" and shown.detail == "5 nodes still adding parents"
    report(4, 0, "hc move 5: 12 legal moves")
    assert context.tracker.snapshot().step_title == "hc move 5"
    report(5, 0, "hc done")
    assert context.tracker.snapshot().step_title == ""
