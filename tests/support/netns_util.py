"""Two network namespaces joined by a veth pair, for the fault matrix over a real link.
Created per test module with unique names, torn down in every case.

    with VethNamespaces() as net:          # pytest.skip(...) if they cannot be made here
        net.exec_prefix("a")               # ["ip", "netns", "exec", "ppbn-test-PID-N-a"]
        net.address["a"]                   # "10.203.X.1" (side b: "10.203.X.2", a /30)
        net.link_down(); net.link_up()     # side b's veth end, as a cut cable would
        sock = net.connect("a", (host, port), timeout)   # a TCP connection made inside a

Only namespaces this module created are ever touched: teardown kills the processes still
inside them (by pid, from `ip netns pids`) and runs `ip netns del` on each.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

CLONE_NEWNET = 0x40000000
SIDES = ("a", "b")
_counter = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def _has_cap_net_admin() -> bool:
    """CAP_NET_ADMIN in the effective set (root in a container may lack it)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 12))  # CAP_NET_ADMIN = 12
    return os.geteuid() == 0


def unavailable_reason() -> str | None:
    """Why two namespaces cannot be made here (None if they can): checked, not assumed."""
    if shutil.which("ip") is None:
        return "needs the `ip` command (iproute2) to create network namespaces: not on PATH"
    if not _has_cap_net_admin():
        return f"needs CAP_NET_ADMIN to create network namespaces: running as uid {os.geteuid()} without it"
    probe = f"ppbn-probe-{os.getpid()}-{next(_counter)}"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"needs CAP_NET_ADMIN to create network namespaces: `ip netns add` failed: {done.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def sweep_stale() -> list[str]:
    """Delete ``ppbn-test-PID-*`` namespaces whose creating process PID is gone (a test run
    killed with SIGKILL cannot tear down): only names this module makes are touched."""
    swept = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) != 5 or parts[:2] != ["ppbn", "test"] or not parts[2].isdigit():
            continue
        if int(parts[2]) == os.getpid() or os.path.exists(f"/proc/{parts[2]}"):
            continue
        _kill_inside(name)
        _ip("netns", "del", name, check=False)
        swept.append(name)
    return swept


def _kill_inside(name: str) -> None:
    for pid in _ip("netns", "pids", name, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _free_subnet() -> int:
    """A third octet X such that 10.203.X.0/30 is not on any interface of this host."""
    used = _ip("-4", "-o", "addr", "show", check=False).stdout
    for x in itertools.chain(range(os.getpid() % 200 + 20, 250), range(20, 250)):
        if f" 10.203.{x}." not in used:
            return x
    raise RuntimeError("no free 10.203.X.0/30 subnet")


class VethNamespaces:
    """Namespaces ``ppbn-test-PID-N-a`` and ``-b``, a veth pair between them with
    10.203.X.1/30 (a) and 10.203.X.2/30 (b), lo and both ends up."""

    def __init__(self) -> None:
        n = next(_counter)
        stem = f"ppbn-test-{os.getpid()}-{n}"
        self.ns = {side: f"{stem}-{side}" for side in SIDES}
        tag = f"{os.getpid() % 100000}{n % 10}"
        self.dev = {side: f"pv{tag}{side}" for side in SIDES}  # under 15 characters
        self.address: dict[str, str] = {}
        self.created: list[str] = []

    def __enter__(self) -> VethNamespaces:
        reason = unavailable_reason()
        if reason:
            pytest.skip(reason)
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        sweep_stale()
        for side in SIDES:
            _ip("netns", "add", self.ns[side])
            self.created.append(self.ns[side])
        x = _free_subnet()
        self.address = {"a": f"10.203.{x}.1", "b": f"10.203.{x}.2"}
        _ip(
            "link",
            "add",
            self.dev["a"],
            "netns",
            self.ns["a"],
            "type",
            "veth",
            "peer",
            "name",
            self.dev["b"],
            "netns",
            self.ns["b"],
        )
        for side in SIDES:
            _ip(
                "-n",
                self.ns[side],
                "addr",
                "add",
                f"{self.address[side]}/30",
                "dev",
                self.dev[side],
            )
            _ip("-n", self.ns[side], "link", "set", "lo", "up")
            _ip("-n", self.ns[side], "link", "set", self.dev[side], "up")
        self.wait_reachable()

    def wait_reachable(self, timeout_s: float = 10) -> None:
        """Until a answers ARP/ICMP from b (the veth is up both ways)."""
        deadline = time.monotonic() + timeout_s
        while True:
            done = subprocess.run(
                [*self.exec_prefix("b"), "ping", "-c1", "-W1", self.address["a"]],
                capture_output=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
            )
            if done.returncode == 0 or shutil.which("ping") is None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"veth {self.dev['a']}-{self.dev['b']} not passing traffic after {timeout_s:g} s"
                )
            time.sleep(0.2)

    def pids(self, side: str) -> list[str]:
        """The processes inside namespace ``side`` (`ip netns pids`)."""
        return _ip("netns", "pids", self.ns[side], check=False).stdout.split()

    def exec_prefix(self, side: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns[side]]

    def link_down(self) -> None:
        """Side b's end of the veth down: nothing passes either way (as a cut cable)."""
        _ip("-n", self.ns["b"], "link", "set", self.dev["b"], "down")

    def link_up(self) -> None:
        _ip("-n", self.ns["b"], "link", "set", self.dev["b"], "up")

    # the link interface faults_util.DaemonPair expects
    def cut(self) -> None:
        self.link_down()

    def restore(self) -> None:
        self.link_up()
        self.wait_reachable()

    def connect(self, side: str, address: tuple[str, int], timeout: float = 5) -> socket.socket:
        """A TCP connection made inside namespace ``side`` (the socket keeps that namespace
        whichever thread uses it): setns(2) in a short-lived thread of its own."""
        made: dict[str, object] = {}

        def work() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                with open(f"/run/netns/{self.ns[side]}") as handle:
                    if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
                        code = ctypes.get_errno()
                        raise OSError(code, f"setns {self.ns[side]}: {os.strerror(code)}")
                made["socket"] = socket.create_connection(address, timeout=timeout)
            except OSError as exc:
                made["error"] = exc

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(timeout + 5)
        if "socket" in made:
            return made["socket"]  # type: ignore[return-value]
        raise made.get("error") or OSError(errno.ETIMEDOUT, f"connect in {self.ns[side]} timed out")  # type: ignore[misc]

    def close(self) -> None:
        """Kill what still runs inside, delete both namespaces (and so the veth pair)."""
        for name in self.created:
            _kill_inside(name)
        for name in self.created:
            for _ in range(50):
                if _ip("netns", "del", name, check=False).returncode == 0:
                    break
                time.sleep(0.1)
        self.created = []
