"""Additive noise with a known distribution: cdf, characteristic function, sampling.

Wu (IBM report, Sec. 2-4) perturbs a value x into z = x + y with y drawn from a public
distribution Y, and reconstructs f_X from the z's. Each estimator needs a different view
of Y: EM and binned EM the probability Pr(Y in z - R) = F(z - a) - F(z - b) of an
interval (so only the cdf F, which also covers discrete noise), the direct Fourier
estimate the characteristic function phi(t) = E exp(i t Y) (Sec. 3.1), the one-step
protocol the mean (Sec. 4). Sampling draws from ``RandomSource`` (AES-CTR uniforms, see
``ppbn.randomized.pram.operators``) for the same reason as PRAM: a seeded NumPy generator's
state, hence the noise, can be recovered from its outputs.

Continuous noises (Sec. 3): ``gaussian`` (sigma = standard deviation, mean) and
``uniform`` (low, high; Wu's examples use [0, 20]).
Lattice noises y = gamma * w, w an integer (Sec. 4.1-4.2):
- ``discrete_normal``: w = round(N), N normal with mean 0 and standard deviation sigma.
  The text says "variance sigma"; its examples all have sigma = 1, where the two agree.
- ``poisson``: Pr(w) = lam^w e^-lam / w!, w >= 0.
- ``inverse_square``: Pr(w) = 6 / ((2 pi^2 - 6)(|w| + 1)^2), w any integer: heavy-tailed,
  no mean (footnote 1: symmetric, so the one-step protocol uses centre 0).
- ``inverse_cube``: Pr(w) = 1 / (zeta(3) w^3), w >= 1 (Sec. 4.2; mean zeta(2)/zeta(3)).
- ``geometric``: Pr(w) = (a - 1) / a^(w + 1), w >= 0, a > 1 (Sec. 4.2).
Two characteristic functions have no closed form and are summed to a cutoff; the bound on
the truncation error is ``char_error`` (1e-6 for inverse_square, below 1e-10 otherwise).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import gammaln, ndtr, pdtr, polygamma, zeta

from ppbn.randomized.pram.operators import RandomizationError, RandomSource

ZETA2 = math.pi**2 / 6
ZETA3 = float(zeta(3.0))
INVERSE_SQUARE_C = 6.0 / (2 * math.pi**2 - 6)
_INVERSE_SQUARE_TERMS = 1_000_000
_INVERSE_CUBE_TERMS = 100_000


def _positive(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise RandomizationError(f"{what} must be a number, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise RandomizationError(f"{what} must be a positive number, got {value!r}")
    return x


def _finite(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise RandomizationError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise RandomizationError(f"{what} must be a finite number, got {value!r}")
    return x


class Noise(ABC):
    """A public noise distribution Y; ``z = x + y`` for each record."""

    kind: str = ""
    #: bound on the absolute error of ``char`` (0 when it is in closed form)
    char_error: float = 0.0

    @abstractmethod
    def cdf(self, t: np.ndarray) -> np.ndarray:
        """Pr(Y <= t), right-continuous (a lattice noise jumps at its atoms)."""

    @abstractmethod
    def char(self, t: np.ndarray) -> np.ndarray:
        """The characteristic function E exp(i t Y) (complex)."""

    @abstractmethod
    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        """n independent draws of Y from the keystream of ``source``."""

    @property
    @abstractmethod
    def mean(self) -> float | None:
        """E Y, or None when Y has no mean (inverse_square)."""

    @property
    def centre(self) -> float:
        """What the one-step protocol subtracts: the mean, or the centre of symmetry."""
        if self.mean is None:
            raise RandomizationError(f"{self.describe()} has no mean to subtract")
        return self.mean

    @abstractmethod
    def params(self) -> dict[str, float]:
        """The parameters as in the mechanism file."""

    def describe(self) -> str:
        inner = ", ".join(f"{k}={v:g}" for k, v in self.params().items())
        return f"{self.kind}({inner})"

    def quantile(self, q: float) -> float:
        """The smallest t with F(t) >= q, by bisection (used for default ranges only)."""
        lo, hi = -1.0, 1.0
        while self.cdf(np.array([lo]))[0] >= q:
            lo *= 2
        while self.cdf(np.array([hi]))[0] < q:
            hi *= 2
        for _ in range(200):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            if self.cdf(np.array([mid]))[0] >= q:
                hi = mid
            else:
                lo = mid
        return hi


# -- continuous noise (Wu Sec. 3) --------------------------------------------------------------


@dataclass(frozen=True)
class Gaussian(Noise):
    """Normal noise with standard deviation ``sigma`` and mean ``mu``."""

    sigma: float
    mu: float = 0.0
    kind = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _positive(self.sigma, "gaussian sigma"))
        object.__setattr__(self, "mu", _finite(self.mu, "gaussian mean"))

    def pdf(self, t: np.ndarray) -> np.ndarray:
        u = (np.asarray(t, dtype=float) - self.mu) / self.sigma
        return np.exp(-0.5 * u * u) / (self.sigma * math.sqrt(2 * math.pi))

    def cdf(self, t: np.ndarray) -> np.ndarray:
        return ndtr((np.asarray(t, dtype=float) - self.mu) / self.sigma)

    def char(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return np.exp(1j * self.mu * t - 0.5 * (self.sigma * t) ** 2)

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        return self.mu + self.sigma * standard_normal(n, source)

    @property
    def mean(self) -> float:
        return self.mu

    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "mean": self.mu}


@dataclass(frozen=True)
class Uniform(Noise):
    """Uniform noise on [low, high] (Wu's examples: [0, 20])."""

    low: float
    high: float
    kind = "uniform"

    def __post_init__(self) -> None:
        low, high = _finite(self.low, "uniform low"), _finite(self.high, "uniform high")
        if not low < high:
            raise RandomizationError(f"uniform needs low < high, got low={low:g}, high={high:g}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    def pdf(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return np.where((t >= self.low) & (t <= self.high), 1.0 / (self.high - self.low), 0.0)

    def cdf(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return np.clip((t - self.low) / (self.high - self.low), 0.0, 1.0)

    def char(self, t: np.ndarray) -> np.ndarray:
        """exp(i t (low+high)/2) sin(t w/2) / (t w/2), w = high - low: zero at t = 2 pi k / w."""
        t = np.asarray(t, dtype=float)
        width = self.high - self.low
        return np.exp(0.5j * t * (self.low + self.high)) * np.sinc(t * width / (2 * math.pi))

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        return self.low + (self.high - self.low) * source.uniform(n)

    @property
    def mean(self) -> float:
        return 0.5 * (self.low + self.high)

    def params(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high}


def standard_normal(n: int, source: RandomSource) -> np.ndarray:
    """n standard normal draws by Box-Muller from 2n keystream uniforms."""
    u = source.uniform(2 * int(n))
    radius = np.sqrt(-2.0 * np.log1p(-u[:n]))  # 1 - u is in (0, 1]
    return radius * np.cos(2 * math.pi * u[n:])


# -- lattice noise y = gamma * w (Wu Sec. 4.1-4.2) ---------------------------------------------


@dataclass(frozen=True)
class Lattice(Noise):
    """Noise on the lattice gamma * Z; subclasses give the integer cdf and the range searched."""

    gamma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "gamma", _positive(self.gamma, f"{self.kind} gamma"))

    @abstractmethod
    def cdf_int(self, k: np.ndarray) -> np.ndarray:
        """Pr(w <= k) for integer arrays k."""

    @property
    @abstractmethod
    def k_range(self) -> tuple[int, int]:
        """Integers searched when sampling: all but a mass below 2^-53 lies inside."""

    def pmf(self, k: np.ndarray) -> np.ndarray:
        """Pr(w = k) for integer arrays k."""
        k = np.asarray(k, dtype=np.int64)
        return self.cdf_int(k) - self.cdf_int(k - 1)

    def cdf(self, t: np.ndarray) -> np.ndarray:
        k = np.floor(np.asarray(t, dtype=float) / self.gamma)
        lo, hi = self.k_range
        inside = self.cdf_int(np.clip(k, lo - 1, hi).astype(np.int64))
        return np.where(k < lo, 0.0, np.where(k >= hi, 1.0, inside))

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        """Inverse cdf: the smallest k with Pr(w <= k) >= u, by bisection over ``k_range``."""
        u = source.uniform(int(n))
        kmin, kmax = self.k_range
        lo = np.full(len(u), kmin - 1, dtype=np.int64)  # Pr(w <= lo) < u (or lo below the support)
        hi = np.full(len(u), kmax, dtype=np.int64)
        while True:
            open_ = hi - lo > 1
            if not open_.any():
                break
            mid = lo + (hi - lo) // 2
            above = self.cdf_int(mid) >= u
            hi = np.where(open_ & above, mid, hi)
            lo = np.where(open_ & ~above, mid, lo)
        return self.gamma * hi.astype(float)

    def _char_sum(self, t: np.ndarray, ks: np.ndarray, weights: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        flat = [np.sum(weights * np.exp(1j * x * self.gamma * ks)) for x in t.ravel()]
        return np.array(flat, dtype=complex).reshape(t.shape)


@dataclass(frozen=True)
class DiscreteNormal(Lattice):
    """gamma * round(N), N normal with mean 0 and standard deviation sigma (Wu Sec. 4.1)."""

    sigma: float = 1.0
    kind = "discrete_normal"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "sigma", _positive(self.sigma, "discrete_normal sigma"))

    def cdf_int(self, k: np.ndarray) -> np.ndarray:
        return ndtr((np.asarray(k, dtype=float) + 0.5) / self.sigma)

    @property
    def k_range(self) -> tuple[int, int]:
        reach = int(math.ceil(9 * self.sigma)) + 1  # 9 sd: tail mass below 2^-60
        return -reach, reach

    def char(self, t: np.ndarray) -> np.ndarray:
        lo, hi = self.k_range  # the mass outside is below 2^-60
        ks = np.arange(lo, hi + 1)
        return self._char_sum(t, ks, self.pmf(ks))

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        return self.gamma * np.round(self.sigma * standard_normal(n, source))

    @property
    def mean(self) -> float:
        return 0.0

    def params(self) -> dict[str, float]:
        return {"gamma": self.gamma, "sigma": self.sigma}


@dataclass(frozen=True)
class Poisson(Lattice):
    """Pr(gamma w) = lam^w e^-lam / w!, w >= 0 (Wu Sec. 4.1)."""

    lam: float = 1.0
    kind = "poisson"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "lam", _positive(self.lam, "poisson lam"))

    def cdf_int(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k)
        return np.where(k < 0, 0.0, pdtr(np.maximum(k, 0), self.lam))

    def pmf(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=float)
        safe = np.maximum(k, 0)
        return np.where(
            k < 0, 0.0, np.exp(safe * math.log(self.lam) - self.lam - gammaln(safe + 1))
        )

    @property
    def k_range(self) -> tuple[int, int]:
        return 0, int(math.ceil(self.lam + 40 * math.sqrt(self.lam) + 40))

    def char(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return np.exp(self.lam * (np.exp(1j * t * self.gamma) - 1))

    @property
    def mean(self) -> float:
        return self.gamma * self.lam

    def params(self) -> dict[str, float]:
        return {"gamma": self.gamma, "lam": self.lam}


@dataclass(frozen=True)
class InverseSquare(Lattice):
    """Pr(gamma w) = c / (|w| + 1)^2 over all integers, c = 6 / (2 pi^2 - 6) (Wu Sec. 4.1).

    No mean (footnote 1); symmetric, so the one-step protocol subtracts 0. The cdf uses the
    trigamma function: sum_{j >= n} 1/j^2 = psi_1(n).
    """

    kind = "inverse_square"
    char_error = 2 * INVERSE_SQUARE_C / (_INVERSE_SQUARE_TERMS + 1)

    def cdf_int(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=float)
        tail = INVERSE_SQUARE_C * polygamma(1, np.where(k < 0, 1 - k, k + 2))
        return np.where(k < 0, tail, 1.0 - tail)

    @property
    def k_range(self) -> tuple[int, int]:
        return -(2**52), 2**52

    def char(self, t: np.ndarray) -> np.ndarray:
        j = np.arange(1, _INVERSE_SQUARE_TERMS + 1, dtype=float)
        t = np.asarray(t, dtype=float)
        flat = [
            INVERSE_SQUARE_C * (1 + 2 * np.sum(np.cos(x * self.gamma * j) / (j + 1) ** 2))
            for x in t.ravel()
        ]
        return np.array(flat, dtype=complex).reshape(t.shape)

    @property
    def mean(self) -> None:
        return None

    @property
    def centre(self) -> float:
        return 0.0

    def params(self) -> dict[str, float]:
        return {"gamma": self.gamma}


@dataclass(frozen=True)
class InverseCube(Lattice):
    """Pr(gamma w) = 1 / (zeta(3) w^3), w >= 1 (Wu Sec. 4.2); mean gamma zeta(2)/zeta(3)."""

    kind = "inverse_cube"
    char_error = 1.0 / (2 * ZETA3 * _INVERSE_CUBE_TERMS**2)

    def cdf_int(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=float)
        tail = -polygamma(2, np.maximum(k, 0) + 1) / 2  # sum_{j > k} 1/j^3
        return np.where(k < 1, 0.0, 1.0 - tail / ZETA3)

    @property
    def k_range(self) -> tuple[int, int]:
        return 1, 2**40

    def char(self, t: np.ndarray) -> np.ndarray:
        ks = np.arange(1, _INVERSE_CUBE_TERMS + 1, dtype=float)
        return self._char_sum(t, ks, 1.0 / (ZETA3 * ks**3))

    @property
    def mean(self) -> float:
        return self.gamma * ZETA2 / ZETA3

    def params(self) -> dict[str, float]:
        return {"gamma": self.gamma}


@dataclass(frozen=True)
class Geometric(Lattice):
    """Pr(gamma w) = (a - 1) / a^(w + 1), w >= 0, a > 1 (Wu Sec. 4.2); mean gamma / (a - 1)."""

    a: float = 2.0
    kind = "geometric"

    def __post_init__(self) -> None:
        super().__post_init__()
        a = _finite(self.a, "geometric a")
        if not a > 1:
            raise RandomizationError(f"geometric a must be greater than 1, got {a:g}")
        object.__setattr__(self, "a", a)

    def cdf_int(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=float)
        return np.where(k < 0, 0.0, -np.expm1(-(np.maximum(k, 0) + 1) * math.log(self.a)))

    @property
    def k_range(self) -> tuple[int, int]:
        return 0, int(math.ceil(60 * math.log(2) / math.log(self.a))) + 1

    def char(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return (self.a - 1) / (self.a - np.exp(1j * t * self.gamma))

    @property
    def mean(self) -> float:
        return self.gamma / (self.a - 1)

    def params(self) -> dict[str, float]:
        return {"gamma": self.gamma, "a": self.a}


# -- construction from a mechanism-file entry ------------------------------------------------

_BUILDERS: dict[str, tuple[Callable[..., Noise], tuple[str, ...], dict[str, float]]] = {
    "gaussian": (lambda sigma, mean: Gaussian(sigma, mean), ("sigma",), {"mean": 0.0}),
    "uniform": (lambda low, high: Uniform(low, high), ("low", "high"), {}),
    "discrete_normal": (
        lambda gamma, sigma: DiscreteNormal(gamma, sigma),
        ("gamma",),
        {"sigma": 1.0},
    ),
    "poisson": (lambda gamma, lam: Poisson(gamma, lam), ("gamma", "lam"), {}),
    "inverse_square": (lambda gamma: InverseSquare(gamma), ("gamma",), {}),
    "inverse_cube": (lambda gamma: InverseCube(gamma), ("gamma",), {}),
    "geometric": (lambda gamma, a: Geometric(gamma, a), ("gamma", "a"), {}),
}
NOISE_KINDS = tuple(_BUILDERS)


def noise_from_dict(entry: Any) -> Noise:
    """A noise from ``{"kind": ..., params}``; unknown or missing fields are one-line errors."""
    if not isinstance(entry, Mapping):
        raise RandomizationError(f"noise must be an object with a 'kind', got {entry!r}")
    kind = entry.get("kind")
    if kind not in _BUILDERS:
        raise RandomizationError(f"noise kind {kind!r} is not one of {', '.join(NOISE_KINDS)}")
    build, required, optional = _BUILDERS[kind]
    missing = [name for name in required if name not in entry]
    if missing:
        raise RandomizationError(f"noise {kind} needs {', '.join(repr(m) for m in missing)}")
    unknown = sorted(set(entry) - {"kind", *required, *optional})
    if unknown:
        raise RandomizationError(f"noise {kind}: unknown field {unknown[0]!r}")
    values = {name: entry[name] for name in required}
    values.update({name: entry.get(name, default) for name, default in optional.items()})
    return build(**values)
