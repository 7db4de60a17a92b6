"""The table phase's configuration: what both parties must agree on, and local tuning.

Its own module because every layer that starts a table phase (the plan, the session, the
jobs and the K2 search) takes it, and none of them needs the protocol to do so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppbn.protocols.constants import SEMI_HONEST
from ppbn.protocols.executor import ExecutorSpec
from ppbn.protocols.paillier import DEFAULT_KEY_BITS
from ppbn.protocols.security import check_level


@dataclass(frozen=True)
class TablesConfig:
    """Parameters both parties must agree on (checked in the hello), plus local tuning.

    ``key_bits``, ``statistical_bits``, ``chunk_size``, ``complete_records`` and
    ``security`` (``protocols/security.py``; at ``malicious`` the phase adds the checks of
    ``checks.py``) are compared with the peer; the rest is this party's own (its local
    policy): ``executor`` (local, ray or inline), ``workers``, ``ray_address``,
    ``cache_bytes`` of ciphertexts kept in memory for later calls of a session and ``spill_bytes`` more in a memory-mapped file in ``spill_dir``
    (default: the system's temporary folder), ``serial_below``, and ``seed`` (tests only:
    every random value of the table phase derived from it, so runs repeat exactly).
    """

    key_bits: int = DEFAULT_KEY_BITS
    statistical_bits: int = 40
    chunk_size: int = 4096
    # no missing cells (any --missing rule but available-case): at semi-honest X encrypts no
    # slot for the last configuration of each subset, derived from Y's own counts
    # (``exchange._assemble``, ``derives_last_configuration``)
    complete_records: bool = False
    security: str = SEMI_HONEST
    workers: int | None = None  # None: one per core
    cache_bytes: int = 768 * 2**20  # ciphertexts kept in memory for later calls of a session
    serial_below: int = 4096  # fewer records than this: everything in this process
    executor: str = "local"
    ray_address: str | None = None
    spill_bytes: int = 0
    spill_dir: str | None = None
    seed: bytes | None = None

    def __post_init__(self) -> None:
        if self.statistical_bits < 40:
            raise ValueError("statistical_bits must be at least 40")
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        if self.cache_bytes < 0 or self.spill_bytes < 0:
            raise ValueError("cache_bytes and spill_bytes must not be negative")
        check_level(self.security)
        self.executor_spec()  # refuses an unknown executor or a stray address

    @property
    def checks_peer(self) -> bool:
        """Whether the phase runs the defences of ``checks.py``: at ``malicious``, and at
        ``covert``, which takes every malicious-level defence a phase has."""
        return self.security != SEMI_HONEST

    @property
    def derives_last_configuration(self) -> bool:
        """Whether X's last configuration of each subset gets no slot (complete records at
        the semi-honest level): Y derives its count from its own n_y, a shift Y controls,
        which the ``malicious`` level's weights check could not see."""
        return self.complete_records and not self.checks_peer

    def executor_spec(self) -> ExecutorSpec:
        """Where this party's bulk work runs (local policy, never compared with the peer)."""
        return ExecutorSpec(self.executor, self.workers, self.ray_address)
