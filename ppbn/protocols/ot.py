"""Oblivious transfer extension: SoftSpokenOT over the base OTs of ``base_ot``.

The KAPPA = 128 public-key base OTs (Chou-Orlandi over an RFC 3526 group, in
``ppbn.protocols.base_ot``) are run once per extension instance; this module stretches
them into any number of OTs with symmetric-key work only (AES-CTR PRGs, a fixed-key
hash and bit-matrix transposes), which is what Yao, the share arithmetic and PSI use.

Extension: SoftSpokenOT (Roy, CRYPTO 2022), semi-honest, with k = ``subfield_bits`` (8 by
default, or 4: ``SUBFIELD_CHOICES``, the job's ``ot_k``): the IKNP correlation (Ishai,
Kilian, Nissim and Petrank, CRYPTO 2003, Sec. 3: the sender holds q_j = t_j ^ c_j s for
its secret s and the receiver's t_j and choice c_j) from KAPPA / k small VOLEs instead of
KAPPA base-OT columns, so the receiver sends KAPPA / k bits per OT (16 at k = 8, 32 at
k = 4) instead of KAPPA (128). Set-up: the receiver grows a GGM tree of 2^k leaves per
chunk of k bits of s; by KAPPA base OTs in the reverse direction (k per chunk, each
carrying a level's XOR of left or right children under the base keys) the sender learns
every leaf but the one at its chunk of s (a punctured PRF). Each leaf is an AES-CTR PRG
stream; ``sender_block`` states the algebra. Correlated OT is the variant of Asharov,
Lindell, Schneider and Zohner (CCS 2013), Sec. 5.4: the sender's first message is H(q_j)
and only one 16-byte correction per OT is sent. The hash is the fixed-key tweakable hash
of ``ppbn.circuits.garble`` with the OT's index as tweak, keyed by the extension's
protocol id, the owning protocol instance (``instance``: Yao and the share arithmetic each
run their own extension over one channel) and the channel's session, so OT tweaks never
meet those of another protocol. The fold of the leaf streams and the 128 x m bit-matrix
transposition are compiled kernels (``ppbn.kernels.bits``); AES runs in OpenSSL.

Security (semi-honest): the sender sees u_i = R_i ^ c per chunk, where R_i is the XOR of
all the chunk's leaf streams, the one it lacks included: pseudorandom to it, so c stays
hidden; the receiver sees only the base OTs. The pads are IKNP's, so the correlation-robust
hash argument of IKNP03 / ALSZ13 is unchanged.

Blocks: a call of m OTs runs in blocks of ``CHUNK_OTS`` (one u message each; the sender
sends each block's corrections as soon as the block is done). A block is a
pure function of the base keys, its byte offset in the column streams (the AES-CTR PRG is
seekable: ``prg_columns``), its u or choice bits and its first OT index (``sender_block``,
``receiver_block``), so a call of at least ``inline_below`` OTs runs its blocks on the
party's own executor (``protocols.executor``) with the same bytes as inline. The base
keys, s and the choice bits go only to that party's executor. The secret s and the
base-OT exponents are drawn from the party's ``TaskSeeds`` (fresh OS seeds; fixed in tests).

Messages are 128-bit blocks held as (m, 2) uint64 arrays, the same layout as wire labels.
Both ends count completed OTs in ``ots``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.circuits.garble import FixedKeyHash
from ppbn.kernels.bits import fold_leaves, transpose_bits, xor_into_rows
from ppbn.protocols.base_ot import DEFAULT_DH_BITS, base_ot_receive, base_ot_send, dh_group
from ppbn.protocols.channel import Channel
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS, SUBFIELD_CHOICES
from ppbn.protocols.executor import ExecutorSource, executor_for
from ppbn.protocols.seeds import RandomStream, TaskSeeds

KAPPA = 128  # base OTs, the computational security parameter
# SoftSpokenOT's k: the receiver sends KAPPA / k bits per OT (IKNP is k = 1) and each party
# expands KAPPA / k x 2^k PRG streams instead of KAPPA or 2 KAPPA. k = 8: 2 bytes of u per
# OT, for 4,096 bits of AES-CTR output per OT; k = 4: 4 bytes of u for 512 bits, an eighth
# of the AES and of the fold. 8 sends the fewest bytes (the default); 4 spends the least
# CPU, for fast links (docs/decisions/ot-subfield-bits.md).
CHUNK_OTS = 1 << 17  # OTs per extension message: u is 0.5 MB at k = 8, y at most 4 MB
# OTs of one call below which its blocks stay in the job thread; by default every call (as
# yao.GC_INLINE_BELOW: the pool was slower here at every size; the policy's ot_inline_below)
OT_INLINE_BELOW = 1 << 40


def chunk_count(k: int) -> int:
    """SoftSpokenOT's small VOLEs at k, one per k bits of s: the receiver's u bits per OT."""
    return KAPPA // k


def extension_protocol(k: int) -> bytes:
    """The extension's protocol id at k, the first part of its hash keys."""
    return b"ppbn/ot/softspoken-k%d" % k


