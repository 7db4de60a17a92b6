"""How one daemon is set up: ``ppbn party serve``'s flags and its local policy."""

from __future__ import annotations

from dataclasses import dataclass, field

from ppbn.jobs.policy import LocalPolicy
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
