"""Two daemons as local processes on loopback ports, for ``ppbn simulate`` and benchmarks.

Each daemon is a separate ``python -m ppbn.cli party serve`` process in its own process
group, with mutual TLS and its own log file. ``LocalPair`` is a context manager: however
the body ends (success, error, Ctrl-C, SIGTERM), both process groups are sent SIGTERM,
then SIGKILL if they have not exited within a few seconds, so no daemon or worker
process outlives the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ppbn.errors import UserError
from ppbn.parties.client import DaemonClient

STARTUP_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
ROLES = ("alice", "bob")


def free_port() -> int:
    """A currently free loopback TCP port (the daemon binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class PairFiles:
    schema: Path
    data: dict[str, Path]  # role -> CSV
    tls_dir: Path
    work_dir: Path


class LocalPair:
    """Start alice's and bob's daemons; ``client(role)`` talks to one as the operator."""

    def __init__(self, files: PairFiles, timeout_s: float) -> None:
        self.files = files
        self.timeout_s = timeout_s
        self.ports = {role: free_port() for role in ROLES}
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs = {role: files.work_dir / f"{role}.log" for role in ROLES}

    def out_dir(self, role: str) -> Path:
        return self.files.work_dir / f"out-{role}"

    def address(self, role: str) -> str:
        return f"127.0.0.1:{self.ports[role]}"

    def _command(self, role: str) -> list[str]:
        peer = "bob" if role == "alice" else "alice"
        return [
            sys.executable, "-m", "ppbn.cli", "party", "serve", "--role", role,
            "--schema", str(self.files.schema), "--data", str(self.files.data[role]),
            "--listen", self.address(role), "--peer", self.address(peer),
            "--tls-dir", str(self.files.tls_dir), "--out", str(self.out_dir(role)),
            "--timeout", f"{self.timeout_s:g}",
        ]  # fmt: skip

    def __enter__(self) -> LocalPair:
        try:
            for role in ROLES:
                with open(self.logs[role], "wb") as log:
                    self.processes[role] = subprocess.Popen(
                        self._command(role), stdout=log, stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL, start_new_session=True,
                    )  # fmt: skip
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for role in ROLES:
            with self.client(role) as client:
                while True:
                    self._check_alive()
                    try:
                        client.wait_ready(min(1.0, max(deadline - time.monotonic(), 0.1)))
                        break
                    except UserError as exc:
                        if time.monotonic() > deadline:
                            raise UserError(f"{role}'s daemon not ready: {exc} (log: {self.logs[role]})") from None

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
        return DaemonClient(self.address(role), str(self.files.tls_dir), "operator")

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


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
