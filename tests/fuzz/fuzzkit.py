"""The fuzz harness: a live daemon under test, a hostile peer built from real daemon code,
mutations of every frame of a job stream, and the tally ``make fuzz`` prints.

The daemon under test is bob, run as its own process (``ppbn party serve``, short peer
timeout) so its log and its RSS can be read. The hostile side is alice: her real daemon
code in this process, with every job stream she sends passing through a ``Plan`` that
plays the honest frames up to frame k and then mutates frame k. Because alice's honest
code produces the frames live (fresh nonces, keys and masks per job), the stream is valid
up to frame k in every phase of the job, which a replayed recording could not be.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
from known_files import TEST_POLICY as KNOWN_POLICY
from mutations import END, Mutation, describe, mutate
from timeouts import PEER_TIMEOUT_S as SUITE_PEER_TIMEOUT_S
from timeouts import WAIT_S
from waiting import wait_until as wait_for

from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy
from ppbn.pair.loopback import free_port
from ppbn.parties.daemon import DaemonConfig, PartyDaemon
from ppbn.parties.job import JobRefused
from ppbn.parties.net import dial
from ppbn.parties.tls import load_tls_files
from ppbn.proto import party_pb2, party_pb2_grpc

Frame = party_pb2.Frame
AbortCode = party_pb2.AbortCode
JobInfo = party_pb2.JobInfo
MIB = 1024 * 1024
# bob's --peer-timeout. Long enough for an honest peer on a loaded 2-core host (a first job
# compiles numba kernels for seconds; 16 MiB frames through TLS take their time): a job
# bob waits on ends sooner, when alice gives up first (HOSTILE_TIMEOUT_S) and tells him.
PEER_TIMEOUT_S = 30.0
# alice's peer timeout in an honest run (the phases recorded, the warm-up job): she waits for
# bob however slow the host, since a timeout there is no finding, only a failed set-up
HONEST_TIMEOUT_S = SUITE_PEER_TIMEOUT_S
# alice's peer timeout in a hostile job: a frame dropped while both wait for each other ends
# when she gives up and aborts, so an example costs seconds, not bob's whole timeout
HOSTILE_TIMEOUT_S = 3.0
# A job at bob must end within the peer timeout plus this much after the hostile frame
# (the timeout runs from bob's last wait, and an abort may wait once more to be sent).
HANG_MARGIN_S = 7.0
RPC_TIMEOUT_S = 15.0
POLICY_FILE = KNOWN_POLICY
N_RECORDS = 60
STATES = ["s0", "s1", "s2"]
OWNERS = {"a1": "alice", "b1": "bob", "a2": "alice", "b2": "bob"}
# Statuses a daemon may answer a hostile or malformed call with. UNKNOWN means an unhandled
# exception in a handler; INTERNAL, a message gRPC itself could not handle.
CLEAR_STATUSES = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.CANCELLED,
    }
)
# Lines in bob's log that mean an unchecked field reached code that did not expect it.
LOG_FINDINGS = re.compile(r"Traceback|internal error|crashed|Exception")
SERVICE = "/ppbn.PartyService/"
# Small honest jobs of every kind, on the fuzz data set (1024-bit keys: the test policy).
HONEST_PARAMS = {
    "ping": {"rounds": 3, "bytes": 64},
    "tables": {"max_family": 2, "key_bits": 1024},
    "learn": {"max_parents": 1, "key_bits": 1024},
    "pram": {"p": 0.3, "max_parents": 1},
}


def write_dataset(base: Path, n: int = N_RECORDS, seed: int = 16) -> dict[str, Path]:
    """schema.json, alice.csv and bob.csv: ``n`` records of four 3-state variables, two per party."""
    base.mkdir(parents=True, exist_ok=True)
    schema = {
        "id_column": "id",
        "variables": [{"name": v, "owner": o, "states": STATES} for v, o in OWNERS.items()],
    }
    (base / "schema.json").write_text(json.dumps(schema))
    rng = np.random.default_rng(seed)
    a1 = rng.integers(0, 3, n)
    codes = {
        "a1": a1,
        "b1": (a1 + rng.integers(0, 2, n)) % 3,
        "a2": rng.integers(0, 3, n),
        "b2": rng.integers(0, 3, n),
    }
    ids = [f"r{i:04d}" for i in range(n)]
    files = {"schema": base / "schema.json"}
    for role in ("alice", "bob"):
        names = [v for v, o in OWNERS.items() if o == role]
        lines = [",".join(["id", *names])]
        lines += [",".join([ids[i], *(STATES[int(codes[v][i])] for v in names)]) for i in range(n)]
        (base / f"{role}.csv").write_text("\n".join(lines) + "\n")
        files[role] = base / f"{role}.csv"
    return files


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    """Resident memory of a process (VmRSS), or its high-water mark since it started (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field_name} for process {pid}")


