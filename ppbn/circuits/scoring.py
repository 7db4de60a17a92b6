"""The small circuits of the private K2: ln normalisation, the K2 decision, CPT division.

Each function builds (once, cached) a circuit whose plaintext behaviour is specified in
``ppbn.protocols.fixedpoint``; the secure oracle runs them with Yao over shares.

- ``normalisation_circuit``: Lindell-Pinkas's first step (Yang-Wright Sec. 5.4 / 6.5)
  extended to the score modes: from two shares of a count x it produces, as Yao's bit
  shares at their natural widths (``shared_outputs``), what the share arithmetic needs
  to form the reduced argument u and the term (the power p = 2^(K'-1-k) with x1 or with
  the mantissa's fraction f and x2), and the lookup indices k, j (and the C-table index)
  masked with garbler-chosen pads, so the evaluator can fetch table entries by OT
  without learning them. Replacing alpha = 0 by beta = 1 (Yang-Wright Sec. 6.4) is
  x1 = max(x, 1) in the yw, yw0 and bic modes, and the gate g = [x >= T] in the
  exact and bdeu modes: below it every ln part is 0. The zero indicator of the yw0
  mode is the masked C index.
- ``decision_circuit``: Yang-Wright Sec. 6.6 with the tie rule of docs/conventions.md, "Tie rule": the first
  candidate within tau of the best, and whether the best beats the current score by more
  than tau. Only these two outputs are revealed.
- ``division_circuit``: Yang-Wright Sec. 7.1: alpha_ijk / alpha_ij in fixed point, the
  uniform row 1/d when alpha_ij = 0, and that flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ppbn.circuits import builders as bl
from ppbn.circuits.builders import ZERO, Bits, CircuitBuilder
from ppbn.circuits.ir import Circuit

PARAM_FRAC = 40  # fractional bits of secure CPT entries (2^-40 ~ 9e-13)
PARAM_BITS = 64  # CPT entries and their shares live in Z_2^64


@dataclass(frozen=True)
class NormalisationSpec:
    """The fixed-point format the normalisation circuit implements (built by
    ``ppbn.protocols.fixedpoint.normalisation_spec``, which also states it in plain code)."""

    count_bits: int  # K: every count is below 2^K
    mode: str  # yw, yw0, bic or exact
    frac: int  # fractional bits of u and inv
    mantissa_bits: int  # t: index bits of the reciprocal table
    recip_bits: int  # fractional bits of the reciprocals r_j
    reciprocals: tuple[int, ...]  # r_j * 2^recip_bits, r_0 = 1
    threshold: int  # T, a power of two: the ln part is gated off below it
    # bdeu: the circuit normalises X = (x << shift_frac) + shift (the public a' 2^F) instead
    # of x; the gate and the C index stay on x
    shift: int = 0
    shift_frac: int = 0


@dataclass(frozen=True)
class SharedOutput:
    """An output of the normalisation circuit that the parties get as XOR shares of its
    bits: an unsigned ``width``-bit integer, the value of ``fixedpoint.normalise``."""

    width: int


def ungated(spec: NormalisationSpec) -> bool:
    """The modes whose threshold is T = 1 (yw, yw0, bic): every count but 0 has an ln part,
    and 0's is 0 = ln 1, so the circuit normalises x1 = max(x, 1) and gates nothing."""
    return spec.threshold == 1 and not spec.shift_frac


