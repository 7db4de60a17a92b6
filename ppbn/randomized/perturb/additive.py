"""Reconstructing the distribution of X from z = x + y, y with a known distribution (Wu).

Wu's IBM report, section by section:

- Sec. 3 (restating Agrawal and Aggarwal): EM on the individual values, O(N K) per
  iteration. The estimate is piecewise constant on K bins R_i of widths m_i; with bin
  probabilities pi_i = theta_i m_i Wu's step 2 reads
  pi_i <- (pi_i / N) sum_j K(z_j, i) / sum_l pi_l K(z_j, l), where
  K(z, i) = Pr(Y in z - R_i) / m_i is the density of z when x is uniform in R_i.
- Sec. 3.4: binned EM. Quantize z to M bins with centres t_m and counts N_m; then each
  iteration is O(M K). We normalize each bin's column K(t_m, i) over the M z-bins, so it is
  the probability that a z from R_i falls in z-bin m (the point-spread function); Wu writes
  the unnormalized centre value, which differs by the Riemann error of the centre rule.
  With that PSF the iteration is Richardson-Lucy deconvolution of the z histogram,
  exactly (``richardson_lucy`` below is written independently, in its own form).
- Sec. 3.1-3.2: the direct Fourier estimate. Scale X's support [lo, hi] to [0, 1]; X's
  k-th Fourier coefficient is Z's empirical coefficient divided by Y's characteristic
  function at 2 pi k / L (Wu's A_k^{-1}); keep k <= H harmonics, cap the inverse gain
  1/|phi| (Sec. 3.2: "limiting the magnitude of the frequency response of the inverse
  filter"), clip the density at 0. A zero of phi at a used harmonic is an error.
- Sec. 4: the one-step protocol. Each client sends its one-hot bin vector plus k iid
  draws of W (known mean); the server keeps a running sum, and its estimate of the bin
  fractions is max(0, sum / n - mean).
- Sec. 5: information loss 1/2 sum_j |h_j - h_hat_j| between the histogram of the
  original values and the reconstructed one, on the same bins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ppbn.randomized.perturb.noise import Lattice, Noise
from ppbn.randomized.pram.operators import RandomizationError, RandomSource

#: the largest z histogram binned EM builds by default
MAX_Z_BINS = 20_000


# -- bins ---------------------------------------------------------------------------------------


def uniform_edges(lo: float, hi: float, count: int) -> np.ndarray:
    """``count`` equal bins over [lo, hi]."""
    if count < 1:
        raise RandomizationError(f"the number of bins must be at least 1, got {count}")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise RandomizationError(f"the range must be finite with lo < hi, got [{lo:g}, {hi:g}]")
    return np.linspace(lo, hi, count + 1)


def check_edges(edges: np.ndarray) -> np.ndarray:
    """Bin edges as floats: at least two, finite, strictly increasing."""
    arr = np.asarray(edges, dtype=float).ravel()
    if arr.size < 2 or not np.all(np.isfinite(arr)) or np.any(np.diff(arr) <= 0):
        raise RandomizationError(
            "bin edges must be at least two finite, strictly increasing numbers"
        )
    return arr


def histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Fractions of ``values`` per bin; values outside the edges count in the outer bins."""
    edges = check_edges(edges)
    x = np.clip(np.asarray(values, dtype=float), edges[0], edges[-1])
    counts, _ = np.histogram(x, bins=edges)
    return counts / max(len(x), 1)


def default_range(z: np.ndarray, noise: Noise, tail: float = 1e-3) -> tuple[float, float]:
    """A support for X from the data: [min z - q(tail), max z - q(1 - tail)], q the noise's
    quantiles (Z's support is X's shifted by Y's). Give the range when it is known."""
    z = np.asarray(z, dtype=float)
    lo = float(z.min()) - noise.quantile(tail)
    hi = float(z.max()) - noise.quantile(1.0 - tail)
    if not lo < hi:
        raise RandomizationError(
            f"cannot infer the range of the original values: the noise {noise.describe()} is "
            "wider than the spread of the data; give the range"
        )
    return lo, hi


@dataclass(frozen=True)
class Reconstruction:
    """An estimated distribution on bins: probabilities (summing to 1) and how it ended."""

    method: str
    edges: np.ndarray
    probabilities: np.ndarray
    iterations: int = 0
    converged: bool = True

    @property
    def density(self) -> np.ndarray:
        """The piecewise-constant density theta_i = pi_i / m_i (Wu Sec. 3)."""
        return self.probabilities / np.diff(self.edges)


