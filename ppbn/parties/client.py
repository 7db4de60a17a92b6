"""Talking to a running daemon as an operator: start a job, follow it, read its outcome.

Used by ``ppbn learn`` and ``ppbn simulate``. The client presents the operator
certificate of its TLS folder (issued by the CA of the party whose daemon it controls)
and, before its first call, checks that what answers at the address presents a daemon
certificate (alice, bob or miner) from a CA it trusts.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import grpc

from ppbn.errors import UserError
from ppbn.jobs.progress import JobProgress
from ppbn.parties.net import describe_rpc_error, dial
from ppbn.parties.tls import (
    DAEMON_ROLES,
    OPERATOR,
    CertIdentity,
    load_tls_files,
    verify_server_role,
)
from ppbn.proto import party_pb2, party_pb2_grpc

JobInfo = party_pb2.JobInfo
FINISHED = (JobInfo.SUCCEEDED, JobInfo.FAILED, JobInfo.CANCELLED)
RPC_TIMEOUT_S = 30.0
VERIFY_TIMEOUT_S = 5.0
# gRPC's words for a connection that went silent (its keepalive pings unanswered, or a deadline)
_SILENT = ("ping timeout", "keepalive watchdog timeout", "deadline exceeded")


class UnknownJob(UserError):
    """The daemon knows no job of that id (it never took part in it, or has forgotten it)."""


@dataclass
class JobOutcome:
    job_id: str
    kind: str
    state: str  # SUCCEEDED, FAILED or CANCELLED
    error: str
    result: dict[str, Any] | None
    stats: dict[str, Any] | None
    peer_stats: dict[str, Any] | None
    out_dir: str
    refused: bool = False  # failed for its input or a policy, not for a fault
    progress: JobProgress | None = None  # where the job was when this was read

    @classmethod
    def from_info(cls, info: party_pb2.JobInfo) -> JobOutcome:
        def load(text: str) -> dict[str, Any] | None:
            return json.loads(text) if text else None

        return cls(
            job_id=info.job_id,
            kind=info.kind,
            state=JobInfo.State.Name(info.state),
            error=info.error,
            result=load(info.result_json),
            stats=load(info.stats_json),
            peer_stats=load(info.peer_stats_json),
            out_dir=info.out_dir,
            refused=info.refused,
            progress=progress_of(info),
        )


class DaemonClient:
    """A connection to one daemon; every failure is raised as a one-line UserError."""

    def __init__(
        self, address: str, tls_dir: str | None, identity: str = OPERATOR, insecure: bool = False
    ) -> None:
        self.address = address
        self._tls_dir = tls_dir  # for the command lines this client suggests
        self._tls = None if insecure else load_tls_files(_require(tls_dir), identity)
        # who answered at the address, checked before the first call (the daemon may still
        # be starting when the client is made)
        self.server: CertIdentity | None = None
        self._channel = dial(address, self._tls, "a daemon")
        self._stub = party_pb2_grpc.PartyServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self, method: Callable, request: Any, timeout: float = RPC_TIMEOUT_S, job_id: str = ""
    ) -> Any:
        """One call; ``job_id`` names the job being followed, so that a daemon lost while
        it runs is reported as such rather than as a connection set-up problem."""
        if self._tls is not None and self.server is None:
            self.server = verify_server_role(
                self.address, self._tls, DAEMON_ROLES, min(timeout, VERIFY_TIMEOUT_S)
            )
        try:
            return method(request, timeout=timeout)
        except grpc.RpcError as exc:
            if (
                exc.code() == grpc.StatusCode.NOT_FOUND
            ):  # the daemon answers it for an unknown job id only
                raise UnknownJob(f"daemon at {self.address}: {exc.details()}") from None
            if exc.code() in (
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.PERMISSION_DENIED,
                grpc.StatusCode.INVALID_ARGUMENT,
            ):
                raise UserError(f"daemon at {self.address}: {exc.details()}") from None
            if job_id:
                raise UserError(self._lost_during_job(exc, job_id)) from None
            raise UserError(describe_rpc_error(exc, self.address, "a daemon")) from None

    def status_command(self, job_id: str) -> str:
        """The command line that shows ``job_id`` at this daemon."""
        how = f"--tls-dir {self._tls_dir}" if self._tls is not None else "--insecure"
        return f"ppbn learn --peer {self.address} {how} --status {job_id}"

    def _lost_during_job(self, exc: grpc.RpcError, job_id: str) -> str:
        """One line for a daemon that answered when the job started and no longer does."""
        details = (exc.details() or "").strip()
        look = f"check it with: {self.status_command(job_id)}"
        how = _how_lost(exc)
        if how == "silent":
            return (
                f"the daemon at {self.address} stopped answering during job {job_id} ({details or 'no answer'}); "
                f"the job may still be running there: {look}"
            )
        if how == "tls":
            return describe_rpc_error(exc, self.address, "a daemon")
        return (
            f"the daemon at {self.address} closed the connection during job {job_id} (stopped or killed?); "
            f"when it is back, {look}"
        )

    def health(self, timeout: float = 5.0) -> party_pb2.HealthReply:
        return self._call(self._stub.Health, party_pb2.HealthRequest(), timeout)

    def wait_ready(self, timeout_s: float, need_peer: bool = True) -> party_pb2.HealthReply:
        """Wait until the daemon answers and (optionally) has shaken hands with its peer."""
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while True:
            try:
                reply = self.health(timeout=2.0)
                if not need_peer or reply.peer_state == "ok":
                    return reply
                last = f"{reply.role}: peer {reply.peer_state}"
            except UserError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise UserError(f"daemon at {self.address} not ready after {timeout_s:g} s: {last}")
            time.sleep(0.2)

    def start(
        self, kind: str, params: dict[str, Any], job_id: str = "", resume: bool = False
    ) -> str:
        """Start a job (or, with ``resume``, continue ``job_id`` from both daemons' checkpoints)."""
        request = party_pb2.JobRequest(
            kind=kind, params_json=json.dumps(params), job_id=job_id, resume=resume
        )
        return self._call(self._stub.StartJob, request).job_id

    def status(self, job_id: str, following: bool = False) -> party_pb2.JobInfo:
        """The job's state; ``following``: the job was started or seen running by this client."""
        query = party_pb2.JobQuery(job_id=job_id)
        return self._call(self._stub.JobStatus, query, job_id=job_id if following else "")

    def cancel(self, job_id: str) -> party_pb2.JobInfo:
        return self._call(self._stub.CancelJob, party_pb2.JobQuery(job_id=job_id))

    def wait(
        self,
        job_id: str,
        timeout_s: float | None = None,
        on_progress: Callable[[JobProgress], None] | None = None,
    ) -> JobOutcome:
        """Poll until the job finishes; hand ``on_progress`` the job's progress whenever it
        changes (time alone is no change), and once more, ``finished``, when it has ended."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        last: JobProgress | None = None
        while True:
            info = self.status(job_id, following=True)
            if on_progress is not None:
                progress = progress_of(info)
                shown = bool(progress.note or progress.structured)
                if progress.finished or (shown and (last is None or _moved(last, progress))):
                    on_progress(progress)
                last = progress
            if info.state in FINISHED:
                return JobOutcome.from_info(info)
            if deadline is not None and time.monotonic() > deadline:
                raise UserError(
                    f"job {job_id} still running after {timeout_s:g} s (follow it with --status {job_id}, "
                    f"stop it with --cancel {job_id})"
                )
            time.sleep(0.1)


def progress_of(info: party_pb2.JobInfo) -> JobProgress:
    """The job's progress from a daemon's JobInfo, parsed as text from a remote party."""
    progress = JobProgress.from_json(info.progress_json, info.progress)
    return dataclasses.replace(progress, finished=info.state in FINISHED)


def _moved(before: JobProgress, now: JobProgress) -> bool:
    """Something but the clock changed (elapsed time, the estimates and the note that
    shows them move on their own)."""
    still = {"elapsed_s": 0.0, "eta_s": None, "steps_eta_s": None, "note": ""}
    if not now.structured:
        still.pop("note")  # a daemon that sends no fields: its note is all there is
    return dataclasses.replace(before, **still) != dataclasses.replace(now, **still)


def _how_lost(exc: grpc.RpcError) -> Literal["silent", "tls", "closed"]:
    """How a daemon that answered before was lost: the connection went silent, a
    certificate check failed, or it closed. gRPC tells these apart only in the text of its
    details, so this is where they are read."""
    lowered = (exc.details() or "").lower()
    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED or any(s in lowered for s in _SILENT):
        return "silent"
    if any(s in lowered for s in ("hostname verification", "certificate")):
        return "tls"
    return "closed"


def _require(tls_dir: str | None) -> str:
    if not tls_dir:
        raise UserError("--tls-dir is required (or --insecure for a plaintext test daemon)")
    return tls_dir
