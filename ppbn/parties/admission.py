"""Which jobs a daemon takes: the checks a request passes against the local policy, the
job's id and folder, and the one slot a daemon runs jobs in.

Local policy (``ppbn.jobs.policy``): each daemon enforces its own; nothing that arrives
from the network can weaken it. A job's parameters are checked against it at both
daemons, by the initiator before it contacts the peer and by the peer before it answers
ACCEPT, and before anything is allocated for the job, so a refusal costs at most the
request's (bounded) size. Seeds, masks and keys come from the local CSPRNG; resources
(workers, message and queue sizes) come from the policy, never from a job message. A
differentially private job must also fit in what this daemon's privacy budget has left
(``ppbn.parties.budget``): checked here before the peer is contacted, charged by the runner.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData
from ppbn.errors import UserError, printable
from ppbn.jobs.base import (
    ChannelGroup,
    JobContext,
    JobKind,
    ParameterError,
    PolicyScope,
    check_job_policy,
)
from ppbn.jobs.checkpoint import CheckpointStore, data_digest
from ppbn.jobs.policy import PolicyRefusal
from ppbn.parties.budget import PrivacyBudget
from ppbn.parties.budget_home import check_home
from ppbn.parties.config import DaemonConfig
from ppbn.parties.grpc_channel import GrpcChannel
from ppbn.parties.handshake import MINER_JOB_KINDS, other_role
from ppbn.parties.job import Job, JobRefused
from ppbn.parties.job_files import JobFiles
from ppbn.parties.metrics import DaemonMetrics
from ppbn.parties.tls import MINER, PARTY_ROLES
from ppbn.proto import party_pb2
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.records import NONCE_BYTES

JobInfo = party_pb2.JobInfo
AbortCode = party_pb2.AbortCode
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # also a folder name: no "..", no "/"
MAX_PARAMS_BYTES = 64 * 1024  # a job request's JSON parameters; a refusal costs no more than this


def _traffic_labeller(channel: GrpcChannel | ChannelGroup) -> Callable[[str], None]:
    """Count the channel's traffic under the job's current phase from now on."""
    if isinstance(channel, ChannelGroup):
        return channel.label_traffic

    def label(section: str) -> None:
        channel.stats.section = section

    return label


class JobTable:
    """The jobs this daemon knows (the newest ``max_jobs_kept`` finished ones and the one
    running) and the admission of a new one into its single slot."""

    def __init__(
        self,
        config: DaemonConfig,
        schema: Schema,
        data: PartyData,
        hello: party_pb2.Hello,
        peer_addresses: dict[str, str],
        files: JobFiles,
        metrics: DaemonMetrics,
        log: logging.Logger,
        stopping: threading.Event,
        budget: PrivacyBudget,
        dataset: Callable[[], str],
    ) -> None:
        self.config = config
        self.role = config.role
        self.budget = budget
        self.dataset = dataset  # the key of this daemon's data set in the budget
        # the peer of two-party jobs; the miner has none (its jobs involve both parties)
        self.peer_role = other_role(config.role) if config.role in PARTY_ROLES else ""
        self.schema = schema
        self.data = data
        self.hello = hello
        self.peer_addresses = peer_addresses
        self.files = files
        self.metrics = metrics
        self.log = log
        self.stopping = stopping
        self.jobs: dict[str, Job] = {}
        self.running: Job | None = None
        self.lock = threading.Lock()

    def job_peers(self, kind_name: str) -> tuple[str, ...]:
        """Who a job of this kind started here runs with; refuse kinds that start elsewhere."""
        if self.role == MINER:
            if kind_name not in MINER_JOB_KINDS:
                raise UserError(
                    f"the miner runs only {', '.join(sorted(MINER_JOB_KINDS))} jobs, not {kind_name!r}"
                )
            return PARTY_ROLES
        if kind_name in MINER_JOB_KINDS:
            raise UserError(
                f"job kind {kind_name} runs between the miner and both parties: start it at the miner's daemon"
            )
        return (self.peer_role,)

    def checked_params(self, kind: JobKind, params_json: str) -> dict[str, Any]:
        """Parse, normalise and check a job's parameters against the local policy."""
        if len(params_json.encode("utf-8", "replace")) > MAX_PARAMS_BYTES:
            raise JobRefused(
                f"job parameters are over {MAX_PARAMS_BYTES // 1024} KiB", AbortCode.BAD_REQUEST
            )
        try:
            raw = json.loads(params_json or "{}")
        except json.JSONDecodeError as exc:
            raise JobRefused(
                f"job parameters are not valid JSON: {exc.msg}", AbortCode.BAD_REQUEST
            ) from None
        except RecursionError:
            raise JobRefused(
                "job parameters are nested too deeply", AbortCode.BAD_REQUEST
            ) from None
        if not isinstance(raw, dict):
            raise JobRefused("job parameters must be a JSON object", AbortCode.BAD_REQUEST)
        try:
            params = kind.check_params(raw, self.schema)
            scope = PolicyScope(
                self.role, self.schema, self.data.n_records, self.hello.missing_rule
            )
            check_job_policy(kind, params, self.config.policy, scope)
        except PolicyRefusal as exc:
            raise self._refused(exc) from None
        except ParameterError as exc:
            raise JobRefused(
                f"{exc} (parameter {exc.parameter!r})", AbortCode.BAD_REQUEST, exc.parameter
            ) from None
        except JobRefused:
            raise
        except UserError as exc:
            raise JobRefused(str(exc), AbortCode.BAD_REQUEST) from None
        except RecursionError:
            raise JobRefused(
                "job parameters are nested too deeply", AbortCode.BAD_REQUEST
            ) from None
        return params

    def _refused(self, exc: PolicyRefusal) -> JobRefused:
        """A refusal by this party's policy, naming the parameter at fault."""
        return JobRefused(
            f"refused by {self.role}'s policy (parameter {exc.parameter!r}): {exc}",
            AbortCode.POLICY,
            exc.parameter,
        )

    def check_budget(
        self, kind: JobKind, params: dict[str, Any], resumed_id: str = "", peer: str = ""
    ) -> None:
        """Refuse a DP job (normalised ``params``) that would spend more epsilon or delta
        than this daemon's data set has left, or whose data set's account cannot be found
        (``budget_home``); ``resumed_id`` names a resumed job (a new run, reserved again);
        ``peer`` the peer opening it, held to ``dp_peer_jobs_per_hour``. After
        ``checked_params`` (the per-job policy), before the peer is contacted
        (``PartyDaemon._checked_job``, on both paths)."""
        cost = kind.privacy_cost(params)
        if cost is None:
            return
        try:
            dataset = self.dataset()
            check_home(self.budget, dataset, self.config.out_dir, self.config.audit_log)
            self.budget.check(
                resumed_id, dataset, cost, peer, self.config.policy.dp_peer_jobs_per_hour
            )
        except PolicyRefusal as exc:
            raise self._refused(exc) from None
        except UserError as exc:  # the budget cannot be read or found: no DP job until it can
            raise JobRefused(str(exc), AbortCode.FAILED) from None

    def _new_job_id(
        self, requested: str, resume: bool = False, charged: frozenset[str] = frozenset()
    ) -> str:
        """The requested id if it is free in memory and on disk, else a fresh one; a reused id
        would overwrite an earlier job's result, ledger and network files. A resume continues
        its own unfinished job (checked by ``resume_request``) in the same folder. A DP job
        takes no id in ``charged`` (the budget's, whose folder may be gone): the budget
        charges a job id once, so a new job under an old id would spend nothing."""
        if resume:
            earlier = self.jobs.get(requested)
            if earlier is not None and not earlier.done.is_set():
                raise JobRefused(f"job {requested} is still running at {self.role}", AbortCode.BUSY)
            return requested
        if not requested:
            while True:
                candidate = uuid.uuid4().hex[:12]
                if (
                    candidate not in self.jobs
                    and not self.files.on_disk(candidate)
                    and candidate not in charged
                ):
                    return candidate
        if not _JOB_ID.match(requested):
            raise JobRefused(
                f"job id {printable(requested, 64)!r} must be 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit",
                AbortCode.BAD_REQUEST,
            )
        if requested in self.jobs or self.files.on_disk(requested):
            earlier = self.jobs.get(requested)
            running = earlier is not None and not earlier.done.is_set()
            raise JobRefused(self.files.taken(requested, running), AbortCode.DUPLICATE_JOB)
        if requested in charged:
            raise JobRefused(
                f"{self.role} already charged a job {requested!r} to its privacy budget "
                f"in {self.budget.folder}; choose another id",
                AbortCode.DUPLICATE_JOB,
            )
        return requested

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
        """Reserve this daemon for a job started here (``peer_nonce`` None) or opened by a peer."""
        if self.stopping.is_set():
            raise JobRefused(f"the daemon of {self.role} is shutting down", AbortCode.SHUTTING_DOWN)
        charged = self._charged_ids() if kind.privacy_cost(params) is not None else frozenset()
        with self.lock:
            if self.running is not None:
                if not self.yields_to(self.running, peers, peer_nonce):
                    raise JobRefused(
                        f"{self.role} is busy with job {self.running.job_id}; try again later",
                        AbortCode.BUSY,
                    )
                self.log.info(
                    "job %s started here and a job of %s crossed: the peer's job runs (smaller nonce), "
                    "this one is withdrawn",
                    self.running.job_id,
                    peers[0],
                )
                self.running = None
            job_id = self._new_job_id(job_id, resume, charged)
            channels = {
                role: GrpcChannel(
                    job_id,
                    role,
                    address=self.peer_addresses.get(role, ""),
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
                schema=self.schema,
                data=self.data,
                params=params,
                out_dir=self.files.make_partial_dir(job_id, resume),
                ledger=Ledger(self.role),
                policy=self.config.policy,
                fixed_seed_for_testing=self.config.fixed_seed_for_testing,
                resume=resume,
                checkpoint_written=self.metrics.checkpoint_written,
                on_phase=_traffic_labeller(channel),
            )
            job = Job(job_id, kind, params, initiator, channel, context, pending=peer_nonce is None)
            # set under the lock: a crossing OPEN may arrive before start_job goes on
            job.opened_by = self.role if peer_nonce is None else peers[0]
            job.nonces[self.role] = os.urandom(NONCE_BYTES)
            self.running = job
            self.jobs[job_id] = job
            self._forget_old_jobs()
        return job

    def _charged_ids(self) -> frozenset[str]:
        try:
            return self.budget.job_ids(self.dataset())
        except UserError as exc:
            raise JobRefused(str(exc), AbortCode.FAILED) from None

    def yields_to(self, running: Job, peers: tuple[str, ...], peer_nonce: bytes | None) -> bool:
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

    def confirm(self, job: Job) -> None:
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

    def release(self, job: Job) -> None:
        with self.lock:
            if self.running is job:
                self.running = None

    def drop(self, job: Job, error: str) -> None:
        """End a job that never ran: FAILED with ``error``, no files, this daemon free again."""
        job.state, job.error = JobInfo.FAILED, error
        shutil.rmtree(job.context.out_dir, ignore_errors=True)  # it never ran: no files
        job.done.set()
        self.release(job)

    def resume_request(self, job_id: str, params_json: str) -> tuple[str, str]:
        """Kind and parameters of the job to resume, from this daemon's own newest checkpoint.

        The checkpoint must exist, decrypt under this daemon's key and have been made on the
        same data; parameters given with the request must equal the checkpoint's."""
        if not _JOB_ID.match(job_id or ""):
            raise JobRefused(
                f"resume needs the id of an earlier job, not {printable(job_id, 64)!r}",
                AbortCode.BAD_REQUEST,
                "resume",
            )
        store = CheckpointStore(Path(self.config.out_dir), job_id, self.role)
        try:
            header = store.latest_header()
        except UserError as exc:
            raise JobRefused(
                f"cannot resume job {job_id}: {exc}", AbortCode.BAD_REQUEST, "resume"
            ) from None
        if header is None:
            raise JobRefused(
                f"{self.role} has no checkpoint of job {job_id} in {store.folder}: nothing to resume",
                AbortCode.BAD_REQUEST,
                "resume",
            )
        # under --align psi the job's data is the intersection, known only after the PSI: the
        # resumed job compares its digest with the checkpoint's (ppbn.jobs.learn.agree_resume_step)
        same_data = self.config.align == "psi" or header.get("data") == data_digest(
            self.data.ids, self.data.codes
        )
        if header.get("role") != self.role or not same_data:
            raise JobRefused(
                f"cannot resume job {job_id}: {self.role}'s data changed since its checkpoint",
                AbortCode.BAD_REQUEST,
                "resume",
            )
        if params_json and params_json.strip() not in ("", "{}"):
            try:
                asked = json.loads(params_json)
            except (json.JSONDecodeError, RecursionError):
                asked = None
            if asked != header["params"]:
                raise JobRefused(
                    f"resume of job {job_id}: parameters differ from the checkpoint's (give none)",
                    AbortCode.BAD_REQUEST,
                    "resume",
                )
        return str(header["kind"]), json.dumps(header["params"])