def shared_outputs(spec: NormalisationSpec) -> dict[str, SharedOutput]:
    """Widths of the outputs the parties get as XOR shares of their bits, from the spec.

    With K' = count_bits + shift_frac the normalised value X < 2^K' is 2^k M / 2^(K'-1)
    with the mantissa M in [2^(K'-1), 2^K') and k <= K' - 1; in every mode
    p = 2^(K'-1-k) is the leading-one vector read backwards, so it costs no gate.

    Without a gate (``ungated``): x1 = max(x, 1) < 2^K and p < 2^K, so M = x1 p; the share
    arithmetic forms u from x1 p r_j (``fixedpoint.reduced_argument_of_power``) and the
    term from x1, and the circuit need not shift x at all (only the mantissa index j).

    With a gate [x >= T] (exact, bdeu), 0 below it:
    - f = M - 2^(K'-1) < 2^(K'-1), the mantissa's fraction. The share arithmetic turns it
      into u = (2^(K'-1) + f) r_j - 2^P (``fixedpoint.reduced_argument_on``), so neither
      the reciprocal table nor the product is garbled.
    - x2 = 2x + 1 < 2^(count_bits + 1).
    - p, with which r_j gives 2^-k r_j (``fixedpoint.inv_on``): gated on,
      k >= log2 T + F, so p < 2^(count_bits - log2 T).
    """
    if ungated(spec):
        return {"x1": SharedOutput(spec.count_bits), "p": SharedOutput(spec.count_bits)}
    return {
        "f": SharedOutput(spec.count_bits + spec.shift_frac - 1),
        "x2": SharedOutput(spec.count_bits + 1),
        "p": SharedOutput(spec.count_bits - (spec.threshold.bit_length() - 1)),
    }


def select_constant(
    b: CircuitBuilder, index: Sequence[int], table: Sequence[int], width: int
) -> Bits:
    """table[index] for a public table: a mux tree whose leaves fold to free gates."""
    if len(table) != 1 << len(index):
        raise ValueError(f"table of {len(table)} entries for a {len(index)}-bit index")
    if not index:
        return bl.constant(table[0], width)
    half = len(table) // 2
    low = select_constant(b, index[:-1], table[:half], width)
    high = select_constant(b, index[:-1], table[half:], width)
    return bl.mux(b, index[-1], high, low)


def index_bits(count_bits: int) -> int:
    """Width of the exponent k < count_bits (the size of fixedpoint.k_table(count_bits - 1))."""
    return bl.index_width(count_bits)


def c_index_bits(mode: str) -> int:
    return {"exact": 6, "bdeu": 7, "yw0": 1}.get(mode, 0)


@lru_cache(maxsize=32)
def normalisation_circuit(spec: NormalisationSpec) -> Circuit:
    """Inputs xa, xb (count shares mod 2^K), garbler pads mu_k, mu_j[, mu_c]; outputs the
    unsigned integers of ``shared_outputs`` (to be shared) and the masked
    indices k, j[, c] (for the evaluator). See ``fixedpoint.normalise`` for the values."""
    x_bits, mode = spec.count_bits, spec.mode
    frac, t_bits, r_bits = spec.frac, spec.mantissa_bits, spec.recip_bits
    k_bits = x_bits + spec.shift_frac  # the width of the normalised value
    if not t_bits + 2 <= k_bits <= frac - r_bits + 1:
        raise ValueError(f"count width {k_bits} outside [{t_bits + 2}, {frac - r_bits + 1}]")
    if spec.shift >> k_bits or (mode == "bdeu") != (spec.shift_frac > 0):
        raise ValueError("the bdeu mode, and only it, normalises a shifted count")
    if len(spec.reciprocals) != 1 << t_bits or spec.threshold & (spec.threshold - 1):
        raise ValueError(
            "the reciprocal table needs 2^t entries and the threshold must be a power of two"
        )
    b = CircuitBuilder()
    xa = b.input("xa", x_bits)  # the low K bits of the count shares (x < 2^K)
    xb = b.input("xb", x_bits)
    mu_k = b.input("mu_k", index_bits(k_bits))
    mu_j = b.input("mu_j", t_bits)
    mu_c = b.input("mu_c", c_index_bits(mode)) if c_index_bits(mode) else []

    x = bl.add(b, xa, xb)

    def masked(name: str, bits: Sequence[int], pads: Sequence[int]) -> None:
        b.output(name, [b.xor(a, m) for a, m in zip(bits, pads, strict=True)])

    if ungated(spec):
        # x1 = max(x, 1): bit 0 becomes x_0 OR [x < 2]; then [x == 0] is x1_0 ^ x_0, free
        below_two = b.inv(bl.prefix_or(b, x, 1)[1])
        x1 = [b.or_(x[0], below_two), *x[1:]]
        mantissa, position, _ = bl.normalize(b, x1)
        b.output("x1", x1)
        b.output("p", bl.leading_one(b, x1)[0][::-1])  # normalize's own vector (same gates)
        masked("k_masked", position, mu_k)
        masked("j_masked", mantissa[k_bits - 1 - t_bits : k_bits - 1], mu_j)
        if mode == "yw0":
            masked("c_masked", [b.xor(x1[0], x[0])], mu_c)
        return b.build()

    low = spec.threshold.bit_length() - 1
    # [x >= T] is the OR of x's bits from `low` up: the top of the leading-one chain that
    # normalize builds below from the same gates, so it costs nothing of its own
    g = bl.prefix_or(b, x[low:])[0]
    # Below T every output but the C index is 0. Instead of gating each output, gate the
    # value normalised: its bits below `low` (ANDs that x2 needs anyway) and, in bdeu, the
    # shift. Gated off it is 0, whose mantissa, position and leading-one vector are 0;
    # gated on it is x (bdeu: X), whose leading one is at `low` (+ F) or above.
    x_low = [b.and_(g, v) for v in x[:low]]
    value = x_low + x[low:]
    if spec.shift_frac:
        shift = [b.and_(g, v) for v in bl.constant(spec.shift, k_bits)]
        value = bl.add(b, [ZERO] * spec.shift_frac + value, shift)
    floor = low + spec.shift_frac
    mantissa, position, _ = bl.normalize(b, value, floor=floor)
    b.output("f", mantissa[: k_bits - 1])
    # x2 = 2x + 1 gated on; below the gate the bits of x from `low` up are 0 already
    b.output("x2", [g, *x_low, *x[low:]])
    b.output("p", bl.leading_one(b, value, floor)[0][floor:][::-1])  # (same gates)
    masked("k_masked", position, mu_k)
    masked("j_masked", mantissa[k_bits - 1 - t_bits : k_bits - 1], mu_j)
    # (not g) x_i is x_i ^ g x_i: free next to the gated low bits (T = 64)
    x_below = [b.xor(v, w) for v, w in zip(x[:low], x_low, strict=True)]
    if mode == "exact":  # fixedpoint.exact_c_index: x below 64, but 0 for x = 1, 1 for x >= 64
        above_one = b.inv(bl.is_zero(b, x[1:6]))  # with bit 0 set: x > 1 (below 64)
        masked("c_masked", [b.xor(g, b.and_(x_below[0], above_one)), *x_below[1:6]], mu_c)
    else:  # bdeu: min(x, 64)
        masked("c_masked", [*x_below[:6], g], mu_c)
    return b.build()


