"""Geometric and discrete Laplace noise as independent biased bits (docs/security-dp.md,
"How the noise is drawn").

A geometric variable G with P(G = g) = (1 - q) q^g (g >= 0) has independent binary
digits: q^g factorises over the bits of g, so bit k is 1 with probability
p_k = q^(2^k) / (1 + q^(2^k)). Each bit is drawn as [U_k < T_k] from a uniform
``precision``-bit U_k and the threshold T_k = floor(p_k 2^precision): a comparison with a
constant, which a garbled circuit computes in about ``precision`` AND gates
(``circuits/noise.py``), with U_k the XOR of one uniform value from each party, so neither
knows the bit. The digits stop at ``bits``: the truncated tail has mass q^(2^bits).
The difference of two independent geometric variables of the same q is discrete Laplace,
P(N = z) = (1 - q) / (1 + q) q^|z| (Canonne, Kamath and Steinke 2020, Sec. 2).

The thresholds are computed with 80-digit decimals, so each drawn bit's probability is
within 2^-precision of p_k: the whole draw is within ``GeometricSpec.deviation`` (total
variation) of the exact truncated distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from functools import lru_cache

import numpy as np

DEFAULT_PRECISION = 64  # bits of each uniform U_k
DEFAULT_TAIL = 2.0**-80  # the largest tail mass q^(2^bits) a spec accepts
MAX_BITS = 160
INT64_BITS = 62  # draws of at most this many digits fit an int64


@dataclass(frozen=True)
class GeometricSpec:
    """One-sided geometric noise in integer units, q = exp(-1 / scale), drawn bit by bit."""

    scale: float
    bits: int
    precision: int
    thresholds: tuple[int, ...]  # T_k = floor(p_k 2^precision), k = 0 .. bits - 1

    @property
    def q(self) -> float:
        return math.exp(-1.0 / self.scale)

    @property
    def tail_mass(self) -> float:
        """P(G >= 2^bits) of the exact geometric: the mass the truncation drops."""
        return math.exp(-(2.0**self.bits) / self.scale)

    @property
    def deviation(self) -> float:
        """A bound on the total variation between one draw and the exact geometric: each bit
        is within 2^-precision of its probability, and the tail is dropped."""
        return self.bits * 2.0**-self.precision + self.tail_mass

    def bit_probabilities(self) -> np.ndarray:
        """The probability each drawn bit is 1: T_k / 2^precision."""
        return np.array([t / 2.0**self.precision for t in self.thresholds])

    def pmf(self, values: np.ndarray) -> np.ndarray:
        """P(G = g) of the drawn (truncated, thresholded) distribution, for tests."""
        p = self.bit_probabilities()
        g = np.asarray(values, dtype=np.int64)
        out = np.ones(g.shape)
        for k, pk in enumerate(p):
            bit = (g >> k) & 1
            out *= np.where(bit == 1, pk, 1.0 - pk)
        return np.where((g >= 0) & (g < 2**self.bits), out, 0.0)

    def draw_bits(self, uniforms: np.ndarray) -> np.ndarray:
        """G from uniform integers (shape (..., bits), each below 2^precision), exactly as the
        circuit computes it: bit k is [U_k < T_k]."""
        u = np.asarray(uniforms, dtype=object)
        if u.shape[-1] != self.bits:
            raise ValueError(f"need {self.bits} uniforms per draw, got {u.shape[-1]}")
        total = np.zeros(u.shape[:-1], dtype=object)
        for k, t in enumerate(self.thresholds):
            total = total + ((u[..., k] < t).astype(object) << k)
        return total

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` draws in the clear (the trusted-curator twin, ``reference.py``), bit by
        bit like the circuit, from ``rng``'s uniform bits: int64, or Python integers
        (an object array) when a draw may not fit 63 bits."""
        drawn = self.draw_bits(uniform_integers(rng, (size, self.bits), self.precision))
        return drawn.astype(np.int64) if self.bits <= INT64_BITS else drawn


def uniform_integers(rng: np.random.Generator, shape: tuple[int, ...], bits: int) -> np.ndarray:
    """Uniform ``bits``-bit integers (an object array of ``shape``) from ``rng``, assembled
    from 64-bit words: what the twins feed the plaintext models of the draws."""
    words = -(-bits // 64)
    raw = rng.integers(0, 2**63, size=(*shape, words), dtype=np.int64).astype(object)
    raw = raw * 2 + rng.integers(0, 2, size=raw.shape).astype(object)  # 64 bits per word
    uniforms = np.zeros(shape, dtype=object)
    for w in range(words):
        uniforms = (uniforms << 64) | raw[..., w]
    return uniforms >> (64 * words - bits)


@lru_cache(maxsize=256)
def geometric_spec(
    scale: float, precision: int = DEFAULT_PRECISION, tail: float = DEFAULT_TAIL
) -> GeometricSpec:
    """The bitwise draw of the geometric with q = exp(-1/scale), enough digits that the tail
    q^(2^bits) is at most ``tail``."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"the noise scale must be a positive number, not {scale!r}")
    if not 8 <= precision <= 256:
        raise ValueError("precision must be 8..256 bits")
    # q^(2^bits) <= tail  <=>  2^bits >= scale ln(1/tail)
    bits = max(1, math.ceil(math.log2(scale * math.log(1.0 / tail))))
    if bits > MAX_BITS:
        raise ValueError(f"a noise scale of {scale:.3g} needs {bits} bits; at most {MAX_BITS}")
    with localcontext() as ctx:
        ctx.prec = 80
        one = Decimal(1)
        inverse_scale = one / Decimal(repr(scale))
        full = Decimal(2) ** precision
        thresholds = []
        for k in range(bits):
            power = (-(Decimal(2) ** k) * inverse_scale).exp()  # q^(2^k)
            thresholds.append(
                int((power / (one + power) * full).to_integral_value(rounding="ROUND_FLOOR"))
            )
    return GeometricSpec(float(scale), bits, precision, tuple(thresholds))


def discrete_laplace_pmf(values: np.ndarray, scale: float) -> np.ndarray:
    """P(N = z) = (1 - q) / (1 + q) q^|z| with q = exp(-1/scale): the exact law the
    difference of two geometric draws approximates (within their ``deviation``)."""
    q = math.exp(-1.0 / scale)
    z = np.abs(np.asarray(values, dtype=float))
    return (1 - q) / (1 + q) * np.exp(-z / scale)
