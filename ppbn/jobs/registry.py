"""The job kinds a daemon runs, by name: the built-in ones listed here, plus any that a
test or an extension registers at run time.

The list is explicit so that what a daemon runs can be read in one place; a job module
only declares its ``JobKind`` (``ppbn/jobs/base.py``). Only the daemon side above
``jobs`` imports this module, so no job module depends on the set of all jobs.
"""

from __future__ import annotations

import threading

from ppbn.errors import UserError
from ppbn.jobs import learn, perturb, pram, tables
from ppbn.jobs.base import PING_JOB, JobKind

BUILTIN_JOBS: tuple[JobKind, ...] = (
    PING_JOB,
    tables.TABLES_JOB,
    learn.LEARN_JOB,
    pram.SETUP_ONE_JOB,
    pram.SETUP_TWO_JOB,
    perturb.SETUP_ONE_JOB,
    perturb.SETUP_TWO_JOB,
)

_REGISTRY: dict[str, JobKind] = {kind.name: kind for kind in BUILTIN_JOBS}
_REGISTRY_LOCK = threading.Lock()


def register_job(kind: JobKind) -> None:
    """Add (or replace) a kind by its name: for tests and extensions."""
    with _REGISTRY_LOCK:
        _REGISTRY[kind.name] = kind


def unregister_job(name: str) -> None:
    with _REGISTRY_LOCK:
        _REGISTRY.pop(name, None)


def job_kinds() -> list[str]:
    """The names of the kinds this daemon runs, sorted."""
    with _REGISTRY_LOCK:
        return sorted(_REGISTRY)


def job_kind(name: str) -> JobKind:
    """The kind a request names; an unknown name is the requester's error and lists the known ones."""
    with _REGISTRY_LOCK:
        kind = _REGISTRY.get(name)
    if kind is None:
        raise UserError(f"unknown job kind {name!r}; this daemon runs: {', '.join(job_kinds())}")
    return kind
