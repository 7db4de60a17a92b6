"""Running an admitted job: its outcome, and the one line it fails with.

Both daemons run the job function in a worker thread (started by the job controller,
``ppbn.parties.controller``) over the job's channel (a
``ChannelGroup`` of one stream per party at the miner). A dead or misbehaving peer fails
the job with one line within the timeout, naming what to do next, and the daemon goes on
serving; every way the job ends is told to the peers with an ABORT code, and written down
(its files, its audit lines) before the daemon takes the next job.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ppbn.data.outputs import is_file_error
from ppbn.errors import UserError
from ppbn.jobs.alignment import align_by_psi
from ppbn.jobs.base import ChannelGroup, JobCancelled, job_security
from ppbn.jobs.checkpoint import CheckpointStore
from ppbn.jobs.policy import PolicyRefusal
from ppbn.parties.budget import PrivacyBudget, RunTicket
from ppbn.parties.budget_home import check_home, note_home
from ppbn.parties.config import DaemonSetup
from ppbn.parties.grpc_channel import (
    AUDIT_LOG_PARAMETER,
    OUTPUTS_PARAMETER,
    RELAYED_PARAMETER,
    GrpcChannel,
)
from ppbn.parties.job import Job, JobFilesUnwritable
from ppbn.parties.job_stats import exchange_stats, mirrored_peer_stats, own_stats
from ppbn.parties.pauses import WATCH
from ppbn.parties.peer_errors import PeerSilent
from ppbn.parties.tls import MINER
from ppbn.proto import party_pb2
from ppbn.protocols.channel import PeerGone, ProtocolError
from ppbn.protocols.executor import ExecutorError
from ppbn.protocols.records import (
    RecordsMismatch,
    check_same_records,
    job_key,
    miner_check_records,
    party_check_records_for_miner,
)
from ppbn.protocols.security import CheatingDetected

JobInfo = party_pb2.JobInfo
AbortCode = party_pb2.AbortCode
NOTE_INTERVAL_S = 5.0
STOP_SIGNAL_WAIT_S = (
    1.0  # a worker lost: how long to wait for a stop signal to reach this daemon too
)


def stopped_reason(role: str) -> str:
    """Why a job ends when this daemon stops: said so at this side, never blamed on the peer."""
    return f"stopped by this daemon's operator: the daemon of {role} is shutting down"


def resume_session(job_id: str, opened_by: str, nonces: dict[str, bytes]) -> bytes:
    """Session label of a resumed run: the job id plus a digest of this run's fresh nonces,
    so no garbling or OT hash input of the interrupted run is used again."""
    order = [opened_by, *sorted(r for r in nonces if r != opened_by)]
    digest = hashlib.sha256(b"ppbn/resume" + b"".join(nonces[r] for r in order)).hexdigest()[:32]
    return f"{job_id}/resume/{digest}".encode()


def _peer_refused(job: Job) -> bool:
    """The peer ended the job for its input or policy (its ABORT code says so)."""
    return any(
        c.peer_abort_code in (AbortCode.POLICY, AbortCode.MISMATCH) for c in job.channels.values()
    )


def _relayed_failure(channel: GrpcChannel | ChannelGroup) -> tuple[int, str] | None:
    """The miner's ABORT to the other party when one party could not write the job down:
    FAILED with a parameter that says so, instead of a protocol error it did not make."""
    if not isinstance(channel, ChannelGroup):
        return None
    for each in channel.channels.values():
        if each.peer_abort_code == AbortCode.FAILED and each.peer_abort_parameter in (
            OUTPUTS_PARAMETER,
            AUDIT_LOG_PARAMETER,
        ):
            return AbortCode.FAILED, RELAYED_PARAMETER
    return None


def _abort_code_for(exc: ProtocolError) -> int:
    if isinstance(exc, RecordsMismatch):
        return AbortCode.MISMATCH
    if isinstance(exc, PeerSilent):
        return AbortCode.TIMEOUT
    return AbortCode.PROTOCOL


@dataclass
class BudgetRun:
    """One run's reservation in this daemon's budget, and whether it was released (this
    party contributed a noise word: from then on it is spent for good)."""

    budget: PrivacyBudget
    ticket: RunTicket
    released: bool = False

    def release(self) -> None:
        """Before the first noise word: marked first, so no refund follows a failed write."""
        if not self.released:
            self.released = True
            self.budget.release(self.ticket)

    def refund(self) -> None:
        self.budget.refund(self.ticket)


class JobRunner:
    """Runs an admitted job, then records how it ended."""

    def __init__(self, setup: DaemonSetup) -> None:
        self.config = setup.config
        self.role = setup.role
        self.data = setup.data
        self.schema_fingerprint = setup.hello.schema_fingerprint
        self.files, self.recorder, self.metrics = setup.files, setup.recorder, setup.metrics
        self.budget, self.dataset = setup.budget, setup.dataset
        self.stopping = setup.stopping
        self.log = setup.log

    def _follow(self, job: Job) -> None:
        """Let the job's notes and progress reach the log and the metrics."""
        last_note = [0.0]

        def log(text: str | None, major: bool) -> None:
            """A note (its own text), or the progress's note when ``text`` is None: a phase
            or a step at once, the rest at most every NOTE_INTERVAL_S; the progress's fields
            go with it (the JSON log's ``progress``)."""
            now = time.monotonic()
            if major or now - last_note[0] >= NOTE_INTERVAL_S:
                last_note[0] = now
                progress = job.progress()
                line = progress.note if text is None else text
                self.log.info(
                    "job %s: %s", job.job_id, line, extra={"progress": progress.as_dict()}
                )

        def note(text: str) -> None:
            if text.startswith("phase "):
                self.metrics.phase_entered(job, text[len("phase ") :])
            log(text, text.startswith("phase "))

        job.context.notes = note
        job.context.on_progress = lambda major: log(None, major)
        job.context.link_failure = lambda: job.channel.failure

    def _reserve_budget(self, job: Job) -> BudgetRun | None:
        """A DP run reserves its epsilon and delta of this daemon's budget before it sends
        anything derived from the data (PolicyRefusal over a total or the peer's rate: the
        job is refused), and releases it before its first noise word
        (``JobContext.before_release``). Every run is reserved, a resumed one too: it draws
        its noisy values again."""
        cost = job.kind.privacy_cost(job.params)
        if cost is None:
            return None
        dataset = self.dataset()
        check_home(self.budget, dataset, self.config.out_dir, self.config.audit_log)
        ticket = RunTicket(
            job.job_id,
            uuid.uuid4().hex[:16],
            job.kind.name,
            dataset,
            cost,
            job.initiator,
            peer=job.opened_by if job.opened_by != self.role else "",
        )
        self.budget.reserve(ticket, self.config.policy.dp_peer_jobs_per_hour)
        account = BudgetRun(self.budget, ticket)
        job.context.before_release = account.release
        self.log.info(
            "job %s: reserved epsilon %g, delta %g in the privacy budget %s (%g left)",
            job.job_id,
            cost.epsilon,
            cost.delta,
            self.budget.path(dataset),
            self.budget.remaining(dataset),
        )
        note_home(self.budget, dataset, self.config.out_dir)
        return account

    def _settle_budget(self, job: Job, account: BudgetRun | None) -> None:
        """A run that ended before its first noise word gets its reservation back; if that
        cannot be written, the reservation stays spent (the stricter reading)."""
        if account is None or account.released:
            return
        try:
            account.refund()
            self.log.info(
                "job %s: ended before anything was opened; epsilon %g refunded",
                job.job_id,
                account.ticket.cost.epsilon,
            )
        except UserError as exc:
            self.log.error(
                "job %s: the refund was not written, it stays spent: %s", job.job_id, exc
            )

    def _check_records(self, job: Job) -> None:
        """First step of every job: the parties hold the same record ids (keyed per job)."""
        if job.kind.name == "ping":
            return  # sends only fresh random bytes
        channel = job.channel
        order = [job.opened_by, *sorted(r for r in job.nonces if r != job.opened_by)]
        nonces = [job.nonces[r] for r in order]
        if isinstance(channel, ChannelGroup):
            miner_check_records(channel.channels, job.job_id, nonces)
        elif MINER in job.nonces:
            party_check_records_for_miner(
                channel, job.job_id, job.nonces[self.role], self.data.ids, 2
            )
        elif self.config.align == "psi":
            ctx = job.context
            with ctx.phase("record alignment"):
                ctx.data = align_by_psi(
                    channel,
                    self.role,
                    self.data,
                    job_key(job.job_id, nonces),
                    ctx.policy,
                    ctx.ledger,
                    ctx.report,
                    ctx.params.get("key_bits"),
                )
            return
        else:
            key = job_key(job.job_id, nonces)
            check_same_records(channel, key, self.data.ids, self.role, channel.peer)
        job.context.ledger.record(
            "records_match", True, "keyed record-id digest (HMAC-SHA256, per-job key)"
        )

    def run(self, job: Job) -> None:
        """Run the job to its end in this thread (its worker) and write down how it ended:
        its files, its audit lines, its budget; the caller then frees the daemon's slot."""
        self._follow(job)
        ctx, channel = job.context, job.channel
        start = time.perf_counter()
        self.metrics.job_started(job)
        account: BudgetRun | None = None
        try:
            self.recorder.started(job)
            ctx.ledger.record("schema", self.schema_fingerprint, "handshake")
            if self.role != MINER:  # the miner learns n from the parties' headers
                ctx.ledger.record("record_count", self.data.n_records, "handshake")
            ctx.ledger.record("security_level", job_security(ctx.params), "job request")
            account = self._reserve_budget(job)
            self._check_records(job)
            if ctx.resume and isinstance(channel, GrpcChannel):
                channel.session = resume_session(job.job_id, job.opened_by, job.nonces)
            result = job.kind.run(self.role, channel, ctx)  # type: ignore[arg-type]
            if not isinstance(result, dict):
                raise TypeError(f"job {job.kind.name} returned {type(result).__name__}, not a dict")
            stats = own_stats(job, self.role, time.perf_counter() - start)
            peer_stats = mirrored_peer_stats(job)  # the job's traffic, as ours
            # every output in the temporary folder and every reveal in the audit log before
            # the end-of-job exchange, which confirms it to the peers; a side that cannot
            # aborts instead, so no party keeps a job another party failed
            result = self.files.write(job, JobInfo.SUCCEEDED, result, stats, peer_stats)
            self.recorder.revealed(job)
            exchange_stats(channel, stats)
            channel.close()
            job.result, job.stats, job.peer_stats = result, stats, peer_stats
            job.state = JobInfo.SUCCEEDED
            self.log.info("job %s done in %.2f s", job.job_id, stats["wall_s"])
        except JobFilesUnwritable as exc:
            job.state, job.error = JobInfo.FAILED, str(exc)
            self._abort(job, AbortCode.FAILED, exc.parameter)
        except (JobCancelled, ProtocolError) as exc:
            if ctx.cancelled.is_set():
                job.state, job.error = JobInfo.CANCELLED, ctx.cancel_reason or "cancelled"
                if self.stopping.is_set():
                    job.error = self._failure_text(job, JobCancelled(job.error))
                self._abort(
                    job, AbortCode.SHUTTING_DOWN if self.stopping.is_set() else AbortCode.CANCELLED
                )
            elif isinstance(exc, CheatingDetected):  # stop at once; the peer gets nothing more
                job.state, job.error = JobInfo.FAILED, self._cheating_text(job, exc)
                self._abort(job, AbortCode.PROTOCOL, exc.check)
                self.recorder.cheating(job, exc)
            else:
                job.state, job.error = JobInfo.FAILED, self._failure_text(job, exc)
                job.refused = isinstance(exc, RecordsMismatch) or _peer_refused(job)
                self._abort(job, *_relayed_failure(channel) or (_abort_code_for(exc), ""))
        except UserError as exc:  # the data or a policy refuses the job: bad input, not a fault
            job.state, job.error, job.refused = JobInfo.FAILED, str(exc), True
            self._abort(
                job, AbortCode.POLICY if isinstance(exc, PolicyRefusal) else AbortCode.FAILED
            )
        except ExecutorError as exc:  # this party's workers or Ray cluster lost tasks: the job fails, the daemon serves on
            if self.stopping.wait(
                STOP_SIGNAL_WAIT_S
            ):  # a stop signal sent to the process group killed them
                job.state = JobInfo.CANCELLED
                job.error = self._failure_text(
                    job, JobCancelled(ctx.cancel_reason or stopped_reason(self.role))
                )
                self._abort(job, AbortCode.SHUTTING_DOWN)
            else:
                job.state, job.error = JobInfo.FAILED, f"{self.role}'s executor: {exc}"
                self._abort(job, AbortCode.INTERNAL)
        except Exception as exc:  # noqa: BLE001 - a job's bug must not take the daemon down
            if is_file_error(exc):  # a full disk, an I/O error: one line, no traceback
                job.state, job.error = JobInfo.FAILED, self.files.write_failure_text(exc)
                self._abort(job, AbortCode.FAILED, OUTPUTS_PARAMETER)
            else:
                self.log.exception("job %s crashed", job.job_id)
                job.state = JobInfo.FAILED
                job.error = f"internal error in job {job.kind.name} at {self.role}: {type(exc).__name__}: {exc}"
                self._abort(job, AbortCode.INTERNAL)
        finally:
            self._settle_budget(job, account)
            if job.stats is None:
                job.stats = own_stats(job, self.role, time.perf_counter() - start)
            if job.peer_stats is None:
                job.peer_stats = mirrored_peer_stats(job)
            self.files.finish(job)
            if job.state != JobInfo.SUCCEEDED:
                self.log.error(
                    "job %s %s: %s", job.job_id, JobInfo.State.Name(job.state).lower(), job.error
                )
            self.recorder.ended(job)

    def _cheating_text(self, job: Job, exc: CheatingDetected) -> str:
        """One line naming the peer and the check it failed; the evidence goes to the audit log."""
        peers = " and ".join(sorted(job.channels)) or "the peer"
        phase = f" (phase: {job.context.current_phase})" if job.context.current_phase else ""
        return (
            f"{peers} deviated from the protocol: {exc}{phase}; the job was aborted before "
            f"{peers} received anything more, and the evidence is in {self.role}'s audit log"
        )

    def _failure_text(self, job: Job, exc: Exception) -> str:
        """One line for a failed job: what happened (naming the peer), in which phase, and
        what to do next (resume where this daemon holds a checkpoint of the job)."""
        ctx = job.context
        text = str(exc)
        if isinstance(exc, PeerGone):  # a pause of this daemon's own is not the peer's doing
            text = WATCH.explain(self.role, text, job.channels, job.started, self.config.timeout_s)
        if ctx.current_phase:
            text += f" (phase: {ctx.current_phase})"
        abort = job.channel.peer_abort_code if isinstance(job.channel, GrpcChannel) else 0
        if not isinstance(exc, PeerGone | JobCancelled) or abort not in (
            0,
            AbortCode.SHUTTING_DOWN,
            AbortCode.TIMEOUT,
        ):
            return text  # the peer refused or broke the protocol: retrying the same will not help
        if (
            job.kind.name == "learn"
            and CheckpointStore(Path(self.config.out_dir), job.job_id, self.role).steps()
        ):
            charged = (
                " (charged to the privacy budget again)"
                if job.context.params.get("dp_epsilon") is not None
                else ""
            )
            return (
                text
                + f"; when both daemons are up, resume with `ppbn learn --resume {job.job_id}`"
                + charged
            )
        return text + "; when both daemons are up, start the job again"

    def _abort(self, job: Job, code: int, parameter: str = "") -> None:
        job.abort_code = code
        job.channel.abort(code, parameter)
