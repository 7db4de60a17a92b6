"""The gRPC service of one daemon (party.proto's PartyService) and who may call it.

Authorisation: every caller must present a certificate signed by a trusted CA (mutual
TLS) whose role URI the daemon checks. Handshake and Exchange are for the expected peer
daemons only; job control (StartJob, JobStatus, CancelJob) only for this daemon's own
operator (role operator, naming this party, issued by this party's CA); anyone else gets
PERMISSION_DENIED. Health is open to the operator and the peers.

The service calls down into the parts the daemon hands it: the job RPCs go to the job
controller (``ppbn.parties.controller``), Handshake to the peer links; nothing here calls
back up into the daemon that owns the server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from ppbn.errors import UserError, printable
from ppbn.parties.config import DaemonSetup
from ppbn.parties.controller import JobController
from ppbn.parties.grpc_channel import MALFORMED, GrpcChannel
from ppbn.parties.handshake import PeerLinks
from ppbn.parties.job import JobRefused
from ppbn.parties.tls import OPERATOR, CertIdentity, TlsFiles, peer_identity
from ppbn.proto import party_pb2, party_pb2_grpc

Frame = party_pb2.Frame
AbortCode = party_pb2.AbortCode


class Callers:
    """Checks the certificate of whoever calls this daemon against what the call is for."""

    def __init__(
        self, role: str, tls: TlsFiles | None, peer_roles: tuple[str, ...], log: logging.Logger
    ) -> None:
        self.role = role
        self.tls = tls
        self.peer_roles = peer_roles
        self.log = log

    def _deny(self, context: grpc.ServicerContext, what: str, allowed: str, who: str) -> None:
        message = f"{self.role} takes {what} only from {allowed}, not from {who}"
        self.log.error("refused %s from %s: %s", what, printable(context.peer()), message)
        context.abort(grpc.StatusCode.PERMISSION_DENIED, message)

    @staticmethod
    def _describe(identity: CertIdentity | None) -> str:
        if identity is None:
            return "a caller without a certificate"
        issuer = (
            ""
            if identity.vouched_for
            else f" issued by a CA of party {identity.issuer_party or '(none)'!r}"
        )
        return f"a certificate for role {identity.role!r} of party {identity.party!r}{issuer}"

    def _is_own_operator(self, identity: CertIdentity | None) -> bool:
        return (
            identity is not None
            and identity.role == OPERATOR
            and identity.party == self.role
            and identity.issued_by_own_ca
        )

    def _is_peer(self, identity: CertIdentity | None) -> bool:
        """A peer daemon's certificate, issued by that party's own CA (or ours)."""
        return (
            identity is not None
            and identity.role in self.peer_roles
            and identity.party == identity.role
            and identity.vouched_for
        )

    def require_operator(self, context: grpc.ServicerContext, what: str) -> str:
        """Job control is for this daemon's own operator only; returns who it is, for logs."""
        if self.tls is None:
            return "an unauthenticated caller (--insecure)"
        identity = peer_identity(context, self.tls)
        if not self._is_own_operator(identity):
            self._deny(
                context,
                what,
                f"its own operator (an operator certificate for {self.role} issued by "
                f"{self.role}'s CA)",
                self._describe(identity),
            )
        return f"operator of {self.role} ({identity.fingerprint[:16]})"

    def require_peer(self, context: grpc.ServicerContext, what: str) -> str:
        """The calling peer's role from its certificate ("" without TLS); refuse anyone else."""
        if self.tls is None:
            return ""
        identity = peer_identity(context, self.tls)
        if not self._is_peer(identity):
            self._deny(context, what, " or ".join(self.peer_roles), self._describe(identity))
        return identity.role

    def require_operator_or_peer(self, context: grpc.ServicerContext, what: str) -> None:
        if self.tls is None:
            return
        identity = peer_identity(context, self.tls)
        if self._is_own_operator(identity):
            return
        if not self._is_peer(identity):
            self._deny(
                context,
                what,
                f"its own operator or {' or '.join(self.peer_roles)}",
                self._describe(identity),
            )

    def claimed_peer(self, certified: str, claimed: str) -> str:
        """The peer role to check a Hello against: the certificate's, else (no TLS) the
        claimed role if it is one of ours, else our first peer (so the Hello is refused)."""
        if certified:
            return certified
        return claimed if claimed in self.peer_roles else self.peer_roles[0]


def _require_parsed(request: Any, context: grpc.ServicerContext, message: str) -> None:
    if request is MALFORMED:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid {message} message"
        )


