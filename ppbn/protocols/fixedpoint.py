"""Fixed-point format and the exact plaintext model of the secure family scores.

The secure score oracle (``learning/scorer.py``) computes every family score on additive
shares. This module fixes the number format and states, with plain Python integers,
exactly what the two-party computation computes: the garbled normalisation circuit, the
table lookups and the share arithmetic all reproduce these functions (up to one unit in
the last place per truncation), and the tests compare the secure results with them.

Format (docs/design.md, "Shares and fixed point"): counts arrive as shares in Z_2^64 from the contingency
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
- bdeu: sum_cells lnG(x + a_jk) - sum_rows lnG(l + a_j) with public shifts a (``Shift``):
  lnG(x + a) from a per-shift table for x < 64, and for x >= 64 Stirling at z' = x + a',
  where a' = A / 2^F is a rounded to F = SHIFTED_BITS - K fractional bits so that the
  circuit normalises the integer X = z' 2^F < 2^SHIFTED_BITS exactly as the other modes
  normalise x (u stays exact). With delta = a - a' (|delta| <= 2^-(F+1)),
  lnG(x + a) = lnG(z') + delta psi(z') + O(delta^2 / z'), psi(z') = ln z' - 1/(2z') +
  O(1/z'^2), so the term is (x + 1/2)(L - 1) + (a - 1) L + C_a + (1/12 - delta/2)/z' -
  1/(360 z'^3) with L = ln z', C_a = ln(2 pi)/2 + 1/2 - a': every a-dependent piece is a
  public constant, and the neglected parts are below delta / (12 z'^2) + delta^2 / z' <
  1e-10 per term for K <= 25.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Protocol

from ppbn.circuits.scoring import NormalisationSpec, ungated

RING_BITS = 128
RING = 1 << RING_BITS
FRAC = 48  # fractional bits of ln values and of the series
SCORE_FRAC = FRAC + 1  # scores: (2x + 1) ln x carries one more bit
STAT_BITS = 40  # statistical masking headroom of truncation and share conversion
MANTISSA_BITS = 6  # t: index bits of the reciprocal table
RECIP_BITS = 12  # fractional bits of r_j
SERIES_DEGREE = 7
EXACT_TABLE_SIZE = 64  # exact mode: ln x! from a table below this count
EXACT_OVERFLOW_INDEX = EXACT_TABLE_SIZE  # the bdeu C-table entry used for x >= 64
# The exact C-table has 64 entries: ln 0! = ln 1! = 0, so x = 1 reads entry 0 and entry 1
# holds the Stirling constant for x >= 64 (a 6-bit index, half the table a 7-bit one needs)
EXACT_STIRLING_INDEX = 1


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
    """C-table of the exact mode, 64 entries: ln x! * 2^SCORE_FRAC at index x for x < 64,
    except that x = 1 shares entry 0 (ln 1! = ln 0! = 0) and entry 1 is the Stirling
    constant of x >= 64 (``exact_c_index``)."""
    values = [_fixed(Fraction(math.lgamma(x + 1)), SCORE_FRAC) for x in range(EXACT_TABLE_SIZE)]
    if values[0] != values[1]:
        raise AssertionError("ln 0! and ln 1! must share an entry")
    values[EXACT_STIRLING_INDEX] = _stirling_constant()
    return tuple(values)


def exact_c_index(x: int) -> int:
    """The exact mode's C-table index of a count: x, but 0 for x = 1 and 1 for x >= 64."""
    if x >= EXACT_TABLE_SIZE:
        return EXACT_STIRLING_INDEX
    return 0 if x == 1 else x


FACTORIAL_TABLE = factorial_table()
ZERO_CELL_TABLE = (0, -(1 << SCORE_FRAC))  # yw0: index z = [x == 0]


def threshold(mode: str) -> int:
    """T: below it the ln part is gated off (exact and bdeu use their lnG tables)."""
    return EXACT_TABLE_SIZE if mode in ("exact", "bdeu") else 1


SHIFTED_BITS = FRAC - RECIP_BITS + 1  # bdeu: X = (x + a') 2^F < 2^37, as wide as u stays exact
MIN_SHIFT_FRAC = 12  # bdeu: fewer fractional bits of a' would make delta's terms too large
SPLIT_BITS = 30  # bdeu: (a - 1) L is scaled in two pieces of a 64-bit fraction


