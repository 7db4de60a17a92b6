"""Two `ppbn party serve` processes over mutual TLS, with the faults the fault matrix
injects: SIGKILL, SIGSTOP/SIGCONT, SIGTERM and a cut link. Over loopback (the default) the
link is a TCP relay that drops its connections; over two network namespaces joined by a
veth pair (netns_util.VethNamespaces, `DaemonPair.over_namespaces`) it is the veth end
set down. Used by test_faults.py and test_faults_netns.py; the matrix case itself is
`run_matrix_case`."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from known_files import TEST_POLICY as KNOWN_POLICY
from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until

from ppbn.data.datasets import make_dataset
from ppbn.errors import UserError
from ppbn.pair.loopback import free_port
from ppbn.parties.client import DaemonClient
from ppbn.parties.pki import LOCAL_HOSTS, make_local_pki

REPO = Path(__file__).resolve().parents[1]
TEST_POLICY = KNOWN_POLICY
ROLES = ("alice", "bob")


Connect = Callable[[tuple[str, int], float], socket.socket]


class Relay:
    """A TCP relay listening on loopback to ``target``, whose upstream connections are
    made by ``connect`` (default: here; netns_util makes them inside a namespace).
    ``drop()`` closes every connection it carries (as a failing link would) and keeps
    accepting new ones."""

    def __init__(self, target: tuple[str, int], connect: Connect | None = None) -> None:
        self.target = target
        self.connect: Connect = connect or socket.create_connection
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
                upstream = self.connect(self.target, 5)
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


class RelayLink:
    """The loopback link: alice dials bob through a Relay; cutting it drops the connections
    (the relay keeps accepting, so a redial goes through at once)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def cut(self) -> None:
        assert self.relay.drop() > 0, "the relay carried no connection to drop"

    def restore(self) -> None:
        pass