# -- EM on individual values (Wu Sec. 3) and binned EM (Sec. 3.4) ------------------------------


def interval_kernel(noise: Noise, points: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """K[j, i] = Pr(Y in t_j - R_i) / m_i = (F(t_j - a_i) - F(t_j - a_{i+1})) / m_i: the
    density of z = t_j when x is uniform in bin R_i = [a_i, a_{i+1}) (Wu Sec. 3, step 2)."""
    edges = check_edges(edges)
    cdf = noise.cdf(np.asarray(points, dtype=float)[:, None] - edges[None, :])
    return (cdf[:, :-1] - cdf[:, 1:]) / np.diff(edges)


def _start(start: np.ndarray | None, k: int) -> np.ndarray:
    """Wu's start theta^0 = 1/K, or a given one (e.g. the Fourier estimate, Sec. 3.1). EM
    never moves a zero, so a start with zeros is mixed with 0.1% of the uniform one."""
    if start is None:
        return np.full(k, 1.0 / k)
    pi = np.asarray(start, dtype=float)
    if pi.shape != (k,) or np.any(pi < 0) or not np.all(np.isfinite(pi)) or pi.sum() <= 0:
        raise RandomizationError(f"the start must be {k} nonnegative numbers with a positive sum")
    pi = pi / pi.sum()
    return pi if pi.min() > 0 else 0.999 * pi + 0.001 / k


def _em(
    kernel: np.ndarray, weights: np.ndarray, start: np.ndarray, max_iter: int, tol: float
) -> tuple[np.ndarray, int, bool]:
    """pi_i <- pi_i sum_m w_m K[m, i] / (K pi)_m with sum_m w_m = 1, until no probability
    moves by more than ``tol``. The update keeps pi nonnegative and summing to 1."""
    pi = start
    for iteration in range(1, max_iter + 1):
        mix = kernel @ pi
        share = np.divide(weights, mix, out=np.zeros_like(weights), where=mix > 0)
        updated = pi * (kernel.T @ share)
        change = float(np.max(np.abs(updated - pi)))
        pi = updated
        if change <= tol:
            return pi, iteration, True
    return pi, max_iter, False


def _reachable(kernel: np.ndarray, noise: Noise, edges: np.ndarray, what: str) -> None:
    dead = np.flatnonzero(~np.any(kernel > 0, axis=1))
    if dead.size:
        raise RandomizationError(
            f"{dead.size} {what} cannot come from any value in [{edges[0]:g}, {edges[-1]:g}] "
            f"under the noise {noise.describe()}: widen the range"
        )


def em_individual(
    z: np.ndarray,
    noise: Noise,
    edges: np.ndarray,
    *,
    max_iter: int = 500,
    tol: float = 1e-6,
    start: np.ndarray | None = None,
) -> Reconstruction:
    """EM of Agrawal and Aggarwal on the N perturbed values (Wu Sec. 3): O(N K) per iteration
    on the N x K kernel, held in memory (8 N K bytes)."""
    z = np.asarray(z, dtype=float)
    edges = check_edges(edges)
    if z.size == 0:
        raise RandomizationError("no values to reconstruct from")
    kernel = interval_kernel(noise, z, edges)
    _reachable(kernel, noise, edges, "values")
    weights = np.full(z.size, 1.0 / z.size)
    pi, iterations, converged = _em(kernel, weights, _start(start, len(edges) - 1), max_iter, tol)
    return Reconstruction("em", edges, pi, iterations, converged)


def z_histogram_edges(z: np.ndarray, edges: np.ndarray, per_bin: int = 8) -> np.ndarray:
    """Default z bins for binned EM: over [min z, max z], ``per_bin`` times finer than the
    narrowest bin of X, at most MAX_Z_BINS of them."""
    z = np.asarray(z, dtype=float)
    lo, hi = float(z.min()), float(z.max())
    if lo == hi:
        return np.array([lo - 0.5, hi + 0.5])
    width = float(np.min(np.diff(check_edges(edges)))) / per_bin
    count = min(MAX_Z_BINS, max(1, math.ceil((hi - lo) / width)))
    return np.linspace(lo, hi, count + 1)


def quantized_problem(
    z: np.ndarray, noise: Noise, edges: np.ndarray, z_edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Binned EM's data and point-spread function (Wu Sec. 3.4).

    Counts N_m of z per z-bin, and P[m, i] = c dt_m K(t_m, i): the probability that a z
    from bin R_i lands in z-bin m by the centre rule, with one more row for "outside the
    histogram" (count 0) holding 1 minus the column sum, so every column sums to 1. The
    constant c = 1 / max(1, largest column sum) only absorbs the centre rule's overshoot.
    Row and global scalings cancel in the EM update, so binned EM on P is Wu's step with
    Pr(Y in t_m - R_i) literally; the unit columns make it Richardson-Lucy exactly.
    """
    z_edges = check_edges(z_edges)
    counts, _ = np.histogram(np.asarray(z, dtype=float), bins=z_edges)
    centres = 0.5 * (z_edges[:-1] + z_edges[1:])
    inside = interval_kernel(noise, centres, edges) * np.diff(z_edges)[:, None]
    inside /= max(1.0, float(inside.sum(axis=0).max()))
    _reachable(inside[counts > 0], noise, edges, "z-bins holding values")
    outside = np.clip(1.0 - inside.sum(axis=0), 0.0, None)
    return np.append(counts, 0).astype(float), np.vstack([inside, outside])


def binned_em(
    z: np.ndarray,
    noise: Noise,
    edges: np.ndarray,
    *,
    z_edges: np.ndarray | None = None,
    max_iter: int = 500,
    tol: float = 1e-6,
    start: np.ndarray | None = None,
) -> Reconstruction:
    """Binned EM (Wu Sec. 3.4): one pass to histogram z, then O(M K) per iteration."""
    edges = check_edges(edges)
    if np.asarray(z).size == 0:
        raise RandomizationError("no values to reconstruct from")
    z_edges = z_histogram_edges(z, edges) if z_edges is None else z_edges
    counts, psf = quantized_problem(z, noise, edges, z_edges)
    used = counts > 0  # an empty z-bin adds nothing to the update
    weights = counts[used] / counts.sum()
    start_pi = _start(start, len(edges) - 1)
    pi, iterations, converged = _em(psf[used], weights, start_pi, max_iter, tol)
    return Reconstruction("binned-em", edges, pi, iterations, converged)


def richardson_lucy(
    observed: np.ndarray,
    psf: np.ndarray,
    start: np.ndarray | None = None,
    *,
    max_iter: int = 500,
    tol: float = 1e-6,
) -> tuple[np.ndarray, int, bool]:
    """Richardson-Lucy deconvolution (Richardson 1972, Lucy 1974; Snyder et al. 1992, Wu's
    ref. [11]) of data d = H u + noise, for a nonnegative H and d:

        u <- u / (H^T 1) * H^T (d / (H u)),

    from ``start`` (default: flat, with the total of d). Stops when no entry of u moves by
    more than ``tol`` times the total of d. Returns u, the iterations run, and whether it
    converged. A source no observation can come from (zero column) is set to 0.
    """
    d = np.asarray(observed, dtype=float)
    h = np.asarray(psf, dtype=float)
    if h.ndim != 2 or d.shape != (h.shape[0],) or np.any(h < 0) or np.any(d < 0):
        raise RandomizationError(
            "richardson_lucy needs d >= 0 of length M and H >= 0 of shape (M, K)"
        )
    total = float(d.sum())
    sensitivity = h.sum(axis=0)
    u = np.full(h.shape[1], total / h.shape[1]) if start is None else np.asarray(start, float)
    u = np.where(sensitivity > 0, u, 0.0)
    scale = np.divide(1.0, sensitivity, out=np.zeros_like(sensitivity), where=sensitivity > 0)
    for iteration in range(1, max_iter + 1):
        blurred = h @ u
        ratio = np.divide(d, blurred, out=np.zeros_like(d), where=blurred > 0)
        updated = u * scale * (h.T @ ratio)
        change = float(np.max(np.abs(updated - u)))
        u = updated
        if change <= tol * total:
            return u, iteration, True
    return u, max_iter, False


def richardson_lucy_reconstruction(
    z: np.ndarray,
    noise: Noise,
    edges: np.ndarray,
    *,
    z_edges: np.ndarray | None = None,
    max_iter: int = 500,
    tol: float = 1e-6,
    start: np.ndarray | None = None,
) -> Reconstruction:
    """Richardson-Lucy on the z histogram with the PSF of ``quantized_problem``: the same
    estimate as ``binned_em`` (Wu Sec. 3.4), reached as deconvolution."""
    edges = check_edges(edges)
    if np.asarray(z).size == 0:
        raise RandomizationError("no values to reconstruct from")
    z_edges = z_histogram_edges(z, edges) if z_edges is None else z_edges
    counts, psf = quantized_problem(z, noise, edges, z_edges)
    u0 = _start(start, len(edges) - 1) * counts.sum()
    u, iterations, converged = richardson_lucy(counts, psf, u0, max_iter=max_iter, tol=tol)
    return Reconstruction("richardson-lucy", edges, u / u.sum(), iterations, converged)


# -- the direct Fourier estimate (Wu Sec. 3.1-3.2) ----------------------------------------------

#: |phi| at or below this (or ten times the noise's truncation error) is a zero: rounding
#: leaves about 1e-16 at an exact zero (a uniform noise's), while a small but true value (a
#: gaussian's far harmonics) is kept and its gain capped
CHAR_ZERO = 1e-12


@dataclass(frozen=True)
class FourierEstimate:
    """f_X on [lo, hi] from its first harmonics: f(u) = 1 + 2 Re sum_k c_k e^{2 pi i k u}
    on the scaled support u = (x - lo) / L, c_k = E exp(-2 pi i k U) (Wu's a_k = -2 Im c_k,
    b_k = 2 Re c_k). ``capped`` lists the harmonics whose inverse gain was capped."""

    lo: float
    hi: float
    coefficients: np.ndarray
    capped: tuple[int, ...]

    def raw_density(self, x: np.ndarray) -> np.ndarray:
        """The truncated series itself (may be negative), 0 outside [lo, hi]."""
        x = np.asarray(x, dtype=float)
        width = self.hi - self.lo
        u = (x - self.lo) / width
        k = np.arange(1, len(self.coefficients) + 1)
        waves = np.exp(2j * math.pi * np.multiply.outer(u, k))
        series = 1.0 + 2.0 * np.real(waves @ self.coefficients)
        return np.where((x >= self.lo) & (x <= self.hi), series / width, 0.0)

    def density(self, x: np.ndarray) -> np.ndarray:
        """The series clipped at 0 and renormalized to integrate to 1 (Wu: "forced to be
        nonnegative")."""
        return np.clip(self.raw_density(x), 0.0, None) / self._mass()

    def _mass(self, points: int = 8192) -> float:
        width = self.hi - self.lo
        grid = self.lo + (np.arange(points) + 0.5) * width / points
        mass = float(np.clip(self.raw_density(grid), 0.0, None).mean() * width)
        if mass <= 0:
            raise RandomizationError("the Fourier estimate is nowhere positive; use an EM method")
        return mass

    def bin_probabilities(self, edges: np.ndarray, points_per_bin: int = 256) -> np.ndarray:
        """The clipped density integrated over each bin (midpoint rule), summing to 1."""
        edges = check_edges(edges)
        steps = (np.arange(points_per_bin) + 0.5) / points_per_bin
        grid = edges[:-1, None] + np.diff(edges)[:, None] * steps[None, :]
        mass = np.clip(self.raw_density(grid), 0.0, None).mean(axis=1) * np.diff(edges)
        if mass.sum() <= 0:
            raise RandomizationError("the Fourier estimate has no mass in these bins")
        return mass / mass.sum()


def fourier_estimate(
    z: np.ndarray,
    noise: Noise,
    lo: float,
    hi: float,
    *,
    harmonics: int = 12,
    max_gain: float = 10.0,
) -> FourierEstimate:
    """Wu Sec. 3.1: c_k(X) = c_k(Z) / phi_Y(-2 pi k / L), k = 1..harmonics, with the gain
    1/|phi| capped at ``max_gain`` (Sec. 3.2). X must live in [lo, hi]. Wu's Fig. 1 uses
    12 harmonics."""
    z = np.asarray(z, dtype=float)
    if z.size == 0:
        raise RandomizationError("no values to reconstruct from")
    if harmonics < 1:
        raise RandomizationError(f"harmonics must be at least 1, got {harmonics}")
    if not max_gain >= 1:
        raise RandomizationError(f"the maximum inverse gain must be at least 1, got {max_gain:g}")
    width = float(hi) - float(lo)
    if not (math.isfinite(width) and width > 0):
        raise RandomizationError(f"the range must be finite with lo < hi, got [{lo:g}, {hi:g}]")
    k = np.arange(1, harmonics + 1)
    t = 2 * math.pi * k / width
    phi = np.conj(noise.char(t))  # phi_Y(-t)
    zero = max(CHAR_ZERO, 10 * noise.char_error)
    for harmonic, value, where in zip(k, np.abs(phi), t, strict=True):
        if value <= zero:
            raise RandomizationError(
                f"the characteristic function of the noise {noise.describe()} is zero "
                f"(|phi| = {value:.2g}) at harmonic {harmonic} of the range [{lo:g}, {hi:g}] "
                f"(t = 2 pi {harmonic} / {width:g} = {where:.6g}): nothing of that harmonic "
                "survives the noise, so the Fourier estimate cannot invert it; use fewer "
                "harmonics, another range width, or an EM method"
            )
    empirical = np.array([np.mean(np.exp(-1j * w * (z - lo))) for w in t])
    gain = 1.0 / np.abs(phi)
    limited = np.minimum(1.0, max_gain / gain)
    coefficients = empirical / phi * limited
    capped = tuple(int(h) for h in k[gain > max_gain])
    return FourierEstimate(float(lo), float(hi), coefficients, capped)


# -- the one-step protocol (Wu Sec. 4) -----------------------------------------------------------


def _check_one_step_noise(noise: Noise) -> None:
    if isinstance(noise, Lattice) and abs(1 / noise.gamma - round(1 / noise.gamma)) > 1e-9:
        raise RandomizationError(
            f"one-step noise {noise.describe()}: gamma must be 1/m for an integer m (Wu Sec. 4.1), "
            "or the 1 of the indicator falls off the noise lattice and shows the bin"
        )


def one_step_reports(bins: np.ndarray, k: int, noise: Noise, source: RandomSource) -> np.ndarray:
    """Client side of Wu Sec. 4: z_i = chi(x_i) + y_i, the one-hot vector of x_i's bin
    (``bins``: indices 0..k-1) plus k iid draws of W. Returns an (n, k) array."""
    _check_one_step_noise(noise)
    bins = np.asarray(bins, dtype=np.int64)
    if bins.size and (bins.min() < 0 or bins.max() >= k):
        raise RandomizationError(f"bin indices must be in 0..{k - 1}")
    reports = noise.sample(bins.size * k, source).reshape(bins.size, k)
    reports[np.arange(bins.size), bins] += 1.0
    return reports


class OneStepServer:
    """Server side of Wu Sec. 4: only a running sum of the reports and their number."""

    def __init__(self, k: int, noise: Noise) -> None:
        _check_one_step_noise(noise)
        self.k = int(k)
        self.centre = noise.centre  # the mean, or 0 by symmetry (footnote 1)
        self.total = np.zeros(self.k)
        self.count = 0

    def add(self, reports: np.ndarray) -> None:
        reports = np.asarray(reports, dtype=float).reshape(-1, self.k)
        self.total += reports.sum(axis=0)
        self.count += reports.shape[0]

    def estimate(self, clip: bool = True) -> np.ndarray:
        """theta_j = sum z_ij / n - mean; ``clip`` sets negative ones to 0 as Wu does (the
        unclipped estimate is the unbiased one)."""
        if self.count == 0:
            raise RandomizationError("no reports received")
        theta = self.total / self.count - self.centre
        return np.maximum(theta, 0.0) if clip else theta


# -- information loss (Wu Sec. 5) ---------------------------------------------------------------


def information_loss(original: np.ndarray, estimate: np.ndarray) -> float:
    """1/2 sum_j |h_j - h_hat_j|: h the original values' histogram and h_hat the
    reconstruction, both as fractions on the same bins (0 = perfect, 1 = disjoint)."""
    h = np.asarray(original, dtype=float)
    h_hat = np.asarray(estimate, dtype=float)
    if h.shape != h_hat.shape:
        raise RandomizationError(
            f"information loss needs the same bins, got {h.shape} and {h_hat.shape}"
        )
    return 0.5 * float(np.abs(h - h_hat).sum())