def phase_of(frame: Frame) -> str:
    """The phase a frame belongs to, from what the protocols put in it (control kind or tag)."""
    if frame.kind != Frame.DATA:
        return Frame.Kind.Name(frame.kind).lower()
    group = frame.tag.split(".")[0]
    return {"job": "records" if frame.tag == "job.records" else "done"}.get(group, group)


@dataclass
class Plan:
    """Play an honest stream's frames 0..k-1, mutate frame k, then go on honestly (unless
    the mutation ended the stream). ``raw_ok``: raw bytes can be sent (the client side)."""

    k: int
    mutation: Mutation
    raw_ok: bool = True
    alice_timeout_s: float = HONEST_TIMEOUT_S  # how long alice waits for bob in this job
    applied: bool = False
    phase: str = ""
    sent_at: float = 0.0
    frames_seen: int = 0
    tags: list[str] = field(default_factory=list)

    def apply(self, frames: Iterator[Frame]) -> Iterator[object]:
        for index, frame in enumerate(frames):
            self.frames_seen = index + 1
            self.tags.append(phase_of(frame))
            if index != self.k:
                yield frame
                continue
            self.phase, self.applied, self.sent_at = phase_of(frame), True, time.monotonic()
            items = mutate(frame, self.mutation)
            if not self.raw_ok:
                items = [
                    Frame(kind=Frame.DATA, job_id=frame.job_id, payload=i)
                    if isinstance(i, bytes)
                    else i
                    for i in items
                ]
            for item in items:
                if item is END:
                    return
                yield item


class RawStub:
    """Alice's stub for bob, but an Exchange whose requests may be Frames or raw bytes."""

    def __init__(self, channel: grpc.Channel, real: party_pb2_grpc.PartyServiceStub) -> None:
        self.Handshake = real.Handshake  # noqa: N815 - the stub's method name
        self.Health = real.Health  # noqa: N815
        self.Exchange = channel.stream_stream(  # noqa: N815
            SERVICE + "Exchange",
            request_serializer=serialize_any,
            response_deserializer=Frame.FromString,
        )


def serialize_any(item: object) -> bytes:
    return item if isinstance(item, bytes) else item.SerializeToString()  # type: ignore[union-attr]


class FuzzAlice(PartyDaemon):
    """Alice's real daemon code; the next job stream she sends passes through ``plan``."""

    plan: Plan | None = None
    refuse_jobs = False  # answer BUSY to bob's job requests (a fuzzed StartJob then costs no job)

    def __init__(self, config: DaemonConfig) -> None:
        super().__init__(config)
        honest_accept, honest_reserve = self.controller.accept, self.controller.reserve

        def accept(opening, peer):  # type: ignore[no-untyped-def]
            if self.refuse_jobs:
                raise JobRefused("the fuzzing alice runs no job now", AbortCode.BUSY)
            return honest_accept(opening, peer)

        def reserve(*args, **kwargs):  # type: ignore[no-untyped-def]
            job = honest_reserve(*args, **kwargs)
            plan, self.plan = self.plan, None
            if plan is not None:
                job.channel.timeout_s = plan.alice_timeout_s
                honest = job.channel.outgoing_frames
                job.channel.outgoing_frames = lambda: plan.apply(honest())  # type: ignore[method-assign]
            return job

        self.controller.accept = accept  # type: ignore[method-assign]
        self.controller.reserve = reserve  # type: ignore[method-assign]

    def start(self) -> int:
        port = super().start()
        channel = dial(self.peer_addresses["bob"], self.tls, "bob", self.config.frame_bytes)
        self.peers.stubs["bob"] = RawStub(channel, self.peers.stubs["bob"])  # type: ignore[assignment]
        return port


