"""Table lookup with a masked index: 1-out-of-N OT of a rotated, masked public table.

The table step of Lindell and Pinkas's ln protocol (Yang-Wright 5.4 and 6.5), the
1-out-of-N OT built from log N random OTs in the manner of Naor and Pinkas. Entries are
shared in the ring of their own width plus 2 bits and lifted as products are
(``lift.lift_share``), so each is sent in ceil((e + 2) / 8) bytes, and several tables and
indices share one round.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ppbn.kernels.lookup import chosen_pad_inputs, entry_pad_inputs, fold_pads
from ppbn.protocols import ring
from ppbn.protocols.arith.checks import MAX_BOUND_BITS, check_shares
from ppbn.protocols.arith.lift import WrapOTs, lift_share, split_share
from ppbn.protocols.arith.session import ArithSession

LOOKUP_CHUNK_HASHES = 1 << 20  # hashes per lookup message, to bound memory and message size
LOOKUP_ROUND_OTS = 1 << 20  # lookup OTs per round: alice holds 32 bytes of keys per OT
PAD_ROWS = 1 << 14  # hash rows alice builds at a time: 256 KB each of rows, tweaks, hashes
MAX_TABLE_BITS = 10

Table = Sequence[int] | np.ndarray
Index = np.ndarray | Sequence[int]


@dataclass(frozen=True)
class _Table:
    """A public table as sent: its entries, their width e (|entry| < 2^e; None for any ring
    element) and the bytes each masked entry takes on the wire."""

    values: np.ndarray
    entry_bits: int | None
    nbytes: int


def entry_width(entry_bits: int) -> int:
    """Bits m of the ring Z_2^m in which an entry below 2^e is shared (``lookup_batch``):
    T + 2^e lies in [0, 2^(e + 1)), so m = e + 2 leaves the top bit of the sum 0."""
    return entry_bits + 2


def entry_bytes(entry_bits: int | None) -> int:
    """Bytes of one masked entry of width e: bob's share in Z_2^m, m = ``entry_width``(e);
    16 for a full-ring table."""
    return 16 if entry_bits is None else (entry_width(entry_bits) + 7) // 8


def _check_table(table: Table) -> tuple[_Table, int]:
    """The table as sent and its index bits w; refused unless 2 <= 2^w <= 2^MAX_TABLE_BITS."""
    values = table if isinstance(table, np.ndarray) else ring.from_ints(table)
    values = check_shares(values, "table")
    size = values.shape[0]
    width = size.bit_length() - 1
    if size < 2 or size != 1 << width or width > MAX_TABLE_BITS:
        raise ValueError(
            f"table length must be a power of two in [2, 2^{MAX_TABLE_BITS}], got {size}"
        )
    entry_bits = table_entry_bits(ring.to_signed(values))
    return _Table(values, entry_bits, entry_bytes(entry_bits)), width


def table_entry_bits(table: Sequence[int]) -> int | None:
    """e with |entry| < 2^e for every entry, or None past MAX_BOUND_BITS (a uniform mask)."""
    bits = max(abs(v) for v in table).bit_length()
    return bits if bits <= MAX_BOUND_BITS else None


def _check_indices(index: Index, size: int) -> np.ndarray:
    """The masks or masked indices as int64, refused outside [0, size)."""
    idx = np.asarray(index).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ValueError(f"indices must lie in [0, {size})")
    return idx.astype(np.int64)


@dataclass
class _Request:
    """Tables read at one masked index: the unit that shares OTs and messages."""

    tables: list[_Table]
    index: np.ndarray  # alice's masks mu or bob's masked indices y
    width: int  # w: index bits, N = 2^w entries
    blocks: int  # 128-bit pad blocks per entry (all tables' bytes side by side)
    out: list[np.ndarray]

    @property
    def size(self) -> int:
        return 1 << self.width

    @property
    def entry_bytes(self) -> int:
        """Bytes of one entry number's masked entries, all tables side by side."""
        return sum(t.nbytes for t in self.tables)

    @property
    def entry_bits(self) -> np.ndarray:
        """(N, w) bits of every entry number."""
        return (np.arange(self.size)[:, None] >> np.arange(self.width)[None, :]) & 1


