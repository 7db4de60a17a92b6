"""Where a party's bulk arithmetic runs: in this process, a local process pool, or Ray.

The table phase is embarrassingly parallel over chunks of records (encrypt a chunk,
multiply a chunk's ciphertexts by label, decrypt a piece, combine partial products), and
so are the garbled phases over instance chunks (``yao``) and OT-extension blocks (``ot``), so
the protocols describe that work as pure functions of their arguments and hand it to an
``Executor``: "run this function on these arguments, give me the results in order, and
never keep more than ``inflight`` tasks outstanding" (the bound is what keeps memory flat
in the number of records). Three implementations:

- ``InlineExecutor``: in the calling thread; small jobs and tests.
- ``LocalExecutor``: a ``ProcessPoolExecutor`` of this host (spawn start method, so it is
  safe next to gRPC threads; workers exit with their parent).
- ``RayExecutor``: tasks on a Ray cluster that belongs to *this* party (``ray`` is the
  optional extra ``ppbn[ray]``, imported only here and only when asked for).

Each executor is a local setting of one daemon (``LocalPolicy``, ``ppbn party serve
--executor``): it is never negotiated and nothing from the peer can choose it. The tasks
carry this party's secrets (key factors, plaintext rows, per-task seeds), so a Ray
cluster must sit inside this party's own trust domain; no task of one party ever reaches
the other party's executor. Randomness is drawn by the caller and passed in as per-task
seeds, so results do not depend on which executor (or how many workers) ran the tasks.

CPU accounting: every task's function is timed where it runs (``time.thread_time`` around
the call, in the worker process or, inline, in the calling thread), and the seconds come
back with its value (``Timed``); the thread that takes the result adds them to its
``TASK_CPU``, so a phase clock (``learning/clock.py``) can tell the CPU a phase spent in
tasks from the CPU of its own thread. Values and arguments are unchanged.

Failures: an exception raised by the function reaches the caller unchanged (a
``ProtocolError`` from a bad ciphertext stays one). A task lost to the executor itself (a
worker process killed, a Ray node gone after Ray's retries) raises ``ExecutorError``, a
one-line error that fails the job and leaves the daemon serving.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

EXECUTORS = ("local", "ray", "inline")
PARENT_CHECK_S = 0.25
RAY_TASK_RETRIES = 3  # Ray re-runs a task whose worker died this many times before giving up
RAY_CONNECT_TIMEOUT_S = 10.0  # a Ray address must accept a TCP connection within this


class TaskCpu(threading.local):
    """Per thread, the CPU seconds of the executor tasks whose results it took: ``tasks_s``
    all of them, wherever they ran, and ``inline_s`` those that ran in this thread (an
    inline executor's), which its own ``time.thread_time`` counts too."""

    tasks_s: float = 0.0
    inline_s: float = 0.0

    def credit(self, seconds: float, inline: bool) -> None:
        self.tasks_s += seconds
        if inline:
            self.inline_s += seconds


TASK_CPU = TaskCpu()


@dataclass(frozen=True)
class Timed:
    """A task's value and the CPU seconds its function took (its thread's, where it ran),
    those of the ``Timed`` arguments it consumed included (a Ray combine of unfetched
    leaves)."""

    value: Any
    cpu_s: float


def timed_call(fn: Callable, *args: Any) -> Timed:
    """``fn(*args)`` as a ``Timed``: what a pool or cluster runs in place of ``fn``."""
    consumed = sum(a.cpu_s for a in args if isinstance(a, Timed))
    values = tuple(a.value if isinstance(a, Timed) else a for a in args)
    started = time.thread_time()
    value = fn(*values)
    return Timed(value, time.thread_time() - started + consumed)


def run_inline(fn: Callable, args: tuple) -> Any:
    """``fn(*args)`` in this thread, its CPU credited to this thread's inline tasks."""
    started = time.thread_time()
    try:
        return fn(*args)
    finally:
        TASK_CPU.credit(time.thread_time() - started, inline=True)


class ExecutorError(RuntimeError):
    """A task was lost by the executor (worker died, cluster gone), not failed by its function."""


@dataclass(frozen=True)
class ExecutorSpec:
    """This party's choice of executor: ``kind``, ``workers`` (local pool size, or the CPUs
    of a Ray instance started here), ``ray_address`` (an existing Ray cluster to join)."""

    kind: str = "local"
    workers: int | None = None
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {self.kind!r}")
        if self.workers is not None and self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.ray_address and self.kind != "ray":
            raise ValueError("a Ray address is only for the ray executor")


class Pending(ABC):
    """A submitted task."""

    @abstractmethod
    def result(self) -> Any:
        """Block until done; the function's value, or its exception."""

    @abstractmethod
    def wait(self) -> None:
        """Block until done without fetching the value."""


class Executor(ABC):
    """Runs pure functions on argument tuples (see the module doc).

    ``submit`` accepts ``Pending`` values of the same executor among the arguments: they
    are resolved before the function runs (on Ray, in the worker, so a tree of combines
    never routes partial results through this process).
    """

    kind: str
    workers: int

    @abstractmethod
    def submit(self, fn: Callable, *args: Any) -> Pending: ...

    def map(
        self, fn: Callable, items: Iterable[tuple], inflight: int | None = None
    ) -> Iterator[Any]:
        """``fn(*item)`` for each item, results in order; ``items`` is consumed lazily and at
        most ``inflight`` tasks (default two per worker) are outstanding at any time."""
        limit = max(1, inflight if inflight is not None else 2 * self.workers)
        pending: deque[Pending] = deque()
        for item in items:
            pending.append(self.submit(fn, *item))
            while len(pending) >= limit:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    def tree_reduce(
        self,
        combine: Callable,
        leaves: Iterable[Pending],
        args: tuple = (),
        fanin: int = 16,
        inflight: int | None = None,
    ) -> Any:
        """``combine(*args, *values)`` over every leaf, as a tree of fan-in ``fanin``.

        ``combine`` must be associative and commutative up to equality of its result
        (products mod N^2 are), so the tree's shape never changes the value. Leaves are
        taken lazily; at most ``inflight`` leaf tasks are waited for at a time.
        """
        if fanin < 2:
            raise ValueError("fanin must be at least 2")
        limit = max(1, inflight if inflight is not None else 2 * self.workers)
        levels: list[list[Pending]] = [[]]
        window: deque[Pending] = deque()
        for leaf in leaves:
            window.append(leaf)
            levels[0].append(leaf)
            while len(window) >= limit:
                window.popleft().wait()
            level = 0
            while len(levels[level]) >= fanin:
                merged = self.submit(combine, *args, *levels[level])
                levels[level] = []
                if level + 1 == len(levels):
                    levels.append([])
                levels[level + 1].append(merged)
                level += 1
        rest: list[Pending] = []
        for level in levels:
            rest.extend(level)
            if len(rest) >= fanin:
                rest = [self.submit(combine, *args, *rest)]
        if not rest:
            raise ValueError("tree_reduce needs at least one leaf")
        return (rest[0] if len(rest) == 1 else self.submit(combine, *args, *rest)).result()

    @abstractmethod
    def close(self) -> None:
        """Release this executor's workers (a shared Ray connection stays up)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- inline ----------------------------------------------------------------------------------


class _Done(Pending):
    def __init__(self, fn: Callable, args: tuple) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        try:
            self._value = run_inline(fn, args)
        except Exception as exc:  # noqa: BLE001 - delivered by result()
            self._error = exc

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def wait(self) -> None:
        return None


def _resolved(args: tuple) -> tuple:
    return tuple(a.result() if isinstance(a, Pending) else a for a in args)


class InlineExecutor(Executor):
    """Everything in the calling thread, at submission."""

    kind = "inline"
    workers = 1

    def submit(self, fn: Callable, *args: Any) -> Pending:
        return _Done(fn, _resolved(args))

    def map(
        self, fn: Callable, items: Iterable[tuple], inflight: int | None = None
    ) -> Iterator[Any]:
        """Each item computed when its result is taken: with no other worker, running ahead
        only delays the consumer (a garbler would send chunk i after garbling chunk i + 1)."""
        for item in items:
            yield run_inline(fn, _resolved(item))

    def close(self) -> None:
        return None  # nothing to release


# -- local process pool ------------------------------------------------------------------------


def exit_with_parent(parent_pid: int) -> None:
    """Pool initializer: end this worker as soon as its parent is gone.

    A daemon killed with SIGKILL (the OOM killer) cannot shut its pool down; without this
    its workers, and the multiprocessing resource tracker they keep alive, would run on as
    orphans. A thread polls the parent pid (an orphan is re-parented, so it changes).
    Linux's PR_SET_PDEATHSIG is not used: it fires when the parent *thread* that started
    the worker ends, and pools are started from short-lived job threads.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    if os.getppid() != parent_pid:
        os._exit(1)
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class _LocalPending(Pending):
    def __init__(self, future: Future) -> None:
        self._future = future
        self._credited = False

    def result(self) -> Any:
        try:
            timed = self._future.result()
        except BrokenProcessPool:
            raise ExecutorError(
                "local executor: a worker process died (killed or out of memory); the job's tasks are lost"
            ) from None
        if not self._credited:
            self._credited = True
            TASK_CPU.credit(timed.cpu_s, inline=False)
        return timed.value

    def wait(self) -> None:
        self._future.exception()  # returns (never raises) a broken pool: result() reports it


class LocalExecutor(Executor):
    """A process pool of ``workers`` processes on this host, started on first use."""

    kind = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable, *args: Any) -> Pending:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=self.workers,
                    mp_context=get_context("spawn"),
                    initializer=exit_with_parent,
                    initargs=(os.getpid(),),
                )
            pool = self._pool
        try:
            return _LocalPending(pool.submit(timed_call, fn, *_resolved(args)))
        except BrokenProcessPool:
            raise ExecutorError(
                "local executor: the worker pool is broken (a worker process died)"
            ) from None

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


