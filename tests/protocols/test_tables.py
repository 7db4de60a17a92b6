"""Secure contingency tables: shares reconstruct the counts, what the key owner sees is
independent of the data, and malformed messages are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import ppbn.protocols.tables.exchange as exchange
import ppbn.protocols.tables.session as tables_session
from ppbn.bn.schema import Schema, Variable
from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.paillier import OpCounters, short_exponent_bits
from ppbn.protocols.tables import (
    TablesConfig,
    TablesSession,
    crossing_families,
    per_alpha_cost,
    reconstruct,
    run_tables,
    slot_bits,
)

TEST_CONFIG = TablesConfig(key_bits=1024, chunk_size=64)


def make_schema(cards: list[int], owners: list[str]) -> Schema:
    return Schema(
        "id",
        tuple(
            Variable(f"v{i}", owner, tuple(f"s{j}" for j in range(card)))
            for i, (card, owner) in enumerate(zip(cards, owners, strict=True))
        ),
    )


def split(schema: Schema, full: np.ndarray) -> dict[str, np.ndarray]:
    index = {name: i for i, name in enumerate(schema.names)}
    return {
        role: full[:, [index[v.name] for v in schema.owned_by(role)]].astype(np.int64)
        for role in ("alice", "bob")
    }


def plaintext_counts(schema: Schema, full: np.ndarray, family: tuple[str, ...]) -> np.ndarray:
    index = {name: i for i, name in enumerate(schema.names)}
    counts = np.zeros(schema.cardinalities(family), dtype=np.uint64)
    np.add.at(counts, tuple(full[:, index[v]] for v in family), 1)
    return counts


def run_both(schema, parts, families, config=TEST_CONFIG, sessions=None, pair=None):
    counters = {"alice": OpCounters(), "bob": OpCounters()}

    def party(role):
        session = sessions[role] if sessions else None
        return lambda ch: run_tables(
            ch, role, schema, parts[role], families, config, counters[role], session=session
        )

    alice, bob = run_two_party(party("alice"), party("bob"), timeout_s=60, pair=pair)
    return alice, bob, counters


@st.composite
def random_case(draw):
    m = draw(st.integers(2, 5))
    cards = draw(st.lists(st.integers(2, 3), min_size=m, max_size=m))
    owners = draw(st.lists(st.sampled_from(["alice", "bob"]), min_size=m, max_size=m))
    if len(set(owners)) < 2:
        owners[0], owners[-1] = "alice", "bob"
    n = draw(st.integers(0, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    max_size = draw(st.integers(2, 3))
    return cards, owners, n, seed, max_size


@settings(max_examples=12, deadline=None)
@given(random_case(), st.booleans())
def test_shares_reconstruct_counts(case, complete_records: bool) -> None:
    """Also with the last configuration of each encrypted subset derived (complete records)."""
    cards, owners, n, seed, max_size = case
    schema = make_schema(cards, owners)
    rng = np.random.default_rng(seed)
    full = np.stack([rng.integers(0, c, n) for c in cards], axis=1).reshape(n, len(cards))
    families = crossing_families(schema, max_size)
    # a family in another axis order, and families held by one party
    families.append(tuple(reversed(families[0])))
    alice_vars = [v.name for v in schema.owned_by("alice")]
    families.append(tuple(alice_vars[:2]))
    families.append((schema.owned_by("bob")[0].name,))
    config = TablesConfig(key_bits=1024, chunk_size=64, complete_records=complete_records)
    alice, bob, _ = run_both(schema, split(schema, full), families, config)
    assert set(alice) == set(bob) == set(families)
    counts = reconstruct(alice, bob)
    for family in families:
        assert alice[family].dtype == np.uint64
        np.testing.assert_array_equal(counts[family], plaintext_counts(schema, full, family))
    for family in families[-2:]:  # local: the owner holds the counts, the other zeros
        owner = schema.owner(family[0])
        holder, empty = (alice, bob) if owner == "alice" else (bob, alice)
        np.testing.assert_array_equal(holder[family], plaintext_counts(schema, full, family))
        assert not empty[family].any()


def test_crossing_families_and_per_alpha_cost() -> None:
    schema = make_schema([2, 3, 2, 2], ["alice", "bob", "alice", "bob"])
    families = crossing_families(schema, 3)
    assert ("v0", "v1") in families and ("v0", "v2") not in families
    assert all(len({schema.owner(v) for v in f}) == 2 for f in families)
    assert len(families) == 4 + 4  # 2x2 pairs + C(4,3)=4 triples, all crossing
    cost = per_alpha_cost(schema, families, 1000, 2048)
    cells = sum(int(np.prod(schema.cardinalities(f))) for f in families)
    assert cost.alphas == cells and cost.encryptions == cells * 1001
    assert cost.bytes == cost.ciphertexts * 512


def test_parallel_workers_and_ciphertext_cache() -> None:
    schema = make_schema([2, 3, 2, 2, 3], ["alice", "bob", "alice", "bob", "alice"])
    rng = np.random.default_rng(5)
    n = 600
    full = np.stack([rng.integers(0, c, n) for c in schema.cardinalities()], axis=1)
    parts = split(schema, full)
    config = TablesConfig(key_bits=1024, chunk_size=128, workers=2, serial_below=0)
    first = crossing_families(schema, 2)
    with TablesSession(config) as s_alice, TablesSession(config) as s_bob:
        sessions = {"alice": s_alice, "bob": s_bob}
        s_alice.prepare(randomizers=n // 2)  # half the chunks from the pool, half in workers
        assert s_alice.encryptor is not None and s_alice.encryptor.pooled == n // 2
        s_bob.prepare()
        alice, bob, counters = run_both(schema, parts, first, config, sessions)
        # the aggregator's re-randomizers drown the sum of at most n short exponents
        specs = [s.reserve_spec for s in (s_alice, s_bob) if s.reserve_spec is not None]
        bits = short_exponent_bits() + n.bit_length() + config.statistical_bits
        assert specs and all(spec[2] == bits for spec in specs)
        encrypted = counters["alice"].encryptions + counters["bob"].encryptions
        assert encrypted >= n
        if counters["alice"].encryptions >= n:
            assert s_alice.encryptor.pooled < config.chunk_size  # whole chunks come from the pool
        # the same parts again: served from the receiver's cache, nothing re-encrypted
        second = [tuple(reversed(f)) for f in first[:3]]
        alice2, bob2, counters2 = run_both(schema, parts, second, config, sessions)
        assert counters2["alice"].ciphertexts_sent + counters2["bob"].ciphertexts_sent < n
        assert counters2["alice"].encryptions + counters2["bob"].encryptions < n
    for got_a, got_b, fams in ((alice, bob, first), (alice2, bob2, second)):
        counts = reconstruct(got_a, got_b)
        for family in fams:
            np.testing.assert_array_equal(counts[family], plaintext_counts(schema, full, family))


def _decrypted_slot_values(schema, full, families, n):
    """Slot values the key owner decrypts (from its received transcript), normalised to [0, 1)."""
    sessions = {role: TablesSession(TEST_CONFIG) for role in ("alice", "bob")}
    pair = memory_channel_pair(timeout_s=60, keep_transcript=True)
    alice, bob, counters = run_both(
        schema, split(schema, full), families, TEST_CONFIG, sessions, pair
    )
    owner = "alice" if counters["alice"].decryptions else "bob"
    keys = sessions[owner].keys
    transcript = pair[0 if owner == "alice" else 1].transcript
    width = slot_bits(n, TEST_CONFIG.statistical_bits)
    values = []
    for tag, payload in transcript:
        if tag != "tables.masked":
            continue
        step = keys.public.ciphertext_bytes
        for i in range(0, len(payload), step):
            m = keys.decrypt(int.from_bytes(payload[i : i + step], "big"))
            slots = [(m >> (width * s)) & ((1 << width) - 1) for s in range(1024 // width)]
            values.extend(v for v in slots if v)
    for s in sessions.values():
        s.close()
    return (
        np.array(values, dtype=float) / 2 ** (width - 1),
        np.array(values) % 16,
        reconstruct(alice, bob),
    )


def test_decrypted_values_are_independent_of_the_data() -> None:
    schema = make_schema([3, 2, 2, 3], ["alice", "alice", "bob", "bob"])
    n = 300
    families = crossing_families(schema, 3)
    constant = np.zeros((n, 4), dtype=np.int64)  # every record in one configuration
    rng = np.random.default_rng(11)
    varied = np.stack([rng.integers(0, c, n) for c in schema.cardinalities()], axis=1)
    samples_const, low_const, counts_const = [], [], None
    samples_var, low_var, counts_var = [], [], None
    for _ in range(2):
        v, low, counts_const = _decrypted_slot_values(schema, constant, families, n)
        samples_const.append(v)
        low_const.append(low)
        v, low, counts_var = _decrypted_slot_values(schema, varied, families, n)
        samples_var.append(v)
        low_var.append(low)
    a, b = np.concatenate(samples_const), np.concatenate(samples_var)
    assert len(a) == len(b) >= 200
    assert stats.ks_2samp(a, b).pvalue > 1e-4
    assert stats.kstest(a, "uniform").pvalue > 1e-4
    table = np.array(
        [
            np.bincount(np.concatenate(low_const), minlength=16),
            np.bincount(np.concatenate(low_var), minlength=16),
        ]
    )
    assert stats.chi2_contingency(table).pvalue > 1e-4
    # the same test does see the data when it is not masked
    raw_const = np.concatenate([counts_const[f].ravel() for f in families]) / n
    raw_var = np.concatenate([counts_var[f].ravel() for f in families]) / n
    assert stats.ks_2samp(raw_const, raw_var).pvalue < 1e-4


def _corrupting(kind: str):
    honest = exchange.encrypt_bit_rows

    def corrupt(spec, positions, seed, randomizers=b""):
        blob = honest(spec, positions, seed, randomizers)
        n = spec[0]
        width = 2 * ((n.bit_length() + 7) // 8)
        if kind == "zero":
            bad = bytes(width)
        elif kind == "too_big":
            bad = b"\xff" * width
        elif kind == "not_invertible":
            bad = (3 * n).to_bytes(width, "big")
        else:  # one ciphertext missing
            return blob[width:]
        return bad + blob[width:]

    return corrupt


@pytest.mark.parametrize("kind", ["zero", "too_big", "not_invertible", "missing"])
def test_malformed_ciphertexts_are_refused(monkeypatch, kind: str) -> None:
    schema = make_schema([2, 2], ["alice", "bob"])
    full = np.array([[0, 1], [1, 1], [1, 0]])
    monkeypatch.setattr(exchange, "encrypt_bit_rows", _corrupting(kind))
    with pytest.raises(ProtocolError, match="tables.ciphertexts"):
        run_both(schema, split(schema, full), crossing_families(schema, 2))


def test_a_degenerate_randomizer_base_is_refused_by_the_aggregator(monkeypatch) -> None:
    """The aggregating party raises each returned product to g^b for the key owner's base g
    (``tables.randomizer_base``): a base of order at most 2 would leave the products'
    randomizers as they were, so it is refused before anything is returned."""

    class AnnouncesOne(tables_session.FastEncryptor):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.base = exchange.mpz(1)

    schema = make_schema([2, 2], ["alice", "bob"])
    full = np.array([[0, 1], [1, 1], [1, 0]])
    monkeypatch.setattr(tables_session, "FastEncryptor", AnnouncesOne)
    with pytest.raises(ProtocolError, match="tables.randomizer_base: the base has order at most 2"):
        run_both(schema, split(schema, full), crossing_families(schema, 2))


def test_derived_configurations_save_slots_and_need_complete_records() -> None:
    """Complete records: binary subsets take one slot instead of two, so alice's 21 binary
    variables fit one ciphertext per record (21 slots of 47 bits in a 1024-bit key) instead
    of three (ten 2-slot subsets per ciphertext); the setting must match at both parties,
    and a missing cell is refused."""
    schema = make_schema([2] * 22, ["alice"] * 21 + ["bob"])
    rng = np.random.default_rng(3)
    full = rng.integers(0, 2, (50, 22))
    families = crossing_families(schema, 2)
    sent = {}
    for complete in (False, True):
        config = TablesConfig(
            key_bits=1024, chunk_size=64, complete_records=complete, serial_below=1 << 20
        )
        alice, bob, counters = run_both(schema, split(schema, full), families, config)
        counts = reconstruct(alice, bob)
        for family in families:
            np.testing.assert_array_equal(counts[family], plaintext_counts(schema, full, family))
        sent[complete] = counters["alice"].ciphertexts_sent
    assert sent == {False: 3 * 50, True: 50}
    pair = memory_channel_pair(timeout_s=30)
    configs = {
        role: TablesConfig(key_bits=1024, complete_records=role == "alice")
        for role in ("alice", "bob")
    }

    def party(role):
        return lambda ch: run_tables(
            ch, role, schema, split(schema, full)[role], families, configs[role]
        )

    with pytest.raises(ProtocolError, match="complete-records setting"):
        run_two_party(party("alice"), party("bob"), timeout_s=30, pair=pair)
    parts = split(schema, full)
    parts["alice"][0, 0] = -1
    with pytest.raises(ValueError, match="missing cell"):
        run_both(schema, parts, families, TablesConfig(key_bits=1024, complete_records=True))


def test_peers_must_agree_on_the_record_count() -> None:
    schema = make_schema([2, 2], ["alice", "bob"])
    parts = {"alice": np.zeros((5, 1), dtype=np.int64), "bob": np.zeros((6, 1), dtype=np.int64)}
    with pytest.raises(ProtocolError, match="record count"):
        run_both(schema, parts, crossing_families(schema, 2))


def test_cached_parts_of_both_parties_serve_a_mixed_plan() -> None:
    schema = make_schema([3, 3, 2, 2], ["alice", "alice", "bob", "bob"])
    rng = np.random.default_rng(3)
    n = 50
    full = np.stack([rng.integers(0, c, n) for c in schema.cardinalities()], axis=1)
    parts = split(schema, full)
    calls = [[("v0", "v2")], [("v1", "v2", "v3")], [("v0", "v2"), ("v1", "v2", "v3")]]
    with TablesSession(TEST_CONFIG) as s_alice, TablesSession(TEST_CONFIG) as s_bob:
        sessions = {"alice": s_alice, "bob": s_bob}
        seen = []
        for families in calls:
            alice, bob, counters = run_both(schema, parts, families, TEST_CONFIG, sessions)
            seen.append(counters)
            counts = reconstruct(alice, bob)
            for family in families:
                np.testing.assert_array_equal(
                    counts[family], plaintext_counts(schema, full, family)
                )
    # first call: alice encrypts her part; second: bob encrypts his (3 returns beat 4)
    assert seen[0]["alice"].encryptions >= n and seen[1]["bob"].encryptions >= n
    # third call: each family goes to the party whose ciphertexts the other already holds
    last = seen[2]
    assert last["alice"].encryptions < n and last["bob"].encryptions < n
    assert last["alice"].decryptions > 0 and last["bob"].decryptions > 0


def test_background_preparation_makes_the_keys_once_and_the_run_uses_them() -> None:
    """``prepare_in_background`` makes the key pair early; a table run (which needs it at
    once) waits for that key instead of making a second one, and the counts are right."""
    schema = make_schema([2, 3, 2], ["alice", "bob", "alice"])
    rng = np.random.default_rng(11)
    full = np.stack([rng.integers(0, c, 200) for c in schema.cardinalities()], axis=1)
    config = TablesConfig(key_bits=1024, chunk_size=64, workers=2, serial_below=0)
    families = crossing_families(schema, 2)
    with TablesSession(config) as s_alice, TablesSession(config) as s_bob:
        for session in (s_alice, s_bob):
            session.prepare_in_background(len(full))
        early = s_alice.own_keys()  # waits for the background key, never makes another
        assert s_alice.own_keys() is early and s_alice.keys is early
        alice, bob, _ = run_both(
            schema, split(schema, full), families, config, {"alice": s_alice, "bob": s_bob}
        )
        assert s_alice.keys is early
    for family, table in reconstruct(alice, bob).items():
        index = [schema.names.index(v) for v in family]
        expected = np.zeros(table.shape, dtype=np.int64)
        np.add.at(expected, tuple(full[:, index].T), 1)
        assert (table == expected).all()
    assert not s_alice.wait_prepared()  # close() joined the thread


def test_background_preparation_is_skipped_once_keys_exist() -> None:
    with TablesSession(TEST_CONFIG) as session:
        keys = session.own_keys()
        session.prepare_in_background(10)
        assert not session.wait_prepared() and session.keys is keys


def test_a_small_job_gets_its_key_early_but_builds_no_tables_until_it_encrypts() -> None:
    """Below ``serial_below`` everything runs in this process: the background makes the key
    only, so a job refused early (the fuzz suite's) keeps no tables in the daemon."""
    with TablesSession(TEST_CONFIG) as session:
        session.prepare_in_background(10)
        assert session.wait_prepared()
        assert session.keys is not None and session.encryptor is not None
        assert not session.encryptor.tables_built


def test_rerandomizers_made_ahead_are_handed_out_once_in_order() -> None:
    """``top_up_rerandomizers`` makes re-randomizers for the next phase as aggregator;
    ``rerandomizers`` hands them out first, splits a piece it needs only part of (the rest
    stays for later), and makes what is missing new: no value twice, each an encryption of
    0 under the peer's key. Another key drops them; an inline executor makes none ahead."""
    from ppbn.protocols.executor import InlineExecutor
    from ppbn.protocols.paillier import rerandomizer_spec

    config = TablesConfig(key_bits=1024, workers=2, serial_below=0)
    with TablesSession(config) as peer, TablesSession(config) as session:
        keys = peer.own_keys()
        spec = rerandomizer_spec(keys.public, peer.encryptor.base, 40, 1000)
        width = keys.public.ciphertext_bytes
        executor = session.executor

        def values(pieces) -> list[int]:
            blob = b"".join(p if isinstance(p, bytes) else p.result() for p in pieces)
            return [int.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]

        session.top_up_rerandomizers(spec, 5, executor)
        session.top_up_rerandomizers(spec, 5, executor)  # already waiting: nothing more
        assert session.reserved == 5
        first = values(session.rerandomizers(spec, 3, executor))
        assert len(first) == 3 and session.reserved == 2
        second = values(session.rerandomizers(spec, 4, executor))  # 2 made ahead, 2 new
        assert len(second) == 4 and not session.reserved
        assert len(set(first + second)) == 7
        assert all(keys.decrypt(value) == 0 for value in first + second)
        session.top_up_rerandomizers(spec, 2, executor)
        own = session.own_keys()
        other = rerandomizer_spec(own.public, session.encryptor.base, 40, 1000)
        assert len(values(session.rerandomizers(other, 1, executor))) == 1 and not session.reserved
        session.top_up_rerandomizers(spec, 3, InlineExecutor())
        assert not session.reserved
