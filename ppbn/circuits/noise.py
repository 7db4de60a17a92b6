"""Garbled circuits that draw differential-privacy noise from both parties' random bits.

Why: neither party may know the noise added to a released value, or it could subtract it.
So each party feeds fresh uniform bits (``uniform_words``), and the circuit XORs them (free)
into uniforms U_k that neither knows, then draws a geometric variable G bit by bit as in
``ppbn.dp.noise`` (docs/security-dp.md, "How the noise is drawn"): bit k of G is
[U_k < T_k] for the public thresholds T_k of a ``GeometricSpec``, a comparison with a
constant that costs at most ``precision`` AND gates. ``GeometricSpec.draw_bits`` is the
plaintext model of ``geometric_draw``, bit for bit.

Two circuits use the draw, each revealing only its noisy result:

- ``noisy_argmax_circuit``: report-noisy-max, the first index of the largest score + G_i
  (one-sided geometric noise: discretised exponential noise), from additive score shares;
- ``noisy_count_circuit``: a count from additive shares plus G1 - G2, which is discrete
  Laplace noise (``ppbn.dp.noise.discrete_laplace_pmf``), in ``noisy_width`` signed bits;
  with a ``GaussianSpec``, plus one discrete Gaussian draw (``gaussian_draw``: the
  magnitude by thresholds on one uniform word, ``ppbn.dp.gaussian``, and a sign bit).

Every intermediate width is chosen so that nothing wraps.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ppbn.circuits import builders as bl
from ppbn.circuits.builders import Bits, CircuitBuilder
from ppbn.circuits.ir import Circuit
from ppbn.circuits.schedule import schedule_of
from ppbn.dp.count_noise import CountNoise
from ppbn.dp.gaussian import GaussianSpec
from ppbn.dp.noise import GeometricSpec


def draw_width(spec: CountNoise) -> int:
    """Bits of one party's uniform bundle for one draw: geometric, ``spec.bits`` words of
    ``spec.precision`` bits, word k at bits [k precision, (k + 1) precision); Gaussian,
    one word of ``spec.precision`` bits and the sign bit above it."""
    if isinstance(spec, GaussianSpec):
        return spec.word_bits
    return spec.bits * spec.precision


def geometric_draw(
    b: CircuitBuilder, ua: Sequence[int], ub: Sequence[int], spec: GeometricSpec
) -> Bits:
    """G (``spec.bits`` unsigned bits) with bit k = [ua_k ^ ub_k < T_k].

    The XOR is free; each comparison with the constant T_k folds to at most ``precision``
    ANDs (fewer for thresholds with low zero bits, none for T_k = 0).
    """
    n = draw_width(spec)
    if len(ua) != n or len(ub) != n:
        raise ValueError(f"a draw needs {n} bits from each party, got {len(ua)} and {len(ub)}")
    p = spec.precision
    out: Bits = []
    for k, threshold in enumerate(spec.thresholds):
        u = [
            b.xor(x, y)
            for x, y in zip(ua[k * p : (k + 1) * p], ub[k * p : (k + 1) * p], strict=True)
        ]
        out.append(bl.less_than(b, u, bl.constant(threshold, p)))
    return out


def gaussian_draw(
    b: CircuitBuilder, ua: Sequence[int], ub: Sequence[int], spec: GaussianSpec
) -> tuple[Bits, int]:
    """The magnitude K (``spec.bits`` unsigned bits) and the sign bit of a discrete
    Gaussian draw from U = ua ^ ub, as ``GaussianSpec.draw`` computes it.

    t_j = [U >= D_j] is a thermometer code (the thresholds ascend), so K = j exactly where
    t_j ^ t_(j+1) = 1 and each bit of K is an XOR of those: free. The cost is the
    comparisons, at most ``precision`` ANDs each.
    """
    n = draw_width(spec)
    if len(ua) != n or len(ub) != n:
        raise ValueError(f"a draw needs {n} bits from each party, got {len(ua)} and {len(ub)}")
    u = [b.xor(x, y) for x, y in zip(ua, ub, strict=True)]
    low, sign = u[: spec.precision], u[spec.precision]
    reached = [b.inv(bl.less_than(b, low, bl.constant(t, spec.precision))) for t in spec.thresholds]
    reached.append(bl.ZERO)
    magnitude = [bl.ZERO] * spec.bits
    for j in range(1, spec.support + 1):
        exactly = b.xor(reached[j - 1], reached[j])
        for i in range(spec.bits):
            if j >> i & 1:
                magnitude[i] = b.xor(magnitude[i], exactly)
    return magnitude, sign


def _first_argmax(b: CircuitBuilder, values: Sequence[Sequence[int]]) -> Bits:
    """The first index of the largest signed value, by a tournament of adjacent pairs.

    The left entrant of every match holds the lower indices and wins ties (it is replaced
    only when strictly smaller), so each winner is its block's first maximum. The value of
    the final match is never selected. Cost: (k - 1) comparisons and value muxes of l ANDs
    (one mux fewer), plus index muxes, whose constant leaves fold away.
    """
    iw = bl.index_width(len(values))
    level = [(list(v), bl.constant(i, iw)) for i, v in enumerate(values)]
    while len(level) > 1:
        final = len(level) == 2
        nxt = []
        for (lv, li), (rv, ri) in zip(level[0::2], level[1::2], strict=False):
            right = bl.less_than(b, lv, rv, signed=True)
            value = lv if final else bl.mux(b, right, rv, lv)
            nxt.append((value, bl.mux(b, right, ri, li)))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0][1]


@lru_cache(maxsize=32)
def noisy_argmax_circuit(
    options: int, width: int, spec: GeometricSpec, with_validity: bool = False
) -> Circuit:
    """Report-noisy-max. Inputs s{i}_a, s{i}_b (``width``-bit additive shares of a signed
    score) and u{i}_a, u{i}_b (``draw_width(spec)`` uniform bits each) for i < options;
    output index: the first i with the largest s_i + G_i, ``index_width(options)`` bits.

    The noisy values are formed in max(width, spec.bits) + 2 signed bits, so none wraps.
    ``with_validity`` adds the input valid_a (``options`` bits, public: the garbler sends
    what both parties know): an option whose bit is 0 is padding and never wins, so
    requests with different numbers of options share one circuit (W ANDs per option).
    """
    if options < 1 or width < 1:
        raise ValueError("need at least one option and a score width of at least one bit")
    wide = max(width, spec.bits) + 2
    b = CircuitBuilder()
    valid = b.input("valid_a", options) if with_validity else None
    lowest = bl.constant(1 << (wide - 1), wide)  # -2^(wide-1): below every real noisy value
    noisy = []
    for i in range(options):
        score = bl.add(b, b.input(f"s{i}_a", width), b.input(f"s{i}_b", width))
        ua, ub = b.input(f"u{i}_a", draw_width(spec)), b.input(f"u{i}_b", draw_width(spec))
        g = geometric_draw(b, ua, ub, spec)
        value = bl.add(b, bl.sign_extend(score, wide), bl.zero_extend(g, wide))
        noisy.append(value if valid is None else bl.mux(b, valid[i], value, lowest))
    b.output("index", _first_argmax(b, noisy))
    return b.build()


def noisy_width(count_bits: int, spec: CountNoise) -> int:
    """Signed bits of x + noise for 0 <= x < 2^count_bits and noise of at most 2^spec.bits
    in magnitude (G1 - G2, or a Gaussian draw): max(count_bits, spec.bits) + 2."""
    return max(count_bits, spec.bits) + 2


def count_draws(spec: CountNoise) -> tuple[str, ...]:
    """The uniform bundles a noisy count takes from each party (``noisy_count_circuit``'s
    inputs u{name}_a and u{name}_b): two for G1 - G2, one for a Gaussian draw."""
    return ("",) if isinstance(spec, GaussianSpec) else ("1", "2")


@lru_cache(maxsize=32)
def noisy_count_circuit(count_bits: int, spec: CountNoise) -> Circuit:
    """A count with the noise of ``spec``. Inputs na, nb (shares mod 2^count_bits of
    0 <= x < 2^count_bits) and, per name of ``count_draws(spec)``, u{name}_a and u{name}_b
    (``draw_width(spec)`` bits each); output noisy = x + G1 - G2 (geometric) or x + X (a
    discrete Gaussian draw), two's complement in ``noisy_width(count_bits, spec)`` bits."""
    if count_bits < 1:
        raise ValueError("the count needs at least one bit")
    wide = noisy_width(count_bits, spec)
    b = CircuitBuilder()
    x = bl.add(b, b.input("na", count_bits), b.input("nb", count_bits))
    n = draw_width(spec)
    if isinstance(spec, GaussianSpec):
        magnitude, sign = gaussian_draw(b, b.input("u_a", n), b.input("u_b", n), spec)
        noise = bl.conditional_negate(b, sign, bl.zero_extend(magnitude, wide))
        b.output("noisy", bl.add(b, bl.zero_extend(x, wide), noise))
        return b.build()
    g1 = geometric_draw(b, b.input("u1_a", n), b.input("u1_b", n), spec)
    g2 = geometric_draw(b, b.input("u2_a", n), b.input("u2_b", n), spec)
    up = bl.add(b, bl.zero_extend(x, wide), bl.zero_extend(g1, wide))
    b.output("noisy", bl.sub(b, up, bl.zero_extend(g2, wide)))
    return b.build()


def uniform_words(count: int, spec: CountNoise) -> np.ndarray:
    """``count`` fresh uniform ``draw_width(spec)``-bit integers (object array) from the
    operating system's generator: what a party feeds as one u bundle."""
    n = draw_width(spec)
    out = np.empty(count, dtype=object)
    out[:] = [secrets.randbits(n) for _ in range(count)]
    return out


def noise_and_counts(
    spec: GeometricSpec, options: int = 10, width: int = 70, count_bits: int = 32
) -> dict[str, int]:
    """AND gates of one draw and of each circuit (one instance) for ``spec``."""
    b = CircuitBuilder()
    n = draw_width(spec)
    geometric_draw(b, b.input("ua", n), b.input("ub", n), spec)
    return {
        "geometric_draw": b.and_gates,
        f"noisy_argmax(options={options}, width={width})": schedule_of(
            noisy_argmax_circuit(options, width, spec)
        ).n_and,
        f"noisy_count(count_bits={count_bits})": schedule_of(
            noisy_count_circuit(count_bits, spec)
        ).n_and,
    }