# -- Ray ---------------------------------------------------------------------------------------

_RAY_LOCK = threading.Lock()


def ray_missing_message() -> str | None:
    """None when ``ray`` can be imported; otherwise the one-line reason."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "--executor ray needs the optional package ray: pip install 'ppbn[ray]'"
    return None


def check_ray_address(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """ConnectionError, in one line, when nothing accepts a TCP connection at the HOST:PORT
    of ``address`` within ``timeout_s``: ``ray.init`` would retry such an address for
    minutes (ray 2.60 retries its GCS connection without end). "auto", "local" and other
    forms without a port are left to Ray."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except (OSError, OverflowError) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ConnectionError(
            f"nothing accepts connections at {address} ({why}): is this party's Ray cluster "
            "running there?"
        ) from None


def _ray_messages_to_stderr(ray: Any) -> None:
    """Send the Ray driver's cluster messages to stderr, so stdout carries only ppbn's output
    (``--format json``).

    With ``log_to_driver=False`` the workers' output stays away, but the driver still runs
    a listener that prints the cluster's error messages ("A worker died or was killed ...",
    "Task ... will be retried") to *stdout* (ray 2.60: ``ray._private.worker``,
    ``listen_error_messages`` calls ``print_to_stdstream`` with ``is_err`` False), and Ray
    offers no setting for it. The module-level printer is wrapped, once per process, to mark
    every message as an error: Ray then writes it, unchanged, to stderr.
    """
    module = ray._private.worker
    printer = module.print_to_stdstream
    if getattr(printer, "ppbn_to_stderr", False):
        return

    def to_stderr(data: dict, ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.ppbn_to_stderr = True  # type: ignore[attr-defined]
    module.print_to_stdstream = to_stderr


def _ray_init(ray: Any, address: str | None, workers: int | None) -> None:
    _ray_messages_to_stderr(ray)
    quiet = {"log_to_driver": False, "configure_logging": False}
    if address:
        check_ray_address(address)
        ray.init(address=address, **quiet)
    else:
        # Ray runs its workers at niceness 15 by default: below the daemon's own thread,
        # which then starves them of the cores it waits for. Same priority as a local pool.
        os.environ.setdefault("RAY_worker_niceness", "0")
        # Ray waits 30 s for its GCS server to publish its port; on a host whose cores are
        # busy with other work that start-up has taken longer (a CI run's Ray tests failed
        # so). A daemon rather waits than fails to start.
        os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "120")
        ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, **quiet)