@dataclass(frozen=True)
class Shift:
    """A public BDeu shift a > 0 of lnG(x + a), and its rounding a' = numerator / 2^frac."""

    a: float
    frac: int

    @property
    def numerator(self) -> int:
        return int(round(Fraction(self.a) * (1 << self.frac)))

    @property
    def delta(self) -> Fraction:
        """a - a', at most 2^-(frac + 1) in magnitude."""
        return Fraction(self.a) - Fraction(self.numerator, 1 << self.frac)


def shift_frac_for(count_bits: int) -> int:
    """F for counts (plus their shifts) below 2^count_bits: X = z' 2^F fits SHIFTED_BITS."""
    frac = SHIFTED_BITS - count_bits
    if frac < MIN_SHIFT_FRAC:
        raise ValueError(
            f"BDeu on the secure path needs counts below 2^{SHIFTED_BITS - MIN_SHIFT_FRAC}"
        )
    return frac


def lgamma_table(shift: Shift) -> tuple[int, ...]:
    """C-table of one bdeu shift: lnG(x + a) * 2^SCORE_FRAC for x < 64, then the Stirling
    constant ln(2 pi)/2 + 1/2 - a' (see the module docstring); 7-bit index."""
    values = [
        _fixed(Fraction(math.lgamma(x + shift.a)), SCORE_FRAC) for x in range(EXACT_TABLE_SIZE)
    ]
    stirling = (
        Fraction(math.log(2 * math.pi)) / 2
        + Fraction(1, 2)
        - Fraction(shift.numerator, 1 << shift.frac)
    )
    values.append(_fixed(stirling, SCORE_FRAC))
    values += [0] * (2 * EXACT_TABLE_SIZE - len(values))
    return tuple(values)


def shifted_k_table(shift_frac: int) -> tuple[int, ...]:
    """bdeu's K-table: (k - F) ln 2 * 2^FRAC, so that K[k] + J[j] + ln(1 + u) = ln z'
    directly (k >= F + 6 whenever the gate is on; entry 0, the gated one, is 0)."""
    size = 1 << max(1, (SHIFTED_BITS - 1).bit_length())
    ln2 = Fraction(math.log(2))
    return tuple(
        _fixed((k - shift_frac) * ln2, FRAC) if k >= shift_frac else 0 for k in range(size)
    )


@dataclass(frozen=True)
class ShiftCoefficients:
    """Per-count public constants of the bdeu term (``terms_on``): 2(a - 1) as an integer
    part and a 64-bit fraction in two pieces, and (1/12 - delta/2) * 2^TAIL_FRAC."""

    integer: list[int]
    high: list[int]  # top 34 bits of the fraction * 2^64
    low: list[int]  # its low SPLIT_BITS bits
    over_12: list[int]

    @classmethod
    def of(cls, shifts: list[Shift]) -> ShiftCoefficients:
        rows = [
            _shift_coefficients(shift) for shift in shifts
        ]  # a few distinct shifts, many counts
        integer, high, low, over_12 = (
            (list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [], [])
        )
        return cls(integer, high, low, over_12)


@lru_cache(maxsize=256)
def _shift_coefficients(shift: Shift) -> tuple[int, int, int, int]:
    """(integer part of 2(a - 1), top and low pieces of its 64-bit fraction, (1/12 - delta/2) 2^TAIL_FRAC)."""
    c = 2 * (Fraction(shift.a) - 1)
    whole = math.floor(c)
    fraction = int(round((c - whole) * (1 << 64)))
    return (
        whole,
        fraction >> SPLIT_BITS,
        fraction & ((1 << SPLIT_BITS) - 1),
        _scaled(Fraction(1, 12) - shift.delta / 2, TAIL_FRAC),
    )


