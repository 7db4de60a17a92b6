"""The Ray executor on a real local Ray instance (2 CPUs, no dashboard): the same
table phase on sachs, byte for byte, and the same learned network on asia as inline (and so
as the local pool: tests/protocols/test_executor.py);
a Ray worker killed in the middle of a job is retried by Ray, and a task that keeps
killing its worker fails with one clear error. Skipped when ray is not installed."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from executor_util import assert_same_learning, learn_run, tables_run  # noqa: E402
from timeouts import WAIT_S  # noqa: E402

from ppbn.protocols.channel import ProtocolError  # noqa: E402
from ppbn.protocols.executor import ExecutorError, InlineExecutor, RayExecutor, connect_ray  # noqa: E402

pytestmark = pytest.mark.ray
BUSY_TASKS = (
    "ray::encrypt_bit_rows",
    "ray::multiply_by_label",
    "ray::decrypt_bytes",
    "ray::combine_products",
)


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    connect_ray(None, 2)  # as a daemon starts it: 2 CPUs, no dashboard, Ray's messages on stderr
    ray.cloudpickle.register_pickle_by_value(
        sys.modules[__name__]
    )  # the workers cannot import tests/
    try:
        yield
    finally:
        ray.shutdown()


def add(*values: int) -> int:
    return sum(values)


def refuse(x: int) -> int:
    raise ProtocolError(f"bad value {x}")


def die(x: int) -> int:
    os._exit(3)


def test_ray_map_tree_and_errors() -> None:
    executor = RayExecutor()
    assert executor.workers == 2
    assert list(executor.map(add, [(i, i) for i in range(30)], inflight=4)) == [
        2 * i for i in range(30)
    ]
    leaves = (executor.submit(add, i) for i in range(50))
    assert executor.tree_reduce(add, leaves, fanin=4) == sum(range(50))
    with pytest.raises(ProtocolError, match="bad value 7"):
        list(executor.map(refuse, [(7,)]))
    inline = InlineExecutor()
    assert inline.tree_reduce(add, (inline.submit(add, i) for i in range(50)), fanin=4) == sum(
        range(50)
    )


def test_table_phase_is_bit_identical_inline_and_on_ray() -> None:
    inline = tables_run("inline", "sachs")
    on_ray = tables_run("ray", "sachs")
    assert on_ray[2] == inline[2]  # both transcripts, byte for byte
    for got, want in zip(on_ray[:2], inline[:2], strict=True):
        for family in want:
            np.testing.assert_array_equal(got[family], want[family])


def test_learn_job_is_the_same_inline_and_on_ray() -> None:
    assert_same_learning(learn_run("ray", "asia"), learn_run("inline", "asia"))


def _busy_ray_workers() -> list[int]:
    """Workers of this test's own Ray instance (descendants of this process: never another
    process's Ray) that are running one of the table phase's tasks."""
    parent: dict[int, int] = {}
    title: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            title[int(entry.name)] = (
                (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            )
        except (OSError, ValueError, IndexError):
            continue

    def ours(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 1)
            if pid == os.getpid():
                return True
        return False

    return [pid for pid, name in title.items() if name.startswith(BUSY_TASKS) and ours(pid)]


def test_a_ray_worker_killed_mid_job_is_retried_and_the_result_is_unchanged() -> None:
    expected = tables_run("inline", "asia", records=2000)
    killed: list[int] = []
    done = threading.Event()
    outcome: dict = {}

    def job() -> None:
        try:
            outcome["result"] = tables_run("ray", "asia", records=2000)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=job)
    thread.start()
    deadline = time.monotonic() + 60
    while not done.is_set() and not killed and time.monotonic() < deadline:
        busy = _busy_ray_workers()
        if busy:
            os.kill(busy[0], signal.SIGKILL)
            killed.append(busy[0])
        time.sleep(0.005)
    thread.join(120)
    assert killed, "the job ended before a busy Ray worker could be killed"
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"][2] == expected[2]  # retried tasks gave the same bytes


def test_a_task_that_keeps_killing_its_worker_fails_with_one_clear_line(
    capfd: pytest.CaptureFixture[str],
) -> None:
    executor = RayExecutor()
    capfd.readouterr()
    with pytest.raises(ExecutorError, match="ray executor: task lost after 3 retries") as err:
        list(executor.map(die, [(1,)]))
    assert "\n" not in str(err.value)
    assert list(executor.map(add, [(1, 2)])) == [3]  # the cluster serves on
    out, err_text = "", ""
    deadline = time.monotonic() + WAIT_S
    # Ray's listener prints late, and its wording varies between runs ("A worker died or was
    # killed ..." or the raylet's "Task die failed ... will be retried")
    crash = ("worker died", "will be retried")
    while not any(word in err_text for word in crash) and time.monotonic() < deadline:
        time.sleep(0.2)
        captured = capfd.readouterr()
        out, err_text = out + captured.out, err_text + captured.err
    time.sleep(1)  # and whatever follows it
    captured = capfd.readouterr()
    out, err_text = out + captured.out, err_text + captured.err
    assert any(word in err_text for word in crash)  # Ray's own account of the crash, on stderr ...
    assert out == ""  # ... and nothing on stdout, which is ppbn's (--format json)
