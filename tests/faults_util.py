"""Two `ppbn party serve` processes over loopback mutual TLS, with the faults the fault
matrix injects: SIGKILL, SIGSTOP/SIGCONT, SIGTERM and a TCP relay that drops its
connections. Used by test_faults.py and test_resume.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ppbn.parties.client import DaemonClient
from ppbn.parties.datasets import make_dataset
from ppbn.parties.tls import make_local_pki

REPO = Path(__file__).resolve().parents[1]
TEST_POLICY = REPO / "tests" / "data" / "test-policy.toml"
ROLES = ("alice", "bob")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout_s: float, what: str):
    """Poll ``predicate`` every 50 ms; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


class Relay:
    """A TCP relay on loopback: alice dials bob through it; ``drop()`` closes every
    connection it carries (as a failing link would) and keeps accepting new ones."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def drop(self) -> int:
        """Close every carried connection; returns how many sockets were closed."""
        with self.lock:
            victims, self.sockets = self.sockets, []
        for s in victims:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        return len(victims)

    def close(self) -> None:
        self.closed = True
        self.server.close()
        self.drop()


class DaemonPair:
    """alice and bob as `ppbn party serve` processes; alice reaches bob through a relay."""

    def __init__(self, base: Path, network: str = "asia", records: int = 400, peer_timeout: float = 5.0) -> None:
        self.base = Path(base)
        self.peer_timeout = peer_timeout
        self.data = self.base / "data"
        make_dataset(network, records, 7, self.data)
        self.pki = make_local_pki(self.base / "pki", ROLES)
        self.ports = {r: free_port() for r in ROLES}
        self.relay = Relay(self.ports["bob"])
        self.out = {r: self.base / f"out-{r}" for r in ROLES}
        self.processes: dict[str, subprocess.Popen] = {}

    def address(self, role: str) -> str:
        return f"127.0.0.1:{self.ports[role]}"

    def spawn(self, role: str) -> None:
        peer = f"127.0.0.1:{self.relay.port}" if role == "alice" else self.address("alice")
        command = [
            sys.executable, "-m", "ppbn.cli", "party", "serve", "--role", role,
            "--schema", str(self.data / "schema.json"), "--data", str(self.data / f"{role}.csv"),
            "--listen", self.address(role), "--peer", peer, "--tls-dir", str(self.pki[role]),
            "--out", str(self.out[role]), "--policy", str(TEST_POLICY),
            "--peer-timeout", str(self.peer_timeout),
        ]  # fmt: skip
        log = open(self.base / f"{role}.log", "ab")  # noqa: SIM115 - closed with the process
        self.processes[role] = subprocess.Popen(
            command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()

    def client(self, role: str) -> DaemonClient:
        return DaemonClient(self.address(role), str(self.pki[role]), "operator")

    def wait_ready(self, timeout_s: float = 60) -> None:
        for role in ROLES:
            with self.client(role) as client:
                client.wait_ready(timeout_s)

    def __enter__(self) -> DaemonPair:
        for role in ROLES:
            self.spawn(role)
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        for role in list(self.processes):
            self.terminate(role)
        self.relay.close()

    # -- faults -----------------------------------------------------------------------
    def kill(self, role: str) -> None:
        process = self.processes[role]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)

    def pause(self, role: str) -> None:
        os.killpg(self.processes[role].pid, signal.SIGSTOP)

    def resume_process(self, role: str) -> None:
        os.killpg(self.processes[role].pid, signal.SIGCONT)

    def terminate(self, role: str, timeout_s: float = 20) -> int | None:
        """SIGTERM (after SIGCONT, in case it was stopped); SIGKILL if it does not exit."""
        process = self.processes[role]
        if process.poll() is not None:
            return process.returncode
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill(role)
            return None

    def ensure_running(self) -> None:
        """Undo a fault a failed test may have left: SIGCONT, respawn the dead, wait."""
        for role, process in self.processes.items():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGCONT)
            else:
                self.spawn(role)
        self.wait_ready()

    def restart(self, role: str) -> None:
        if self.processes[role].poll() is None:
            self.kill(role)
        self.spawn(role)
        self.wait_ready()

    # -- jobs ---------------------------------------------------------------------------
    def start_learn(self, params: dict[str, Any], role: str = "alice") -> str:
        with self.client(role) as client:
            return client.start("learn", params)

    def wait(self, role: str, job_id: str, timeout_s: float) -> dict[str, Any]:
        with self.client(role) as client:
            outcome = client.wait(job_id, timeout_s)
        return {"job_id": job_id, "state": outcome.state, "error": outcome.error, "result": outcome.result}

    def status(self, role: str, job_id: str):
        with self.client(role) as client:
            return client.status(job_id)

    def run_learn(self, params: dict[str, Any], timeout_s: float = 300) -> dict[str, Any]:
        return self.wait("alice", self.start_learn(params), timeout_s)

    def run_job(self, kind: str, params: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
        with self.client("alice") as client:
            job_id = client.start(kind, params)
            outcome = client.wait(job_id, timeout_s)
        return {"job_id": job_id, "state": outcome.state, "error": outcome.error}

    def cli_learn(self, role: str, args: list[str], timeout_s: float = 300) -> tuple[int, str, str]:
        command = [
            sys.executable, "-m", "ppbn.cli", "learn", "--peer", self.address(role),
            "--tls-dir", str(self.pki[role]), *args,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        return done.returncode, done.stdout, done.stderr

    def log(self, role: str) -> str:
        return (self.base / f"{role}.log").read_text(errors="replace")

    def result_file(self, role: str, job_id: str) -> dict[str, Any]:
        return json.loads((self.out[role] / job_id / "result.json").read_text())