@dataclass(frozen=True)
class Normalised:
    """What the normalisation circuit produces for one count x (all plain integers)."""

    gate: int  # [x >= T]
    k: int  # exponent (0 when gated)
    j: int  # mantissa index (0 when gated)
    f: int  # the mantissa's fraction (m - 1) * 2^(K' - 1) (0 when gated)
    u: int  # (m r_j - 1) * 2^FRAC, exact (0 when gated)
    x2: int  # exact and bdeu: 2x + 1 when gated on, else 0 (the other modes: 0)
    inv: int  # exact mode: 2^-k r_j * 2^FRAC (0 when gated)
    c_index: int  # C-table index: exact ``exact_c_index``; bdeu min(x, 64); yw0 [x == 0]; else 0
    p: int  # 2^(K' - 1 - k), 0 when gated off (x = 0 in yw, yw0, bic: 2^(K - 1), k = 0)
    x1: int  # yw, yw0, bic: max(x, 1) (else 0)


def normalise(x: int, count_bits: int, mode: str, shift: Shift | None = None) -> Normalised:
    """The plaintext specification of the normalisation circuit for one count (bdeu: of
    X = (x << F) + A for ``shift``, gated on x; see the module docstring)."""
    if not 0 <= x < (1 << count_bits):
        raise ValueError(f"count {x} outside [0, 2^{count_bits})")
    if (mode == "bdeu") != (shift is not None):
        raise ValueError("the bdeu mode, and only it, takes a shift")
    gate = int(x >= threshold(mode))
    c_index = 0
    if mode == "exact":
        c_index = exact_c_index(x)
    elif mode == "bdeu":
        c_index = min(x, EXACT_OVERFLOW_INDEX)
    elif mode == "yw0":
        c_index = int(x == 0)
    # the circuit's own rule: 0's ln part is 0 = ln 1, so normalise x1 = max(x, 1)
    no_gate = ungated(normalisation_spec(count_bits, mode, shift))
    if not gate and not no_gate:
        return Normalised(0, 0, 0, 0, 0, 0, 0, c_index, 0, 0)
    value, shift_frac = max(x, 1), 0
    if shift is not None:
        shift_frac = shift.frac
        value, count_bits = (x << shift_frac) + shift.numerator, count_bits + shift_frac
        if value >> count_bits:
            raise ValueError(f"count {x} plus its shift outside [0, 2^{count_bits - shift_frac})")
    k = value.bit_length() - 1
    frac_bits = count_bits - 1
    mantissa = value << (frac_bits - k)  # m * 2^frac_bits, in [2^frac_bits, 2^(frac_bits+1))
    j = (mantissa >> (frac_bits - MANTISSA_BITS)) & ((1 << MANTISSA_BITS) - 1)
    r = RECIPROCALS[j]
    prod_frac = frac_bits + RECIP_BITS
    u_scaled = mantissa * r - (1 << prod_frac)  # (m r_j - 1) * 2^prod_frac
    u = u_scaled << (FRAC - prod_frac) if prod_frac <= FRAC else u_scaled >> (prod_frac - FRAC)
    x2 = 0 if no_gate else 2 * x + 1
    inv = 0 if no_gate else (r << (FRAC + shift_frac)) >> (k + RECIP_BITS)
    x1 = value if no_gate else 0
    f = mantissa - (1 << frac_bits)
    return Normalised(gate, k, j, f, u, x2, inv, c_index, 1 << (count_bits - 1 - k), x1)


def tables_on_k(mode: str, count_bits: int, shift_frac: int = 0) -> list[tuple[int, ...]]:
    """The public tables a term looks up at its exponent k: k ln 2 (bdeu: shifted)."""
    return [shifted_k_table(shift_frac) if mode == "bdeu" else k_table(count_bits - 1)]


TABLES_ON_J = (J_TABLE, RECIPROCALS)  # -ln r_j and r_j, at the mantissa index j


def c_table(mode: str, shift: Shift | None = None) -> tuple[int, ...] | None:
    """The C-table at index c: ln x! (exact), the zero-cell -1 (yw0), lnG(x + a) (bdeu)."""
    if mode == "exact":
        return FACTORIAL_TABLE
    if mode == "yw0":
        return ZERO_CELL_TABLE
    if mode == "bdeu":
        if shift is None:
            raise ValueError("the bdeu C-table needs its shift")
        return lgamma_table(shift)
    return None


