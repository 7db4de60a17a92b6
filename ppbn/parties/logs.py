"""JSON log lines for ``party serve --log-format json``: one object per line, for log shippers.

Fields: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``role``, ``message``, ``job``
(the job id where known: a record's ``job`` attribute, given with ``extra={"job": id}``,
else the job thread's name ``job-ID``), ``progress`` (a job's progress lines: phase, step,
steps, unit, done, total, bytes, elapsed_s, eta_s, ... as in ``JobProgress.as_dict``) and
``exception`` (the traceback, as one string).
Peer text reaches messages only through ``printable()``; JSON escaping keeps every record
on one line in any case.
"""

from __future__ import annotations

import datetime as dt
import json
import logging

JOB_THREAD_PREFIX = "job-"  # the daemon names each job's thread job-<id>


class JsonFormatter(logging.Formatter):
    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"
            ),
            "level": record.levelname,
            "logger": record.name,
            "role": self.role,
            "message": record.getMessage(),
        }
        job = getattr(record, "job", None) or _job_of_thread(record.threadName)
        if job:
            entry["job"] = str(job)
        progress = getattr(record, "progress", None)
        if isinstance(progress, dict):  # a job's progress, as fields (``JobProgress.as_dict``)
            entry["progress"] = progress
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=True, default=str)


def _job_of_thread(name: str | None) -> str:
    return name[len(JOB_THREAD_PREFIX) :] if name and name.startswith(JOB_THREAD_PREFIX) else ""
