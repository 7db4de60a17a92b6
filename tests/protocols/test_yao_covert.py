"""Covert Yao (``ppbn.protocols.yao_covert``): honest covert runs give what semi-honest ones
give, in every output mode, over several runs on one party, many chunks and the pool; a
garbler that garbles another circuit, or sends a wrong OT label, in one of the two copies is
caught in about half the runs and in every run when it cheats in both; the evaluator that
catches it has sent nothing after its choice of copy. A garbler that corrupts one OT message
of one evaluator input bit learns the bit without the probe-resistant input encoding, and
nothing with it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from math import comb

import numpy as np
import pytest

from ppbn.circuits import builders as B
from ppbn.circuits.evaluate import evaluate
from ppbn.circuits.ir import Circuit, Op
from ppbn.circuits.schedule import Schedule, schedule_of
from ppbn.protocols import ring, yao, yao_covert
from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.constants import COVERT, MALICIOUS, SEMI_HONEST
from ppbn.protocols.executor import LocalExecutor
from ppbn.protocols.probe_encoding import encoded_circuit, probe_encoding
from ppbn.protocols.security import CheatingDetected
from ppbn.protocols.seeds import TaskSeeds
from ppbn.protocols.yao import Reveal, YaoParty

ALICE_SEED = bytes(range(32))
BOB_SEED = bytes(range(32, 64))
WIDTH = 12
MODES = {
    "sum": Reveal.SHARES,
    "diff": Reveal.INTEGER_SHARES,
    "and": Reveal.BIT_SHARES,
    "lt": Reveal.GARBLER,
    "xor": Reveal.EVALUATOR,
    "max": Reveal.BOTH,
}
TRIALS = 40
LOW, HIGH = 8, 32  # caught in this many of TRIALS runs when one copy of two is bad


def outside_probability(trials: int, low: int, high: int) -> float:
    """P[Bin(trials, 1/2) outside [low, high]]: how often an honest coin fails the bound."""
    return sum(comb(trials, i) for i in range(trials + 1) if not low <= i <= high) / 2**trials


def modes_circuit() -> Circuit:
    b = B.CircuitBuilder()
    x, y = b.input("x", WIDTH), b.input("y", WIDTH)
    b.output("sum", B.add(b, x, y))
    b.output("diff", B.sub(b, x, y))  # a signed WIDTH-bit value for integer-shares
    b.output("and", [b.and_(p, q) for p, q in zip(x, y, strict=True)])
    b.output("lt", [B.less_than(b, x, y)])
    b.output("xor", [b.xor(p, q) for p, q in zip(x, y, strict=True)])
    b.output("max", B.maximum(b, x, y))
    return b.build()


def opened_values(garbler: dict, evaluator: dict) -> dict[str, list[int]]:
    """Each output's value from the two views (shares added, bit shares XORed)."""
    mask = (1 << WIDTH) - 1
    assert set(garbler) == {"sum", "diff", "and", "lt", "max"}
    assert set(evaluator) == {"sum", "diff", "and", "xor", "max"}
    assert list(garbler["max"]) == list(evaluator["max"])
    signed = ring.to_signed(ring.add(garbler["diff"], evaluator["diff"]))
    return {
        "sum": [int(g + e) & mask for g, e in zip(garbler["sum"], evaluator["sum"], strict=True)],
        "diff": [v & mask for v in signed],
        "and": [int(g ^ e) for g, e in zip(garbler["and"], evaluator["and"], strict=True)],
        "lt": [int(v) for v in garbler["lt"]],
        "xor": [int(v) for v in evaluator["xor"]],
        "max": [int(v) for v in garbler["max"]],
    }


def plain_values(circuit: Circuit, xs: np.ndarray, ys: np.ndarray) -> dict[str, list[int]]:
    return {n: [int(v) for v in vs] for n, vs in evaluate(circuit, {"x": xs, "y": ys}).items()}