@lru_cache(maxsize=128)
def decision_circuit(n_candidates: int, tolerance: int, width: int) -> Circuit:
    """Inputs cur_a, cur_b and s{i}_a, s{i}_b: score shares mod 2^width (scores are below
    2^(width-1) in magnitude, so the low bits of the ring shares suffice); outputs add
    (best - current > tolerance) and index (the first candidate within ``tolerance`` of the
    best when add is 1, else 0)."""
    b = CircuitBuilder()
    current = bl.add(b, b.input("cur_a", width), b.input("cur_b", width))
    scores = [
        bl.add(b, b.input(f"s{i}_a", width), b.input(f"s{i}_b", width)) for i in range(n_candidates)
    ]
    index, best = bl.argmax_tolerant(b, scores, tolerance, signed=True)
    bar = bl.add(b, current, bl.constant(tolerance, width))
    add = bl.less_than(b, bar, best, signed=True)
    # the index is an output only when a parent is added: on "stop" it is 0, so the parties
    # do not learn which candidate came closest
    b.output("index", [b.and_(add, bit) for bit in index])
    b.output("add", [add])
    return b.build()


# -- the hill-climbing argmax in stages (protocols/hc.py) --------------------------------
#
# One circuit over all of a step's moves (over a thousand on alarm) costs minutes to build
# and garbles one slow instance; instead four small circuits of fixed shape, each run over
# many instances at once, compute the same tie rule: block maxima -> the best and the
# threshold best - tau (and whether best > tau) -> each block's first move at or above the
# threshold -> the first block with one. Only "add" and the final index are revealed; the
# values between the stages are shares mod 2^width.


def _shared_value(b: CircuitBuilder, name: str, width: int) -> Bits:
    return bl.add(b, b.input(f"{name}_a", width), b.input(f"{name}_b", width))


