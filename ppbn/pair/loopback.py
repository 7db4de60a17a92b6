"""Two daemons (or three, with the PRAM data miner) as local processes on loopback ports,
for ``ppbn simulate``, ``ppbn compare`` and benchmarks.

Each daemon is a separate ``python -m ppbn.cli party serve`` process in its own process
group, with mutual TLS (its own TLS folder ``tls_dir/ROLE`` as ``make_local_pki`` lays
it out) and its own log file. ``LocalPair`` is a context manager: however
the body ends (success, error, Ctrl-C, SIGTERM), both process groups are sent SIGTERM,
then SIGKILL if they have not exited within a few seconds, so no daemon or worker
process outlives the run. With ``miner=True`` a third daemon, the miner, runs too and
alice and bob accept its jobs. Every daemon gets the same local policy file (the
built-in default unless the caller passes one: whoever runs the harness is both parties,
so it is their policy to choose) and, for repeatable PRAM runs only, the local
``--insecure-fixed-seed-for-testing`` flag.

With ``link`` (a ``shaper.LinkSpec``, from ``--link`` of the benchmarks) each party's
``--peer`` is a shaping relay of ``ppbn.pair.shaper`` in this process instead of the
other daemon's port, so every connection either daemon opens to the other crosses the
modelled link; the daemons themselves are unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy
from ppbn.jobs.progress import JobProgress
from ppbn.pair.shaper import Link, LinkSpec
from ppbn.parties.budget import STATE_ENV
from ppbn.parties.client import DaemonClient, JobOutcome, UnknownJob
from ppbn.parties.tls import OPERATOR

STARTUP_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
ROLES = ("alice", "bob")
MINER = "miner"


LISTEN_PORTS = (20000, 32768)  # below Linux's ephemeral range: no outgoing connection takes one
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A currently free loopback TCP port (the daemon binds it a moment later).

    Why not the kernel's port 0: it hands out ports of the ephemeral range, which the
    host's outgoing connections take as well, so on a busy host (another pair's gRPC
    dialling) the port could be gone before the daemon binds it. A random port below that
    range is taken by nothing but a listener; one found busy is skipped."""
    low, high = LISTEN_PORTS
    with contextlib.suppress(OSError, ValueError):
        high = min(high, int(EPHEMERAL_RANGE.read_text().split()[0]))
    generator = random.SystemRandom()
    for _ in range(64 if high - low >= 1000 else 0):  # a host whose ephemeral range starts low
        port = generator.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class PairFiles:
    schema: Path
    data: dict[str, Path]  # role -> CSV
    tls_dir: Path  # the root written by make_local_pki: one TLS folder per role under it
    work_dir: Path


