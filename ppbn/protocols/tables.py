"""Secure contingency tables: additive shares in Z_2^64 of every count a family needs.

Yang-Wright (Sec. 6.3) obtain each alpha_ijk = #records with (v_i, pi_i) = (k, j) as one
n-long scalar product of the parties' compatibility vectors (Sec. 5.3, Paillier): one
vector of n encryptions per alpha. ppbn computes whole tables, for many families, in one
pass (DESIGN.md, "Where the cost is"):

1. A family F splits into the encrypting party X's variables S_X and the other party
   Y's variables S_Y. For each record, X encrypts *once* the one-hot indicators of the
   record's configuration of each of its subsets S_X, packed side by side into plaintext
   slots of w = bits(n) + sigma + 1 bits (sigma >= 40 statistical masking bits, one guard
   bit); a ciphertext holds (key_bits - 1) // w slots, so many subsets share it.
2. Y multiplies, per configuration y of S_Y, the ciphertexts of the records with S_Y = y
   (homomorphic sum: slot (S_X, x) then holds alpha(x, y)). Y first aggregates over the
   joint configurations of a *cluster* of its subsets and marginalises the products, so a
   record costs one multiplication per cluster instead of one per subset.
   With complete records (``TablesConfig.complete_records``: any ``--missing`` rule but
   available-case, agreed in the hello) the last configuration of each subset gets no
   slot: every record has exactly one configuration of S_X, so its count is Y's own count
   of y less the others (``_assemble``), which saves 1/|S_X| of the slots (half for a
   binary variable), and with them encryptions, products, ciphertexts and returns.
3. Y adds a fresh mask r < 2^(bits(n) + sigma) to every slot, re-randomizes with g^b for
   X's encryptor base g and b uniform of bits(N) + sigma bits (paillier.py: the key owner
   could otherwise look at the randomizer; g^b makes it uniform over <g>, which holds the
   randomizers of all X's ciphertexts), and returns; X decrypts. Slot value v = alpha + r is statistically hidden (distance
   <= 2^-sigma). Shares: X holds v mod 2^64, Y holds -r mod 2^64; their sum mod 2^64 is
   alpha. The shares are statistically hiding, not uniform in Z_2^64.

Missing cells (``--missing available-case``, code -1): each party applies the rule to its
own columns. X's indicator row for a subset with a missing variable is all zeros (an
encryption of 0, like any other); Y labels the record with an extra "missing" state of
that variable when aggregating a cluster and leaves those labels out when marginalising
to a subset that contains the variable. A record thus adds to a family's cell only if
neither party's part of the family is missing, as in ``bn.k2.count_table``.

Each party encrypts under its own key (X is always the key owner). Ciphertexts are
streamed in chunks of records (memory stays flat in n) and Y may keep them for later
calls of the same ``TablesSession`` (in memory up to ``cache_bytes``, then in a
memory-mapped spill file up to ``spill_bytes``); the plan reuses cached ciphertexts and otherwise
picks, by a cost model, which party encrypts which family (both compute the same plan
from public data). A family held entirely by one party is counted by that party: its
share is the count table itself (its own data) and the other party's share is zero.
The bulk work runs on the party's own executor (``executor.py``): X's encryption of
record chunks and decryption of the returned pieces, Y's products per chunk, combined in
a tree, and Y's re-randomizers. Randomness is drawn in this thread as per-task seeds,
so the shares and the transcript are the same whichever executor ran the tasks.
Every received message is validated (the peer's Paillier modulus by
``PublicKey.from_bytes`` against the locally configured key size, sizes, ciphertexts in
Z*_{N^2}, agreement on n, the family list, the session label and the configuration); a
mismatch raises ProtocolError.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import mmap
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from gmpy2 import mpz

from ppbn.bn.schema import Schema
from ppbn.circuits.garble import length_prefixed
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.executor import Executor, ExecutorSpec, InlineExecutor, Pending, make_executor
from ppbn.protocols.paillier import (
    DEFAULT_KEY_BITS,
    FastEncryptor,
    KeyPair,
    OpCounters,
    PublicKey,
    check_randomizer_base,
    combine_products,
    decode_ciphertexts,
    decrypt_bytes,
    encode_ciphertexts,
    encrypt_bit_rows,
    fast_randomizers_bytes,
    forget_encryptor,
    multiply_by_label,
    remember_encryptor,
    rerandomizer_spec,
    rerandomizers_bytes,
)
from ppbn.protocols.seeds import SEED_BYTES, RandomStream, TaskSeeds

PROTOCOL_VERSION = 3  # 2: re-randomizers over the key owner's encryptor base; 3: derived last configuration
TABLES_PROTOCOL = b"ppbn/tables"
ROLES = ("alice", "bob")
SHARE_MODULUS = 1 << 64
MAX_CACHE_ENTRIES = 1 << 16
RETURN_PIECE = 4096  # masked ciphertexts per message
TASK_PIECE = 512  # decryptions or re-randomizers per task: fixed, so seeds never depend on workers
RESERVE_RERANDOMIZERS = 1024  # at most this many made ahead for the next phase (0.5 MB at 2048 bits)
TREE_FANIN = 16  # chunk products combined per node of the aggregation tree
# A missing cell (``--missing available-case``, ``parties.data.MISSING_CODE``): the record
# has no configuration of any subset containing that variable, so its indicator row for
# the subset is all zeros and it adds to no cell of any family containing the variable.
MISSING = -1

Subset = tuple[str, ...]
Family = tuple[str, ...]
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class TablesConfig:
    """Parameters both parties must agree on (checked in the hello), plus local tuning.

    ``key_bits``, ``statistical_bits``, ``chunk_size`` and ``complete_records`` are
    compared with the peer; the rest is this party's own (its local policy): ``executor``
    (local, ray or inline), ``workers``, ``ray_address``, ``cache_bytes`` of ciphertexts kept in memory for later
    calls of a session and ``spill_bytes`` more in a memory-mapped file in ``spill_dir``
    (default: the system's temporary folder), ``serial_below``, and ``seed`` (tests only:
    every random value of the table phase derived from it, so runs repeat exactly).
    """

    key_bits: int = DEFAULT_KEY_BITS
    statistical_bits: int = 40
    chunk_size: int = 4096
    # no missing cells (any --missing rule but available-case): X encrypts no slot for the
    # last configuration of each subset, derived from Y's own counts (``_assemble``)
    complete_records: bool = False
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
        self.executor_spec()  # refuses an unknown executor or a stray address

    def executor_spec(self) -> ExecutorSpec:
        return ExecutorSpec(self.executor, self.workers, self.ray_address)


def crossing_families(schema: Schema, max_size: int) -> list[tuple[str, ...]]:
    """Every variable subset of size <= max_size, in schema order, with variables of both parties."""
    out = []
    for size in range(2, max_size + 1):
        for combo in itertools.combinations(schema.variables, size):
            if len({v.owner for v in combo}) == 2:
                out.append(tuple(v.name for v in combo))
    return out


# -- cost of the paper's method -------------------------------------------------------------------


@dataclass(frozen=True)
class MethodCost:
    """Public-key work and traffic of a way of computing the count shares."""

    method: str
    alphas: int
    encryptions: int
    decryptions: int
    ciphertext_multiplications: int
    ciphertexts: int
    bytes: int

    @property
    def public_key_operations(self) -> int:
        return self.encryptions + self.decryptions + self.ciphertext_multiplications

    def as_dict(self) -> dict[str, int | str]:
        return {
            "method": self.method,
            "alphas": self.alphas,
            "encryptions": self.encryptions,
            "decryptions": self.decryptions,
            "ciphertext_multiplications": self.ciphertext_multiplications,
            "ciphertexts": self.ciphertexts,
            "bytes": self.bytes,
            "public_key_operations": self.public_key_operations,
        }


def per_alpha_cost(
    schema: Schema, families: Sequence[Family], n_records: int, key_bits: int = DEFAULT_KEY_BITS
) -> MethodCost:
    """Yang-Wright Sec. 6.3 on the same families: one n-long scalar product per alpha.

    Per crossing cell alpha(x, y): Alice encrypts her n-long compatibility vector (n
    encryptions, n ciphertexts sent), Bob multiplies the ciphertexts of his compatible
    records (summed over the cells of a family: configs(S_A) * n), adds an encrypted mask
    (1 encryption, 1 multiplication) and returns one ciphertext, which Alice decrypts.
    Families held by one party cost nothing. Computed, not run.
    """
    alphas = encryptions = multiplications = 0
    for family in dict.fromkeys(tuple(f) for f in families):
        owners = {schema.owner(v) for v in family}
        if len(owners) < 2:
            continue
        cells = math.prod(schema.cardinalities(family))
        alice_configs = math.prod(schema.cardinality(v) for v in family if schema.owner(v) == "alice")
        alphas += cells
        encryptions += cells * (n_records + 1)
        multiplications += alice_configs * n_records + cells
    ciphertexts = alphas * (n_records + 1)
    width = 2 * ((key_bits + 7) // 8)
    return MethodCost("per-alpha", alphas, encryptions, alphas, multiplications, ciphertexts, ciphertexts * width)


# -- plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """Configurations [start, stop) of one subset, laid out in consecutive slots."""

    subset: Subset
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Group:
    """The slot layout of one ciphertext per record."""

    slices: tuple[Slice, ...]

    @property
    def slots(self) -> int:
        return sum(s.size for s in self.slices)

    def offsets(self) -> list[int]:
        return list(itertools.accumulate((s.size for s in self.slices), initial=0))[:-1]


@dataclass
class DirectionPlan:
    """Everything both parties need to run one direction: X encrypts, Y aggregates."""

    encrypter: str
    pairs_needed: list[tuple[Subset, Subset]]  # (S_X, S_Y) of the families in this direction
    groups: list[Group]
    cached: list[bool]
    locate: dict[Subset, list[tuple[int, int, Slice]]]  # S_X -> (group, slot offset, slice)
    pairs: list[tuple[int, Subset]]  # (group, S_Y) products returned, in order
    clusters: list[list[Subset]]  # per group: unions of S_Y subsets aggregated jointly
    cluster_of: list[dict[Subset, int]]  # per group: S_Y -> cluster index

    @property
    def aggregator(self) -> str:
        return other(self.encrypter)


def other(role: str) -> str:
    return "bob" if role == "alice" else "alice"


def _configs(schema: Schema, subset: Sequence[str]) -> int:
    return math.prod(schema.cardinalities(subset))


def _encoded(schema: Schema, subset: Sequence[str], complete_records: bool) -> int:
    """Slots of X's subset: one per configuration, but the last when records are complete
    (its count is Y's count of the configuration y less the others, ``_assemble``)."""
    return _configs(schema, subset) - int(complete_records)


def _canonical(schema: Schema, names: Sequence[str]) -> Subset:
    order = {n: i for i, n in enumerate(schema.names)}
    return tuple(sorted(names, key=order.__getitem__))


def slot_bits(n_records: int, statistical_bits: int) -> int:
    """Slot width: room for a count <= n, sigma bits of mask headroom, one guard bit."""
    return n_records.bit_length() + statistical_bits + 1


def _pack(schema: Schema, subsets: Sequence[Subset], capacity: int, complete_records: bool) -> list[Group]:
    """First-fit decreasing of the subsets' encoded configurations into ciphertexts of ``capacity`` slots."""
    pieces = []
    for subset in subsets:
        total = _encoded(schema, subset, complete_records)
        pieces.extend(Slice(subset, start, min(start + capacity, total)) for start in range(0, total, capacity))
    pieces.sort(key=lambda s: -s.size)
    bins: list[list[Slice]] = []
    for piece in pieces:
        for b in bins:
            if sum(s.size for s in b) + piece.size <= capacity:
                b.append(piece)
                break
        else:
            bins.append([piece])
    return [Group(tuple(b)) for b in bins]


def _cluster(schema: Schema, subsets: Sequence[Subset], limit: int) -> tuple[list[Subset], dict[Subset, int]]:
    """Greedy first-fit of Y's subsets into unions with at most ``limit`` joint configurations."""
    clusters: list[Subset] = []
    cluster_of: dict[Subset, int] = {}
    for subset in sorted(subsets, key=lambda s: (-_configs(schema, s), s)):
        for i, union in enumerate(clusters):
            merged = _canonical(schema, set(union) | set(subset))
            if _configs(schema, merged) <= limit:
                clusters[i] = merged
                cluster_of[subset] = i
                break
        else:
            cluster_of[subset] = len(clusters)
            clusters.append(subset)
    return clusters, cluster_of


def _direction_plan(
    schema: Schema,
    encrypter: str,
    pairs_needed: list[tuple[Subset, Subset]],
    capacity: int,
    cached_groups: Sequence[Group],
    cluster_limit: int,
    complete_records: bool,
) -> DirectionPlan:
    x_subsets = sorted({sx for sx, _ in pairs_needed}, key=lambda s: (len(s), s))
    coverage: dict[Subset, list[tuple[int, int, Slice]]] = {}
    for gi, group in enumerate(cached_groups):
        for offset, piece in zip(group.offsets(), group.slices, strict=True):
            coverage.setdefault(piece.subset, []).append((gi, offset, piece))
    used_cached: list[int] = []
    locate: dict[Subset, list[tuple[int, int, Slice]]] = {}
    fresh = []
    for subset in x_subsets:
        found = coverage.get(subset, [])
        if sum(p.size for _, _, p in found) == _encoded(schema, subset, complete_records):
            locate[subset] = found
            used_cached.extend(gi for gi, _, _ in found if gi not in used_cached)
        else:
            fresh.append(subset)
    renumber = {gi: i for i, gi in enumerate(sorted(used_cached))}
    groups = [cached_groups[gi] for gi in sorted(used_cached)]
    cached = [True] * len(groups)
    locate = {s: [(renumber[gi], off, p) for gi, off, p in where] for s, where in locate.items()}
    for group in _pack(schema, fresh, capacity, complete_records):
        gi = len(groups)
        groups.append(group)
        cached.append(False)
        for offset, piece in zip(group.offsets(), group.slices, strict=True):
            locate.setdefault(piece.subset, []).append((gi, offset, piece))
    pair_set = {(gi, sy) for sx, sy in pairs_needed for gi, _, _ in locate[sx]}
    pairs = sorted(pair_set, key=lambda p: (p[0], len(p[1]), p[1]))
    clusters, cluster_of = [], []
    for gi in range(len(groups)):
        unions, where = _cluster(schema, [sy for g, sy in pairs if g == gi], cluster_limit)
        clusters.append(unions)
        cluster_of.append(where)
    return DirectionPlan(encrypter, pairs_needed, groups, cached, locate, pairs, clusters, cluster_of)


# Relative cost of operations, in multiplications mod N^2 (measured on 2048-bit keys).
_COST_ENCRYPTION = 25
_COST_RETURN = 1000  # a re-randomizer (~350) plus a decryption (~640)
_COST_CIPHERTEXT_SENT = 2


def _plan_cost(schema: Schema, plan: DirectionPlan, n_records: int) -> int:
    fresh = sum(not c for c in plan.cached)
    records_mults = n_records * sum(len(c) for c in plan.clusters)
    marginal = sum(_configs(schema, plan.clusters[g][plan.cluster_of[g][sy]]) for g, sy in plan.pairs)
    returns = sum(_configs(schema, sy) for _, sy in plan.pairs)
    sent = n_records * fresh + returns
    return (
        _COST_ENCRYPTION * n_records * fresh
        + records_mults
        + marginal
        + _COST_RETURN * returns
        + _COST_CIPHERTEXT_SENT * sent
    )


@dataclass
class Plan:
    local: list[Family]
    directions: list[DirectionPlan]


def make_plan(
    schema: Schema,
    families: Sequence[Family],
    n_records: int,
    config: TablesConfig,
    cached: dict[str, list[Group]] | None = None,
) -> Plan:
    """The plan both parties derive from public data (and the cache state they exchanged).

    Candidates: Alice encrypts every crossing family, Bob does, or each family goes to
    the party whose part is cached or shared by more families. The cheapest by the cost
    model wins (ties: that order).
    """
    cached = cached or {"alice": [], "bob": []}
    capacity = (config.key_bits - 1) // slot_bits(n_records, config.statistical_bits)
    if capacity < 1:
        raise ValueError("key too small for the slot width")
    cluster_limit = max(2, min(1024, config.chunk_size // 8))
    local: list[Family] = []
    crossing: list[tuple[Subset, Subset]] = []
    for family in families:
        owners = {schema.owner(v) for v in family}
        if len(owners) == 1:
            local.append(family)
            continue
        alice_part = _canonical(schema, [v for v in family if schema.owner(v) == "alice"])
        bob_part = _canonical(schema, [v for v in family if schema.owner(v) == "bob"])
        crossing.append((alice_part, bob_part))
    crossing = list(dict.fromkeys(crossing))
    if not crossing:
        return Plan(local, [])

    def covered(role: str, subset: Subset) -> bool:
        total = sum(p.size for g in cached[role] for p in g.slices if p.subset == subset)
        return total == _encoded(schema, subset, config.complete_records)

    share_count: dict[tuple[str, Subset], int] = {}
    for a, b in crossing:
        share_count[("alice", a)] = share_count.get(("alice", a), 0) + 1
        share_count[("bob", b)] = share_count.get(("bob", b), 0) + 1
    mixed: list[str] = []
    for a, b in crossing:
        if covered("alice", a) != covered("bob", b):
            mixed.append("alice" if covered("alice", a) else "bob")
        else:
            mixed.append("alice" if share_count[("alice", a)] >= share_count[("bob", b)] else "bob")
    candidates = [["alice"] * len(crossing), ["bob"] * len(crossing), mixed]
    best: tuple[int, list[DirectionPlan]] | None = None
    for assignment in candidates:
        plans = []
        for role in ROLES:
            pairs = [
                (a, b) if role == "alice" else (b, a)
                for (a, b), who in zip(crossing, assignment, strict=True)
                if who == role
            ]
            if pairs:
                plans.append(
                    _direction_plan(schema, role, pairs, capacity, cached[role], cluster_limit, config.complete_records)
                )
        cost = sum(_plan_cost(schema, p, n_records) for p in plans)
        if best is None or cost < best[0]:
            best = (cost, plans)
    assert best is not None
    return Plan(local, best[1])


# -- session ---------------------------------------------------------------------------------------


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
class _Held:
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
    held: dict[int, _Held] = field(default_factory=dict)  # as aggregator: digest -> ciphertexts
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
                    self.keys.public, factors=(int(private.p), int(private.q)), stream=RandomStream(key_seed)
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
        self._preparing = threading.Thread(target=self._prepare, args=(warm,), daemon=True, name="tables-prepare")
        self._preparing.start()

    def _prepare(self, warm: bool) -> None:
        # Errors are left to the job: ``own_keys`` on first use makes the keys again and
        # raises, and a broken pool fails the job's own tasks with ExecutorError.
        with contextlib.suppress(Exception):
            if not warm:  # everything runs in this process: its tables are built on first use
                self.own_keys()
                return
            executor = self.executor
            spawned = executor.submit(int, 0)  # a local pool starts its workers while the key is made
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
        for _ in executor.map(fast_randomizers_bytes, [(encryptor.spec, 1, bytes(SEED_BYTES))] * executor.workers):
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

    def _rerandomizer_tasks(self, spec: tuple, count: int, executor: Executor) -> list[tuple[int, Pending]]:
        """(size, task) for ``count`` new re-randomizers, in pieces of ``TASK_PIECE``."""
        sizes = [min(TASK_PIECE, count - i) for i in range(0, max(0, count), TASK_PIECE)]
        return [(size, executor.submit(rerandomizers_bytes, spec, size, self.seeds.next())) for size in sizes]

    def _reserve_for(self, spec: tuple) -> None:
        """Keep the reserve only for ``spec``'s key: another key drops it (``_reserve_lock`` held)."""
        if self._reserve_spec != spec:
            self._reserve.clear()
            self._reserve_spec = spec

    def hold(self, group: Group, size: int) -> _Held | None:
        """Where to keep ``size`` bytes of the peer's ciphertexts of ``group``: in memory,
        in the spill file, or (both budgets spent) nowhere."""
        if self.held_bytes + size <= self.config.cache_bytes:
            self.held_bytes += size
            return _Held(group)
        if self.spilled_bytes + size <= self.config.spill_bytes:
            if self._spill is None:
                self._spill = _SpillFile(self.config.spill_dir)
            self.spilled_bytes += size
            return _Held(group, spill=self._spill)
        return None

    def close(self) -> None:
        if self._preparing is not None:
            self._preparing.join()
            self._preparing = None
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


def _digest(channel_session: bytes, *parts: object) -> int:
    """64-bit digest of public values (the hello's family list, cache keys), domain-separated
    by the tables protocol id and the job's session label like every other hash."""
    domain = length_prefixed(TABLES_PROTOCOL, channel_session)
    digest = hashlib.blake2b(domain + repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _group_digest(
    channel_session: bytes,
    encrypter: str,
    group: Group,
    n_records: int,
    chunk_size: int,
    n_key: int,
) -> int:
    return _digest(channel_session, "group", encrypter, group, n_records, chunk_size, n_key)


# -- the protocol ----------------------------------------------------------------------------------


def run_tables(
    channel: Channel,
    role: str,
    schema: Schema,
    codes: np.ndarray,
    families: Sequence[tuple[str, ...]],
    config: TablesConfig | None = None,
    counters: OpCounters | None = None,
    progress: Progress | None = None,
    session: TablesSession | None = None,
) -> dict[tuple[str, ...], np.ndarray]:
    """This party's uint64 shares of the count table of every family (see module doc).

    ``codes``: this party's coded columns, shape (n, k), in the order of
    ``schema.owned_by(role)``, rows aligned by record id with the peer's. The result maps
    each family to an array shaped by its cardinalities (axes in the family's order, C
    order); alice's + bob's share = count mod 2^64. Pass a ``session`` to keep keys,
    workers and ciphertexts across calls of one job (its config then wins).
    """
    if role not in ROLES:
        raise ValueError(f"role must be 'alice' or 'bob', got {role!r}")
    own_session = session is None
    if session is None:
        session = TablesSession(config or TablesConfig())
    counters = counters if counters is not None else OpCounters()
    try:
        return _run(channel, role, schema, codes, families, session, counters, progress)
    finally:
        if own_session:
            session.close()


def _check_inputs(schema: Schema, role: str, codes: np.ndarray, families: Sequence[Family]) -> list[Family]:
    owned = schema.owned_by(role)
    if codes.ndim != 2 or codes.shape[1] != len(owned):
        raise ValueError(f"codes must have shape (n, {len(owned)}) for {role}'s variables, got {codes.shape}")
    for j, var in enumerate(owned):
        column = codes[:, j]
        if column.size and (column.min() < MISSING or column.max() >= var.cardinality):
            raise ValueError(f"codes of {var.name!r} must lie in [0, {var.cardinality}) or be {MISSING} (missing)")
    out = []
    for family in families:
        family = tuple(family)
        if not family or len(set(family)) != len(family):
            raise ValueError(f"family {family!r} must list distinct variables")
        for name in family:
            schema.variable(name)
        out.append(family)
    return list(dict.fromkeys(out))


def _hello(
    channel: Channel, schema: Schema, n_records: int, families: list[Family], session: TablesSession
) -> dict[str, list[Group]]:
    """Agree on n, families, configuration; exchange cache state. Returns usable cached groups."""
    config = session.config
    mine = [
        PROTOCOL_VERSION,
        n_records,
        config.key_bits,
        config.statistical_bits,
        config.chunk_size,
        int(config.complete_records),
        _digest(channel.session, schema.fingerprint(), families),
        len(session.held),
        len(session.sent),
    ]
    channel.send_u64s("tables.hello", mine)
    theirs = channel.recv_u64s("tables.hello", len(mine))
    names = [
        "protocol version",
        "record count",
        "key bits",
        "statistical bits",
        "chunk size",
        "complete-records setting (the --missing rule)",
        "family list or session",
    ]
    for name, a, b in zip(names, mine, theirs, strict=False):
        if a != b:
            raise ProtocolError(f"tables: the {name} differs between the parties (peer {b}, here {a})")
    held_count, sent_count = theirs[7], theirs[8]
    if held_count > MAX_CACHE_ENTRIES or sent_count > MAX_CACHE_ENTRIES:
        raise ProtocolError("tables: peer announced an absurd number of cached groups")
    channel.send_u64s("tables.cache", sorted(session.held) + sorted(session.sent))
    digests = channel.recv_u64s("tables.cache", held_count + sent_count)
    peer_held, peer_sent = set(digests[:held_count]), set(digests[held_count:])
    usable_mine = [session.sent[d] for d in sorted(session.sent) if d in peer_held]
    usable_theirs = [session.held[d].group for d in sorted(session.held) if d in peer_sent]
    return {"mine": usable_mine, "theirs": usable_theirs}


def _run(
    channel: Channel,
    role: str,
    schema: Schema,
    codes: np.ndarray,
    families_in: Sequence[Family],
    session: TablesSession,
    counters: OpCounters,
    progress: Progress | None,
) -> dict[Family, np.ndarray]:
    families = _check_inputs(schema, role, codes, families_in)
    n_records = int(codes.shape[0])
    config = session.config
    if config.complete_records and codes.size and codes.min() < 0:
        raise ValueError("tables: a missing cell, but complete records were agreed (only available-case allows them)")
    usable = _hello(channel, schema, n_records, families, session)
    cached = {role: usable["mine"], other(role): usable["theirs"]}
    plan = make_plan(schema, families, n_records, config, cached)
    columns = {v.name: j for j, v in enumerate(schema.owned_by(role))}
    result: dict[Family, np.ndarray] = {}
    for family in plan.local:
        shape = schema.cardinalities(family)
        if schema.owner(family[0]) == role:
            index = config_index(schema, codes, columns, family)
            index = index[index != MISSING]
            table = np.bincount(index, minlength=math.prod(shape)).astype(np.uint64).reshape(shape)
        else:
            table = np.zeros(shape, dtype=np.uint64)
        result[family] = table
    width = slot_bits(n_records, config.statistical_bits)
    for direction in plan.directions:
        if direction.encrypter == role:
            pair_shares = _encrypt_side(channel, schema, codes, columns, direction, session, counters, progress, width)
        else:
            pair_shares = _aggregate_side(
                channel, schema, codes, columns, direction, session, counters, progress, width
            )
        y_counts = None
        if config.complete_records and direction.aggregator == role:
            aggregated = {sy for _, sy in direction.pairs}
            y_counts = {
                sy: np.bincount(config_index(schema, codes, columns, sy), minlength=_configs(schema, sy)) for sy in aggregated
            }
        _assemble(schema, families, direction, pair_shares, result, config.complete_records, y_counts)
    return result


def config_index(schema: Schema, codes: np.ndarray, columns: dict[str, int], subset: Subset) -> np.ndarray:
    """Each record's configuration of ``subset``, or MISSING when any of its variables is
    missing: the available-case rule, applied by each party to its own columns (a record
    counts in a cell only if neither party's part of the family is missing)."""
    if not subset:
        return np.zeros(codes.shape[0], dtype=np.int64)
    parts = tuple(codes[:, columns[v]] for v in subset)
    missing = np.zeros(codes.shape[0], dtype=bool)
    for part in parts:
        missing |= part < 0
    if not missing.any():
        return np.ravel_multi_index(parts, schema.cardinalities(subset))
    index = np.ravel_multi_index(tuple(np.where(missing, 0, p) for p in parts), schema.cardinalities(subset))
    index[missing] = MISSING
    return index


def _label_cards(schema: Schema, codes: np.ndarray, columns: dict[str, int], union: Subset) -> tuple[int, ...]:
    """Cardinalities of the aggregator's cluster labels: a variable with missing cells in
    this party's own data gets one extra state (its last) for "missing"."""
    return tuple(
        schema.cardinality(v) + int(bool(np.any(codes[:, columns[v]] < 0))) for v in union
    )


def _cluster_label(codes: np.ndarray, columns: dict[str, int], union: Subset, cards: tuple[int, ...]) -> np.ndarray:
    """Each record's joint state of ``union`` over ``cards`` (missing = the extra last state),
    so that every record has a label: the marginalisation to a subset then drops exactly the
    records missing in that subset's variables, and every ciphertext stays a factor of one
    product (``multiply_by_label``'s invertibility check covers it)."""
    if not union:
        return np.zeros(codes.shape[0], dtype=np.int64)
    parts = tuple(
        np.where(codes[:, columns[v]] < 0, card - 1, codes[:, columns[v]]) for v, card in zip(union, cards, strict=True)
    )
    return np.ravel_multi_index(parts, cards)


def _positions(schema: Schema, block: np.ndarray, columns: dict[str, int], group: Group, width: int) -> np.ndarray:
    """X's task input for a chunk: per record and slice, the bit to set (-1: none)."""
    positions = np.full((block.shape[0], len(group.slices)), -1, dtype=np.int64)
    for j, (offset, piece) in enumerate(zip(group.offsets(), group.slices, strict=True)):
        cfg = config_index(schema, block, columns, piece.subset)
        inside = (cfg >= piece.start) & (cfg < piece.stop)
        positions[inside, j] = width * (offset + cfg[inside] - piece.start)
    return positions


def _labels(
    block: np.ndarray, columns: dict[str, int], clusters: list[Subset], label_cards: dict[Subset, tuple[int, ...]]
) -> np.ndarray:
    """Y's task input for a chunk: each record's label in each cluster of the group."""
    return np.stack([_cluster_label(block, columns, u, label_cards[u]) for u in clusters])


def chunk_inputs(
    schema: Schema, codes: dict[str, np.ndarray], families: Sequence[Family], config: TablesConfig, n_records: int
) -> tuple[str, np.ndarray, np.ndarray, list[int]]:
    """What one chunk of ``codes`` (both parties' columns, for a measurement only: ``ppbn
    bench chunk-cost``) gives the two tasks of the plan's first direction for a job of
    ``n_records``: the encrypter, its positions, the aggregator's labels and label counts."""
    plan = make_plan(schema, families, n_records, config)
    if not plan.directions:
        raise ValueError("no crossing family")
    direction = plan.directions[0]
    x, y = direction.encrypter, direction.aggregator
    x_columns = {v.name: j for j, v in enumerate(schema.owned_by(x))}
    y_columns = {v.name: j for j, v in enumerate(schema.owned_by(y))}
    width = slot_bits(n_records, config.statistical_bits)
    positions = _positions(schema, codes[x], x_columns, direction.groups[0], width)
    clusters = direction.clusters[0]
    cards = {u: _label_cards(schema, codes[y], y_columns, u) for u in clusters}
    return x, positions, _labels(codes[y], y_columns, clusters, cards), [math.prod(cards[u]) for u in clusters]


def _chunks(n_records: int, chunk_size: int) -> list[tuple[int, int]]:
    return [(s, min(s + chunk_size, n_records)) for s in range(0, n_records, chunk_size)]


def _encrypt_side(
    channel: Channel,
    schema: Schema,
    codes: np.ndarray,
    columns: dict[str, int],
    plan: DirectionPlan,
    session: TablesSession,
    counters: OpCounters,
    progress: Progress | None,
    width: int,
) -> list[np.ndarray]:
    """X's part: send the public key, stream packed encryptions, decrypt the masked products."""
    config = session.config
    keys = session.own_keys()
    encryptor = session.encryptor
    assert encryptor is not None
    channel.send("tables.public_key", keys.public.to_bytes())
    channel.send("tables.randomizer_base", encode_ciphertexts([encryptor.base], keys.public))
    n_records = codes.shape[0]
    executor = session.executor_for(n_records)
    fresh = [g for g, c in zip(plan.groups, plan.cached, strict=True) if not c]
    total = n_records * len(fresh)
    done = 0

    def chunk_tasks(group: Group) -> Iterator[tuple]:
        for start, stop in _chunks(n_records, config.chunk_size):
            positions = _positions(schema, codes[start:stop], columns, group, width)
            seed = session.seeds.next()
            pooled = encryptor.take_pooled(stop - start) if encryptor.pooled >= stop - start else b""
            yield encryptor.spec, positions, seed, pooled

    for group in fresh:
        for blob in executor.map(encrypt_bit_rows, chunk_tasks(group)):
            rows = len(blob) // keys.public.ciphertext_bytes
            channel.send("tables.ciphertexts", blob)
            counters.add(encryptions=rows, randomizers=rows, ciphertexts_sent=rows)
            done += rows
            if progress is not None:
                progress("encrypt", done, total)
        digest = _group_digest(
            channel.session, plan.encrypter, group, n_records, config.chunk_size, keys.public.n
        )
        session.sent[digest] = group
    # masked products, in plan order
    sizes = [_configs(schema, sy) for _, sy in plan.pairs]
    total_returns = sum(sizes)
    private_spec = keys.private_spec()
    width_ct = keys.public.ciphertext_bytes
    received = 0

    def decrypt_tasks() -> Iterator[tuple]:
        nonlocal received
        while received < total_returns:
            count = min(RETURN_PIECE, total_returns - received)
            payload = channel.recv("tables.masked", max_bytes=count * width_ct)
            decode_ciphertexts(payload, count, keys.public, "tables.masked")
            counters.add(ciphertexts_received=count)
            received += count
            step = TASK_PIECE * width_ct
            for i in range(0, len(payload), step):
                yield private_spec, payload[i : i + step]

    values: list[int] = []
    for piece in executor.map(decrypt_bytes, decrypt_tasks()):
        values.extend(piece)
        counters.add(decryptions=len(piece))
        if progress is not None:
            progress("decrypt", len(values), total_returns)
    slot_mask = (1 << width) - 1
    shares = []
    position = 0
    for (gi, _), size in zip(plan.pairs, sizes, strict=True):
        slots = plan.groups[gi].slots
        table = np.empty((size, slots), dtype=np.uint64)
        for y in range(size):
            m = values[position + y]
            table[y] = [((m >> (width * s)) & slot_mask) % SHARE_MODULUS for s in range(slots)]
        position += size
        shares.append(table)
    return shares


def _aggregate_group(
    channel: Channel,
    executor: Executor,
    public: PublicKey,
    chunk_labels: Callable[[int, int], np.ndarray],
    cluster_sizes: list[int],
    n_records: int,
    chunk_size: int,
    held: _Held | None,
    keep: _Held | None,
    counters: OpCounters,
    on_chunk: Callable[[int], None],
) -> list[list[mpz | None]]:
    """Y's products of one group per cluster label: a task per chunk of records, the chunk
    results combined in a tree on the executor. ``held``: the chunks come from the cache,
    not the channel; ``keep``: where to cache the received chunks."""
    ct_bytes = public.ciphertext_bytes
    chunks = _chunks(n_records, chunk_size)
    if not chunks:
        return [[None] * size for size in cluster_sizes]

    def leaves() -> Iterator[Pending]:
        for index, (start, stop) in enumerate(chunks):
            if held is not None:
                payload = held.chunk(index)
            else:
                payload = channel.recv("tables.ciphertexts", max_bytes=(stop - start) * ct_bytes)
                counters.add(ciphertexts_received=stop - start)
                if keep is not None:
                    keep.add(payload)
            yield executor.submit(multiply_by_label, public.n, payload, chunk_labels(start, stop), cluster_sizes)
            if held is None:
                on_chunk(stop - start)

    products, multiplications = executor.tree_reduce(combine_products, leaves(), (public.n,), TREE_FANIN)
    counters.add(ciphertext_multiplications=multiplications)
    out = []
    for blob in products:
        values = (mpz(int.from_bytes(blob[i : i + ct_bytes], "big")) for i in range(0, len(blob), ct_bytes))
        out.append([None if v == 1 else v for v in values])
    return out


def _aggregate_side(
    channel: Channel,
    schema: Schema,
    codes: np.ndarray,
    columns: dict[str, int],
    plan: DirectionPlan,
    session: TablesSession,
    counters: OpCounters,
    progress: Progress | None,
    width: int,
) -> list[np.ndarray]:
    """Y's part: multiply the ciphertexts per configuration, mask, re-randomize, return."""
    config = session.config
    public = PublicKey.from_bytes(
        channel.recv("tables.public_key", max_bytes=(config.key_bits + 7) // 8), config.key_bits
    )
    ct_bytes = public.ciphertext_bytes
    (base,) = decode_ciphertexts(channel.recv("tables.randomizer_base", max_bytes=ct_bytes), 1, public, "tables.randomizer_base")
    base = check_randomizer_base(base, public, "tables.randomizer_base")
    n_records = codes.shape[0]
    nsquare = mpz(public.nsquare)
    n_key = mpz(public.n)
    executor = session.executor_for(n_records)
    sizes = [_configs(schema, sy) for _, sy in plan.pairs]
    total_returns = sum(sizes)
    # re-randomizers of the masked results: start early, they do not depend on the data
    spec = rerandomizer_spec(public, base, config.statistical_bits)
    randomizer_pieces = session.rerandomizers(spec, total_returns, executor)
    masks = RandomStream(session.seeds.next())
    accumulators: list[list[list[mpz | None]]] = []
    fresh_total = n_records * sum(not c for c in plan.cached)
    done = 0

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        if progress is not None:
            progress("aggregate", done, fresh_total)

    label_cards = {u: _label_cards(schema, codes, columns, u) for unions in plan.clusters for u in unions}
    for gi, group in enumerate(plan.groups):
        clusters = plan.clusters[gi]
        cluster_sizes = [math.prod(label_cards[u]) for u in clusters]
        digest = _group_digest(
            channel.session, plan.encrypter, group, n_records, config.chunk_size, public.n
        )
        held = session.held.get(digest) if plan.cached[gi] else None
        if plan.cached[gi] and held is None:
            raise ProtocolError("tables: peer's key does not match the cached ciphertexts")
        keep = None if plan.cached[gi] else session.hold(group, n_records * ct_bytes)

        def chunk_labels(start: int, stop: int, clusters: list[Subset] = clusters) -> np.ndarray:
            return _labels(codes[start:stop], columns, clusters, label_cards)

        accumulators.append(
            _aggregate_group(
                channel, executor, public, chunk_labels, cluster_sizes, n_records, config.chunk_size,
                held, keep, counters, advance,
            )
        )  # fmt: skip
        if keep is not None:
            session.held[digest] = keep
    # marginalise each cluster to the subsets it serves
    randomizers = []
    for piece in randomizer_pieces:
        blob = piece_payload(piece)
        randomizers.extend(
            mpz(int.from_bytes(blob[i : i + ct_bytes], "big")) for i in range(0, len(blob), ct_bytes)
        )
    counters.add(randomizers=len(randomizers))
    shares = []
    outgoing: list[mpz] = []
    mask_bits = width - 1
    for (gi, sy), size in zip(plan.pairs, sizes, strict=True):
        ci = plan.cluster_of[gi][sy]
        union = plan.clusters[gi][ci]
        union_cards = label_cards[union]
        unravelled = np.unravel_index(np.arange(math.prod(union_cards)), union_cards)
        states = tuple(unravelled[union.index(v)] for v in sy)
        # labels with the extra "missing" state of a variable of sy add to no configuration
        dropped = np.zeros(math.prod(union_cards), dtype=bool)
        for v, part in zip(sy, states, strict=True):
            dropped |= part >= schema.cardinality(v)
        projection = np.ravel_multi_index(
            tuple(np.where(dropped, 0, part) for part in states), schema.cardinalities(sy)
        )
        projection = np.where(dropped, MISSING, projection).tolist()
        products: list[mpz | None] = [None] * size
        for u, value in enumerate(accumulators[gi][ci]):
            if value is None:
                continue
            y = projection[u]
            if y == MISSING:
                continue
            if products[y] is None:
                products[y] = value
            else:
                products[y] = products[y] * value % nsquare
                counters.add(ciphertext_multiplications=1)
        slots = plan.groups[gi].slots
        table = np.empty((size, slots), dtype=np.uint64)
        for y in range(size):
            slot_masks = [masks.randbits(mask_bits) for _ in range(slots)]
            packed = sum(r << (width * s) for s, r in enumerate(slot_masks))
            rho = randomizers[len(outgoing)]
            mask_ct = (1 + packed * n_key) * rho % nsquare
            value = products[y]
            outgoing.append(mask_ct if value is None else value * mask_ct % nsquare)
            table[y] = [(-r) % SHARE_MODULUS for r in slot_masks]
        counters.add(encryptions=size, ciphertext_multiplications=size)
        shares.append(table)
    for i in range(0, len(outgoing), RETURN_PIECE):
        piece = outgoing[i : i + RETURN_PIECE]
        channel.send("tables.masked", encode_ciphertexts(piece, public))
        counters.add(ciphertexts_sent=len(piece))
    session.top_up_rerandomizers(spec, total_returns, executor)  # for the next phase as aggregator
    return shares


def _assemble(
    schema: Schema,
    families: list[Family],
    plan: DirectionPlan,
    pair_shares: list[np.ndarray],
    result: dict[Family, np.ndarray],
    complete_records: bool,
    y_counts: dict[Subset, np.ndarray] | None,
) -> None:
    """Cut each family's table out of the per-(group, S_Y) slot shares and order its axes.

    With complete records X's last configuration x* has no slot: every record with S_Y = y
    has one configuration of S_X, so alpha(x*, y) = n_y - sum_{x != x*} alpha(x, y), and
    the shares are X's -sum_x v_x and Y's n_y - sum_x (-r_x) (``y_counts``: Y's own n_y
    per configuration of each S_Y; None at X)."""
    pair_index = {pair: i for i, pair in enumerate(plan.pairs)}
    wanted = set(plan.pairs_needed)
    for family in families:
        sx = _canonical(schema, [v for v in family if schema.owner(v) == plan.encrypter])
        sy = _canonical(schema, [v for v in family if schema.owner(v) == plan.aggregator])
        if (sx, sy) not in wanted or family in result:
            continue
        table = np.empty((_configs(schema, sx), _configs(schema, sy)), dtype=np.uint64)
        for gi, offset, piece in plan.locate[sx]:
            slot_shares = pair_shares[pair_index[(gi, sy)]]
            table[piece.start : piece.stop, :] = slot_shares[:, offset : offset + piece.size].T
        if complete_records:  # uint64 arithmetic wraps mod 2^64, the share modulus
            others = table[:-1].sum(axis=0, dtype=np.uint64)
            base = np.zeros(table.shape[1], dtype=np.uint64) if y_counts is None else y_counts[sy].astype(np.uint64)
            table[-1] = base - others
        axes = sx + sy
        shaped = table.reshape(schema.cardinalities(sx) + schema.cardinalities(sy))
        result[family] = np.ascontiguousarray(np.transpose(shaped, [axes.index(v) for v in family]))


def reconstruct(alice: dict[Family, np.ndarray], bob: dict[Family, np.ndarray]) -> dict[Family, np.ndarray]:
    """Counts from both parties' shares. Only for tests and ``--reveal-for-testing`` runs."""
    return {f: (alice[f] + bob[f]).astype(np.uint64) for f in alice}