def reduced_argument_on(be: Backend, f, r, k_bits: int):
    """u * 2^FRAC of the gated modes from the circuit's mantissa fraction f (K' - 1 bits,
    XOR-shared) and the looked-up r_j * 2^RECIP_BITS (``RECIPROCALS``): f r_j + 2^(K'-1) r_j
    - 2^P is m r_j - 1 at scale 2^P, P = K' - 1 + RECIP_BITS <= FRAC, an exact integer
    product (the gated f = 0, j = 0 gives 0)."""
    prod_frac = k_bits - 1 + RECIP_BITS
    product = be.add(be.bit_mul(f, r, k_bits - 1, RECIP_BITS + 1), be.scale(r, 1 << (k_bits - 1)))
    return be.scale(be.sub(product, be.constant(1 << prod_frac, r)), 1 << (FRAC - prod_frac))


def reduced_argument_of_power(be: Backend, x1, p, r, count_bits: int):
    """u * 2^FRAC of the modes without a gate from the circuit's x1 = max(x, 1) and
    p = 2^(K-1-k) (K bits each, XOR-shared) and the looked-up r_j: the mantissa is x1 p, so
    x1 (p r_j) - 2^P is m r_j - 1 at scale 2^P, P = K - 1 + RECIP_BITS, two exact bit
    products (x = 0 is x1 = 1, p = 2^(K-1), j = 0: u = 0). The circuit then shifts nothing
    but the mantissa index j (``circuits.scoring.shared_outputs``)."""
    prod_frac = count_bits - 1 + RECIP_BITS
    scaled = be.bit_mul(p, r, count_bits, RECIP_BITS + 1)  # p r_j <= 2^P
    product = be.bit_mul(x1, scaled, count_bits, prod_frac + 1)
    return be.scale(be.sub(product, be.constant(1 << prod_frac, r)), 1 << (FRAC - prod_frac))


def inv_on(be: Backend, r, p, k_bits: int, shift_frac: int):
    """The exact and bdeu modes' 2^(F - k) r_j * 2^FRAC (``normalise``'s inv) from the
    looked-up r_j and the circuit's bit-shared p = 2^(K' - 1 - k): r_j p 2^z,
    z = FRAC + F - RECIP_BITS - (K' - 1) >= 0, an exact product (0 when gated: p = 0)."""
    p_bits = k_bits - (EXACT_TABLE_SIZE.bit_length() - 1) - shift_frac  # p < 2^(K' - 6 - F)
    product = be.bit_mul(p, r, p_bits, RECIP_BITS + 1)
    return be.scale(product, 1 << (FRAC + shift_frac - RECIP_BITS - (k_bits - 1)))


def count_bits_for(max_count: int) -> int:
    """K: the bit width that holds every count (and row count plus d - 1) of the job."""
    return max(MANTISSA_BITS + 2, int(max_count).bit_length())


# -- the share computation, written once over an arithmetic backend ------------------------
#
# Every value below is a vector (one entry per count) in a backend: plain Python integers
# (``PlainBackend``, the model) or additive shares (``learning.terms.SecureBackend``).
# Products are followed by a truncation whose input must stay below 2^bound_bits: with
# STAT_BITS of masking that needs bound_bits + STAT_BITS <= RING_BITS - 1, checked here.
# Magnitudes at scale 2^48: |u| <= 2^42, u^2 <= 2^36, u^3 <= 2^30, u^4 <= 2^24, 1/x <= 2^42
# (each computed value may exceed its bound by the +1 ulp of its truncation), and
# x2 = 2x + 1 < 2^(K + 1), x1 = max(x, 1) < 2^K for counts below 2^K. The operand bounds
# of the products follow from these; the model's backend asserts every one of them.

HIGH_FRAC = 28  # scale of the coefficients of the high Paterson-Stockmeyer block
TAIL_FRAC = 44  # scale of 1/12 and 1/360 in the Stirling remainder


