"""Fixed-point format and the exact plaintext model of the secure family scores.

The secure score oracle (``protocols/k2``) computes every family score on additive
shares. This module fixes the number format and states, with plain Python integers,
exactly what the two-party computation computes: the garbled normalisation circuit, the
table lookups and the share arithmetic all reproduce these functions (up to one unit in
the last place per truncation), and the tests compare the secure results with them.

Format (DESIGN.md "Shares"): counts arrive as shares in Z_2^64 from the contingency
tables; everything after the normalisation circuit lives in the ring Z_2^128, two's
complement, with ``FRAC`` = 48 fractional bits for ln values and ``SCORE_FRAC`` = 49 for
scores. Why 128 bits: a family score reaches ~1e6 (2^20) while K2 needs differences of
tau = 1e-3 to be exact and the reconstructed scores to be within 1e-6, and a product of
two 48-bit fractions needs 96 bits plus 40 bits of statistical masking headroom for the
truncation by masked opening. Resolution: 2^-48 = 3.6e-15 per ln value; the error of a
term x ln x is below x * 2^-46, i.e. below 3e-10 at x = 100,000.

ln x (Lindell-Pinkas, Yang-Wright Sec. 5.4 and 6.5): for an integer 1 <= x < 2^K write
x = 2^k m with m in [1, 2), let j be the top ``MANTISSA_BITS`` bits of m's fraction, and
r_j ~ 1/(1 + (j + 1/2) / 2^t) a public ``RECIP_BITS``-bit constant (r_0 = 1 exactly, so
that x = 0 and gated entries give 0). Then 1 + u = m r_j is within 2^-6 of 1 and

    ln x = k ln 2 - ln r_j + ln(1 + u),   ln(1 + u) = sum_{i=1..7} (-1)^(i+1) u^i / i

with truncation error below |u|^8 / 8 <= 2^-51. The circuit outputs u (exactly: m r_j - 1
is a multiple of 2^-(K-1+RECIP_BITS)), and k and j as masked indices for the table
lookups ``K_TABLE`` (k ln 2) and ``J_TABLE`` (-ln r_j). A gate g = [x >= T] zeroes k, j
and u below the threshold T of the score mode.

Score modes (all scaled by 2^SCORE_FRAC, see ``bn/scores.py`` for the plaintext ones):
- yw:  sum_cells G(beta) - sum_rows G(l),  G(x) = (x + 1/2) ln x, T = 1; plus pub(d, q).
- yw0: yw minus the number of zero cells (a 1-bit lookup of z = [x == 0]).
- bic: sum_cells x ln x - sum_rows x ln x (rows: alpha_ij), T = 1; minus the penalty.
- exact: sum_cells ln x! - sum_rows ln l! with ln x! from the table ``FACTORIAL_TABLE``
  for x < T = 64 and Stirling (x + 1/2) ln x - x + ln(2 pi)/2 + 1/(12x) - 1/(360 x^3)
  beyond (remainder below 1/(1260 x^5) < 1e-12); 1/x = 2^-k r_j / (1 + u).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ppbn.circuits.scoring import NormalisationSpec

RING_BITS = 128
RING = 1 << RING_BITS
COUNT_BITS = 64  # counts are shared in Z_2^64 (protocols/tables)
FRAC = 48  # fractional bits of ln values and of the series
SCORE_FRAC = FRAC + 1  # scores: (2x + 1) ln x carries one more bit
STAT_BITS = 40  # statistical masking headroom of truncation and share conversion
MANTISSA_BITS = 6  # t: index bits of the reciprocal table
RECIP_BITS = 12  # fractional bits of r_j
SERIES_DEGREE = 7
EXACT_TABLE_SIZE = 64  # exact mode: ln x! from a table below this count
EXACT_OVERFLOW_INDEX = EXACT_TABLE_SIZE  # the C-table entry used for x >= 64


def _fixed(value: float | Fraction, frac: int = FRAC) -> int:
    """Round a real to the nearest multiple of 2^-frac (as an integer)."""
    return int(round(Fraction(value) * (1 << frac)))


def _ln_fixed(value: Fraction, frac: int) -> int:
    """round(ln(value) * 2^frac) with enough precision (math.log on a rescaled float)."""
    # value is a dyadic rational close to 1 or a small integer: float log is exact to
    # ~1e-16 relative, 2^-48 * 2^-4 is the resolution we need, so split off the exponent
    num, den = value.numerator, value.denominator
    shift = num.bit_length() - den.bit_length()
    mant = Fraction(num, den) / Fraction(2) ** shift
    return int(round((shift * math.log(2) + math.log(float(mant))) * (1 << frac)))


RECIPROCALS: tuple[int, ...] = tuple(
    1 << RECIP_BITS
    if j == 0
    else int(round(Fraction(1 << RECIP_BITS) / (1 + Fraction(2 * j + 1, 2 << MANTISSA_BITS))))
    for j in range(1 << MANTISSA_BITS)
)  # r_j * 2^RECIP_BITS

LN2_FIXED_BITS = FRAC + 8


def k_table(max_k: int) -> tuple[int, ...]:
    """K_TABLE[k] = round(k ln 2 * 2^FRAC) for k < 2^ceil(log2(max_k + 1))."""
    size = 1 << max(1, (max_k).bit_length())
    ln2 = math.log(2)
    return tuple(_fixed(Fraction(k) * Fraction(ln2), FRAC) for k in range(size))


J_TABLE: tuple[int, ...] = tuple(
    -_ln_fixed(Fraction(r, 1 << RECIP_BITS), FRAC) for r in RECIPROCALS
)  # -ln r_j * 2^FRAC


def _stirling_constant() -> int:
    """(ln(2 pi)/2) * 2^SCORE_FRAC + 2^FRAC: the x >= 64 entry of the exact C-table.

    The extra 2^FRAC turns X2 (ln - 1) into (x + 1/2) ln x - x + 1/2: see ``exact_term``.
    """
    return _fixed(Fraction(math.log(2 * math.pi)) / 2, SCORE_FRAC) + (1 << FRAC)


def factorial_table() -> tuple[int, ...]:
    """C-table of the exact mode: ln x! * 2^SCORE_FRAC for x < 64, then the Stirling constant."""
    values = [_fixed(Fraction(math.lgamma(x + 1)), SCORE_FRAC) for x in range(EXACT_TABLE_SIZE)]
    values.append(_stirling_constant())
    values += [0] * (2 * EXACT_TABLE_SIZE - len(values))  # 7-bit index, unused entries 0
    return tuple(values)


FACTORIAL_TABLE = factorial_table()
ZERO_CELL_TABLE = (0, -(1 << SCORE_FRAC))  # yw0: index z = [x == 0]
INV_12 = _fixed(Fraction(1, 12))
INV_360 = _fixed(Fraction(1, 360))


def threshold(mode: str) -> int:
    """T: below it the ln part is gated off (exact mode uses the factorial table)."""
    return EXACT_TABLE_SIZE if mode == "exact" else 1


@dataclass(frozen=True)
class Normalised:
    """What the normalisation circuit produces for one count x (all plain integers)."""

    gate: int  # [x >= T]
    k: int  # exponent (0 when gated)
    j: int  # mantissa index (0 when gated)
    u: int  # (m r_j - 1) * 2^FRAC, exact (0 when gated)
    x2: int  # 2x + 1 (yw, exact) or 2x (bic) when gated on, else 0
    inv: int  # exact mode: 2^-k r_j * 2^FRAC (0 when gated)
    c_index: int  # C-table index: exact min(x, 64); yw0 [x == 0]; else 0


def normalise(x: int, count_bits: int, mode: str) -> Normalised:
    """The plaintext specification of the normalisation circuit for one count."""
    if not 0 <= x < (1 << count_bits):
        raise ValueError(f"count {x} outside [0, 2^{count_bits})")
    gate = int(x >= threshold(mode))
    c_index = 0
    if mode == "exact":
        c_index = min(x, EXACT_OVERFLOW_INDEX)
    elif mode == "yw0":
        c_index = int(x == 0)
    if not gate:
        return Normalised(0, 0, 0, 0, 0, 0, c_index)
    k = x.bit_length() - 1
    frac_bits = count_bits - 1
    mantissa = x << (frac_bits - k)  # m * 2^frac_bits, in [2^frac_bits, 2^(frac_bits+1))
    j = (mantissa >> (frac_bits - MANTISSA_BITS)) & ((1 << MANTISSA_BITS) - 1)
    r = RECIPROCALS[j]
    prod_frac = frac_bits + RECIP_BITS
    u_scaled = mantissa * r - (1 << prod_frac)  # (m r_j - 1) * 2^prod_frac
    u = u_scaled << (FRAC - prod_frac) if prod_frac <= FRAC else u_scaled >> (prod_frac - FRAC)
    x2 = 2 * x if mode == "bic" else 2 * x + 1
    inv = (r << FRAC) >> (k + RECIP_BITS) if mode == "exact" else 0
    return Normalised(gate, k, j, u, x2, inv, c_index)


def count_bits_for(max_count: int) -> int:
    """K: the bit width that holds every count (and row count plus d - 1) of the job."""
    return max(MANTISSA_BITS + 2, int(max_count).bit_length())


def ring(value: int) -> int:
    return value % RING


def signed(value: int) -> int:
    """Two's-complement reading of a ring element."""
    value %= RING
    return value - RING if value >= RING // 2 else value


