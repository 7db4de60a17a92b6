"""Domain separation: every fixed-key hash is keyed by a protocol id and the job's session
label (``Channel.session``), and the base-OT group follows the job's Paillier key size.

The garbling and OT tests show the separation is real: a party that hashes under another
session or protocol id gets garbage, not the right labels or messages.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.bn.learn import learn_reference
from ppbn.bn.networks import load_network, sample
from ppbn.bn.schema import Schema, Variable
from ppbn.circuits import builders as B
from ppbn.circuits.garble import (
    FixedKeyHash,
    evaluate_garbled,
    fixed_key,
    garble,
    permute_bits,
    random_delta,
    random_labels,
)
from ppbn.circuits.ir import values_to_bits
from ppbn.circuits.schedule import schedule_of
from ppbn.protocols import arith
from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.learn import learn_secure
from ppbn.protocols.learning.scorer import SecureScorer
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.ot import OTReceiver, OTSender, extension_protocol
from ppbn.protocols.tables import TablesConfig
from ppbn.protocols.yao import YAO_PROTOCOL, YaoParty

blocks_strategy = st.integers(1, 64).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 2**64 - 1), min_size=2 * n, max_size=2 * n),
        st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n),
    )
)
labels_strategy = st.binary(max_size=40)


def _hash(protocol: bytes, session: bytes, blocks: list[int], tweaks: list[int]) -> np.ndarray:
    x = np.array(blocks, dtype=np.uint64).reshape(-1, 2)
    return FixedKeyHash(protocol, session).hash(x, np.array(tweaks, dtype=np.uint64))


@settings(max_examples=50, deadline=None)
@given(blocks_strategy, labels_strategy, labels_strategy, labels_strategy)
def test_fixed_key_hash_differs_across_protocol_ids_and_sessions(data, p1, p2, session) -> None:
    blocks, tweaks = data
    a, b = b"ppbn/test/" + p1, b"ppbn/test/" + p2
    same = _hash(a, session, blocks, tweaks)
    assert (same == _hash(a, session, blocks, tweaks)).all()  # a fixed key: deterministic
    if a != b:
        assert not (same == _hash(b, session, blocks, tweaks)).all(axis=1).any()
    other_session = session + b"x"
    assert not (same == _hash(a, other_session, blocks, tweaks)).all(axis=1).any()


def test_key_derivation_frames_its_inputs() -> None:
    """Length prefixes: moving bytes between protocol id and session changes the key."""
    assert fixed_key(b"ppbn/ab", b"c") != fixed_key(b"ppbn/a", b"bc")
    assert fixed_key(YAO_PROTOCOL, b"") != fixed_key(extension_protocol(8), b"")
    assert fixed_key(extension_protocol(4), b"") != fixed_key(extension_protocol(8), b"")
    assert fixed_key(YAO_PROTOCOL, b"job-1") != fixed_key(YAO_PROTOCOL, b"job-2")
    assert len(fixed_key(YAO_PROTOCOL, b"job-1")) == 16
    with pytest.raises(ValueError, match="protocol id"):
        FixedKeyHash(b"", b"job-1")


def _adder():
    b = B.CircuitBuilder()
    x, y = b.input("x", 16), b.input("y", 16)
    b.output("s", B.add(b, x, y))
    return b.build()


@pytest.mark.parametrize(
    ("evaluator_key", "works"),
    [
        ((YAO_PROTOCOL, b"job-1"), True),
        ((YAO_PROTOCOL, b"job-2"), False),
        ((b"ppbn/other", b"job-1"), False),
    ],
    ids=["same-session", "other-session", "other-protocol"],
)
def test_garbling_tweaks_are_separated_by_session_and_protocol(evaluator_key, works) -> None:
    circuit = _adder()
    sched = schedule_of(circuit)
    k = 64
    rng = np.random.default_rng(3)
    xs, ys = rng.integers(0, 2**16, k), rng.integers(0, 2**16, k)
    bits = np.concatenate(
        [values_to_bits(xs.astype(np.uint64), 16), values_to_bits(ys.astype(np.uint64), 16)]
    )
    delta = random_delta()
    zero = random_labels((len(sched.input_slots), k))
    active = zero ^ (np.negative(bits.astype(np.uint64))[..., None] & delta)
    tables, out_zero = garble(sched, zero, delta, 0, FixedKeyHash(YAO_PROTOCOL, b"job-1"))
    out = evaluate_garbled(sched, active, tables, 0, FixedKeyHash(*evaluator_key))
    expected = values_to_bits(((xs + ys) % 2**16).astype(np.uint64), 16)
    right = out_zero ^ (np.negative(expected.astype(np.uint64))[..., None] & delta)
    valid = (out == out_zero).all(axis=-1) | (out == out_zero ^ delta).all(axis=-1)
    if works:
        assert (out == right).all()
        assert ((permute_bits(out) ^ permute_bits(out_zero)) == expected).all()
    else:
        # the low output bit of an adder is an XOR of inputs (free, no hash): skip it
        assert not valid[1:].any()


@pytest.mark.parametrize("sessions", [(b"job-1", b"job-1"), (b"job-1", b"job-2")])
def test_ot_extension_is_keyed_by_the_session(sessions) -> None:
    m = 500
    rng = np.random.default_rng(5)
    m0 = rng.integers(0, 2**63, size=(m, 2), dtype=np.uint64)
    m1 = rng.integers(0, 2**63, size=(m, 2), dtype=np.uint64)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    pair = memory_channel_pair(timeout_s=30)
    pair[0].session, pair[1].session = sessions
    _, got = run_two_party(
        lambda ch: OTSender(ch).send(m0, m1), lambda ch: OTReceiver(ch).receive(choices), pair=pair
    )
    chosen = np.where(choices[:, None] == 1, m1, m0)
    if sessions[0] == sessions[1]:
        assert (got == chosen).all()
    else:
        assert not (got == chosen).all(axis=1).any()


def test_ot_instances_on_one_channel_are_separated() -> None:
    m = 200
    choices = np.ones(m, dtype=np.uint8)
    delta = np.array([7, 9], dtype=np.uint64)
    x0, got = run_two_party(
        lambda ch: OTSender(ch, instance=b"yao").send_correlated(m, delta),
        lambda ch: OTReceiver(ch, instance=b"arith").receive_correlated(choices),
    )
    assert not (got == x0 ^ delta).all(axis=1).any()


def test_yao_parties_with_different_sessions_are_refused() -> None:
    circuit = _adder()
    pair = memory_channel_pair(timeout_s=10)
    pair[1].session = b"job-2"
    pair[0].session = b"job-1"
    with pytest.raises(ProtocolError, match="session"):
        run_two_party(
            lambda ch: YaoParty(ch).run(
                circuit, garbler=True, inputs={"x": [1]}, outputs={"s": "both"}
            ),
            lambda ch: YaoParty(ch).run(
                circuit, garbler=False, inputs={"y": [2]}, outputs={"s": "both"}
            ),
            pair=pair,
        )


@pytest.mark.parametrize("dh_bits", [2048, 3072])
def test_yao_and_lookup_with_a_session_and_either_group(dh_bits: int) -> None:
    circuit = _adder()
    table = list(range(100, 116))
    index = [3, 0, 15, 7]
    pair = memory_channel_pair(timeout_s=60, keep_transcript=True, session=b"job-1")

    def side(garbler: bool, inputs: dict, role: str, masks: list[int]):
        def run(ch):
            out = YaoParty(ch, dh_bits=dh_bits).run(
                circuit, garbler=garbler, inputs=inputs, outputs={"s": "both"}
            )
            share = arith.lookup(arith.ArithSession(ch, role, dh_bits=dh_bits), table, masks)
            return out, share

        return run

    mu = [5, 9, 2, 11]
    (ya, la), (yb, lb) = run_two_party(
        side(True, {"x": [40000]}, arith.ALICE, mu),
        side(False, {"y": [30000]}, arith.BOB, [m ^ j for m, j in zip(mu, index, strict=True)]),
        pair=pair,
    )
    assert list(ya["s"]) == list(yb["s"]) == [(40000 + 30000) % 2**16]
    opened = [int(v) for v in (la + lb)[:, 0]]  # low words; entries are small
    assert opened == [table[j] for j in index]
    base_a = [p for tag, p in pair[0].transcript if tag == "ot.base.A"]
    assert {len(p) for p in base_a} == {dh_bits // 8}


def test_secure_scorer_takes_the_group_of_its_key_size() -> None:
    net = load_network("asia")
    schema = Schema(
        "id",
        tuple(
            Variable(v, "alice" if i % 2 == 0 else "bob", net.states[v])
            for i, v in enumerate(net.names)
        ),
    )
    codes = np.zeros((10, len(schema.owned_by("alice"))), dtype=np.int64)
    for key_bits, dh_bits in ((1024, 2048), (2048, 2048), (3072, 3072)):
        config = SecureLearnConfig(tables=TablesConfig(key_bits=key_bits, workers=1))
        assert config.dh_bits == dh_bits
        scorer = SecureScorer(
            memory_channel_pair()[0], "alice", schema, codes, 10, config, Ledger("alice")
        )
        assert scorer.yao.dh_bits == scorer.arith.dh_bits == dh_bits
        scorer.tables.close()


def test_secure_learning_with_a_job_session_equals_the_reference() -> None:
    net = load_network("asia")
    codes = sample(net, 1500, 4)
    schema = Schema(
        "id",
        tuple(
            Variable(v, "alice" if i % 2 == 0 else "bob", net.states[v])
            for i, v in enumerate(net.names)
        ),
    )
    column = {v: i for i, v in enumerate(net.names)}
    config = SecureLearnConfig(
        max_parents=2, mode="exact", tables=TablesConfig(key_bits=1024, workers=1)
    )

    def side(role):
        mine = [column[v.name] for v in schema.owned_by(role)]
        return lambda ch: learn_secure(ch, role, schema, codes[:, mine], config, Ledger(role))

    pair = memory_channel_pair(timeout_s=300, session=b"job-1")
    alice, bob = run_two_party(side("alice"), side("bob"), pair=pair)
    reference = learn_reference(net.names, net.states, codes, 2, "exact")
    assert alice.search.edges == reference.search.edges == bob.search.edges
    for v in net.names:
        np.testing.assert_allclose(alice.network.cpts[v], reference.network.cpts[v], atol=1e-9)
