"""The state of the table phases of one job at one party: keys, executor, ciphertext cache.

Kept apart from the messages (``exchange.py``) because it outlives a call of
``run_tables``: the key pair and its fixed-base tables are made once per job (early, in
the background, so that the peer does not wait on them), the aggregating party keeps the
peer's ciphertexts for later calls (in memory, then in a memory-mapped spill file) so that
a K2 step reuses them instead of receiving them again, and re-randomizers of the masked
results (``paillier.py``: without them the key owner could look at a product's
randomizer) are made ahead in the gaps between phases. Every random value comes from per-task seeds drawn here, in
the job's thread, so the results do not depend on which executor ran the tasks.
"""

from __future__ import annotations

import contextlib
import mmap
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field

from ppbn.protocols.executor import Executor, InlineExecutor, Pending, make_executor
from ppbn.protocols.paillier import (
    FastEncryptor,
    KeyPair,
    fast_randomizers_bytes,
    forget_encryptor,
    remember_encryptor,
    rerandomizers_bytes,
)
from ppbn.protocols.seeds import SEED_BYTES, RandomStream, TaskSeeds
from ppbn.protocols.tables.config import TablesConfig
from ppbn.protocols.tables.plan import Group

# decryptions, re-randomizers or encryptions per task: fixed, so seeds never depend on
# workers; small enough that a many-core pool has tasks for every core (a task of 512
# decryptions took ~2 s, and the table phase of a 20,000-record job waited on a few such)
TASK_PIECE = 128
RESERVE_RERANDOMIZERS = (
    1024  # at most this many made ahead for the next phase (0.5 MB at 2048 bits)
)


class _SpillFile:
    """Ciphertext chunks appended to an unlinked temporary file and read back through a
    memory map: the cache past ``cache_bytes`` costs page cache, not this process's heap.
    The file holds the peer's ciphertexts only (under the peer's key)."""

    def __init__(self, folder: str | None) -> None:
        self._file = tempfile.TemporaryFile(prefix="ppbn-cache-", dir=folder)  # noqa: SIM115 - closed by close()
        self._map: mmap.mmap | None = None
        self.size = 0

    def append(self, payload: bytes) -> tuple[int, int]:
        self._file.seek(self.size)
        self._file.write(payload)
        where = (self.size, len(payload))
        self.size += len(payload)
        return where

    def read(self, offset: int, length: int) -> bytes:
        if self._map is None or len(self._map) < offset + length:
            self._file.flush()
            if self._map is not None:
                self._map.close()
            self._map = mmap.mmap(self._file.fileno(), self.size, access=mmap.ACCESS_READ)
        return self._map[offset : offset + length]

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        self._file.close()


@dataclass
class HeldGroup:
    """The peer's ciphertexts of one group, chunk by chunk: in memory, or places in the spill file."""

    group: Group
    chunks: list[bytes] = field(default_factory=list)
    spilled: list[tuple[int, int]] = field(default_factory=list)
    spill: _SpillFile | None = None

    def add(self, payload: bytes) -> None:
        if self.spill is None:
            self.chunks.append(payload)
        else:
            self.spilled.append(self.spill.append(payload))

    def chunk(self, index: int) -> bytes:
        if self.spill is None:
            return self.chunks[index]
        return self.spill.read(*self.spilled[index])


def piece_payload(piece: Pending | bytes) -> bytes:
    """The bytes of a piece of re-randomizers: made already, or the result of its task."""
    return piece if isinstance(piece, bytes) else piece.result()


