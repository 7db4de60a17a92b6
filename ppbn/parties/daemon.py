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

The data miner (PRAM path, setup II; Ma and Sivakumar Sec. III-A) is a third daemon role
without data. It knows the addresses of alice and bob; alice and bob accept it only when
started with its address (``--miner``), and only for the job kinds of
``MINER_JOB_KINDS``, which start at the miner and run over one Exchange stream per party
(the job function receives a ``ChannelGroup``). The miner holds no records, so the
record checks of the handshake are made between the two parties' Hellos at job start.
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
import numpy as np

from ppbn.bn.schema import Schema
from ppbn.errors import UserError
from ppbn.parties.data import PartyData, load_party_data
from ppbn.parties.grpc_channel import GrpcChannel
from ppbn.parties.jobs import JobCancelled, JobContext, JobKind, job_kind
from ppbn.parties.net import describe_rpc_error, dial, server_options
from ppbn.parties.tls import (
    DAEMON_ROLES,
    MINER,
    PARTY_ROLES,
    caller_identity,
    load_tls_files,
    server_credentials,
)
from ppbn.proto import party_pb2, party_pb2_grpc
from ppbn.protocols.channel import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT_S,
    ChannelStats,
    ProtocolError,
)
from ppbn.protocols.ledger import Ledger

PROTOCOL_VERSION = 1
JobInfo = party_pb2.JobInfo
Frame = party_pb2.Frame
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # also a folder name: no "..", no "/"
HANDSHAKE_TIMEOUT_S = 10.0
STATS_MAX_BYTES = 1 << 20
NOTE_INTERVAL_S = 5.0
REACH_RETRY_S = 4.0
# Job kinds run by the miner with both parties; they start at the miner, which runs nothing else.
MINER_JOB_KINDS = frozenset({"pram-miner"})


def other_role(role: str) -> str:
    if role not in PARTY_ROLES:
        raise UserError(f"--role must be alice or bob, got {role!r}")
    return "bob" if role == "alice" else "alice"


def peer_addresses(role: str, peer: str, extra: dict[str, str]) -> dict[str, str]:
    """The daemons this one talks to, role -> address.

    alice and bob: the other party at ``peer``, plus the miner if ``extra`` names it. The
    miner: alice and bob, both from ``extra``.
    """
    if role not in DAEMON_ROLES:
        raise UserError(f"--role must be one of {', '.join(DAEMON_ROLES)}, got {role!r}")
    if role == MINER:
        missing = [r for r in PARTY_ROLES if not extra.get(r)]
        if missing:
            raise UserError(f"the miner needs the address of {' and '.join(missing)} (--{missing[0]})")
        return {r: extra[r] for r in PARTY_ROLES}
    unknown = sorted(set(extra) - {MINER})
    if unknown:
        raise UserError(f"{role} can only be given the miner's address besides its peer, not {unknown[0]!r}")
    if not peer:
        raise UserError(f"{role} needs the address of {other_role(role)} (--peer)")
    miner = {MINER: extra[MINER]} if extra.get(MINER) else {}
    return {other_role(role): peer, **miner}


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
    if MINER in (mine.role, theirs.role):
        return None  # the miner holds no records: see parties_mismatch
    if theirs.record_count != mine.record_count:
        return (
            f"{me} holds {mine.record_count} records, {them} holds {theirs.record_count}: "
            "both data files must hold the same records"
        )
    if theirs.ids_digest != mine.ids_digest:
        return f"{me} and {them} hold the same number of records but different record ids"
    return None


def parties_mismatch(alice: party_pb2.Hello, bob: party_pb2.Hello) -> str | None:
    """At the miner: why alice's and bob's records do not line up, or None if they do."""
    if alice.record_count != bob.record_count:
        return f"alice holds {alice.record_count} records, bob holds {bob.record_count}"
    if alice.ids_digest != bob.ids_digest:
        return "alice and bob hold the same number of records but different record ids"
    return None


