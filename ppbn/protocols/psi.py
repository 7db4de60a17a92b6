"""Private set intersection of record ids: OT-extension OPRF PSI in the style of KKRT16.

Kolesnikov, Kumaresan, Rosulek and Trieu, "Efficient Batched Oblivious PRF with
Applications to Private Set Intersection", CCS 2016 (KKRT16). Two parties hold lists of
record ids; both learn which of their own records lie in the intersection, in one
canonical order, and the size of the other's list; nothing else about the other's ids.

Roles: alice is the PSI *receiver* R (n1 ids), bob the PSI *sender* S (n2 ids).

Pieces, and where each comes from:

- Id hashing (``hash_ids``). Every id (UTF-8) becomes a 128-bit value by CBC-MAC under an
  AES key derived from the 32-byte per-job ``key``: the id's length sits in the first
  block, so the encodings are prefix-free and CBC-MAC is a PRF on them (Bellare, Kilian,
  Rogaway, JCSS 2000; Petrank-Rackoff 2000). The key makes hashes of different jobs
  unlinkable; the hashes never leave the party (only OPRF outputs do).
- Cuckoo hashing at R, simple hashing at S (Pinkas, Schneider, Zohner, USENIX Security
  2014/15 and TOPS 2018, Sec. 3 "hashing to bins"; KKRT16 Sec. 5 and Fig. 6): three hash
  functions h_1..h_3 (AES under a second derived key) into m = ceil(1.27 n1) bins (more
  for small sets, ``bin_count``), no stash. R places each id in exactly one bin with a
  vectorised random-walk insertion (rounds of evictions, ``cuckoo_insert``); S does not
  build bins: it evaluates the OPRF of bin h_i(y) on y || i for every y and i.
- Batched OPRF (KKRT16 Sec. 3, Fig. 2, and Sec. 4 "1-out-of-infinity OT"): the IKNP
  extension (Ishai-Kilian-Nissim-Petrank, CRYPTO 2003) where R's choice of each bin is a
  k = 512-bit codeword C(x || i) of a pseudorandom code (KKRT16 Sec. 4.2; AES under a third
  derived key, four blocks) instead of one bit. k base OTs (S chooses s in {0,1}^k) come
  from ppbn's own OT extension (``ppbn.protocols.ot``: 128 Chou-Orlandi base OTs, then
  512 extended OTs carrying random seeds). R sends u_i = G(k0_i) ^ G(k1_i) ^ c_i per
  column; S gets q_j = t_j ^ (C(r_j) & s) for each bin j. R's OPRF output for bin j is
  H(j, t_j); S's for (j, y) is H(j, q_j ^ (C(y) & s)). The matrix transposes are ppbn's
  compiled bit transposes (``kernels.bits.transpose_bits``); G is AES-CTR.
- H is the XOR over the four 128-bit words of the tweakable fixed-key hash of
  ``ppbn.circuits.garble`` (TMMO of Guo, Katz, Wang, Yu, S&P 2020) with tweak 4 j + word,
  as KKRT implementations compress a 512-bit row with fixed-key AES; heuristic in the
  ideal-permutation model, like the rest of ppbn's fixed-key hashing.
- Output (KKRT16 Sec. 5, Fig. 6): S sends, for each i, the set {H(h_i(y), ...) : y in Y}
  in a fresh random order, truncated to ell = 40 + ceil(log2(n1 n2)) bits (rounded up to
  bytes), so a false match has probability at most 2^-40 over all n1 n2 comparisons.
- Membership for S (not in KKRT16, which gives output to R only): R sends back the
  positions, in S's shuffled lists, of the values that matched. S maps them through its
  permutation to its own records. S learns which of its own records are shared, and
  their number; the positions carry nothing else because the order was S's random
  permutation. This step trusts R to report honestly (semi-honest model).

Security model: semi-honest (honest-but-curious) parties, as in the rest of ppbn
(docs/design.md, "Security model"; leakage in "Record alignment and PSI"). Each party learns the other's set size, the intersection size and which of
its own records are in the intersection. R's view is the base-OT messages and the 3 n2
OPRF values, which are pseudorandom for ids outside the intersection (KKRT16 Thm. 2);
S's view is the base-OT messages, the u matrix (pseudorandom: masked by G(k1)) and the
matched positions. A malicious peer can make the result wrong but, by the checks on
every message (sizes, claimed set size, ranges, repeats), cannot crash or hang a party:
it gets a one-line ``ProtocolError``.

Cuckoo failure: an insertion that cannot place every id raises ``RuntimeError`` locally
(the peer then sees the channel close). Three functions and 1.27 n bins without a stash is
the parameter set that Pinkas-Schneider-Tkachenko-Yanai (EUROCRYPT 2019) take from the
experiments of Chen-Laine-Rindal (CCS 2017) for a failure probability of about 2^-40 on
large sets; ppbn does not re-derive it, and gives sets below 2^16 ids more room (1.5 n,
and 2 n below 2^10) because small tables fail more often. The failure depends only on
R's ids and the per-job key; a new job (new key) draws new hash functions.
"""

