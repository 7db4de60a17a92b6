"""How the kernels are compiled: numba's ``njit`` without the interpreter lock and with its
on-disk cache, so a process loads machine code a previous one compiled.

numba caches beside the source, else in the user's cache folder, else under
``NUMBA_CACHE_DIR``; it refuses ``cache=True`` outright where none of them is writable (a
read-only install run by a user without a home, say). There a kernel is compiled in each
process instead, a few seconds at the first call, and the log says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from numba import njit

F = TypeVar("F", bound=Callable[..., Any])
_LOG = logging.getLogger(__name__)
_uncached: list[str] = []


def _compiled(function: F, options: dict[str, Any]) -> F:
    try:
        return njit(nogil=True, cache=True, **options)(function)
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
        return njit(nogil=True, cache=False, **options)(function)


def kernel(function: F) -> F:
    """A compiled kernel: releases the interpreter lock, cached on disk where it can be."""
    return _compiled(function, {})


def inline_kernel(function: F) -> F:
    """A small compiled helper inlined into the kernels that call it."""
    return _compiled(function, {"inline": "always"})
