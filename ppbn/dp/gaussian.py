"""Discrete Gaussian noise drawn by thresholds on one uniform word (docs/security-dp.md,
"How the noise is drawn").

Why: under zCDP a count's discrete Gaussian noise N_Z(0, sigma^2) is rho = Delta_2^2 /
(2 sigma^2) (Canonne, Kamath and Steinke 2020, Thm. 4), the same charge as discrete
Laplace noise of scale b = sigma under ppbn's per-cell accounting, at half the variance
(sigma^2 against about 2 b^2). A Gaussian has no independent binary digits, so the draw
inverts its distribution function: the magnitude K = |X| is the number of thresholds
D_1 <= ... <= D_M (D_j = floor(P(|X| < j) 2^precision)) that a uniform ``precision``-bit
word U reaches, and one more uniform bit gives the sign (K = 0 has none to give). In a
circuit the M comparisons with constants are the whole cost (``circuits/noise.py``): the
reached thresholds form a thermometer code, whose binary value is XORs only. M is the
smallest magnitude with P(|X| > M) <= ``tail``.

The thresholds are computed with 80-digit decimals, so each is within 2^-precision of its
exact value: the drawn law is within ``GaussianSpec.deviation`` (total variation) of the
exact discrete Gaussian, as ``GeometricSpec``'s is of its law.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from functools import lru_cache

import numpy as np

from ppbn.dp.noise import uniform_integers

MAX_SUPPORT = 1 << 16  # thresholds of one draw: sigma up to about 6,000


@dataclass(frozen=True)
class GaussianSpec:
    """Discrete Gaussian noise N_Z(0, sigma^2) in integer units, drawn from one uniform
    word of ``precision`` bits (the magnitude) and a sign bit above it."""

    sigma: float
    precision: int
    thresholds: tuple[int, ...]  # D_1 .. D_M
    tail_mass: float  # P(|X| > M) of the exact law: what the truncation drops
    stddev: float  # of the exact law

    @property
    def support(self) -> int:
        """M: the largest magnitude drawn."""
        return len(self.thresholds)

    @property
    def bits(self) -> int:
        """Unsigned bits of the magnitude."""
        return max(1, self.support.bit_length())

    @property
    def word_bits(self) -> int:
        """Bits of one draw's uniform word: the magnitude's ``precision``, then the sign."""
        return self.precision + 1

    @property
    def deviation(self) -> float:
        """A bound on the total variation between one draw and the exact law: each
        threshold is within 2^-precision of its value, and the tail is dropped."""
        return self.support * 2.0**-self.precision + self.tail_mass

    def magnitude_pmf(self) -> np.ndarray:
        """P(K = k) of the drawn magnitude, k = 0 .. M."""
        edges = np.array([0, *self.thresholds, 2**self.precision], dtype=object)
        return np.array([float(width / 2**self.precision) for width in np.diff(edges)])

    def pmf(self, values: np.ndarray) -> np.ndarray:
        """P(X = x) of the drawn law, for tests."""
        magnitude = self.magnitude_pmf()
        x = np.abs(np.asarray(values, dtype=np.int64))
        inside = x <= self.support
        out = np.where(inside, magnitude[np.minimum(x, self.support)], 0.0)
        return np.where(x == 0, out, out / 2.0)

    def draw(self, uniforms: np.ndarray) -> np.ndarray:
        """X from uniform integers below 2^``word_bits`` (object array), exactly as the
        circuit computes it: K = #{j : U >= D_j} for U the low ``precision`` bits, negated
        when the top bit is set."""
        u = np.asarray(uniforms, dtype=object)
        low = u & ((1 << self.precision) - 1)
        magnitude = np.zeros(u.shape, dtype=object)
        for threshold in self.thresholds:
            magnitude = magnitude + (low >= threshold).astype(object)
        negative = (u >> self.precision).astype(bool)
        return np.where(negative, -magnitude, magnitude)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` draws in the clear (the trusted-curator twin) from ``rng``'s uniform
        bits, like the circuit: int64."""
        return self.draw(uniform_integers(rng, (size,), self.word_bits)).astype(np.int64)


@lru_cache(maxsize=64)
def gaussian_spec(sigma: float, precision: int = 64, tail: float = 2.0**-80) -> GaussianSpec:
    """The threshold draw of N_Z(0, sigma^2), enough thresholds that P(|X| > M) <= ``tail``."""
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"the noise's sigma must be a positive number, not {sigma!r}")
    if not 8 <= precision <= 256:
        raise ValueError("precision must be 8..256 bits")
    with localcontext() as ctx:
        ctx.prec = 80
        # terms t_k = exp(-k^2 / (2 sigma^2)) by t_(k+1) = t_k a^(2k+1), a = exp(-1 / (2 sigma^2))
        a = (Decimal(-1) / (Decimal(2) * Decimal(repr(sigma)) ** 2)).exp()
        a2, step, term = a * a, a, Decimal(1)
        terms = [term]
        small = Decimal(tail) * Decimal(10) ** -20
        while term > small or len(terms) < 2:
            term, step = term * step, step * a2
            terms.append(term)
            if len(terms) > MAX_SUPPORT + 2:
                raise ValueError(f"a sigma of {sigma:.3g} needs more than {MAX_SUPPORT} thresholds")
        total = terms[0] + 2 * sum(terms[1:])  # Z, to far below the tail
        inside = [terms[0]]  # P(|X| < j) Z, j = 1, 2, ...
        for k in range(1, len(terms)):
            inside.append(inside[-1] + 2 * terms[k])
        support = next(m for m in range(len(terms)) if total - inside[m] <= Decimal(tail) * total)
        full = Decimal(2) ** precision
        thresholds = tuple(
            int((inside[j - 1] / total * full).to_integral_value(rounding="ROUND_FLOOR"))
            for j in range(1, support + 1)
        )
        variance = 2 * sum(Decimal(k * k) * t for k, t in enumerate(terms)) / total
        tail_mass = float((total - inside[support]) / total)
    return GaussianSpec(float(sigma), precision, thresholds, tail_mass, float(variance.sqrt()))


def discrete_gaussian_pmf(values: np.ndarray, sigma: float) -> np.ndarray:
    """P(X = x) = exp(-x^2 / (2 sigma^2)) / Z, the exact law (Z summed to 1e-16)."""
    reach = int(math.ceil(12 * sigma)) + 2
    z = float(np.exp(-(np.arange(-reach, reach + 1) ** 2) / (2 * sigma**2)).sum())
    x = np.asarray(values, dtype=float)
    return np.exp(-(x**2) / (2 * sigma**2)) / z
