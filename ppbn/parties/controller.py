"""The job controller of one daemon: the jobs it knows (the newest ``max_jobs_kept``
finished ones and the one running), the single slot it runs them in, and the two ways a
job starts: by this daemon's operator (``start``) or opened by a peer (``accept``).

The gRPC service (``ppbn.parties.service``) calls it for every job RPC. It asks
``admission`` whether a request passes (on both paths, before any peer is contacted or
anything is allocated), ``PeerLinks`` (``handshake``) to open the job's streams and to
check the peers' answers, the ``recorder`` to write the request down, and the ``runner``
to run the job in its worker thread. It calls nothing above it: the daemon builds it and
hands it to the service.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import threading
from collections.abc import Callable
from typing import Any

from ppbn.errors import UserError, printable
from ppbn.jobs.base import ChannelGroup, JobContext, JobKind
from ppbn.parties.admission import Admission
from ppbn.parties.config import DaemonSetup
from ppbn.parties.grpc_channel import GrpcChannel
from ppbn.parties.handshake import PeerLinks
from ppbn.parties.job import Job, JobRefused
from ppbn.parties.peer_errors import PeerMismatch
from ppbn.parties.runner import JobRunner, stopped_reason
from ppbn.parties.tls import MINER
from ppbn.proto import party_pb2
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.records import NONCE_BYTES

JobInfo = party_pb2.JobInfo
AbortCode = party_pb2.AbortCode
STOP_WAIT_S = 20.0  # SIGTERM: how long the running job gets to abort and write its files


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, where the C library this process runs on has one."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _malloc_trim()


def return_freed_memory() -> None:
    """Hand what a job left behind back to the system, at the job's end. Its objects live
    long enough to reach Python's oldest generation, which is collected rarely, so they
    stay as garbage; and glibc keeps freed heap in its arenas. Either way a daemon's
    resident memory grew with every job, none of it in use: two in-process daemons running
    5 small learn jobs grew by 243 MiB, by 87 MiB with the trim alone, by 199 MiB with the
    collection alone, by 7 MiB with both (``tests/parties/test_daemon_memory.py``)."""
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _traffic_labeller(channel: GrpcChannel | ChannelGroup) -> Callable[[str], None]:
    """Count the channel's traffic under the job's current phase from now on."""
    if isinstance(channel, ChannelGroup):
        return channel.label_traffic

    def label(section: str) -> None:
        channel.stats.section = section

    return label


class JobController:
    """The jobs of one daemon, the admission of a new one into its single slot, and the
    job's run from its start to the moment the slot is free again."""

    def __init__(self, setup: DaemonSetup, peers: PeerLinks) -> None:
        self.setup = setup
        self.config = setup.config
        self.role = setup.role
        self.log = setup.log
        self.peers = peers
        self.admission = Admission(setup)
        self.runner = JobRunner(setup)
        self.jobs: dict[str, Job] = {}
        self.running: Job | None = None
        self.lock = threading.Lock()

    # -- the two ways a job starts -------------------------------------------------
    def start(
        self, kind_name: str, params_json: str, job_id: str, initiator: str, resume: bool = False
    ) -> Job:
        """Reserve this daemon, get every peer of the job to accept it over a new stream, run it.

        The parameters are checked against this daemon's policy before any peer is
        contacted; the peer checks them against its own before it accepts. A resume takes
        the parameters of this daemon's own checkpoint and checks them again.
        """
        if resume:
            kind_name, params_json = self.admission.resume_request(job_id, params_json)
        peers = self.admission.job_peers(kind_name)
        # refuse before contacting anyone
        kind, params = self.admission.checked(kind_name, params_json, job_id if resume else "", "")
        for role in peers:
            introduction = self.peers.before_job(role)
            if not introduction.ok:
                self.log.error(
                    "job of kind %s requested by %s not started: %s",
                    kind_name,
                    initiator,
                    introduction.message,
                )
                raise UserError(f"job not started: peer {role}: {introduction.message}")
        job = self.reserve(kind, params, job_id, initiator, peers, resume=resume)
        self._record_request(job)
        job.opened_by = self.role
        self.log.info(
            "job %s (%s) requested by %s: asking %s",
            job.job_id,
            job.kind.name,
            initiator,
            " and ".join(self.peers.named(role) for role in peers),
            extra={"job": job.job_id},
        )
        calls = self.peers.open_job(job, initiator, resume)
        try:
            self.peers.await_acceptance(job)
            self._confirm(job)
        except ProtocolError as exc:
            job.abort_code = (
                AbortCode.MISMATCH if isinstance(exc, PeerMismatch) else AbortCode.PROTOCOL
            )
            job.channel.abort(job.abort_code)
            for call in calls:
                call.cancel()
            self._drop(job, f"job not started: {exc}")
            self.log.error("job %s: %s", job.job_id, job.error)
            peer_code = getattr(job.channel, "peer_abort_code", 0)
            raise JobRefused(
                job.error, peer_code or job.abort_code, refused_by=peers[0] if peer_code else ""
            ) from None
        self.launch(job)
        return job

    def accept(self, opening: party_pb2.Frame, peer: str) -> Job:
        """Reserve this daemon for the job of a stream ``peer`` opened, once its OPEN frame
        and the job's parameters pass this daemon's checks; the caller answers ACCEPT and
        launches it."""
        self.peers.check_opening(opening, peer)
        kind = opening.job.kind
        initiator = f"{printable(opening.initiator, 96)} (via {peer})"
        resume = opening.job.resume
        if resume:  # our own checkpoint's parameters must be the ones asked for
            own_kind, own_params = self.admission.resume_request(opening.job_id, "")
            if kind != own_kind:
                raise JobRefused(
                    f"resume of job {opening.job_id}: it was a {own_kind} job",
                    AbortCode.BAD_REQUEST,
                    "resume",
                )
        checked_kind, params = self.admission.checked(
            kind, opening.job.params_json, opening.job_id if resume else "", peer
        )
        if (
            resume
            and params != self.admission.checked(own_kind, own_params, opening.job_id, peer)[1]
        ):
            raise JobRefused(
                f"resume of job {opening.job_id}: the peer asks for other parameters than {self.role}'s checkpoint",
                AbortCode.BAD_REQUEST,
                "resume",
            )
        job = self.reserve(
            checked_kind, params, opening.job_id, initiator, (peer,), bytes(opening.nonce), resume
        )
        self._record_request(job)
        job.nonces[peer] = bytes(opening.nonce)
        job.opened_by = peer
        self.log.info(
            "job %s (%s) %s by %s",
            job.job_id,
            job.kind.name,
            "resumed" if resume else "opened",
            initiator,
            extra={"job": job.job_id},
        )
        return job

    def _record_request(self, job: Job) -> None:
        """Log a job this daemon accepted to run; refuse it if that cannot be logged."""
        if self.setup.recorder.requested(job):
            return
        self._drop(job, f"job not started: {self.role}'s audit log cannot be written")
        raise JobRefused(job.error, AbortCode.INTERNAL)

    # -- running and stopping --------------------------------------------------------
    def launch(self, job: Job) -> None:
        """Run an accepted job in its own worker thread."""
        threading.Thread(
            target=self._run, args=(job,), name=f"job-{job.job_id}", daemon=True
        ).start()

    def _run(self, job: Job) -> None:
        """The worker: run the job, then free the slot and the memory the job freed, and
        only then say it is done (a reader who sees it done finds the daemon free)."""
        try:
            self.runner.run(job)
        finally:
            self._release(job)
            return_freed_memory()
            job.done.set()

    def cancel(self, job: Job, reason: str) -> None:
        """Stop a running job here and tell its peers (CANCELLED); ``reason`` is its error."""
        if job.done.is_set():
            return
        self.log.info("job %s: %s", job.job_id, reason)
        job.context.cancel(reason)
        job.channel.abort(AbortCode.CANCELLED)

    def abort_running(self, grace_s: float) -> None:
        """The daemon shuts down: abort the running job (the peer is told why) and give it
        time to write its files."""
        job = self.running
        if job is None:
            return
        self.log.info("aborting job %s: daemon is shutting down", job.job_id)
        job.context.cancel(stopped_reason(self.role))
        job.channel.abort(AbortCode.SHUTTING_DOWN)
        if not job.done.wait(max(grace_s, STOP_WAIT_S)):
            self.log.error(
                "job %s did not stop within %g s; its files may be missing",
                job.job_id,
                STOP_WAIT_S,
            )

    # -- the slot ------------------------------------------------------------------
    def reserve(
        self,
        kind: JobKind,
        params: dict[str, Any],
        job_id: str,
        initiator: str,
        peers: tuple[str, ...],
        peer_nonce: bytes | None = None,
        resume: bool = False,
    ) -> Job:
        """Reserve this daemon for a job started here (``peer_nonce`` None) or opened by a
        peer; every job's reservation passes here, on both paths."""
        if self.setup.stopping.is_set():
            raise JobRefused(f"the daemon of {self.role} is shutting down", AbortCode.SHUTTING_DOWN)
        charged = (
            self.admission.charged_ids() if kind.privacy_cost(params) is not None else frozenset()
        )
        with self.lock:
            if self.running is not None:
                if not self._yields_to(self.running, peers, peer_nonce):
                    raise JobRefused(
                        f"{self.role} is busy with job {self.running.job_id}; try again later",
                        AbortCode.BUSY,
                    )
                self.log.info(
                    "job %s started here and a job of %s crossed: the peer's job runs (smaller nonce), "
                    "this one is withdrawn",
                    self.running.job_id,
                    self.peers.named(peers[0]),
                )
                self.running = None
            job_id = self.admission.job_id(job_id, self.jobs, resume, charged)
            channels = {
                role: GrpcChannel(
                    job_id,
                    role,
                    address=self.setup.peer_addresses.get(role, ""),
                    timeout_s=self.config.timeout_s,
                    frame_bytes=self.config.frame_bytes // 2,
                    queue_bytes=self.config.policy.max_queue_mb * 1024 * 1024,
                    session=job_id.encode(),
                )
                for role in peers
            }
            channel = channels[peers[0]] if len(peers) == 1 else ChannelGroup(channels)
            context = JobContext(
                job_id=job_id,
                kind=kind.name,
                role=self.role,
                schema=self.setup.schema,
                data=self.setup.data,
                params=params,
                out_dir=self.setup.files.make_partial_dir(job_id, resume),
                ledger=Ledger(self.role),
                policy=self.config.policy,
                fixed_seed_for_testing=self.config.fixed_seed_for_testing,
                resume=resume,
                checkpoint_written=self.setup.metrics.checkpoint_written,
                on_phase=_traffic_labeller(channel),
            )
            job = Job(job_id, kind, params, initiator, channel, context, pending=peer_nonce is None)
            # set under the lock: a crossing OPEN may arrive before start goes on
            job.opened_by = self.role if peer_nonce is None else peers[0]
            job.nonces[self.role] = os.urandom(NONCE_BYTES)
            self.running = job
            self.jobs[job_id] = job
            self._forget_old_jobs()
        return job

    def _yields_to(self, running: Job, peers: tuple[str, ...], peer_nonce: bytes | None) -> bool:
        """Whether the job a peer opens takes the place of ``running``: only when both daemons
        started a job with each other at the same moment (``running`` started here and is
        still waiting for the peer's answer). Both daemons compare the same two nonces, so
        exactly one job runs: the one with the smaller nonce; the other start is told busy."""
        if peer_nonce is None or not running.pending or running.opened_by != self.role:
            return False
        if (
            MINER in peers
            or not isinstance(running.channel, GrpcChannel)
            or running.channel.peer != peers[0]
        ):
            return False
        return peer_nonce < running.nonces[self.role]

    def _confirm(self, job: Job) -> None:
        """Every peer accepted the job started here: it runs, unless a crossing job of a peer
        took its place meanwhile (ProtocolError)."""
        with self.lock:
            if self.running is not job:  # withdrawn for the peer's crossing job meanwhile
                raise ProtocolError(
                    f"{self.role} is busy with job {self.running.job_id if self.running else '?'}"
                )
            job.pending = False

    def _forget_old_jobs(self) -> None:
        """Keep at most the policy's number of finished jobs in memory (their files stay)."""
        finished = [jid for jid, j in self.jobs.items() if j.done.is_set()]
        for jid in finished[: max(len(self.jobs) - self.config.policy.max_jobs_kept, 0)]:
            del self.jobs[jid]

    def _release(self, job: Job) -> None:
        with self.lock:
            if self.running is job:
                self.running = None

    def _drop(self, job: Job, error: str) -> None:
        """End a job that never ran: FAILED with ``error``, no files, this daemon free again."""
        job.state, job.error = JobInfo.FAILED, error
        shutil.rmtree(job.context.out_dir, ignore_errors=True)  # it never ran: no files
        job.done.set()
        self._release(job)
