"""How the kernels are compiled: numba's ``njit`` without the interpreter lock and with its
on-disk cache, so a process loads machine code a previous one compiled.

numba is imported, and a kernel compiled or loaded, at the kernel's first call: a daemon
whose jobs never garble or extend OTs (and every command that runs none) does not pay
for it. numba caches beside the source, else in the user's cache folder, else under
``NUMBA_CACHE_DIR``; it refuses ``cache=True`` outright where none of them is writable (a
read-only install run by a user without a home, say). There a kernel is compiled in each
process instead, a few seconds at the first call, and the log says so once.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

_LOG = logging.getLogger(__name__)
_uncached: list[str] = []
_COMPILING = threading.Lock()


def _compiled(function: Callable) -> Any:
    from numba import njit

    try:
        return njit(nogil=True, cache=True)(function)
    except RuntimeError as exc:
        if "cannot cache" not in str(exc):
            raise
        if not _uncached:
            _LOG.warning(
                "no writable cache for the compiled kernels (%s): each process compiles them "
                "at first use; set NUMBA_CACHE_DIR to a writable folder to keep them",
                exc,
            )
        _uncached.append(function.__qualname__)
        return njit(nogil=True, cache=False)(function)


class Kernel:
    """A function compiled by numba at its first call; calls and attributes (``stats``,
    ``signatures``) then go to numba's dispatcher."""

    def __init__(self, function: Callable) -> None:
        functools.update_wrapper(self, function)
        self._function = function
        self._dispatcher: Any = None

    def dispatcher(self) -> Any:
        if self._dispatcher is None:
            with _COMPILING:
                if self._dispatcher is None:
                    self._dispatcher = _compiled(self._function)
        return self._dispatcher

    def __call__(self, *args: Any) -> Any:
        return (self._dispatcher or self.dispatcher())(*args)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)


def kernel(function: Callable) -> Kernel:
    """A compiled kernel: releases the interpreter lock, cached on disk where it can be."""
    return Kernel(function)