def connect_ray(address: str | None, workers: int | None) -> Any:
    """The ``ray`` module, initialised once per process: joined to ``address``, or (no
    address) a private Ray instance on this host with ``workers`` CPUs and no dashboard.

    Ray ties the processes it starts to the life of the starting *thread*
    (PR_SET_PDEATHSIG), so from any thread but the main one it is initialised in a thread
    that lives as long as the process: a job thread that ends must not take the Ray
    instance, and the next job's tasks, with it. A daemon calls this at start-up.
    """
    import ray

    with _RAY_LOCK:
        if ray.is_initialized():
            return ray
        if threading.current_thread() is threading.main_thread():
            _ray_init(ray, address, workers)
            return ray
        outcome: list[BaseException | None] = []
        ready = threading.Event()

        def keep() -> None:
            try:
                _ray_init(ray, address, workers)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                outcome.append(exc)
            ready.set()
            if outcome[0] is None:
                threading.Event().wait()  # hold the Ray processes until this process ends

        threading.Thread(target=keep, name="ray-keeper", daemon=True).start()
        ready.wait()
        if outcome[0] is not None:
            raise outcome[0]
    return ray


class _RayPending(Pending):
    def __init__(self, ray: Any, ref: Any) -> None:
        self._ray = ray
        self.ref = ref
        self._credited = False

    def result(self) -> Any:
        ray = self._ray
        try:
            timed = ray.get(self.ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, Exception) else None
            if cause is None or isinstance(cause, ray.exceptions.RayError):
                raise ExecutorError(
                    f"ray executor: task failed: {str(exc).splitlines()[0]}"
                ) from None
            raise cause from None
        except ray.exceptions.RayError as exc:
            raise ExecutorError(
                f"ray executor: task lost after {RAY_TASK_RETRIES} retries ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})"
            ) from None
        if not self._credited:
            self._credited = True
            TASK_CPU.credit(timed.cpu_s, inline=False)
        return timed.value

    def wait(self) -> None:
        self._ray.wait([self.ref], num_returns=1)