class Backend(Protocol):
    def add(self, x, y): ...
    def sub(self, x, y): ...
    def scale(self, x, c: int):
        """x * c for a public integer c, exact (no truncation)."""
        ...

    def scale_each(self, x, cs: list[int]):
        """x[i] * cs[i] for public integers, exact (bdeu's per-count constants)."""
        ...

    def constant(self, c: int, like):
        """The public constant c as a vector shaped like ``like``."""
        ...

    def truncate(self, x, bits: int, bound_bits: int):
        """floor(x / 2^bits) (+1 ulp allowed), for |x| < 2^bound_bits."""
        ...

    def mul(self, x, y, bits: int, bound_bits: int, operand_bits: tuple[int, int]):
        """floor(x * y / 2^bits) (+1 ulp allowed) for |x y| < 2^bound_bits; with bits = 0
        the product is exact in the ring and bound_bits is unused. |x| < 2^operand_bits[0]
        and |y| < 2^operand_bits[1] (the secure backend needs OTs in proportion)."""
        ...

    def square(self, x, bits: int, bound_bits: int, operand_bits: int):
        """mul(x, x, ...) for |x| < 2^operand_bits (the secure backend: half the OTs)."""
        ...

    def bit_mul(self, x, y, x_bits: int, y_bits: int):
        """x * y, exact, for 0 <= x < 2^x_bits held bit by bit (the normalisation circuit's
        XOR-shared f and x2) and |y| < 2^y_bits (the secure backend: 2 OTs per bit of x)."""
        ...


def check_bound(bound_bits: int) -> int:
    if bound_bits + STAT_BITS > RING_BITS - 1:
        raise ValueError(f"a {bound_bits}-bit value has no room for {STAT_BITS} masking bits")
    return bound_bits


def _scaled(value: Fraction, frac: int) -> int:
    return int(round(value * (1 << frac)))


@dataclass(frozen=True)
class Series:
    """sum_{i<=7} c_i u^i as A(u) + u^4 B(u) (Paterson-Stockmeyer: 4 products for u^2, u^3,
    u^4 and u^4 B). c_1 must be +-1 so that c_1 u is exact; the constant term is public."""

    coefficients: tuple[Fraction, ...]

    def evaluate(self, be: Backend, u, u2, u3, u4):
        c = self.coefficients
        if abs(c[1]) != 1:
            raise ValueError("the linear coefficient must be +-1")
        low = be.truncate(
            be.add(be.scale(u2, _scaled(c[2], FRAC)), be.scale(u3, _scaled(c[3], FRAC))),
            FRAC,
            check_bound(2 * FRAC - 12 + 1),
        )
        low = be.add(be.add(be.constant(_scaled(c[0], FRAC), u), be.scale(u, int(c[1]))), low)
        inner = be.add(
            be.add(be.scale(u, _scaled(c[5], HIGH_FRAC)), be.scale(u2, _scaled(c[6], HIGH_FRAC))),
            be.scale(u3, _scaled(c[7], HIGH_FRAC)),
        )
        high = be.add(
            be.constant(_scaled(c[4], FRAC), u),
            be.truncate(inner, HIGH_FRAC, check_bound(HIGH_FRAC + FRAC - 5)),
        )
        return be.add(
            low, be.mul(high, u4, FRAC, check_bound(FRAC + 24 + 2), (FRAC + 1, FRAC - 23))
        )


LN1P = Series(
    tuple(Fraction(0) if i == 0 else Fraction((-1) ** (i + 1), i) for i in range(SERIES_DEGREE + 1))
)
INV1P_MINUS_1 = Series(
    tuple(Fraction(0) if i == 0 else Fraction((-1) ** i) for i in range(SERIES_DEGREE + 1))
)


def powers_on(be: Backend, u):
    u2 = be.square(u, FRAC, check_bound(2 * (FRAC - 6) + 1), FRAC - 5)
    u3 = be.mul(u2, u, FRAC, check_bound((FRAC - 12) + (FRAC - 6) + 1), (FRAC - 11, FRAC - 5))
    u4 = be.square(u2, FRAC, check_bound(2 * (FRAC - 12) + 1), FRAC - 11)
    return u2, u3, u4


