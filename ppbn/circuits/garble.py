"""Half-gates garbling with free-XOR and point-and-permute, batched.

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
with one R; the state is (n_slots, K, 2) and every schedule step is one or two compiled
passes (``ppbn.kernels.garbling``) over all gates of the step and all instances, with one
AES call over all their blocks.
Garbled tables are (2, n_and, K, 2): the generator halves T_G of all AND gates and
instances, then the evaluator halves T_E, so each step reads and writes contiguous runs.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.circuits.schedule import ONE_SLOT, Schedule, Step
from ppbn.kernels.garbling import (
    and_hash_inputs,
    evaluate_and_outputs,
    garble_and_outputs,
    xor_gates,
)

FIXED_KEY_LABEL = b"ppbn fixed-key AES v2"
HASH_ROWS = 1 << 14  # blocks per AES pass of FixedKeyHash: 256 KB, in L2 with its buffers
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
        that builds them in place saves a pass with. ``HASH_ROWS`` blocks at a time, so the
        two AES passes and the XORs between them stay in cache (8.5 -> 5 ns a hash here)."""
        n = blocks.shape[0]
        self._reserve(min(n, HASH_ROWS))
        for start in range(0, n, HASH_ROWS):
            stop = min(n, start + HASH_ROWS)
            self._hash_rows(blocks[start:stop], tweaks[start:stop], out[start:stop])

    def _hash_rows(self, blocks: np.ndarray, tweaks: np.ndarray, out: np.ndarray) -> None:
        n = blocks.shape[0]
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
    step and block: the labels to hash (``hash_rows`` runs per AND step), their tweaks and
    their hashes."""

    def __init__(
        self,
        schedule: Schedule,
        blocks: list[slice],
        batch: int,
        hash_rows: int,
        delta: np.ndarray | None = None,
    ) -> None:
        k = max((block.stop - block.start for block in blocks), default=0)  # the largest block
        self.batch = batch  # instances of the whole batch: gate g's tweaks are 2 g K apart
        most = max((len(s.a) for s in schedule.steps if s.is_and), default=0) * k
        self.n_slots = schedule.n_slots
        self.state = np.empty(schedule.n_slots * k * 2, dtype=np.uint64)
        self.blocks = np.empty((hash_rows * most, 2), dtype=np.uint64)
        self.hashed = np.empty((hash_rows * most, 2), dtype=np.uint64)
        self.tweaks = np.empty((hash_rows * most, 2), dtype=np.uint64)
        # the garbler's R (the evaluator hashes no label XOR R)
        self.delta = np.zeros(2, dtype=np.uint64) if delta is None else delta

    def block_state(self, kb: int) -> np.ndarray:
        """The (n_slots, kb, 2) labels of a block of kb instances, contiguous."""
        return self.state[: self.n_slots * kb * 2].reshape(self.n_slots, kb, 2)

    def hash_and_step(
        self, state: np.ndarray, step: Step, tweak_base: int, hasher: FixedKeyHash, garbler: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Gather and hash the labels of an AND step (``kernels.garbling.and_hash_inputs``);
        returns (blocks, hashes). ``tweak_base`` is the block's first T_G tweak."""
        rows = (4 if garbler else 2) * len(step.a) * state.shape[1]
        blocks, tweaks, hashed = self.blocks[:rows], self.tweaks[:rows], self.hashed[:rows]
        and_hash_inputs(
            state,
            step.a,
            step.b,
            self.delta,
            np.uint64(tweak_base + 2 * step.first_and * self.batch),
            np.uint64(2 * self.batch),
            blocks,
            tweaks,
            garbler,
        )
        hasher.hash_into(blocks, tweaks, hashed)
        return blocks, hashed


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
    work = _Workspace(schedule, blocks, k, hash_rows=4, delta=delta)
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
    for step in schedule.steps:
        if not step.is_and:
            xor_gates(state, step.a, step.b, step.out)
            continue
        blocks, hashed = work.hash_and_step(state, step, tweak_base, hasher, garbler=True)
        garble_and_outputs(blocks, hashed, work.delta, tables, step.first_and, state, step.out)


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
    for step in schedule.steps:
        if not step.is_and:
            xor_gates(state, step.a, step.b, step.out)
            continue
        blocks, hashed = work.hash_and_step(state, step, tweak_base, hasher, garbler=False)
        evaluate_and_outputs(blocks, hashed, tables, step.first_and, state, step.out)


def permute_bits(labels: np.ndarray) -> np.ndarray:
    """Point-and-permute bit (lsb) of each label: (..., 2) uint64 -> (...) uint8."""
    return (labels[..., 0] & ONE).astype(np.uint8)