class RayExecutor(Executor):
    """Tasks on this party's Ray cluster (``address``), or on a Ray instance this process
    starts on its own host. A worker that dies is replaced and its task re-run by Ray
    (``RAY_TASK_RETRIES``); pending arguments travel as object references."""

    kind = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self._ray = connect_ray(address, workers)
        cpus = int(self._ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, cpus)
        self._timed = self._ray.remote(num_cpus=1, max_retries=RAY_TASK_RETRIES)(timed_call)
        self._remote: dict[Callable, Any] = {}

    def submit(self, fn: Callable, *args: Any) -> Pending:
        remote = self._remote.get(fn)
        if remote is None:  # named after the function, as Ray shows its tasks and workers
            remote = self._timed.options(name=fn.__name__)
            self._remote[fn] = remote
        refs = tuple(a.ref if isinstance(a, _RayPending) else a for a in args)
        try:
            ref = remote.remote(fn, *refs)
        except self._ray.exceptions.RayError as exc:
            raise ExecutorError(
                f"ray executor: cannot submit a task: {str(exc).splitlines()[0]}"
            ) from None
        return _RayPending(self._ray, ref)

    def close(self) -> None:
        return None  # the process-wide Ray connection outlives a job (see connect_ray)


ExecutorSource = Callable[[], Executor]
"""How a protocol reaches its party's executor: called only for a batch big enough to send
out, so a job of small batches never starts the pool."""


def executor_for(source: ExecutorSource | None, work: int, inline_below: int) -> Executor:
    """The party's executor for a batch of ``work`` units, or this thread below
    ``inline_below`` (a process hop costs more than a small batch saves) or without one."""
    if source is None or work < inline_below:
        return InlineExecutor()
    return source()


def make_executor(spec: ExecutorSpec) -> Executor:
    """The executor ``spec`` names. A local pool of one worker runs inline (no processes)."""
    if spec.kind == "inline" or (spec.kind == "local" and spec.workers == 1):
        return InlineExecutor()
    if spec.kind == "local":
        return LocalExecutor(spec.workers)
    missing = ray_missing_message()
    if missing is not None:
        raise ExecutorError(missing)
    return RayExecutor(spec.ray_address, spec.workers)