def check_subfield_bits(k: int) -> int:
    """k itself if the extension runs at it (``SUBFIELD_CHOICES``), else ValueError."""
    if isinstance(k, bool) or not isinstance(k, int) or k not in SUBFIELD_CHOICES:
        choices = " or ".join(map(str, SUBFIELD_CHOICES))
        raise ValueError(f"SoftSpokenOT's k must be {choices}, got {k!r}")
    return k


# -- OT extension (SoftSpokenOT) -------------------------------------------------------
class Prg:
    """AES-CTR keystream under a base-OT key; continues where the last batch stopped."""

    def __init__(self, key: bytes) -> None:
        self._stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()

    def fill(self, out: np.ndarray, zeros: memoryview) -> None:
        out[:] = np.frombuffer(self._stream.update(zeros[: out.size]), dtype=np.uint8)


class ColumnStreams:
    """The AES-128-CTR keystreams of 16-byte keys (one per column), positioned at a byte
    offset and read in order.

    The CTR counter block is a 128-bit big-endian integer starting at 0, so byte ``offset``
    sits in block offset // 16: a stream can be opened at any offset and yields the bytes a
    continuing stream would have. A party keeps one open across its inline calls (opening
    128 contexts costs ~1 ms a call); executor tasks open their own at their block's offset.
    """

    def __init__(self, keys: bytes, offset: int = 0) -> None:
        self.keys = keys
        self._open(offset)

    def _open(self, offset: int) -> None:
        counter = modes.CTR((offset // 16).to_bytes(16, "big"))
        skip = bytes(offset % 16)
        self._streams = [
            Cipher(algorithms.AES(self.keys[i : i + 16]), counter).encryptor()
            for i in range(0, len(self.keys), 16)
        ]
        for stream in self._streams:
            stream.update(skip)
        self.offset = offset

    def read(self, offset: int, width: int) -> np.ndarray:
        """Bytes [offset, offset + width) of each stream, as (columns, width) uint8."""
        (rows,) = [rows for _, rows in self.read_groups(offset, width, len(self._streams))]
        return rows[:, :width]

    def read_groups(self, offset: int, width: int, group: int) -> Iterator[tuple[int, np.ndarray]]:
        """Bytes [offset, offset + width) of the streams ``group`` at a time: yields (first
        stream, (group, stride) uint8) views of one reused buffer, rows padded to ``stride``
        = a multiple of 8 bytes (the padding is garbage), so a caller that reduces each
        group on uint64 words before the next keeps it in cache."""
        if offset != self.offset:
            self._open(offset)
        zeros = bytes(width)
        stride = -(-width // 8) * 8
        # each stream writes its row in place; update_into wants 15 spare bytes after it
        flat = np.empty(group * stride + 16, dtype=np.uint8)
        view = memoryview(flat)
        for first in range(0, len(self._streams), group):
            for row, stream in enumerate(self._streams[first : first + group]):
                stream.update_into(zeros, view[row * stride : row * stride + width + 16])
            yield first, flat[: group * stride].reshape(group, stride)
        self.offset = offset + width


def prg_columns(keys: bytes | ColumnStreams, offset: int, width: int) -> np.ndarray:
    """Bytes [offset, offset + width) of the keystream of each column (``ColumnStreams``):
    of an open set of streams, or of streams opened at ``offset`` for 16-byte ``keys``."""
    streams = keys if isinstance(keys, ColumnStreams) else ColumnStreams(keys, offset)
    return streams.read(offset, width)


def _tweaks(first: int, m: int) -> np.ndarray:
    return np.arange(first, first + m, dtype=np.uint64)


def _padded(m: int) -> int:
    return max(8, -(-m // 8) * 8)


def _blocks(m: int) -> list[tuple[int, int, int]]:
    """(start, size, column bytes) of each extension block of m OTs, CHUNK_OTS at most."""
    return [
        (start, min(CHUNK_OTS, m - start), _padded(min(CHUNK_OTS, m - start)) // 8)
        for start in range(0, m, CHUNK_OTS)
    ]


def _as_blocks(values: np.ndarray, m: int, what: str) -> np.ndarray:
    arr = np.ascontiguousarray(values, dtype=np.uint64)
    if arr.shape == (2,):
        arr = np.broadcast_to(arr, (m, 2))
    if arr.shape != (m, 2):
        raise ValueError(f"{what} must have shape ({m}, 2) of uint64, got {arr.shape}")
    return arr


def _extension_protocol(k: int, instance: bytes) -> bytes:
    return extension_protocol(k) + b"/" + instance


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(16, "little")


def _expand(seed: bytes) -> tuple[bytes, bytes]:
    """A GGM node's two children: AES-128 under the node's seed on the blocks 0 and 1."""
    out = (
        Cipher(algorithms.AES(seed), modes.ECB())
        .encryptor()
        .update(bytes(16) + (1).to_bytes(16, "big"))
    )
    return out[:16], out[16:]


def ggm_tree(root: bytes, k: int) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    """The 2^k leaves of the GGM tree (Goldreich, Goldwasser and Micali) under ``root``, and
    per level the XORs of its left and of its right children: what the sender of the
    punctured leaves needs (``punctured_leaves``). Node p's children are 2p and 2p + 1."""
    level, sums = [root], []
    for _ in range(k):
        level = [child for node in level for child in _expand(node)]
        left, right = bytes(16), bytes(16)
        for left_child, right_child in zip(level[0::2], level[1::2], strict=True):
            left, right = _xor(left, left_child), _xor(right, right_child)
        sums.append((left, right))
    return level, sums


def puncture_choices(point: int, k: int) -> list[int]:
    """Per level, which children's XOR a holder of every leaf but ``point`` needs: the side
    off the path to ``point`` (the path's side at level l is bit k - l of ``point``)."""
    return [1 - ((point >> (k - level)) & 1) for level in range(1, k + 1)]


def punctured_leaves(point: int, off_path: list[bytes], k: int) -> list[bytes]:
    """Every leaf of a GGM tree but ``point`` (16 zero bytes there), from the XOR of the
    off-path children at each level (``puncture_choices``): the sibling of the path node
    at a level is that XOR minus the known nodes on its side (a punctured PRF)."""
    known: dict[int, bytes] = {}
    for level in range(1, k + 1):
        children: dict[int, bytes] = {}
        for index, seed in known.items():
            children[2 * index], children[2 * index + 1] = _expand(seed)
        sibling = (point >> (k - level)) ^ 1
        value = off_path[level - 1]
        for index, seed in children.items():
            if index & 1 == sibling & 1:
                value = _xor(value, seed)
        children[sibling] = value
        known = children
    return [known.get(x, bytes(16)) for x in range(1 << k)]


def chunk_points(s_bits: np.ndarray, k: int) -> np.ndarray:
    """The leaf each chunk of the sender's s punctures: bits s[ik .. ik + k) as an integer."""
    return np.packbits(s_bits.reshape(chunk_count(k), k), axis=1, bitorder="little")[:, 0]


def chunk_sums(
    keys: bytes | ColumnStreams, offset: int, width: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """(S, T) of each chunk's 2^k leaf streams at bytes [offset, offset + width): S[i, b]
    the XOR of chunk i's streams over the leaves x with bit b set, T[i] the XOR of all;
    (KAPPA / k, k, stride) and (KAPPA / k, stride) uint8, columns past ``width`` garbage
    (stride as ``ColumnStreams.read_groups``). One chunk at a time, folded while in cache
    (``kernels.bits.fold_leaves``)."""
    streams = keys if isinstance(keys, ColumnStreams) else ColumnStreams(keys, offset)
    stride = -(-width // 8) * 8
    leaves_per_chunk = 1 << k
    sums = np.empty((chunk_count(k), k, stride), dtype=np.uint8)
    totals = np.empty((chunk_count(k), stride), dtype=np.uint8)
    for first, leaves in streams.read_groups(offset, width, leaves_per_chunk):
        chunk = first // leaves_per_chunk
        fold_leaves(
            leaves.view(np.uint64), sums[chunk].view(np.uint64), totals[chunk].view(np.uint64)
        )
    return sums, totals


def sender_block(
    keys: bytes | ColumnStreams,
    s_bits: np.ndarray,
    offset: int,
    u: np.ndarray,
    size: int,
    protocol: bytes,
    session: bytes,
    first: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """One extension block at the sender, a pure function for the sender's executor
    (SoftSpokenOT, Roy, CRYPTO 2022, semi-honest, with the IKNP03 / ALSZ13 Sec. 5.4 hashing).

    Chunk i of s is the point d_i = s[ik .. ik + k) the sender's leaves miss. With r_x the
    leaf streams, w_ib = XOR over x of bit b of (x ^ d_i) r_x needs no r_{d_i} and equals
    v_ib ^ s_ib R_i, the receiver's v_ib and R_i = XOR of all r_x; the receiver sent
    u_i = R_i ^ c, so the column q^(ik + b) = w_ib ^ s_ib u_i = v_ib ^ s_ib c: IKNP's
    q_j = t_j ^ c_j s in rows. The pads are H(q_j, j) and H(q_j ^ s, j) of OTs ``first`` ..
    ``first + size - 1``."""
    # w_ib: the leaves x with bit b of x ^ d_i set, i.e. x_b != d_ib: S_ib if d_ib = 0, else
    # the leaves with bit b clear, T_i ^ S_ib (the punctured leaf r_{d_i} is in neither sum)
    width = u.shape[1]
    with_bit, total = chunk_sums(keys, offset, width, k)
    cols = with_bit.reshape(KAPPA, -1)
    # d_ib, and the rows where q adds u_i (see above)
    xor_into_rows(cols, s_bits, total[:, :width] ^ u)
    q_rows = transpose_bits(cols, size).view(np.uint64)
    s_block = np.packbits(s_bits, bitorder="little").view(np.uint64)
    hasher = FixedKeyHash(protocol, session)
    tweaks = _tweaks(first, size)
    return hasher.hash(q_rows, tweaks), hasher.hash(q_rows ^ s_block, tweaks)


def receiver_block(
    keys: bytes | ColumnStreams,
    offset: int,
    choices: np.ndarray,
    protocol: bytes,
    session: bytes,
    first: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """One extension block at the receiver, a pure function for the receiver's executor:
    the message u_i = R_i ^ c of each chunk (``sender_block``) and the pads H(t_j, j) of its
    OTs, t^(ik + b) = v_ib."""
    size = choices.size
    padded = _padded(size)
    bits = np.zeros(padded, dtype=np.uint8)
    bits[:size] = choices
    width = padded // 8
    with_bit, total = chunk_sums(keys, offset, width, k)
    t_cols = with_bit.reshape(KAPPA, -1)
    u = total[:, :width] ^ np.packbits(bits, bitorder="little")
    t_rows = transpose_bits(t_cols, size).view(np.uint64)
    return u, FixedKeyHash(protocol, session).hash(t_rows, _tweaks(first, size))


class OTSender:
    """OT extension sender: holds the message pairs and s (and is the base-OT receiver).

    ``dh_bits`` selects the base-OT group (``dh_bits_for`` of the job's Paillier key size);
    ``subfield_bits`` is SoftSpokenOT's k (``SUBFIELD_CHOICES``, the job's ``ot_k``);
    ``instance`` names the protocol that owns this extension (e.g. b"yao"), so two
    extensions over one channel hash under different keys. The receiver passes the same.
    ``seeds`` (``protocols.seeds``) supplies this party's randomness (the secret s and the
    base-OT exponents); ``executor`` is this party's executor, used for calls of at least
    ``inline_below`` OTs: each block (``sender_block``) is a task. The base keys and s go
    to that executor only: it is this party's own.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        dh_bits: int = DEFAULT_DH_BITS,
        subfield_bits: int = DEFAULT_SUBFIELD_BITS,
        instance: bytes = b"",
        seeds: TaskSeeds | None = None,
        executor: ExecutorSource | None = None,
        inline_below: int = OT_INLINE_BELOW,
    ) -> None:
        self.channel = channel
        self.group = dh_group(dh_bits)
        self.k = check_subfield_bits(subfield_bits)
        self.instance = instance
        self.ots = 0
        self._seeds = seeds if seeds is not None else TaskSeeds()
        self._executor = executor
        self._inline_below = inline_below
        self._keys: ColumnStreams | None = None
        self._offset = 0  # bytes of each column's keystream used so far

    def _setup(self) -> ColumnStreams:
        """s, and by KAPPA base OTs every leaf of each chunk's GGM tree but the chunk's point."""
        stream = RandomStream(self._seeds.next())
        self._s_bits = np.unpackbits(
            np.frombuffer(stream.bytes(KAPPA // 8), dtype=np.uint8), bitorder="little"
        )
        k = self.k
        points = chunk_points(self._s_bits, k)
        choices = np.array(
            [c for point in points.tolist() for c in puncture_choices(point, k)], dtype=np.uint8
        )
        keys = base_ot_receive(self.channel, choices, self.group, self.instance, stream)
        masked = self.channel.recv_array("ot.ext.ggm", np.uint8, (KAPPA, 2, 16))
        leaves = []
        for chunk, point in enumerate(points.tolist()):
            rows = range(chunk * k, (chunk + 1) * k)
            off_path = [_xor(masked[row, choices[row]].tobytes(), keys[row]) for row in rows]
            leaves += punctured_leaves(point, off_path, k)
        self._keys = ColumnStreams(b"".join(leaves))
        return self._keys

    @property
    def started(self) -> bool:
        return self._keys is not None

    def start(self) -> None:
        """Run the set-up now (else it runs in the first call), so that its messages come
        before any other message this party sends or awaits (``arith.bit_mul`` runs an
        extension each way at once)."""
        if self._keys is None:
            self._setup()

    def _pad_blocks(self, m: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """Receive the receiver's u message of each block of the next m OTs; yield the
        block's rows and its pads (H(q_j), H(q_j ^ s)), each (size, 2) uint64, as soon as
        the block is done. The caller adds m to ``ots`` once every block is through."""
        streams = self._keys if self._keys is not None else self._setup()
        blocks = _blocks(m)
        offsets = np.cumsum([0] + [width for _, _, width in blocks]) + self._offset
        self._offset = int(offsets[-1])
        protocol, session = _extension_protocol(self.k, self.instance), self.channel.session
        executor = executor_for(self._executor, m, self._inline_below)
        keys = (
            streams if executor.kind == "inline" else streams.keys
        )  # open streams stay in this thread
        first, chunks, k = self.ots, chunk_count(self.k), self.k

        def tasks():
            for (start, size, width), offset in zip(blocks, offsets.tolist(), strict=False):
                u = self.channel.recv_array("ot.ext.u", np.uint8, (chunks, width))
                yield keys, self._s_bits, offset, u, size, protocol, session, first + start, k

        for (start, size, _), (p0, p1) in zip(
            blocks, executor.map(sender_block, tasks()), strict=True
        ):
            yield slice(start, start + size), p0, p1

    def pads(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Random OT: receive the receiver's u messages of the next m OTs; return
        (H(q_j), H(q_j ^ s)), each (m, 2) uint64: the receiver holds the pad of its choice
        bit only (``OTReceiver.pads``)."""
        pad0 = np.empty((m, 2), dtype=np.uint64)
        pad1 = np.empty((m, 2), dtype=np.uint64)
        for rows, p0, p1 in self._pad_blocks(m):
            pad0[rows], pad1[rows] = p0, p1
        self.ots += m
        return pad0, pad1

    def send(self, m0: np.ndarray, m1: np.ndarray) -> None:
        """Chosen-message OT of (m, 2) uint64 blocks: the receiver learns m_c[j] for its c[j].
        Each block's ciphertexts go as soon as its pads are known (one message a block)."""
        m = np.asarray(m0).shape[0]
        m0, m1 = _as_blocks(m0, m, "m0"), _as_blocks(m1, m, "m1")
        for rows, p0, p1 in self._pad_blocks(m):
            cipher = np.empty((p0.shape[0], 2, 2), dtype=np.uint64)
            np.bitwise_xor(m0[rows], p0, out=cipher[:, 0])
            np.bitwise_xor(m1[rows], p1, out=cipher[:, 1])
            self.channel.send_array("ot.ext.y", cipher)
        self.ots += m

    def send_correlated(self, m: int, delta: np.ndarray) -> np.ndarray:
        """Correlated OT: returns random x0 (m, 2); the receiver gets x0 ^ c[j] delta[j].
        Each block's corrections go as soon as its pads are known (one message a block)."""
        delta = _as_blocks(delta, m, "delta")
        x0 = np.empty((m, 2), dtype=np.uint64)
        for rows, p0, p1 in self._pad_blocks(m):
            p1 ^= p0
            p1 ^= delta[rows]
            self.channel.send_array("ot.ext.y", p1)
            x0[rows] = p0
        self.ots += m
        return x0


class OTReceiver:
    """OT extension receiver: holds the choice bits and the GGM trees (and is the base-OT sender).

    ``dh_bits``, ``instance``, ``seeds``, ``executor`` and ``inline_below`` as for
    ``OTSender`` (each block a ``receiver_block`` task); both ends must agree on the first two.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        dh_bits: int = DEFAULT_DH_BITS,
        subfield_bits: int = DEFAULT_SUBFIELD_BITS,
        instance: bytes = b"",
        seeds: TaskSeeds | None = None,
        executor: ExecutorSource | None = None,
        inline_below: int = OT_INLINE_BELOW,
    ) -> None:
        self.channel = channel
        self.group = dh_group(dh_bits)
        self.k = check_subfield_bits(subfield_bits)
        self.instance = instance
        self.ots = 0
        self._seeds = seeds if seeds is not None else TaskSeeds()
        self._executor = executor
        self._inline_below = inline_below
        self._keys: ColumnStreams | None = None
        self._offset = 0

    def _setup(self) -> ColumnStreams:
        """A GGM tree per chunk; its level XORs go to the sender under the base-OT keys."""
        stream = RandomStream(self._seeds.next())
        keys0, keys1 = base_ot_send(self.channel, KAPPA, self.group, self.instance, stream)
        masked = np.empty((KAPPA, 2, 16), dtype=np.uint8)
        leaves = []
        for chunk in range(chunk_count(self.k)):
            chunk_leaves, sums = ggm_tree(stream.bytes(16), self.k)
            leaves += chunk_leaves
            for level, (left, right) in enumerate(sums):
                row = chunk * self.k + level
                masked[row, 0] = np.frombuffer(_xor(left, keys0[row]), dtype=np.uint8)
                masked[row, 1] = np.frombuffer(_xor(right, keys1[row]), dtype=np.uint8)
        self.channel.send_array("ot.ext.ggm", masked)
        self._keys = ColumnStreams(b"".join(leaves))
        return self._keys

    @property
    def started(self) -> bool:
        return self._keys is not None

    def start(self) -> None:
        """Run the set-up now (as ``OTSender.start``)."""
        if self._keys is None:
            self._setup()

    def _pads(self, choices: np.ndarray) -> np.ndarray:
        """Send u for each block; return the pads H(t_j, j) (m, 2) uint64."""
        streams = self._keys if self._keys is not None else self._setup()
        m = choices.shape[0]
        blocks = _blocks(m)
        offsets = np.cumsum([0] + [width for _, _, width in blocks]) + self._offset
        self._offset = int(offsets[-1])
        protocol, session = _extension_protocol(self.k, self.instance), self.channel.session
        executor = executor_for(self._executor, m, self._inline_below)
        keys = (
            streams if executor.kind == "inline" else streams.keys
        )  # open streams stay in this thread
        tasks = (
            (
                keys,
                offset,
                choices[start : start + size],
                protocol,
                session,
                self.ots + start,
                self.k,
            )
            for (start, size, _), offset in zip(blocks, offsets.tolist(), strict=False)
        )
        pads = np.empty((m, 2), dtype=np.uint64)
        for (start, size, _), (u, pad) in zip(
            blocks, executor.map(receiver_block, tasks), strict=True
        ):
            self.channel.send_array("ot.ext.u", u)
            pads[start : start + size] = pad
        return pads

    def pads(self, choices: np.ndarray | list[int]) -> np.ndarray:
        """Random OT: send u for the choices c and return H(t_j) = H(q_j ^ c_j s), (m, 2)
        uint64, the pad of the sender's ``pads`` that matches each choice bit."""
        c = self._choices(choices)
        out = self._pads(c)
        self.ots += c.size
        return out

    def _choices(self, choices: np.ndarray | list[int]) -> np.ndarray:
        c = np.asarray(choices, dtype=np.uint8).ravel()
        if c.size and c.max() > 1:
            raise ValueError("choice bits must be 0 or 1")
        return c

    def receive(self, choices: np.ndarray | list[int]) -> np.ndarray:
        """Chosen-message OT: returns m_{c[j]}[j] as (m, 2) uint64."""
        c = self._choices(choices)
        m = c.size
        out = self._pads(c)
        for start, size, _ in _blocks(m):
            cipher = self.channel.recv_array("ot.ext.y", np.uint64, (size, 2, 2))
            rows = slice(start, start + size)
            out[rows] ^= np.where(c[rows, None] == 1, cipher[:, 1], cipher[:, 0])
        self.ots += m
        return out

    def receive_correlated(self, choices: np.ndarray | list[int]) -> np.ndarray:
        """Correlated OT: returns x0[j] ^ c[j] delta[j] as (m, 2) uint64."""
        c = self._choices(choices)
        m = c.size
        out = self._pads(c)
        for start, size, _ in _blocks(m):
            correction = self.channel.recv_array("ot.ext.y", np.uint64, (size, 2))
            rows = slice(start, start + size)
            correction &= np.negative(c[rows].astype(np.uint64))[:, None]
            out[rows] ^= correction
        self.ots += m
        return out