class LocalPair:
    """Start alice's and bob's daemons (and the miner's); ``client(role)`` talks to one as
    that party's operator."""

    def __init__(
        self,
        files: PairFiles,
        timeout_s: float,
        miner: bool = False,
        policy: LocalPolicy | None = None,
        fixed_seed_for_testing: str | None = None,
        missing_rule: str = "error",
        align: str = "strict",
        link: LinkSpec | None = None,
    ) -> None:
        if link is not None and miner:
            raise UserError(
                "--link models the link between alice and bob; it does not run with the miner"
            )
        self.files = files
        self.link_spec = link
        self.link: Link | None = None  # the relays, while the pair runs
        self._via: dict[str, str] = {}  # role -> the relay address it dials its peer at
        self.missing_rule = missing_rule  # `--missing` of both parties' daemons
        self.align = align  # `--align` of both parties' daemons
        self.timeout_s = timeout_s
        self.policy = policy
        self.fixed_seed_for_testing = fixed_seed_for_testing
        self.roles = (*ROLES, MINER) if miner else ROLES
        self.ports = {role: free_port() for role in self.roles}
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs = {role: files.work_dir / f"{role}.log" for role in self.roles}

    def out_dir(self, role: str) -> Path:
        return self.files.work_dir / f"out-{role}"

    def address(self, role: str) -> str:
        return f"127.0.0.1:{self.ports[role]}"

    def peer_address(self, role: str, peer: str) -> str:
        """Where ``role`` dials ``peer``: the peer's port, or the link's relay."""
        via = self._via.get(role) if peer != MINER else None
        return via or self.address(peer)

    def _command(self, role: str) -> list[str]:
        if role == MINER:
            peers = ["--alice", self.address("alice"), "--bob", self.address("bob")]
        else:
            peer = "bob" if role == "alice" else "alice"
            peers = [
                "--data",
                str(self.files.data[role]),
                "--peer",
                self.peer_address(role, peer),
                "--missing",
                self.missing_rule,
            ]
            peers += ["--align", self.align]
            if MINER in self.roles:
                peers += ["--miner", self.address(MINER)]
        return [
            sys.executable,
            "-P",  # not the working folder first on sys.path: a ./ppbn there is not this package
            "-m",
            "ppbn.cli",
            "party",
            "serve",
            "--role",
            role,
            "--schema",
            str(self.files.schema),
            *peers,
            "--listen",
            self.address(role),
            "--tls-dir",
            str(self.files.tls_dir / role),
            "--out",
            str(self.out_dir(role)),
            "--peer-timeout",
            f"{self.timeout_s:g}",
            *(["--policy", str(self._policy_file)] if self.policy is not None else []),
            *(
                ["--insecure-fixed-seed-for-testing", self.fixed_seed_for_testing]
                if self.fixed_seed_for_testing is not None
                else []
            ),
        ]

    @property
    def _policy_file(self) -> Path:
        return self.files.work_dir / "policy.toml"

    def __enter__(self) -> LocalPair:
        if self.policy is not None:
            self._policy_file.write_text(self.policy.to_toml(), encoding="utf-8")
        try:
            if self.link_spec is not None:
                self.link = Link(self.link_spec, ROLES)
                for role, peer in zip(ROLES, reversed(ROLES), strict=True):
                    host, port = self.link.relay(role, "127.0.0.1", self.ports[peer])
                    self._via[role] = f"{host}:{port}"
            for role in self.roles:
                self._spawn(role, "wb")
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state_dir(self, role: str) -> Path:
        """The state folder of ``role``'s daemon (its privacy budgets): the pair's own, as if
        each party were on a host of its own."""
        return self.files.work_dir / f"state-{role}"

    def _spawn(self, role: str, log_mode: str) -> None:
        env = {**os.environ, STATE_ENV: str(self.state_dir(role))}
        with open(self.logs[role], log_mode) as log:
            self.processes[role] = subprocess.Popen(
                self._command(role),
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def kill(self, role: str) -> None:
        """SIGKILL ``role``'s daemon and its workers, as a crash or the OOM killer would."""
        process = self.processes[role]
        _signal_group(process, signal.SIGKILL)
        process.wait(STOP_GRACE_S)

    def restart(self, role: str) -> None:
        """Start ``role``'s daemon again (same command, log appended) and wait until it is up."""
        self._spawn(role, "ab")
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for role in self.roles:
            with self.client(role) as client:
                while True:
                    self._check_alive()
                    try:
                        client.wait_ready(min(1.0, max(deadline - time.monotonic(), 0.1)))
                        break
                    except UserError as exc:
                        if time.monotonic() > deadline:
                            raise UserError(
                                f"{role}'s daemon not ready: {exc} (log: {self.logs[role]})"
                            ) from None

    def _check_alive(self) -> None:
        for role, process in self.processes.items():
            code = process.poll()
            if code is not None:
                raise UserError(f"{role}'s daemon exited with code {code}: {self.log_tail(role)}")

    def log_tail(self, role: str, lines: int = 1) -> str:
        try:
            text = self.logs[role].read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return "(no log)"
        return " | ".join(text[-lines:]) if text else "(empty log)"

    def client(self, role: str) -> DaemonClient:
        return DaemonClient(self.address(role), str(self.files.tls_dir / role), OPERATOR)

    def run_job(
        self,
        start_role: str,
        kind: str,
        params: dict,
        on_progress: Callable[[JobProgress], None] | None = None,
    ) -> tuple[str, dict[str, JobOutcome]]:
        """Start a job at ``start_role``'s daemon, wait for it there, then collect every
        other daemon's view of the same job; returns (job id, {role: outcome}).

        A daemon that never took part in the job (it answers NOT_FOUND) is left out.
        """
        with self.client(start_role) as client:
            job_id = client.start(kind, params)
            outcomes = {start_role: client.wait(job_id, None, on_progress)}
        for role in self.roles:
            if role == start_role:
                continue
            with self.client(role) as client, contextlib.suppress(UnknownJob):
                outcomes[role] = client.wait(job_id, self.timeout_s + STOP_GRACE_S)
        return job_id, outcomes

    def with_peer_figures(self, outcome: JobOutcome, start_role: str = "alice") -> JobOutcome:
        """The outcome with the other party's own figures in place of the mirrored ones.

        Daemons never send each other their figures (SECURITY.md); whoever runs the harness
        is the operator of both, so it asks the other daemon directly.
        """
        other = "bob" if start_role == "alice" else "alice"
        with self.client(other) as client:
            theirs = client.wait(outcome.job_id, self.timeout_s + STOP_GRACE_S)
        return dataclasses.replace(outcome, peer_stats=theirs.stats)

    def stop(self) -> None:
        """SIGTERM both process groups, then SIGKILL what is still alive after the grace time."""
        for process in self.processes.values():
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(deadline - time.monotonic(), 0.1))
            _signal_group(process, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_GRACE_S)
        if self.link is not None:
            self.link.close()


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
