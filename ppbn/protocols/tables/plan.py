"""The plan of a table phase: which party encrypts which family, and the slot layout.

Pure (no channel, no keys): both parties derive the same plan from public data (the
schema, n, the agreed ``TablesConfig`` and the cache state exchanged in the hello), so it
is computed, and tested, without running the protocol. Yang-Wright (Sec. 6.3) spend one
n-long scalar product per alpha (``per_alpha_cost``); the plan instead packs the one-hot
indicators of many of X's subsets into the slots of one ciphertext per record
(``Group``), and clusters Y's subsets so that a record costs one multiplication per
cluster, choosing the direction of each family by a cost model in multiplications mod N^2.
At the ``malicious`` level (``checks.py``) every configuration has a slot, a ciphertext
keeps one slot for the weights check's tags and sigma spare bits, and each (group, S_Y)
pair returns one more product.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ppbn.bn.schema import Schema
from ppbn.protocols.paillier import DEFAULT_KEY_BITS
from ppbn.protocols.tables.config import TablesConfig

ROLES = ("alice", "bob")

Subset = tuple[str, ...]
Family = tuple[str, ...]


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
        alice_configs = math.prod(
            schema.cardinality(v) for v in family if schema.owner(v) == "alice"
        )
        alphas += cells
        encryptions += cells * (n_records + 1)
        multiplications += alice_configs * n_records + cells
    ciphertexts = alphas * (n_records + 1)
    width = 2 * ((key_bits + 7) // 8)
    return MethodCost(
        "per-alpha", alphas, encryptions, alphas, multiplications, ciphertexts, ciphertexts * width
    )


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
    # malicious level: each pair also returns the product of the records missing in S_Y
    weights_check: bool = False

    @property
    def aggregator(self) -> str:
        return other(self.encrypter)


def other(role: str) -> str:
    """The peer's role: the aggregator of a direction whose encrypter is ``role``."""
    return "bob" if role == "alice" else "alice"


def configs(schema: Schema, subset: Sequence[str]) -> int:
    """Number of joint configurations of ``subset`` (1 for the empty subset)."""
    return math.prod(schema.cardinalities(subset))


def _encoded(schema: Schema, subset: Sequence[str], derived: bool) -> int:
    """Slots of X's subset: one per configuration, but the last when it is ``derived``
    (``TablesConfig.derives_last_configuration``: its count is Y's count of the
    configuration y less the others, ``exchange._assemble``)."""
    return configs(schema, subset) - int(derived)


def canonical(schema: Schema, names: Sequence[str]) -> Subset:
    """``names`` in schema order, so that both parties name a subset alike."""
    order = {n: i for i, n in enumerate(schema.names)}
    return tuple(sorted(names, key=order.__getitem__))


def slot_bits(n_records: int, statistical_bits: int) -> int:
    """Slot width: room for a count <= n, sigma bits of mask headroom, one guard bit."""
    return n_records.bit_length() + statistical_bits + 1


def slot_capacity(config: TablesConfig, width: int) -> int:
    """Count slots per ciphertext: a plaintext is below N >= 2^(key_bits - 1). At the
    ``malicious`` level one more slot holds the weights check's tags and sigma bits stay
    spare below bits(N), so that a masked sum wraps mod N with probability <= 2^-sigma
    (``checks.py``)."""
    if config.checks_peer:
        return (config.key_bits - 1 - config.statistical_bits) // width - 1
    return (config.key_bits - 1) // width


def _pack(schema: Schema, subsets: Sequence[Subset], capacity: int, derived: bool) -> list[Group]:
    """First-fit decreasing of the subsets' encoded configurations into ciphertexts of ``capacity`` slots."""
    pieces = []
    for subset in subsets:
        total = _encoded(schema, subset, derived)
        pieces.extend(
            Slice(subset, start, min(start + capacity, total))
            for start in range(0, total, capacity)
        )
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


def _cluster(
    schema: Schema, subsets: Sequence[Subset], limit: int
) -> tuple[list[Subset], dict[Subset, int]]:
    """Greedy first-fit of Y's subsets into unions with at most ``limit`` joint configurations."""
    clusters: list[Subset] = []
    cluster_of: dict[Subset, int] = {}
    for subset in sorted(subsets, key=lambda s: (-configs(schema, s), s)):
        for i, union in enumerate(clusters):
            merged = canonical(schema, set(union) | set(subset))
            if configs(schema, merged) <= limit:
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
    config: TablesConfig,
) -> DirectionPlan:
    derived = config.derives_last_configuration
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
        if sum(p.size for _, _, p in found) == _encoded(schema, subset, derived):
            locate[subset] = found
            used_cached.extend(gi for gi, _, _ in found if gi not in used_cached)
        else:
            fresh.append(subset)
    renumber = {gi: i for i, gi in enumerate(sorted(used_cached))}
    groups = [cached_groups[gi] for gi in sorted(used_cached)]
    cached = [True] * len(groups)
    locate = {s: [(renumber[gi], off, p) for gi, off, p in where] for s, where in locate.items()}
    for group in _pack(schema, fresh, capacity, derived):
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
    return DirectionPlan(
        encrypter,
        pairs_needed,
        groups,
        cached,
        locate,
        pairs,
        clusters,
        cluster_of,
        weights_check=config.checks_peer,
    )


# Relative cost of operations, in multiplications mod N^2 (measured on 2048-bit keys).
_COST_ENCRYPTION = 25
_COST_RETURN = 500  # a re-randomizer (~40) plus a decryption (~460)
_COST_RETURN_MALICIOUS = 2200  # a re-randomizer s^N (~1,730) plus a decryption
_COST_CIPHERTEXT_SENT = 2


def _plan_cost(schema: Schema, plan: DirectionPlan, n_records: int) -> int:
    fresh = sum(not c for c in plan.cached)
    records_mults = n_records * sum(len(c) for c in plan.clusters)
    marginal = sum(
        configs(schema, plan.clusters[g][plan.cluster_of[g][sy]]) for g, sy in plan.pairs
    )
    returns = sum(configs(schema, sy) + int(plan.weights_check) for _, sy in plan.pairs)
    sent = n_records * fresh + returns
    return (
        _COST_ENCRYPTION * n_records * fresh
        + records_mults
        + marginal
        + (_COST_RETURN_MALICIOUS if plan.weights_check else _COST_RETURN) * returns
        + _COST_CIPHERTEXT_SENT * sent
    )


@dataclass
class Plan:
    """Families each party counts alone, then the directions run in order (at most two)."""

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
    capacity = slot_capacity(config, slot_bits(n_records, config.statistical_bits))
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
        alice_part = canonical(schema, [v for v in family if schema.owner(v) == "alice"])
        bob_part = canonical(schema, [v for v in family if schema.owner(v) == "bob"])
        crossing.append((alice_part, bob_part))
    crossing = list(dict.fromkeys(crossing))
    if not crossing:
        return Plan(local, [])

    def covered(role: str, subset: Subset) -> bool:
        total = sum(p.size for g in cached[role] for p in g.slices if p.subset == subset)
        return total == _encoded(schema, subset, config.derives_last_configuration)

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
                    _direction_plan(
                        schema,
                        role,
                        pairs,
                        capacity,
                        cached[role],
                        cluster_limit,
                        config,
                    )
                )
        cost = sum(_plan_cost(schema, p, n_records) for p in plans)
        if best is None or cost < best[0]:
            best = (cost, plans)
    assert best is not None
    return Plan(local, best[1])
