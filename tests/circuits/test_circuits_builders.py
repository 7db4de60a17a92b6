"""Every builder against Python integer arithmetic, on edge values and random values.

Each circuit is evaluated once over a batch of instances (all pairs of edge values plus
random ones), in plaintext; garbled agreement with plaintext is tested in test_yao.py.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.circuits import builders as B
from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.ir import to_signed

WIDTHS = [1, 2, 7, 64, 100]


def edge_values(width: int) -> list[int]:
    top = (1 << width) - 1
    half = 1 << (width - 1)
    return sorted({0, 1 % (top + 1), top, top - 1 if top else 0, half, half - 1})


def pairs(width: int, n_random: int = 40, seed: int = 0) -> tuple[list[int], list[int]]:
    rng = random.Random(seed + width)
    edges = edge_values(width)
    xs = [a for a in edges for _ in edges] + [rng.getrandbits(width) for _ in range(n_random)]
    ys = [b for _ in edges for b in edges] + [rng.getrandbits(width) for _ in range(n_random)]
    same = [rng.getrandbits(width) for _ in range(8)]
    return xs + same, ys + same


def run(build, inputs: dict[str, list[int]]) -> dict[str, list[int]]:
    b = B.CircuitBuilder()
    build(b)
    circuit = b.build()
    return {k: [int(v) for v in vals] for k, vals in evaluate(circuit, inputs).items()}


def signed(v: int, width: int) -> int:
    return to_signed([v], width)[0]


@pytest.mark.parametrize("width", WIDTHS)
def test_add_sub_compare_mux(width: int) -> None:
    xs, ys = pairs(width)
    ss = [i % 2 for i in range(len(xs))]
    mod = 1 << width

    def build(b: B.CircuitBuilder) -> None:
        x, y, s = b.input("x", width), b.input("y", width), b.input("s", 1)[0]
        b.output("add", B.add(b, x, y))
        total, carry = B.add_with_carry(b, x, y)
        b.output("carry", [carry])
        diff, borrow = B.sub_with_borrow(b, x, y)
        b.output("sub", B.sub(b, x, y))
        b.output("sub2", diff)
        b.output("borrow", [borrow])
        b.output("lt", [B.less_than(b, x, y)])
        b.output("le", [B.less_equal(b, x, y)])
        b.output("lts", [B.less_than(b, x, y, signed=True)])
        b.output("les", [B.less_equal(b, x, y, signed=True)])
        b.output("eq", [B.equal(b, x, y)])
        b.output("zero", [B.is_zero(b, x)])
        b.output("mux", B.mux(b, s, x, y))
        b.output("max", B.maximum(b, x, y))
        b.output("maxs", B.maximum(b, x, y, signed=True))
        b.output("neg", B.negate(b, x))
        b.output("abs", B.absolute(b, x))

    got = run(build, {"x": xs, "y": ys, "s": ss})
    for i, (x, y, s) in enumerate(zip(xs, ys, ss, strict=True)):
        sx, sy = signed(x, width), signed(y, width)
        assert got["add"][i] == (x + y) % mod
        assert got["carry"][i] == int(x + y >= mod)
        assert got["sub"][i] == got["sub2"][i] == (x - y) % mod
        assert got["borrow"][i] == int(x < y)
        assert got["lt"][i] == int(x < y)
        assert got["le"][i] == int(x <= y)
        assert got["lts"][i] == int(sx < sy)
        assert got["les"][i] == int(sx <= sy)
        assert got["eq"][i] == int(x == y)
        assert got["zero"][i] == int(x == 0)
        assert got["mux"][i] == (x if s else y)
        assert got["max"][i] == max(x, y)
        assert got["maxs"][i] == max(sx, sy) % mod
        assert got["neg"][i] == (-x) % mod
        assert got["abs"][i] == abs(sx) % mod


@pytest.mark.parametrize(("width", "floor"), [(12, 5), (15, 6), (9, 8)])
def test_a_floor_gives_the_same_outputs_for_fewer_gates(width: int, floor: int) -> None:
    """For x = 0 or x >= 2^floor, ``floor`` changes nothing but the AND count."""
    rng = random.Random(width)
    xs = [0, 1 << floor, (1 << width) - 1] + [
        rng.randrange(1 << floor, 1 << width) for _ in range(60)
    ]

    def build(at: int):
        def made(b: B.CircuitBuilder) -> None:
            mantissa, position, zero = B.normalize(b, b.input("x", width), floor=at)
            b.output("mant", mantissa)
            b.output("pos", position)
            b.output("zero", [zero])
            b.output("one_hot", B.leading_one(b, b.input("y", width), floor=at)[0])

        return made

    inputs = {"x": xs, "y": xs}
    assert run(build(floor), inputs) == run(build(0), inputs)
    gates = []
    for at in (floor, 0):
        b = B.CircuitBuilder()
        B.normalize(b, b.input("x", width), floor=at)
        gates.append(b.and_gates)
    assert gates[0] < gates[1]


@pytest.mark.parametrize("width", [2, 8, 64, 90])
def test_leading_one_and_normalize(width: int) -> None:
    rng = random.Random(width)
    xs = [0, 1, 2, 3, (1 << width) - 1, 1 << (width - 1)] + [
        rng.getrandbits(rng.randint(1, width)) for _ in range(60)
    ]

    def build(b: B.CircuitBuilder) -> None:
        x = b.input("x", width)
        one_hot, position, zero = B.leading_one(b, x)
        b.output("one_hot", one_hot)
        b.output("pos", position)
        b.output("zero", [zero])
        mantissa, position2, _ = B.normalize(b, x)
        b.output("mant", mantissa)
        b.output("pos2", position2)

    got = run(build, {"x": xs})
    for i, x in enumerate(xs):
        assert got["zero"][i] == int(x == 0)
        if x == 0:
            assert got["one_hot"][i] == got["pos"][i] == got["mant"][i] == 0
            continue
        k = x.bit_length() - 1
        assert got["pos"][i] == got["pos2"][i] == k
        assert got["one_hot"][i] == 1 << k
        assert got["mant"][i] == x << (width - 1 - k)
        assert got["mant"][i] >> (width - 1) == 1


@pytest.mark.parametrize(("width", "frac"), [(4, 2), (8, 3), (24, 8), (70, 20)])
def test_fixed_multiply_and_divide(width: int, frac: int) -> None:
    xs, ys = pairs(width, n_random=30)
    mod = 1 << width

    def build(b: B.CircuitBuilder) -> None:
        x, y = b.input("x", width), b.input("y", width)
        b.output("mul", B.fixed_multiply(b, x, y, frac))
        b.output("muls", B.fixed_multiply(b, x, y, frac, signed=True))
        b.output("div", B.fixed_divide(b, x, y, frac))
        b.output("divs", B.fixed_divide(b, x, y, frac, signed=True))
        q, r = B.divide(b, x, y)
        b.output("q", q)
        b.output("r", r)

    got = run(build, {"x": xs, "y": ys})
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        sx, sy = signed(x, width), signed(y, width)
        assert got["mul"][i] == (x * y >> frac) % mod
        assert got["muls"][i] == (sx * sy >> frac) % mod
        if y == 0:
            continue
        assert got["div"][i] == ((x << frac) // y) % mod
        assert got["q"][i] == x // y and got["r"][i] == x % y
        if sy != 0:
            magnitude = (abs(sx) << frac) // abs(sy)
            expected = -magnitude if (sx < 0) != (sy < 0) else magnitude
            assert got["divs"][i] == expected % mod


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 20), st.integers(0, 48), st.data())
def test_fraction_matches_floor_division(width: int, frac: int, data: st.DataObject) -> None:
    """floor(x 2^f / y) for 0 <= x <= y, y > 0, with the edges y = 1, x = 0 and x = y."""
    top = (1 << width) - 1
    ys = [1, top, *data.draw(st.lists(st.integers(1, top), min_size=1, max_size=12))]
    xs = [data.draw(st.integers(0, y)) for y in ys]
    xs, ys = xs + [0, top, ys[2]], ys + [top, top, ys[2]]

    def build(b: B.CircuitBuilder) -> None:
        b.output("q", B.fraction(b, b.input("x", width), b.input("y", width), frac))

    got = run(build, {"x": xs, "y": ys})
    assert got["q"] == [(x << frac) // y for x, y in zip(xs, ys, strict=True)]


def reference_argmax(values: list[int], tolerance: int) -> int:
    best = max(values)
    return next(i for i, v in enumerate(values) if v >= best - tolerance)


@pytest.mark.parametrize(
    ("width", "k", "is_signed"), [(3, 1, False), (6, 5, True), (16, 4, False), (80, 3, True)]
)
def test_argmax_tolerant_edges_and_ties(width: int, k: int, is_signed: bool) -> None:
    rng = random.Random(width * k)
    mod = 1 << width
    lo, hi = (-(mod >> 1), (mod >> 1) - 1) if is_signed else (0, mod - 1)
    rows = [[hi] * k, [lo] * k, [0] * k]  # all tied
    rows += [[rng.choice([lo, hi, 0, 1]) for _ in range(k)] for _ in range(20)]
    rows += [[rng.randint(lo, hi) for _ in range(k)] for _ in range(40)]
    base = rng.randint(lo + 5, hi - 5) if hi - lo > 12 else 0
    rows += [
        [min(hi, max(lo, base + rng.randint(-3, 3))) for _ in range(k)] for _ in range(40)
    ]  # near-ties
    for tolerance in (0, 1, 3, mod - 1):

        def build(b: B.CircuitBuilder, tol: int = tolerance) -> None:
            vals = [b.input(f"v{i}", width) for i in range(k)]
            index, best = B.argmax_tolerant(b, vals, tol, signed=is_signed)
            b.output("index", index)
            b.output("max", best)

        inputs = {f"v{i}": [r[i] % mod for r in rows] for i in range(k)}
        got = run(build, inputs)
        for j, row in enumerate(rows):
            assert got["index"][j] == reference_argmax(row, tolerance), (row, tolerance)
            assert got["max"][j] == max(row) % mod


def test_and_counts_near_textbook_minimum() -> None:
    for width in (8, 64, 128):
        c = B.and_counts(width, k=4)
        assert c["add"] == width - 1 and c["add_with_carry"] == width
        assert c["sub"] == width - 1
        assert c["less_than"] == c["less_than_signed"] == c["less_equal"] == width
        assert c["equal"] == c["is_zero"] == width - 1
        assert c["mux"] == width and c["maximum"] == 2 * width
        assert c["leading_one"] == width - 1
        shift_bits = B.index_width(width)
        assert c["normalize"] <= width - 1 + width * shift_bits
        assert c["argmax_tolerant(k=4)"] <= 3 * 2 * width + (width + 1) + 4 * (width + 1) + 2 * 4
        f = width // 2
        assert c[f"fixed_multiply(f={f})"] <= (width + f) ** 2
        assert c[f"fixed_divide(f={f})"] <= (width + f) * width
        assert c[f"fraction(f={f})"] == (f + 1) * width


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.data())
def test_constant_folding_keeps_results(width: int, data: st.DataObject) -> None:
    """Adding and comparing against public constants folds gates but not correctness."""
    c = data.draw(st.integers(0, (1 << width) - 1))
    xs = data.draw(st.lists(st.integers(0, (1 << width) - 1), min_size=1, max_size=12))

    def build(b: B.CircuitBuilder) -> None:
        x = b.input("x", width)
        b.output("sum", B.add(b, x, B.constant(c, width)))
        b.output("lt", [B.less_than(b, x, B.constant(c, width))])
        b.output("const", B.constant(c, width))

    got = run(build, {"x": xs})
    for i, x in enumerate(xs):
        assert got["sum"][i] == (x + c) % (1 << width)
        assert got["lt"][i] == int(x < c)
        assert got["const"][i] == c


def test_embed_reuses_a_circuit() -> None:
    inner = B.CircuitBuilder()
    x, y = inner.input("x", 16), inner.input("y", 16)
    inner.output("s", B.add(inner, x, y))
    adder = inner.build()
    outer = B.CircuitBuilder()
    a, b_, c = outer.input("a", 16), outer.input("b", 16), outer.input("c", 16)
    ab = outer.embed(adder, {"x": a, "y": b_})["s"]
    outer.output("abc", outer.embed(adder, {"x": ab, "y": c})["s"])
    got = evaluate(outer.build(), {"a": [1, 65535], "b": [2, 1], "c": [3, 7]})
    assert list(got["abc"]) == [6, 7]
    assert np.asarray(got["abc"]).dtype == np.uint64
