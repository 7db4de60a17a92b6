"""Two-party Yao: the known answer of the generated SHA-256 netlist, random circuits against the
plaintext evaluator, every output mode, either party garbling, wide values, integer shares
(reconstruction at the edges, cost, the evaluator's masked view), mask labels from a
seed (bytes saved, outputs over many chunks, the evaluator's labels independent of the
mask), and disagreement detection."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sha256_bristol import ABC_BLOCK, ABC_DIGEST, SHA256_IV, sha256_circuit

from ppbn.circuits import builders as B
from ppbn.circuits.bristol import hex_to_value, value_to_hex
from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.garble import (
    FixedKeyHash,
    evaluate_garbled,
    fixed_key,
    garble,
    permute_bits,
    random_delta,
    random_labels,
)
from ppbn.circuits.ir import Bundle, Circuit, Op, as_values, values_to_bits
from ppbn.circuits.schedule import schedule_of
from ppbn.protocols import ring, yao
from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.fixedpoint import STAT_BITS
from ppbn.protocols.seeds import TaskSeeds
from ppbn.protocols.yao import YAO_PROTOCOL, Reveal, YaoParty


def two_party(
    circuit: Circuit, garbler_inputs, evaluator_inputs, outputs, alice_garbles: bool = True
):
    """Alice and Bob in threads; returns (alice_result, bob_result, alice_counters)."""

    def alice(ch):
        party = YaoParty(ch)
        mine = garbler_inputs if alice_garbles else evaluator_inputs
        return party.run(
            circuit, garbler=alice_garbles, inputs=mine, outputs=outputs, instances=instances
        ), party

    def bob(ch):
        party = YaoParty(ch)
        mine = evaluator_inputs if alice_garbles else garbler_inputs
        return party.run(
            circuit, garbler=not alice_garbles, inputs=mine, outputs=outputs, instances=instances
        ), party

    instances = len(next(iter({**garbler_inputs, **evaluator_inputs}.values())))
    (ra, pa), (rb, _) = run_two_party(alice, bob, timeout_s=60)
    return ra, rb, pa.counters


def test_sha256_known_answer_garbled_by_two_parties() -> None:
    """FIPS 180-4's SHA-256("abc") through the generated netlist, garbled by either party,
    beside the all-zero instance against the plaintext evaluator."""
    circuit = sha256_circuit()
    block, iv = hex_to_value(ABC_BLOCK), hex_to_value(SHA256_IV)
    ra, rb, counters = two_party(
        circuit, {"in1": [iv, iv, 0]}, {"in0": [block, block, 0]}, {"out0": "both"}
    )
    assert value_to_hex(ra["out0"][0], 256) == ABC_DIGEST
    assert value_to_hex(rb["out0"][1], 256) == ABC_DIGEST
    zero = evaluate(circuit, {"in0": [0], "in1": [0]})["out0"][0]
    assert ra["out0"][2] == rb["out0"][2] == zero
    assert counters.and_gates == 3 * circuit.and_count and counters.ots == 3 * 512
    ra, rb, _ = two_party(
        circuit, {"in1": [iv]}, {"in0": [block]}, {"out0": "evaluator"}, alice_garbles=False
    )
    assert value_to_hex(ra["out0"][0], 256) == ABC_DIGEST
    assert rb == {}


@st.composite
def random_circuits(draw) -> tuple[Circuit, int]:
    n_in = draw(st.integers(1, 6))
    n_gates = draw(st.integers(1, 40))
    ops, in0, in1, out = [], [], [], []
    for g in range(n_gates):
        wire_count = n_in + g
        op = draw(st.sampled_from([Op.XOR, Op.AND, Op.INV]))
        a = draw(st.integers(0, wire_count - 1))
        b = draw(st.integers(0, wire_count - 1)) if op != Op.INV else -1
        ops.append(op), in0.append(a), in1.append(b), out.append(wire_count)
    n_wires = n_in + n_gates
    split = draw(st.integers(0, n_in))
    outs = draw(st.lists(st.integers(0, n_wires - 1), min_size=1, max_size=6))
    inputs = [Bundle("g", tuple(range(split))), Bundle("e", tuple(range(split, n_in)))]
    return Circuit(n_wires, ops, in0, in1, out, inputs, [Bundle("o", tuple(outs))]), split


@settings(max_examples=30, deadline=None)
@given(random_circuits(), st.integers(1, 5), st.randoms(use_true_random=False))
def test_random_circuits_garbled_match_plaintext(case, k: int, rng: random.Random) -> None:
    circuit, split = case
    n_in = sum(b.width for b in circuit.inputs)
    bits = np.array([[rng.getrandbits(1) for _ in range(k)] for _ in range(n_in)], dtype=np.uint8)
    g_vals = [sum(int(bits[i, j]) << i for i in range(split)) for j in range(k)]
    e_vals = [sum(int(bits[split + i, j]) << i for i in range(n_in - split)) for j in range(k)]
    expected = evaluate(circuit, {"g": g_vals, "e": e_vals})["o"]
    # the garbling core directly
    sched = schedule_of(circuit)
    delta = random_delta()
    zero = random_labels((n_in, k))
    tables, out_zero = garble(sched, zero, delta, 0, FixedKeyHash(YAO_PROTOCOL, b""))
    active = zero ^ (np.negative(bits.astype(np.uint64))[..., None] & delta)
    out_labels = evaluate_garbled(sched, active, tables, 0, FixedKeyHash(YAO_PROTOCOL, b""))
    out = permute_bits(out_labels) ^ permute_bits(out_zero)
    assert (out == values_to_bits(expected, circuit.output("o").width)).all()
    # and the two-party protocol, both directions
    ra, rb, _ = two_party(circuit, {"g": g_vals}, {"e": e_vals}, {"o": "garbler"})
    assert list(ra["o"]) == list(expected) and rb == {}


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 12), st.integers(1, 14), st.integers(0, 2**40))
def test_instance_blocks_change_nothing(k: int, per_block: int, base: int) -> None:
    """Garbling and evaluating in instance blocks (for cache, ``garble.instance_blocks``)
    gives the tables, output labels and evaluation of one pass over the batch."""
    sched = schedule_of(sha256_circuit())
    rng = np.random.default_rng(per_block)
    zero = rng.integers(
        0, 2**64, size=(len(sched.input_slots), k, 2), dtype=np.uint64, endpoint=False
    )
    delta = random_delta()
    whole = garble(sched, zero, delta, base, FixedKeyHash(YAO_PROTOCOL, b"s"), block_instances=k)
    blocked = garble(
        sched, zero, delta, base, FixedKeyHash(YAO_PROTOCOL, b"s"), block_instances=per_block
    )
    assert all((w == b).all() for w, b in zip(whole, blocked, strict=True))
    one = evaluate_garbled(
        sched, zero, whole[0], base, FixedKeyHash(YAO_PROTOCOL, b"s"), block_instances=k
    )
    many = evaluate_garbled(
        sched, zero, whole[0], base, FixedKeyHash(YAO_PROTOCOL, b"s"), block_instances=per_block
    )
    assert (one == many).all()


def test_half_gate_tables_use_the_documented_tweaks() -> None:
    """AND gate g of instance j: T_G = H(A0, t) ^ H(A1, t) ^ pb R and T_E = H(B0, t + 1) ^
    H(B1, t + 1) ^ A0 with t = base + 2 (g K + j) (ZRE15 Sec. 3), whatever the blocks."""
    b = B.CircuitBuilder()
    x, y = b.input("x", 2), b.input("y", 2)
    b.output("z", [b.and_(x[0], y[0]), b.and_(x[1], y[1])])
    circuit = b.build()
    sched, k, base = schedule_of(circuit), 7, 1000
    rng = np.random.default_rng(1)
    zero = rng.integers(0, 2**64, size=(4, k, 2), dtype=np.uint64, endpoint=False)
    delta = random_delta()
    tables, _ = garble(
        sched, zero, delta, base, FixedKeyHash(YAO_PROTOCOL, b"s"), block_instances=3
    )
    h = FixedKeyHash(YAO_PROTOCOL, b"s")
    (step,) = [s for s in sched.steps if s.is_and]
    input_of_slot = {int(slot): bit for bit, slot in enumerate(sched.input_slots)}
    for g in range(2):
        a0, b0 = zero[input_of_slot[int(step.a[g])]], zero[input_of_slot[int(step.b[g])]]
        t = np.uint64(base) + 2 * (np.uint64(g) * np.uint64(k) + np.arange(k, dtype=np.uint64))
        pb = np.negative(b0[:, :1] & np.uint64(1))
        t_gen = h.hash(a0, t) ^ h.hash(a0 ^ delta, t) ^ (pb & delta)
        t_eval = h.hash(b0, t + np.uint64(1)) ^ h.hash(b0 ^ delta, t + np.uint64(1)) ^ a0
        assert (tables[0, g] == t_gen).all() and (tables[1, g] == t_eval).all()


def test_output_modes_shares_and_swapped_roles() -> None:
    b = B.CircuitBuilder()
    x, y = b.input("x", 64), b.input("y", 64)
    b.output("sum", B.add(b, x, y))
    b.output("lt", [B.less_than(b, x, y)])
    b.output("diff", B.sub(b, x, y))
    b.output("eq", [B.equal(b, x, y)])
    circuit = b.build()
    rng = np.random.default_rng(3)
    xs = rng.integers(0, 2**64 - 1, size=50, dtype=np.uint64, endpoint=True)
    ys = rng.integers(0, 2**64 - 1, size=50, dtype=np.uint64, endpoint=True)
    ys[:5] = xs[:5]
    modes = {"sum": "shares", "lt": "garbler", "diff": "evaluator", "eq": "both"}
    for alice_garbles in (True, False):
        ra, rb, _ = two_party(circuit, {"x": xs}, {"y": ys}, modes, alice_garbles=alice_garbles)
        g, e = (ra, rb) if alice_garbles else (rb, ra)
        assert set(g) == {"sum", "lt", "eq"} and set(e) == {"sum", "diff", "eq"}
        assert ((g["sum"] + e["sum"]) == xs + ys).all()  # uint64 wraps mod 2^64
        assert (g["lt"] == (xs < ys)).all()
        assert (e["diff"] == xs - ys).all()
        assert (g["eq"] == e["eq"]).all() and (g["eq"] == (xs == ys)).all()
        assert g["sum"].dtype == np.uint64


def test_wide_values_cross_as_python_ints_and_shares_are_mod_2l() -> None:
    width = 100
    b = B.CircuitBuilder()
    x, y = b.input("x", width), b.input("y", width)
    index, best = B.argmax_tolerant(b, [x, y], tolerance=5)
    b.output("index", index)
    b.output("max", best)
    circuit = b.build()
    xs = [(1 << 99) + 3, 7, 0, (1 << 100) - 1]
    ys = [(1 << 99) + 6, 7, 1, 5]
    ra, rb, _ = two_party(circuit, {"x": xs}, {"y": ys}, {"index": "both", "max": "shares"})
    assert list(ra["index"]) == list(rb["index"]) == [0, 0, 0, 0]
    assert ra["max"].dtype == object
    total = [(int(a) + int(c)) % (1 << width) for a, c in zip(ra["max"], rb["max"], strict=True)]
    assert total == [max(a, c) for a, c in zip(xs, ys, strict=True)]


def test_repeated_runs_on_one_session_and_counters() -> None:
    b = B.CircuitBuilder()
    x, y = b.input("x", 8), b.input("y", 8)
    b.output("p", B.fixed_multiply(b, x, y, 0))
    circuit = b.build()

    def alice(ch):
        party = YaoParty(ch)
        first = party.run(circuit, garbler=True, inputs={"x": [3, 4]}, outputs={"p": "garbler"})
        second = party.run(circuit, garbler=False, inputs={"x": [5]}, outputs={"p": "evaluator"})
        return first, second, party.counters

    def bob(ch):
        party = YaoParty(ch)
        party.run(circuit, garbler=False, inputs={"y": [5, 6]}, outputs={"p": "garbler"})
        party.run(circuit, garbler=True, inputs={"y": [7]}, outputs={"p": "evaluator"})
        return party.counters

    (first, second, counters), _ = run_two_party(alice, bob, timeout_s=60)
    assert list(first["p"]) == [15, 24] and list(second["p"]) == [35]
    assert counters.runs == 2 and counters.instances == 3
    assert counters.and_gates == 3 * schedule_of(circuit).n_and
    assert counters.ots == 2 * 8 + 1 * 8


def test_disagreeing_parties_get_a_protocol_error() -> None:
    b = B.CircuitBuilder()
    x, y = b.input("x", 8), b.input("y", 8)
    b.output("s", B.add(b, x, y))
    circuit = b.build()
    pair = memory_channel_pair(timeout_s=5)

    def alice(ch):
        return YaoParty(ch).run(circuit, garbler=True, inputs={"x": [1]}, outputs={"s": "both"})

    def bob(ch):
        return YaoParty(ch).run(
            circuit, garbler=False, inputs={"y": [2]}, outputs={"s": "evaluator"}
        )

    with pytest.raises(ProtocolError, match="header mismatch"):
        run_two_party(alice, bob, pair=pair)


def test_evaluator_view_does_not_depend_on_garbler_inputs() -> None:
    """Same message tags and sizes, and balanced colour bits of the garbler's input labels
    (which the evaluator derives from the run's seed: none is sent), whatever the garbler holds."""
    b = B.CircuitBuilder()
    x, y = b.input("x", 32), b.input("y", 32)
    b.output("lt", [B.less_than(b, x, y)])
    b.output("sum", B.add(b, x, y))
    circuit = b.build()
    k = 400
    ys = list(range(k))
    views = []
    for garbler_value in (0, 2**32 - 1):
        pair = memory_channel_pair(timeout_s=30, keep_transcript=True)
        _, evaluator_out = run_two_party(
            lambda ch, v=garbler_value: YaoParty(ch).run(
                circuit,
                garbler=True,
                inputs={"x": [v] * k},
                outputs={"lt": "garbler", "sum": "shares"},
            ),
            lambda ch: YaoParty(ch).run(
                circuit, garbler=False, inputs={"y": ys}, outputs={"lt": "garbler", "sum": "shares"}
            ),
            pair=pair,
        )
        transcript = pair[1].transcript
        assert "yao.garbler_labels" not in dict(transcript)
        key = yao.label_key(pair[1].session, dict(transcript)["yao.label_seed"], 0)
        labels = yao.seeded_labels(key, 64, k)[..., 0]  # x's 32 wires and the sum's mask
        views.append(
            ([(tag, len(p)) for tag, p in transcript], float(np.mean(labels & np.uint64(1))))
        )
        # the evaluator's share of a known sum is spread out, not the sum itself
        sums = np.array([(garbler_value + v) % 2**32 for v in ys], dtype=np.uint64)
        assert np.count_nonzero(evaluator_out["sum"] == sums) < 3
        assert len(np.unique(evaluator_out["sum"])) > k - 3
    (shape0, lsb0), (shape1, lsb1) = views
    assert shape0 == shape1
    assert 0.4 < lsb0 < 0.6 and 0.4 < lsb1 < 0.6


def test_large_batches_are_sent_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    from ppbn.protocols import ot, yao

    monkeypatch.setattr(yao, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(ot, "CHUNK_OTS", 256)
    b = B.CircuitBuilder()
    x, y = b.input("x", 16), b.input("y", 16)
    b.output("max", B.maximum(b, x, y))
    circuit = b.build()
    k = 300
    rng = np.random.default_rng(5)
    xs, ys = rng.integers(0, 2**16, size=k), rng.integers(0, 2**16, size=k)
    pair = memory_channel_pair(timeout_s=30, keep_transcript=True)
    _, got = run_two_party(
        lambda ch: YaoParty(ch).run(
            circuit, garbler=True, inputs={"x": xs}, outputs={"max": "evaluator"}
        ),
        lambda ch: YaoParty(ch).run(
            circuit, garbler=False, inputs={"y": ys}, outputs={"max": "evaluator"}
        ),
        pair=pair,
    )
    assert (got["max"] == np.maximum(xs, ys)).all()
    tags = [tag for tag, _ in pair[1].transcript]
    assert tags.count("yao.tables") > 1 and "yao.garbler_labels" not in tags  # labels from the seed
    assert tags.count("ot.ext.y") == -(-16 * k // 256)


# -- bit shares ---------------------------------------------------------------------------
@pytest.mark.parametrize("garbler_holds_g", [True, False])
def test_bit_shares_xor_to_the_value_and_cost_no_message(garbler_holds_g: bool) -> None:
    """Each party's share of a ``bit-shares`` output is its permute or colour bits: they
    XOR to the value, no decoding bits are sent for it, and the evaluator's are uniform
    whatever the value (here all zeros against all ones)."""
    width, n = 9, 3000
    circuit = _xor_circuit(width)
    modes = {"v": Reveal.BIT_SHARES}
    seen = []
    for value in (0, (1 << width) - 1):
        g = [random.getrandbits(width) for _ in range(n)]
        e = [value ^ x for x in g]
        pair = memory_channel_pair(keep_transcript=True)
        garbler_side, evaluator_side = (
            ({"g": g}, {"e": e}) if garbler_holds_g else ({"e": e}, {"g": g})
        )
        ra, rb = run_two_party(
            lambda ch, inputs=garbler_side: YaoParty(ch).run(
                circuit, garbler=True, inputs=inputs, outputs=modes
            ),
            lambda ch, inputs=evaluator_side: YaoParty(ch).run(
                circuit, garbler=False, inputs=inputs, outputs=modes
            ),
            pair=pair,
        )
        assert [int(a) ^ int(b) for a, b in zip(ra["v"], rb["v"], strict=True)] == [value] * n
        assert not [t for t, _ in pair[0].transcript + pair[1].transcript if t == "yao.decode"]
        seen.append(values_to_bits(rb["v"], width).ravel())
    for bits in seen:
        assert stats.binomtest(int(bits.sum()), bits.size).pvalue > 1e-4
    assert stats.chi2_contingency([np.bincount(s, minlength=2) for s in seen]).pvalue > 1e-4


# -- integer shares -----------------------------------------------------------------------
def _xor_circuit(width: int) -> Circuit:
    """v = g ^ e: the garbler and the evaluator each hold half of the output's bits."""
    b = B.CircuitBuilder()
    g, e = b.input("g", width), b.input("e", width)
    b.output("v", [b.xor(x, y) for x, y in zip(g, e, strict=True)])
    return b.build()


def _integer_shares(
    width: int, values: list[int], alice_garbles: bool = True, pair=None, seed: bytes | None = None
):
    """Shares of the signed ``width``-bit values (garbler's, evaluator's), each party
    holding random XOR halves of them; ``seed`` fixes the garbler's randomness."""
    rng = random.Random(width)
    g = [rng.getrandbits(width) for _ in values]
    e = [(v % (1 << width)) ^ x for v, x in zip(values, g, strict=True)]
    circuit = _xor_circuit(width)
    modes = {"v": Reveal.INTEGER_SHARES}
    if pair is None and seed is None:
        ra, rb, _ = two_party(circuit, {"g": g}, {"e": e}, modes, alice_garbles=alice_garbles)
        return (ra, rb) if alice_garbles else (rb, ra)
    seeds = TaskSeeds(seed) if seed is not None else None
    return run_two_party(
        lambda ch: YaoParty(ch, seeds=seeds).run(
            circuit, garbler=True, inputs={"g": g}, outputs=modes
        ),
        lambda ch: YaoParty(ch).run(circuit, garbler=False, inputs={"e": e}, outputs=modes),
        pair=pair,
    )


@pytest.mark.parametrize("width", [1, 2, 17, 63, 64, 65, 100])
def test_integer_shares_reconstruct_the_edge_values(width: int) -> None:
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    values = [low, high, 0, -1 if width > 1 else 0, low + 1 if width > 1 else 0, high // 3]
    for alice_garbles in (True, False):
        g, e = _integer_shares(width, values, alice_garbles)
        assert g["v"].shape == e["v"].shape == (len(values), 2) and g["v"].dtype == np.uint64
        assert ring.to_signed(ring.add(g["v"], e["v"])) == values
        # the garbler's share is -r, r in [0, 2^(b + STAT_BITS)); the evaluator's y - 2^(b-1)
        masks = ring.to_ints(ring.neg(g["v"]))
        assert all(0 <= r < 1 << (width + STAT_BITS) for r in masks)
        opened = ring.to_ints(ring.add(e["v"], ring.constant(1 << (width - 1))))
        assert all(0 <= y < 1 << (width + STAT_BITS + 1) for y in opened)


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_integer_shares_reconstruct_any_value(data: st.DataObject) -> None:
    width = data.draw(st.integers(1, 120))
    values = data.draw(
        st.lists(st.integers(-(1 << (width - 1)), (1 << (width - 1)) - 1), min_size=1, max_size=8)
    )
    g, e = _integer_shares(width, values)
    assert ring.to_signed(ring.add(g["v"], e["v"])) == values


def test_integer_shares_cost_follows_the_width_not_the_ring() -> None:
    """b + STAT_BITS AND gates per instance, against 128 for ``shares`` of the same value
    widened to the ring, and no garbler labels sent (its input's or the mask's): one seed
    per run."""
    width, k = 21, 10
    pair = memory_channel_pair(timeout_s=30, keep_transcript=True)
    _integer_shares(width, list(range(k)), pair=pair)
    assert not [t for t, _ in pair[1].transcript if t == "yao.garbler_labels"]
    assert [len(p) for t, p in pair[1].transcript if t == "yao.label_seed"] == [
        yao.LABEL_SEED_BYTES
    ]
    circuit = _xor_circuit(width)
    full = yao.garbled_circuit(circuit, {"v": Reveal.INTEGER_SHARES})
    assert schedule_of(full).n_and - schedule_of(circuit).n_and == width + STAT_BITS
    assert full.output("v").width == width + STAT_BITS + 1


def _evaluator_view_p(width: int, n: int, monkeypatch: pytest.MonkeyPatch, stat_bits: int) -> float:
    """KS two-sample p-value of the evaluator's y = v + 2^(b-1) + r for the most negative
    and the most positive v (with masks of ``stat_bits`` extra bits)."""
    # each run builds its circuit anew, so the garbled circuit (cached per circuit object)
    # is built with masks of the patched width
    monkeypatch.setattr(yao, "STAT_BITS", stat_bits)
    seen = []
    for i, value in enumerate((-(1 << (width - 1)), (1 << (width - 1)) - 1)):
        _, e = _integer_shares(width, [value] * n, seed=bytes([i + 1]) * 32)
        y = ring.add(e["v"], ring.constant(1 << (width - 1)))
        seen.append(ring.to_float(y, width + stat_bits))  # y / 2^(b + stat_bits), in [0, 2)
    low, high = seen
    assert stats.kstest(low, "uniform").pvalue > 1e-4  # v' = 0: y is the mask itself
    return float(stats.ks_2samp(low, high).pvalue)


def test_integer_shares_evaluator_view_does_not_depend_on_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The evaluator's y for v = -2^(b-1) and for v = 2^(b-1) - 1: the same distribution
    (statistical distance below 2^-STAT_BITS); with a 3-bit mask headroom the same test
    tells them apart (its power)."""
    assert _evaluator_view_p(16, 3000, monkeypatch, STAT_BITS) > 1e-4
    assert _evaluator_view_p(16, 3000, monkeypatch, 3) < 1e-6


def test_integer_shares_and_shares_are_different_runs() -> None:
    circuit = _xor_circuit(8)
    with pytest.raises(ProtocolError, match="header mismatch"):
        run_two_party(
            lambda ch: YaoParty(ch).run(
                circuit, garbler=True, inputs={"g": [1]}, outputs={"v": "integer-shares"}
            ),
            lambda ch: YaoParty(ch).run(
                circuit, garbler=False, inputs={"e": [2]}, outputs={"v": "shares"}
            ),
            pair=memory_channel_pair(timeout_s=5),
        )


# -- mask labels from a seed ----------------------------------------------------------------
def _masked_circuit(width: int) -> Circuit:
    """g + e (to share mod 2^b), g ^ e (signed, to share as integers) and g < e (garbler)."""
    b = B.CircuitBuilder()
    g, e = b.input("g", width), b.input("e", width)
    b.output("sum", B.add(b, g, e))
    b.output("v", [b.xor(x, y) for x, y in zip(g, e, strict=True)])
    b.output("lt", [B.less_than(b, g, e)])
    return b.build()


MASKED_MODES = {"sum": Reveal.SHARES, "v": Reveal.INTEGER_SHARES, "lt": Reveal.GARBLER}
PLAIN_MODES = {"sum": Reveal.EVALUATOR, "v": Reveal.EVALUATOR, "lt": Reveal.GARBLER}


def _mask_rows(circuit: Circuit, modes) -> tuple[Circuit, np.ndarray]:
    """The extended circuit of ``modes`` and its mask input rows."""
    full = yao.garbled_circuit(circuit, modes)
    rows, pos = [], 0
    for bundle in full.inputs:
        if bundle.name.startswith(yao.MASK_PREFIX):
            rows += range(pos, pos + bundle.width)
        pos += bundle.width
    return full, np.array(rows, dtype=np.intp)


def _rows_of(circuit: Circuit, name: str) -> np.ndarray:
    """The input rows of one bundle."""
    pos = 0
    for bundle in circuit.inputs:
        if bundle.name == name:
            return np.arange(pos, pos + bundle.width)
        pos += bundle.width
    raise KeyError(name)


def _masked_run(width: int, gs, es, modes, alice_garbles: bool = True, seed: bytes | None = None):
    """(garbler result, evaluator result, the evaluator's transcript)."""
    circuit = _masked_circuit(width)
    pair = memory_channel_pair(timeout_s=60, keep_transcript=True)
    seeds = TaskSeeds(seed) if seed is not None else None

    def alice(ch):
        party = YaoParty(ch, seeds=seeds)
        mine = {"g": gs} if alice_garbles else {"e": es}
        return party.run(circuit, garbler=alice_garbles, inputs=mine, outputs=modes)

    def bob(ch):
        party = YaoParty(ch)
        mine = {"e": es} if alice_garbles else {"g": gs}
        return party.run(circuit, garbler=not alice_garbles, inputs=mine, outputs=modes)

    ra, rb = run_two_party(alice, bob, pair=pair)
    g, e = (ra, rb) if alice_garbles else (rb, ra)
    return g, e, pair[1 if alice_garbles else 0].transcript


def _check_masked_outputs(width: int, gs, es, g, e) -> None:
    modulus = 1 << width
    assert [(int(a) + int(c)) % modulus for a, c in zip(g["sum"], e["sum"], strict=True)] == [
        (x + y) % modulus for x, y in zip(gs, es, strict=True)
    ]
    signed = [
        ((x ^ y) ^ (1 << (width - 1))) - (1 << (width - 1)) for x, y in zip(gs, es, strict=True)
    ]
    assert ring.to_signed(ring.add(g["v"], e["v"])) == signed
    assert list(g["lt"]) == [int(x < y) for x, y in zip(gs, es, strict=True)]


@pytest.mark.parametrize("alice_garbles", [True, False])
def test_mask_labels_are_not_sent_and_outputs_stay_right_over_chunks(
    alice_garbles: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No garbler input label is sent, mask or not: one 16-byte seed per run replaces
    them, with or without shared outputs, and outputs are right for many instances over
    many chunks."""
    width, k = 12, 700
    circuit = _masked_circuit(width)
    full, mask_rows = _mask_rows(circuit, MASKED_MODES)
    assert mask_rows.size == width + yao.integer_share_width(width)
    monkeypatch.setattr(
        yao, "CHUNK_BYTES", 32 * schedule_of(full).n_and * 64
    )  # chunks of 64 instances
    rng = random.Random(7)
    gs = [rng.getrandbits(width) for _ in range(k)]
    es = [rng.getrandbits(width) for _ in range(k)]
    gs[:4], es[:4] = (
        [0, (1 << width) - 1, 0, (1 << width) - 1],
        [0, (1 << width) - 1, (1 << width) - 1, 0],
    )
    g, e, transcript = _masked_run(width, gs, es, MASKED_MODES, alice_garbles)
    _check_masked_outputs(width, gs, es, g, e)
    tags = [t for t, _ in transcript]
    assert tags.count("yao.tables") == -(-k // 64) and "yao.garbler_labels" not in tags
    assert [len(p) for t, p in transcript if t == "yao.label_seed"] == [yao.LABEL_SEED_BYTES]
    _, _, plain = _masked_run(width, gs, es, PLAIN_MODES, alice_garbles)
    assert [len(p) for t, p in plain if t == "yao.label_seed"] == [yao.LABEL_SEED_BYTES]
    assert "yao.garbler_labels" not in [t for t, _ in plain]


@settings(max_examples=12, deadline=None)
@given(
    width=st.integers(1, 70),
    k=st.integers(1, 40),
    per_chunk=st.integers(1, 9),
    alice_garbles=st.booleans(),
    data=st.data(),
)
def test_masked_outputs_are_right_for_any_chunking(
    width, k, per_chunk, alice_garbles, data
) -> None:
    gs = data.draw(st.lists(st.integers(0, (1 << width) - 1), min_size=k, max_size=k))
    es = data.draw(st.lists(st.integers(0, (1 << width) - 1), min_size=k, max_size=k))
    full, _ = _mask_rows(_masked_circuit(width), MASKED_MODES)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(yao, "CHUNK_BYTES", 32 * schedule_of(full).n_and * per_chunk)
        g, e, transcript = _masked_run(width, gs, es, MASKED_MODES, alice_garbles)
    _check_masked_outputs(width, gs, es, g, e)
    assert [t for t, _ in transcript].count("yao.tables") == -(-k // per_chunk)


def _evaluator_mask_labels(monkeypatch: pytest.MonkeyPatch, flip: bool, k: int = 300):
    """The evaluator's active labels of the mask wires (as passed to ``evaluate_chunk``),
    the masks r (bits, rows x k) and the transcript, for fixed garbler seeds; ``flip``
    inverts every mask bit the garbler draws (the rest of its randomness unchanged)."""
    width = 10
    circuit = _masked_circuit(width)
    full, mask_rows = _mask_rows(circuit, MASKED_MODES)
    monkeypatch.setattr(yao, "CHUNK_BYTES", 32 * schedule_of(full).n_and * 100)
    seen: list[np.ndarray] = []
    drawn: list[np.ndarray] = []
    evaluate, random_values = yao.evaluate_chunk, yao.random_values

    def recording_evaluate(schedule, session, tweak, labels, tables):
        seen.append(labels[mask_rows].copy())
        return evaluate(schedule, session, tweak, labels, tables)

    def masks(stream, bits, count):
        values = random_values(stream, bits, count)
        if flip:
            values = as_values([int(v) ^ ((1 << bits) - 1) for v in values], bits)
        drawn.append(values_to_bits(values, bits))
        return values

    monkeypatch.setattr(yao, "evaluate_chunk", recording_evaluate)
    monkeypatch.setattr(yao, "random_values", masks)
    rng = random.Random(11)
    gs = [rng.getrandbits(width) for _ in range(k)]
    es = [rng.getrandbits(width) for _ in range(k)]
    g, e, transcript = _masked_run(width, gs, es, MASKED_MODES, seed=b"\x05" * 32)
    _check_masked_outputs(width, gs, es, g, e)
    return np.concatenate(seen, axis=1), np.concatenate(drawn, axis=0), transcript


def test_evaluator_mask_labels_do_not_depend_on_the_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the garbler's randomness fixed, inverting every mask bit leaves the evaluator's
    active mask labels and the garbler's labels and seed byte for byte the same (with sent
    labels each would differ by R); they are the ones the public seed gives."""
    labels, r, transcript = _evaluator_mask_labels(monkeypatch, flip=False)
    labels_flipped, r_flipped, transcript_flipped = _evaluator_mask_labels(monkeypatch, flip=True)
    assert (r ^ r_flipped).all()
    np.testing.assert_array_equal(labels, labels_flipped)
    assert [p for t, p in transcript if t == "yao.label_seed"] == [
        p for t, p in transcript_flipped if t == "yao.label_seed"
    ]
    seed = dict(transcript)["yao.label_seed"]
    full, mask_rows = _mask_rows(_masked_circuit(10), MASKED_MODES)
    seeded = np.concatenate(
        [_rows_of(full, b.name) for b in full.inputs if b.name != "e"]
    )  # g and the masks
    at = np.searchsorted(seeded, mask_rows)
    chunks = [
        yao.seeded_labels(yao.label_key(b"", seed, start), seeded.size, 100)[at]
        for start in (0, 100, 200)
    ]
    np.testing.assert_array_equal(labels, np.concatenate(chunks, axis=1))


def test_evaluator_mask_labels_are_balanced_and_independent_of_r(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chi-square tests over all mask wires and instances: the permute bit (lsb) and two
    other bits of the active mask label are balanced and independent of the mask bit r."""
    labels, r, _ = _evaluator_mask_labels(monkeypatch, flip=False, k=1000)
    assert r.shape == labels.shape[:2]  # (mask wires, instances)
    for word, bit in ((0, 0), (0, 37), (1, 63)):
        label_bits = ((labels[..., word] >> np.uint64(bit)) & np.uint64(1)).astype(np.uint8).ravel()
        table = np.zeros((2, 2))
        np.add.at(table, (label_bits, r.ravel()), 1)
        assert stats.chi2_contingency(table).pvalue > 1e-4
        assert stats.binomtest(int(label_bits.sum()), label_bits.size).pvalue > 1e-4


def test_mask_label_keys_are_separated() -> None:
    """A key per session, seed and chunk, framed, and not the fixed garbling key."""
    seed = bytes(range(16))
    base = yao.label_key(b"job-1", seed, 0)
    others = {
        yao.label_key(b"job-2", seed, 0),
        yao.label_key(b"job-1", bytes(16), 0),
        yao.label_key(b"job-1", seed, 64),
        yao.label_key(b"job-1" + seed[:1], seed[1:], 0),
    }
    assert len(others) == 4 and base not in others
    assert base[:16] != fixed_key(YAO_PROTOCOL, b"job-1")