# -- the daemon under test ----------------------------------------------------------------
class BobProcess:
    """bob's daemon as its own process, with the clients the fuzzer calls it through."""

    def __init__(
        self, base: Path, files: dict[str, Path], pki: dict[str, Path], alice_address: str
    ) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log_path = base / "bob.log"
        self.out = base / "out-bob"
        command = [
            sys.executable,
            "-m",
            "ppbn.cli",
            "party",
            "serve",
            "--role",
            "bob",
            "--schema",
            str(files["schema"]),
            "--data",
            str(files["bob"]),
            "--listen",
            self.address,
            "--peer",
            alice_address,
            "--tls-dir",
            str(pki["bob"]),
            "--out",
            str(self.out),
            "--policy",
            str(POLICY_FILE),
            "--workers",
            "1",
            "--peer-timeout",
            str(PEER_TIMEOUT_S),
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        self._log_offset = 0
        operator_tls = load_tls_files(pki["bob"], "operator")
        peer_tls = load_tls_files(pki["alice"], "alice")
        self.operator_channel = dial(self.address, operator_tls, "bob", 64 * MIB)
        self.peer_channel = dial(self.address, peer_tls, "bob", 64 * MIB)
        self.operator = party_pb2_grpc.PartyServiceStub(self.operator_channel)
        self.peer = party_pb2_grpc.PartyServiceStub(self.peer_channel)

    def raw_unary(self, method: str, as_peer: bool) -> Callable[..., bytes]:
        """A call of ``method`` that sends bytes as they are (no serializer): any protobuf or none."""
        channel = self.peer_channel if as_peer else self.operator_channel
        return channel.unary_unary(
            SERVICE + method, request_serializer=None, response_deserializer=None
        )

    def raw_exchange(self) -> Callable[..., Iterator[Frame]]:
        return self.peer_channel.stream_stream(
            SERVICE + "Exchange",
            request_serializer=serialize_any,
            response_deserializer=Frame.FromString,
        )

    def healthy(self) -> bool:
        try:
            reply = self.operator.Health(party_pb2.HealthRequest(), timeout=5)
        except grpc.RpcError:
            return False
        return reply.status == party_pb2.HealthReply.SERVING

    def idle(self) -> bool:
        try:
            return self.operator.Health(party_pb2.HealthRequest(), timeout=5).running_job == ""
        except grpc.RpcError:
            return False

    def rss_mib(self) -> float:
        return rss_mib(self.process.pid)

    def peak_rss_mib(self) -> float:
        return rss_mib(self.process.pid, "VmHWM")

    def reset_peak_rss(self) -> None:
        """Start a new high-water mark (Linux: write 5 to clear_refs); the run's peak is kept in the tally."""
        TALLY.rss_peak_mib = max(TALLY.rss_peak_mib, self.peak_rss_mib())
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def new_log(self) -> str:
        """What bob logged since the last call."""
        with open(self.log_path, "rb") as log:
            log.seek(self._log_offset)
            data = log.read()
        self._log_offset += len(data)
        return data.decode("utf-8", "replace")

    def stop(self) -> None:
        self.operator_channel.close()
        self.peer_channel.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def make_alice(
    base: Path, files: dict[str, Path], pki: dict[str, Path], bob_address: str, port: int
) -> FuzzAlice:
    config = DaemonConfig(
        role="alice",
        schema_path=str(files["schema"]),
        data_path=str(files["alice"]),
        listen=f"127.0.0.1:{port}",
        peer=bob_address,
        tls_dir=str(pki["alice"]),
        out_dir=str(base / "out-alice"),
        timeout_s=HONEST_TIMEOUT_S,
        policy=LocalPolicy.load(str(POLICY_FILE)),
        probe_interval_s=2.0,
    )
    return FuzzAlice(config)


# -- the tally --------------------------------------------------------------------------
@dataclass
class Tally:
    """Everything the fuzz run sent and saw; ``make fuzz`` prints it."""

    messages: Counter = field(default_factory=Counter)  # (rpc, phase) -> mutated messages sent
    statuses: Counter = field(default_factory=Counter)  # (rpc, status or abort code) -> count
    findings: list[str] = field(default_factory=list)
    crashes: int = 0
    hangs: int = 0
    slowest_end_s: float = 0.0  # longest time from a hostile frame to bob's job end
    rss_before_mib: float = 0.0
    rss_after_mib: float = 0.0
    rss_peak_mib: float = 0.0  # bob's VmHWM: the kernel's high-water mark, between samples too
    rss_by_test: list[tuple[str, float]] = field(default_factory=list)  # bob's RSS after each test
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, rpc: str, phase: str, count: int = 1) -> None:
        with self.lock:
            self.messages[(rpc, phase)] += count

    def saw(self, rpc: str, status: str) -> None:
        with self.lock:
            self.statuses[(rpc, status)] += 1

    def total(self) -> int:
        return sum(self.messages.values())

    def summary(self) -> list[str]:
        lines = [
            f"fuzz: {self.total():,} mutated messages in {time.monotonic() - self.started:.0f} s"
        ]
        for rpc in sorted({r for r, _ in self.messages}):
            parts = [f"{p} {n:,}" for (r, p), n in sorted(self.messages.items()) if r == rpc]
            lines.append(
                f"  {rpc}: {sum(n for (r, _), n in self.messages.items() if r == rpc):,} ({', '.join(parts)})"
            )
        lines.append("statuses seen:")
        for rpc in sorted({r for r, _ in self.statuses}):
            parts = [f"{s} {n:,}" for (r, s), n in sorted(self.statuses.items()) if r == rpc]
            lines.append(f"  {rpc}: {', '.join(parts)}")
        lines.append(f"crashes {self.crashes}, hangs {self.hangs}, findings {len(self.findings)}")
        lines.append(
            f"slowest job end after a hostile frame: {self.slowest_end_s:.2f} s (peer timeout {PEER_TIMEOUT_S:g} s)"
        )
        lines.append(
            f"bob RSS {self.rss_before_mib:.0f} MiB before, {self.rss_after_mib:.0f} MiB after "
            f"(+{self.rss_after_mib - self.rss_before_mib:.0f}), peak {self.rss_peak_mib:.0f} MiB"
        )
        lines += [f"  after {name}: {rss:.0f} MiB" for name, rss in self.rss_by_test]
        lines += [f"  finding: {f}" for f in self.findings[:20]]
        return lines


