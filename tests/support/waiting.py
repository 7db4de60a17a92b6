"""Polling helpers shared by the tests that run daemons (free ports come from
``ppbn.pair.loopback.free_port``, the harness's own)."""

from __future__ import annotations

import time
from collections.abc import Callable

from timeouts import WAIT_S


def wait_until(
    predicate: Callable[[], object], timeout_s: float = WAIT_S, what: str = "condition"
) -> object:
    """Poll ``predicate`` every 50 ms and return its first true value; AssertionError naming
    ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