def three_runs(
    security: str, *, executor: LocalExecutor | None = None
) -> tuple[list[dict[str, list[int]]], list]:
    """Three runs on one pair of parties (alice garbles two, bob the third) with fixed seeds:
    the opened outputs of each run and both transcripts."""
    circuit = modes_circuit()
    rng = np.random.default_rng(5)
    inputs = [rng.integers(0, 2**WIDTH, size=(2, k), dtype=np.uint64) for k in (70, 70, 9)]

    def side(seed: bytes, name: str) -> Callable:
        def run(ch):
            party = YaoParty(
                ch,
                seeds=TaskSeeds(seed),
                security=security,
                executor=None if executor is None else (lambda: executor),
                gc_inline_below=0,
            )
            views = []
            for index, (xs, ys) in enumerate(inputs):
                garbles = (name == "alice") == (index < 2)
                mine = {"x": xs} if garbles else {"y": ys}
                views.append(party.run(circuit, garbler=garbles, inputs=mine, outputs=MODES))
            return views, party.counters

        return run

    pair = memory_channel_pair(timeout_s=120, keep_transcript=True)
    (alice, counters), (bob, _) = run_two_party(
        side(ALICE_SEED, "alice"), side(BOB_SEED, "bob"), pair=pair, timeout_s=120
    )
    opened = []
    for index, (xs, ys) in enumerate(inputs):
        g, e = (alice[index], bob[index]) if index < 2 else (bob[index], alice[index])
        opened.append(opened_values(g, e))
        assert opened[-1] == plain_values(circuit, xs, ys)
    full = schedule_of(yao.garbled_circuit(circuit, MODES))
    assert counters.runs == 3 and counters.and_gates == full.n_and * 149
    assert counters.ots == encoded_width(security) * 149
    return opened, [list(end.transcript) for end in pair]


def encoded_width(security: str) -> int:
    """OTs per instance for the WIDTH evaluator bits: one per encoded bit for every copy."""
    if security == SEMI_HONEST:
        return WIDTH
    return probe_encoding(WIDTH, yao_covert.PROBE_RESISTANCE).width


@pytest.fixture(scope="module")
def pool() -> LocalExecutor:
    with LocalExecutor(2) as executor:
        yield executor


