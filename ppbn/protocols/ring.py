"""Vectors over the ring Z_2^128 as numpy arrays, for the share arithmetic of ``arith``.

Layout: an element is two little-endian uint64 words, so a vector of n elements is an
(n, 2) uint64 array ``[low word, high word]`` (any leading shape works: (..., 2)). This is
the same layout as the 128-bit OT messages and wire labels of ``ot`` and ``garble``, so
OT outputs are ring elements without conversion. Signed values use two's complement
(``fixedpoint.signed``).

numpy's uint64 arithmetic wraps modulo 2^64, which gives the low words and the cross
terms directly; the one missing piece, the high half of a 64 x 64-bit product, comes from
32-bit limbs. Every function is pure (no I/O) and works on whole arrays at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BITS = 128
MODULUS = 1 << BITS
WORD_MASK = (1 << 64) - 1
_LOW32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)
_U63 = np.uint64(63)
_U64 = np.uint64(64)


def _words(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if x.dtype != np.uint64 or x.shape[-1:] != (2,):
        raise ValueError(f"ring vectors are (..., 2) uint64 arrays, got {x.shape} {x.dtype}")
    return x[..., 0], x[..., 1]


def _join(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    out = np.empty(np.broadcast_shapes(low.shape, high.shape) + (2,), dtype=np.uint64)
    out[..., 0] = low
    out[..., 1] = high
    return out


# -- conversion ------------------------------------------------------------------------
def from_ints(values: Iterable[int]) -> np.ndarray:
    """Python ints (any sign, reduced mod 2^128) -> (n, 2) ring vector."""
    reduced = np.array([int(v) % MODULUS for v in values], dtype=object)
    if reduced.size == 0:
        return np.zeros((0, 2), dtype=np.uint64)
    return _join((reduced & WORD_MASK).astype(np.uint64), (reduced >> 64).astype(np.uint64))


def constant(value: int) -> np.ndarray:
    """One ring element as a (2,) array, broadcastable against (..., 2) vectors."""
    value = int(value) % MODULUS
    return np.array([value & WORD_MASK, value >> 64], dtype=np.uint64)


def to_ints(x: np.ndarray) -> list[int]:
    """Ring vector -> unsigned Python ints in [0, 2^128) (flattened over leading axes)."""
    low, high = _words(x)
    return [int(lo) | (int(hi) << 64) for lo, hi in zip(low.ravel(), high.ravel(), strict=True)]


def to_signed(x: np.ndarray) -> list[int]:
    """Two's-complement reading: Python ints in [-2^127, 2^127)."""
    half = MODULUS >> 1
    return [v - MODULUS if v >= half else v for v in to_ints(x)]


def to_float(x: np.ndarray, frac: int) -> np.ndarray:
    """Signed reading scaled by 2^-frac, as float64 (for reporting, not for exact checks)."""
    low, high = _words(x)
    return (high.view(np.int64).astype(np.float64) * 2.0**64 + low.astype(np.float64)) * 2.0**-frac


def from_uint64(values: np.ndarray, signed: bool = False) -> np.ndarray:
    """Embed Z_2^64 values: zero-extended, or sign-extended when ``signed``.

    This is a plain embedding of values; it does not turn two Z_2^64 *shares* of x into
    Z_2^128 shares of x (their sum may wrap mod 2^64, which needs a protocol).
    """
    low = np.asarray(values, dtype=np.uint64)
    high = (low.view(np.int64) >> 63).view(np.uint64) if signed else np.zeros_like(low)
    return _join(low, high)


def to_uint64(x: np.ndarray) -> np.ndarray:
    """Reduce mod 2^64: the low words."""
    return _words(x)[0].copy()


def bits(x: np.ndarray) -> np.ndarray:
    """(n, 2) ring vector -> (n, 128) uint8 bits, bit i of the element in column i."""
    _words(x)
    flat = np.ascontiguousarray(x.reshape(-1, 2))
    return np.unpackbits(flat.view(np.uint8), axis=1, bitorder="little").reshape(
        x.shape[:-1] + (BITS,)
    )


# -- arithmetic ------------------------------------------------------------------------
def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y mod 2^128 (broadcasting over leading axes)."""
    x_lo, x_hi = _words(x)
    y_lo, y_hi = _words(y)
    with np.errstate(over="ignore"):  # words wrap mod 2^64 by design; numpy warns for 0-d ones
        low = x_lo + y_lo
        high = x_hi + y_hi
        high += low < x_lo
    return _join(low, high)


def sub(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x - y mod 2^128."""
    x_lo, x_hi = _words(x)
    y_lo, y_hi = _words(y)
    with np.errstate(over="ignore"):  # as in ``add``
        low = x_lo - y_lo
        high = x_hi - y_hi
        high -= x_lo < y_lo
    return _join(low, high)


def neg(x: np.ndarray) -> np.ndarray:
    """-x mod 2^128."""
    return sub(np.zeros_like(x), x)


