"""What a daemon writes down about its jobs: audit log lines (``ppbn.parties.audit``) and
the matching metrics (``ppbn.parties.metrics``).

A line the audit log cannot take is logged loudly and stops what it was to record: a job
is not started, or not confirmed to its peers, unrecorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppbn.data.outputs import io_remedy, reason
from ppbn.errors import UserError
from ppbn.jobs.base import job_security
from ppbn.jobs.checkpoint import CheckpointStore
from ppbn.parties.audit import AuditLog
from ppbn.parties.grpc_channel import AUDIT_LOG_PARAMETER
from ppbn.parties.job import Job, JobFilesUnwritable, JobRefused
from ppbn.parties.metrics import DaemonMetrics
from ppbn.proto import party_pb2
from ppbn.protocols.security import CheatingDetected

JobInfo = party_pb2.JobInfo
AbortCode = party_pb2.AbortCode


class Recorder:
    """The audit log (open while the daemon serves) and the metrics of one daemon."""

    def __init__(
        self, role: str, out_dir: str, metrics: DaemonMetrics, log: logging.Logger
    ) -> None:
        self.role = role
        self.out_dir = out_dir
        self.metrics = metrics
        self.log = log
        self.audit: AuditLog | None = None  # opened (and its chain verified) by open()

    def open(self, path: str | Path) -> None:
        self.audit = AuditLog(path, self.role, self.log)

    def close(self) -> None:
        """Close the audit log; a line appended later fails loudly, as on a full disk."""
        if self.audit is not None:
            self.audit.close()

    def discard(self) -> None:
        """Close the log of a daemon that did not start: it has nothing to append to."""
        self.close()
        self.audit = None

    def append(self, append: Callable[[AuditLog], Any]) -> bool:
        """Append an audit event; a failure is logged loudly and reported as False. A daemon
        that is not serving (``open`` opens the log) has nothing to append to."""
        if self.audit is None:
            return True
        try:
            append(self.audit)
        except OSError as exc:
            self.log.error(
                "audit log %s: cannot append an event (%s): no job runs until it can; %s",
                self.audit.path,
                reason(exc),
                io_remedy(exc, self.audit.path.parent),
            )
            return False
        except ValueError as exc:
            self.log.error("audit log %s: cannot append an event: %s", self.audit.path, exc)
            return False
        return True

    def requested(self, job: Job) -> bool:
        """Log a job this daemon accepted to run (and, for a resume, the step it resumes
        from); False if that could not be logged."""
        if not self.append(
            lambda audit: audit.requested(job.job_id, job.kind.name, job.initiator, job.params)
        ):
            return False
        if job.context.resume:
            steps = CheckpointStore(Path(self.out_dir), job.job_id, self.role).steps()
            self.append(
                lambda audit: audit.resumed(
                    job.job_id,
                    job.kind.name,
                    job.initiator,
                    f"step {steps[-1]}" if steps else "none",
                )
            )
        return True

    def refusal(
        self, job_id: str, kind: str, requester: str, exc: UserError, source: str = ""
    ) -> None:
        """``source``: who sent the request as authenticated (bounds its refusal lines)."""
        refused = isinstance(exc, JobRefused)
        code = (
            AbortCode.Name(exc.code)
            if refused and exc.code in AbortCode.values()
            else "NOT_STARTED"
        )
        self.metrics.job_refused(code)
        self.append(
            lambda audit: audit.refused(
                job_id,
                kind,
                requester,
                code=code,
                reason=str(exc),
                parameter=exc.parameter if refused else "",
                refused_by=(exc.refused_by if refused else "") or self.role,
                source=source or requester,
            )
        )

    def started(self, job: Job) -> None:
        """The job's first line once it runs; it does not run unrecorded."""
        peers = sorted(set(job.nonces) - {self.role})
        security = job_security(job.params)
        if not self.append(lambda audit: audit.started(job.job_id, job.kind.name, peers, security)):
            raise JobFilesUnwritable(
                f"{self.role}'s audit log cannot be written (see its log): the job does not run unrecorded",
                AUDIT_LOG_PARAMETER,
            )

    def cheating(self, job: Job, exc: CheatingDetected) -> None:
        """The evidence of a peer caught deviating, before the job's end line."""
        peers = sorted(job.channels)
        self.append(
            lambda audit: audit.cheating(job.job_id, peers, exc.check, exc.detail, exc.evidence)
        )

    def revealed(self, job: Job) -> None:
        """Log what the job revealed before it is confirmed to the peers: a job whose reveals
        the audit log cannot hold fails at every party instead of succeeding unrecorded."""
        job.reveal_audited = True
        if not self.append(lambda audit: audit.revealed(job.job_id, job.context.ledger)):
            raise JobFilesUnwritable(
                f"{self.role}'s audit log cannot be written (see its log): the job's outputs are kept at no party",
                AUDIT_LOG_PARAMETER,
            )

    def ended(self, job: Job) -> None:
        """What the job revealed (its ledger, by class) and how it ended, with the code."""
        state = JobInfo.State.Name(job.state)
        self.metrics.job_finished(job, state.lower())
        if not job.reveal_audited:
            self.append(lambda audit: audit.revealed(job.job_id, job.context.ledger))
        peer_code = next((c.peer_abort_code for c in job.channels.values() if c.peer_abort_code), 0)
        if job.state == JobInfo.SUCCEEDED:
            event, code = "finished", ""
        elif job.state == JobInfo.CANCELLED:
            event, code = "cancelled", AbortCode.Name(job.abort_code or AbortCode.CANCELLED)
        elif peer_code:
            event, code = (
                "aborted",
                AbortCode.Name(peer_code) if peer_code in AbortCode.values() else str(peer_code),
            )
        else:
            event, code = (
                "failed",
                AbortCode.Name(job.abort_code) if job.abort_code else "ABORT_UNSPECIFIED",
            )
        # an internal error's text may quote anything; the daemon's own log keeps it
        error = (
            "internal error (see the daemon log)"
            if job.abort_code == AbortCode.INTERNAL
            else job.error
        )
        stats = job.stats or {}
        figures = {
            k: stats[k]
            for k in ("wall_s", "bytes_sent", "bytes_received", "rounds", "phases")
            if k in stats
        }
        self.append(lambda audit: audit.ended(job.job_id, event, code, error, figures))