from __future__ import annotations

import hashlib
import math
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.circuits.garble import FixedKeyHash, length_prefixed
from ppbn.kernels.bits import transpose_bits
from ppbn.protocols.base_ot import DEFAULT_DH_BITS
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.ot import OTReceiver, OTSender, Prg

PROTOCOL = b"ppbn/psi/kkrt16"
RECEIVER, SENDER = "alice", "bob"
CODE_BITS = 512  # k: codeword width (KKRT16 Sec. 4.2 needs k >~ 3.5 kappa; 4 AES blocks)
CODE_BYTES = CODE_BITS // 8
CODE_WORDS = CODE_BITS // 64
HASHES = 3  # cuckoo hash functions (PSZ, KKRT16 Sec. 5)
STAT_BITS = 40  # statistical security of the truncated OPRF outputs
CHUNK_BINS = 1 << 16  # bins per u message: 512 x 8 KB = 4 MB
CHUNK_VALUES = 1 << 18  # OPRF values per batch / message
MAX_CUCKOO_ROUNDS = 20_000
DEFAULT_MAX_PEER_RECORDS = 50_000_000


@dataclass(frozen=True)
class Alignment:
    """The result of ``align_records`` for one party."""

    positions: np.ndarray  # int64 indices into the caller's ids, in the canonical order
    peer_set_size: int  # size of the other party's id set

    @property
    def size(self) -> int:
        """Number of records in the intersection."""
        return int(self.positions.shape[0])


# -- keys and primitives ------------------------------------------------------------------
def derive_subkey(key: bytes, label: bytes) -> bytes:
    """A 16-byte key for one purpose, derived from the per-job key (domain separated)."""
    return hashlib.sha256(b"ppbn psi v1" + length_prefixed(PROTOCOL, label, key)).digest()[:16]


def _ecb(key: bytes, blocks: np.ndarray) -> np.ndarray:
    """AES-128-ECB of (n, 2) uint64 blocks in one call; returns a new (n, 2) array."""
    data = np.ascontiguousarray(blocks, dtype=np.uint64)
    out = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(data.tobytes())
    return np.frombuffer(out, dtype=np.uint64).reshape(data.shape).copy()


def hash_ids(ids: Sequence[str], key: bytes) -> np.ndarray:
    """128-bit keyed hashes of the ids: CBC-MAC-AES over len(id) (8 bytes) || UTF-8 id,
    zero-padded to whole blocks. Ids of the same block count are hashed in one batch.
    Returns (n, 2) uint64."""
    encoded = list(map(str.encode, ids))  # UTF-8
    n = len(encoded)
    out = np.empty((n, 2), dtype=np.uint64)
    if n == 0:
        return out
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
    blocks = (lengths + 8 + 15) // 16
    aes = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    for nb in np.unique(blocks):
        idx = np.flatnonzero(blocks == nb)
        width = int(nb) * 16
        buf = np.zeros((idx.size, width), dtype=np.uint8)
        buf[:, :8] = lengths[idx].astype("<u8").view(np.uint8).reshape(-1, 8)
        if width > 8:
            group = encoded if idx.size == n else [encoded[i] for i in idx]
            body = np.array(group, dtype=f"S{width - 8}")
            buf[:, 8:] = body.view(np.uint8).reshape(idx.size, width - 8)
        words = buf.view(np.uint64).reshape(idx.size, int(nb), 2)
        state = np.zeros((idx.size, 2), dtype=np.uint64)
        for b in range(int(nb)):
            state = np.frombuffer(aes.update((state ^ words[:, b]).tobytes()), dtype=np.uint64)
            state = state.reshape(-1, 2)
        out[idx] = state
    return out