TALLY = Tally()


def fuzz_size() -> str:
    """``short`` (make test) or ``long`` (make fuzz: PPBN_FUZZ=long)."""
    size = os.environ.get("PPBN_FUZZ", "short")
    if size not in ("short", "long"):
        raise ValueError(f"PPBN_FUZZ must be short or long, not {size!r}")
    return size


# -- driving the daemon and checking the properties ------------------------------------------
_JOB_NUMBERS = itertools.count(1)


class Finding(AssertionError):
    """A property broke: the daemon crashed, hung, answered unclearly or logged a traceback."""


class Fuzzer:
    """Sends hostile messages to bob and checks after each that bob is still well."""

    def __init__(self, alice: FuzzAlice, bob: BobProcess) -> None:
        self.alice = alice
        self.bob = bob
        self.last_error = ""  # bob's error for the last hostile job
        self.honest_phases: dict[tuple[str, str], list[str]] = {}

    @staticmethod
    def fresh_job_id() -> str:
        """An id no job of this session had, whichever Fuzzer asks (the session's warm-up
        job comes from one of its own): a test run alone must not meet an earlier job's id."""
        return f"fz{os.getpid()}-{next(_JOB_NUMBERS)}"

    def fail(self, message: str, crash: bool = False, hang: bool = False) -> None:
        TALLY.findings.append(message)
        TALLY.crashes += crash
        TALLY.hangs += hang
        raise Finding(message)

    def check_bob(self, what: str) -> None:
        """bob is alive, serving, has logged nothing that shows an unchecked field; sample RSS."""
        if self.bob.process.poll() is not None:
            self.fail(
                f"bob's daemon exited with {self.bob.process.returncode} after {what}", crash=True
            )
        if not self.bob.healthy():
            time.sleep(1.0)  # one retry: the health call itself may have hit the RPC bound
            if not self.bob.healthy():
                self.fail(f"bob stopped answering Health after {what}", crash=True)
        TALLY.rss_peak_mib = max(TALLY.rss_peak_mib, self.bob.peak_rss_mib())
        log = self.bob.new_log().splitlines()
        hits = [i for i, line in enumerate(log) if LOG_FINDINGS.search(line)]
        if hits:
            excerpt = " | ".join(line[:200] for line in log[hits[0] : hits[0] + 20])
            self.fail(f"bob's log after {what}: {excerpt}")

    def check_status(self, rpc: str, code: grpc.StatusCode, details: str, what: str) -> None:
        TALLY.saw(rpc, code.name)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            self.fail(f"{rpc} did not answer within {RPC_TIMEOUT_S:g} s after {what}", hang=True)
        if code not in CLEAR_STATUSES:
            self.fail(f"{rpc} answered {code.name} ({details[:200]}) after {what}")

    # -- unary RPCs ---------------------------------------------------------------------
    def unary(self, rpc: str, request: object, as_peer: bool, peer_runs_jobs: bool = False) -> None:
        """One unary call (a message, or raw bytes) with the operator's or the peer's
        certificate; a StartJob that bob accepts runs a real job only if ``peer_runs_jobs``."""
        what = f"{rpc} {'as peer' if as_peer else 'as operator'} with {describe(request) if isinstance(request, bytes) else repr(str(request)[:200])}"
        if isinstance(request, bytes):
            call = self.bob.raw_unary(rpc, as_peer)
            phase = "raw bytes"
        else:
            stub = self.bob.peer if as_peer else self.bob.operator
            call = getattr(stub, rpc)
            phase = "message"
        TALLY.sent(rpc, f"{phase} as {'peer' if as_peer else 'operator'}")
        self.alice.refuse_jobs = not peer_runs_jobs
        try:
            reply = call(request, timeout=RPC_TIMEOUT_S)
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as exc:
            reply, code, details = None, exc.code(), exc.details() or ""
        finally:
            self.alice.refuse_jobs = False
        self.check_status(rpc, code, details, what)
        if rpc == "StartJob" and reply is not None:
            job_id = (
                reply.job_id if not isinstance(reply, bytes) else JobInfo.FromString(reply).job_id
            )
            self.end_job_at_bob(job_id)
        self.check_bob(what)

    def end_job_at_bob(self, job_id: str) -> None:
        """A fuzzed StartJob that bob accepted started a real job: cancel it, wait for both ends."""
        try:
            self.bob.operator.CancelJob(party_pb2.JobQuery(job_id=job_id), timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            self.check_status(
                "CancelJob", exc.code(), exc.details() or "", f"cancelling job {job_id}"
            )
        wait_for(
            self.bob.idle, PEER_TIMEOUT_S + HANG_MARGIN_S, f"bob to end cancelled job {job_id}"
        )
        self.settle_alice(job_id)

    def settle_alice(self, job_id: str) -> None:
        """End alice's side of a job at once (she is the fuzzer; her timeouts are not under test)."""
        job = self.alice.jobs.get(job_id)
        if job is not None and not job.done.is_set():
            self.alice.controller.cancel(job, "fuzz example over")
            for channel in getattr(job.channel, "channels", {"": job.channel}).values():
                channel.mark_dead("fuzz example over")
        wait_for(lambda: self.alice.running is None, WAIT_S, "alice's job to end")

    # -- job streams ----------------------------------------------------------------------
    def first_frames(self, items: list[object], phase: str) -> None:
        """Open a job stream at bob whose first message(s) are ``items``; read every answer."""
        what = f"a job stream opened with {describe(items)}"
        TALLY.sent("Exchange", phase, 1)
        call = self.bob.raw_exchange()
        try:
            answers = list(call(iter(items), timeout=RPC_TIMEOUT_S))
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as exc:
            answers, code, details = [], exc.code(), exc.details() or ""
        self.check_status("Exchange", code, details, what)
        for answer in answers:
            if answer.kind == Frame.ABORT:
                TALLY.saw(
                    "Exchange",
                    f"ABORT {AbortCode.Name(answer.code) if answer.code in AbortCode.values() else answer.code}",
                )
                if answer.code == AbortCode.INTERNAL:
                    self.fail(f"bob aborted with INTERNAL after {what}")
        started = time.monotonic()
        if not wait_for_quietly(self.bob.idle, PEER_TIMEOUT_S + HANG_MARGIN_S):
            self.fail(
                f"bob still runs a job {PEER_TIMEOUT_S + HANG_MARGIN_S:g} s after {what}", hang=True
            )
        TALLY.slowest_end_s = max(TALLY.slowest_end_s, time.monotonic() - started)
        self.check_bob(what)

    def honest_opening(self, job_id: str, kind: str = "ping") -> Frame:
        """The OPEN frame alice would send for an honest job of ``kind``."""
        return Frame(
            kind=Frame.OPEN,
            job_id=job_id,
            hello=self.alice.hello,
            initiator="fuzz",
            job=party_pb2.JobRequest(
                kind=kind, params_json=json.dumps(HONEST_PARAMS[kind]), job_id=job_id
            ),
            nonce=os.urandom(16),
        )

    def hostile_job(
        self,
        kind: str,
        params: dict,
        opener: str,
        k: int,
        mutation: Mutation,
        alice_timeout_s: float = HOSTILE_TIMEOUT_S,
    ) -> bool:
        """Run an honest job whose stream from alice has frame k mutated; False if it had no
        frame k (or alice gave up waiting for bob before it, after ``alice_timeout_s``).

        Checks: bob's job ends within the peer timeout (plus margin) after the hostile
        frame, not with an internal error, and bob still serves with a clean log.
        """
        plan = Plan(k, mutation, raw_ok=opener == "alice", alice_timeout_s=alice_timeout_s)
        self.alice.plan = plan
        job_id = self.fresh_job_id()
        what = f"{kind} job opened by {opener}, frame {k} mutated by {mutation}"
        if opener == "alice":
            with contextlib.suppress(UserError):  # bob refused the (mutated) opening: checked below
                self.alice.controller.start(kind, json.dumps(params), job_id, "fuzz")
        else:
            try:
                self.bob.operator.StartJob(
                    party_pb2.JobRequest(kind=kind, params_json=json.dumps(params), job_id=job_id),
                    timeout=RPC_TIMEOUT_S,
                )
            except grpc.RpcError as exc:
                self.check_status("StartJob", exc.code(), exc.details() or "", what)
        self.alice.plan = None
        alice_job = self.alice.jobs.get(job_id)
        if alice_job is not None:  # none: the job never started, no frame will be mutated
            wait_for_quietly(lambda: plan.applied or alice_job.done.is_set(), 120)
        if not plan.applied:
            self.settle_alice(job_id)
            wait_for(self.bob.idle, PEER_TIMEOUT_S + HANG_MARGIN_S, "bob to end an unmutated job")
            self.check_bob(f"{kind} job opened by {opener} (shorter than {k + 1} frames)")
            return False
        TALLY.sent("Exchange", f"{kind}, {opener} opens: {plan.phase}")
        limit = plan.sent_at + PEER_TIMEOUT_S + HANG_MARGIN_S
        if not wait_for_quietly(self.bob.idle, limit - time.monotonic()):
            self.fail(
                f"bob still runs the job {PEER_TIMEOUT_S + HANG_MARGIN_S:g} s after {what}",
                hang=True,
            )
        TALLY.slowest_end_s = max(TALLY.slowest_end_s, time.monotonic() - plan.sent_at)
        try:
            info = self.bob.operator.JobStatus(
                party_pb2.JobQuery(job_id=job_id), timeout=RPC_TIMEOUT_S
            )
            state, error = JobInfo.State.Name(info.state), info.error
        except grpc.RpcError as exc:
            state, error = exc.code().name, ""
        self.last_error = error
        abort = alice_job.channel.peer_abort_code if alice_job is not None else 0
        TALLY.saw("Exchange", f"{state}" + (f" + ABORT {AbortCode.Name(abort)}" if abort else ""))
        if "internal error" in error or abort == AbortCode.INTERNAL:
            time.sleep(0.5)  # bob logs the traceback as the job ends
            trace = " | ".join(
                line[:200]
                for line in self.bob.new_log().splitlines()
                if line.startswith(("  ", "Traceback"))
            )
            self.fail(
                f"bob's job failed with an internal error after {what}: {error[:300]} | {trace[-1500:]}"
            )
        self.settle_alice(job_id)
        self.check_bob(what)
        return True

    def record_honest_phases(self, kind: str, params: dict, opener: str) -> list[str]:
        """The phase of every frame alice sends in an honest job (a real run, recorded)."""
        key = (kind, opener)
        if key not in self.honest_phases:
            plan = Plan(10**9, Mutation("drop"))
            self.alice.plan = plan
            job_id = self.fresh_job_id()
            if opener == "alice":
                job = self.alice.controller.start(
                    kind, json.dumps(params), job_id, "fuzz: honest run"
                )
                assert job.done.wait(WAIT_S) and job.state == JobInfo.SUCCEEDED, job.error
            else:
                self.bob.operator.StartJob(
                    party_pb2.JobRequest(kind=kind, params_json=json.dumps(params), job_id=job_id),
                    timeout=RPC_TIMEOUT_S,
                )
                wait_for(
                    lambda: self.alice.jobs.get(job_id) and self.alice.jobs[job_id].done.is_set(),
                    WAIT_S,
                    "honest job",
                )
                assert self.alice.jobs[job_id].state == JobInfo.SUCCEEDED, self.alice.jobs[
                    job_id
                ].error
            wait_for(self.bob.idle, WAIT_S, "bob to finish the honest job")
            self.honest_phases[key] = list(plan.tags)
        return self.honest_phases[key]


def wait_for_quietly(predicate: Callable[[], object], timeout_s: float) -> bool:
    """Like ``wait_for`` but answers False instead of failing."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