class ChannelGroup:
    """The channels of one job with several peers (the miner's), handled by the daemon as one.

    The job function reads ``channels`` (role -> channel); the daemon aborts, closes and
    counts them together. ``stats`` adds the traffic up; its ``rounds`` is the largest
    count of one channel, since the channels run side by side.
    """

    def __init__(self, channels: dict[str, GrpcChannel]) -> None:
        self.channels = channels

    @property
    def stats(self) -> ChannelStats:
        total = ChannelStats()
        for channel in self.channels.values():
            s = channel.stats
            total.bytes_sent += s.bytes_sent
            total.bytes_received += s.bytes_received
            total.messages_sent += s.messages_sent
            total.messages_received += s.messages_received
            total.rounds = max(total.rounds, s.rounds)
        return total

    @property
    def failure(self) -> str | None:
        for role, channel in self.channels.items():
            if channel.failure:
                return f"{role}: {channel.failure}"
        return None

    def abort(self, reason: str) -> None:
        for channel in self.channels.values():
            channel.abort(reason)

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()


@dataclass
class DaemonConfig:
    """``peer``: the other party (alice, bob); ``peers``: the miner's address for alice and
    bob, the addresses of alice and bob for the miner (which has no ``data_path``)."""

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
    peers: dict[str, str] = field(default_factory=dict)


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
        self.peer_addresses = peer_addresses(config.role, config.peer, config.peers)
        self.peer_roles = tuple(self.peer_addresses)
        # the peer of two-party jobs; the miner has none (its jobs involve both parties)
        self.peer_role = other_role(config.role) if config.role in PARTY_ROLES else ""
        self.log = logger or logging.getLogger(f"ppbn.party.{config.role}")
        self.log.info("loading schema %s", config.schema_path)
        self.schema = Schema.load(config.schema_path)
        if self.role == MINER:
            self.data: PartyData = PartyData(self.schema, MINER, (), (), np.zeros((0, 0), dtype=np.int64))
            self.log.info("miner: no data of its own; serves alice and bob for %s", ", ".join(sorted(MINER_JOB_KINDS)))
        else:
            self.log.info("loading %s's data %s", self.role, config.data_path)
            self.data = load_party_data(
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
                "traffic and pose as %s; use only on a trusted loopback", " or ".join(self.peer_roles),
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
            ids_digest=ids_digest(self.data.ids) if self.role != MINER else "",
        )
        self.jobs: dict[str, Job] = {}
        self.running: Job | None = None
        self.peer_states = {role: "not contacted yet" for role in self.peer_roles}
        self.port = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: grpc.Server | None = None
        self._peer_channels: dict[str, grpc.Channel] = {}
        self._peer_stubs: dict[str, party_pb2_grpc.PartyServiceStub] = {}
        self._prober: threading.Thread | None = None

    @property
    def peer_state(self) -> str:
        """"ok" when every peer accepted the last handshake; otherwise what went wrong
        (prefixed with the peer's role when this daemon has several peers)."""
        if len(self.peer_states) == 1:
            return next(iter(self.peer_states.values()))
        bad = [f"{role}: {state}" for role, state in self.peer_states.items() if state != "ok"]
        return "; ".join(bad) if bad else "ok"

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
        for role, address in self.peer_addresses.items():
            self._peer_channels[role] = dial(address, self.tls, role, self.config.max_message_bytes)
            self._peer_stubs[role] = party_pb2_grpc.PartyServiceStub(self._peer_channels[role])
        self.log.info(
            "%s listening on %s (port %d, %s); %s",
            self.role, self.config.listen, port, "mutual TLS" if self.tls else "PLAINTEXT",
            ", ".join(f"peer {r} expected at {a}" for r, a in self.peer_addresses.items()),
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
        for channel in self._peer_channels.values():
            channel.close()
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
    def handshake_peer(self, role: str = "") -> tuple[bool, str]:
        """Introduce ourselves to a peer (the two-party peer by default); (accepted, one line)."""
        role = role or self.peer_roles[0]
        stub = self._peer_stubs[role]
        address = self.peer_addresses[role]
        try:
            reply = stub.Handshake(self.hello, timeout=HANDSHAKE_TIMEOUT_S)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.PERMISSION_DENIED:
                return False, f"peer at {address} refused our certificate: {exc.details()}"
            return False, describe_rpc_error(exc, address, role)
        if not reply.accepted:
            return False, f"peer {role} at {address} refused us: {reply.reason}"
        mismatch = hello_mismatch(self.hello, reply.hello, role)
        if mismatch:
            return False, f"refused peer at {address}: {mismatch}"
        return True, f"peer {role} at {address} agrees on schema, records and protocol"

    def _set_peer_state(self, role: str, ok: bool, message: str) -> None:
        state = "ok" if ok else message
        if state != self.peer_states[role]:
            if ok:
                self.log.info("handshake: %s", message)
            elif "refused the connection" in message:
                self.log.warning("handshake: %s (will keep trying)", message)
            else:
                self.log.error("handshake: %s", message)
        self.peer_states[role] = state

    def _probe_loop(self) -> None:
        while not self._stopping.is_set():
            for role in self.peer_roles:
                ok, message = self.handshake_peer(role)
                if self._stopping.is_set():
                    return
                self._set_peer_state(role, ok, message)
            all_ok = self.peer_state == "ok"
            self._stopping.wait(self.config.probe_interval_s * (5 if all_ok else 1))

    # -- authorisation -------------------------------------------------------------
    def _caller(self, context: grpc.ServicerContext) -> str:
        return caller_identity(context) if self.tls else "an unauthenticated caller (--insecure)"

    def _require_peer(self, context: grpc.ServicerContext, what: str) -> str:
        """The calling peer's role from its certificate ("" without TLS); refuse anyone else."""
        if self.tls is None:
            return ""
        identity = caller_identity(context)
        if identity not in self.peer_roles:
            message = (
                f"{self.role} takes {what} only from {' or '.join(self.peer_roles)}, not from a "
                f"certificate for {identity!r}"
            )
            self.log.error("refused %s from %s: %s", what, context.peer(), message)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, message)
        return identity

    def _claimed_peer(self, certified: str, claimed: str) -> str:
        """The peer role to check a Hello against: the certificate's, else (no TLS) the
        claimed role if it is one of ours, else our first peer (so the Hello is refused)."""
        if certified:
            return certified
        return claimed if claimed in self.peer_roles else self.peer_roles[0]

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
        certified = self._require_peer(context, "handshakes")
        role = self._claimed_peer(certified, request.role)
        if self.tls is not None and request.identity != certified:
            mismatch: str | None = (
                f"the peer's Hello names certificate {request.identity!r} but it connected with "
                f"{certified!r}"
            )
        else:
            mismatch = hello_mismatch(self.hello, request, role)
        if mismatch:
            self._set_peer_state(role, False, f"refused peer {context.peer()}: {mismatch}")
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
        certified = self._require_peer(context, "job streams")
        try:
            opening = next(request_iterator)
        except (StopIteration, grpc.RpcError):
            return
        job_id = opening.job_id
        peer = self._claimed_peer(certified, opening.hello.role)
        try:
            job = self._accept_job(opening, peer)
        except UserError as exc:
            self.log.error("refused job %s from %s: %s", job_id, peer, exc)
            yield Frame(kind=Frame.ABORT, job_id=job_id, error=str(exc))
            return
        channel = job.channel
        assert isinstance(channel, GrpcChannel)
        context.add_callback(lambda: channel.mark_dead(f"connection to peer {peer} closed"))
        channel.queue_control(Frame(kind=Frame.ACCEPT, hello=self.hello))
        threading.Thread(target=channel.pump, args=(request_iterator,), daemon=True).start()
        self._launch(job)
        yield from channel.outgoing_frames()

    # -- jobs ----------------------------------------------------------------------
    def _job_peers(self, kind_name: str) -> tuple[str, ...]:
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

    def _new_job(
        self, kind_name: str, params_json: str, job_id: str, initiator: str, peers: tuple[str, ...]
    ) -> Job:
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
        channels = {
            role: GrpcChannel(
                job_id,
                role,
                address=self.peer_addresses.get(role, ""),
                timeout_s=self.config.timeout_s,
                max_message_bytes=self.config.max_message_bytes,
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
        """Reserve this daemon, get every peer of the job to accept it over a new stream, run it."""
        peers = self._job_peers(kind_name)
        for role in peers:
            ok, message = self._handshake_before_job(role)
            if not ok:
                self.log.error("job of kind %s requested by %s not started: %s", kind_name, initiator, message)
                raise UserError(f"job not started: {message}")
        job = self._new_job(kind_name, params_json, job_id, initiator, peers)
        channels = job.channel.channels if isinstance(job.channel, ChannelGroup) else {peers[0]: job.channel}
        self.log.info("job %s (%s) requested by %s: asking %s", job.job_id, job.kind.name, initiator, " and ".join(peers))
        calls = []
        for role, channel in channels.items():
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
            call = self._peer_stubs[role].Exchange(channel.outgoing_frames())
            calls.append(call)
            channel.on_finish(lambda call=call: _later(self.config.timeout_s, call.cancel))
            threading.Thread(target=channel.pump, args=(call, Frame.ACCEPT), daemon=True).start()
        try:
            hellos = {}
            for role, channel in channels.items():
                answer = channel.next_control(min(self.config.timeout_s, 30.0))
                if answer.kind != Frame.ACCEPT:
                    raise ProtocolError(f"{role} answered the job request with {Frame.Kind.Name(answer.kind)}")
                mismatch = hello_mismatch(self.hello, answer.hello, role)
                if mismatch:
                    raise ProtocolError(f"refused peer: {mismatch}")
                hellos[role] = answer.hello
            if self.role == MINER:
                mismatch = parties_mismatch(hellos["alice"], hellos["bob"])
                if mismatch:
                    raise ProtocolError(f"the parties' data do not line up: {mismatch}")
        except ProtocolError as exc:
            job.channel.abort(str(exc))
            for call in calls:
                call.cancel()
            job.state, job.error = JobInfo.FAILED, f"job not started: {exc}"
            job.done.set()
            self._release(job)
            self.log.error("job %s: %s", job.job_id, job.error)
            raise UserError(job.error) from None
        self._launch(job)
        return job

    def _handshake_before_job(self, role: str) -> tuple[bool, str]:
        """Fresh handshake; a peer that is merely unreachable gets a few seconds to (re)connect."""
        deadline = time.monotonic() + REACH_RETRY_S
        while True:
            ok, message = self.handshake_peer(role)
            unreachable = "refused the connection" in message or message.startswith("cannot reach")
            if ok or not unreachable or time.monotonic() > deadline:
                self._set_peer_state(role, ok, message)
                return ok, message
            time.sleep(0.2)

    def _accept_job(self, opening: party_pb2.Frame, peer: str) -> Job:
        if opening.kind != Frame.OPEN:
            raise UserError(f"a job stream must start with OPEN, not {Frame.Kind.Name(opening.kind)}")
        mismatch = hello_mismatch(self.hello, opening.hello, peer)
        if mismatch:
            raise UserError(mismatch)
        kind = opening.job.kind
        if (peer == MINER) != (kind in MINER_JOB_KINDS):
            raise UserError(
                f"{self.role} runs {kind!r} jobs with the miner only"
                if kind in MINER_JOB_KINDS
                else f"{self.role} runs only {', '.join(sorted(MINER_JOB_KINDS))} jobs for the miner, not {kind!r}"
            )
        job = self._new_job(kind, opening.job.params_json, opening.job_id, opening.initiator, (peer,))
        self.log.info("job %s (%s) opened by %s for %s", job.job_id, job.kind.name, peer, opening.initiator)
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
            if self.role != MINER:  # the miner learns n from the parties' headers
                ctx.ledger.record("record_count", self.data.n_records, "handshake")
            result = job.kind.run(self.role, channel, ctx)  # type: ignore[arg-type]
            if not isinstance(result, dict):
                raise TypeError(f"job {job.kind.name} returned {type(result).__name__}, not a dict")
            stats = self._stats(job, time.perf_counter() - start)
            peer_stats = _exchange_stats(channel, stats)
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


def _exchange_stats(channel: GrpcChannel | ChannelGroup, stats: dict[str, Any]) -> dict[str, Any]:
    """Swap end-of-job statistics with every peer; several peers' are summed (wall time and
    rounds: the largest) under the role "alice+bob", each peer's own under ``peers``."""
    channels = channel.channels if isinstance(channel, ChannelGroup) else {"": channel}
    payload = json.dumps(stats).encode()
    for each in channels.values():
        each.send("job.done", payload)
    received = {role: _parse_stats(each.recv("job.done", max_bytes=STATS_MAX_BYTES)) for role, each in channels.items()}
    if len(received) == 1:
        return next(iter(received.values()))
    total: dict[str, Any] = {"role": "+".join(received), "kind": stats["kind"], "job_id": stats["job_id"]}
    for key in ("bytes_sent", "bytes_received", "messages_sent", "messages_received"):
        total[key] = sum(int(s.get(key, 0)) for s in received.values())
    for key in ("wall_s", "rounds"):
        total[key] = max(s.get(key, 0) for s in received.values())
    total["peers"] = received
    return total


def _parse_stats(payload: bytes) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError("peer sent job statistics that are not JSON") from None
    if not isinstance(value, dict):
        raise ProtocolError("peer sent job statistics that are not a JSON object")
    return value
