"""``ppbn party serve``: one organisation's daemon, next to its own data.

Lifecycle: load and check the schema and this party's data (one-line errors naming
file, line and column), load and check the TLS files, listen, then keep introducing
itself to the peer (Handshake) so both logs say early whether the two sides agree on
the CA, the roles, the schema, the record count and the record ids. A job is started
by an operator on either daemon (StartJob); that daemon opens one Exchange stream to
its peer, which re-checks the Hello carried in the OPEN frame and accepts or refuses
with a reason. Both daemons then run the job function in a worker thread over a
``GrpcChannel``; a dead or misbehaving peer fails the job with one line within the
timeout, and the daemon goes on serving. SIGTERM stops it gracefully (the running job is
aborted with a reason the peer sees).

Authorisation: every caller must present a certificate signed by the CA (mutual TLS).
Handshake and Exchange are for the peer daemon only; job control and health are open
to alice, bob and operator certificates (every job needs both daemons anyway, and a
job kind only reveals what the security model allows).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from ppbn.bn.schema import Schema
from ppbn.errors import UserError
from ppbn.parties.data import PartyData, load_party_data
from ppbn.parties.grpc_channel import GrpcChannel
from ppbn.parties.jobs import JobCancelled, JobContext, JobKind, job_kind
from ppbn.parties.net import describe_rpc_error, dial, server_options
from ppbn.parties.tls import PARTY_ROLES, caller_identity, load_tls_files, server_credentials
from ppbn.proto import party_pb2, party_pb2_grpc
from ppbn.protocols.channel import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT_S, ProtocolError
from ppbn.protocols.ledger import Ledger

PROTOCOL_VERSION = 1
JobInfo = party_pb2.JobInfo
Frame = party_pb2.Frame
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # also a folder name: no "..", no "/"
HANDSHAKE_TIMEOUT_S = 10.0
STATS_MAX_BYTES = 1 << 20
NOTE_INTERVAL_S = 5.0
REACH_RETRY_S = 4.0


def other_role(role: str) -> str:
    if role not in PARTY_ROLES:
        raise UserError(f"--role must be alice or bob, got {role!r}")
    return "bob" if role == "alice" else "alice"


def ids_digest(ids: tuple[str, ...]) -> str:
    """SHA-256 of the sorted record ids: equal iff both parties hold the same records.

    Both parties already know their common ids (that is how rows align), so comparing
    the digests reveals nothing when they agree and only "they differ" otherwise.
    """
    h = hashlib.sha256()
    for record_id in ids:
        h.update(record_id.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def hello_mismatch(mine: party_pb2.Hello, theirs: party_pb2.Hello, expected_role: str) -> str | None:
    """Why ``theirs`` is not the peer ``mine`` should work with, or None if it is."""
    me, them = mine.role, theirs.role or "?"
    if theirs.protocol_version != mine.protocol_version:
        return (
            f"protocol version of {them} is {theirs.protocol_version}, of {me} "
            f"{mine.protocol_version}: run the same ppbn version on both hosts"
        )
    if theirs.role != expected_role:
        return f"the peer says it is {them!r} but {me} expects {expected_role!r} (check --role and --peer)"
    if theirs.identity and theirs.identity != theirs.role:
        return f"the peer says it is {them!r} but its certificate is for {theirs.identity!r}"
    if theirs.schema_fingerprint != mine.schema_fingerprint:
        return (
            f"schema fingerprint of {me} is {mine.schema_fingerprint[:12]}, of {them} "
            f"{theirs.schema_fingerprint[:12]}: both daemons must load the same schema.json"
        )
    if theirs.record_count != mine.record_count:
        return (
            f"{me} holds {mine.record_count} records, {them} holds {theirs.record_count}: "
            "both data files must hold the same records"
        )
    if theirs.ids_digest != mine.ids_digest:
        return f"{me} and {them} hold the same number of records but different record ids"
    return None


@dataclass
class DaemonConfig:
    role: str
    schema_path: str
    data_path: str
    listen: str
    peer: str
    tls_dir: str | None = None
    insecure: bool = False
    out_dir: str = "ppbn-out"
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    missing_as_category: bool = False
    probe_interval_s: float = 2.0


@dataclass
class Job:
    """One job as this daemon sees it; ``info()`` is what JobStatus returns."""

    job_id: str
    kind: JobKind
    params: dict[str, Any]
    initiator: str
    channel: GrpcChannel
    context: JobContext
    state: int = JobInfo.RUNNING
    error: str = ""
    result: dict[str, Any] | None = None
    stats: dict[str, Any] | None = None
    peer_stats: dict[str, Any] | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def info(self) -> party_pb2.JobInfo:
        return JobInfo(
            job_id=self.job_id,
            kind=self.kind.name,
            state=self.state,
            error=self.error,
            result_json=json.dumps(self.result) if self.result is not None else "",
            stats_json=json.dumps(self.stats) if self.stats is not None else "",
            peer_stats_json=json.dumps(self.peer_stats) if self.peer_stats is not None else "",
            progress=self.context.last_progress,
            initiator=self.initiator,
            out_dir=str(self.context.out_dir),
        )


class PartyDaemon(party_pb2_grpc.PartyServiceServicer):
    """The gRPC service of one party plus its job runner and peer prober."""

    def __init__(self, config: DaemonConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.role = config.role
        self.peer_role = other_role(config.role)
        self.log = logger or logging.getLogger(f"ppbn.party.{config.role}")
        self.log.info("loading schema %s", config.schema_path)
        self.schema = Schema.load(config.schema_path)
        self.log.info("loading %s's data %s", self.role, config.data_path)
        self.data: PartyData = load_party_data(
            self.schema, self.role, config.data_path, config.missing_as_category
        )
        self.log.info(
            "data ok: %d records, %d variables of %s (%s)",
            self.data.n_records, len(self.data.columns), self.role, ", ".join(self.data.columns),
        )  # fmt: skip
        if config.insecure:
            self.tls = None
            self.log.warning(
                "INSECURE: plaintext gRPC, no certificates: anyone on the network can read the "
                "traffic and pose as %s; use only on a trusted loopback", self.peer_role,
            )  # fmt: skip
        else:
            if not config.tls_dir:
                raise UserError("--tls-dir is required (or --insecure for plaintext testing)")
            self.tls = load_tls_files(config.tls_dir, self.role)
            self.log.info("TLS: certificate %s.crt signed by %s/ca.crt", self.role, config.tls_dir)
        self.hello = party_pb2.Hello(
            role=self.role,
            protocol_version=PROTOCOL_VERSION,
            schema_fingerprint=self.schema.fingerprint(),
            record_count=self.data.n_records,
            identity=self.role if self.tls else "",
            ids_digest=ids_digest(self.data.ids),
        )
        self.jobs: dict[str, Job] = {}
        self.running: Job | None = None
        self.peer_state = "not contacted yet"
        self.port = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: grpc.Server | None = None
        self._peer_channel: grpc.Channel | None = None
        self._peer_stub: party_pb2_grpc.PartyServiceStub | None = None
        self._prober: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> int:
        """Listen and start probing the peer; returns the bound port."""
        server = grpc.server(
            ThreadPoolExecutor(max_workers=16, thread_name_prefix=f"grpc-{self.role}"),
            options=server_options(self.config.max_message_bytes),
        )
        party_pb2_grpc.add_PartyServiceServicer_to_server(self, server)
        try:
            if self.tls is None:
                port = server.add_insecure_port(self.config.listen)
            else:
                port = server.add_secure_port(self.config.listen, server_credentials(self.tls))
        except RuntimeError as exc:
            raise UserError(f"cannot listen on {self.config.listen}: {exc}") from None
        if port == 0:
            raise UserError(f"cannot listen on {self.config.listen} (address in use or not local?)")
        server.start()
        self._server, self.port = server, port
        self._peer_channel = dial(
            self.config.peer, self.tls, self.peer_role, self.config.max_message_bytes
        )
        self._peer_stub = party_pb2_grpc.PartyServiceStub(self._peer_channel)
        self.log.info(
            "%s listening on %s (port %d, %s); peer %s expected at %s",
            self.role, self.config.listen, port, "mutual TLS" if self.tls else "PLAINTEXT",
            self.peer_role, self.config.peer,
        )  # fmt: skip
        self._prober = threading.Thread(target=self._probe_loop, name="peer-probe", daemon=True)
        self._prober.start()
        return port

    def stop(self, grace_s: float = 3.0) -> None:
        """Abort the running job (the peer is told why), then stop serving."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        job = self.running
        if job is not None:
            self.log.info("aborting job %s: daemon is shutting down", job.job_id)
            reason = f"the daemon of {self.role} is shutting down"
            job.context.cancel(reason)
            job.channel.abort(reason)
            job.done.wait(grace_s)
        if self._server is not None:
            self._server.stop(grace_s).wait()
        if self._peer_channel is not None:
            self._peer_channel.close()
        self.log.info("%s stopped", self.role)

    def serve_forever(self) -> None:
        """Run until SIGTERM or SIGINT, then shut down gracefully."""
        stop = threading.Event()

        def on_signal(signum: int, _frame: object) -> None:
            self.log.info("received %s: shutting down", signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        while not stop.wait(0.5):
            pass
        self.stop()

    # -- peer introductions --------------------------------------------------------
    def handshake_peer(self) -> tuple[bool, str]:
        """Introduce ourselves to the peer; (accepted, one-line explanation)."""
        assert self._peer_stub is not None
        address = self.config.peer
        try:
            reply = self._peer_stub.Handshake(self.hello, timeout=HANDSHAKE_TIMEOUT_S)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.PERMISSION_DENIED:
                return False, f"peer at {address} refused our certificate: {exc.details()}"
            return False, describe_rpc_error(exc, address, self.peer_role)
        if not reply.accepted:
            return False, f"peer {self.peer_role} at {address} refused us: {reply.reason}"
        mismatch = hello_mismatch(self.hello, reply.hello, self.peer_role)
        if mismatch:
            return False, f"refused peer at {address}: {mismatch}"
        return True, f"peer {self.peer_role} at {address} agrees on schema, records and protocol"

    def _set_peer_state(self, ok: bool, message: str) -> None:
        state = "ok" if ok else message
        if state != self.peer_state:
            if ok:
                self.log.info("handshake: %s", message)
            elif "refused the connection" in message:
                self.log.warning("handshake: %s (will keep trying)", message)
            else:
                self.log.error("handshake: %s", message)
        self.peer_state = state

    def _probe_loop(self) -> None:
        while not self._stopping.is_set():
            ok, message = self.handshake_peer()
            if self._stopping.is_set():
                return
            self._set_peer_state(ok, message)
            self._stopping.wait(self.config.probe_interval_s * (5 if ok else 1))

    # -- authorisation -------------------------------------------------------------
    def _caller(self, context: grpc.ServicerContext) -> str:
        return caller_identity(context) if self.tls else "an unauthenticated caller (--insecure)"

    def _require_peer(self, context: grpc.ServicerContext, what: str) -> None:
        if self.tls is None:
            return
        identity = caller_identity(context)
        if identity != self.peer_role:
            message = (
                f"{self.role} takes {what} only from {self.peer_role}, not from a certificate "
                f"for {identity!r}"
            )
            self.log.error("refused %s from %s: %s", what, context.peer(), message)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, message)

    # -- RPCs ----------------------------------------------------------------------
    def Health(self, request, context):  # noqa: N802 - gRPC method name
        running = self.running
        return party_pb2.HealthReply(
            status=party_pb2.HealthReply.SHUTTING_DOWN
            if self._stopping.is_set()
            else party_pb2.HealthReply.SERVING,
            role=self.role,
            peer_state=self.peer_state,
            running_job=running.job_id if running else "",
            record_count=self.data.n_records,
            schema_fingerprint=self.hello.schema_fingerprint,
        )

    def Handshake(self, request, context):  # noqa: N802
        self._require_peer(context, "handshakes")
        if self.tls is not None and request.identity != caller_identity(context):
            mismatch: str | None = (
                f"the peer's Hello names certificate {request.identity!r} but it connected with "
                f"{caller_identity(context)!r}"
            )
        else:
            mismatch = hello_mismatch(self.hello, request, self.peer_role)
        if mismatch:
            self._set_peer_state(False, f"refused peer {context.peer()}: {mismatch}")
            return party_pb2.HandshakeReply(accepted=False, reason=mismatch, hello=self.hello)
        return party_pb2.HandshakeReply(accepted=True, hello=self.hello)

    def StartJob(self, request, context):  # noqa: N802
        initiator = self._caller(context)
        try:
            job = self.start_job(request.kind, request.params_json, request.job_id, initiator)
        except UserError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return job.info()

    def JobStatus(self, request, context):  # noqa: N802
        job = self.jobs.get(request.job_id)
        if job is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{self.role} knows no job {request.job_id!r}")
        return job.info()

    def CancelJob(self, request, context):  # noqa: N802
        job = self.jobs.get(request.job_id)
        if job is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{self.role} knows no job {request.job_id!r}")
        self.cancel_job(job, f"cancelled by {self._caller(context)}")
        job.done.wait(5.0)
        return job.info()

    def Exchange(self, request_iterator, context):  # noqa: N802
        self._require_peer(context, "job streams")
        try:
            opening = next(request_iterator)
        except (StopIteration, grpc.RpcError):
            return
        job_id = opening.job_id
        try:
            job = self._accept_job(opening)
        except UserError as exc:
            self.log.error("refused job %s from %s: %s", job_id, self.peer_role, exc)
            yield Frame(kind=Frame.ABORT, job_id=job_id, error=str(exc))
            return
        channel = job.channel
        context.add_callback(
            lambda: channel.mark_dead(f"connection to peer {self.peer_role} closed")
        )
        channel.queue_control(Frame(kind=Frame.ACCEPT, hello=self.hello))
        threading.Thread(target=channel.pump, args=(request_iterator,), daemon=True).start()
        self._launch(job)
        yield from channel.outgoing_frames()

    # -- jobs ----------------------------------------------------------------------
    def _new_job(self, kind_name: str, params_json: str, job_id: str, initiator: str) -> Job:
        kind = job_kind(kind_name)
        try:
            raw = json.loads(params_json or "{}")
        except json.JSONDecodeError as exc:
            raise UserError(f"job parameters are not valid JSON: {exc.msg}") from None
        if not isinstance(raw, dict):
            raise UserError("job parameters must be a JSON object")
        params = kind.check_params(raw, self.schema)
        job_id = job_id or uuid.uuid4().hex[:12]
        if not _JOB_ID.match(job_id):
            raise UserError(f"job id {job_id!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        if self._stopping.is_set():
            raise UserError(f"the daemon of {self.role} is shutting down")
        out_dir = Path(self.config.out_dir) / job_id
        channel = GrpcChannel(
            job_id,
            self.peer_role,
            address=self.config.peer,
            timeout_s=self.config.timeout_s,
            max_message_bytes=self.config.max_message_bytes,
        )
        context = JobContext(
            job_id=job_id,
            kind=kind.name,
            role=self.role,
            schema=self.schema,
            data=self.data,
            params=params,
            out_dir=out_dir,
            ledger=Ledger(self.role),
        )
        job = Job(job_id, kind, params, initiator, channel, context)
        with self._lock:
            if job_id in self.jobs:
                raise UserError(f"{self.role} already has a job {job_id!r}")
            if self.running is not None:
                raise UserError(f"{self.role} is busy with job {self.running.job_id}; try again later")
            self.running = job
            self.jobs[job_id] = job
        return job

    def _release(self, job: Job) -> None:
        with self._lock:
            if self.running is job:
                self.running = None

    def start_job(self, kind_name: str, params_json: str, job_id: str, initiator: str) -> Job:
        """Reserve this daemon, get the peer to accept the job over a new stream, run it."""
        ok, message = self._handshake_before_job()
        if not ok:
            self.log.error("job of kind %s requested by %s not started: %s", kind_name, initiator, message)
            raise UserError(f"job not started: {message}")
        job = self._new_job(kind_name, params_json, job_id, initiator)
        channel = job.channel
        self.log.info("job %s (%s) requested by %s: asking %s", job.job_id, job.kind.name, initiator, self.peer_role)
        channel.queue_control(
            Frame(
                kind=Frame.OPEN,
                hello=self.hello,
                job=party_pb2.JobRequest(
                    kind=job.kind.name, params_json=json.dumps(job.params), job_id=job.job_id
                ),
                initiator=initiator,
            )
        )
        assert self._peer_stub is not None
        call = self._peer_stub.Exchange(channel.outgoing_frames())
        channel.on_finish(lambda: _later(self.config.timeout_s, call.cancel))
        threading.Thread(target=channel.pump, args=(call, Frame.ACCEPT), daemon=True).start()
        try:
            answer = channel.next_control(min(self.config.timeout_s, 30.0))
            if answer.kind != Frame.ACCEPT:
                raise ProtocolError(f"peer answered the job request with {Frame.Kind.Name(answer.kind)}")
            mismatch = hello_mismatch(self.hello, answer.hello, self.peer_role)
            if mismatch:
                raise ProtocolError(f"refused peer: {mismatch}")
        except ProtocolError as exc:
            channel.abort(str(exc))
            call.cancel()
            job.state, job.error = JobInfo.FAILED, f"job not started: {exc}"
            job.done.set()
            self._release(job)
            self.log.error("job %s: %s", job.job_id, job.error)
            raise UserError(job.error) from None
        self._launch(job)
        return job

    def _handshake_before_job(self) -> tuple[bool, str]:
        """Fresh handshake; a peer that is merely unreachable gets a few seconds to (re)connect."""
        deadline = time.monotonic() + REACH_RETRY_S
        while True:
            ok, message = self.handshake_peer()
            unreachable = "refused the connection" in message or message.startswith("cannot reach")
            if ok or not unreachable or time.monotonic() > deadline:
                self._set_peer_state(ok, message)
                return ok, message
            time.sleep(0.2)

    def _accept_job(self, opening: party_pb2.Frame) -> Job:
        if opening.kind != Frame.OPEN:
            raise UserError(f"a job stream must start with OPEN, not {Frame.Kind.Name(opening.kind)}")
        mismatch = hello_mismatch(self.hello, opening.hello, self.peer_role)
        if mismatch:
            raise UserError(mismatch)
        job = self._new_job(opening.job.kind, opening.job.params_json, opening.job_id, opening.initiator)
        self.log.info(
            "job %s (%s) opened by %s for %s", job.job_id, job.kind.name, self.peer_role, opening.initiator
        )
        return job

    def _launch(self, job: Job) -> None:
        last_note = [0.0]

        def note(text: str) -> None:
            now = time.monotonic()
            if text.startswith("phase ") or now - last_note[0] >= NOTE_INTERVAL_S:
                last_note[0] = now
                self.log.info("job %s: %s", job.job_id, text)

        job.context.notes = note
        job.context.link_failure = lambda: job.channel.failure
        threading.Thread(target=self._run_job, args=(job,), name=f"job-{job.job_id}", daemon=True).start()

    def cancel_job(self, job: Job, reason: str) -> None:
        if job.done.is_set():
            return
        self.log.info("job %s: %s", job.job_id, reason)
        job.context.cancel(reason)
        job.channel.abort(reason)

    def _run_job(self, job: Job) -> None:
        ctx, channel = job.context, job.channel
        start = time.perf_counter()
        try:
            ctx.ledger.record("schema", self.hello.schema_fingerprint, "handshake")
            ctx.ledger.record("record_count", self.data.n_records, "handshake")
            result = job.kind.run(self.role, channel, ctx)
            if not isinstance(result, dict):
                raise TypeError(f"job {job.kind.name} returned {type(result).__name__}, not a dict")
            stats = self._stats(job, time.perf_counter() - start)
            channel.send("job.done", json.dumps(stats).encode())
            peer_stats = _parse_stats(channel.recv("job.done", max_bytes=STATS_MAX_BYTES))
            channel.close()
            job.result, job.stats, job.peer_stats = result, stats, peer_stats
            job.state = JobInfo.SUCCEEDED
            self.log.info("job %s done in %.2f s", job.job_id, stats["wall_s"])
        except (JobCancelled, ProtocolError) as exc:
            if ctx.cancelled.is_set():
                job.state, job.error = JobInfo.CANCELLED, ctx.cancel_reason or "cancelled"
            else:
                job.state, job.error = JobInfo.FAILED, str(exc)
            channel.abort(job.error)
        except UserError as exc:
            job.state, job.error = JobInfo.FAILED, str(exc)
            channel.abort(job.error)
        except Exception as exc:  # noqa: BLE001 - a job's bug must not take the daemon down
            self.log.exception("job %s crashed", job.job_id)
            job.state = JobInfo.FAILED
            job.error = f"internal error in job {job.kind.name} at {self.role}: {type(exc).__name__}: {exc}"
            channel.abort(job.error)
        finally:
            if job.stats is None:
                job.stats = self._stats(job, time.perf_counter() - start)
            if job.state != JobInfo.SUCCEEDED:
                self.log.error("job %s %s: %s", job.job_id, JobInfo.State.Name(job.state).lower(), job.error)
            try:
                self._write_job_files(job)
            except OSError as exc:
                self.log.error("job %s: cannot write its files: %s", job.job_id, exc)
            self._release(job)
            job.done.set()

    def _stats(self, job: Job, wall_s: float) -> dict[str, Any]:
        ctx = job.context
        return {
            "role": self.role,
            "job_id": job.job_id,
            "kind": job.kind.name,
            "wall_s": round(wall_s, 4),
            "phases": {name: round(seconds, 4) for name, seconds in ctx.phases.items()},
            **job.channel.stats.as_dict(),
            "paillier_encryptions": ctx.counters.encryptions,
            "public_key_operations": ctx.counters.public_key_operations,
            **dict(ctx.tallies),
            "counters": {**ctx.counters.as_dict(), **dict(ctx.tallies)},
        }

    def _write_job_files(self, job: Job) -> None:
        out = job.context.out_dir
        out.mkdir(parents=True, exist_ok=True)
        status = {
            "job_id": job.job_id,
            "kind": job.kind.name,
            "params": job.params,
            "initiator": job.initiator,
            "state": JobInfo.State.Name(job.state),
            "error": job.error,
            "result": job.result,
        }
        (out / "result.json").write_text(json.dumps(status, indent=2) + "\n")
        stats = {"self": job.stats, "peer": job.peer_stats}
        (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
        (out / "ledger.json").write_text(job.context.ledger.to_json() + "\n")


def _later(delay_s: float, action) -> None:
    """Run ``action`` after ``delay_s`` without keeping the process alive for it."""
    timer = threading.Timer(delay_s, action)
    timer.daemon = True
    timer.start()


def _parse_stats(payload: bytes) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError("peer sent job statistics that are not JSON") from None
    if not isinstance(value, dict):
        raise ProtocolError("peer sent job statistics that are not a JSON object")
    return value