def test_honest_covert_runs_open_to_the_semi_honest_outputs(
    pool: LocalExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every output mode, three runs on one party (either party garbling), 70 instances in
    chunks of at most 8, inline and on the pool: the same outputs as at the semi-honest
    level, and the same bytes inline and on the pool."""
    n_and = schedule_of(yao.garbled_circuit(modes_circuit(), MODES)).n_and
    monkeypatch.setattr(yao, "CHUNK_BYTES", 32 * n_and * 8)
    semi_honest, _ = three_runs(SEMI_HONEST)
    covert, inline_log = three_runs(COVERT)
    pooled, pool_log = three_runs(COVERT, executor=pool)
    assert covert == semi_honest == pooled
    assert pool_log == inline_log
    tags = Counter(tag for tag, _ in inline_log[1])  # what bob received
    assert tags["yao.covert.commit"] == 2 and tags["yao.covert.seeds"] == 2
    assert tags["ot.ext.challenge"] >= 2  # bob's OTs as evaluator were checked
    assert tags["yao.tables"] >= 2 * 9  # 70 instances in chunks of 8, twice


def test_malicious_runs_the_covert_defence_and_a_level_mismatch_is_refused() -> None:
    circuit = modes_circuit()
    xs, ys = np.array([1, 4000], dtype=np.uint64), np.array([3, 5], dtype=np.uint64)

    def side(security: str, garbler: bool, mine: dict) -> Callable:
        return lambda ch: YaoParty(ch, security=security).run(
            circuit, garbler=garbler, inputs=mine, outputs=MODES
        )

    pair = memory_channel_pair(timeout_s=60, keep_transcript=True)
    g, e = run_two_party(
        side(MALICIOUS, True, {"x": xs}), side(MALICIOUS, False, {"y": ys}), pair=pair
    )
    assert opened_values(g, e) == plain_values(circuit, xs, ys)
    assert any(tag == "yao.covert.commit" for tag, _ in pair[1].transcript)
    with pytest.raises(ProtocolError, match="security level"):
        run_two_party(side(COVERT, True, {"x": xs}), side(SEMI_HONEST, False, {"y": ys}))


# -- a hostile garbler ------------------------------------------------------------------------
def zero_circuit() -> Circuit:
    """y = e AND (g AND NOT g): zero whatever either party holds, so its shares open to 0."""
    b = B.CircuitBuilder()
    g, e = b.input("g", WIDTH), b.input("e", WIDTH)
    b.output("y", [b.and_(ei, b.and_(gi, b.inv(gi))) for gi, ei in zip(g, e, strict=True)])
    return b.build()


def without_inverters(circuit: Circuit, bundle: str) -> Circuit:
    """The circuit with every inverter of ``bundle``'s bits bypassed. An inverter costs the
    evaluator nothing (it XORs the all-zero label of the constant one), so a garbler that
    garbles this circuit instead gives the evaluator tables it evaluates without a hitch:
    here y = e AND g, which is e when g is all ones."""
    wires = set(circuit.input(bundle).wires)
    ops, in0, in1, out = (a.tolist() for a in (circuit.ops, circuit.in0, circuit.in1, circuit.out))
    source = {o: a for op, a, o in zip(ops, in0, out, strict=True) if op == Op.INV and a in wires}
    return Circuit(
        circuit.n_wires,
        ops,
        [source.get(a, a) for a in in0],
        [source.get(a, a) for a in in1],
        out,
        circuit.inputs,
        circuit.outputs,
    )


ZERO = zero_circuit()
SHARES = {"y": Reveal.SHARES}
TO_GARBLER = {"y": Reveal.GARBLER}  # the evaluator answers with permute bits, or labels
ALL_ONES = np.full(5, 2**WIDTH - 1, dtype=np.uint64)


def hostile_schedule(outputs: dict[str, Reveal], s: int) -> Schedule:
    """The zero circuit without its inverters, its input e encoded as a covert run encodes it
    (``s`` = 1: not encoded, as at the semi-honest level)."""
    full = yao.garbled_circuit(ZERO, outputs)
    return schedule_of(without_inverters(encoded_circuit(full, ("e",), s), "g"))


def attacked_run(
    security: str, outputs: dict[str, Reveal] = SHARES, pair=None
) -> tuple[list[int], list[int]]:
    """One run of the zero circuit, the garbler holding g = all ones: the evaluator's input
    and what the garbler's output, or the shares, open to."""
    es = np.random.default_rng().integers(0, 2**WIDTH, size=len(ALL_ONES), dtype=np.uint64)

    def side(garbler: bool, mine: dict) -> Callable:
        return lambda ch: YaoParty(ch, security=security).run(
            ZERO, garbler=garbler, inputs=mine, outputs=outputs
        )

    g, e = run_two_party(
        side(True, {"g": ALL_ONES}), side(False, {"e": es}), pair=pair, timeout_s=60
    )
    opened = g["y"] if outputs == TO_GARBLER else (g["y"] + e["y"]) & np.uint64(2**WIDTH - 1)
    return [int(v) for v in es], [int(v) for v in opened]


def hostile_circuit_in(bad: set[int], outputs: dict[str, Reveal] = SHARES) -> Callable:
    """``garble_copies`` of a garbler that garbles the zero circuit without its inverters
    in the copies ``bad``."""
    hostile = hostile_schedule(outputs, yao_covert.PROBE_RESISTANCE)

    def garble_copies(run, seeds, executor):
        return [
            yao_covert.garble_copy(
                replace(run, schedule=hostile) if copy in bad else run, copy, seed, executor
            )
            for copy, seed in enumerate(seeds)
        ]

    return garble_copies


def corrupt_ot_label_in(bad: set[int]) -> Callable:
    """``ot_messages`` of a garbler that corrupts the labels of the copies ``bad`` in both
    messages of one OT, so the evaluator receives a wrong label there."""
    honest = yao_covert.ot_messages

    def ot_messages(run, copies):
        m0, m1 = honest(run, copies)
        for copy in bad:
            m0[3, copy] ^= np.uint64(1 << 20)
            m1[3, copy] ^= np.uint64(1 << 20)
        return m0, m1

    return ot_messages


def test_garbling_another_circuit_takes_the_evaluators_input_at_semi_honest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The attack is real: at the semi-honest level the shares of the zero circuit open to
    the evaluator's input once the garbler garbles the circuit without its inverters."""
    es, opened = attacked_run(SEMI_HONEST)
    assert opened == [0] * len(es)
    honest, hostile = yao.garble_chunk, hostile_schedule(SHARES, 1)
    monkeypatch.setattr(yao, "garble_chunk", lambda _, *rest: honest(hostile, *rest))
    es, opened = attacked_run(SEMI_HONEST)
    assert opened == es


def caught_runs(trials: int) -> tuple[int, list[tuple[list[int], list[int]]]]:
    """How many of ``trials`` covert runs of the zero circuit ended in CheatingDetected, and
    the (input, opened) pairs of the others."""
    caught, passed = 0, []
    for _ in range(trials):
        try:
            passed.append(attacked_run(COVERT))
        except CheatingDetected as exc:
            assert exc.check in ("yao.circuit", "yao.ot_labels")
            assert exc.evidence["copy"] in (0, 1) and exc.evidence["run"] == 0
            assert exc.evidence["expected"] != exc.evidence["found"]
            caught += 1
    return caught, passed


def test_the_bound_cannot_fail_by_chance() -> None:
    assert outside_probability(TRIALS, LOW, HIGH) < 5e-5  # 4.2e-5


def test_another_circuit_in_one_copy_is_caught_about_half_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(yao_covert, "garble_copies", hostile_circuit_in({0}))
    caught, passed = caught_runs(TRIALS)
    assert LOW <= caught <= HIGH
    assert all(opened == es for es, opened in passed)  # not caught: the hostile copy ran


def test_another_circuit_in_both_copies_is_always_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yao_covert, "garble_copies", hostile_circuit_in({0, 1}))
    assert caught_runs(TRIALS) == (TRIALS, [])


