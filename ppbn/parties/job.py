"""One job as a daemon sees it, and the two ways a daemon declines to run or record one.

Shared by the parts of the daemon that admit, open, run and record a job
(``ppbn.parties.admission``, ``ppbn.parties.controller``, ``ppbn.parties.handshake``,
``ppbn.parties.runner``, ``ppbn.parties.recorder``), so none of them needs another's
module for its type.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from ppbn.errors import UserError
from ppbn.jobs.base import ChannelGroup, JobContext, JobKind
from ppbn.jobs.progress import JobProgress
from ppbn.parties.grpc_channel import GrpcChannel
from ppbn.parties.pauses import WATCH
from ppbn.proto import party_pb2

JobInfo = party_pb2.JobInfo


class JobRefused(UserError):
    """A job this daemon will not run: the one-line local reason, and the abort code (and
    parameter name) the peer is told instead of the reason."""

    def __init__(self, message: str, code: int, parameter: str = "", refused_by: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.parameter = parameter
        self.refused_by = refused_by  # the peer's role when the peer refused; "" for this daemon


class JobFilesUnwritable(Exception):
    """This daemon cannot record the job (its audit log refuses a line): the job fails at
    every party, with ``parameter`` in the ABORT saying which."""

    def __init__(self, message: str, parameter: str) -> None:
        super().__init__(message)
        self.parameter = parameter


@dataclass
class Job:
    """One job as this daemon sees it; ``info()`` is what JobStatus returns."""

    job_id: str
    kind: JobKind
    params: dict[str, Any]
    initiator: str
    channel: GrpcChannel | ChannelGroup
    context: JobContext
    state: int = JobInfo.RUNNING
    error: str = ""
    refused: bool = False  # FAILED for its input or a policy (JobInfo.refused)
    nonces: dict[str, bytes] = field(
        default_factory=dict
    )  # role -> nonce of every daemon of the job
    opened_by: str = ""  # role of the daemon that opened the job's streams
    pending: bool = (
        False  # started here, the peer has not accepted yet (see JobController._yields_to)
    )
    result: dict[str, Any] | None = None
    stats: dict[str, Any] | None = None
    peer_stats: dict[str, Any] | None = None
    abort_code: int = 0  # the code this daemon sent when it gave up the job
    reveal_audited: bool = False  # its revealed lines were appended (or tried) before it ended
    started: float = field(default_factory=WATCH.clock)  # to tell pauses of this daemon during it
    done: threading.Event = field(default_factory=threading.Event)

    def progress(self) -> JobProgress:
        """Where the job is now, with the bytes its channels carried so far (read as plain
        counters: the job thread keeps writing them)."""
        channels = self.channels.values()
        moved = sum(c.stats.bytes_sent + c.stats.bytes_received for c in channels)
        return self.context.tracker.snapshot(moved)

    def info(self) -> party_pb2.JobInfo:
        progress = self.progress()
        return JobInfo(
            job_id=self.job_id,
            kind=self.kind.name,
            # finished only once its files are in place (result, stats and ledger written, the
            # job folder renamed) and its audit lines written: an operator may read them at once
            state=self.state if self.done.is_set() else JobInfo.RUNNING,
            error=self.error,
            result_json=json.dumps(self.result) if self.result is not None else "",
            stats_json=json.dumps(self.stats) if self.stats is not None else "",
            peer_stats_json=json.dumps(self.peer_stats) if self.peer_stats is not None else "",
            progress=progress.note,
            progress_json=json.dumps(progress.as_dict()),
            initiator=self.initiator,
            out_dir=str(self.context.out_dir),
            refused=self.refused,
        )

    @property
    def channels(self) -> dict[str, GrpcChannel]:
        """The job's stream to each peer, by the peer's role."""
        if isinstance(self.channel, ChannelGroup):
            return self.channel.channels  # type: ignore[return-value]
        return {self.channel.peer: self.channel}
