"""Talking to a running daemon as an operator: start a job, follow it, read its outcome.

Used by ``ppbn learn`` and ``ppbn simulate``. The client presents the operator
certificate of its TLS folder (issued by the CA of the party whose daemon it controls)
and, before its first call, checks that what answers at the address presents a daemon
certificate (alice, bob or miner) from a CA it trusts.

To its client a daemon is still a remote party: every field of its answers is checked
(``JobOutcome.from_info``), an answer about another job than the one asked for is
refused, and its texts are made ``printable`` before they reach a message. A malformed
answer is one ``BadAnswer`` line naming the field and the daemon.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import grpc

from ppbn.errors import UserError, printable
from ppbn.jobs.progress import JobProgress
from ppbn.parties.job_files import partial_dir
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
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # the ids daemons give (parties.admission)
MAX_TEXT_CHARS = 500  # a daemon's error line, out_dir or gRPC details, cut to this
MAX_JSON_DEPTH = 64  # deeper JSON from a daemon is refused: printing it recurses
# the figures of a daemon's stats that the outcome tables print as numbers
FIGURES = (
    "wall_s",
    "bytes_sent",
    "bytes_received",
    "messages_sent",
    "messages_received",
    "rounds",
    "public_key_operations",
    "paillier_encryptions",
)


class UnknownJob(UserError):
    """The daemon knows no job of that id (it never took part in it, or has forgotten it)."""


class BadAnswer(UserError):
    """The daemon's answer is malformed, or is about another job than the one asked for."""


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
    def from_info(cls, info: party_pb2.JobInfo, address: str) -> JobOutcome:
        """The outcome in the JobInfo the daemon at ``address`` sent, every field checked:
        texts made printable, the JSON fields objects, ``out_dir`` the job's own folder."""
        _check_state(info, address)
        return cls(
            job_id=info.job_id,
            kind=printable(info.kind, 32),
            state=JobInfo.State.Name(info.state),
            error=printable(info.error, MAX_TEXT_CHARS),
            result=_json_object(info, "result_json", address),
            stats=_figures(info, "stats_json", address),
            peer_stats=_figures(info, "peer_stats_json", address),
            out_dir=_job_folder(info, address),
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
            details = printable(exc.details() or "", MAX_TEXT_CHARS)
            if (
                exc.code() == grpc.StatusCode.NOT_FOUND
            ):  # the daemon answers it for an unknown job id only
                raise UnknownJob(f"daemon at {self.address}: {details}") from None
            if exc.code() in (
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.PERMISSION_DENIED,
                grpc.StatusCode.INVALID_ARGUMENT,
            ):
                raise UserError(f"daemon at {self.address}: {details}") from None
            if job_id:
                raise UserError(printable(self._lost_during_job(exc, job_id), 2000)) from None
            described = describe_rpc_error(exc, self.address, "a daemon")
            raise UserError(printable(described, 2000)) from None

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
                last = f"{printable(reply.role, 32)}: peer {printable(reply.peer_state)}"
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
        given = self._call(self._stub.StartJob, request).job_id
        if given != job_id if job_id else not _JOB_ID.fullmatch(given):
            asked = f" when asked for job {job_id!r}" if job_id else ""
            raise BadAnswer(
                f"the daemon at {self.address} sent a malformed job_id: "
                f"{printable(given, 64)!r}{asked}"
            )
        return given

    def status(self, job_id: str, following: bool = False) -> party_pb2.JobInfo:
        """The job's state; ``following``: the job was started or seen running by this client."""
        query = party_pb2.JobQuery(job_id=job_id)
        info = self._call(self._stub.JobStatus, query, job_id=job_id if following else "")
        return self._about(info, job_id)

    def cancel(self, job_id: str) -> party_pb2.JobInfo:
        info = self._call(self._stub.CancelJob, party_pb2.JobQuery(job_id=job_id))
        return self._about(info, job_id)

    def _about(self, info: party_pb2.JobInfo, job_id: str) -> party_pb2.JobInfo:
        """``info`` when it answers for ``job_id`` in a known state."""
        if info.job_id != job_id:
            raise BadAnswer(
                f"the daemon at {self.address} sent a malformed job_id: "
                f"{printable(info.job_id, 64)!r} when asked for job {job_id!r}"
            )
        _check_state(info, self.address)
        return info

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
                return JobOutcome.from_info(info, self.address)
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


def _bad(info: party_pb2.JobInfo, name: str, address: str, why: str) -> BadAnswer:
    return BadAnswer(
        f"the daemon at {address} sent a malformed {name} for job {printable(info.job_id, 64)!r}: {why}"
    )


def _check_state(info: party_pb2.JobInfo, address: str) -> None:
    if info.state not in (JobInfo.RUNNING, *FINISHED):
        raise _bad(info, "state", address, f"{info.state} is no state of a job")


def _json_object(info: party_pb2.JobInfo, name: str, address: str) -> dict[str, Any] | None:
    """The JSON object in field ``name`` of ``info``, or None when the field is empty."""
    text = getattr(info, name)
    if not text:
        return None
    try:
        value = json.loads(text)
    except RecursionError:
        raise _bad(info, name, address, f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise _bad(info, name, address, f"not JSON ({printable(exc)})") from None
    if not isinstance(value, dict):
        raise _bad(info, name, address, f"a JSON {type(value).__name__}, not an object")
    if _too_deep(value):
        raise _bad(info, name, address, f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _too_deep(value: Any) -> bool:
    """Whether JSON ``value`` nests more than MAX_JSON_DEPTH lists and objects (without
    recursing: that is what it guards)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth > MAX_JSON_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in item)
    return False


def _figures(info: party_pb2.JobInfo, name: str, address: str) -> dict[str, Any] | None:
    """A party's figures (``stats_json``, ``peer_stats_json``): a role, phases of seconds,
    and FIGURES as numbers, as the outcome tables print them."""
    stats = _json_object(info, name, address)
    if stats is None:
        return None
    if not isinstance(stats.get("role", ""), str):
        raise _bad(info, name, address, "'role' is not text")
    phases = stats.get("phases", {})
    if not isinstance(phases, dict) or not all(_amount(s) for s in phases.values()):
        raise _bad(info, name, address, "'phases' is not an object of seconds")
    wrong = [key for key in FIGURES if key in stats and not _amount(stats[key])]
    if wrong:
        raise _bad(info, name, address, f"{wrong[0]!r} is not a number")
    return stats


def _amount(value: object) -> bool:
    """A count or a number of seconds: finite, not negative."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _job_folder(info: party_pb2.JobInfo, address: str) -> str:
    """``out_dir``, which must name the job's own folder: OUT/JOB_ID, or the temporary
    folder it is written in while it runs."""
    if not info.out_dir:
        return ""
    folder = Path(info.out_dir)
    if folder.name not in (info.job_id, partial_dir(folder.parent, info.job_id).name):
        shown = printable(info.out_dir, MAX_TEXT_CHARS)
        raise _bad(info, "out_dir", address, f"{shown!r} is not that job's folder")
    return info.out_dir


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
