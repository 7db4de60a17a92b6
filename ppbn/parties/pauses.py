"""Noticing that this daemon's own process did not run for a while, so a job lost to it is
not blamed on the peer.

A daemon stopped with SIGSTOP (or on a host that was suspended, or too loaded to give it
the CPU) looks, to its peer, like a silent peer: the peer gives up, aborts or lets its
keepalive close the connection. When the stopped daemon runs again it finds the job's
stream dead or the peer's ABORT, and would say "peer X ..." though the pause was its own.

A watcher thread wakes every ``TICK_S`` and compares how much time passed (the boot
clock, which also counts a suspended host) with how much CPU time the process used
meanwhile. A wake-up much later than asked for, in a gap the process spent mostly without
CPU, is a pause of this process; a thread held up only by another that kept the CPU busy
(a long computation holding the GIL) is not.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ppbn.parties.net import KEEPALIVE_MS

TICK_S = 0.5
MIN_PAUSE_S = 1.0  # shorter gaps are the scheduler's ordinary jitter: not kept
KEPT = 32  # the newest pauses kept
# an unanswered keepalive ping closes a connection after this long
PING_TIMEOUT_S = KEEPALIVE_MS / 2 / 1000
# a pause of this share of the peer timeout (or of the ping timeout, if shorter) is taken to
# have lost a job: the peer's wait began before the pause did, by as much as it already waited
SHARE_OF_TIMEOUT = 0.5
# a job thread busy when its daemon resumes meets the loss later: at most this long after
# the pause, on top of the peer timeout, it is still put down to the pause
NOTICED_WITHIN_S = 30.0


def _boot_clock() -> float:
    """Seconds on a clock that keeps counting while the host is suspended (Linux), else
    the monotonic clock."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


@dataclass(frozen=True)
class Pause:
    """``lost_s`` seconds without CPU in a gap between two wake-ups that ended at ``ended``."""

    ended: float
    lost_s: float


class PauseWatch:
    """The pauses of this process; ``clock`` and ``cpu`` (process CPU seconds) can be
    replaced in tests, which then call ``tick`` themselves."""

    def __init__(
        self,
        clock: Callable[[], float] = _boot_clock,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self.clock = clock
        self.cpu = cpu
        self.pauses: deque[Pause] = deque(maxlen=KEPT)
        self._lock = threading.Lock()
        self._last = (clock(), cpu())
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the watcher thread (once per process; it never stops: a daemon thread)."""
        with self._lock:
            if self._thread is not None:
                return
            self._last = (self.clock(), self.cpu())
            self._thread = threading.Thread(target=self._run, name="pause-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(TICK_S)
            self.tick()

    def tick(self) -> None:
        """Compare the time since the last tick with the CPU time used in it; keep a pause.
        Any thread may call it: the first to run after a pause sees it, whichever it is."""
        with self._lock:
            now, used = self.clock(), self.cpu()
            last_now, last_used = self._last
            self._last = (now, used)
            lost = (now - last_now - TICK_S) - max(used - last_used, 0.0)
            if lost >= MIN_PAUSE_S:
                self.pauses.append(Pause(now, lost))

    def since(self, start: float) -> list[Pause]:
        """The pauses that ended after ``start`` (a reading of ``clock``), the newest last;
        one that is just over counts too, though the watcher thread has not woken yet."""
        if self._thread is not None:
            self.tick()
        with self._lock:
            return [p for p in self.pauses if p.ended > start]

    def explain(
        self, role: str, reason: str, peers: Iterable[str], start: float, timeout_s: float
    ) -> str:
        """``reason`` (a peer blamed for losing a job that started at ``start``) put right
        when this daemon was itself paused long enough to lose it, and not long before."""
        now = self.clock()
        long_enough = SHARE_OF_TIMEOUT * min(timeout_s, PING_TIMEOUT_S)
        recent = [
            p
            for p in self.since(start)
            if p.lost_s >= long_enough and now - p.ended <= timeout_s + NOTICED_WITHIN_S
        ]
        if not recent:
            return reason
        lost = max(p.lost_s for p in recent)
        blamed = " or ".join(f"peer {p}" for p in peers) or "its peer"
        return (
            f"this daemon ({role}) was paused for about {lost:.0f} s (its process stopped, e.g. "
            f"by SIGSTOP, or its host suspended or overloaded), long enough for its peers to give "
            f"it up (peer timeout {timeout_s:g} s, keepalive ping timeout {PING_TIMEOUT_S:g} s): "
            f"the job was lost because {role} was paused, not because of {blamed} "
            f"(seen on resuming: {reason})"
        )


WATCH = PauseWatch()  # this process's: a pause stops every daemon in it alike
