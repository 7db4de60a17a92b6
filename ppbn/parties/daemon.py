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

Local policy (``ppbn.jobs.policy``): each daemon enforces its own; nothing that
arrives from the network can weaken it. A job's parameters are checked against it at
both daemons, by the initiator before it contacts the peer and by the peer before it
answers ACCEPT, so a refused job has sent nothing derived from the data: the refusing
side sends one ABORT frame with a code and the name of the parameter at fault. Seeds,
masks and keys come from the local CSPRNG; resources (workers, message and queue sizes)
come from the policy, never from a job message.

Authorisation: every caller must present a certificate signed by a trusted CA (mutual
TLS) whose role URI the daemon checks. Handshake and Exchange are for the expected peer
daemons only; job control (StartJob, JobStatus, CancelJob) only for this daemon's own
operator (role operator, naming this party, issued by this party's CA); anyone else gets
PERMISSION_DENIED. Health is open to the operator and the peers.

After a job only data-independent figures cross the wire (``EXCHANGED_STATS``): the
peer's traffic is mirrored from what this daemon itself sent and received.

The data miner (setup II of Ma and Sivakumar Sec. III-A: PRAM and the perturbation
learners) is a third daemon role without data. It knows the addresses of alice and bob; alice and bob accept it only when
started with its address (``--miner``), and only for the job kinds of
``MINER_JOB_KINDS``, which start at the miner and run over one Exchange stream per party
(the job function receives a ``ChannelGroup``). The miner holds no records, so the
record checks of the handshake are made between the two parties' Hellos at job start.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from ppbn.bn.schema import Schema
from ppbn.data.outputs import commit_dir, failed_file, io_remedy, is_file_error, reason, relocate
from ppbn.data.party_data import PartyData, load_party_data
from ppbn.errors import UserError
from ppbn.jobs.alignment import align_by_psi
from ppbn.jobs.base import (
    ChannelGroup,
    JobCancelled,
    JobContext,
    JobKind,
    ParameterError,
    PolicyScope,
    check_job_policy,
    job_kind,
)
from ppbn.jobs.checkpoint import CheckpointStore, data_digest
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal
from ppbn.parties.audit import AuditLog
from ppbn.parties.grpc_channel import (
    AUDIT_LOG_PARAMETER,
    MALFORMED,
    OUTPUTS_PARAMETER,
    RELAYED_PARAMETER,
    GrpcChannel,
    frame_kind_name,
)
from ppbn.parties.health import DaemonHealth
from ppbn.parties.metrics import DaemonMetrics
from ppbn.parties.net import describe_rpc_error, dial, server_options
from ppbn.parties.tls import (
    DAEMON_ROLES,
    MINER,
    OPERATOR,
    PARTY_ROLES,
    load_tls_files,
    peer_identity,
    server_credentials,
    verify_server_role,
)
from ppbn.proto import party_pb2, party_pb2_grpc
from ppbn.protocols.channel import (
    DEFAULT_TIMEOUT_S,
    ChannelStats,
    PeerGone,
    ProtocolError,
)
from ppbn.protocols.executor import ExecutorError
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.records import (
    NONCE_BYTES,
    RecordsMismatch,
    check_same_records,
    job_key,
    miner_check_records,
    party_check_records_for_miner,
)

PROTOCOL_VERSION = 10  # 10: the score width covers the families hill climbing is forced to keep; 9: products and narrow lookup entries in the ring of their bound plus 2-3 bits, lifted by one OT (local truncation); 8: products choose with a share in Z_2^(b+2) and its top bit; 7: ln terms in two halves, the second on a terms lane; 6: local terms, derived table slots, the narrow CPT division, pipeline groups by secure terms; 5: SoftSpokenOT k = 8, OLEs each way choosing with the narrower operand, short resharing; 4: products in the ring of their bound, bit-shared f and x2, seeded garbler labels, 64-entry exact C-table; 3: table lanes
JobInfo = party_pb2.JobInfo
Frame = party_pb2.Frame
AbortCode = party_pb2.AbortCode
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # also a folder name: no "..", no "/"
HANDSHAKE_TIMEOUT_S = 10.0
STOP_WAIT_S = 20.0  # SIGTERM: how long the running job gets to abort and write its files
STOP_SIGNAL_WAIT_S = 1.0  # a worker lost: how long to wait for a stop signal to reach this daemon too
STATS_MAX_BYTES = 4096
NOTE_INTERVAL_S = 5.0
REACH_RETRY_S = 4.0
MAX_PARAMS_BYTES = 64 * 1024  # a job request's JSON parameters; a refusal costs no more than this
MAX_CONCURRENT_RPCS = 64  # beyond this gRPC answers RESOURCE_EXHAUSTED at once
# What crosses the wire after a job: nothing that depends on the data (SECURITY.md).
EXCHANGED_STATS = ("protocol_version", "role", "kind")
# Job kinds run by the miner with both parties; they start at the miner, which runs nothing else.
MINER_JOB_KINDS = frozenset({"pram-miner", "perturb-learn-miner"})


def partial_dir(out: Path, job_id: str) -> Path:
    """Where job ``job_id`` writes while it runs (job ids never start with '.')."""
    return out / f".{job_id}.partial"


def check_out_dir(out_dir: str) -> None:
    """Refuse to start, with one line naming --out, when job files could not be written."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except FileExistsError:
        raise UserError(f"--out {out}: exists and is not a folder") from None
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write job files there ({exc.strerror})") from None


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


def printable(text: str, limit: int = 80) -> str:
    """Text that came from the network, safe for one log line: no control characters, bounded."""
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in text[:limit])
    return cleaned + ("..." if len(text) > limit else "")


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
    missing_as_category: bool = False  # the older spelling of missing_rule="category"
    missing_rule: str | None = None  # `--missing`: error (default), category or available-case
    align: str = "strict"  # `--align`: "strict" (same ids) or "psi" (private set intersection per job)
    probe_interval_s: float = 2.0
    peers: dict[str, str] = field(default_factory=dict)
    policy: LocalPolicy = field(default_factory=LocalPolicy)
    fixed_seed_for_testing: str | None = None  # `--insecure-fixed-seed-for-testing`: PRAM tests only
    audit_log: str | None = None  # `--audit-log`; default out_dir/audit.log
    metrics_port: int | None = None  # `--metrics-port`: None = no metrics endpoint, 0 = a free port
    metrics_host: str = "127.0.0.1"

    @property
    def frame_bytes(self) -> int:
        """Largest gRPC message this daemon sends or accepts (the policy's max_message_mb)."""
        return self.policy.max_message_mb * 1024 * 1024


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
    nonces: dict[str, bytes] = field(default_factory=dict)  # role -> nonce of every daemon of the job
    opened_by: str = ""  # role of the daemon that opened the job's streams
    pending: bool = False  # started here, the peer has not accepted yet (see _yields_to)
    result: dict[str, Any] | None = None
    stats: dict[str, Any] | None = None
    peer_stats: dict[str, Any] | None = None
    abort_code: int = 0  # the code this daemon sent when it gave up the job
    reveal_audited: bool = False  # its revealed lines were appended (or tried) before it ended
    done: threading.Event = field(default_factory=threading.Event)

    def info(self) -> party_pb2.JobInfo:
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
            progress=self.context.last_progress,
            initiator=self.initiator,
            out_dir=str(self.context.out_dir),
            refused=self.refused,
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
                self.schema, self.role, config.data_path, config.missing_as_category, config.missing_rule
            )
            self.log.info(
                "data ok: %d records, %d variables of %s (%s); empty cells: --missing %s",
                self.data.n_records, len(self.data.columns), self.role, ", ".join(self.data.columns),
                self.data.missing_rule,
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
            for warning in self.tls.warnings:
                self.log.warning("TLS: %s", warning)
        policy = config.policy
        self.log.info(
            "policy (%s): paths %s; Paillier keys >= %d bits; disclosure %s; max parents %d, "
            "family %d; records >= %d; PRAM p >= %g (randomize %s)",
            policy.source, ",".join(policy.paths), policy.min_key_bits, ",".join(policy.disclosures),
            policy.max_parents, policy.max_family, policy.min_records, policy.pram.min_p,
            ",".join(policy.pram.always_randomize) or "none",
        )  # fmt: skip
        self.log.info(
            "executor %s (%s); ciphertext cache %d MiB in memory, %d MiB spill",
            policy.executor,
            f"Ray at {policy.ray_address}" if policy.ray_address else f"workers: {policy.workers or 'one per core'}",
            policy.cache_mb, policy.spill_mb,
        )  # fmt: skip
        if policy.weak_key_allowed:
            self.log.warning("policy allows 1024-bit Paillier keys: below today's security level, TESTING ONLY")
        if self.role != MINER and self.data.n_records < policy.min_records:
            self.log.warning(
                "%d records, fewer than the policy minimum %d: every data job will be refused",
                self.data.n_records, policy.min_records,
            )  # fmt: skip
        if config.fixed_seed_for_testing is not None:
            self.log.warning(
                "INSECURE: --insecure-fixed-seed-for-testing: the PRAM randomization is reproducible "
                "by anyone who knows the seed; for tests only"
            )
        check_out_dir(config.out_dir)
        interrupted = sorted(p.name for p in Path(config.out_dir).glob(".*.partial"))
        if interrupted:
            self.log.warning(
                "%s holds %d folder(s) of jobs interrupted by a crash (%s): their ids stay taken",
                config.out_dir, len(interrupted), ", ".join(interrupted[:5]),
            )  # fmt: skip
        self.hello = party_pb2.Hello(
            role=self.role,
            protocol_version=PROTOCOL_VERSION,
            schema_fingerprint=self.schema.fingerprint(),
            record_count=self.data.n_records,
            identity=self.role if self.tls else "",
            missing_rule=self.data.missing_rule if self.role != MINER else "",
            record_alignment=config.align,
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
        self.audit: AuditLog | None = None  # opened (and its chain verified) by start()
        self.metrics = DaemonMetrics(self.role)
        self.metrics_port = 0  # bound port of the metrics endpoint, once serving
        self._health = DaemonHealth(lambda context: self._require_operator_or_peer(context, "health checks"))

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
        self.audit = AuditLog(self.config.audit_log or Path(self.config.out_dir) / "audit.log", self.role, self.log)
        try:
            return self._start_serving()
        except BaseException:
            self.metrics.close()
            self.audit.close()
            self.audit = None
            raise

    def _start_serving(self) -> int:
        if self.config.metrics_port is not None:
            self.metrics_port = self.metrics.serve(self.config.metrics_host, self.config.metrics_port)
            self.log.info(
                "metrics at http://%s:%d/metrics (plain HTTP, no authentication%s)", self.config.metrics_host,
                self.metrics_port, "" if self.config.metrics_host in ("127.0.0.1", "::1", "localhost")
                else ": NOT bound to localhost, anyone who reaches it can read the daemon's figures",
            )  # fmt: skip
        server = grpc.server(
            ThreadPoolExecutor(max_workers=16, thread_name_prefix=f"grpc-{self.role}"),
            options=server_options(self.config.frame_bytes),
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        )
        add_party_service(self, server)
        self._health.add_to(server)
        try:
            if self.tls is None:
                port = server.add_insecure_port(self.config.listen)
            else:
                port = server.add_secure_port(self.config.listen, server_credentials(self.tls))
        except RuntimeError:
            raise UserError(
                f"cannot listen on {self.config.listen}: the port is in use or the address is not one of this host"
            ) from None
        if port == 0:
            raise UserError(f"cannot listen on {self.config.listen} (address in use or not local?)")
        server.start()
        self._server, self.port = server, port
        for role, address in self.peer_addresses.items():
            self._peer_channels[role] = dial(address, self.tls, role, self.config.frame_bytes)
            self._peer_stubs[role] = party_pb2_grpc.PartyServiceStub(self._peer_channels[role])
            self._peer_channels[role].subscribe(
                lambda state, role=role: self.metrics.peer_connection(role, state == grpc.ChannelConnectivity.READY)
            )
        self._health.serving()
        self.metrics.set_serving(True)
        self._audit(lambda audit: audit.event("daemon_started", listen=self.config.listen, policy=self.config.policy.source))
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
        self._health.shutting_down()
        self.metrics.set_serving(False)
        job = self.running
        if job is not None:
            self.log.info("aborting job %s: daemon is shutting down", job.job_id)
            job.context.cancel(self._stopped_reason)
            job.channel.abort(AbortCode.SHUTTING_DOWN)
            if not job.done.wait(max(grace_s, STOP_WAIT_S)):
                self.log.error("job %s did not stop within %g s; its files may be missing", job.job_id, STOP_WAIT_S)
        if self._server is not None:
            self._server.stop(grace_s).wait()
        for channel in self._peer_channels.values():
            channel.close()
        self._audit(lambda audit: audit.event("daemon_stopped"))
        if self.audit is not None:
            self.audit.close()
        self.metrics.close()
        self.log.info("%s stopped", self.role)

    @property
    def _stopped_reason(self) -> str:
        """Why a job ends when this daemon stops: said so at this side, never blamed on the peer."""
        return f"stopped by this daemon's operator: the daemon of {self.role} is shutting down"

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
        if self.tls is not None:
            try:  # the daemon at that address must hold a certificate for the peer's role
                verify_server_role(address, self.tls, (role,), self._handshake_timeout_s)
            except UserError as exc:
                return False, str(exc)
        try:
            reply = stub.Handshake(self.hello, timeout=self._handshake_timeout_s)
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

    @property
    def _handshake_timeout_s(self) -> float:
        """A stopped peer must not hold a job request longer than the peer timeout."""
        return min(HANDSHAKE_TIMEOUT_S, self.config.timeout_s)

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
                try:
                    ok, message = self.handshake_peer(role)
                except ValueError:  # grpc: "Cannot invoke RPC on closed channel!", which only stop() does
                    if self._stopping.is_set():
                        return
                    raise
                if self._stopping.is_set():
                    return
                self._set_peer_state(role, ok, message)
            all_ok = self.peer_state == "ok"
            self._stopping.wait(self.config.probe_interval_s * (5 if all_ok else 1))

    # -- authorisation -------------------------------------------------------------
    def _deny(self, context: grpc.ServicerContext, what: str, allowed: str, who: str) -> None:
        message = f"{self.role} takes {what} only from {allowed}, not from {who}"
        self.log.error("refused %s from %s: %s", what, printable(context.peer()), message)
        context.abort(grpc.StatusCode.PERMISSION_DENIED, message)

    @staticmethod
    def _describe(identity) -> str:
        if identity is None:
            return "a caller without a certificate"
        issuer = "" if identity.vouched_for else f" issued by a CA of party {identity.issuer_party or '(none)'!r}"
        return f"a certificate for role {identity.role!r} of party {identity.party!r}{issuer}"

    def _is_own_operator(self, identity) -> bool:
        return (
            identity is not None
            and identity.role == OPERATOR
            and identity.party == self.role
            and identity.issued_by_own_ca
        )

    def _require_operator(self, context: grpc.ServicerContext, what: str) -> str:
        """Job control is for this daemon's own operator only; returns who it is, for logs."""
        if self.tls is None:
            return "an unauthenticated caller (--insecure)"
        identity = peer_identity(context, self.tls)
        if not self._is_own_operator(identity):
            self._deny(
                context, what, f"its own operator (an operator certificate for {self.role} issued by "
                f"{self.role}'s CA)", self._describe(identity),
            )  # fmt: skip
        return f"operator of {self.role} ({identity.fingerprint[:16]})"

    def _require_peer(self, context: grpc.ServicerContext, what: str) -> str:
        """The calling peer's role from its certificate ("" without TLS); refuse anyone else."""
        if self.tls is None:
            return ""
        identity = peer_identity(context, self.tls)
        if not self._is_peer(identity):
            self._deny(context, what, " or ".join(self.peer_roles), self._describe(identity))
        return identity.role

    def _is_peer(self, identity) -> bool:
        """A peer daemon's certificate, issued by that party's own CA (or ours)."""
        return (
            identity is not None
            and identity.role in self.peer_roles
            and identity.party == identity.role
            and identity.vouched_for
        )

    def _require_operator_or_peer(self, context: grpc.ServicerContext, what: str) -> None:
        if self.tls is None:
            return
        identity = peer_identity(context, self.tls)
        if self._is_own_operator(identity):
            return
        if not self._is_peer(identity):
            self._deny(
                context, what, f"its own operator or {' or '.join(self.peer_roles)}", self._describe(identity)
            )

    def _claimed_peer(self, certified: str, claimed: str) -> str:
        """The peer role to check a Hello against: the certificate's, else (no TLS) the
        claimed role if it is one of ours, else our first peer (so the Hello is refused)."""
        if certified:
            return certified
        return claimed if claimed in self.peer_roles else self.peer_roles[0]

    # -- RPCs ----------------------------------------------------------------------
    def Health(self, request, context):  # noqa: N802 - gRPC method name
        self._require_operator_or_peer(context, "health queries")
        _require_parsed(request, context, "HealthRequest")
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
        _require_parsed(request, context, "Hello")
        role = self._claimed_peer(certified, request.role)
        if self.tls is not None and request.identity != certified:
            mismatch: str | None = (
                f"the peer's Hello names certificate {printable(request.identity, 40)!r} but it "
                f"connected with {certified!r}"
            )
        else:
            mismatch = hello_mismatch(self.hello, request, role)
        if mismatch:
            self._set_peer_state(role, False, f"refused peer {printable(context.peer())}: {mismatch}")
            return party_pb2.HandshakeReply(accepted=False, reason=mismatch, hello=self.hello)
        return party_pb2.HandshakeReply(accepted=True, hello=self.hello)

    def StartJob(self, request, context):  # noqa: N802
        initiator = self._require_operator(context, "job requests")
        _require_parsed(request, context, "JobRequest")
        try:
            job = self.start_job(request.kind, request.params_json, request.job_id, initiator, request.resume)
        except UserError as exc:
            self._audit_refusal(request.job_id, request.kind, initiator, exc)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return job.info()

    def JobStatus(self, request, context):  # noqa: N802
        self._require_operator(context, "job status queries")
        _require_parsed(request, context, "JobQuery")
        return self._known_job(request.job_id, context).info()

    def CancelJob(self, request, context):  # noqa: N802
        caller = self._require_operator(context, "job cancellations")
        _require_parsed(request, context, "JobQuery")
        job = self._known_job(request.job_id, context)
        self.cancel_job(job, f"cancelled by {caller}")
        job.done.wait(5.0)
        return job.info()

    def _known_job(self, job_id: str, context: grpc.ServicerContext) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{self.role} knows no job {printable(job_id, 64)!r}")
        return job

    def Exchange(self, request_iterator, context):  # noqa: N802
        certified = self._require_peer(context, "job streams")
        try:
            opening = next(request_iterator)
        except (StopIteration, grpc.RpcError):
            return
        if opening is MALFORMED:
            self.log.error("refused a job stream from %s: its first frame is not a valid Frame message", certified or "?")
            yield Frame(kind=Frame.ABORT, code=AbortCode.PROTOCOL)
            return
        job_id = opening.job_id
        peer = self._claimed_peer(certified, opening.hello.role)
        try:
            job = self._accept_job(opening, peer)
        except UserError as exc:
            code = exc.code if isinstance(exc, JobRefused) else AbortCode.BAD_REQUEST
            parameter = exc.parameter if isinstance(exc, JobRefused) else ""
            self.log.error("refused job %r from %s: %s", printable(job_id, 64), peer, exc)
            self._audit_refusal(job_id, opening.job.kind, f"{printable(opening.initiator, 96)} (via {peer})", exc, peer)
            yield Frame(kind=Frame.ABORT, job_id=job_id[:64], code=code, parameter=parameter)
            return
        channel = job.channel
        assert isinstance(channel, GrpcChannel)
        context.add_callback(lambda: channel.mark_dead(f"connection to peer {peer} closed"))
        channel.queue_control(Frame(kind=Frame.ACCEPT, hello=self.hello, nonce=job.nonces[self.role]))
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

    def _checked_params(self, kind: JobKind, params_json: str) -> dict[str, Any]:
        """Parse, normalise and check a job's parameters against the local policy.

        Runs before anything is allocated for the job: a refusal costs at most the
        request's (bounded) size.
        """
        if len(params_json.encode("utf-8", "replace")) > MAX_PARAMS_BYTES:
            raise JobRefused(f"job parameters are over {MAX_PARAMS_BYTES // 1024} KiB", AbortCode.BAD_REQUEST)
        try:
            raw = json.loads(params_json or "{}")
        except json.JSONDecodeError as exc:
            raise JobRefused(f"job parameters are not valid JSON: {exc.msg}", AbortCode.BAD_REQUEST) from None
        except RecursionError:
            raise JobRefused("job parameters are nested too deeply", AbortCode.BAD_REQUEST) from None
        if not isinstance(raw, dict):
            raise JobRefused("job parameters must be a JSON object", AbortCode.BAD_REQUEST)
        try:
            params = kind.check_params(raw, self.schema)
            scope = PolicyScope(self.role, self.schema, self.data.n_records, self.hello.missing_rule)
            check_job_policy(kind, params, self.config.policy, scope)
        except PolicyRefusal as exc:
            raise JobRefused(
                f"refused by {self.role}'s policy (parameter {exc.parameter!r}): {exc}", AbortCode.POLICY, exc.parameter
            ) from None
        except ParameterError as exc:
            raise JobRefused(f"{exc} (parameter {exc.parameter!r})", AbortCode.BAD_REQUEST, exc.parameter) from None
        except JobRefused:
            raise
        except UserError as exc:
            raise JobRefused(str(exc), AbortCode.BAD_REQUEST) from None
        except RecursionError:
            raise JobRefused("job parameters are nested too deeply", AbortCode.BAD_REQUEST) from None
        return params

    def _new_job_id(self, requested: str, resume: bool = False) -> str:
        """The requested id if it is free in memory and on disk, else a fresh one; a reused id
        would overwrite an earlier job's result, ledger and network files. A resume continues
        its own unfinished job (checked by ``_resume_request``) in the same folder."""
        if resume:
            earlier = self.jobs.get(requested)
            if earlier is not None and not earlier.done.is_set():
                raise JobRefused(f"job {requested} is still running at {self.role}", AbortCode.BUSY)
            return requested
        if not requested:
            while True:
                candidate = uuid.uuid4().hex[:12]
                if candidate not in self.jobs and not self._on_disk(candidate):
                    return candidate
        if not _JOB_ID.match(requested):
            raise JobRefused(
                f"job id {printable(requested, 64)!r} must be 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit",
                AbortCode.BAD_REQUEST,
            )
        if requested in self.jobs or self._on_disk(requested):
            raise JobRefused(
                f"{self.role} already has a job {requested!r} (its files are in "
                f"{Path(self.config.out_dir) / requested}); choose another id",
                AbortCode.DUPLICATE_JOB,
            )
        return requested

    def _on_disk(self, job_id: str) -> bool:
        """Whether a job of this id left files here: its folder, or its temporary folder
        (a job interrupted by a crash)."""
        out = Path(self.config.out_dir)
        return (out / job_id).exists() or partial_dir(out, job_id).exists()

    def _checked_job(self, kind_name: str, params_json: str) -> tuple[JobKind, dict[str, Any]]:
        """The job kind and its parameters, checked against the local policy."""
        try:
            kind = job_kind(kind_name)
        except UserError as exc:
            raise JobRefused(str(exc), AbortCode.BAD_REQUEST) from None
        return kind, self._checked_params(kind, params_json)

    def _new_job(
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
        if self._stopping.is_set():
            raise JobRefused(f"the daemon of {self.role} is shutting down", AbortCode.SHUTTING_DOWN)
        with self._lock:
            if self.running is not None:
                if not self._yields_to(self.running, peers, peer_nonce):
                    raise JobRefused(f"{self.role} is busy with job {self.running.job_id}; try again later", AbortCode.BUSY)
                self.log.info(
                    "job %s started here and a job of %s crossed: the peer's job runs (smaller nonce), "
                    "this one is withdrawn", self.running.job_id, peers[0],
                )  # fmt: skip
                self.running = None
            job_id = self._new_job_id(job_id, resume)
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
                out_dir=self._make_partial_dir(job_id, resume),
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

    def _make_partial_dir(self, job_id: str, resume: bool = False) -> Path:
        """The folder a job writes into while it runs; renamed to OUT/JOB_ID when it ends. A
        resume starts afresh from the temporary folder a crash of the earlier run left."""
        folder = partial_dir(Path(self.config.out_dir), job_id)
        if resume and folder.is_dir():
            shutil.rmtree(folder)
        try:
            folder.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise JobRefused(f"{self.role} already has a job {job_id!r} on disk", AbortCode.DUPLICATE_JOB) from None
        except OSError as exc:
            self.log.error("job %s: cannot make its folder %s: %s", job_id, folder, exc.strerror)
            raise JobRefused(f"{self.role} cannot write its job folder (see its log)", AbortCode.FAILED) from None
        return folder

    def _yields_to(self, running: Job, peers: tuple[str, ...], peer_nonce: bytes | None) -> bool:
        """Whether the job a peer opens takes the place of ``running``: only when both daemons
        started a job with each other at the same moment (``running`` started here and is
        still waiting for the peer's answer). Both daemons compare the same two nonces, so
        exactly one job runs: the one with the smaller nonce; the other start is told busy."""
        if peer_nonce is None or not running.pending or running.opened_by != self.role:
            return False
        if MINER in peers or not isinstance(running.channel, GrpcChannel) or running.channel.peer != peers[0]:
            return False
        return peer_nonce < running.nonces[self.role]

    def _forget_old_jobs(self) -> None:
        """Keep at most the policy's number of finished jobs in memory (their files stay)."""
        finished = [jid for jid, j in self.jobs.items() if j.done.is_set()]
        for jid in finished[: max(len(self.jobs) - self.config.policy.max_jobs_kept, 0)]:
            del self.jobs[jid]

    def _release(self, job: Job) -> None:
        with self._lock:
            if self.running is job:
                self.running = None

    def start_job(self, kind_name: str, params_json: str, job_id: str, initiator: str, resume: bool = False) -> Job:
        """Reserve this daemon, get every peer of the job to accept it over a new stream, run it.

        The parameters are checked against this daemon's policy before any peer is
        contacted; the peer checks them against its own before it accepts. A resume takes
        the parameters of this daemon's own checkpoint and checks them again.
        """
        if resume:
            kind_name, params_json = self._resume_request(job_id, params_json)
        peers = self._job_peers(kind_name)
        kind, params = self._checked_job(kind_name, params_json)  # refuse before contacting anyone
        for role in peers:
            ok, message = self._handshake_before_job(role)
            if not ok:
                self.log.error("job of kind %s requested by %s not started: %s", kind_name, initiator, message)
                raise UserError(f"job not started: peer {role}: {message}")
        job = self._new_job(kind, params, job_id, initiator, peers, resume=resume)
        self._audit_requested(job)
        job.opened_by = self.role
        channels = job.channel.channels if isinstance(job.channel, ChannelGroup) else {peers[0]: job.channel}
        self.log.info(
            "job %s (%s) requested by %s: asking %s", job.job_id, job.kind.name, initiator, " and ".join(peers),
            extra={"job": job.job_id},
        )  # fmt: skip
        calls = []
        for role, channel in channels.items():
            channel.queue_control(
                Frame(
                    kind=Frame.OPEN,
                    hello=self.hello,
                    job=party_pb2.JobRequest(
                        kind=job.kind.name, params_json=json.dumps(job.params), job_id=job.job_id, resume=resume
                    ),
                    initiator=initiator,
                    nonce=job.nonces[self.role],
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
                    raise ProtocolError(f"{role} answered the job request with {frame_kind_name(answer.kind)}")
                mismatch = hello_mismatch(self.hello, answer.hello, role)
                if mismatch:
                    raise ProtocolError(f"refused peer: {mismatch}")
                if len(answer.nonce) != NONCE_BYTES:
                    raise ProtocolError(f"{role} accepted the job without a {NONCE_BYTES}-byte nonce")
                hellos[role] = answer.hello
                job.nonces[role] = bytes(answer.nonce)
            if self.role == MINER:
                mismatch = parties_mismatch(hellos["alice"], hellos["bob"])
                if mismatch:
                    raise ProtocolError(f"the parties' data do not line up: {mismatch}")
            with self._lock:
                if self.running is not job:  # withdrawn for the peer's crossing job meanwhile
                    raise ProtocolError(f"{self.role} is busy with job {self.running.job_id if self.running else '?'}")
                job.pending = False
        except ProtocolError as exc:
            job.abort_code = AbortCode.MISMATCH if "refused peer" in str(exc) or "line up" in str(exc) else AbortCode.PROTOCOL
            job.channel.abort(job.abort_code)
            for call in calls:
                call.cancel()
            job.state, job.error = JobInfo.FAILED, f"job not started: {exc}"
            shutil.rmtree(job.context.out_dir, ignore_errors=True)  # it never ran: no files
            job.done.set()
            self._release(job)
            self.log.error("job %s: %s", job.job_id, job.error)
            peer_code = getattr(job.channel, "peer_abort_code", 0)
            raise JobRefused(job.error, peer_code or job.abort_code, refused_by=peers[0] if peer_code else "") from None
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
            raise JobRefused(
                f"a job stream must start with OPEN, not {frame_kind_name(opening.kind)}", AbortCode.PROTOCOL
            )
        mismatch = hello_mismatch(self.hello, opening.hello, peer)
        if mismatch:
            raise JobRefused(mismatch, AbortCode.MISMATCH)
        if len(opening.nonce) != NONCE_BYTES:
            raise JobRefused(f"the job request carries no {NONCE_BYTES}-byte nonce", AbortCode.PROTOCOL)
        kind = opening.job.kind
        if (peer == MINER) != (kind in MINER_JOB_KINDS):
            raise JobRefused(
                f"{self.role} runs {printable(kind, 32)!r} jobs with the miner only"
                if kind in MINER_JOB_KINDS
                else f"{self.role} runs only {', '.join(sorted(MINER_JOB_KINDS))} jobs for the miner, "
                f"not {printable(kind, 32)!r}",
                AbortCode.BAD_REQUEST,
            )
        initiator = f"{printable(opening.initiator, 96)} (via {peer})"
        resume = opening.job.resume
        if resume:  # our own checkpoint's parameters must be the ones asked for
            own_kind, own_params = self._resume_request(opening.job_id, "")
            if kind != own_kind:
                raise JobRefused(f"resume of job {opening.job_id}: it was a {own_kind} job", AbortCode.BAD_REQUEST, "resume")
        checked_kind, params = self._checked_job(kind, opening.job.params_json)
        if resume and params != self._checked_job(own_kind, own_params)[1]:
            raise JobRefused(
                f"resume of job {opening.job_id}: the peer asks for other parameters than {self.role}'s checkpoint",
                AbortCode.BAD_REQUEST, "resume",
            )  # fmt: skip
        job = self._new_job(checked_kind, params, opening.job_id, initiator, (peer,), bytes(opening.nonce), resume)
        self._audit_requested(job)
        job.nonces[peer] = bytes(opening.nonce)
        job.opened_by = peer
        self.log.info(
            "job %s (%s) %s by %s", job.job_id, job.kind.name, "resumed" if resume else "opened", initiator,
            extra={"job": job.job_id},
        )  # fmt: skip
        return job

    def _resume_request(self, job_id: str, params_json: str) -> tuple[str, str]:
        """Kind and parameters of the job to resume, from this daemon's own newest checkpoint.

        The checkpoint must exist, decrypt under this daemon's key and have been made on the
        same data; parameters given with the request must equal the checkpoint's."""
        if not _JOB_ID.match(job_id or ""):
            raise JobRefused(f"resume needs the id of an earlier job, not {printable(job_id, 64)!r}", AbortCode.BAD_REQUEST, "resume")
        store = CheckpointStore(Path(self.config.out_dir), job_id, self.role)
        try:
            header = store.latest_header()
        except UserError as exc:
            raise JobRefused(f"cannot resume job {job_id}: {exc}", AbortCode.BAD_REQUEST, "resume") from None
        if header is None:
            raise JobRefused(
                f"{self.role} has no checkpoint of job {job_id} in {store.folder}: nothing to resume",
                AbortCode.BAD_REQUEST, "resume",
            )  # fmt: skip
        # under --align psi the job's data is the intersection, known only after the PSI: the
        # resumed job compares its digest with the checkpoint's (learn_job.agree_resume_step)
        same_data = self.config.align == "psi" or header.get("data") == data_digest(self.data.ids, self.data.codes)
        if header.get("role") != self.role or not same_data:
            raise JobRefused(
                f"cannot resume job {job_id}: {self.role}'s data changed since its checkpoint", AbortCode.BAD_REQUEST, "resume"
            )
        if params_json and params_json.strip() not in ("", "{}"):
            try:
                asked = json.loads(params_json)
            except (json.JSONDecodeError, RecursionError):
                asked = None
            if asked != header["params"]:
                raise JobRefused(
                    f"resume of job {job_id}: parameters differ from the checkpoint's (give none)",
                    AbortCode.BAD_REQUEST, "resume",
                )  # fmt: skip
        return str(header["kind"]), json.dumps(header["params"])

    def _launch(self, job: Job) -> None:
        last_note = [0.0]

        def note(text: str) -> None:
            now = time.monotonic()
            if text.startswith("phase "):
                self.metrics.phase_entered(job, text[len("phase ") :])
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
        job.channel.abort(AbortCode.CANCELLED)

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
            party_check_records_for_miner(channel, job.job_id, job.nonces[self.role], self.data.ids, 2)
        elif self.config.align == "psi":
            ctx = job.context
            with ctx.phase("record alignment"):
                ctx.data = align_by_psi(
                    channel, self.role, self.data, job_key(job.job_id, nonces), ctx.policy, ctx.ledger, ctx.report,
                    ctx.params.get("key_bits"),
                )  # fmt: skip
            return
        else:
            key = job_key(job.job_id, nonces)
            check_same_records(channel, key, self.data.ids, self.role, channel.peer)
        job.context.ledger.record("records_match", True, "keyed record-id digest (HMAC-SHA256, per-job key)")

    def _run_job(self, job: Job) -> None:
        ctx, channel = job.context, job.channel
        start = time.perf_counter()
        self.metrics.job_started(job)
        try:
            if not self._audit(lambda audit: audit.started(job.job_id, job.kind.name, sorted(set(job.nonces) - {self.role}))):
                raise JobFilesUnwritable(f"{self.role}'s audit log cannot be written (see its log): the job does not run unrecorded", AUDIT_LOG_PARAMETER)
            ctx.ledger.record("schema", self.hello.schema_fingerprint, "handshake")
            if self.role != MINER:  # the miner learns n from the parties' headers
                ctx.ledger.record("record_count", self.data.n_records, "handshake")
            self._check_records(job)
            if ctx.resume and isinstance(channel, GrpcChannel):
                channel.session = resume_session(job.job_id, job.opened_by, job.nonces)
            result = job.kind.run(self.role, channel, ctx)  # type: ignore[arg-type]
            if not isinstance(result, dict):
                raise TypeError(f"job {job.kind.name} returned {type(result).__name__}, not a dict")
            stats = self._stats(job, time.perf_counter() - start)
            peer_stats = _mirrored_peer_stats(channel, job.kind.name)  # the job's traffic, as ours
            # every output in the temporary folder and every reveal in the audit log before
            # the end-of-job exchange, which confirms it to the peers; a side that cannot
            # aborts instead, so no party keeps a job another party failed
            result = self._write_job_files(job, JobInfo.SUCCEEDED, result, stats, peer_stats)
            self._audit_revealed(job)
            _exchange_stats(channel, stats)
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
                if self._stopping.is_set():
                    job.error = self._failure_text(job, JobCancelled(job.error))
                self._abort(job, AbortCode.SHUTTING_DOWN if self._stopping.is_set() else AbortCode.CANCELLED)
            else:
                job.state, job.error = JobInfo.FAILED, self._failure_text(job, exc)
                job.refused = isinstance(exc, RecordsMismatch) or _peer_refused(channel)
                self._abort(job, *_relayed_failure(channel) or (_abort_code_for(exc), ""))
        except UserError as exc:  # the data or a policy refuses the job: bad input, not a fault
            job.state, job.error, job.refused = JobInfo.FAILED, str(exc), True
            self._abort(job, AbortCode.POLICY if isinstance(exc, PolicyRefusal) else AbortCode.FAILED)
        except ExecutorError as exc:  # this party's workers or Ray cluster lost tasks: the job fails, the daemon serves on
            if self._stopping.wait(STOP_SIGNAL_WAIT_S):  # a stop signal sent to the process group killed them
                job.state = JobInfo.CANCELLED
                job.error = self._failure_text(job, JobCancelled(ctx.cancel_reason or self._stopped_reason))
                self._abort(job, AbortCode.SHUTTING_DOWN)
            else:
                job.state, job.error = JobInfo.FAILED, f"{self.role}'s executor: {exc}"
                self._abort(job, AbortCode.INTERNAL)
        except Exception as exc:  # noqa: BLE001 - a job's bug must not take the daemon down
            if is_file_error(exc):  # a full disk, an I/O error: one line, no traceback
                job.state, job.error = JobInfo.FAILED, self._write_failure_text(exc)
                self._abort(job, AbortCode.FAILED, OUTPUTS_PARAMETER)
            else:
                self.log.exception("job %s crashed", job.job_id)
                job.state = JobInfo.FAILED
                job.error = f"internal error in job {job.kind.name} at {self.role}: {type(exc).__name__}: {exc}"
                self._abort(job, AbortCode.INTERNAL)
        finally:
            if job.stats is None:
                job.stats = self._stats(job, time.perf_counter() - start)
            if job.peer_stats is None:
                job.peer_stats = _mirrored_peer_stats(channel, job.kind.name)
            self._finish_job_files(job)
            if job.state != JobInfo.SUCCEEDED:
                self.log.error("job %s %s: %s", job.job_id, JobInfo.State.Name(job.state).lower(), job.error)
            self._audit_end(job)
            self._release(job)
            job.done.set()

    def _failure_text(self, job: Job, exc: Exception) -> str:
        """One line for a failed job: what happened (naming the peer), in which phase, and
        what to do next (resume where this daemon holds a checkpoint of the job)."""
        ctx = job.context
        text = str(exc)
        if ctx.current_phase:
            text += f" (phase: {ctx.current_phase})"
        abort = job.channel.peer_abort_code if isinstance(job.channel, GrpcChannel) else 0
        if not isinstance(exc, PeerGone | JobCancelled) or abort not in (0, AbortCode.SHUTTING_DOWN, AbortCode.TIMEOUT):
            return text  # the peer refused or broke the protocol: retrying the same will not help
        if job.kind.name == "learn" and CheckpointStore(Path(self.config.out_dir), job.job_id, self.role).steps():
            return text + f"; when both daemons are up, resume with `ppbn learn --resume {job.job_id}`"
        return text + "; when both daemons are up, start the job again"

    def _abort(self, job: Job, code: int, parameter: str = "") -> None:
        job.abort_code = code
        job.channel.abort(code, parameter)

    def _failed_write(self, exc: OSError) -> tuple[str, Path]:
        """The file a failed write names (or the job's files, if it names none) and the
        folder to fix."""
        out = Path(self.config.out_dir)
        failed = failed_file(exc, out)
        if failed is None and exc.filename:
            failed = Path(os.fsdecode(exc.filename))
        if failed is None:
            return f"the job's files in {out}", out
        return str(failed), out if failed.is_relative_to(out.absolute()) else failed.parent

    def _write_failure_text(self, exc: OSError) -> str:
        """One line for a job whose files cannot be written: the file, the OS's reason, and
        what to do. Said before the peers were told, so no party keeps the job."""
        where, folder = self._failed_write(exc)
        return (
            f"{self.role} cannot write {where} ({reason(exc)}): the job's outputs are kept at no party; "
            f"{io_remedy(exc, folder)}, then run the job again"
        )

    # -- audit log and metrics (ppbn.parties.audit, ppbn.parties.metrics) ----------------
    def _audit(self, append) -> bool:
        """Append an audit event; a failure is logged loudly and reported as False. A daemon
        object that is not serving (start() opens the log) has nothing to append to."""
        if self.audit is None:
            return True
        try:
            append(self.audit)
        except OSError as exc:
            self.log.error(
                "audit log %s: cannot append an event (%s): no job runs until it can; %s",
                self.audit.path, reason(exc), io_remedy(exc, self.audit.path.parent),
            )  # fmt: skip
            return False
        except ValueError as exc:
            self.log.error("audit log %s: cannot append an event: %s", self.audit.path, exc)
            return False
        return True

    def _audit_requested(self, job: Job) -> None:
        """Log a job this daemon accepted to run; refuse it if that cannot be logged."""
        if self._audit(lambda audit: audit.requested(job.job_id, job.kind.name, job.initiator, job.params)):
            if job.context.resume:
                steps = CheckpointStore(Path(self.config.out_dir), job.job_id, self.role).steps()
                self._audit(
                    lambda audit: audit.resumed(job.job_id, job.kind.name, job.initiator, f"step {steps[-1]}" if steps else "none")
                )  # fmt: skip
            return
        job.state, job.error = JobInfo.FAILED, f"job not started: {self.role}'s audit log cannot be written"
        job.done.set()
        self._release(job)
        shutil.rmtree(job.context.out_dir, ignore_errors=True)  # it never ran: no files
        raise JobRefused(job.error, AbortCode.INTERNAL)

    def _audit_refusal(self, job_id: str, kind: str, requester: str, exc: UserError, source: str = "") -> None:
        """``source``: who sent the request as authenticated (bounds its refusal lines)."""
        refused = isinstance(exc, JobRefused)
        code = AbortCode.Name(exc.code) if refused and exc.code in AbortCode.values() else "NOT_STARTED"
        self.metrics.job_refused(code)
        self._audit(
            lambda audit: audit.refused(
                job_id, kind, requester, code=code, reason=str(exc),
                parameter=exc.parameter if refused else "",
                refused_by=(exc.refused_by if refused else "") or self.role, source=source or requester,
            )
        )  # fmt: skip

    def _audit_end(self, job: Job) -> None:
        """What the job revealed (its ledger, by class) and how it ended, with the code."""
        state = JobInfo.State.Name(job.state)
        self.metrics.job_finished(job, state.lower())
        if not job.reveal_audited:
            self._audit(lambda audit: audit.revealed(job.job_id, job.context.ledger))
        channels = job.channel.channels.values() if isinstance(job.channel, ChannelGroup) else [job.channel]
        peer_code = next((c.peer_abort_code for c in channels if c.peer_abort_code), 0)
        if job.state == JobInfo.SUCCEEDED:
            event, code = "finished", ""
        elif job.state == JobInfo.CANCELLED:
            event, code = "cancelled", AbortCode.Name(job.abort_code or AbortCode.CANCELLED)
        elif peer_code:
            event, code = "aborted", AbortCode.Name(peer_code) if peer_code in AbortCode.values() else str(peer_code)
        else:
            event, code = "failed", AbortCode.Name(job.abort_code) if job.abort_code else "ABORT_UNSPECIFIED"
        # an internal error's text may quote anything; the daemon's own log keeps it
        error = "internal error (see the daemon log)" if job.abort_code == AbortCode.INTERNAL else job.error
        stats = job.stats or {}
        figures = {k: stats[k] for k in ("wall_s", "bytes_sent", "bytes_received", "rounds", "phases") if k in stats}
        self._audit(lambda audit: audit.ended(job.job_id, event, code, error, figures))

    def _stats(self, job: Job, wall_s: float) -> dict[str, Any]:
        """This daemon's own figures; they stay here (only EXCHANGED_STATS cross the wire)."""
        ctx = job.context
        return {
            "role": self.role,
            "job_id": job.job_id,
            "kind": job.kind.name,
            "wall_s": round(wall_s, 4),
            "phases": {name: round(seconds, 4) for name, seconds in ctx.phases.items()},
            **job.channel.stats.as_dict(),
            # local only, like every figure here: where this side's bytes went
            "bytes_by_phase_and_kind": job.channel.stats.breakdown(),
            "paillier_encryptions": ctx.counters.encryptions,
            "public_key_operations": ctx.counters.public_key_operations,
            **dict(ctx.tallies),
            "counters": {**ctx.counters.as_dict(), **dict(ctx.tallies)},
        }

    def _write_job_files(
        self, job: Job, state: int, result: dict[str, Any] | None, stats: dict[str, Any] | None,
        peer_stats: dict[str, Any] | None,
    ) -> dict[str, Any] | None:
        """Write result, stats and ledger beside the job's own files in its temporary folder;
        returns the result with its paths moved to where the folder will be. A job that did
        not succeed keeps only these three files: never a network beside a FAILED result."""
        temp = job.context.out_dir
        final = Path(self.config.out_dir) / job.job_id
        temp.mkdir(parents=True, exist_ok=True)
        if state != JobInfo.SUCCEEDED:
            for leftover in temp.iterdir():
                if leftover.is_dir() and not leftover.is_symlink():
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()
        result = relocate(result, temp, final)
        status = {
            "job_id": job.job_id,
            "kind": job.kind.name,
            "params": job.params,
            "initiator": job.initiator,
            "state": JobInfo.State.Name(state),
            "error": job.error,
            "result": result,
        }
        (temp / "result.json").write_text(json.dumps(status, indent=2) + "\n")
        (temp / "stats.json").write_text(json.dumps({"self": stats, "peer": peer_stats}, indent=2) + "\n")
        (temp / "ledger.json").write_text(job.context.ledger.to_json() + "\n")
        return result

    def _commit_job_files(self, job: Job) -> None:
        """Rename the temporary folder to OUT/JOB_ID: a reader sees a whole job folder or
        none. A resumed job takes the interrupted run's folder inside (its ledger included),
        and gives it back if the rename fails."""
        temp = job.context.out_dir
        final = Path(self.config.out_dir) / job.job_id
        interrupted = temp / "interrupted-run"
        if job.context.resume and final.is_dir():
            os.replace(final, interrupted)
        try:
            commit_dir(temp, final)
        except OSError:
            if interrupted.is_dir() and not final.exists():
                os.replace(interrupted, final)
            raise
        job.context.out_dir = final

    def _finish_job_files(self, job: Job) -> None:
        """Put the ended job's folder in place. A job that failed writes its three files
        afresh; if even they cannot be written, nothing of the job stays (one line says
        so). A job that succeeded is renamed into place; if that fails the job fails here,
        after its peers confirmed theirs: the one window the end-of-job exchange leaves."""
        try:
            if job.state != JobInfo.SUCCEEDED:
                self._write_job_files(job, job.state, None, job.stats, job.peer_stats)
            self._commit_job_files(job)
        except OSError as exc:
            shutil.rmtree(job.context.out_dir, ignore_errors=True)
            where, folder = self._failed_write(exc)
            if job.state == JobInfo.SUCCEEDED:
                job.state, job.result = JobInfo.FAILED, None
                job.error = (
                    f"{self.role} cannot put the finished job in place ({where}: {reason(exc)}) after its peers "
                    f"confirmed it: they keep its outputs, {self.role} does not; {io_remedy(exc, folder)}, "
                    "then run the job again"
                )
            else:
                self.log.error(
                    "job %s: its result files cannot be written either (%s: %s): no folder is kept for it",
                    job.job_id, where, reason(exc),
                )  # fmt: skip

    def _audit_revealed(self, job: Job) -> None:
        """Log what the job revealed before it is confirmed to the peers: a job whose reveals
        the audit log cannot hold fails at every party instead of succeeding unrecorded."""
        job.reveal_audited = True
        if not self._audit(lambda audit: audit.revealed(job.job_id, job.context.ledger)):
            raise JobFilesUnwritable(
                f"{self.role}'s audit log cannot be written (see its log): the job's outputs are kept at no party",
                AUDIT_LOG_PARAMETER,
            )


def resume_session(job_id: str, opened_by: str, nonces: dict[str, bytes]) -> bytes:
    """Session label of a resumed run: the job id plus a digest of this run's fresh nonces,
    so no garbling or OT hash input of the interrupted run is used again."""
    order = [opened_by, *sorted(r for r in nonces if r != opened_by)]
    digest = hashlib.sha256(b"ppbn/resume" + b"".join(nonces[r] for r in order)).hexdigest()[:32]
    return f"{job_id}/resume/{digest}".encode()


def _parse_or_malformed(message_type: type) -> Any:
    """A request deserializer that answers MALFORMED for bytes that are not a valid message:
    gRPC's own failure would be an INTERNAL status and a traceback in the log."""

    def parse(data: bytes) -> Any:
        try:
            return message_type.FromString(data)
        except DecodeError:
            return MALFORMED

    return parse


def add_party_service(servicer: PartyDaemon, server: grpc.Server) -> None:
    """Register every RPC of party.proto's PartyService, with ``_parse_or_malformed`` requests
    (each handler refuses a MALFORMED request: ``_require_parsed``, or a PROTOCOL abort)."""
    service = party_pb2.DESCRIPTOR.services_by_name["PartyService"]
    handlers = {}
    for method in service.methods:
        request = _parse_or_malformed(getattr(party_pb2, method.input_type.name))
        reply = getattr(party_pb2, method.output_type.name).SerializeToString
        make = grpc.stream_stream_rpc_method_handler if method.client_streaming else grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(
            getattr(servicer, method.name), request_deserializer=request, response_serializer=reply
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def _require_parsed(request: Any, context: grpc.ServicerContext, message: str) -> None:
    if request is MALFORMED:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid {message} message")


def _peer_refused(channel: GrpcChannel | ChannelGroup) -> bool:
    """The peer ended the job for its input or policy (its ABORT code says so)."""
    channels = channel.channels.values() if isinstance(channel, ChannelGroup) else (channel,)
    return any(c.peer_abort_code in (AbortCode.POLICY, AbortCode.MISMATCH) for c in channels)


def _relayed_failure(channel: GrpcChannel | ChannelGroup) -> tuple[int, str] | None:
    """The miner's ABORT to the other party when one party could not write the job down:
    FAILED with a parameter that says so, instead of a protocol error it did not make."""
    if not isinstance(channel, ChannelGroup):
        return None
    for each in channel.channels.values():
        if each.peer_abort_code == AbortCode.FAILED and each.peer_abort_parameter in (OUTPUTS_PARAMETER, AUDIT_LOG_PARAMETER):
            return AbortCode.FAILED, RELAYED_PARAMETER
    return None


def _abort_code_for(exc: ProtocolError) -> int:
    if isinstance(exc, RecordsMismatch):
        return AbortCode.MISMATCH
    if isinstance(exc, PeerGone) and "sent nothing for" in str(exc):
        return AbortCode.TIMEOUT
    return AbortCode.PROTOCOL


def _later(delay_s: float, action) -> None:
    """Run ``action`` after ``delay_s`` without keeping the process alive for it."""
    timer = threading.Timer(delay_s, action)
    timer.daemon = True
    timer.start()


def _traffic_labeller(channel: GrpcChannel | ChannelGroup) -> Callable[[str], None]:
    """Count the channel's traffic under the job's current phase from now on."""
    if isinstance(channel, ChannelGroup):
        return channel.label_traffic

    def label(section: str) -> None:
        channel.stats.section = section

    return label


def _exchange_stats(channel: GrpcChannel | ChannelGroup, stats: dict[str, Any]) -> None:
    """End-of-job handshake with every peer, and the confirmation that decides the job's
    outcome: a side sends it only once its outputs are written (in its temporary folder)
    and renames them into place only once every peer's has arrived; a side that cannot
    write sends ABORT instead, so every party fails the job. The miner, with two peers,
    receives both parties' confirmations before it sends its own: a party that fails makes
    the miner fail, and so the other party too.

    Only the fields of ``EXCHANGED_STATS`` travel (none depends on the data); anything else
    received is a protocol error, so a peer cannot slip data-dependent figures into it."""
    mine = {"protocol_version": PROTOCOL_VERSION, "role": stats["role"], "kind": stats["kind"]}
    payload = json.dumps(mine, sort_keys=True).encode()
    if isinstance(channel, ChannelGroup):
        for each in channel.channels.values():
            _parse_stats(each.recv("job.done", max_bytes=STATS_MAX_BYTES), stats["kind"])
        for each in channel.channels.values():
            each.send("job.done", payload)
        return
    channel.send("job.done", payload)
    _parse_stats(channel.recv("job.done", max_bytes=STATS_MAX_BYTES), stats["kind"])


def _parse_stats(payload: bytes, kind: str) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise ProtocolError("peer sent end-of-job statistics that are not JSON") from None
    if not isinstance(value, dict) or tuple(sorted(value)) != tuple(sorted(EXCHANGED_STATS)):
        raise ProtocolError(
            f"peer sent end-of-job statistics with fields other than {', '.join(EXCHANGED_STATS)}"
        )
    if value["protocol_version"] != PROTOCOL_VERSION or value["kind"] != kind:
        raise ProtocolError("peer's end-of-job statistics name another protocol version or job kind")
    return value


def _mirrored_peer_stats(channel: GrpcChannel | ChannelGroup, kind: str) -> dict[str, Any]:
    """The peer's traffic as this daemon saw it: what we received it sent, and the reverse.
    The peer's own figures (time, operations) never cross the wire."""
    channels = channel.channels if isinstance(channel, ChannelGroup) else {channel.peer: channel}
    total = ChannelStats()
    for each in channels.values():
        total.add(each.stats, mirrored=True)
    return {"role": "+".join(channels), "kind": kind, "mirrored": True, **total.as_dict()}