class DaemonPair:
    """alice and bob as `ppbn party serve` processes.

    Defaults: both listen on loopback and alice reaches bob through a Relay (the link the
    drop fault cuts). Generalised for the network-namespace variant: ``hosts`` (each
    role's listen address), ``prefix`` (each role's command prefix, e.g. `ip netns exec
    NS`), ``connect`` (per role, how to open a TCP connection to its listen address: the
    operator then reaches it through a loopback relay made with that) and ``link`` (an
    object with cut()/restore(); given, alice dials bob directly).
    """

    def __init__(
        self,
        base: Path,
        network: str = "asia",
        records: int = 400,
        peer_timeout: float = PEER_TIMEOUT_S,
        *,
        hosts: dict[str, str] | None = None,
        prefix: dict[str, list[str]] | None = None,
        connect: dict[str, Connect] | None = None,
        link: Any = None,
    ) -> None:
        self.base = Path(base)
        self.peer_timeout = peer_timeout
        self.data = self.base / "data"
        make_dataset(network, records, 7, self.data)
        self.hosts = hosts or dict.fromkeys(ROLES, "127.0.0.1")
        self.prefix = prefix or {r: [] for r in ROLES}
        extra = [h for h in self.hosts.values() if h not in LOCAL_HOSTS]
        self.pki = make_local_pki(self.base / "pki", ROLES, (*LOCAL_HOSTS, *dict.fromkeys(extra)))
        self.ports = {r: free_port() for r in ROLES}
        self.control = {
            r: Relay((self.hosts[r], self.ports[r]), c) for r, c in (connect or {}).items()
        }
        self.relay: Relay | None = None
        if link is None:
            self.relay = Relay((self.hosts["bob"], self.ports["bob"]))
            link = RelayLink(self.relay)
        self.link = link
        self.out = {r: self.base / f"out-{r}" for r in ROLES}
        self.processes: dict[str, subprocess.Popen] = {}

    @classmethod
    def over_namespaces(
        cls,
        base: Path,
        net: Any,
        network: str = "asia",
        records: int = 400,
        peer_timeout: float = PEER_TIMEOUT_S,
    ) -> DaemonPair:
        """alice in ``net``'s namespace a, bob in b, talking over the veth pair; the test
        process (in the root namespace) reaches each daemon through a loopback relay whose
        upstream sockets are made inside that daemon's namespace."""
        side = {"alice": "a", "bob": "b"}
        return cls(
            base,
            network,
            records,
            peer_timeout,
            hosts={r: net.address[side[r]] for r in ROLES},
            prefix={r: net.exec_prefix(side[r]) for r in ROLES},
            connect={r: functools.partial(net.connect, side[r]) for r in ROLES},
            link=net,
        )

    def listen_address(self, role: str) -> str:
        return f"{self.hosts[role]}:{self.ports[role]}"

    def address(self, role: str) -> str:
        """Where the test process (an operator) reaches ``role``'s daemon."""
        if role in self.control:
            return f"127.0.0.1:{self.control[role].port}"
        return self.listen_address(role)

    def spawn(self, role: str) -> None:
        if role == "alice":
            peer = f"127.0.0.1:{self.relay.port}" if self.relay else self.listen_address("bob")
        else:
            peer = self.listen_address("alice")
        command = [
            *self.prefix[role],
            sys.executable,
            "-m",
            "ppbn.cli",
            "party",
            "serve",
            "--role",
            role,
            "--schema",
            str(self.data / "schema.json"),
            "--data",
            str(self.data / f"{role}.csv"),
            "--listen",
            self.listen_address(role),
            "--peer",
            peer,
            "--tls-dir",
            str(self.pki[role]),
            "--out",
            str(self.out[role]),
            "--policy",
            str(TEST_POLICY),
            "--peer-timeout",
            str(self.peer_timeout),
        ]
        log = open(self.base / f"{role}.log", "ab")  # noqa: SIM115 - closed with the process
        self.processes[role] = subprocess.Popen(
            command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()

    def client(self, role: str) -> DaemonClient:
        return DaemonClient(self.address(role), str(self.pki[role]), "operator")

    def wait_ready(self, timeout_s: float = WAIT_S) -> None:
        for role in ROLES:
            with self.client(role) as client:
                client.wait_ready(timeout_s)

    def __enter__(self) -> DaemonPair:
        try:
            for role in ROLES:
                self.spawn(role)
            self.wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for role in list(self.processes):
            self.terminate(role)
        for relay in (self.relay, *self.control.values()):
            if relay is not None:
                relay.close()

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
        self.link.restore()
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
        return {
            "job_id": job_id,
            "state": outcome.state,
            "error": outcome.error,
            "result": outcome.result,
        }

    def status(self, role: str, job_id: str):
        with self.client(role) as client:
            return client.status(job_id)

    def uninterrupted_network(self, params: dict[str, Any]) -> dict[str, Any]:
        """network.json of a learn job run to the end on these daemons: what a resume must equal."""
        outcome = self.run_learn(params)
        assert outcome["state"] == "SUCCEEDED", outcome
        return json.loads((self.out["alice"] / outcome["job_id"] / "network.json").read_text())

    def run_learn(self, params: dict[str, Any], timeout_s: float = 300) -> dict[str, Any]:
        return self.wait("alice", self.start_learn(params), timeout_s)

    def run_job(
        self, kind: str, params: dict[str, Any], timeout_s: float = WAIT_S
    ) -> dict[str, Any]:
        with self.client("alice") as client:
            job_id = client.start(kind, params)
            outcome = client.wait(job_id, timeout_s)
        return {"job_id": job_id, "state": outcome.state, "error": outcome.error}

    def cli_learn(self, role: str, args: list[str], timeout_s: float = 300) -> tuple[int, str, str]:
        command = [
            sys.executable,
            "-m",
            "ppbn.cli",
            "learn",
            "--peer",
            self.address(role),
            "--tls-dir",
            str(self.pki[role]),
            *args,
        ]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
        return done.returncode, done.stdout, done.stderr

    def log(self, role: str) -> str:
        return (self.base / f"{role}.log").read_text(errors="replace")

    def result_file(self, role: str, job_id: str) -> dict[str, Any]:
        return json.loads((self.out[role] / job_id / "result.json").read_text())


# -- the matrix case, shared by the loopback and the network-namespace variants -----------
PHASES = ("handshake", "tables", "ln terms", "argmax", "parameters")
FAULTS = ("kill", "stop", "drop")


def phase_seen(pair: DaemonPair, job_id: str, phase: str) -> bool:
    return f"job {job_id}: phase {phase}" in pair.log("bob")


def resume_equals(pair: DaemonPair, job_id: str, expected: dict) -> None:
    """`ppbn learn --resume` at alice succeeds and both parties' networks equal ``expected``."""
    code, out, err = pair.cli_learn("alice", ["--resume", job_id, "--format", "json"])
    assert code == 0, err
    assert json.loads(out)["state"] == "SUCCEEDED"
    for role in ROLES:
        got = json.loads((pair.out[role] / job_id / "network.json").read_text())
        assert got["edges"] == expected["edges"]
        for v, entry in expected["parameters"].items():
            np.testing.assert_allclose(got["parameters"][v]["table"], entry["table"], atol=1e-9)


def inject(pair: DaemonPair, fault: str) -> None:
    if fault == "kill":
        pair.kill("bob")
    elif fault == "stop":
        pair.pause("bob")
    else:
        pair.link.cut()


def recover(pair: DaemonPair, fault: str, bound_s: float) -> None:
    """Bring bob back (restart, SIGCONT, or the link restored) and wait until neither
    daemon runs a job."""
    if fault == "kill":
        pair.restart("bob")
    elif fault == "stop":
        pair.resume_process("bob")
    else:
        pair.link.restore()
    for role in ROLES:
        with pair.client(role) as client:
            wait_until(
                lambda c=client: c.health().running_job == "",
                3 * bound_s,
                f"{role} to free its job slot",
            )
    pair.wait_ready()


def run_matrix_case(
    pair: DaemonPair,
    reference: dict,
    params: dict,
    phase: str,
    fault: str,
    *,
    bound_s: float,
    hold_s: float = 0.0,
    drop_redials: bool = True,
) -> dict[str, Any]:
    """One cell of the fault matrix: bob meets ``fault`` in ``phase`` of alice's learn job;
    alice must report within ``bound_s`` naming the peer (and the phase), the job slots
    are freed, an honest job then runs to the end, and a job that names `--resume` resumes
    to ``reference``. ``hold_s``: a stop or cut lasts at least this long (from injection)
    before it is undone. ``drop_redials``: a cut link at handshake is redialled at once
    (the loopback relay), so that cell checks only that the honest job runs.
    Returns {"state", "error", "elapsed"} for the caller's figures."""
    if phase == "handshake":
        inject(pair, fault)
        injected = time.monotonic()
        try:
            job_id = pair.start_learn(params)
        except UserError as exc:  # refused before the job started: one line naming the peer
            outcome = {"state": "NOT STARTED", "error": str(exc)}
        else:
            outcome = pair.wait("alice", job_id, 3 * bound_s)
    else:
        job_id = pair.start_learn(params)
        wait_until(lambda: phase_seen(pair, job_id, phase), what=f"bob to enter phase {phase}")
        inject(pair, fault)
        injected = time.monotonic()
        outcome = pair.wait("alice", job_id, 3 * bound_s)
    elapsed = time.monotonic() - injected
    print(f"{phase} / {fault}: {outcome['state']} after {elapsed:.1f} s: {outcome['error']}")
    if not (phase == "handshake" and fault == "drop" and drop_redials):
        assert outcome["state"] in ("FAILED", "NOT STARTED"), outcome
        assert elapsed <= bound_s, f"reported after {elapsed:.1f} s: {outcome['error']}"
        assert "peer bob" in outcome["error"], outcome["error"]
        assert "\n" not in outcome["error"]
    if outcome["state"] == "FAILED":
        assert "both daemons are up" in outcome["error"], outcome["error"]
        if phase != "handshake":
            assert "(phase: " in outcome["error"], outcome["error"]
        assert not (pair.out["alice"] / job_id / "network.json").exists()
        assert pair.result_file("alice", job_id)["state"] == "FAILED"
    if fault != "kill":
        time.sleep(max(0.0, injected + hold_s - time.monotonic()))
    recover(pair, fault, bound_s)
    honest = pair.run_job("ping", {"rounds": 3})
    assert honest["state"] == "SUCCEEDED", honest
    if "--resume" in outcome["error"]:
        resume_equals(pair, job_id, reference)
    return {"state": outcome["state"], "error": outcome["error"], "elapsed": elapsed}
