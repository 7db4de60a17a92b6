"""The table phase's messages over the Channel: hello, packed encryptions, masked returns.

One pass of Yang-Wright's Sec. 6.3 counts for all families (the package doc tells the
steps): X (the key owner) streams its packed indicator ciphertexts, Y multiplies them per
configuration of its subsets, masks and re-randomizes each product and returns it, X
decrypts; each slot then holds X's share, and Y keeps the negated mask as its own. Every
received message is validated here, and a mismatch raises ProtocolError. At the
``malicious`` level the same messages carry the defences of ``checks.py``: a key proof,
perfect masks, and the weights check's tags, extra products and mask sums.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from gmpy2 import mpz

from ppbn.bn.schema import Schema
from ppbn.circuits.garble import length_prefixed
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.constants import SECURITY_LEVELS
from ppbn.protocols.executor import Executor, Pending
from ppbn.protocols.paillier import (
    OpCounters,
    PublicKey,
    check_randomizer_base,
    combine_products,
    decode_ciphertexts,
    decrypt_bytes,
    encode_ciphertexts,
    encrypt_bit_rows,
    multiply_by_label,
    nth_power_spec,
    rerandomizer_spec,
)
from ppbn.protocols.security import level_rank
from ppbn.protocols.seeds import RandomStream
from ppbn.protocols.tables.checks import (
    SHARE_MODULUS,
    check_weights,
    mask_pair,
    plaintext_sum,
    prove_key,
    send_mask_sums,
    tag_slot,
    tagged_positions,
    verified_key,
)
from ppbn.protocols.tables.config import TablesConfig
from ppbn.protocols.tables.inputs import (
    MISSING,
    bit_positions,
    chunk_bounds,
    config_index,
    label_cardinalities,
    record_labels,
)
from ppbn.protocols.tables.plan import (
    ROLES,
    DirectionPlan,
    Family,
    Group,
    Subset,
    canonical,
    configs,
    make_plan,
    other,
    slot_bits,
)
from ppbn.protocols.tables.session import TASK_PIECE, HeldGroup, TablesSession, piece_payload

PROTOCOL_VERSION = 4  # what each version changed: CHANGELOG.md, "Daemon protocol versions"
TABLES_PROTOCOL = b"ppbn/tables"
MAX_CACHE_ENTRIES = 1 << 16
RETURN_PIECE = 4096  # masked ciphertexts per message
SETTINGS_FIELD = 5  # the hello's field of complete records and security level
TREE_FANIN = 16  # chunk products combined per node of the aggregation tree

Progress = Callable[[str, int, int], None]


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
    """This party's uint64 shares of the count table of every family (see the package doc).

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


