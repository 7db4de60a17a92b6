"""Oblivious transfer extension: SoftSpokenOT over the base OTs of ``base_ot``.

The KAPPA = 128 public-key base OTs (Chou-Orlandi over an RFC 3526 group, in
``ppbn.protocols.base_ot``) are run once per extension instance; this module stretches
them into any number of OTs with symmetric-key work only (AES-CTR PRGs, a fixed-key
hash and bit-matrix transposes), which is what Yao, the share arithmetic and PSI use.

Extension: SoftSpokenOT (Roy, CRYPTO 2022) with k = ``subfield_bits`` (8 by default, or 4:
``SUBFIELD_CHOICES``, the job's ``ot_k``): the IKNP correlation (Ishai, Kilian, Nissim and
Petrank, CRYPTO 2003, Sec. 3: the sender holds q_j = t_j ^ c_j s for its secret s and the
receiver's t_j and choice c_j) from KAPPA / k small VOLEs instead of KAPPA base-OT columns,
so the receiver sends KAPPA / k bits per OT (16 at k = 8, 32 at k = 4) instead of KAPPA
(128). Set-up: the receiver grows a GGM tree of 2^k leaves per chunk of k bits of s; by
KAPPA base OTs in the reverse direction (k per chunk, each carrying a level's XOR of left or
right children under the base keys) the sender learns every leaf but the one at its chunk of
s (a punctured PRF, ``ggm``). Each leaf is an AES-CTR PRG stream; ``sender_columns`` states
the algebra. Correlated OT is the variant of Asharov, Lindell, Schneider and Zohner (CCS
2013), Sec. 5.4: the sender's first message is H(q_j) and only one 16-byte correction per OT
is sent. The hash is the fixed-key tweakable hash of ``ppbn.circuits.garble`` with the OT's
index as tweak, keyed by the extension's protocol id, the owning protocol instance
(``instance``: Yao and the share arithmetic each run their own extension over one channel)
and the channel's session, so OT tweaks never meet those of another protocol. The fold of
the leaf streams and the 128 x m bit-matrix transposition are compiled kernels
(``ppbn.kernels.bits``); AES runs in OpenSSL.

Security (semi-honest): the sender sees u_i = R_i ^ c per chunk, where R_i is the XOR of
all the chunk's leaf streams, the one it lacks included: pseudorandom to it, so c stays
hidden; the receiver sees only the base OTs. The pads are IKNP's, so the correlation-robust
hash argument of IKNP03 / ALSZ13 is unchanged. Above ``semi-honest`` (``malicious``, and
``covert``, which runs the malicious defences), against a malicious receiver: every block
carries padding OTs and the sender checks, before it uses the block's pads, that the
receiver's u fits one choice vector: KOS15's consistency check, whose protocol, cost and
soundness (a cheater learns bits of s only by risking an abort of matching probability)
are in ``ot_check``.

Blocks: a call of m OTs runs in blocks of ``CHUNK_OTS`` (one u message each; the sender
sends each block's corrections as soon as the block is done; with the check, a block's
challenge and answer cross first, and the receiver sends the next u before it reads
them). A block is a pure function of the base keys, its byte offset in the column streams
(the AES-CTR PRG is seekable: ``prg_columns``), its u or choice bits and its first OT
index (``sender_block``, ``receiver_block``), so a call of at least ``inline_below`` OTs
runs its blocks on the party's own executor (``protocols.executor``) with the same bytes
as inline. The base keys, s and the choice bits go only to that party's executor. The
secret s and the base-OT exponents are drawn from the party's ``TaskSeeds`` (fresh OS
seeds; fixed in tests).

Messages are 128-bit blocks held as (m, 2) uint64 arrays, the same layout as wire labels.
Both ends count completed OTs in ``ots``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.circuits.garble import FixedKeyHash
from ppbn.kernels.bits import fold_leaves, transpose_bits, xor_into_rows
from ppbn.protocols.base_ot import DEFAULT_DH_BITS, base_ot_receive, base_ot_send, dh_group
from ppbn.protocols.channel import Channel
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS, SEMI_HONEST, SUBFIELD_CHOICES
from ppbn.protocols.executor import Executor, ExecutorSource, executor_for
from ppbn.protocols.ggm import ggm_tree, puncture_choices, punctured_leaves, xor_blocks
from ppbn.protocols.ot_check import (
    PADDING_OTS,
    element,
    padding_choices,
    receive_answer,
    receive_challenge,
    receiver_answer,
    send_challenge,
    sender_sum,
    verify_answer,
)
from ppbn.protocols.security import check_level
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


def _blocks(m: int, padding: int = 0) -> list[tuple[int, int, int]]:
    """(start, size, column bytes) of each extension block of m OTs, CHUNK_OTS at most;
    each block's columns also hold ``padding`` OTs after its own (the check's, ``ot_check``)."""
    return [
        (start, min(CHUNK_OTS, m - start), _padded(min(CHUNK_OTS, m - start) + padding) // 8)
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


def sender_columns(
    keys: bytes | ColumnStreams, s_bits: np.ndarray, offset: int, u: np.ndarray, k: int
) -> np.ndarray:
    """The q columns of one extension block at the sender (SoftSpokenOT, Roy, CRYPTO 2022),
    (KAPPA, stride) uint8 as ``chunk_sums``.

    Chunk i of s is the point d_i = s[ik .. ik + k) the sender's leaves miss. With r_x the
    leaf streams, w_ib = XOR over x of bit b of (x ^ d_i) r_x needs no r_{d_i} and equals
    v_ib ^ s_ib R_i, the receiver's v_ib and R_i = XOR of all r_x; the receiver sent
    u_i = R_i ^ c, so the column q^(ik + b) = w_ib ^ s_ib u_i = v_ib ^ s_ib c: IKNP's
    q_j = t_j ^ c_j s in rows."""
    # w_ib: the leaves x with bit b of x ^ d_i set, i.e. x_b != d_ib: S_ib if d_ib = 0, else
    # the leaves with bit b clear, T_i ^ S_ib (the punctured leaf r_{d_i} is in neither sum)
    width = u.shape[1]
    with_bit, total = chunk_sums(keys, offset, width, k)
    cols = with_bit.reshape(KAPPA, -1)
    # d_ib, and the rows where q adds u_i (see above)
    xor_into_rows(cols, s_bits, total[:, :width] ^ u)
    return cols


def sender_pads(
    cols: np.ndarray, s_bits: np.ndarray, size: int, protocol: bytes, session: bytes, first: int
) -> tuple[np.ndarray, np.ndarray]:
    """The pads H(q_j, j) and H(q_j ^ s, j) of OTs ``first`` .. ``first + size - 1`` (IKNP03
    / ALSZ13 Sec. 5.4 hashing) from the block's q columns."""
    q_rows = transpose_bits(cols, size).view(np.uint64)
    s_block = np.packbits(s_bits, bitorder="little").view(np.uint64)
    hasher = FixedKeyHash(protocol, session)
    tweaks = _tweaks(first, size)
    return hasher.hash(q_rows, tweaks), hasher.hash(q_rows ^ s_block, tweaks)


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
    """One extension block at the sender, a pure function for the sender's executor: the
    pads of its OTs (``sender_columns``, ``sender_pads``)."""
    cols = sender_columns(keys, s_bits, offset, u, k)
    return sender_pads(cols, s_bits, size, protocol, session, first)