def shl(x: np.ndarray, shift: int | np.ndarray) -> np.ndarray:
    """x * 2^shift mod 2^128; ``shift`` in [0, 128), a scalar or broadcastable per element."""
    s = np.asarray(shift, dtype=np.int64)
    if s.size and (s.min() < 0 or s.max() >= BITS):
        raise ValueError("shift must lie in [0, 128)")
    x_lo, x_hi = _words(x)
    su = s.astype(np.uint64)
    # numpy gives 0 for uint64 shifts by >= 64 (also the wrapped-around negative counts
    # below), so the bits moved into the high word are one of the two terms
    low = x_lo << su
    high = (x_hi << su) | (x_lo >> (_U64 - su)) | (x_lo << (su - _U64))
    return _join(low, high)


def sar(x: np.ndarray, shift: int) -> np.ndarray:
    """Arithmetic shift right: floor(signed(x) / 2^shift), for 0 <= shift < 128."""
    if not 0 <= shift < BITS:
        raise ValueError("shift must lie in [0, 128)")
    x_lo, x_hi = _words(x)
    signed_hi = x_hi.view(np.int64)
    if shift == 0:
        return x.copy()
    if shift < 64:
        s = np.uint64(shift)
        low = (x_lo >> s) | (x_hi << (_U64 - s))
        return _join(low, (signed_hi >> shift).view(np.uint64))
    low = (signed_hi >> (shift - 64)).view(np.uint64)
    return _join(low, (signed_hi >> 63).view(np.uint64))


def _mul_high64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit products a * b of uint64 arrays (32-bit limbs)."""
    a_lo, a_hi = a & _LOW32, a >> _U32
    b_lo, b_hi = b & _LOW32, b >> _U32
    lo_lo = a_lo * b_lo
    lo_hi = a_lo * b_hi
    hi_lo = a_hi * b_lo
    middle = (lo_lo >> _U32) + (lo_hi & _LOW32) + (hi_lo & _LOW32)  # < 3 * 2^32
    return a_hi * b_hi + (lo_hi >> _U32) + (hi_lo >> _U32) + (middle >> _U32)


def mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x * y mod 2^128 elementwise: the low 128 bits of the product.

    With x = x0 + 2^64 x1: x y = x0 y0 + 2^64 (x0 y1 + x1 y0) mod 2^128, and x0 y0 needs
    its high word (``_mul_high64``); the cross terms only need their low words.
    """
    x_lo, x_hi = _words(x)
    y_lo, y_hi = _words(y)
    high = _mul_high64(x_lo, y_lo)
    high += x_lo * y_hi
    high += x_hi * y_lo
    return _join(x_lo * y_lo, high)


def mul_int(x: np.ndarray, c: int) -> np.ndarray:
    """x * c mod 2^128 for a public Python int c (any sign)."""
    return mul(x, constant(c))


def sum(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Sum mod 2^128 along ``axis`` (of the leading axes): low words summed in 32-bit halves."""
    x_lo, x_hi = _words(x)
    axis = axis % (x.ndim - 1)
    if x.shape[axis] >= 1 << 31:
        raise ValueError("at most 2^31 terms per sum")
    s_lo = (x_lo & _LOW32).sum(axis=axis, dtype=np.uint64)
    s_mid = (x_lo >> _U32).sum(axis=axis, dtype=np.uint64)
    s_hi = x_hi.sum(axis=axis, dtype=np.uint64)
    upper = (s_lo >> _U32) + s_mid  # no overflow below 2^31 terms
    low = (s_lo & _LOW32) | (upper << _U32)
    return _join(low, s_hi + (upper >> _U32))


# -- randomness ------------------------------------------------------------------------
class RandomRing:
    """Cryptographic randomness for masks and shares: AES-128-CTR under an os.urandom key.

    A numpy Generator is not a cryptographic PRG (its output can be predicted from a few
    samples), so every mask that hides a value comes from this stream instead.
    """

    def __init__(self) -> None:
        self._stream = Cipher(algorithms.AES(os.urandom(16)), modes.CTR(bytes(16))).encryptor()

    def uint64(self, shape: Sequence[int] | int) -> np.ndarray:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(shape, dtype=np.int64))
        return (
            np.frombuffer(self._stream.update(bytes(8 * count)), dtype=np.uint64)
            .reshape(shape)
            .copy()
        )

    def uniform(self, n: int) -> np.ndarray:
        """n uniform ring elements, (n, 2)."""
        return self.uint64((n, 2))

    def signed_below(self, n: int, bits: int) -> np.ndarray:
        """n values uniform in [-2^(bits-1), 2^(bits-1)), as ring elements; 1 <= bits <= 128."""
        if not 1 <= bits <= BITS:
            raise ValueError("bits must lie in [1, 128]")
        return sar(self.uniform(n), BITS - bits)
