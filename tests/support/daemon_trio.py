"""alice, bob and the miner as in-process daemons over loopback mutual TLS, for the tests of
the jobs with a miner (the PRAM path, the perturbation learners)."""

from __future__ import annotations

from pathlib import Path

from timeouts import PEER_TIMEOUT_S, WAIT_S
from waiting import wait_until

from ppbn.jobs.policy import LocalPolicy
from ppbn.pair.loopback import free_port
from ppbn.parties.client import DaemonClient
from ppbn.parties.daemon import DaemonConfig, PartyDaemon


class Trio:
    """Each daemon with its own gRPC server; ``world`` holds data/ (``make_dataset``) and
    certs/ (``make_local_pki``). ``seed`` is every daemon's --insecure-fixed-seed-for-testing."""

    def __init__(self, world: Path, tmp: Path, seed: str) -> None:
        self.world, self.tmp, self.seed = world, tmp, seed
        self.ports = {r: free_port() for r in ("alice", "bob", "miner")}
        self.daemons: dict[str, PartyDaemon] = {}

    def address(self, role: str) -> str:
        return f"127.0.0.1:{self.ports[role]}"

    def start(
        self,
        role: str,
        accept_miner: bool = True,
        as_role: str | None = None,
        policy: LocalPolicy | None = None,
    ) -> PartyDaemon:
        claimed = as_role or role
        if claimed == "miner":
            peer, peers, data = "", {"alice": self.address("alice"), "bob": self.address("bob")}, ""
        else:
            other = "bob" if claimed == "alice" else "alice"
            peer, data = self.address(other), str(self.world / "data" / f"{claimed}.csv")
            peers = {"miner": self.address("miner")} if accept_miner else {}
        daemon = PartyDaemon(
            DaemonConfig(
                role=claimed,
                schema_path=str(self.world / "data" / "schema.json"),
                data_path=data,
                listen=self.address(role),
                peer=peer,
                peers=peers,
                tls_dir=str(self.world / "certs" / claimed),
                out_dir=str(self.tmp / f"out-{role}"),
                timeout_s=PEER_TIMEOUT_S,
                probe_interval_s=0.2,
                fixed_seed_for_testing=self.seed,  # the local test flag: a seed is never a job parameter
                policy=policy or LocalPolicy(),
            )
        )
        daemon.start()
        self.daemons[role] = daemon
        return daemon

    def wait_for_handshakes(self) -> None:
        wait_until(
            lambda: all(d.peer_state == "ok" for d in self.daemons.values()), WAIT_S, "handshakes"
        )

    def client(self, role: str) -> DaemonClient:
        """An operator of the party whose daemon listens on ``role``'s port."""
        return DaemonClient(self.address(role), str(self.world / "certs" / role), "operator")

    def run_job(self, start_role: str, kind: str, params: dict) -> dict[str, Path]:
        """Run a job to success; the job folder of every daemon that took part."""
        with self.client(start_role) as client:
            job_id = client.start(kind, params)
            outcome = client.wait(job_id, timeout_s=WAIT_S)
        assert outcome.state == "SUCCEEDED", outcome.error
        out = {}
        for role, daemon in self.daemons.items():
            if job_id in daemon.jobs:
                wait_until(lambda d=daemon: d.jobs[job_id].done.is_set(), WAIT_S, f"{role}'s job")
                out[role] = self.tmp / f"out-{role}" / job_id
        return out

    def stop(self) -> None:
        for daemon in self.daemons.values():
            daemon.stop(grace_s=0.5)