def checked_sender_block(
    keys: bytes | ColumnStreams,
    s_bits: np.ndarray,
    offset: int,
    u: np.ndarray,
    size: int,
    protocol: bytes,
    session: bytes,
    first: int,
    k: int,
    challenge: bytes,
) -> tuple[np.ndarray, np.ndarray, int]:
    """``sender_block`` with the consistency check, whose u also covers the block's
    ``PADDING_OTS``: the pads, and sum chi_j q_j over the block and its padding for the
    consistency check (``ot_check``)."""
    cols = sender_columns(keys, s_bits, offset, u, k)
    pads = sender_pads(cols, s_bits, size, protocol, session, first)
    return (*pads, sender_sum(cols, challenge, size + PADDING_OTS))


def receiver_columns(
    keys: bytes | ColumnStreams, offset: int, bits: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """One extension block at the receiver for its choice bits (a multiple of 8): the
    message u_i = R_i ^ c of each chunk (``sender_columns``) and the t columns,
    t^(ik + b) = v_ib, (KAPPA, stride) uint8 as ``chunk_sums``."""
    width = bits.size // 8
    with_bit, total = chunk_sums(keys, offset, width, k)
    u = total[:, :width] ^ np.packbits(bits, bitorder="little")
    return u, with_bit.reshape(KAPPA, -1)


def receiver_pads(
    t_cols: np.ndarray, size: int, protocol: bytes, session: bytes, first: int
) -> np.ndarray:
    """The pads H(t_j, j) of OTs ``first`` .. ``first + size - 1`` from the t columns."""
    t_rows = transpose_bits(t_cols, size).view(np.uint64)
    return FixedKeyHash(protocol, session).hash(t_rows, _tweaks(first, size))


def _block_bits(choices: np.ndarray, padding: np.ndarray) -> np.ndarray:
    bits = np.zeros(_padded(choices.size + padding.size), dtype=np.uint8)
    bits[: choices.size] = choices
    bits[choices.size : choices.size + padding.size] = padding
    return bits


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
    its u message and the pads of its OTs (``receiver_columns``, ``receiver_pads``)."""
    u, t_cols = receiver_columns(keys, offset, _block_bits(choices, choices[:0]), k)
    return u, receiver_pads(t_cols, choices.size, protocol, session, first)


def checked_receiver_block(
    keys: bytes | ColumnStreams,
    offset: int,
    choices: np.ndarray,
    padding: np.ndarray,
    protocol: bytes,
    session: bytes,
    first: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``receiver_block`` with the consistency check: the block's OTs, then ``PADDING_OTS``
    more with the random choice bits ``padding``; also the t columns and all the choice
    bits, which the answer to the sender's challenge needs (``ot_check``)."""
    bits = _block_bits(choices, padding)
    u, t_cols = receiver_columns(keys, offset, bits, k)
    return u, receiver_pads(t_cols, choices.size, protocol, session, first), t_cols, bits


class ExtensionEnd(ABC):
    """What both ends of an extension share: the options, the set-up once, and each call's
    plan of blocks.

    ``dh_bits`` selects the base-OT group (``dh_bits_for`` of the job's Paillier key size);
    ``subfield_bits`` is SoftSpokenOT's k (``SUBFIELD_CHOICES``, the job's ``ot_k``);
    ``instance`` names the protocol that owns this extension (e.g. b"yao"), so two
    extensions over one channel hash under different keys; ``security``
    (``protocols.security``): above ``semi-honest`` each block is checked (``ot_check``)
    before the sender uses its pads, and a receiver caught raises ``CheatingDetected``. Both
    ends pass the same three. ``seeds`` (``protocols.seeds``) supplies this party's
    randomness; ``executor`` is this party's executor, used for calls of at least
    ``inline_below`` OTs: each block is a task. The base keys and secrets go to that
    executor only: it is this party's own.
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
        security: str = SEMI_HONEST,
    ) -> None:
        self.channel = channel
        self.group = dh_group(dh_bits)
        self.k = check_subfield_bits(subfield_bits)
        self.instance = instance
        self.security = check_level(security)
        # the consistency check runs above semi-honest (covert runs the malicious defences)
        self.checked = self.security != SEMI_HONEST
        self.ots = 0
        self._seeds = seeds if seeds is not None else TaskSeeds()
        self._executor = executor
        self._inline_below = inline_below
        self._keys: ColumnStreams | None = None
        self._offset = 0  # bytes of each column's keystream used so far

    @abstractmethod
    def _setup(self) -> ColumnStreams:
        """The base OTs and the column streams of this end (its keys)."""

    @property
    def started(self) -> bool:
        return self._keys is not None

    def start(self) -> None:
        """Run the set-up now (else it runs in the first call), so that its messages come
        before any other message this party sends or awaits (``arith.bit_mul`` runs an
        extension each way at once)."""
        if self._keys is None:
            self._setup()

    def _plan(
        self, m: int, padding: int
    ) -> tuple[list[tuple[int, int, int]], list[int], bytes | ColumnStreams, Executor]:
        """The next m OTs' blocks (``_blocks``) and their offsets in the column streams
        (moved past them), the keys for the block tasks (the open streams inline: they stay
        in this thread) and the executor that runs them."""
        streams = self._keys if self._keys is not None else self._setup()
        blocks = _blocks(m, padding)
        offsets = np.cumsum([0] + [width for _, _, width in blocks]) + self._offset
        self._offset = int(offsets[-1])
        executor = executor_for(self._executor, m, self._inline_below)
        keys = streams if executor.kind == "inline" else streams.keys
        return blocks, offsets.tolist()[:-1], keys, executor

    def _protocol(self) -> tuple[bytes, bytes]:
        """The hash's protocol id and session."""
        return _extension_protocol(self.k, self.instance), self.channel.session


class OTSender(ExtensionEnd):
    """OT extension sender: holds the message pairs and s (and is the base-OT receiver).
    Options as ``ExtensionEnd``; each block is a ``sender_block`` task
    (``checked_sender_block`` with the check), s and the base keys its arguments."""

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
            off_path = [xor_blocks(masked[row, choices[row]].tobytes(), keys[row]) for row in rows]
            leaves += punctured_leaves(point, off_path, k)
        self._keys = ColumnStreams(b"".join(leaves))
        return self._keys

    def _pad_blocks(self, m: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """Receive the receiver's u message of each block of the next m OTs; yield the
        block's rows and its pads (H(q_j), H(q_j ^ s)), each (size, 2) uint64, as soon as
        the block is done (and checked, above semi-honest). The caller adds m to
        ``ots`` once every block is through."""
        if self.checked:
            yield from self._checked_pad_blocks(m)
            return
        blocks, offsets, keys, executor = self._plan(m, 0)
        protocol, session = self._protocol()
        first, chunks, k = self.ots, chunk_count(self.k), self.k

        def tasks():
            for (start, size, width), offset in zip(blocks, offsets, strict=True):
                u = self.channel.recv_array("ot.ext.u", np.uint8, (chunks, width))
                yield keys, self._s_bits, offset, u, size, protocol, session, first + start, k

        for (start, size, _), (p0, p1) in zip(
            blocks, executor.map(sender_block, tasks()), strict=True
        ):
            yield slice(start, start + size), p0, p1

    def _checked_pad_blocks(self, m: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """``_pad_blocks`` with the consistency check, block by block: receive u (the block's
        OTs and its padding), send a challenge, receive the answer and check it against
        the block's q; a block's pads are yielded, and so used, only once it passed."""
        blocks, offsets, keys, executor = self._plan(m, PADDING_OTS)
        protocol, session = self._protocol()
        first, chunks, k, s_bits = self.ots, chunk_count(self.k), self.k, self._s_bits
        challenges = RandomStream(self._seeds.next())
        s = element(np.packbits(s_bits, bitorder="little").view(np.uint64))
        sent: list[bytes] = []

        def tasks():
            for (start, size, width), offset in zip(blocks, offsets, strict=True):
                u = self.channel.recv_array("ot.ext.u", np.uint8, (chunks, width))
                challenge = send_challenge(self.channel, challenges)
                sent.append(challenge)
                yield keys, s_bits, offset, u, size, protocol, session, first + start, k, challenge

        # one block in flight: block b + 1's challenge follows block b's messages, the
        # order in which the receiver reads them
        results = executor.map(checked_sender_block, tasks(), inflight=1)
        for (start, size, _), (p0, p1, q_sum) in zip(blocks, results, strict=True):
            answer = receive_answer(self.channel)
            verify_answer(q_sum, answer, s, sent.pop(0), first + start, size)
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


class OTReceiver(ExtensionEnd):
    """OT extension receiver: holds the choice bits and the GGM trees (and is the base-OT
    sender). Options as ``ExtensionEnd``; each block is a ``receiver_block`` task
    (``checked_receiver_block`` with the check)."""

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
                masked[row, 0] = np.frombuffer(xor_blocks(left, keys0[row]), dtype=np.uint8)
                masked[row, 1] = np.frombuffer(xor_blocks(right, keys1[row]), dtype=np.uint8)
        self.channel.send_array("ot.ext.ggm", masked)
        self._keys = ColumnStreams(b"".join(leaves))
        return self._keys

    def _pads(self, choices: np.ndarray) -> np.ndarray:
        """Send u for each block; return the pads H(t_j, j) (m, 2) uint64."""
        m = choices.shape[0]
        blocks, offsets, keys, executor = self._plan(m, 0)
        protocol, session = self._protocol()
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
            for (start, size, _), offset in zip(blocks, offsets, strict=True)
        )
        pads = np.empty((m, 2), dtype=np.uint64)
        for (start, size, _), (u, pad) in zip(
            blocks, executor.map(receiver_block, tasks), strict=True
        ):
            self.channel.send_array("ot.ext.u", u)
            pads[start : start + size] = pad
        return pads

    def _pad_blocks(self, choices: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
        """Each block's rows and pads, yielded when the sender's messages for that block
        (``ot.ext.y``) may be read: semi-honest, after every u has gone; checked, block by
        block (``_checked_pad_blocks``)."""
        if self.checked:
            yield from self._checked_pad_blocks(choices)
            return
        pads = self._pads(choices)
        for start, size, _ in _blocks(choices.size):
            yield slice(start, start + size), pads[start : start + size]

    def _checked_pad_blocks(self, choices: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
        """Per block: send u (its OTs, then ``PADDING_OTS`` with random choices), answer the
        sender's challenge (``ot_check``); a block is yielded once the next block's u has
        gone, before the next challenge is read: the sender's order (challenge, messages,
        next challenge) and the overlap of this party's next block with the sender's."""
        blocks, offsets, keys, executor = self._plan(choices.shape[0], PADDING_OTS)
        protocol, session = self._protocol()
        stream, first, k = RandomStream(self._seeds.next()), self.ots, self.k
        tasks = (
            (keys, offset, choices[start : start + size], padding_choices(stream))
            + (protocol, session, first + start, k)
            for (start, size, _), offset in zip(blocks, offsets, strict=True)
        )
        done: tuple[slice, np.ndarray] | None = None
        for (start, size, _), (u, pad, t_cols, bits) in zip(
            blocks, executor.map(checked_receiver_block, tasks), strict=True
        ):
            self.channel.send_array("ot.ext.u", u)
            if done is not None:
                yield done
            challenge = receive_challenge(self.channel)
            answer = receiver_answer(t_cols, bits, challenge, size + PADDING_OTS)
            self.channel.send_array("ot.ext.check", answer)
            done = slice(start, start + size), pad
        if done is not None:
            yield done

    def pads(self, choices: np.ndarray | list[int]) -> np.ndarray:
        """Random OT: send u for the choices c and return H(t_j) = H(q_j ^ c_j s), (m, 2)
        uint64, the pad of the sender's ``pads`` that matches each choice bit."""
        c = self._choices(choices)
        out = np.empty((c.size, 2), dtype=np.uint64)
        for rows, pad in self._pad_blocks(c):
            out[rows] = pad
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
        out = np.empty((m, 2), dtype=np.uint64)
        for rows, pad in self._pad_blocks(c):
            cipher = self.channel.recv_array("ot.ext.y", np.uint64, (pad.shape[0], 2, 2))
            out[rows] = pad ^ np.where(c[rows, None] == 1, cipher[:, 1], cipher[:, 0])
        self.ots += m
        return out

    def receive_correlated(self, choices: np.ndarray | list[int]) -> np.ndarray:
        """Correlated OT: returns x0[j] ^ c[j] delta[j] as (m, 2) uint64."""
        c = self._choices(choices)
        m = c.size
        out = np.empty((m, 2), dtype=np.uint64)
        for rows, pad in self._pad_blocks(c):
            correction = self.channel.recv_array("ot.ext.y", np.uint64, (pad.shape[0], 2))
            correction &= np.negative(c[rows].astype(np.uint64))[:, None]
            out[rows] = pad ^ correction
        self.ots += m
        return out
