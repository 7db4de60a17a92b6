"""Build circuits word by word: adders, comparators, multiplexers, argmax, normalisation,
fixed-point multiplication and division, for any bit width.

A ``CircuitBuilder`` hands out wires; word-level functions take the builder and lists of
wires (least significant bit first) and return new lists. Constants are the pseudo-wires
``ZERO`` and ``ONE``: gates with a constant operand are folded away, identical gates are
built once, so the AND count of a builder is what it actually costs to garble. Only XOR,
AND and INV gates are produced; XOR and INV are free under free-XOR garbling, so every
builder is designed to minimise AND gates:

- addition and subtraction mod 2^l: ripple carry with one AND per bit (the carry
  c' = c ^ ((x ^ c) & (y ^ c))), l - 1 ANDs; with carry out, l;
- comparison <, <=: the carry chain of x - y, l ANDs; equality and zero test: an AND tree
  over inverted difference bits, l - 1 ANDs;
- multiplexer: y ^ (s & (x ^ y)), l ANDs;
- leading one: a prefix OR from the top (l - 1 ANDs) whose differences are the one-hot
  position, from which the position and the shift amount follow by XOR alone; the
  normalising barrel shift costs l per shift bit;
- multiplication: shift-and-add schoolbook truncated to the output width;
- division: non-restoring, one (d + 1)-bit add-or-subtract (d ANDs) per quotient bit.

Signed values are two's complement; signed order is unsigned order with the sign bit
flipped, which is free.

``and_counts(width)`` reports the AND gates of each builder at a given width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ppbn.circuits.ir import Bundle, Circuit, Op

ZERO = -1
ONE = -2
Bits = list[int]


class CircuitBuilder:
    """Accumulates gates; folds constants and reuses identical gates."""

    def __init__(self) -> None:
        self._ops: list[int] = []
        self._in0: list[int] = []
        self._in1: list[int] = []
        self._out: list[int] = []
        self._n_wires = 0
        self._inputs: list[Bundle] = []
        self._outputs: list[tuple[str, Bits]] = []
        self._memo: dict[tuple[int, int, int], int] = {}
        self.and_gates = 0

    # -- wires and bundles -----------------------------------------------------------
    def input(self, name: str, width: int) -> Bits:
        wires = list(range(self._n_wires, self._n_wires + width))
        self._n_wires += width
        self._inputs.append(Bundle(name, tuple(wires)))
        return wires

    def output(self, name: str, bits: Sequence[int]) -> None:
        self._outputs.append((name, list(bits)))

    def _gate(self, op: Op, a: int, b: int) -> int:
        key = (int(op), min(a, b), max(a, b)) if op != Op.INV else (int(op), a, -1)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        w = self._n_wires
        self._n_wires += 1
        self._ops.append(op)
        self._in0.append(a)
        self._in1.append(b)
        self._out.append(w)
        self._memo[key] = w
        if op == Op.AND:
            self.and_gates += 1
        return w

    # -- gates with constant folding -------------------------------------------------
    def xor(self, a: int, b: int) -> int:
        if a == b:
            return ZERO
        if a == ZERO:
            return b
        if b == ZERO:
            return a
        if a == ONE:
            return self.inv(b)
        if b == ONE:
            return self.inv(a)
        return self._gate(Op.XOR, a, b)

    def inv(self, a: int) -> int:
        if a == ZERO:
            return ONE
        if a == ONE:
            return ZERO
        key = (int(Op.INV), a, -1)
        if key in self._memo:
            return self._memo[key]
        w = self._gate(Op.INV, a, -1)
        self._memo[(int(Op.INV), w, -1)] = a  # inv(inv(a)) is a itself
        return w

    def and_(self, a: int, b: int) -> int:
        if a == ZERO or b == ZERO:
            return ZERO
        if a == ONE:
            return b
        if b == ONE or a == b:
            return a
        return self._gate(Op.AND, a, b)

    def or_(self, a: int, b: int) -> int:
        return self.inv(self.and_(self.inv(a), self.inv(b)))

    # -- composition -------------------------------------------------------------------
    def embed(self, circuit: Circuit, inputs: Mapping[str, Sequence[int]]) -> dict[str, Bits]:
        """Copy ``circuit`` in, wiring its input bundles to the given bits; returns its outputs."""
        wire: dict[int, int] = {}
        for bundle in circuit.inputs:
            bits = list(inputs[bundle.name])
            if len(bits) != bundle.width:
                raise ValueError(
                    f"input {bundle.name!r} needs {bundle.width} bits, got {len(bits)}"
                )
            wire.update(zip(bundle.wires, bits, strict=True))
        for op, a, b, o in zip(
            circuit.ops.tolist(),
            circuit.in0.tolist(),
            circuit.in1.tolist(),
            circuit.out.tolist(),
            strict=True,
        ):
            if op == Op.XOR:
                wire[o] = self.xor(wire[a], wire[b])
            elif op == Op.AND:
                wire[o] = self.and_(wire[a], wire[b])
            else:
                wire[o] = self.inv(wire[a])
        return {b.name: [wire[w] for w in b.wires] for b in circuit.outputs}

    def build(self) -> Circuit:
        """The circuit so far; constant output bits are derived from the first input wire."""
        ops, in0, in1, out = list(self._ops), list(self._in0), list(self._in1), list(self._out)
        n_wires = self._n_wires
        const: dict[int, int] = {}

        def add_gate(op: Op, a: int, b: int) -> int:
            nonlocal n_wires
            ops.append(op)
            in0.append(a)
            in1.append(b)
            out.append(n_wires)
            n_wires += 1
            return n_wires - 1

        def materialise(bit: int) -> int:
            if bit >= 0:
                return bit
            if bit not in const:
                if not self._inputs or not self._inputs[0].wires:
                    raise ValueError(
                        "a circuit with a constant output needs at least one input wire"
                    )
                if ZERO not in const:
                    first = self._inputs[0].wires[0]
                    const[ZERO] = add_gate(Op.XOR, first, first)
                if bit == ONE:
                    const[ONE] = add_gate(Op.INV, const[ZERO], -1)
            return const[bit]

        outputs = [
            Bundle(name, tuple(materialise(b) for b in bits)) for name, bits in self._outputs
        ]
        return Circuit(n_wires, ops, in0, in1, out, self._inputs, outputs)


# -- plain bit lists -----------------------------------------------------------------
def constant(value: int, width: int) -> Bits:
    """The bits of a public constant (value mod 2^width)."""
    return [ONE if (value >> i) & 1 else ZERO for i in range(width)]


def zero_extend(x: Sequence[int], width: int) -> Bits:
    return list(x[:width]) + [ZERO] * (width - len(x))


def sign_extend(x: Sequence[int], width: int) -> Bits:
    return list(x[:width]) + [x[-1]] * (width - len(x))


def _flip_msb(b: CircuitBuilder, x: Sequence[int], signed: bool) -> Bits:
    return [*x[:-1], b.inv(x[-1])] if signed else list(x)


def _same_width(x: Sequence[int], y: Sequence[int]) -> int:
    if len(x) != len(y):
        raise ValueError(f"operands have different widths {len(x)} and {len(y)}")
    return len(x)


# -- arithmetic ------------------------------------------------------------------------
def add_with_carry(
    b: CircuitBuilder, x: Sequence[int], y: Sequence[int], carry: int = ZERO
) -> tuple[Bits, int]:
    """x + y + carry: (sum mod 2^l, carry out); one AND per bit."""
    _same_width(x, y)
    out: Bits = []
    for xi, yi in zip(x, y, strict=True):
        out.append(b.xor(b.xor(xi, yi), carry))
        carry = b.xor(carry, b.and_(b.xor(xi, carry), b.xor(yi, carry)))
    return out, carry


def add(b: CircuitBuilder, x: Sequence[int], y: Sequence[int], carry: int = ZERO) -> Bits:
    """x + y + carry mod 2^l (l - 1 ANDs: the last carry is never computed)."""
    n = _same_width(x, y)
    if n == 0:
        return []
    low, carry = add_with_carry(b, x[:-1], y[:-1], carry)
    return [*low, b.xor(b.xor(x[-1], y[-1]), carry)]


def sub_with_borrow(b: CircuitBuilder, x: Sequence[int], y: Sequence[int]) -> tuple[Bits, int]:
    """x - y mod 2^l and the borrow (1 iff x < y unsigned); l ANDs."""
    diff, carry = add_with_carry(b, x, [b.inv(v) for v in y], ONE)
    return diff, b.inv(carry)


def sub(b: CircuitBuilder, x: Sequence[int], y: Sequence[int]) -> Bits:
    """x - y mod 2^l, as x + ~y + 1 (l - 1 ANDs)."""
    return add(b, x, [b.inv(v) for v in y], ONE)


def negate(b: CircuitBuilder, x: Sequence[int]) -> Bits:
    """-x mod 2^l."""
    return sub(b, constant(0, len(x)), x)


def conditional_negate(b: CircuitBuilder, s: int, x: Sequence[int]) -> Bits:
    """-x if s else x, as (x ^ s) + s: l - 1 ANDs."""
    flipped = [b.xor(v, s) for v in x]
    return add(b, flipped, [s] + [ZERO] * (len(x) - 1))


def absolute(b: CircuitBuilder, x: Sequence[int]) -> Bits:
    """|x| of a two's complement value (the most negative value maps to itself)."""
    return conditional_negate(b, x[-1], x)


