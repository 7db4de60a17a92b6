"""How one daemon is set up: ``ppbn party serve``'s flags and its local policy
(``DaemonConfig``), and what the daemon loaded and built from them for its jobs
(``DaemonSetup``)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData
from ppbn.jobs.policy import LocalPolicy
from ppbn.parties.budget import DatasetKey, PrivacyBudget
from ppbn.parties.job_files import JobFiles
from ppbn.parties.metrics import DaemonMetrics
from ppbn.parties.recorder import Recorder
from ppbn.proto import party_pb2
from ppbn.protocols.channel import DEFAULT_TIMEOUT_S


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
    align: str = (
        "strict"  # `--align`: "strict" (same ids) or "psi" (private set intersection per job)
    )
    probe_interval_s: float = 2.0
    peers: dict[str, str] = field(default_factory=dict)
    policy: LocalPolicy = field(default_factory=LocalPolicy)
    fixed_seed_for_testing: str | None = (
        None  # `--insecure-fixed-seed-for-testing`: PRAM tests only
    )
    audit_log: str | None = None  # `--audit-log`; default out_dir/audit.log
    metrics_port: int | None = None  # `--metrics-port`: None = no metrics endpoint, 0 = a free port
    metrics_host: str = "127.0.0.1"
    # where this host keeps the privacy budgets (None: $PPBN_STATE_DIR or the user's state
    # folder, ``ppbn.parties.budget.budget_folder``); not a flag: no flag starts a new account
    state_dir: str | None = None

    @property
    def frame_bytes(self) -> int:
        """Largest gRPC message this daemon sends or accepts (the policy's max_message_mb)."""
        return self.policy.max_message_mb * 1024 * 1024


@dataclass(frozen=True)
class DaemonSetup:
    """A daemon's configuration and what it loaded and built from it, handed as one object
    to the parts that admit, run and record its jobs and to its gRPC service (each reads
    what it needs; none of them builds or replaces any of it)."""

    config: DaemonConfig
    schema: Schema
    data: PartyData
    hello: party_pb2.Hello  # what this daemon says of itself to its peers
    peer_addresses: dict[str, str]  # role -> address of every daemon this one talks to
    files: JobFiles
    recorder: Recorder
    metrics: DaemonMetrics
    budget: PrivacyBudget  # what this party's DP jobs spent of its data set
    dataset: DatasetKey  # the key of this daemon's data set in the budget
    stopping: threading.Event  # set once the daemon shuts down
    log: logging.Logger

    @property
    def role(self) -> str:
        return self.config.role