def test_a_wrong_ot_label_in_one_copy_is_caught_about_half_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(yao_covert, "ot_messages", corrupt_ot_label_in({1}))
    caught, _ = caught_runs(TRIALS)
    assert LOW <= caught <= HIGH


def test_a_wrong_ot_label_in_both_copies_is_always_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yao_covert, "ot_messages", corrupt_ot_label_in({0, 1}))
    assert caught_runs(TRIALS) == (TRIALS, [])


def sent_by_evaluator(pair) -> Counter:
    """Messages the evaluator (bob) sent, by tag, as the garbler's end received them."""
    return Counter(tag for tag, _ in pair[0].transcript)


def junk_garbler_label(pair) -> None:
    """The garbler's end sends, for one input bit of copy e, a label that is neither of the
    wire's two labels (its digest was committed honestly)."""
    send = pair[0].send_array

    def send_array(tag: str, array: np.ndarray) -> None:
        if tag == "yao.covert.labels":
            array = array.copy()
            array[0, 0, 1] ^= np.uint64(1 << 9)
        send(tag, array)

    pair[0].send_array = send_array


ATTACKS = {
    "circuit": lambda mp, pair: mp.setattr(
        yao_covert, "garble_copies", hostile_circuit_in({0, 1}, TO_GARBLER)
    ),
    "ot_labels": lambda mp, pair: mp.setattr(
        yao_covert, "ot_messages", corrupt_ot_label_in({0, 1})
    ),
    "junk_label": lambda mp, pair: junk_garbler_label(pair),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_caught_evaluator_sends_nothing_after_its_choice(
    attack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The garbler learns the output, so an honest evaluator sends its output labels; a
    caught one has sent its OT messages and its choice of copy, nothing more. A junk
    label for a garbler input is caught in copy e, by the digest."""
    honest_pair = memory_channel_pair(timeout_s=60, keep_transcript=True)
    attacked_run(COVERT, TO_GARBLER, honest_pair)
    honest = sent_by_evaluator(honest_pair)
    assert honest[yao_covert.OUTPUT_LABELS] == 1 and honest["yao.covert.choice"] == 1
    pair = memory_channel_pair(timeout_s=60, keep_transcript=True)
    ATTACKS[attack](monkeypatch, pair)
    with pytest.raises(CheatingDetected) as caught:
        attacked_run(COVERT, TO_GARBLER, pair)
    assert caught.value.check == ("yao.ot_labels" if attack == "ot_labels" else "yao.circuit")
    assert sent_by_evaluator(pair) == honest - Counter([yao_covert.OUTPUT_LABELS])


# -- a hostile evaluator ------------------------------------------------------------------------
def lying_evaluator(pair, tag: str, flip: int) -> None:
    """The evaluator's end (bob's) flips bit ``flip`` of the first word of every message
    ``tag`` it sends: the garbler's output of the first instance, as a permute bit (bit 0
    of the packed bits) or in the low word of a label."""
    send_array = pair[1].send_array

    def lying(sent_tag: str, array: np.ndarray) -> None:
        if sent_tag == tag:
            array = array.copy()
            array.reshape(-1)[0] ^= array.dtype.type(1 << flip)
        send_array(sent_tag, array)

    pair[1].send_array = lying


def garbler_output(security: str, pair) -> tuple[list[int], list[int]]:
    """The modes circuit over the pair (lt = [x < y] to the garbler, max to both): what the
    garbler got for lt, and its true values."""
    circuit = modes_circuit()
    xs = np.array([1, 4000, 7], dtype=np.uint64)
    ys = np.array([3, 5, 7], dtype=np.uint64)

    def side(garbler: bool, mine: dict) -> Callable:
        return lambda ch: YaoParty(ch, security=security).run(
            circuit, garbler=garbler, inputs=mine, outputs=MODES
        )

    g, e = run_two_party(side(True, {"x": xs}), side(False, {"y": ys}), pair=pair, timeout_s=60)
    assert [int(v) for v in e["max"]] == [3, 4000, 7]  # the evaluator's own are right
    return [int(v) for v in g["lt"]], [int(x < y) for x, y in zip(xs, ys, strict=True)]


def test_an_evaluator_changes_the_garblers_output_at_semi_honest() -> None:
    """The attack is real: the garbler cannot tell a flipped permute bit from a true one."""
    pair = memory_channel_pair(timeout_s=60)
    assert garbler_output(SEMI_HONEST, pair)[0] == [1, 0, 0]
    pair = memory_channel_pair(timeout_s=60)
    lying_evaluator(pair, "yao.out_permute", 0)
    got, true = garbler_output(SEMI_HONEST, pair)
    assert got != true and got[1:] == true[1:]


@pytest.mark.parametrize("flip", [0, 9, 63])
def test_a_changed_output_label_is_caught_in_every_run(flip: int) -> None:
    """Above semi-honest the evaluator returns labels: one that is neither of its wire's
    two (the permute bit flipped, or any other bit) fails the garbler's check, with the
    run, the output and a digest of the label as evidence."""
    for _ in range(3):
        pair = memory_channel_pair(timeout_s=60)
        lying_evaluator(pair, yao_covert.OUTPUT_LABELS, flip)
        with pytest.raises(CheatingDetected) as caught:
            garbler_output(COVERT, pair)
        assert caught.value.check == "yao.outputs"
        evidence = caught.value.evidence
        assert evidence["run"] == 0 and evidence["instance"] == 0 and "found" in evidence
    pair = memory_channel_pair(timeout_s=60)
    got, true = garbler_output(COVERT, pair)
    assert got == true


# -- selective failure on one OT message --------------------------------------------------------
FANOUT = 40
SELECTIVE_RUNS = 40


def probe_circuit() -> Circuit:
    """y_j = e AND g_j for one evaluator bit e: with g = 0 the garbler's output is 0 whatever
    e is, and a label for e that is neither of its two makes every y_j a pseudorandom bit,
    so the output is not 0 but with probability 2^-FANOUT."""
    b = B.CircuitBuilder()
    g, (e,) = b.input("g", FANOUT), b.input("e", 1)
    b.output("y", [b.and_(e, gj) for gj in g])
    return b.build()


PROBE = probe_circuit()


def corrupt_one_value(b: int) -> Callable:
    """``ot_messages`` of a garbler that corrupts copy 0's label in the message m_b of the
    first OT: encoded bit 0 of the evaluator's bit e (or e itself, not encoded)."""
    honest = yao_covert.ot_messages

    def ot_messages(run, copies):
        messages = honest(run, copies)
        messages[b][0, 0] ^= np.uint64(1 << 20)
        return messages

    return ot_messages


