"""The table phase at the malicious level (``tables/checks.py``): each attack of a modified
daemon, run at both levels over the in-process pair of ``test_tables.py``. At semi-honest
the attack works (which shows the test can see it); at malicious it is useless or caught.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_paillier_proofs import BAD_MODULI, bad_key
from test_tables import TEST_CONFIG, make_schema, plaintext_counts, random_case, run_both, split

import ppbn.protocols.paillier_proofs as paillier_proofs
import ppbn.protocols.tables.exchange as exchange
from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.constants import MALICIOUS, SEMI_HONEST
from ppbn.protocols.security import CheatingDetected
from ppbn.protocols.tables import (
    TablesConfig,
    TablesSession,
    crossing_families,
    reconstruct,
    run_tables,
    slot_bits,
)
from ppbn.protocols.tables.plan import configs, make_plan

LEVELS = (SEMI_HONEST, MALICIOUS)
# one chunk holds every record, so a chunk's index is the record's
ONE_CHUNK = replace(TEST_CONFIG, chunk_size=512)
# alice's three-state variable and bob's binary one: alice encrypts (2 returns beat 3)
SCHEMA = make_schema([3, 2], ["alice", "bob"])
FAMILY = ("v0", "v1")


def _records(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, c, n) for c in SCHEMA.cardinalities()], axis=1)


def _decrypted_returns(pair, session: TablesSession) -> list[int]:
    """What the key owner (alice) decrypted: every product bob returned, in order."""
    keys = session.keys
    step = keys.public.ciphertext_bytes
    return [
        keys.decrypt(int.from_bytes(payload[i : i + step], "big"))
        for tag, payload in pair[0].transcript
        if tag == "tables.masked"
        for i in range(0, len(payload), step)
    ]


@settings(max_examples=12, deadline=None)
@given(random_case(), st.booleans(), st.integers(0, 2**32 - 1))
def test_honest_runs_reconstruct_the_counts(case, complete_records: bool, seed: int) -> None:
    """Every configuration has a slot (none derived), tags and extra products change no count;
    missing cells (available-case) fall in the extra products."""
    cards, owners, n, data_seed, max_size = case
    schema = make_schema(cards, owners)
    rng = np.random.default_rng(data_seed)
    full = np.stack([rng.integers(0, c, n) for c in cards], axis=1).reshape(n, len(cards))
    if not complete_records:
        full = np.where(rng.random(full.shape) < 0.15, -1, full)
    families = crossing_families(schema, max_size)
    config = replace(TEST_CONFIG, security=MALICIOUS, complete_records=complete_records)
    alice, bob, _ = run_both(schema, split(schema, full), families, config)
    counts = reconstruct(alice, bob)
    index = {name: i for i, name in enumerate(schema.names)}
    for family in families:
        kept = full[(full[:, [index[v] for v in family]] >= 0).all(axis=1)]
        np.testing.assert_array_equal(counts[family], plaintext_counts(schema, kept, family))


def test_cached_ciphertexts_keep_their_plaintext_sums() -> None:
    """A later call of the session reuses the ciphertexts the aggregator holds, and the key
    owner checks the weights against the sums it kept when it encrypted them. On a process
    pool: the re-randomizers s^N are worker tasks, and some are made ahead for the next call."""
    schema = make_schema([3, 3, 2, 2], ["alice", "alice", "bob", "bob"])
    full = np.stack([np.random.default_rng(3).integers(0, c, 50) for c in [3, 3, 2, 2]], axis=1)
    config = replace(TEST_CONFIG, security=MALICIOUS, workers=2, serial_below=0)
    with TablesSession(config) as s_alice, TablesSession(config) as s_bob:
        sessions = {"alice": s_alice, "bob": s_bob}
        for families in ([("v0", "v2")], [("v2", "v0")]):
            alice, bob, counters = run_both(schema, split(schema, full), families, config, sessions)
            counts = reconstruct(alice, bob)
            for family in families:
                np.testing.assert_array_equal(
                    counts[family], plaintext_counts(schema, full, family)
                )
        assert s_alice.sent_sums and s_bob.reserved > 0
        assert counters["alice"].ciphertexts_sent + counters["bob"].ciphertexts_sent < 50


def test_the_plan_keeps_a_tag_slot_and_sigma_spare_bits() -> None:
    """At malicious no configuration is derived (complete records or not), and a ciphertext's
    slots, the tag slot and sigma spare bits fit below bits(N) - 1."""
    schema = make_schema([2, 3, 2, 2, 3], ["alice", "alice", "alice", "bob", "bob"])
    families = crossing_families(schema, 3)
    for n, key_bits in ((50, 1024), (5000, 2048)):
        width = slot_bits(n, 40)
        semi = TablesConfig(key_bits=key_bits, complete_records=True)
        mal = replace(semi, security=MALICIOUS)
        for config, derived in ((semi, 1), (mal, 0)):
            for direction in make_plan(schema, families, n, config).directions:
                assert direction.weights_check == (config is mal)
                for subset, where in direction.locate.items():
                    encoded = sum(piece.size for _, _, piece in where)
                    assert encoded == configs(schema, subset) - derived
                for group in direction.groups:
                    spare = key_bits - 1 - (group.slots + (config is mal)) * width
                    assert spare >= (config.statistical_bits if config is mal else 0)


def test_peers_must_agree_on_the_level() -> None:
    full = _records(5, 1)
    parts = split(SCHEMA, full)
    configs = {"alice": TEST_CONFIG, "bob": replace(TEST_CONFIG, security=MALICIOUS)}

    def party(role):
        return lambda ch: run_tables(ch, role, SCHEMA, parts[role], [FAMILY], configs[role])

    with pytest.raises(
        ProtocolError, match="security level differs .*peer malicious, here semi-honest"
    ):
        run_two_party(party("alice"), party("bob"), timeout_s=30)


# -- X1: the key owner encodes each record in the plaintext bits above the slots -------------


@pytest.mark.parametrize("level", LEVELS)
def test_a_key_owner_marking_records_learns_the_column_only_at_semi_honest(
    monkeypatch, level: str
) -> None:
    """Alice sets bit (top + i) of record i's plaintext, far above the slots; a product's
    decryption then lists the records bob multiplied into it, unless it is masked whole."""
    n = 400
    full = _records(n, 5)
    top = 1022 - n  # below bits(N) - 1: the plaintexts stay below N
    honest = exchange.bit_positions

    def marking(schema, block, columns, group, width):
        positions = honest(schema, block, columns, group, width)
        return np.concatenate([positions, top + np.arange(len(block))[:, None]], axis=1)

    monkeypatch.setattr(exchange, "bit_positions", marking)
    config = replace(ONE_CHUNK, security=level)
    sessions = {role: TablesSession(config) for role in ("alice", "bob")}
    pair = memory_channel_pair(timeout_s=60, keep_transcript=True)
    run_both(SCHEMA, split(SCHEMA, full), [FAMILY], config, sessions, pair)
    returns = _decrypted_returns(pair, sessions["alice"])
    for session in sessions.values():
        session.close()
    assert len(returns) == 2 + (level == MALICIOUS)
    marked = np.array([[(d >> (top + i)) & 1 for i in range(n)] for d in returns[:2]])
    guess = np.where(marked[0] == 1, 0, np.where(marked[1] == 1, 1, 0))
    accuracy = float(np.mean(guess == full[:, 1]))
    majority = max(np.mean(full[:, 1] == 0), np.mean(full[:, 1] == 1))
    if level == SEMI_HONEST:
        assert accuracy == 1.0  # bob's whole column
    else:
        assert accuracy < majority + 0.15  # no better than guessing


# -- X3: the key owner announces a modulus under which masking does not hide -----------------


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", BAD_MODULI)
def test_a_bad_modulus_is_caught_before_any_product_at_malicious(
    monkeypatch, level: str, kind: str
) -> None:
    """A cheating key owner answers the root challenges as it can (here: with the challenges
    themselves). A small factor is refused at both levels (``PublicKey.from_bytes``'s sanity
    check at semi-honest); a modulus with gcd(N, phi(N)) != 1 passes at semi-honest."""
    monkeypatch.setattr(paillier_proofs, "answer_root_challenges", lambda n, p, q, rho: list(rho))
    full = _records(30, 2)
    config = replace(TEST_CONFIG, security=level)
    sessions = {role: TablesSession(config) for role in ("alice", "bob")}
    for session in sessions.values():
        session.keys = bad_key(kind)  # whoever encrypts announces the bad modulus
    pair = memory_channel_pair(timeout_s=60)
    try:
        if level == MALICIOUS:
            with pytest.raises(CheatingDetected) as caught:
                run_both(SCHEMA, split(SCHEMA, full), [FAMILY], config, sessions, pair)
            assert caught.value.check == "tables.key"
            sent = {tag for (_, tag), cell in pair[1].stats.by_kind.items() if cell[2]}
            challenged = {"tables.key.challenge"} if kind != "small_factor" else set()
            assert sent == {"tables.hello", "tables.cache"} | challenged
        elif kind == "small_factor":
            with pytest.raises(ProtocolError, match="prime factor below 2\\^16"):
                run_both(SCHEMA, split(SCHEMA, full), [FAMILY], config, sessions, pair)
        else:
            run_both(SCHEMA, split(SCHEMA, full), [FAMILY], config, sessions, pair)
    finally:
        for session in sessions.values():
            session.close()


# -- Y1: the aggregator multiplies one record alone, or a record twice -----------------------


def _hostile_products(kind: str, record: int, label: int):
    """``multiply_by_label`` of an aggregator that puts ``record`` alone in ``label``'s product
    (the others of that configuration left out), or multiplies it in a second time."""
    honest = exchange.multiply_by_label

    def hostile(n, payload, labels, label_counts):
        products, multiplications = honest(n, payload, labels, label_counts)
        width = 2 * ((n.bit_length() + 7) // 8)
        nsquare = n * n
        mine = payload[record * width : (record + 1) * width]
        blob = bytearray(products[0])
        if kind == "alone":
            blob[label * width : (label + 1) * width] = mine
        else:
            current = int.from_bytes(blob[label * width : (label + 1) * width], "big")
            twice = current * int.from_bytes(mine, "big") % nsquare
            blob[label * width : (label + 1) * width] = twice.to_bytes(width, "big")
        return [bytes(blob), *products[1:]], multiplications

    return hostile


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kind", ["alone", "twice"])
def test_an_aggregator_with_other_weights_is_caught_at_malicious(
    monkeypatch, level: str, kind: str
) -> None:
    n, record = 50, 7
    full = _records(n, 9)
    x, y = full[record]
    label = 0 if kind == "alone" else y
    monkeypatch.setattr(exchange, "multiply_by_label", _hostile_products(kind, record, label))
    config = replace(ONE_CHUNK, security=level)
    if level == MALICIOUS:
        with pytest.raises(CheatingDetected, match="do not count every record once") as caught:
            run_both(SCHEMA, split(SCHEMA, full), [FAMILY], config)
        assert caught.value.check == "tables.weights"
        evidence = caught.value.evidence
        assert evidence["group"] == 0 and evidence["subset"] == "v1"
        assert evidence["expected"] != evidence["found"] and len(evidence["found"]) == 32
        assert evidence["session"] == ""  # the memory pair's session label, in hex
        return
    counts = reconstruct(*run_both(SCHEMA, split(SCHEMA, full), [FAMILY], config)[:2])[FAMILY]
    expected = plaintext_counts(SCHEMA, full, FAMILY)
    if kind == "alone":  # the opened column is one record's one-hot
        np.testing.assert_array_equal(counts[:, label], np.eye(3, dtype=np.uint64)[x])
    else:
        expected[x, y] += 1
        np.testing.assert_array_equal(counts, expected)