@dataclass
class TablesSession:
    """State kept across ``run_tables`` calls of one job: keys, encryptor, executor, cache.

    Use one per job and per party (the cache assumes the same records in every call), and
    ``close()`` it at the end (or use ``with``). Cached ciphertexts are kept by the party
    that received them, up to ``config.cache_bytes`` in memory and ``config.spill_bytes``
    more in a spill file. The executor is started on first use.
    """

    config: TablesConfig = field(default_factory=TablesConfig)
    keys: KeyPair | None = None
    encryptor: FastEncryptor | None = None
    sent: dict[int, Group] = field(default_factory=dict)  # as encrypter: digest -> group
    # as encrypter at the malicious level: digest -> sum of the group's plaintexts, which
    # the weights check of a later call needs (``checks.check_weights``)
    sent_sums: dict[int, int] = field(default_factory=dict)
    held: dict[int, HeldGroup] = field(default_factory=dict)  # as aggregator: digest -> ciphertexts
    held_bytes: int = 0
    spilled_bytes: int = 0
    seeds: TaskSeeds = field(init=False)
    _executor: Executor | None = field(default=None, init=False, repr=False)
    _spill: _SpillFile | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _keys_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _key_seed: bytes | None = field(default=None, init=False, repr=False)
    _preparing: threading.Thread | None = field(default=None, init=False, repr=False)
    # re-randomizers made ahead for the next phase as aggregator (``rerandomizers``): the
    # spec they are for, and pieces as (count, pending task or payload)
    _reserve_spec: tuple | None = field(default=None, init=False, repr=False)
    _reserve: deque = field(default_factory=deque, init=False, repr=False)
    _reserve_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.seeds = TaskSeeds(self.config.seed)

    @property
    def executor(self) -> Executor:
        with self._lock:
            if self._executor is None:
                self._executor = make_executor(self.config.executor_spec())
            return self._executor

    def executor_for(self, n_records: int) -> Executor:
        """The session's executor, or this process for fewer than ``serial_below`` records."""
        return InlineExecutor() if n_records < self.config.serial_below else self.executor

    def own_keys(self) -> KeyPair:
        """This party's key pair and fast encryptor: made on first use (before any streaming),
        or already by ``prepare_in_background`` (waited for if it is making them)."""
        key_seed = self._take_key_seed()
        with self._keys_lock:
            if self.keys is None:
                self.keys = KeyPair.generate(self.config.key_bits)
            if self.encryptor is None:
                private = self.keys.private
                self.encryptor = FastEncryptor(
                    self.keys.public,
                    factors=(int(private.p), int(private.q)),
                    stream=RandomStream(key_seed),
                )
                remember_encryptor(self.encryptor)
            return self.keys

    def _take_key_seed(self) -> bytes:
        with self._lock:
            if self._key_seed is None:
                self._key_seed = self.seeds.next()
            return self._key_seed

    def prepare_in_background(self, n_records: int) -> None:
        """Start making the key pair, and warming the workers (each builds its own fixed-base
        tables), in a daemon thread, so that the first table phase this party encrypts in
        finds them ready instead of spending 2-3 s on them (phe's key generation, spawning
        the pool, 0.5-1 s of tables per process) while the peer waits. The work is the same
        as on first use (``own_keys``, which waits for it), only earlier. Workers are warmed
        only for a job big enough to use them (``executor_for``); a smaller job gets only
        its key early, and this process builds no tables until it encrypts (a job refused
        early keeps no 50 MB of them)."""
        if self._preparing is not None or self.encryptor is not None:
            return
        self._take_key_seed()  # drawn here, in the job thread, so fixed seeds still repeat
        warm = n_records >= self.config.serial_below
        self._preparing = threading.Thread(
            target=self._prepare, args=(warm,), daemon=True, name="tables-prepare"
        )
        self._preparing.start()

    def wait_prepared(self) -> bool:
        """Until the background preparation (``prepare_in_background``) has ended; False if
        there was none to wait for (none started, or already waited for)."""
        if self._preparing is None:
            return False
        self._preparing.join()
        self._preparing = None
        return True

    def _prepare(self, warm: bool) -> None:
        # Errors are left to the job: ``own_keys`` on first use makes the keys again and
        # raises, and a broken pool fails the job's own tasks with ExecutorError.
        with contextlib.suppress(Exception):
            if not warm:  # everything runs in this process: its tables are built on first use
                self.own_keys()
                return
            executor = self.executor
            spawned = executor.submit(
                int, 0
            )  # a local pool starts its workers while the key is made
            self.own_keys()
            spawned.result()
            self._warm_workers(executor)

    def _warm_workers(self, executor: Executor) -> None:
        """A task per worker that builds its fixed-base tables (its value is dropped: no seed
        spent); inline, this process's tables."""
        encryptor = self.encryptor
        assert encryptor is not None
        if executor.kind == "inline":
            encryptor.build_tables()
            return
        for _ in executor.map(
            fast_randomizers_bytes, [(encryptor.spec, 1, bytes(SEED_BYTES))] * executor.workers
        ):
            pass

    def prepare(self, randomizers: int = 0) -> None:
        """Set up before the job: key pair, fixed-base tables, warm workers, and optionally a
        pool of ``randomizers`` precomputed randomizers (about 0.55 KB each at 2048 bits).

        Encryption chunks that the pool covers then cost one multiplication per record.
        """
        self.own_keys()
        encryptor = self.encryptor
        assert encryptor is not None
        executor = self.executor
        items = [
            (encryptor.spec, min(TASK_PIECE, randomizers - i), self.seeds.next())
            for i in range(0, randomizers, TASK_PIECE)
        ]
        for payload in executor.map(fast_randomizers_bytes, items):
            encryptor.add_to_pool(payload)
        self._warm_workers(executor)

    def rerandomizers(self, spec: tuple, count: int, executor: Executor) -> list[Pending | bytes]:
        """``count`` re-randomizers for the peer's key ``spec`` (``paillier.rerandomizer_spec``),
        as pieces (payloads, or tasks whose results are payloads) in order: first those made
        ahead (``top_up_rerandomizers``), then new tasks. Each is handed out once."""
        pieces: list[Pending | bytes] = []
        with self._reserve_lock:
            self._reserve_for(spec)
            while count > 0 and self._reserve:
                size, piece = self._reserve.popleft()
                if size > count:  # split: the rest stays for the next phase
                    payload = piece_payload(piece)
                    cut = len(payload) // size * count
                    self._reserve.appendleft((size - count, payload[cut:]))
                    piece, size = payload[:cut], count
                pieces.append(piece)
                count -= size
        return pieces + [task for _, task in self._rerandomizer_tasks(spec, count, executor)]

    @property
    def reserved(self) -> int:
        """Re-randomizers made ahead (``top_up_rerandomizers``) and not yet handed out."""
        with self._reserve_lock:
            return sum(size for size, _ in self._reserve)

    @property
    def reserve_spec(self) -> tuple | None:
        """The peer's key and exponent size (``paillier.rerandomizer_spec``) of the last
        re-randomizers asked for, which those made ahead are for; None before any."""
        return self._reserve_spec

    def top_up_rerandomizers(self, spec: tuple, count: int, executor: Executor) -> None:
        """Start making re-randomizers for the next phase as aggregator, up to ``count``
        (capped at ``RESERVE_RERANDOMIZERS``) waiting: they depend on nothing but the peer's
        key, and the tasks queue behind this phase's, so they run in the next steps' gaps
        (the garbled and share phases leave the workers idle) instead of in the next table
        phase, which nothing overlaps at the start of a K2 step. Not for an inline executor,
        where making them ahead would only delay this phase's end."""
        if executor.kind == "inline":
            return
        with self._reserve_lock:
            self._reserve_for(spec)
            missing = min(count, RESERVE_RERANDOMIZERS) - sum(size for size, _ in self._reserve)
            self._reserve.extend(self._rerandomizer_tasks(spec, missing, executor))

    def _rerandomizer_tasks(
        self, spec: tuple, count: int, executor: Executor
    ) -> list[tuple[int, Pending]]:
        """(size, task) for ``count`` new re-randomizers, in pieces of ``TASK_PIECE``."""
        sizes = [min(TASK_PIECE, count - i) for i in range(0, max(0, count), TASK_PIECE)]
        return [
            (size, executor.submit(rerandomizers_bytes, spec, size, self.seeds.next()))
            for size in sizes
        ]

    def _reserve_for(self, spec: tuple) -> None:
        """Keep the reserve only for ``spec``'s key: another key drops it (``_reserve_lock`` held)."""
        if self._reserve_spec != spec:
            self._reserve.clear()
            self._reserve_spec = spec

    def hold(self, group: Group, size: int) -> HeldGroup | None:
        """Where to keep ``size`` bytes of the peer's ciphertexts of ``group``: in memory,
        in the spill file, or (both budgets spent) nowhere."""
        if self.held_bytes + size <= self.config.cache_bytes:
            self.held_bytes += size
            return HeldGroup(group)
        if self.spilled_bytes + size <= self.config.spill_bytes:
            if self._spill is None:
                self._spill = _SpillFile(self.config.spill_dir)
            self.spilled_bytes += size
            return HeldGroup(group, spill=self._spill)
        return None

    def close(self) -> None:
        self.wait_prepared()
        with self._reserve_lock:
            self._reserve.clear()  # tasks not yet started are cancelled with the pool
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        if self.encryptor is not None:
            forget_encryptor(self.encryptor)
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self.held.clear()
        self.held_bytes = self.spilled_bytes = 0

    def __enter__(self) -> TablesSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