def terms_on(
    be: Backend,
    mode: str,
    count_bits: int,
    shared: Mapping,
    r,
    k_ln2,
    ln_r,
    c_entry,
    shifts: ShiftCoefficients | None = None,
    shift_frac: int = 0,
):
    """Cell/row terms * 2^SCORE_FRAC of counts below 2^count_bits from the circuit's
    bit-shared outputs ``shared`` (by name, ``circuits.scoring.shared_outputs``) and the
    looked-up entries (``r`` = RECIPROCALS[j], ``k_ln2`` = K_TABLE[k], ``ln_r`` =
    J_TABLE[j], ``c_entry`` = the C-table entry or None; bdeu: the per-count constants
    ``shifts`` and their fraction bits ``shift_frac``)."""
    if mode in ("yw", "yw0", "bic"):
        x1 = shared["x1"]
        u = reduced_argument_of_power(be, x1, shared["p"], r, count_bits)
        u2, u3, u4 = powers_on(be, u)
        ln = be.add(be.add(k_ln2, ln_r), LN1P.evaluate(be, u, u2, u3, u4))
        # 2x ln x = 2 x1 ln x and (2x + 1) ln x = 2 x1 ln x + ln x: x = 0 has ln = ln 1 = 0
        term = be.scale(be.bit_mul(x1, ln, count_bits, FRAC + 6), 2)
        if mode != "bic":
            term = be.add(term, ln)
        return be.add(term, c_entry) if mode == "yw0" else term
    if mode not in ("exact", "bdeu"):
        raise ValueError(f"unknown score mode {mode!r}")
    if (mode == "bdeu") != (shifts is not None):
        raise ValueError("the bdeu mode, and only it, takes shift coefficients")
    k_bits = count_bits + shift_frac
    inv = inv_on(be, r, shared["p"], k_bits, shift_frac)
    u = reduced_argument_on(be, shared["f"], r, k_bits)
    u2, u3, u4 = powers_on(be, u)
    ln = be.add(be.add(k_ln2, ln_r), LN1P.evaluate(be, u, u2, u3, u4))
    term = be.bit_mul(
        shared["x2"], be.sub(ln, be.constant(1 << FRAC, ln)), count_bits + 1, FRAC + 6
    )
    # the series first: of two operands of equal bound the second is reshared, and 1/x's
    # share is final in more low bits than the series' (``arith.ArithSession.derive``)
    inv_x = be.add(
        inv,
        be.mul(
            INV1P_MINUS_1.evaluate(be, u, u2, u3, u4),
            inv,
            FRAC,
            check_bound(2 * (FRAC - 6) + 1),
            (FRAC - 5, FRAC - 5),
        ),
    )
    inv_x2 = be.square(inv_x, FRAC, check_bound(2 * (FRAC - 6) + 1), FRAC - 5)
    if shifts is None:
        over_12 = be.truncate(
            be.scale(inv_x, _scaled(Fraction(1, 12), TAIL_FRAC)),
            TAIL_FRAC,
            check_bound(FRAC - 6 + TAIL_FRAC - 3),
        )
    else:
        # (a - 1) L at scale 2^SCORE_FRAC: 2 (a - 1) = integer + fraction, |ln z'| < 2^4
        ln_bits = FRAC + 4
        term = be.add(term, be.scale_each(ln, shifts.integer))
        high = be.truncate(
            be.scale_each(ln, shifts.high), 64 - SPLIT_BITS, check_bound(64 - SPLIT_BITS + ln_bits)
        )
        low = be.truncate(be.scale_each(ln, shifts.low), 64, check_bound(SPLIT_BITS + ln_bits))
        term = be.add(term, be.add(high, low))
        over_12 = be.truncate(
            be.scale_each(inv_x, shifts.over_12), TAIL_FRAC, check_bound(FRAC - 6 + TAIL_FRAC - 3)
        )
    cube_360 = be.mul(
        inv_x,
        be.truncate(
            be.scale(inv_x2, _scaled(Fraction(1, 360), TAIL_FRAC)),
            TAIL_FRAC,
            check_bound(FRAC - 12 + TAIL_FRAC - 8),
        ),
        FRAC,
        check_bound((FRAC - 6) + (FRAC - 20) + 1),
        (FRAC - 5, FRAC - 20),
    )
    correction = be.sub(over_12, cube_360)
    return be.add(be.add(term, c_entry), be.scale(correction, 2))


