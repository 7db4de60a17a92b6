"""Per-task seeds: the table phase's randomness is drawn by the caller, expanded by tasks.

A task that needs random values (fast randomizers, re-randomizers) receives a 32-byte
seed and expands it with AES-256 in counter mode; the masks of the aggregating party come
from a stream of the same kind. Because the seeds are drawn in program order by the
party's own thread, the values do not depend on which executor ran a task, on how many
workers it had, or in which order they finished. Fresh seeds come from the OS's CSPRNG;
a fixed seed (``TablesConfig.seed``, tests only) makes every value repeat.
"""

from __future__ import annotations

import hashlib
import secrets

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

SEED_BYTES = 32


class RandomStream:
    """A deterministic stream of random bytes and integers from one seed (AES-256-CTR)."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) != SEED_BYTES:
            raise ValueError(f"a seed has {SEED_BYTES} bytes, got {len(seed)}")
        self._cipher = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor()

    def bytes(self, count: int) -> bytes:
        return self._cipher.update(bytes(count))

    def randbits(self, bits: int) -> int:
        if bits <= 0:
            return 0
        value = int.from_bytes(self.bytes((bits + 7) // 8), "little")
        return value & ((1 << bits) - 1)

    def randbelow(self, bound: int) -> int:
        """Uniform in [0, bound) by rejection (no modular bias)."""
        if bound < 1:
            raise ValueError("bound must be positive")
        bits = bound.bit_length()
        while True:
            value = self.randbits(bits)
            if value < bound:
                return value


def expand(seed: bytes, count: int) -> bytes:
    """``count`` pseudorandom bytes from ``seed``."""
    return RandomStream(seed).bytes(count)


class TaskSeeds:
    """Seeds for tasks, one per call of ``next``: fresh from the OS, or, given ``fixed``
    (tests only), derived from it and a counter so that a run repeats exactly."""

    def __init__(self, fixed: bytes | None = None) -> None:
        self._fixed = fixed
        self._counter = 0

    @property
    def fixed(self) -> bool:
        return self._fixed is not None

    def next(self) -> bytes:
        if self._fixed is None:
            return secrets.token_bytes(SEED_BYTES)
        self._counter += 1
        return hashlib.blake2b(
            self._counter.to_bytes(8, "big"),
            key=self._fixed[:64],
            digest_size=SEED_BYTES,
            person=b"ppbn seeds",
        ).digest()
