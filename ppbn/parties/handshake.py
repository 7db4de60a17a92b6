"""Introductions between daemons: who a daemon's peers are, the Hello each sends, and the
checks that both sides agree (CA, roles, schema, options, record count) before any job.

A daemon keeps introducing itself to every peer (Handshake) so both logs say early
whether they agree; a job then starts with one more introduction in the OPEN frame of its
Exchange stream, which the peer checks again before it answers ACCEPT (or refuses with a
reason). The miner holds no records, so the record checks of the handshake are made
between the two parties' Hellos when a job of the miner starts (``parties_mismatch``).
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import grpc

from ppbn.bn.schema import role_label
from ppbn.errors import UserError, printable
from ppbn.parties.grpc_channel import frame_kind_name
from ppbn.parties.job import Job, JobRefused
from ppbn.parties.net import dial, rpc_failure
from ppbn.parties.peer_errors import PeerMismatch, PeerNotListening, PeerUnreachable
from ppbn.parties.tls import DAEMON_ROLES, MINER, PARTY_ROLES, TlsFiles, verify_server_role
from ppbn.proto import party_pb2, party_pb2_grpc
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.records import NONCE_BYTES

PROTOCOL_VERSION = 12  # what each version changed: CHANGELOG.md, "Daemon protocol versions"
Frame = party_pb2.Frame
AbortCode = party_pb2.AbortCode
HANDSHAKE_TIMEOUT_S = 10.0
REACH_RETRY_S = 4.0
# Job kinds run by the miner with both parties; they start at the miner, which runs nothing else.
MINER_JOB_KINDS = frozenset({"pram-miner", "perturb-learn-miner"})


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
            raise UserError(
                f"the miner needs the address of {' and '.join(missing)} (--{missing[0]})"
            )
        return {r: extra[r] for r in PARTY_ROLES}
    unknown = sorted(set(extra) - {MINER})
    if unknown:
        raise UserError(
            f"{role} can only be given the miner's address besides its peer, not {unknown[0]!r}"
        )
    if not peer:
        raise UserError(f"{role} needs the address of {other_role(role)} (--peer)")
    miner = {MINER: extra[MINER]} if extra.get(MINER) else {}
    return {other_role(role): peer, **miner}


def hello_mismatch(
    mine: party_pb2.Hello, theirs: party_pb2.Hello, expected_role: str
) -> str | None:
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
    if MINER not in (mine.role, theirs.role) and theirs.record_alignment != mine.record_alignment:
        return (
            f"{me} runs --align {mine.record_alignment or 'strict'}, {them} runs --align "
            f"{theirs.record_alignment or 'strict'}: both daemons must use the same --align"
        )
    if MINER in (mine.role, theirs.role):
        return None  # the miner holds no records: see parties_mismatch
    missing = missing_rule_mismatch({me: mine, them: theirs})
    if missing:
        return missing
    if mine.record_alignment == "psi":
        return None  # the id sets differ by design; each job intersects them (ppbn.jobs.alignment)
    if theirs.record_count != mine.record_count:
        return (
            f"{me} holds {mine.record_count} records, {them} holds {theirs.record_count}: "
            "both data files must hold the same records"
        )
    return None  # the ids themselves are compared per job (ppbn.protocols.records)


def missing_rule_mismatch(hellos: dict[str, party_pb2.Hello]) -> str | None:
    """Both parties must read empty cells the same way (``--missing``): a family's counts
    are right only if both sides leave out, or keep, the same records. An empty field is a
    daemon that predates the option, which refuses empty cells ("error")."""
    rules = {role: hello.missing_rule or "error" for role, hello in hellos.items()}
    if len(set(rules.values())) < 2:
        return None
    stated = ", ".join(f"{role} runs --missing {rule}" for role, rule in sorted(rules.items()))
    return f"{stated}: both daemons must use the same --missing"


def parties_mismatch(alice: party_pb2.Hello, bob: party_pb2.Hello) -> str | None:
    """At the miner: why alice's and bob's records do not line up, or None if they do."""
    missing = missing_rule_mismatch({"alice": alice, "bob": bob})
    if missing:
        return missing
    for hello in (alice, bob):
        if hello.record_alignment == "psi":
            return (
                f"{hello.role} runs --align psi: the miner's jobs (PRAM setup II) need both parties to hold "
                "the same records (--align strict)"
            )
    if alice.record_count != bob.record_count:
        return f"alice holds {alice.record_count} records, bob holds {bob.record_count}"
    return None


@dataclass(frozen=True)
class Introduction:
    """One handshake with a peer: the line to log, and why it failed (None: the peer agrees)."""

    role: str
    message: str
    failure: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def _reach_error(exc: UserError) -> UserError:
    """``verify_server_role``'s failure, typed by the socket error it was raised from
    (ppbn/parties/tls.py raises a plain UserError in its place, ``from None``, which keeps
    that error as the context): nothing answered, or something did and failed otherwise."""
    cause = exc.__context__
    if isinstance(cause, ConnectionRefusedError):
        return PeerNotListening(str(exc))
    if isinstance(cause, OSError) and not isinstance(cause, ssl.SSLError | TimeoutError):
        return PeerUnreachable(str(exc))
    return exc


def _later(delay_s: float, action: Callable[[], object]) -> None:
    """Run ``action`` after ``delay_s`` without keeping the process alive for it."""
    timer = threading.Timer(delay_s, action)
    timer.daemon = True
    timer.start()


class PeerLinks:
    """This daemon's connections to its peers, its introductions to them, and what the
    last one with each peer said."""

    def __init__(
        self,
        hello: party_pb2.Hello,
        addresses: dict[str, str],
        tls: TlsFiles | None,
        timeout_s: float,
        frame_bytes: int,
        log: logging.Logger,
        party_names: Mapping[str, str] | None = None,
    ) -> None:
        self.hello = hello
        self.role = hello.role
        self.addresses = addresses
        self.roles = tuple(addresses)
        self.tls = tls
        self.timeout_s = timeout_s
        self.frame_bytes = frame_bytes
        self.log = log
        self.party_names = dict(party_names or {})  # this daemon's own, for its log lines only
        self.states = {role: "not contacted yet" for role in self.roles}
        self.channels: dict[str, grpc.Channel] = {}
        self.stubs: dict[str, party_pb2_grpc.PartyServiceStub] = {}

    @property
    def state(self) -> str:
        """ "ok" when every peer accepted the last handshake; otherwise what went wrong
        (prefixed with the peer's role when this daemon has several peers)."""
        if len(self.states) == 1:
            return next(iter(self.states.values()))
        bad = [f"{role}: {state}" for role, state in self.states.items() if state != "ok"]
        return "; ".join(bad) if bad else "ok"

    def named(self, role: str) -> str:
        """``role`` as this daemon's lines name it: ``"bob (City Clinic)"`` where its own
        schema gives a display name (local: never sent to a peer)."""
        return role_label(role, self.party_names)

    @property
    def handshake_timeout_s(self) -> float:
        """A stopped peer must not hold a job request longer than the peer timeout."""
        return min(HANDSHAKE_TIMEOUT_S, self.timeout_s)

    def connect(self, on_ready: Callable[[str, bool], None]) -> None:
        """Dial every peer; ``on_ready(role, ready)`` follows each connection's state."""
        for role, address in self.addresses.items():
            self.channels[role] = dial(address, self.tls, role, self.frame_bytes)
            self.stubs[role] = party_pb2_grpc.PartyServiceStub(self.channels[role])
            self.channels[role].subscribe(
                lambda state, role=role: on_ready(role, state == grpc.ChannelConnectivity.READY)
            )

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()

    def handshake(self, role: str) -> Introduction:
        """Introduce ourselves to the daemon of ``role``."""
        stub = self.stubs[role]
        address = self.addresses[role]
        if self.tls is not None:
            try:  # the daemon at that address must hold a certificate for the peer's role
                verify_server_role(address, self.tls, (role,), self.handshake_timeout_s)
            except UserError as exc:
                return Introduction(role, str(exc), _reach_error(exc))
        try:
            reply = stub.Handshake(self.hello, timeout=self.handshake_timeout_s)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.PERMISSION_DENIED:
                message = f"peer at {address} refused our certificate: {exc.details()}"
                return Introduction(role, message, UserError(message))
            failure = rpc_failure(exc, address, role)
            return Introduction(role, str(failure), failure)
        if not reply.accepted:
            message = f"peer {self.named(role)} at {address} refused us: {reply.reason}"
            return Introduction(role, message, UserError(message))
        mismatch = hello_mismatch(self.hello, reply.hello, role)
        if mismatch:
            return Introduction(
                role, f"refused peer at {address}: {mismatch}", PeerMismatch(mismatch)
            )
        return Introduction(
            role, f"peer {self.named(role)} at {address} agrees on schema, records and protocol"
        )

    def record(self, introduction: Introduction) -> None:
        """Keep what the introduction said; log it when it changed."""
        role, message = introduction.role, introduction.message
        state = "ok" if introduction.ok else message
        if state != self.states[role]:
            if introduction.ok:
                self.log.info("handshake: %s", message)
            elif isinstance(introduction.failure, PeerNotListening):
                self.log.warning("handshake: %s (will keep trying)", message)
            else:
                self.log.error("handshake: %s", message)
        self.states[role] = state

    def probe(self, stopping: threading.Event, interval_s: float) -> None:
        """Introduce ourselves to every peer again and again until ``stopping`` is set: every
        ``interval_s`` while one disagrees or is unreachable, five times slower once all agree."""
        while not stopping.is_set():
            for role in self.roles:
                try:
                    introduction = self.handshake(role)
                except ValueError:  # grpc's "Cannot invoke RPC on closed channel!": close() ran
                    if stopping.is_set():
                        return
                    raise
                if stopping.is_set():
                    return
                self.record(introduction)
            stopping.wait(interval_s * (5 if self.state == "ok" else 1))

    def before_job(self, role: str) -> Introduction:
        """Fresh handshake; a peer that is merely unreachable gets a few seconds to (re)connect."""
        deadline = time.monotonic() + REACH_RETRY_S
        while True:
            introduction = self.handshake(role)
            unreachable = isinstance(introduction.failure, PeerUnreachable)
            if introduction.ok or not unreachable or time.monotonic() > deadline:
                self.record(introduction)
                return introduction
            time.sleep(0.2)

    def answer(
        self, request: party_pb2.Hello, role: str, certified: str, caller: str
    ) -> party_pb2.HandshakeReply:
        """The Handshake RPC: accept the Hello of the peer ``role`` (``certified``: the role of
        its certificate, "" without TLS; ``caller``: its address), or refuse it with a reason."""
        if self.tls is not None and request.identity != certified:
            mismatch: str | None = (
                f"the peer's Hello names certificate {printable(request.identity, 40)!r} but it "
                f"connected with {certified!r}"
            )
        else:
            mismatch = hello_mismatch(self.hello, request, role)
        if mismatch:
            self.record(
                Introduction(
                    role, f"refused peer {printable(caller)}: {mismatch}", PeerMismatch(mismatch)
                )
            )
            return party_pb2.HandshakeReply(accepted=False, reason=mismatch, hello=self.hello)
        return party_pb2.HandshakeReply(accepted=True, hello=self.hello)

    def open_job(self, job: Job, initiator: str, resume: bool) -> list[grpc.Call]:
        """Open the job's Exchange stream to each of its peers with an OPEN frame (our Hello,
        the request, our nonce); returns the calls, to cancel if the job does not start."""
        calls = []
        for role, channel in job.channels.items():
            channel.queue_control(
                Frame(
                    kind=Frame.OPEN,
                    hello=self.hello,
                    job=party_pb2.JobRequest(
                        kind=job.kind.name,
                        params_json=json.dumps(job.params),
                        job_id=job.job_id,
                        resume=resume,
                    ),
                    initiator=initiator,
                    nonce=job.nonces[self.role],
                )
            )
            call = self.stubs[role].Exchange(channel.outgoing_frames())
            calls.append(call)
            channel.on_finish(lambda call=call: _later(self.timeout_s, call.cancel))
            threading.Thread(target=channel.pump, args=(call, Frame.ACCEPT), daemon=True).start()
        return calls

    def await_acceptance(self, job: Job) -> None:
        """Wait for every peer's ACCEPT and check the Hello it carries (at the miner, the two
        parties' against each other too); keeps each peer's nonce. PeerMismatch when they
        disagree, ProtocolError (PeerGone) for any other answer or none."""
        hellos = {}
        for role, channel in job.channels.items():
            answer = channel.next_control(min(self.timeout_s, 30.0))
            if answer.kind != Frame.ACCEPT:
                raise ProtocolError(
                    f"{role} answered the job request with {frame_kind_name(answer.kind)}"
                )
            mismatch = hello_mismatch(self.hello, answer.hello, role)
            if mismatch:
                raise PeerMismatch(f"refused peer: {mismatch}")
            if len(answer.nonce) != NONCE_BYTES:
                raise ProtocolError(f"{role} accepted the job without a {NONCE_BYTES}-byte nonce")
            hellos[role] = answer.hello
            job.nonces[role] = bytes(answer.nonce)
        if self.role == MINER:
            mismatch = parties_mismatch(hellos["alice"], hellos["bob"])
            if mismatch:
                raise PeerMismatch(f"the parties' data do not line up: {mismatch}")

    def check_opening(self, opening: party_pb2.Frame, peer: str) -> None:
        """The first frame of a job stream the peer ``peer`` opened: OPEN, with a Hello we
        accept, a nonce, and a job kind this daemon runs with that peer; else JobRefused."""
        if opening.kind != Frame.OPEN:
            raise JobRefused(
                f"a job stream must start with OPEN, not {frame_kind_name(opening.kind)}",
                AbortCode.PROTOCOL,
            )
        mismatch = hello_mismatch(self.hello, opening.hello, peer)
        if mismatch:
            raise JobRefused(mismatch, AbortCode.MISMATCH)
        if len(opening.nonce) != NONCE_BYTES:
            raise JobRefused(
                f"the job request carries no {NONCE_BYTES}-byte nonce", AbortCode.PROTOCOL
            )
        kind = opening.job.kind
        if (peer == MINER) != (kind in MINER_JOB_KINDS):
            raise JobRefused(
                f"{self.role} runs {printable(kind, 32)!r} jobs with the miner only"
                if kind in MINER_JOB_KINDS
                else f"{self.role} runs only {', '.join(sorted(MINER_JOB_KINDS))} jobs for the miner, "
                f"not {printable(kind, 32)!r}",
                AbortCode.BAD_REQUEST,
            )