class PlainBackend:
    """The model: vectors are lists of Python ints, truncation is exact floor division."""

    def add(self, x, y):
        return [a + b for a, b in zip(x, y, strict=True)]

    def sub(self, x, y):
        return [a - b for a, b in zip(x, y, strict=True)]

    def scale(self, x, c):
        return [a * c for a in x]

    def scale_each(self, x, cs):
        return [a * c for a, c in zip(x, cs, strict=True)]

    def constant(self, c, like):
        return [c] * len(like)

    def truncate(self, x, bits, bound_bits):
        assert all(abs(a) < (1 << bound_bits) for a in x), "bound exceeded"
        return [a >> bits for a in x]

    def mul(self, x, y, bits, bound_bits, operand_bits):
        x_bits, y_bits = operand_bits
        assert all(abs(a) < (1 << x_bits) for a in x), "operand bound of x exceeded"
        assert all(abs(b) < (1 << y_bits) for b in y), "operand bound of y exceeded"
        products = [a * b for a, b in zip(x, y, strict=True)]
        return self.truncate(products, bits, bound_bits) if bits else products

    def square(self, x, bits, bound_bits, operand_bits):
        return self.mul(x, x, bits, bound_bits, (operand_bits, operand_bits))

    def bit_mul(self, x, y, x_bits, y_bits):
        assert all(0 <= a < (1 << x_bits) for a in x), "bit operand out of range"
        return self.mul(x, y, 0, 0, (x_bits, y_bits))


def term_fixed_many(
    xs: list[int], count_bits: int, mode: str, shifts: list[Shift] | None = None
) -> list[int]:
    """The model of the secure terms for many counts at once (bdeu: one shift per count)."""
    be = PlainBackend()
    per_count = shifts if shifts is not None else [None] * len(xs)
    nms = [normalise(x, count_bits, mode, shift) for x, shift in zip(xs, per_count, strict=True)]
    shift_frac = shifts[0].frac if mode == "bdeu" and shifts else 0
    table = shifted_k_table(shift_frac) if mode == "bdeu" and shifts else k_table(count_bits - 1)
    c_entry = None
    if mode == "exact":
        c_entry = [FACTORIAL_TABLE[n.c_index] for n in nms]
    elif mode == "yw0":
        c_entry = [ZERO_CELL_TABLE[n.c_index] for n in nms]
    elif mode == "bdeu":
        c_entry = [lgamma_table(shift)[n.c_index] for n, shift in zip(nms, per_count, strict=True)]
    return terms_on(
        be,
        mode,
        count_bits,
        {name: [getattr(n, name) for n in nms] for name in ("f", "x2", "p", "x1")},
        [RECIPROCALS[n.j] for n in nms],
        [table[n.k] for n in nms],
        [J_TABLE[n.j] for n in nms],
        c_entry,
        ShiftCoefficients.of(per_count) if mode == "bdeu" else None,
        shift_frac,
    )


def term_fixed(x: int, count_bits: int, mode: str, shift: Shift | None = None) -> int:
    """One cell or row term * 2^SCORE_FRAC: G(x) (yw; yw0 adds -1 when x = 0), x ln x (bic),
    ln x! (exact), lnG(x + a) (bdeu), as the protocol computes it."""
    return term_fixed_many([x], count_bits, mode, None if shift is None else [shift])[0]


def ln_fixed(x: int, count_bits: int, mode: str = "yw") -> int:
    """ln x * 2^FRAC as the protocol computes it (0 when gated off)."""
    be = PlainBackend()
    nm = normalise(x, count_bits, mode)
    u2, u3, u4 = powers_on(be, [nm.u])
    return k_table(count_bits - 1)[nm.k] + J_TABLE[nm.j] + LN1P.evaluate(be, [nm.u], u2, u3, u4)[0]


def normalisation_spec(count_bits: int, mode: str, shift: Shift | None = None) -> NormalisationSpec:
    """The circuit-side statement of this format for one count width and score mode (and
    the bdeu shift)."""
    return NormalisationSpec(
        count_bits=count_bits,
        mode=mode,
        frac=FRAC,
        mantissa_bits=MANTISSA_BITS,
        recip_bits=RECIP_BITS,
        reciprocals=RECIPROCALS,
        threshold=threshold(mode),
        shift=0 if shift is None else shift.numerator,
        shift_frac=0 if shift is None else shift.frac,
    )