def _request(tables: Sequence[Table], index: Index) -> _Request:
    """One (tables, index) of ``lookup_batch`` checked: tables of one length, and outputs."""
    if not tables:
        raise ValueError("a lookup needs at least one table")
    checked = [_check_table(t) for t in tables]
    widths = {width for _, width in checked}
    if len(widths) != 1:
        raise ValueError("tables read at one index must have the same length")
    (width,) = widths
    idx = _check_indices(index, 1 << width)
    blocks = -(-sum(t.nbytes for t, _ in checked) // 16)
    out = [np.empty((idx.size, 2), dtype=np.uint64) for _ in checked]
    return _Request([t for t, _ in checked], idx, width, blocks, out)


def lookup(session: ArithSession, table: Table, index: Index) -> np.ndarray:
    """Shares of table[j] for K instances, where j = mu XOR y: alice passes her masks mu,
    bob the masked indices y (both K w-bit ints, N = 2^w = len(table), N <= 2^10).
    ``lookup_batch`` with one table; see there for the protocol and its security."""
    return lookup_batch(session, [([table], index)])[0][0]


def lookup_many(session: ArithSession, tables: Sequence[Table], index: Index) -> list[np.ndarray]:
    """Shares of T[j] for each of several tables of one length at the same masked index
    (one set of OTs, one message); ``lookup_batch`` with one request."""
    return lookup_batch(session, [(tables, index)])[0]


def lookup_batch(
    session: ArithSession, requests: Sequence[tuple[Sequence[Table], Index]]
) -> list[list[np.ndarray]]:
    """Shares of T[j] for every table T of every request (tables, index), in one round
    (while the OTs stay below LOOKUP_ROUND_OTS): per request, alice passes her masks mu,
    bob the masked indices y, j = mu XOR y (K w-bit ints, N = 2^w = len(T) <= 2^10).
    Returns one (K, 2) share vector per table, per request (of a full-ring table: alice's
    rho, bob's T[j] - rho).

    The 1-out-of-N OT of a rotated, masked table (Naor-Pinkas from log N random OTs; the
    table step of Lindell-Pinkas, Yang-Wright 5.4 and 6.5): per instance, w random OTs give
    alice key pairs (k_i^0, k_i^1) and bob k_i^(y_i) (``OTSender.pads``, the receiver's
    ``pads``: no correction message). For each table alice draws one rho per instance and
    sends T'[x] = T[x ^ mu] - rho for every entry x, encrypted under pad bytes of entry x:
    block b of the pad is XOR_i H(k_i^(x_i), tweak(instance, x, b, i)) (``FixedKeyHash``,
    tweaks unique per ArithSession), and the tables of a request take disjoint bytes of
    those blocks. Bob decrypts entry y: T'[y] = T[j] - rho is his share.

    Narrow entries (fewer bytes on the wire; docs/design.md, "Where the cost is"): for a table with |entry| < 2^e (e read off
    the public table, e <= MAX_BOUND_BITS) the entries are shared in Z_2^m, m = e + 2
    (``entry_width``): alice sends T[x ^ mu] + 2^e - rho mod 2^m in ``entry_bytes``(e) =
    ceil(m / 8) bytes, so the two shares add up to T[j] + 2^e, whose top bit is 0, and one
    ``lift_share`` per entry (its wrap OTs' u go out with bob's index OTs, alice's corrections
    after her tables, bob's bits with his next message) makes shares mod 2^128 (alice's
    rho - 2^e and more, bob's the rest). A wider table's entries are masked by a uniform
    rho mod 2^128 and take 16 bytes.

    Security: bob knows one key per position, so every pad but pad_y has a term H(k, t)
    under a key he does not know, with a tweak used once: those entries are uniform
    (tweakable correlation robustness, Guo et al. S&P 2020). His entry T[j] + 2^e - rho is
    uniform in Z_2^m whatever the entry (perfectly hiding; uniform mod 2^128 for a
    full-ring table), each table has its own rho and its own pad bytes, and the lift shows
    him only OT messages. Alice sees only the OT-extension messages and bob's lift bits,
    uniform (``lift_share``). Cost: K w OTs per request and one per narrow entry, K N
    sum(entry_bytes) bytes, K N w ceil(sum(entry_bytes) / 16) hashes.
    """
    plans = [_request(tables, index) for tables, index in requests]
    narrow = [
        (plan, i)
        for plan in plans
        for i, table in enumerate(plan.tables)
        if table.entry_bits is not None
    ]
    for plan in plans:
        session.counters.lookups += plan.index.size * len(plan.tables)
    lifted = sum(plan.index.size for plan, _ in narrow)
    session.settle()  # alice: bob's bits of earlier lifts come before his set-up and u
    (session.ot_sender() if session.is_alice else session.ot_receiver()).start()
    wrap = WrapOTs(session, lifted) if lifted else None  # bob's u first
    for group in _rounds(plans):
        ots = sum((stop - start) * plan.width for plan, start, stop in group)
        session.counters.ots += ots
        if session.is_alice:
            if wrap is not None:
                wrap.receive(session)
            sender = session.ot_sender()
            keys = np.stack(sender.pads(ots), axis=1)  # (ots, bit, 2)
        else:
            choices = np.concatenate(
                [plan.entry_bits[plan.index[start:stop]].ravel() for plan, start, stop in group]
            )
            keys = session.ot_receiver().pads(choices.astype(np.uint8))  # (ots, 2)
        used = 0
        for plan, start, stop in group:
            m = (stop - start) * plan.width
            mine = keys[used : used + m].reshape(stop - start, plan.width, *keys.shape[1:])
            used += m
            _serve(session, plan, start, stop, mine)
    if wrap is not None:
        values = []
        for plan, i in narrow:
            width = entry_width(plan.tables[i].entry_bits)
            values.append((split_share(plan.out[i], width), width, plan.tables[i].entry_bits))
        if not session.is_alice:  # bob's entries T[j] + 2^e - rho: part of his view
            for share, _, _ in values:
                session.opened("lookup", share.signed)
        for (plan, i), share in zip(narrow, lift_share(session, wrap, values), strict=True):
            plan.out[i] = share
    if not session.is_alice:
        for plan in plans:
            for table, share in zip(plan.tables, plan.out, strict=True):
                if table.entry_bits is None:
                    session.opened("lookup", share)
    return [plan.out for plan in plans]


def _rounds(plans: list[_Request]) -> Iterator[list[tuple[_Request, int, int]]]:
    """Instance ranges (plan, start, stop), grouped so that a group's OTs stay within
    LOOKUP_ROUND_OTS: each group is one OT call and then alice's messages, one round."""
    group: list[tuple[_Request, int, int]] = []
    ots = 0
    for plan in plans:
        start = 0
        while start < plan.index.size:
            room = (LOOKUP_ROUND_OTS - ots) // plan.width
            if room == 0:
                yield group
                group, ots = [], 0
                continue
            stop = min(plan.index.size, start + room)
            group.append((plan, start, stop))
            ots += (stop - start) * plan.width
            start = stop
    if group:
        yield group


def _serve(session: ArithSession, plan: _Request, start: int, stop: int, keys: np.ndarray) -> None:
    """Alice's messages (bob: their decryption) for instances [start, stop) of a request,
    chunked to LOOKUP_CHUNK_HASHES hashes; keys are (k, w, bit, 2) at alice, (k, w, 2) at bob."""
    per_chunk = max(1, LOOKUP_CHUNK_HASHES // (plan.size * plan.width * plan.blocks))
    for first in range(start, stop, per_chunk):
        last = min(stop, first + per_chunk)
        chunk = keys[first - start : last - start]
        base = session.next_tweaks((last - first) * plan.size * plan.blocks * plan.width)
        if session.is_alice:
            shares = _lookup_alice(session, plan, plan.index[first:last], chunk, base)
        else:
            shares = _lookup_bob(session, plan, plan.index[first:last], chunk, base)
        for out, share in zip(plan.out, shares, strict=True):
            out[first:last] = share


def _hashed_pads(
    session: ArithSession, rows: np.ndarray, tweaks: np.ndarray, width: int, shape: tuple
) -> np.ndarray:
    """Pads of ``shape`` + (16 blocks,) bytes: every run of ``width`` hash rows folded by
    XOR (``kernels.lookup.fold_pads``) after one call of the lookup's hash."""
    hashed = np.empty_like(rows)
    session.hash.hash_into(rows, tweaks, hashed)
    pads = np.empty((rows.shape[0] // width, 2), dtype=np.uint64)
    fold_pads(hashed, width, pads)
    return pads.view(np.uint8).reshape(*shape, -1)


def _entry_pads(session: ArithSession, plan: _Request, keys: np.ndarray, base: int) -> np.ndarray:
    """Alice's pads of every entry of each instance, (k, N, 16 blocks) bytes, from her keys
    (k, w, 2, 2): entry e uses the key of bit i of e (``kernels.lookup.entry_pad_inputs``).
    A few instances at a time, so the rows, tweaks and hashes stay in cache."""
    count = keys.shape[0]
    pads_per_instance = plan.size * plan.blocks  # one 16-byte pad block per entry and block
    hashes_per_instance = pads_per_instance * plan.width
    step = max(1, PAD_ROWS // hashes_per_instance)
    rows = np.empty((min(count, step) * hashes_per_instance, 2), dtype=np.uint64)
    tweaks, hashed = np.empty_like(rows), np.empty_like(rows)
    pads = np.empty((count * pads_per_instance, 2), dtype=np.uint64)
    keys = np.ascontiguousarray(keys)
    for first in range(0, count, step):
        last = min(count, first + step)
        n = (last - first) * hashes_per_instance
        base_here = np.uint64(base + first * hashes_per_instance)
        entry_pad_inputs(keys[first:last], base_here, plan.blocks, rows, tweaks)
        session.hash.hash_into(rows[:n], tweaks[:n], hashed[:n])
        fold_pads(
            hashed[:n], plan.width, pads[first * pads_per_instance : last * pads_per_instance]
        )
    return pads.view(np.uint8).reshape(count, plan.size, -1)


def _chosen_pads(
    session: ArithSession, plan: _Request, keys: np.ndarray, chosen: np.ndarray, base: int
) -> np.ndarray:
    """Bob's pad of entry y_j of each instance, (k, 16 blocks) bytes, from his keys (k, w, 2)."""
    count = keys.shape[0]
    n = count * plan.blocks * plan.width
    rows = np.empty((n, 2), dtype=np.uint64)
    tweaks = np.empty((n, 2), dtype=np.uint64)
    chosen_pad_inputs(
        np.ascontiguousarray(keys),
        np.ascontiguousarray(chosen, dtype=np.int64),
        np.uint64(base),
        plan.blocks,
        rows,
        tweaks,
    )
    return _hashed_pads(session, rows, tweaks, plan.width, (count,))


def _lookup_alice(
    session: ArithSession, plan: _Request, mu: np.ndarray, keys: np.ndarray, base: int
) -> list[np.ndarray]:
    """Alice: send every rotated, masked entry under its pad; her shares are the rhos."""
    k, size = mu.size, plan.size
    pads = _entry_pads(session, plan, keys, base)
    message = np.empty((k, size, plan.entry_bytes), dtype=np.uint8)
    rotation = np.arange(size)[None, :] ^ mu[:, None]
    shares, offset = [], 0
    for table in plan.tables:
        rho = session.random.uniform(k)
        entries = (
            table.values
            if table.entry_bits is None
            else ring.add(table.values, ring.constant(1 << table.entry_bits))
        )
        masked = ring.sub(entries[rotation], rho[:, None, :])  # (k, N, 2): T[e ^ mu] (+ 2^e) - rho
        message[:, :, offset : offset + table.nbytes] = masked.view(np.uint8)[:, :, : table.nbytes]
        offset += table.nbytes
        shares.append(rho)
    message ^= pads[:, :, : message.shape[2]]
    session.channel.send_array("arith.lookup", message)
    return shares


def _lookup_bob(
    session: ArithSession, plan: _Request, y: np.ndarray, keys: np.ndarray, base: int
) -> list[np.ndarray]:
    """Bob: decrypt entry y of each instance, the only pad he can compute; that is his share."""
    k, size = y.size, plan.size
    total = plan.entry_bytes
    pad = _chosen_pads(session, plan, keys, y, base)  # (k, 16 blocks)
    cipher = session.channel.recv_array("arith.lookup", np.uint8, (k, size, total))
    entry = cipher[np.arange(k), y] ^ pad[:, :total]
    shares, offset = [], 0
    for table in plan.tables:
        part = entry[:, offset : offset + table.nbytes]
        offset += table.nbytes
        full = np.zeros((k, 16), dtype=np.uint8)
        full[:, : table.nbytes] = (
            part  # a narrow entry's share counts mod 2^m only (``lift_share``)
        )
        shares.append(full.view(np.uint64))
    return shares