def trunc(value: int, bits: int) -> int:
    """Floor division by 2^bits of a signed value (what masked-opening truncation computes,
    up to +1 in the last place)."""
    return value >> bits


LN1P_COEFFS: tuple[int, ...] = tuple(
    0 if i == 0 else _fixed(Fraction((-1) ** (i + 1), i)) for i in range(SERIES_DEGREE + 1)
)  # ln(1 + u) = sum c_i u^i, c_i * 2^FRAC
INV1P_COEFFS: tuple[int, ...] = tuple(_fixed((-1) ** i) for i in range(SERIES_DEGREE + 1))  # 1/(1+u)


def powers(u: int) -> list[int]:
    """u^0..u^4 at scale 2^FRAC, as the share protocol computes them (truncating products)."""
    one = 1 << FRAC
    u2 = trunc(u * u, FRAC)
    u3 = trunc(u2 * u, FRAC)
    u4 = trunc(u2 * u2, FRAC)
    return [one, u, u2, u3, u4]


def series(coeffs: tuple[int, ...], p: list[int]) -> int:
    """Paterson-Stockmeyer: A(u) + u^4 B(u) with A, B of degree <= 3 (7 = 3 + 4)."""
    low = sum(c * p[i] for i, c in enumerate(coeffs[:4]))  # scale 2^(2 FRAC)
    high = sum(c * p[i] for i, c in enumerate(coeffs[4:]))
    return trunc(low, FRAC) + trunc(trunc(high, FRAC) * p[4], FRAC)