class PartyService(party_pb2_grpc.PartyServiceServicer):
    """The RPCs: each checks its caller and its request, then answers from the daemon's
    setup and peer links or hands the job to the job controller."""

    def __init__(
        self, setup: DaemonSetup, callers: Callers, peers: PeerLinks, controller: JobController
    ) -> None:
        self.setup = setup
        self.role = setup.role
        self.hello = setup.hello
        self.log = setup.log
        self.callers = callers
        self.peers = peers
        self.controller = controller

    def Health(
        self, request: party_pb2.HealthRequest, context: grpc.ServicerContext
    ) -> party_pb2.HealthReply:  # noqa: N802 - gRPC method name
        self.callers.require_operator_or_peer(context, "health queries")
        _require_parsed(request, context, "HealthRequest")
        running = self.controller.running
        return party_pb2.HealthReply(
            status=party_pb2.HealthReply.SHUTTING_DOWN
            if self.setup.stopping.is_set()
            else party_pb2.HealthReply.SERVING,
            role=self.role,
            peer_state=self.peers.state,
            running_job=running.job_id if running else "",
            record_count=self.hello.record_count,
            schema_fingerprint=self.hello.schema_fingerprint,
        )

    def Handshake(
        self, request: party_pb2.Hello, context: grpc.ServicerContext
    ) -> party_pb2.HandshakeReply:  # noqa: N802
        certified = self.callers.require_peer(context, "handshakes")
        _require_parsed(request, context, "Hello")
        role = self.callers.claimed_peer(certified, request.role)
        return self.peers.answer(request, role, certified, context.peer())

    def StartJob(
        self, request: party_pb2.JobRequest, context: grpc.ServicerContext
    ) -> party_pb2.JobInfo:  # noqa: N802
        initiator = self.callers.require_operator(context, "job requests")
        _require_parsed(request, context, "JobRequest")
        try:
            job = self.controller.start(
                request.kind, request.params_json, request.job_id, initiator, request.resume
            )
        except UserError as exc:
            self.setup.recorder.refusal(request.job_id, request.kind, initiator, exc)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return job.info()

    def JobStatus(
        self, request: party_pb2.JobQuery, context: grpc.ServicerContext
    ) -> party_pb2.JobInfo:  # noqa: N802
        self.callers.require_operator(context, "job status queries")
        _require_parsed(request, context, "JobQuery")
        job = self.controller.jobs.get(request.job_id)
        return job.info() if job is not None else self._ended_job(request.job_id, context)

    def CancelJob(
        self, request: party_pb2.JobQuery, context: grpc.ServicerContext
    ) -> party_pb2.JobInfo:  # noqa: N802
        caller = self.callers.require_operator(context, "job cancellations")
        _require_parsed(request, context, "JobQuery")
        job = self.controller.jobs.get(request.job_id)
        if job is None:  # it ended before: nothing to cancel
            return self._ended_job(request.job_id, context)
        self.controller.cancel(job, f"cancelled by {caller}")
        job.done.wait(5.0)
        return job.info()

    def _ended_job(self, job_id: str, context: grpc.ServicerContext) -> party_pb2.JobInfo:
        """A job no longer in memory (it ended before this daemon restarted, or is one of
        the oldest), as its folder under --out tells it: the folder keeps its id taken, so
        the daemon knows the job as long as the folder is there."""
        info = self.setup.files.ended_info(job_id)
        if info is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"{self.role} knows no job {printable(job_id, 64)!r}"
            )
        return info

    def Exchange(  # noqa: N802
        self, request_iterator: Iterator[party_pb2.Frame], context: grpc.ServicerContext
    ) -> Iterator[party_pb2.Frame]:
        certified = self.callers.require_peer(context, "job streams")
        try:
            opening = next(request_iterator)
        except (StopIteration, grpc.RpcError):
            return
        if opening is MALFORMED:
            self.log.error(
                "refused a job stream from %s: its first frame is not a valid Frame message",
                certified or "?",
            )
            yield Frame(kind=Frame.ABORT, code=AbortCode.PROTOCOL)
            return
        job_id = opening.job_id
        peer = self.callers.claimed_peer(certified, opening.hello.role)
        try:
            job = self.controller.accept(opening, peer)
        except UserError as exc:
            code = exc.code if isinstance(exc, JobRefused) else AbortCode.BAD_REQUEST
            parameter = exc.parameter if isinstance(exc, JobRefused) else ""
            self.log.error("refused job %r from %s: %s", printable(job_id, 64), peer, exc)
            self.setup.recorder.refusal(
                job_id,
                opening.job.kind,
                f"{printable(opening.initiator, 96)} (via {peer})",
                exc,
                peer,
            )
            yield Frame(kind=Frame.ABORT, job_id=job_id[:64], code=code, parameter=parameter)
            return
        channel = job.channel
        assert isinstance(channel, GrpcChannel)
        context.add_callback(lambda: channel.mark_dead(f"connection to peer {peer} closed"))
        channel.queue_control(
            Frame(kind=Frame.ACCEPT, hello=self.hello, nonce=job.nonces[self.role])
        )
        threading.Thread(target=channel.pump, args=(request_iterator,), daemon=True).start()
        self.controller.launch(job)
        yield from channel.outgoing_frames()


def _parse_or_malformed(message_type: type) -> Callable[[bytes], Any]:
    """A request deserializer that answers MALFORMED for bytes that are not a valid message:
    gRPC's own failure would be an INTERNAL status and a traceback in the log."""

    def parse(data: bytes) -> Any:
        try:
            return message_type.FromString(data)
        except DecodeError:
            return MALFORMED

    return parse


def add_party_service(servicer: PartyService, server: grpc.Server) -> None:
    """Register every RPC of party.proto's PartyService, with ``_parse_or_malformed`` requests
    (each handler refuses a MALFORMED request: ``_require_parsed``, or a PROTOCOL abort)."""
    service = party_pb2.DESCRIPTOR.services_by_name["PartyService"]
    handlers = {}
    for method in service.methods:
        request = _parse_or_malformed(getattr(party_pb2, method.input_type.name))
        reply = getattr(party_pb2, method.output_type.name).SerializeToString
        make = (
            grpc.stream_stream_rpc_method_handler
            if method.client_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            getattr(servicer, method.name), request_deserializer=request, response_serializer=reply
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )
    server.add_registered_method_handlers(service.full_name, handlers)