def garbler_sees_failures(ys: list[int], monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Runs of the probe circuit between covert parties, the evaluator's e = ys[i] in run i
    and copy 0 always the evaluated one, against a garbler that corrupts m_1 of e's first
    encoded bit: whether the garbler sees a failure in each run. The junk label makes the
    evaluator's output labels junk too, which the garbler's own check of them reports
    (authenticated outputs), where a permute bit would have made its output not 0."""
    monkeypatch.setattr(yao_covert, "choose_copy", lambda seeds: 0)
    monkeypatch.setattr(yao_covert, "ot_messages", corrupt_one_value(1))
    zeros = np.zeros(1, dtype=np.uint64)

    def garbler(ch) -> bool:
        party = YaoParty(ch, security=COVERT)
        try:
            out = party.run(PROBE, garbler=True, inputs={"g": zeros}, outputs=TO_GARBLER)
        except CheatingDetected as exc:
            assert exc.check == "yao.outputs"
            return True
        return int(out["y"][0]) != 0

    def evaluator(y: int) -> Callable:
        return lambda ch: YaoParty(ch, security=COVERT).run(
            PROBE, garbler=False, inputs={"e": [y]}, outputs=TO_GARBLER
        )

    return [run_two_party(garbler, evaluator(y), timeout_s=120)[0] for y in ys]


def test_without_the_encoding_one_corrupt_ot_message_tells_the_garbler_the_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """s = 1, no encoding (the evaluator's real bit in every copy): the garbler's output goes
    wrong exactly in the runs where e = 1, never caught (copy 0 is the evaluated one)."""
    monkeypatch.setattr(yao_covert, "PROBE_RESISTANCE", 1)
    ys = [0, 1, 1, 0, 1, 0, 0, 1]
    assert garbler_sees_failures(ys, monkeypatch) == [y == 1 for y in ys]


def test_with_the_encoding_the_failures_do_not_depend_on_the_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Encoded: a run fails when encoded bit 0 is 1, probability 1/2 whatever e is.
    With n = SELECTIVE_RUNS / 2 runs at each e, the failure counts f0, f1 are independent
    Bin(n, 1/2), so f0 + (n - f1) is Bin(2n, 1/2): |f0 - f1| <= 12 fails by chance with
    probability 4.2e-5 (and the total f0 + f1 stays in [LOW, HIGH], the attack is live),
    where without the encoding f0 = 0 and f1 = n = 20."""
    ys = [0, 1] * (SELECTIVE_RUNS // 2)
    failed = garbler_sees_failures(ys, monkeypatch)
    f0 = sum(f for f, y in zip(failed, ys, strict=True) if y == 0)
    f1 = sum(f for f, y in zip(failed, ys, strict=True) if y == 1)
    n = SELECTIVE_RUNS // 2
    assert outside_probability(2 * n, n - 12, n + 12) < 5e-5
    assert abs(f0 - f1) <= 12, (f0, f1)
    assert LOW <= f0 + f1 <= HIGH, (f0, f1)