def _check_inputs(
    schema: Schema, role: str, codes: np.ndarray, families: Sequence[Family]
) -> list[Family]:
    owned = schema.owned_by(role)
    if codes.ndim != 2 or codes.shape[1] != len(owned):
        raise ValueError(
            f"codes must have shape (n, {len(owned)}) for {role}'s variables, got {codes.shape}"
        )
    for j, var in enumerate(owned):
        column = codes[:, j]
        if column.size and (column.min() < MISSING or column.max() >= var.cardinality):
            raise ValueError(
                f"codes of {var.name!r} must lie in [0, {var.cardinality}) or be {MISSING} (missing)"
            )
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
    # the settings field: bit 0 complete records, the bits above the security level's rank
    # (0 at semi-honest, so that level's hello is the one from before the level existed)
    settings = int(config.complete_records) | level_rank(config.security) << 1
    mine = [
        PROTOCOL_VERSION,
        n_records,
        config.key_bits,
        config.statistical_bits,
        config.chunk_size,
        settings,
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
    for index, (name, a, b) in enumerate(zip(names, mine, theirs, strict=False)):
        if a != b and index == SETTINGS_FIELD and (a ^ b) & 1 == 0:
            rank = b >> 1
            peer = SECURITY_LEVELS[rank] if rank < len(SECURITY_LEVELS) else rank
            raise ProtocolError(
                f"tables: the security level differs between the parties (peer {peer}, here {config.security})"
            )
        if a != b:
            raise ProtocolError(
                f"tables: the {name} differs between the parties (peer {b}, here {a})"
            )
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
        raise ValueError(
            "tables: a missing cell, but complete records were agreed (only available-case allows them)"
        )
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
            pair_shares = _encrypt_side(
                channel, schema, codes, columns, direction, session, counters, progress, width
            )
        else:
            pair_shares = _aggregate_side(
                channel, schema, codes, columns, direction, session, counters, progress, width
            )
        y_counts = None
        derived = config.derives_last_configuration
        if derived and direction.aggregator == role:
            aggregated = {sy for _, sy in direction.pairs}
            y_counts = {
                sy: np.bincount(
                    config_index(schema, codes, columns, sy), minlength=configs(schema, sy)
                )
                for sy in aggregated
            }
        _assemble(schema, families, direction, pair_shares, result, derived, y_counts)
    return result


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
    """X's part: send the public key, stream packed encryptions, decrypt the masked products
    (at the malicious level: prove the key, tag the records, check the weights first)."""
    config = session.config
    keys = session.own_keys()
    encryptor = session.encryptor
    assert encryptor is not None
    channel.send("tables.public_key", keys.public.to_bytes())
    if config.checks_peer:
        prove_key(channel, keys)
    else:
        channel.send("tables.randomizer_base", encode_ciphertexts([encryptor.base], keys.public))
    n_records = codes.shape[0]
    executor = session.executor_for(n_records)
    total = n_records * sum(not c for c in plan.cached)
    done = 0
    digests = [
        _group_digest(
            channel.session, plan.encrypter, group, n_records, config.chunk_size, keys.public.n
        )
        for group in plan.groups
    ]
    # malicious level: per group, the sum of X's plaintexts (``checks.check_weights``)
    group_sums = [
        session.sent_sums[d] if cached and plan.weights_check else 0
        for d, cached in zip(digests, plan.cached, strict=True)
    ]

    def piece_tasks(gi: int, group: Group) -> Iterator[tuple]:
        """Each chunk's encryptions in tasks of ``TASK_PIECE`` records (a chunk is one
        message; its pieces spread over the pool)."""
        for start, stop in chunk_bounds(n_records, config.chunk_size):
            positions = bit_positions(schema, codes[start:stop], columns, group, width)
            if plan.weights_check:
                tag_bit = width * tag_slot(group)
                positions = tagged_positions(positions, session.seeds.next(), tag_bit)
                group_sums[gi] += plaintext_sum(positions)
            for low in range(0, stop - start, TASK_PIECE):
                rows = positions[low : low + TASK_PIECE]
                seed = session.seeds.next()
                count = rows.shape[0]
                pooled = encryptor.take_pooled(count) if encryptor.pooled >= count else b""
                yield encryptor.spec, rows, seed, pooled

    def chunk_blobs(gi: int, group: Group) -> Iterator[bytes]:
        pieces = executor.map(encrypt_bit_rows, piece_tasks(gi, group))
        for start, stop in chunk_bounds(n_records, config.chunk_size):
            yield b"".join(itertools.islice(pieces, -(-(stop - start) // TASK_PIECE)))

    for gi, group in enumerate(plan.groups):
        if plan.cached[gi]:
            continue
        for blob in chunk_blobs(gi, group):
            rows = len(blob) // keys.public.ciphertext_bytes
            channel.send("tables.ciphertexts", blob)
            counters.add(encryptions=rows, randomizers=rows, ciphertexts_sent=rows)
            done += rows
            if progress is not None:
                progress("encrypt", done, total)
        session.sent[digests[gi]] = group
        if plan.weights_check:
            session.sent_sums[digests[gi]] = group_sums[gi]
    # masked products, in plan order (malicious: each pair's last one for the weights check)
    sizes = [configs(schema, sy) for _, sy in plan.pairs]
    returns = [size + int(plan.weights_check) for size in sizes]
    total_returns = sum(returns)
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
    if plan.weights_check:
        check_weights(channel, keys.public, plan, returns, values, group_sums)
    slot_mask = (1 << width) - 1
    shares = []
    position = 0
    for (gi, _), size, count in zip(plan.pairs, sizes, returns, strict=True):
        slots = plan.groups[gi].slots
        table = np.empty((size, slots), dtype=np.uint64)
        for y in range(size):
            m = values[position + y]
            table[y] = [((m >> (width * s)) & slot_mask) % SHARE_MODULUS for s in range(slots)]
        position += count
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
    held: HeldGroup | None,
    keep: HeldGroup | None,
    counters: OpCounters,
    on_chunk: Callable[[int], None],
) -> list[list[mpz | None]]:
    """Y's products of one group per cluster label: a task per chunk of records, the chunk
    results combined in a tree on the executor. ``held``: the chunks come from the cache,
    not the channel; ``keep``: where to cache the received chunks."""
    ct_bytes = public.ciphertext_bytes
    chunks = chunk_bounds(n_records, chunk_size)
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
            yield executor.submit(
                multiply_by_label, public.n, payload, chunk_labels(start, stop), cluster_sizes
            )
            if held is None:
                on_chunk(stop - start)

    products, multiplications = executor.tree_reduce(
        combine_products, leaves(), (public.n,), TREE_FANIN
    )
    counters.add(ciphertext_multiplications=multiplications)
    out = []
    for blob in products:
        values = (
            mpz(int.from_bytes(blob[i : i + ct_bytes], "big"))
            for i in range(0, len(blob), ct_bytes)
        )
        out.append([None if v == 1 else v for v in values])
    return out


def _peer_key(
    channel: Channel, config: TablesConfig, session: TablesSession, n_records: int
) -> tuple[PublicKey, tuple]:
    """Y: X's public key and the spec of the re-randomizers of the returned products: g^b
    over X's announced base (semi-honest: a product multiplies each record's ciphertext in
    at most once, ``rerandomizer_spec``), or s^N once the key proof passed (malicious)."""
    data = channel.recv("tables.public_key", max_bytes=(config.key_bits + 7) // 8)
    if config.checks_peer:
        public = verified_key(channel, data, config.key_bits, session.seeds.next())
        return public, nth_power_spec(public)
    public = PublicKey.from_bytes(data, config.key_bits)
    (base,) = decode_ciphertexts(
        channel.recv("tables.randomizer_base", max_bytes=public.ciphertext_bytes),
        1,
        public,
        "tables.randomizer_base",
    )
    base = check_randomizer_base(base, public, "tables.randomizer_base")
    return public, rerandomizer_spec(public, base, config.statistical_bits, max(1, n_records))


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
    n_records = codes.shape[0]
    public, spec = _peer_key(channel, config, session, n_records)
    ct_bytes = public.ciphertext_bytes
    nsquare = mpz(public.nsquare)
    n_key = mpz(public.n)
    executor = session.executor_for(n_records)
    sizes = [configs(schema, sy) for _, sy in plan.pairs]
    total_returns = sum(sizes) + len(plan.pairs) * int(plan.weights_check)
    # re-randomizers of the masked results: start early, they do not depend on the data
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

    label_cards = {
        u: label_cardinalities(schema, codes, columns, u)
        for unions in plan.clusters
        for u in unions
    }
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
            return record_labels(codes[start:stop], columns, clusters, label_cards)

        accumulators.append(
            _aggregate_group(
                channel,
                executor,
                public,
                chunk_labels,
                cluster_sizes,
                n_records,
                config.chunk_size,
                held,
                keep,
                counters,
                advance,
            )
        )
        if keep is not None:
            session.held[digest] = keep
    # marginalise each cluster to the subsets it serves
    randomizers = []
    for piece in randomizer_pieces:
        blob = piece_payload(piece)
        randomizers.extend(
            mpz(int.from_bytes(blob[i : i + ct_bytes], "big"))
            for i in range(0, len(blob), ct_bytes)
        )
    counters.add(randomizers=len(randomizers))
    rerandomizers = iter(randomizers)
    shares = []
    outgoing: list[mpz] = []
    mask_sums: list[int] = []
    mask_bits = width - 1
    for (gi, sy), size in zip(plan.pairs, sizes, strict=True):
        ci = plan.cluster_of[gi][sy]
        products, missing = _marginalise(
            schema,
            accumulators[gi][ci],
            plan.clusters[gi][ci],
            label_cards,
            sy,
            nsquare,
            plan.weights_check,
            counters,
        )
        slots = plan.groups[gi].slots
        if plan.weights_check:
            returned, table, mask_sum = mask_pair(
                products, missing, masks, rerandomizers, public, slots, width
            )
            outgoing.extend(returned)
            mask_sums.append(mask_sum)
            counters.add(encryptions=len(returned), ciphertext_multiplications=len(returned))
            shares.append(table)
            continue
        table = np.empty((size, slots), dtype=np.uint64)
        for y in range(size):
            slot_masks = [masks.randbits(mask_bits) for _ in range(slots)]
            packed = sum(r << (width * s) for s, r in enumerate(slot_masks))
            mask_ct = (1 + packed * n_key) * next(rerandomizers) % nsquare
            value = products[y]
            outgoing.append(mask_ct if value is None else value * mask_ct % nsquare)
            table[y] = [(-r) % SHARE_MODULUS for r in slot_masks]
        counters.add(encryptions=size, ciphertext_multiplications=size)
        shares.append(table)
    for i in range(0, len(outgoing), RETURN_PIECE):
        piece = outgoing[i : i + RETURN_PIECE]
        channel.send("tables.masked", encode_ciphertexts(piece, public))
        counters.add(ciphertexts_sent=len(piece))
    if plan.weights_check:
        send_mask_sums(channel, mask_sums, public)
    session.top_up_rerandomizers(spec, total_returns, executor)  # for the next phase as aggregator
    return shares


def _marginalise(
    schema: Schema,
    accumulator: list[mpz | None],
    union: Subset,
    label_cards: dict[Subset, tuple[int, ...]],
    sy: Subset,
    nsquare: mpz,
    with_missing: bool,
    counters: OpCounters,
) -> tuple[list[mpz | None], mpz | None]:
    """Y's products per configuration of ``sy`` from its cluster's products per label
    (None: empty); ``with_missing``: also the product of the labels missing in ``sy``,
    which the weights check needs (``checks.py``), else None."""
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
    products: list[mpz | None] = [None] * configs(schema, sy)
    missing: mpz | None = None
    for u, value in enumerate(accumulator):
        if value is None:
            continue
        y = projection[u]
        if y == MISSING:
            if with_missing and missing is None:
                missing = value
            elif with_missing:
                missing = missing * value % nsquare
                counters.add(ciphertext_multiplications=1)
            continue
        if products[y] is None:
            products[y] = value
        else:
            products[y] = products[y] * value % nsquare
            counters.add(ciphertext_multiplications=1)
    return products, missing


def _assemble(
    schema: Schema,
    families: list[Family],
    plan: DirectionPlan,
    pair_shares: list[np.ndarray],
    result: dict[Family, np.ndarray],
    derived: bool,
    y_counts: dict[Subset, np.ndarray] | None,
) -> None:
    """Cut each family's table out of the per-(group, S_Y) slot shares and order its axes.

    With ``derived`` (``TablesConfig.derives_last_configuration``) X's last configuration x* has no slot: every record with S_Y = y
    has one configuration of S_X, so alpha(x*, y) = n_y - sum_{x != x*} alpha(x, y), and
    the shares are X's -sum_x v_x and Y's n_y - sum_x (-r_x) (``y_counts``: Y's own n_y
    per configuration of each S_Y; None at X)."""
    pair_index = {pair: i for i, pair in enumerate(plan.pairs)}
    wanted = set(plan.pairs_needed)
    for family in families:
        sx = canonical(schema, [v for v in family if schema.owner(v) == plan.encrypter])
        sy = canonical(schema, [v for v in family if schema.owner(v) == plan.aggregator])
        if (sx, sy) not in wanted or family in result:
            continue
        table = np.empty((configs(schema, sx), configs(schema, sy)), dtype=np.uint64)
        for gi, offset, piece in plan.locate[sx]:
            slot_shares = pair_shares[pair_index[(gi, sy)]]
            table[piece.start : piece.stop, :] = slot_shares[:, offset : offset + piece.size].T
        if derived:  # uint64 arithmetic wraps mod 2^64, the share modulus
            others = table[:-1].sum(axis=0, dtype=np.uint64)
            base = (
                np.zeros(table.shape[1], dtype=np.uint64)
                if y_counts is None
                else y_counts[sy].astype(np.uint64)
            )
            table[-1] = base - others
        axes = sx + sy
        shaped = table.reshape(schema.cardinalities(sx) + schema.cardinalities(sy))
        result[family] = np.ascontiguousarray(np.transpose(shaped, [axes.index(v) for v in family]))


def reconstruct(
    alice: dict[Family, np.ndarray], bob: dict[Family, np.ndarray]
) -> dict[Family, np.ndarray]:
    """Counts from both parties' shares. Only for tests and ``--reveal-for-testing`` runs."""
    return {f: (alice[f] + bob[f]).astype(np.uint64) for f in alice}
