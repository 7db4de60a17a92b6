"""Half-gates garbling with free-XOR and point-and-permute, batched with numpy.

Implements Zahur, Rosulek and Evans, "Two Halves Make a Whole" (EUROCRYPT 2015), Sec. 3
(the half-gates AND gate: two ciphertexts per AND), with free-XOR (Kolesnikov-Schneider,
ICALP 2008) and point-and-permute: the garbler's global offset R has least significant
bit 1, so the lsb of a label is its wire's value XOR a secret permute bit.

Hash: the TMMO construction of Guo, Katz, Wang and Yu, "Efficient and Secure Multiparty
Computation from Fixed-Key Block Ciphers" (IEEE S&P 2020, ePrint 2019/074), tweakable
circular correlation robust with pi modelled as a random permutation:
H(x, i) = pi(pi(x) XOR i) XOR pi(x), pi = AES-128 under a fixed public key. Tweaks are
unique per (gate, instance, half); a caller-supplied base keeps them unique across
garblings of one hasher.

Domain separation: the "fixed" key is not one constant for every use but
SHA-256(b"ppbn fixed-key AES v2" || len || protocol id || len || session)[:16]
(``fixed_key``; lengths as 8-byte big-endian integers), so each protocol (garbling, IKNP,
masked lookups, ...) and each job (the channel's public session label) gets its own
permutation. GKWY20 prove their hashes secure with pi a random permutation that is public
and fixed for the execution, its key known to the adversary; a key derived from public
per-session data is exactly that, so the model and the proofs are unchanged. What changes
is the multi-instance picture: with one global key, permutation queries (or precomputation)
made against one job or protocol also count against every other one, and the tweak ranges
of different protocols must be kept apart by hand; with a key per (protocol, session) the
permutations are independent in the ideal-cipher view and each bound holds per instance
(cf. Guo, Katz, Wang, Weng and Yu, "Better concrete security for half-gates garbling (in
the multi-instance setting)", CRYPTO 2020). The derivation takes bytes only: this module
does no I/O.

Layout: labels are (..., 2) uint64 arrays (the two 64-bit halves of a 128-bit label; bit 0
of word 0 is the point-and-permute bit). A batch garbles K instances of one circuit at once,
with one R; the state is (n_slots, K, 2) and every schedule step is a few numpy passes over
all gates of the step and all instances, with one AES call over all their blocks.
Garbled tables are (2, n_and, K, 2): the generator halves T_G of all AND gates and
instances, then the evaluator halves T_E, so each step reads and writes contiguous runs.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.circuits.schedule import ONE_SLOT, Schedule

FIXED_KEY_LABEL = b"ppbn fixed-key AES v2"
ONE = np.uint64(1)


def length_prefixed(*parts: bytes) -> bytes:
    """Each part preceded by its length as an 8-byte big-endian integer (unambiguous framing)."""
    return b"".join(len(part).to_bytes(8, "big") + part for part in parts)


def fixed_key(protocol: bytes, session: bytes) -> bytes:
    """The public AES-128 key of ``FixedKeyHash`` for one protocol id and one session label."""
    return hashlib.sha256(FIXED_KEY_LABEL + length_prefixed(protocol, session)).digest()[:16]


class FixedKeyHash:
    """H(x, i) = pi(pi(x) ^ i) ^ pi(x) over many 128-bit blocks per call (GKWY20, TMMO),
    pi = AES-128 under ``fixed_key(protocol, session)`` (see the module doc).

    ``protocol`` names the protocol that hashes (each uses its own id); ``session`` is the
    job's public label (``Channel.session``). Both parties of a protocol must pass the
    same pair. Owns its scratch buffers (reused across calls so large batches do not
    page-fault on fresh memory); use one instance per thread.
    """

    def __init__(self, protocol: bytes, session: bytes) -> None:
        if not protocol:
            raise ValueError("FixedKeyHash needs a protocol id")
        self._aes = Cipher(algorithms.AES(fixed_key(protocol, session)), modes.ECB()).encryptor()
        self._first = np.empty((0, 2), dtype=np.uint64)
        self._second = np.empty((0, 2), dtype=np.uint64)

    def _reserve(self, n: int) -> None:
        if self._first.shape[0] < n + 1:
            size = max(n + 1, 2 * self._first.shape[0])
            self._first = np.empty((size, 2), dtype=np.uint64)
            self._second = np.empty((size, 2), dtype=np.uint64)

    def _permute(self, blocks: np.ndarray, out_buffer: np.ndarray) -> None:
        # cryptography wants block_size - 1 spare bytes after the output: buffers keep one block.
        n = blocks.shape[0]
        self._aes.update_into(
            memoryview(blocks).cast("B"), memoryview(out_buffer[: n + 1]).cast("B")
        )

    def hash_into(self, blocks: np.ndarray, tweaks: np.ndarray, out: np.ndarray) -> None:
        """out = H(blocks, tweaks) for C-contiguous (n, 2) uint64 blocks; ``tweaks`` are (n,)
        uint64, or (n, 2) tweak blocks (the tweak in word 0, word 1 zero), which a caller
        that builds them in place saves a pass with."""
        n = blocks.shape[0]
        self._reserve(n)
        first = self._first[:n]
        second = self._second[:n]
        self._permute(blocks, self._first)
        if tweaks.ndim == 2:
            np.bitwise_xor(first, tweaks, out=second)
        else:
            np.bitwise_xor(first[:, 0], tweaks, out=second[:, 0])
            second[:, 1] = first[:, 1]
        self._permute(second, self._second)
        np.bitwise_xor(second, first, out=out)

    def hash(self, blocks: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
        """Hash (n, 2) uint64 blocks with (n,) uint64 tweaks; returns a new (n, 2) array."""
        out = np.empty((blocks.shape[0], 2), dtype=np.uint64)
        self.hash_into(np.ascontiguousarray(blocks), np.asarray(tweaks, dtype=np.uint64), out)
        return out


def random_delta() -> np.ndarray:
    """The free-XOR offset R: 128 random bits with the point-and-permute bit set."""
    delta = np.frombuffer(os.urandom(16), dtype=np.uint64).copy()
    delta[0] |= ONE
    return delta


def random_labels(shape: tuple[int, ...]) -> np.ndarray:
    """Uniform labels (shape + (2,)) from an AES-CTR stream under a fresh random key."""
    n_bytes = int(np.prod(shape, dtype=np.int64)) * 16
    stream = Cipher(algorithms.AES(os.urandom(16)), modes.CTR(bytes(16))).encryptor()
    return np.frombuffer(stream.update(bytes(n_bytes)), dtype=np.uint64).reshape(*shape, 2).copy()


BLOCK_HASH_BYTES = 1 << 22  # what the widest AND step of one instance block hashes


def instance_blocks(schedule: Schedule, k: int, block_instances: int | None = None) -> list[slice]:
    """The instance blocks a batch is garbled in, one after another, so that the widest AND
    step of a block hashes at most ``BLOCK_HASH_BYTES`` (128 bytes per AND gate: 8 AES
    blocks for the garbler) and its buffers stay in this machine's 2 MB L2 and close to it.
    AES under ``cryptography`` runs 2.5x slower once its buffers leave cache; on 1,000
    instances of AES-128 the blocks make garbling 25% faster than one pass over the batch."""
    widest = max((len(step.a) for step in schedule.steps if step.is_and), default=1)
    per = block_instances or max(16, BLOCK_HASH_BYTES // (128 * widest))
    return [slice(start, min(k, start + per)) for start in range(0, k, per)]


class _Workspace:
    """Scratch arrays sized for the largest step of one instance block, reused by every
    step and block."""

    def __init__(self, schedule: Schedule, blocks: list[slice], batch: int, hash_rows: int) -> None:
        k = max((block.stop - block.start for block in blocks), default=0)  # the largest block
        self.batch = batch  # instances of the whole batch: gate g's tweaks are 2 g K apart
        most = max((len(s.a) for s in schedule.steps if s.is_and), default=0) * k
        xor_most = max((len(s.a) for s in schedule.steps if not s.is_and), default=0) * k
        self.n_slots = schedule.n_slots
        self.state = np.empty(schedule.n_slots * k * 2, dtype=np.uint64)
        self.blocks = np.empty((hash_rows * most, 2), dtype=np.uint64)
        self.hashed = np.empty((hash_rows * most, 2), dtype=np.uint64)
        self.tweaks = np.zeros((hash_rows * most, 2), dtype=np.uint64)  # word 1 stays zero
        self.lane = np.arange(0, 2 * k, 2, dtype=np.uint64)
        self.mask_a = np.empty(most, dtype=np.uint64)
        self.mask_b = np.empty(most, dtype=np.uint64)
        self.acc = np.empty((most, 2), dtype=np.uint64)
        self.tmp = np.empty((most, 2), dtype=np.uint64)
        self.gen = np.empty((most, 2), dtype=np.uint64)
        self.left = np.empty((xor_most, 2), dtype=np.uint64)
        self.right = np.empty((xor_most, 2), dtype=np.uint64)

    def block_state(self, kb: int) -> np.ndarray:
        """The (n_slots, kb, 2) labels of a block of kb instances, contiguous."""
        return self.state[: self.n_slots * kb * 2].reshape(self.n_slots, kb, 2)

    def tile_delta(self, delta: np.ndarray) -> None:
        """Delta repeated per row: numpy broadcasts a (2,) operand over (n, 2) slowly."""
        self.delta = np.tile(delta, (self.acc.shape[0], 1))

    def xor_step(self, state: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        n, k = len(a), state.shape[1]
        left = self.left[: n * k].reshape(n, k, 2)
        right = self.right[: n * k].reshape(n, k, 2)
        state.take(a, axis=0, out=left, mode="clip")
        state.take(b, axis=0, out=right, mode="clip")
        left ^= right
        state[out] = left

    def set_tweaks(self, first: int, n: int, kb: int, copies: int) -> np.ndarray:
        """Tweak blocks of ``n`` AND gates x ``kb`` instances: ``copies`` runs of the T_G
        tweaks, then as many of the T_E ones; ``first`` is the T_G tweak of the first gate's
        first instance, and consecutive gates are 2 K apart (K the batch's instances)."""
        count = n * kb
        blocks = self.tweaks[: 2 * copies * count]
        tw = blocks[:, 0].reshape(2 * copies, n, kb)
        stride = np.uint64(2 * self.batch)
        np.add(np.arange(n, dtype=np.uint64)[:, None] * stride, self.lane[:kb], out=tw[0])
        tw[0] += np.uint64(first)
        np.add(tw[0], ONE, out=tw[copies])
        for row in range(1, copies):
            tw[row] = tw[0]
            tw[copies + row] = tw[copies]
        return blocks

    @staticmethod
    def lsb_mask(labels: np.ndarray, out: np.ndarray) -> np.ndarray:
        """All-ones uint64 where the label's permute bit is 1, else zero; shape (n,)."""
        np.bitwise_and(labels[:, 0], ONE, out=out)
        np.negative(out, out=out)
        return out


def _and_mask(x: np.ndarray, mask: np.ndarray, out: np.ndarray) -> None:
    """out = x & mask per label for (..., 2) labels and a (...) mask, one word at a time:
    numpy broadcasts a (..., 1) operand over labels of two words three times slower."""
    np.bitwise_and(x[..., 0], mask, out=out[..., 0])
    np.bitwise_and(x[..., 1], mask, out=out[..., 1])


def _check_tables(tables: np.ndarray | None, shape: tuple[int, ...], what: str) -> None:
    if tables is not None and (tables.shape != shape or tables.dtype != np.uint64):
        raise ValueError(f"{what} must be a uint64 array of shape {shape}")


def garble(
    schedule: Schedule,
    input_zero: np.ndarray,
    delta: np.ndarray,
    tweak_base: int,
    hasher: FixedKeyHash,
    tables_out: np.ndarray | None = None,
    block_instances: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Garble K instances. ``input_zero``: (n_input_bits, K, 2) zero-labels of the inputs.

    Returns (tables (2, n_and, K, 2), output zero-labels (n_output_bits, K, 2)). The label
    of value 1 on any wire is its zero-label XOR ``delta``. Uses tweaks
    ``tweak_base .. tweak_base + 2 * n_and * K - 1`` of ``hasher``, whose (protocol,
    session) key the evaluator must share: AND gate g of instance j has T_G tweak
    ``tweak_base + 2 (g K + j)`` and T_E tweak one more, however the batch is split into
    ``instance_blocks`` (``block_instances`` overrides their size; the result is the same).
    A caller garbling batch after batch may pass ``tables_out`` to reuse one table buffer.
    """
    n_in, k, _ = input_zero.shape
    if n_in != len(schedule.input_slots):
        raise ValueError(f"circuit has {len(schedule.input_slots)} input bits, got {n_in}")
    delta = np.asarray(delta, dtype=np.uint64).reshape(2)
    shape = (2, schedule.n_and, k, 2)
    _check_tables(tables_out, shape, "tables_out")
    tables = np.empty(shape, dtype=np.uint64) if tables_out is None else tables_out
    out_zero = np.empty((len(schedule.output_slots), k, 2), dtype=np.uint64)
    blocks = instance_blocks(schedule, k, block_instances)
    work = _Workspace(schedule, blocks, k, hash_rows=4)
    work.tile_delta(delta)
    for block in blocks:
        state = work.block_state(block.stop - block.start)
        state[ONE_SLOT] = delta
        state[schedule.input_slots] = input_zero[:, block]
        _garble_block(
            schedule, state, tables[:, :, block], tweak_base + 2 * block.start, hasher, work
        )
        out_zero[:, block] = state[schedule.output_slots]
    return tables, out_zero


def _garble_block(
    schedule: Schedule,
    state: np.ndarray,
    tables: np.ndarray,
    tweak_base: int,
    hasher: FixedKeyHash,
    work: _Workspace,
) -> None:
    """Garble one instance block: ``state`` (n_slots, kb, 2) holds its input zero-labels,
    ``tables`` is its (2, n_and, kb, 2) view of the batch's tables."""
    kb = state.shape[1]
    for step in schedule.steps:
        if not step.is_and:
            work.xor_step(state, step.a, step.b, step.out)
            continue
        n = len(step.a)
        count = n * kb
        blocks = work.blocks[: 4 * count]
        a0, a1, b0, b1 = (blocks[i * count : (i + 1) * count] for i in range(4))
        state.take(step.a, axis=0, out=a0.reshape(n, kb, 2), mode="clip")
        state.take(step.b, axis=0, out=b0.reshape(n, kb, 2), mode="clip")
        np.bitwise_xor(a0, work.delta[:count], out=a1)
        np.bitwise_xor(b0, work.delta[:count], out=b1)
        hashed = work.hashed[: 4 * count]
        hasher.hash_into(
            blocks, work.set_tweaks(tweak_base + 2 * step.first_and * work.batch, n, kb, 2), hashed
        )
        h_a0, h_a1, h_b0, h_b1 = (hashed[i * count : (i + 1) * count] for i in range(4))
        mask_a = work.lsb_mask(a0, work.mask_a[:count])
        mask_b = work.lsb_mask(b0, work.mask_b[:count])
        rows = slice(step.first_and, step.first_and + n)
        gen, acc, tmp = work.gen[:count], work.acc[:count], work.tmp[:count]
        # Generator half: T_G = H(A0) ^ H(A1) ^ pb R, W_G0 = H(A0) ^ pa T_G.
        _and_mask(work.delta[:count], mask_b, gen)
        gen ^= h_a0
        gen ^= h_a1
        tables[0, rows] = gen.reshape(n, kb, 2)  # the block's rows of a batch's table: strided
        _and_mask(gen, mask_a, acc)
        acc ^= h_a0
        # Evaluator half: T_E = H(B0) ^ H(B1) ^ A0, W_E0 = H(B0) ^ pb (T_E ^ A0).
        np.bitwise_xor(h_b0, h_b1, out=tmp)
        np.bitwise_xor(tmp.reshape(n, kb, 2), a0.reshape(n, kb, 2), out=tables[1, rows])
        _and_mask(tmp, mask_b, tmp)
        tmp ^= h_b0
        acc ^= tmp
        state[step.out] = acc.reshape(n, kb, 2)


def evaluate_garbled(
    schedule: Schedule,
    input_labels: np.ndarray,
    tables: np.ndarray,
    tweak_base: int,
    hasher: FixedKeyHash,
    block_instances: int | None = None,
) -> np.ndarray:
    """Evaluate K garbled instances; returns the output labels (n_output_bits, K, 2).

    ``tweak_base`` and the key of ``hasher`` must be the garbler's: with another session
    or protocol id every AND gate decrypts to garbage and the output labels are wrong.
    Instance blocks as in ``garble``.
    """
    n_in, k, _ = input_labels.shape
    if n_in != len(schedule.input_slots):
        raise ValueError(f"circuit has {len(schedule.input_slots)} input bits, got {n_in}")
    if tables.shape != (2, schedule.n_and, k, 2):
        raise ValueError(
            f"garbled tables have shape {tables.shape}, expected {(2, schedule.n_and, k, 2)}"
        )
    out = np.empty((len(schedule.output_slots), k, 2), dtype=np.uint64)
    blocks = instance_blocks(schedule, k, block_instances)
    work = _Workspace(schedule, blocks, k, hash_rows=2)
    for block in blocks:
        state = work.block_state(block.stop - block.start)
        state[ONE_SLOT] = 0
        state[schedule.input_slots] = input_labels[:, block]
        _evaluate_block(
            schedule, state, tables[:, :, block], tweak_base + 2 * block.start, hasher, work
        )
        out[:, block] = state[schedule.output_slots]
    return out


def _evaluate_block(
    schedule: Schedule,
    state: np.ndarray,
    tables: np.ndarray,
    tweak_base: int,
    hasher: FixedKeyHash,
    work: _Workspace,
) -> None:
    kb = state.shape[1]
    for step in schedule.steps:
        if not step.is_and:
            work.xor_step(state, step.a, step.b, step.out)
            continue
        n = len(step.a)
        count = n * kb
        blocks = work.blocks[: 2 * count]
        a, b = blocks[:count], blocks[count:]
        state.take(step.a, axis=0, out=a.reshape(n, kb, 2), mode="clip")
        state.take(step.b, axis=0, out=b.reshape(n, kb, 2), mode="clip")
        hashed = work.hashed[: 2 * count]
        hasher.hash_into(
            blocks, work.set_tweaks(tweak_base + 2 * step.first_and * work.batch, n, kb, 1), hashed
        )
        rows = slice(step.first_and, step.first_and + n)
        acc, tmp = work.acc[:count], work.tmp[:count]
        # W = H(A) ^ sa T_G ^ H(B) ^ sb (T_E ^ A)
        acc.reshape(n, kb, 2)[...] = tables[0, rows]
        _and_mask(acc, work.lsb_mask(a, work.mask_a[:count]), acc)
        acc ^= hashed[:count]
        np.bitwise_xor(tables[1, rows], a.reshape(n, kb, 2), out=tmp.reshape(n, kb, 2))
        _and_mask(tmp, work.lsb_mask(b, work.mask_b[:count]), tmp)
        tmp ^= hashed[count:]
        acc ^= tmp
        state[step.out] = acc.reshape(n, kb, 2)


def permute_bits(labels: np.ndarray) -> np.ndarray:
    """Point-and-permute bit (lsb) of each label: (..., 2) uint64 -> (...) uint8."""
    return (labels[..., 0] & ONE).astype(np.uint8)