def bin_count(n: int) -> int:
    """Cuckoo table size m for n receiver ids: 1.27 n (three hash functions, no stash; see
    the module doc), 1.5 n below 2^16 and 2 n below 2^10 ids, at least n + 16, rounded up
    to a multiple of 8 (the bit transposes work on bytes)."""
    if n <= 0:
        return 0
    factor = 1.27 if n >= 1 << 16 else 1.5 if n >= 1 << 10 else 2.0
    m = max(int(math.ceil(factor * n)), n + 16)
    return -(-m // 8) * 8


def cuckoo_bins(hashed: np.ndarray, key: bytes, m: int) -> np.ndarray:
    """The three candidate bins of each hashed id: (n, 3) int64 in [0, m)."""
    e = _ecb(key, hashed)
    lo32 = np.uint64(0xFFFFFFFF)
    words = np.stack([e[:, 0] & lo32, e[:, 0] >> np.uint64(32), e[:, 1] & lo32], axis=1)
    return ((words * np.uint64(m)) >> np.uint64(32)).astype(np.int64)


def cuckoo_insert(
    bins: np.ndarray, m: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Cuckoo hashing with 3 choices by parallel random walk: in each round every pending
    id tries its current choice; one id per contested bin wins and evicts the occupant;
    losers and evicted ids move to a random other choice. Returns (table, choice): table[j]
    the id in bin j or -1, choice[i] the hash function id i ended up in."""
    n = bins.shape[0]
    table = np.full(m, -1, dtype=np.int64)
    choice = np.zeros(n, dtype=np.int64)
    pending = rng.permutation(n)
    for _ in range(MAX_CUCKOO_ROUNDS):
        if pending.size == 0:
            return table, choice
        target = bins[pending, choice[pending]]
        uniq, first = np.unique(target, return_index=True)
        winners = pending[first]
        lost = np.ones(pending.size, dtype=bool)
        lost[first] = False
        evicted = table[uniq]
        evicted = evicted[evicted >= 0]
        table[uniq] = winners
        moving = np.concatenate([pending[lost], evicted])
        choice[moving] = (choice[moving] + rng.integers(1, HASHES, size=moving.size)) % HASHES
        pending = rng.permutation(moving)
    raise RuntimeError(
        f"psi: cuckoo hashing could not place {pending.size} of {n} ids in {m} bins "
        "(a rare event; a new job draws new hash functions)"
    )


_TAGS = np.array(
    [
        [(np.uint64(4 * i + w + 1) << np.uint64(56)) for w in range(CODE_WORDS // 2)]
        for i in range(HASHES + 1)
    ],
    dtype=np.uint64,
)  # (hash index or 3 = empty bin, code block) -> tweak in the high byte of the high word


def codewords(hashed: np.ndarray, index: np.ndarray | int, key: bytes) -> np.ndarray:
    """Pseudorandom code C(x || i) (KKRT16 Sec. 4.2): AES_key(x ^ tag(i, b)), b = 0..3.
    Returns (n, 8) uint64 = n rows of 512 bits."""
    n = hashed.shape[0]
    blocks = np.repeat(hashed[:, None, :], CODE_WORDS // 2, axis=1)
    blocks[:, :, 1] ^= _TAGS[index] if np.ndim(index) else _TAGS[int(index)][None, :]
    return _ecb(key, blocks.reshape(-1, 2)).reshape(n, CODE_WORDS)


def _out_bytes(n1: int, n2: int) -> int:
    bits = STAT_BITS + math.ceil(math.log2(max(2, n1 * n2)))
    return (bits + 7) // 8


class _RowHash:
    """H(j, row) = XOR_b TMMO(row_b, 4 j + b), truncated to ``width`` bytes."""

    def __init__(self, key: bytes, session: bytes, width: int) -> None:
        self._hash = FixedKeyHash(PROTOCOL + b"/oprf/" + derive_subkey(key, b"oprf"), session)
        self.width = width

    def __call__(self, rows: np.ndarray, bins: np.ndarray) -> np.ndarray:
        n = rows.shape[0]
        tweaks = (
            bins.astype(np.uint64)[:, None] * np.uint64(4) + np.arange(4, dtype=np.uint64)
        ).ravel()
        h = self._hash.hash(np.ascontiguousarray(rows).reshape(-1, 2), tweaks).reshape(n, 4, 2)
        folded = h[:, 0] ^ h[:, 1] ^ h[:, 2] ^ h[:, 3]
        return np.ascontiguousarray(folded.view(np.uint8).reshape(n, 16)[:, : self.width])


def _canonical(positions: np.ndarray, hashed: np.ndarray) -> np.ndarray:
    """Order intersection records by their keyed id hash (same on both sides)."""
    order = np.lexsort((hashed[positions, 1], hashed[positions, 0]))
    return positions[order].astype(np.int64)


def _as_words(rows: np.ndarray) -> np.ndarray:
    """(n, L <= 16) byte rows as (n, 2) uint64, zero-padded."""
    return np.pad(rows, ((0, 0), (0, 16 - rows.shape[1]))).view(np.uint64)


def _match(needles: np.ndarray, hay: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact matches of (k, L) byte rows among (n, L) byte rows: (needle index, hay index)."""
    if needles.shape[0] == 0 or hay.shape[0] == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    nk, hk = _as_words(needles), _as_words(hay)
    order = np.lexsort((hk[:, 1], hk[:, 0]))
    sorted_hk = hk[order]
    pos = np.searchsorted(sorted_hk[:, 0], nk[:, 0])
    # walk forward over equal first words (rarely more than one step)
    found_needle, found_hay = [], []
    active = np.arange(nk.shape[0])
    while active.size:
        p = pos[active]
        inside = p < sorted_hk.shape[0]
        active, p = active[inside], p[inside]
        same_hi = sorted_hk[p, 0] == nk[active, 0]
        active, p = active[same_hi], p[same_hi]
        hit = sorted_hk[p, 1] == nk[active, 1]
        found_needle.append(active[hit])
        found_hay.append(order[p[hit]])
        active = active[~hit]
        pos[active] += 1
    return np.concatenate(found_needle), np.concatenate(found_hay)


def _has_repeats(hashed: np.ndarray) -> bool:
    """Whether two rows of (n, 2) uint64 are equal: sort the first word, compare fully only
    where first words repeat."""
    first = np.sort(hashed[:, 0])
    repeated = np.unique(first[1:][first[1:] == first[:-1]])
    if repeated.size == 0:
        return False
    rows = hashed[np.isin(hashed[:, 0], repeated)]
    return np.unique(rows, axis=0).shape[0] < rows.shape[0]


def _note(progress: Callable[[str], None] | None, message: str) -> None:
    if progress is not None:
        progress(message)


# -- the protocol -------------------------------------------------------------------------
def align_records(
    channel: Channel,
    role: str,
    ids: Sequence[str],
    key: bytes,
    *,
    max_peer_records: int = DEFAULT_MAX_PEER_RECORDS,
    ledger: Ledger | None = None,
    progress: Callable[[str], None] | None = None,
    dh_bits: int = DEFAULT_DH_BITS,
) -> Alignment:
    """Private set intersection of ``ids`` with the peer's ids (KKRT16, see the module doc).

    ``role`` is "alice" (PSI receiver) or "bob" (PSI sender); ``key`` the 32-byte per-job
    secret both parties share. Returns the positions in ``ids`` of the shared records, in
    the canonical order (by keyed id hash) that the peer computes too, and the peer's set
    size. An empty intersection is a valid result. ``dh_bits`` is the base-OT group
    (``base_ot.dh_bits_for`` of the job's key size). Local input errors (duplicate ids, a bad
    key or role) are ValueError; a misbehaving peer raises ProtocolError.
    """
    if role not in (RECEIVER, SENDER):
        raise ValueError(f"psi: role must be 'alice' or 'bob', got {role!r}")
    if not isinstance(key, bytes) or len(key) != 32:
        raise ValueError("psi: key must be 32 bytes")
    n = len(ids)
    _note(progress, f"psi: hashing {n:,} ids")
    hashed = hash_ids(ids, derive_subkey(key, b"id"))
    if _has_repeats(hashed):
        raise ValueError("psi: the record ids contain duplicates")
    party = _Receiver if role == RECEIVER else _Sender
    state = party(channel, hashed, key, max_peer_records, progress, dh_bits)
    positions, peer = state.run()
    positions = _canonical(positions, hashed)
    if ledger is not None:
        source = "psi (KKRT16 OT-extension PSI)"
        ledger.record("psi_peer_set_size", peer, source)
        ledger.record("psi_intersection_size", int(positions.size), source)
        ledger.record(
            "psi_membership",
            {"own_records": n, "own_records_in_intersection": int(positions.size)},
            source,
        )
    _note(progress, f"psi: {positions.size:,} records in the intersection")
    return Alignment(positions=positions, peer_set_size=int(peer))


class _Party:
    def __init__(
        self,
        channel: Channel,
        hashed: np.ndarray,
        key: bytes,
        max_peer: int,
        progress: Callable[[str], None] | None,
        dh_bits: int,
    ) -> None:
        self.channel = channel
        self.hashed = hashed
        self.key = key
        self.max_peer = max_peer
        self.progress = progress
        self.dh_bits = dh_bits
        self.code_key = derive_subkey(key, b"code")
        self.bin_key = derive_subkey(key, b"bins")

    def _check_size(self, claimed: int) -> int:
        if claimed > self.max_peer:
            raise ProtocolError(
                f"message 'psi.size': peer claims {claimed:,} records, over the limit {self.max_peer:,}"
            )
        return int(claimed)


class _Receiver(_Party):
    """PSI receiver (alice): cuckoo hashing, OPRF receiver, finds the matches."""

    def run(self) -> tuple[np.ndarray, int]:
        ch, n1 = self.channel, self.hashed.shape[0]
        ch.send_u64s("psi.size", [n1])
        (n2,) = ch.recv_u64s("psi.size", 1)
        n2 = self._check_size(n2)
        if n1 == 0 or n2 == 0:
            return np.empty(0, np.int64), n2
        m = bin_count(n1)
        width = _out_bytes(n1, n2)
        _note(self.progress, f"psi: cuckoo hashing {n1:,} ids into {m:,} bins")
        rng = np.random.default_rng(secrets.randbits(128))
        bins = cuckoo_bins(self.hashed, self.bin_key, m)
        table, choice = cuckoo_insert(bins, m, rng)
        my_bin = bins[np.arange(n1), choice]

        # base OTs: k random seed pairs to the sender (who chooses s)
        seeds = np.frombuffer(os.urandom(CODE_BITS * 32), dtype=np.uint64).reshape(2, CODE_BITS, 2)
        OTSender(ch, dh_bits=self.dh_bits, instance=PROTOCOL).send(seeds[0], seeds[1])
        prg0 = [Prg(seeds[0, i].tobytes()) for i in range(CODE_BITS)]
        prg1 = [Prg(seeds[1, i].tobytes()) for i in range(CODE_BITS)]

        # bin inputs: the id placed there with its hash index, or a random dummy
        filled = table >= 0
        inputs = np.frombuffer(os.urandom(16 * m), dtype=np.uint64).reshape(m, 2).copy()
        inputs[filled] = self.hashed[table[filled]]
        index = np.full(m, HASHES, dtype=np.int64)
        index[filled] = choice[table[filled]]

        _note(self.progress, f"psi: OPRF extension over {m:,} bins")
        t_rows = np.empty((m, CODE_WORDS), dtype=np.uint64)
        for start in range(0, m, CHUNK_BINS):
            size = min(CHUNK_BINS, m - start)
            w = size // 8
            code = codewords(
                inputs[start : start + size], index[start : start + size], self.code_key
            )
            u = transpose_bits(code.view(np.uint8))  # (k, w) columns
            t_cols = np.empty((CODE_BITS, w), dtype=np.uint8)
            g1 = np.empty((CODE_BITS, w), dtype=np.uint8)
            zeros = memoryview(bytes(w))
            for i in range(CODE_BITS):
                prg0[i].fill(t_cols[i], zeros)
                prg1[i].fill(g1[i], zeros)
            u ^= g1
            u ^= t_cols
            ch.send_array("psi.u", u)
            t_rows[start : start + size] = transpose_bits(t_cols).view(np.uint64)
        del inputs, index

        row_hash = _RowHash(self.key, ch.session, width)
        mine = np.empty((n1, width), dtype=np.uint8)
        for start in range(0, n1, CHUNK_VALUES):
            sl = slice(start, start + CHUNK_VALUES)
            mine[sl] = row_hash(t_rows[my_bin[sl]], my_bin[sl])
        del t_rows

        _note(self.progress, f"psi: matching against {HASHES} x {n2:,} peer values")
        matched_items, matched_flat = [], []
        for i in range(HASHES):
            theirs = np.empty((n2, width), dtype=np.uint8)
            for start in range(0, n2, CHUNK_VALUES):
                size = min(CHUNK_VALUES, n2 - start)
                theirs[start : start + size] = ch.recv_array("psi.values", np.uint8, (size, width))
            items = np.flatnonzero(choice == i)
            hit_items, hit_pos = _match(mine[items], theirs)
            matched_items.append(items[hit_items])
            matched_flat.append(hit_pos + i * n2)
        items = np.concatenate(matched_items)
        flat = np.concatenate(matched_flat).astype(np.uint64)
        # one position per own record (a repeat would need an OPRF collision)
        items, first = np.unique(items, return_index=True)
        positions = np.sort(flat[first])
        ch.send_u64s("psi.match_count", [positions.size])
        for start in range(0, positions.size, CHUNK_VALUES):
            ch.send_array("psi.matches", positions[start : start + CHUNK_VALUES])
        return items, n2


class _Sender(_Party):
    """PSI sender (bob): OPRF sender, sends its values, learns its matched records."""

    def run(self) -> tuple[np.ndarray, int]:
        ch, n2 = self.channel, self.hashed.shape[0]
        (n1,) = ch.recv_u64s("psi.size", 1)
        n1 = self._check_size(n1)
        ch.send_u64s("psi.size", [n2])
        if n1 == 0 or n2 == 0:
            return np.empty(0, np.int64), n1
        m = bin_count(n1)
        width = _out_bytes(n1, n2)

        s_bytes = np.frombuffer(os.urandom(CODE_BYTES), dtype=np.uint8)
        s_bits = np.unpackbits(s_bytes, bitorder="little")
        seeds = OTReceiver(ch, dh_bits=self.dh_bits, instance=PROTOCOL).receive(s_bits)
        prgs = [Prg(seeds[i].tobytes()) for i in range(CODE_BITS)]
        flip = s_bits.astype(bool)

        _note(self.progress, f"psi: OPRF extension over {m:,} bins")
        q_rows = np.empty((m, CODE_WORDS), dtype=np.uint64)
        for start in range(0, m, CHUNK_BINS):
            size = min(CHUNK_BINS, m - start)
            w = size // 8
            u = ch.recv_array("psi.u", np.uint8, (CODE_BITS, w))
            q_cols = np.empty((CODE_BITS, w), dtype=np.uint8)
            zeros = memoryview(bytes(w))
            for i in range(CODE_BITS):
                prgs[i].fill(q_cols[i], zeros)
            q_cols[flip] ^= u[flip]
            q_rows[start : start + size] = transpose_bits(q_cols).view(np.uint64)

        s_row = s_bytes.view(np.uint64)
        bins = cuckoo_bins(self.hashed, self.bin_key, m)
        row_hash = _RowHash(self.key, ch.session, width)
        rng = np.random.default_rng(secrets.randbits(128))
        perms = []
        _note(self.progress, f"psi: sending {HASHES} x {n2:,} OPRF values")
        for i in range(HASHES):
            values = np.empty((n2, width), dtype=np.uint8)
            for start in range(0, n2, CHUNK_VALUES):
                sl = slice(start, start + CHUNK_VALUES)
                b = bins[sl, i]
                rows = codewords(self.hashed[sl], i, self.code_key)
                rows &= s_row
                rows ^= q_rows[b]
                values[sl] = row_hash(rows, b)
            perm = rng.permutation(n2)
            perms.append(perm)
            shuffled = values[perm]
            for start in range(0, n2, CHUNK_VALUES):
                ch.send_array("psi.values", shuffled[start : start + CHUNK_VALUES])
        del q_rows

        (count,) = ch.recv_u64s("psi.match_count", 1)
        if count > min(n1, n2):
            raise ProtocolError(
                f"message 'psi.match_count': {count:,} matches, more than the smaller set ({min(n1, n2):,})"
            )
        flat = np.empty(count, dtype=np.uint64)
        for start in range(0, count, CHUNK_VALUES):
            size = min(CHUNK_VALUES, count - start)
            flat[start : start + size] = ch.recv_array("psi.matches", np.uint64, (size,))
        if flat.size and (flat[-1] >= np.uint64(HASHES * n2) or np.any(flat[1:] <= flat[:-1])):
            raise ProtocolError(
                "message 'psi.matches': positions out of range or not strictly increasing"
            )
        which, pos = np.divmod(flat.astype(np.int64), n2)
        own = np.empty(flat.size, dtype=np.int64)
        for i in range(HASHES):
            sel = which == i
            own[sel] = perms[i][pos[sel]]
        if np.unique(own).size != own.size:
            raise ProtocolError("message 'psi.matches': one record reported twice")
        return own, n1