@lru_cache(maxsize=16)
def block_max_circuit(block: int, width: int) -> Circuit:
    """Inputs s{i}_a, s{i}_b (shares mod 2^width of signed values); output max."""
    b = CircuitBuilder()
    b.output(
        "max", bl.max_of(b, [_shared_value(b, f"s{i}", width) for i in range(block)], signed=True)
    )
    return b.build()


@lru_cache(maxsize=16)
def threshold_circuit(groups: int, tolerance: int, width: int) -> Circuit:
    """Inputs m{g}_a, m{g}_b (block maxima); outputs add = [best > tolerance] and the
    threshold t = best - tolerance in width + 1 bits (no wrap)."""
    b = CircuitBuilder()
    best = bl.sign_extend(
        bl.max_of(b, [_shared_value(b, f"m{g}", width) for g in range(groups)], signed=True),
        width + 1,
    )
    bar = bl.constant(tolerance, width + 1)
    b.output("add", [bl.less_than(b, bar, best, signed=True)])
    b.output("t", bl.sub(b, best, bar))
    return b.build()


@lru_cache(maxsize=16)
def first_hit_circuit(block: int, width: int) -> Circuit:
    """Inputs s{i}_a, s{i}_b (width) and t_a, t_b (width + 1); outputs hit (some value is
    >= t) and index (the first such, 0 when none)."""
    b = CircuitBuilder()
    threshold = _shared_value(b, "t", width + 1)
    seen, index = ZERO, [ZERO] * bl.index_width(block)
    for i in range(block):
        value = bl.sign_extend(_shared_value(b, f"s{i}", width), width + 1)
        hit = b.inv(bl.less_than(b, value, threshold, signed=True))
        first = b.and_(hit, b.inv(seen))
        seen = b.or_(seen, hit)
        for j in range(len(index)):
            if (i >> j) & 1:
                index[j] = b.xor(index[j], first)
    b.output("hit", [seen])
    b.output("index", index)
    return b.build()


@lru_cache(maxsize=16)
def select_circuit(groups: int, block: int) -> Circuit:
    """Inputs h{g}_a, h{g}_b (1 bit) and x{g}_a, x{g}_b (block index bits); output index =
    g block + x_g for the first block g with a hit (block is a power of two)."""
    if block & (block - 1):
        raise ValueError("the block size must be a power of two")
    b = CircuitBuilder()
    low = bl.index_width(block)
    out = [ZERO] * (low + bl.index_width(groups))
    seen = ZERO
    for g in range(groups):
        hit = b.xor(b.input(f"h{g}_a", 1)[0], b.input(f"h{g}_b", 1)[0])
        value = _shared_value(b, f"x{g}", low) + bl.constant(g, len(out) - low)
        first = b.and_(hit, b.inv(seen))
        seen = b.or_(seen, hit)
        out = [b.xor(o, b.and_(first, v)) for o, v in zip(out, value, strict=True)]
    b.output("index", out)
    return b.build()


@lru_cache(maxsize=64)
def division_circuit(count_bits: int, states: int) -> Circuit:
    """Inputs na, nb (alpha_ijk shares), da, db (alpha_ij shares) mod 2^count_bits (the
    low bits of the shares mod 2^64); outputs theta = floor(alpha_ijk 2^PARAM_FRAC /
    alpha_ij) (or round(2^PARAM_FRAC / d) when alpha_ij = 0) in PARAM_BITS bits, and the
    flag unobserved = [alpha_ij = 0]. alpha_ijk <= alpha_ij, so ``fraction`` needs only
    PARAM_FRAC + 1 steps of count_bits ANDs."""
    b = CircuitBuilder()

    def shared_count(a: str, c: str) -> Bits:
        return bl.add(b, b.input(a, count_bits), b.input(c, count_bits))

    num = shared_count("na", "nb")
    den = shared_count("da", "db")
    unobserved = bl.is_zero(b, den)
    quotient = bl.fraction(b, num, den, PARAM_FRAC)
    uniform = bl.constant(round((1 << PARAM_FRAC) / states), PARAM_FRAC + 1)
    theta = bl.mux(b, unobserved, uniform, quotient)
    b.output("theta", bl.zero_extend(theta, PARAM_BITS))
    b.output("unobserved", [unobserved])
    return b.build()
