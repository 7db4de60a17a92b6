"""The job's phase clock: wall seconds per protocol phase (``stats.phases``) and, per phase,
the CPU seconds that cannot be spread over workers and those that can (``stats.phase_cpu``).

Serial CPU is that of the thread that runs a phase, outside executor tasks: the job's
thread, or the lane thread of an overlapped table phase. Parallel CPU is what a pool
spreads or what already runs beside that thread: executor tasks (timed where they run, in
a pool's processes or inline in the thread at one worker; ``executor.TASK_CPU``), the
second half of a split batch on its lane thread, the terms lanes' processes and their
relay threads. Each is measured by ``time.thread_time`` in its own thread, exact on Linux
(CLOCK_THREAD_CPUTIME_ID). In neither: gRPC's own threads (TLS, framing) and a pool's
feeder threads, which carry bytes rather than do the phase's work.

A thread's CPU counts toward its next ``add`` from its last mark: ``mark`` (the scorer
marks when it announces a phase), or its previous ``add``; the clock's own thread is
marked when the clock is made, any other never marked counts from its start. What the
job's thread spends between an add and the next mark (the search itself, the local CPTs)
is reported as ``OUTSIDE``. Work of no phase in a thread of its own (the key pair and the
workers' warm-up made ahead, ``TablesSession.prepare_in_background``) is in none.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ppbn.protocols.executor import TASK_CPU

NORMALISE = "normalise (Yao)"
SHARE_TERMS = "ln and x ln x (shares)"
OUTSIDE = "outside the phases"


@dataclass
class PhaseCpu:
    """CPU seconds of one phase at one party: ``serial_s`` and ``parallel_s`` (module doc)."""

    serial_s: float = 0.0
    parallel_s: float = 0.0

    def __add__(self, other: PhaseCpu) -> PhaseCpu:
        return PhaseCpu(self.serial_s + other.serial_s, self.parallel_s + other.parallel_s)

    @property
    def total_s(self) -> float:
        return self.serial_s + self.parallel_s


@dataclass(frozen=True)
class CpuReading:
    """One thread's CPU counters at an instant: its own, and its executor tasks'."""

    thread_s: float
    tasks_s: float
    inline_s: float

    @staticmethod
    def now() -> CpuReading:
        return CpuReading(time.thread_time(), TASK_CPU.tasks_s, TASK_CPU.inline_s)

    def since(self, earlier: CpuReading) -> PhaseCpu:
        """The CPU between ``earlier`` and this reading: the thread's own minus its inline
        tasks (serial), and its tasks wherever they ran (parallel)."""
        inline = self.inline_s - earlier.inline_s
        return PhaseCpu(self.thread_s - earlier.thread_s - inline, self.tasks_s - earlier.tasks_s)


START = CpuReading(0.0, 0.0, 0.0)  # a thread's counters when it begins


class PhaseClock:
    """Wall seconds and CPU per protocol phase (module doc). Created in the thread that owns
    the job, whose CPU outside the phases ``cpu_split`` reports."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, PhaseCpu] = {}
        self._marks = threading.local()
        self._lock = threading.Lock()
        self._owner = threading.get_ident()
        self._owner_start = CpuReading.now()
        self._owner_counted = PhaseCpu()
        self._marks.reading = self._owner_start

    def mark(self) -> None:
        """This thread's CPU from now on counts toward its next ``add`` or ``charge``."""
        self._marks.reading = CpuReading.now()

    def charge(self, phase: str) -> None:
        """This thread's CPU since its last mark to ``phase``, and mark again."""
        now = CpuReading.now()
        used = now.since(getattr(self._marks, "reading", START))
        self._marks.reading = now
        with self._lock:
            self.cpu[phase] = self.cpu.get(phase, PhaseCpu()) + used
            if threading.get_ident() == self._owner:
                self._owner_counted += used

    def add(self, phase: str, started: float) -> None:
        """The wall seconds since ``started`` (a ``time.perf_counter`` reading) and this
        thread's CPU since its last mark to ``phase``."""
        elapsed = time.perf_counter() - started
        self.charge(phase)
        with self._lock:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + elapsed

    def add_parallel(self, phase: str, seconds: float) -> None:
        """CPU seconds of work that ran beside this party's phase thread (a lane's)."""
        with self._lock:
            self.cpu[phase] = self.cpu.get(phase, PhaseCpu()) + PhaseCpu(0.0, seconds)

    def cpu_split(self) -> dict[str, dict[str, float]]:
        """Per phase, and ``OUTSIDE`` for the owner thread's CPU no phase took (call it in
        that thread): ``{"serial_s", "parallel_s"}``."""
        if threading.get_ident() != self._owner:
            raise RuntimeError("the phase clock's CPU split is read in the job's own thread")
        with self._lock:
            outside = CpuReading.now().since(self._owner_start)
            outside = PhaseCpu(
                outside.serial_s - self._owner_counted.serial_s,
                outside.parallel_s - self._owner_counted.parallel_s,
            )
            split = {**self.cpu, OUTSIDE: outside}
            return {
                phase: {"serial_s": round(c.serial_s, 4), "parallel_s": round(c.parallel_s, 4)}
                for phase, c in split.items()
            }