# -- comparison ------------------------------------------------------------------------
def less_than(b: CircuitBuilder, x: Sequence[int], y: Sequence[int], signed: bool = False) -> int:
    """x < y: the borrow of x - y (l ANDs)."""
    _same_width(x, y)
    x, y = _flip_msb(b, x, signed), _flip_msb(b, y, signed)
    carry = ONE
    for xi, yi in zip(x, y, strict=True):
        nyi = b.inv(yi)
        carry = b.xor(carry, b.and_(b.xor(xi, carry), b.xor(nyi, carry)))
    return b.inv(carry)


def less_equal(b: CircuitBuilder, x: Sequence[int], y: Sequence[int], signed: bool = False) -> int:
    """x <= y, as not (y < x)."""
    return b.inv(less_than(b, y, x, signed))


def _and_tree(b: CircuitBuilder, bits: Sequence[int]) -> int:
    level = list(bits)
    if not level:
        return ONE
    while len(level) > 1:
        pairs = [b.and_(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def equal(b: CircuitBuilder, x: Sequence[int], y: Sequence[int]) -> int:
    """x == y (l - 1 ANDs, depth log l)."""
    _same_width(x, y)
    return _and_tree(b, [b.inv(b.xor(xi, yi)) for xi, yi in zip(x, y, strict=True)])


def is_zero(b: CircuitBuilder, x: Sequence[int]) -> int:
    """x == 0 (l - 1 ANDs)."""
    return _and_tree(b, [b.inv(v) for v in x])


# -- selection ---------------------------------------------------------------------------
def mux(b: CircuitBuilder, s: int, x: Sequence[int], y: Sequence[int]) -> Bits:
    """x if s else y (l ANDs)."""
    _same_width(x, y)
    return [b.xor(yi, b.and_(s, b.xor(xi, yi))) for xi, yi in zip(x, y, strict=True)]


def maximum(b: CircuitBuilder, x: Sequence[int], y: Sequence[int], signed: bool = False) -> Bits:
    """max(x, y) (2l ANDs)."""
    return mux(b, less_than(b, x, y, signed), y, x)


def max_of(b: CircuitBuilder, values: Sequence[Sequence[int]], signed: bool = False) -> Bits:
    """Maximum of k values by a tournament ((k - 1) 2l ANDs, depth log k comparisons)."""
    if not values:
        raise ValueError("max_of needs at least one value")
    level = [list(v) for v in values]
    while len(level) > 1:
        nxt = [maximum(b, level[i], level[i + 1], signed) for i in range(0, len(level) - 1, 2)]
        level = nxt + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def index_width(k: int) -> int:
    """Bits needed to write an index in 0..k-1 (at least one)."""
    return max(1, (k - 1).bit_length())


def argmax_tolerant(
    b: CircuitBuilder, values: Sequence[Sequence[int]], tolerance: int, signed: bool = False
) -> tuple[Bits, Bits]:
    """(index, max): the FIRST index i with values[i] >= max - tolerance, and the maximum.

    This is the K2 tie rule of docs/conventions.md, "Tie rule", with an integer (fixed-point) tolerance, a
    public constant 0 <= tolerance < 2^l. The threshold max - tolerance is formed in l + 1
    bits so it cannot wrap; a prefix OR over the tests picks the first one.
    Cost: (k - 1) 2l for the maximum, about l for the threshold, k (l + 1) for the tests,
    about 2k for the first-one selection.
    """
    if not values:
        raise ValueError("argmax needs at least one value")
    n = len(values[0])
    if not 0 <= tolerance < (1 << n):
        raise ValueError(f"tolerance must lie in [0, 2^{n})")
    coded = [_flip_msb(b, v, signed) for v in values]
    best = max_of(b, coded, signed=False)
    threshold = sub(b, zero_extend(best, n + 1), constant(tolerance, n + 1))
    hits = [b.inv(less_than(b, zero_extend(v, n + 1), threshold, signed=True)) for v in coded]
    seen = ZERO
    index = [ZERO] * index_width(len(values))
    for i, hit in enumerate(hits):
        first = b.and_(hit, b.inv(seen))
        seen = b.or_(seen, hit) if i < len(hits) - 1 else seen
        for j in range(len(index)):
            if (i >> j) & 1:
                index[j] = b.xor(index[j], first)
    return index, _flip_msb(b, best, signed)


# -- normalisation (ln x = ln(2^k (1 + e))) ------------------------------------------
def prefix_or(b: CircuitBuilder, x: Sequence[int], floor: int = 0) -> Bits:
    """p[i] = OR of x[i:] for floor <= i <= l (p[l] = 0), built from the most significant
    bit down: l - 1 - floor ANDs. The entries below ``floor`` are left 0.

    The chain is the same gates for every caller, so a circuit that asks for it twice (say
    for [x >= 2^floor] and again inside ``leading_one``) pays for it once: the builder
    reuses identical gates.
    """
    n = len(x)
    prefix = [ZERO] * (n + 1)
    for i in range(n - 1, floor - 1, -1):
        prefix[i] = b.or_(prefix[i + 1], x[i])
    return prefix


def leading_one(b: CircuitBuilder, x: Sequence[int], floor: int = 0) -> tuple[Bits, Bits, int]:
    """(one-hot of the leading one, its position k = floor(log2 x), x == 0).

    The prefix OR from the most significant bit costs l - 1 ANDs; the one-hot vector is the
    XOR of neighbouring prefix bits and the position a XOR of one-hot bits (both free).
    For x == 0 the one-hot vector and the position are zero. A caller that knows x is
    either 0 or at least 2^floor passes ``floor``: the bits below it cannot hold the
    leading one, so the chain stops there (floor fewer ANDs).
    """
    n = len(x)
    prefix = prefix_or(b, x, floor)
    one_hot = [ZERO] * floor + [b.xor(prefix[i], prefix[i + 1]) for i in range(floor, n)]
    position = [ZERO] * index_width(n)
    for i, h in enumerate(one_hot):
        for j in range(len(position)):
            if (i >> j) & 1:
                position[j] = b.xor(position[j], h)
    return one_hot, position, b.inv(prefix[floor])


def normalize(b: CircuitBuilder, x: Sequence[int], floor: int = 0) -> tuple[Bits, Bits, int]:
    """(x << (l - 1 - k), k, x == 0) for k the leading-one position of x.

    The shifted value has its top bit set (unless x == 0), so x = 2^k (1 + e) with
    e = shifted / 2^(l-1) - 1, the decomposition of Lindell-Pinkas's ln x protocol
    (Yang-Wright Sec. 5.4). The shift amount l - 1 - k is a XOR of one-hot bits; the barrel
    shifter costs l ANDs per shift bit, and a shift bit that ``floor`` (see
    ``leading_one``) rules out costs nothing.
    """
    n = len(x)
    one_hot, position, zero = leading_one(b, x, floor)
    shift = [ZERO] * index_width(n)
    for i, h in enumerate(one_hot):
        for j in range(len(shift)):
            if ((n - 1 - i) >> j) & 1:
                shift[j] = b.xor(shift[j], h)
    # the largest step first: a caller that keeps only the top bits pays for fewer muxes
    # in the later, finer steps (unused gates are dropped by the schedule)
    value = list(x)
    for j in reversed(range(len(shift))):
        step = 1 << j
        if step < n:
            value = mux(b, shift[j], [ZERO] * step + value[: n - step], value)
    return value, position, zero


# -- multiplication and division ----------------------------------------------------
def multiply(b: CircuitBuilder, x: Sequence[int], y: Sequence[int], width: int) -> Bits:
    """x * y mod 2^width (unsigned, or two's complement when both are sign-extended to width)."""
    acc = [ZERO] * width
    for i, yi in enumerate(y[:width]):
        partial = [b.and_(xj, yi) for xj in x[: width - i]]
        partial += [ZERO] * (width - i - len(partial))
        acc = acc[:i] + add(b, acc[i:], partial)
    return acc


def fixed_multiply(
    b: CircuitBuilder, x: Sequence[int], y: Sequence[int], frac_bits: int, signed: bool = False
) -> Bits:
    """floor(x * y / 2^f) mod 2^l for l-bit fixed-point values with f fractional bits.

    The product is formed mod 2^(l+f) from operands extended to l + f bits (sign extension
    for two's complement), so the kept bits f .. f+l-1 are exact; rounding is toward
    minus infinity. About (l + f)^2 ANDs.
    """
    n = _same_width(x, y)
    extend = sign_extend if signed else zero_extend
    width = n + frac_bits
    return multiply(b, extend(x, width), extend(y, width), width)[frac_bits:]


def _nonrestoring(
    b: CircuitBuilder, x: Sequence[int], y: Sequence[int], start: Sequence[int] = ()
) -> tuple[Bits, Bits]:
    """Quotient bits and the final signed (d + 1)-bit partial remainder, in [-y, y).

    Each step adds or subtracts y from 2 rem + x_i depending on the sign of rem; the result
    fits in d + 1 bits, so the step is a (d + 1)-bit adder with carry-in: d ANDs. ``start``
    is the initial partial remainder (0 <= start < y; zero by default): the dividend's
    higher bits when the caller knows they give no quotient bit.
    """
    d = len(y)
    y_ext = zero_extend(y, d + 1)
    rem = zero_extend(list(start), d + 1)
    subtract = ONE
    quotient: Bits = [ZERO] * len(x)
    for i in range(len(x) - 1, -1, -1):
        shifted = [x[i], *rem[:d]]  # 2 rem + x_i mod 2^(d+1)
        rem = add(b, shifted, [b.xor(v, subtract) for v in y_ext], subtract)
        subtract = b.inv(rem[-1])
        quotient[i] = subtract
    return quotient, rem


def divide(b: CircuitBuilder, x: Sequence[int], y: Sequence[int]) -> tuple[Bits, Bits]:
    """Unsigned (floor(x / y), x mod y) by non-restoring division: n quotient bits of d ANDs.

    The divisor must be nonzero (the outputs for y = 0 are meaningless).
    """
    quotient, rem = _nonrestoring(b, x, y)
    fix = [b.and_(rem[-1], v) for v in y]
    return quotient, add(b, rem[: len(y)], fix)


def fraction(b: CircuitBuilder, x: Sequence[int], y: Sequence[int], frac_bits: int) -> Bits:
    """floor(x 2^f / y) for 0 <= x <= y, y > 0 (a CPT entry, Yang-Wright Sec. 7.1), in f + 1 bits.

    The quotient is at most 2^f, so the long division starts from the partial remainder
    floor(x / 2) < y and runs only the f + 1 steps that can set a quotient bit: (f + 1) d
    ANDs for a d-bit y, where ``fixed_divide`` at a common width l >= f + 1 runs l + f steps
    of l ANDs. Outside the precondition the output is meaningless.
    """
    _same_width(x, y)
    quotient, _ = _nonrestoring(b, [ZERO] * frac_bits + [x[0]], y, start=x[1:])
    return quotient


def fixed_divide(
    b: CircuitBuilder, x: Sequence[int], y: Sequence[int], frac_bits: int, signed: bool = False
) -> Bits:
    """x / y for l-bit fixed-point values with f fractional bits: floor(x 2^f / y) mod 2^l.

    Signed division works on magnitudes and negates the quotient when the signs differ
    (truncation toward zero). About (l + f) l ANDs, plus 3l for signs.
    """
    n = _same_width(x, y)
    if signed:
        sign = b.xor(x[-1], y[-1])
        x, y = absolute(b, x), absolute(b, y)
    quotient, _ = _nonrestoring(b, [ZERO] * frac_bits + list(x), y)
    quotient = quotient[:n]
    return conditional_negate(b, sign, quotient) if signed else quotient


# -- cost table ---------------------------------------------------------------------------
def and_counts(width: int, k: int = 4, frac_bits: int | None = None) -> dict[str, int]:
    """AND gates of each builder at ``width`` bits (argmax over k values, f = width // 2)."""
    f = width // 2 if frac_bits is None else frac_bits

    def cost(make) -> int:
        b = CircuitBuilder()
        make(b)
        return b.and_gates

    def two(b: CircuitBuilder) -> tuple[Bits, Bits]:
        return b.input("x", width), b.input("y", width)

    return {
        "add": cost(lambda b: add(b, *two(b))),
        "add_with_carry": cost(lambda b: add_with_carry(b, *two(b))),
        "sub": cost(lambda b: sub(b, *two(b))),
        "less_than": cost(lambda b: less_than(b, *two(b))),
        "less_than_signed": cost(lambda b: less_than(b, *two(b), signed=True)),
        "less_equal": cost(lambda b: less_equal(b, *two(b))),
        "equal": cost(lambda b: equal(b, *two(b))),
        "is_zero": cost(lambda b: is_zero(b, b.input("x", width))),
        "mux": cost(lambda b: mux(b, b.input("s", 1)[0], *two(b))),
        "maximum": cost(lambda b: maximum(b, *two(b))),
        f"argmax_tolerant(k={k})": cost(
            lambda b: argmax_tolerant(
                b, [b.input(f"v{i}", width) for i in range(k)], 3, signed=True
            )
        ),
        "leading_one": cost(lambda b: leading_one(b, b.input("x", width))),
        "normalize": cost(lambda b: normalize(b, b.input("x", width))),
        f"fixed_multiply(f={f})": cost(lambda b: fixed_multiply(b, *two(b), f)),
        f"fixed_multiply_signed(f={f})": cost(lambda b: fixed_multiply(b, *two(b), f, signed=True)),
        f"fixed_divide(f={f})": cost(lambda b: fixed_divide(b, *two(b), f)),
        f"fixed_divide_signed(f={f})": cost(lambda b: fixed_divide(b, *two(b), f, signed=True)),
        f"fraction(f={f})": cost(lambda b: fraction(b, *two(b), f)),
    }