def ln_fixed(x: int, count_bits: int, mode: str = "yw") -> int:
    """ln x * 2^FRAC as the protocol computes it (0 when gated off)."""
    nm = normalise(x, count_bits, mode)
    p = powers(nm.u)
    return k_table(count_bits)[nm.k] + J_TABLE[nm.j] + series(LN1P_COEFFS, p)


def term_fixed(x: int, count_bits: int, mode: str) -> int:
    """One cell or row term * 2^SCORE_FRAC: G(x) (yw, yw0 without the zero count), x ln x
    (bic), ln x! (exact); yw0 adds -1 for x == 0 (cells only: rows are >= d - 1 >= 1)."""
    nm = normalise(x, count_bits, mode)
    p = powers(nm.u)
    ln = k_table(count_bits)[nm.k] + J_TABLE[nm.j] + series(LN1P_COEFFS, p)
    if mode in ("yw", "bic"):
        return nm.x2 * ln
    if mode == "yw0":
        return nm.x2 * ln + ZERO_CELL_TABLE[nm.c_index]
    if mode != "exact":
        raise ValueError(f"unknown score mode {mode!r}")
    one = 1 << FRAC
    inv_x = trunc(nm.inv * series(INV1P_COEFFS, p), FRAC)
    inv_x2 = trunc(inv_x * inv_x, FRAC)
    tail = INV_12 - trunc(inv_x2 * INV_360, FRAC)
    correction = trunc(inv_x * tail, FRAC)
    return nm.x2 * (ln - one) + FACTORIAL_TABLE[nm.c_index] + 2 * correction


def normalisation_spec(count_bits: int, mode: str) -> NormalisationSpec:
    """The circuit-side statement of this format for one count width and score mode."""
    return NormalisationSpec(
        count_bits=count_bits,
        mode=mode,
        frac=FRAC,
        mantissa_bits=MANTISSA_BITS,
        recip_bits=RECIP_BITS,
        reciprocals=RECIPROCALS,
        threshold=threshold(mode),
    )
