"""PauseWatch on a clock the test moves: a gap the process spent without CPU is its own
pause and is named instead of the peer; a gap another thread kept the CPU busy in, an old
pause, and a short one are not."""

from __future__ import annotations

from ppbn.parties.pauses import TICK_S, PauseWatch

REASON = "connection to peer alice closed"


class FakeClocks:
    def __init__(self) -> None:
        self.now = 1000.0
        self.cpu = 5.0

    def advance(self, seconds: float, cpu: float = 0.0) -> None:
        self.now += seconds
        self.cpu += cpu


def watched() -> tuple[FakeClocks, PauseWatch]:
    clocks = FakeClocks()
    return clocks, PauseWatch(clock=lambda: clocks.now, cpu=lambda: clocks.cpu)


def ticking(clocks: FakeClocks, watch: PauseWatch, seconds: float) -> None:
    """The watcher waking on time for ``seconds``, the process idle."""
    for _ in range(round(seconds / TICK_S)):
        clocks.advance(TICK_S, cpu=0.001)
        watch.tick()


def test_a_stopped_process_names_its_own_pause_not_the_peer():
    clocks, watch = watched()
    ticking(clocks, watch, 3)
    started = clocks.now
    ticking(clocks, watch, 2)
    clocks.advance(12.0)  # SIGSTOP: no wake-up, no CPU
    watch.tick()
    text = watch.explain("bob", REASON, ["alice"], started, timeout_s=5.0)
    assert text.startswith("this daemon (bob) was paused for about 12 s"), text
    assert "because bob was paused, not because of peer alice" in text, text
    assert text.endswith(f"(seen on resuming: {REASON})"), text


def test_a_thread_held_up_by_a_busy_one_is_no_pause():
    clocks, watch = watched()
    started = clocks.now
    clocks.advance(12.0, cpu=11.5)  # a long computation held the GIL: the process ran
    watch.tick()
    assert watch.explain("bob", REASON, ["alice"], started, timeout_s=5.0) == REASON


def test_a_pause_before_the_job_or_too_short_is_not_blamed():
    clocks, watch = watched()
    clocks.advance(30.0)  # before the job started
    watch.tick()
    started = clocks.now
    ticking(clocks, watch, 1)
    clocks.advance(1.5)  # a hiccup: well within what the peer waits
    watch.tick()
    ticking(clocks, watch, 1)
    assert watch.explain("bob", REASON, ["alice"], started, timeout_s=60.0) == REASON


def test_a_pause_long_past_is_not_blamed_for_a_later_loss():
    clocks, watch = watched()
    started = clocks.now
    clocks.advance(20.0)
    watch.tick()
    ticking(clocks, watch, 120)  # the job went on for two minutes after it
    assert watch.explain("bob", REASON, ["alice"], started, timeout_s=5.0) == REASON
