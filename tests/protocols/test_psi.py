"""Private set intersection of record ids (protocols/psi.py, KKRT16): both parties get the
intersection in the same canonical order, what each receives does not depend on the
other's ids outside the intersection, and a hostile peer gets a one-line ProtocolError."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbn.protocols.channel import Channel, ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.psi import (
    Alignment,
    align_records,
    bin_count,
    cuckoo_bins,
    cuckoo_insert,
    derive_subkey,
    hash_ids,
)

KEY = bytes(range(32))


def _align(
    a_ids, b_ids, key=KEY, pair=None, ledgers=(None, None), **kw
) -> tuple[Alignment, Alignment]:
    return run_two_party(
        lambda ch: align_records(ch, "alice", a_ids, key, ledger=ledgers[0], **kw),
        lambda ch: align_records(ch, "bob", b_ids, key, ledger=ledgers[1], **kw),
        timeout_s=30,
        pair=pair,
    )


def _check(a_ids: list[str], b_ids: list[str], shared: set[str]) -> None:
    ra, rb = _align(a_ids, b_ids)
    got_a = [a_ids[i] for i in ra.positions]
    got_b = [b_ids[i] for i in rb.positions]
    assert got_a == got_b  # same records, same canonical order on both sides
    assert set(got_a) == shared and ra.size == rb.size == len(shared)
    assert ra.peer_set_size == len(b_ids) and rb.peer_set_size == len(a_ids)
    assert ra.positions.dtype == np.int64 and rb.positions.dtype == np.int64


def _sets(shared: int, a_only: int, b_only: int, seed: int, weird: set[str] = frozenset()):
    """Disjoint shared / alice-only / bob-only ids, some multi-block and non-ASCII."""
    weird = sorted(weird)
    w_shared, w_a, w_b = weird[0::3], weird[1::3], weird[2::3]
    common = [f"c{seed}-\u00e9\u4e2d-{i}" for i in range(shared)] + w_shared
    a = common + [f"a{seed}-{i}" * (1 + i % 4) for i in range(a_only)] + w_a
    b = common + [f"b{seed}-\U0001f600{i}" for i in range(b_only)] + w_b
    rng = np.random.default_rng(seed)
    a = [a[i] for i in rng.permutation(len(a))]
    b = [b[i] for i in rng.permutation(len(b))]
    return a, b, set(common)


@settings(max_examples=8, deadline=None)
@given(
    st.integers(0, 1000),
    st.integers(0, 1000),
    st.integers(0, 1000),
    st.sets(st.text(max_size=30).filter(lambda s: not s.startswith(("a", "b", "c"))), max_size=12),
    st.integers(0, 2**32),
)
def test_intersection_is_correct_and_in_the_same_order(shared, a_only, b_only, weird, seed) -> None:
    a, b, common = _sets(shared, a_only, b_only, seed, weird)
    _check(a, b, common)


@pytest.mark.parametrize(
    "shared,a_only,b_only",
    [
        (0, 5, 7),
        (0, 0, 5),
        (0, 5, 0),
        (0, 0, 0),
        (300, 0, 0),
        (1, 0, 0),
        (1, 2000, 0),
        (7, 0, 1500),
    ],
    ids=[
        "disjoint",
        "alice-empty",
        "bob-empty",
        "both-empty",
        "full-overlap",
        "one-id",
        "one-shared-in-2001",
        "small-vs-large",
    ],
)
def test_edge_cases(shared: int, a_only: int, b_only: int) -> None:
    a, b, common = _sets(shared, a_only, b_only, seed=shared + a_only + b_only)
    _check(a, b, common)


def test_ledger_records_what_the_psi_revealed() -> None:
    a, b, common = _sets(40, 10, 25, seed=3)
    la, lb = Ledger("alice"), Ledger("bob")
    _align(a, b, ledgers=(la, lb))
    for ledger, own, peer in ((la, a, b), (lb, b, a)):
        values = {e.kind: e.value for e in ledger.entries}
        assert set(values) == {"psi_peer_set_size", "psi_intersection_size", "psi_membership"}
        assert values["psi_peer_set_size"] == len(peer)
        assert values["psi_intersection_size"] == len(common)
        assert values["psi_membership"] == {
            "own_records": len(own),
            "own_records_in_intersection": len(common),
        }


# -- view independence --------------------------------------------------------------------
def _received(a_ids, b_ids, key=KEY) -> tuple[list, list]:
    pair = memory_channel_pair(timeout_s=30, keep_transcript=True)
    _align(a_ids, b_ids, key=key, pair=pair)
    return pair[0].transcript, pair[1].transcript  # what alice received, what bob received


def _chi_square_bytes(data: bytes) -> float:
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    expected = len(data) / 256
    return float(((counts - expected) ** 2 / expected).sum())


def _bit_balance(data: bytes) -> float:
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    return float(bits.mean()), bits.size


def _looks_uniform(data: bytes) -> None:
    # chi-square with 255 degrees of freedom: mean 255, sd 22.6; 420 is p < 1e-9
    assert _chi_square_bytes(data) < 420
    mean, n = _bit_balance(data)
    assert abs(mean - 0.5) < 6 * 0.5 / np.sqrt(n)


def test_views_do_not_depend_on_the_peers_ids_outside_the_intersection() -> None:
    """Two runs with the same intersection and the same set sizes; the other party's ids
    outside the intersection differ. By construction, every message length (and the tag
    sequence) depends only on the two set sizes and the intersection size: checked
    exactly. The contents are pseudorandom (KKRT16 Thm. 2): checked statistically (byte
    chi-square and bit balance of the OPRF values and of the u matrix), and no keyed id
    hash (full or its first 8 bytes) nor any id's UTF-8 of a non-intersecting id appears
    anywhere in the received bytes."""
    shared = [f"shared-{i}" for i in range(300)]
    a1 = shared + [f"alice-only-{i}" for i in range(200)]
    a2 = shared + [f"alice-other-{i}" for i in range(200)]
    b1 = shared + [f"bob-only-{i}" for i in range(250)]
    b2 = shared + [f"bob-other-{i}" for i in range(250)]
    alice_view_1, _ = _received(a1, b1)
    alice_view_2, _ = _received(a1, b2)
    _, bob_view_1 = _received(a1, b1)
    _, bob_view_2 = _received(a2, b1)

    outside = [x for x in a1 + a2 + b1 + b2 if not x.startswith("shared-")]
    hashes = hash_ids(outside, derive_subkey(KEY, b"id")).view(np.uint8).reshape(-1, 16)
    for first, second, tag in (
        (alice_view_1, alice_view_2, "psi.values"),
        (bob_view_1, bob_view_2, "psi.u"),
    ):
        assert [(t, len(p)) for t, p in first] == [(t, len(p)) for t, p in second]
        for view in (first, second):
            _looks_uniform(b"".join(p for t, p in view if t == tag))
            blob = b"".join(p for _, p in view)
            for h in hashes:
                assert bytes(h) not in blob and bytes(h[:8]) not in blob
            for x in outside:
                assert x.encode() not in blob
    matches = b"".join(p for t, p in bob_view_1 if t == "psi.matches")
    assert len(matches) == 8 * len(shared)


# -- hostile peer ---------------------------------------------------------------------------
def _tamper(channel: Channel, changes: dict) -> None:
    """Make ``channel`` rewrite the payloads of its messages whose tags are in ``changes``."""
    original = channel.send

    def send(t: str, payload: bytes) -> None:
        original(t, changes[t](payload) if t in changes else payload)

    channel.send = send  # type: ignore[method-assign]


def _hostile(sender: str, changes: dict, expect: str, **kw) -> ProtocolError:
    """Run the PSI with ``sender``'s messages rewritten; the other side must refuse them
    with a one-line ProtocolError naming the message ``expect`` (and nobody hangs)."""
    a_ids = [f"x{i}" for i in range(60)]
    b_ids = [f"x{i}" for i in range(30, 100)]  # 30 shared; bob holds 70
    pair = memory_channel_pair(timeout_s=20)
    _tamper(pair[0] if sender == "alice" else pair[1], changes)
    with pytest.raises(ProtocolError) as info:
        _align(a_ids, b_ids, pair=pair, **kw)
    message = str(info.value)
    assert "\n" not in message and repr(expect) in message
    return info.value


def _positions(*ranges: tuple[int, int]) -> bytes:
    return np.concatenate([np.arange(a, b) for a, b in ranges]).astype(np.uint64).tobytes()


def _count(n: int):
    return lambda p: struct.pack(">Q", n)


@pytest.mark.parametrize("sender", ["alice", "bob"])
def test_absurd_set_size_is_refused(sender: str) -> None:
    err = _hostile(sender, {"psi.size": _count(2**62)}, "psi.size")
    assert "over the limit" in str(err)


def test_set_size_over_the_callers_limit_is_refused() -> None:
    _hostile("alice", {}, "psi.size", max_peer_records=50)


@pytest.mark.parametrize(
    "sender,changes,expect",
    [
        ("alice", {"psi.u": lambda p: p[:-1]}, "psi.u"),
        ("alice", {"psi.u": lambda p: p + b"\x00"}, "psi.u"),
        ("alice", {"psi.u": lambda p: b""}, "psi.u"),
        ("bob", {"psi.values": lambda p: p[:-3]}, "psi.values"),
        ("bob", {"psi.values": lambda p: p + p}, "psi.values"),
        ("alice", {"psi.match_count": _count(61)}, "psi.match_count"),  # more than the smaller set
        ("alice", {"psi.match_count": _count(2**64 - 1)}, "psi.match_count"),
        ("alice", {"psi.match_count": lambda p: p + p}, "psi.match_count"),
        ("alice", {"psi.match_count": _count(29)}, "psi.matches"),  # fewer than sent
        ("alice", {"psi.matches": lambda p: p + b"\x01"}, "psi.matches"),
        ("alice", {"psi.matches": lambda p: p[:-8] + struct.pack("<Q", 2**63)}, "psi.matches"),
        (
            "alice",
            {"psi.matches": lambda p: p[8:16] + p[:8] + p[16:]},
            "psi.matches",
        ),  # not increasing
        ("alice", {"psi.matches": lambda p: p[:8] + p[:-8]}, "psi.matches"),  # repeated
        # 60 valid positions, 30 in each of the first two lists: some record twice
        (
            "alice",
            {
                "psi.match_count": _count(60),
                "psi.matches": lambda p: _positions((0, 30), (70, 100)),
            },
            "psi.matches",
        ),
    ],
    ids=[
        "u-truncated",
        "u-oversized",
        "u-empty",
        "values-truncated",
        "values-oversized",
        "count-over-smaller-set",
        "count-absurd",
        "count-malformed",
        "count-under-sent",
        "matches-ragged",
        "matches-out-of-range",
        "matches-decreasing",
        "matches-repeated",
        "matches-same-record-twice",
    ],
)
def test_malformed_messages_are_refused(sender: str, changes: dict, expect: str) -> None:
    _hostile(sender, changes, expect)


def test_local_input_errors() -> None:
    ch = memory_channel_pair(timeout_s=1)[0]
    with pytest.raises(ValueError, match="duplicates"):
        align_records(ch, "alice", ["a", "b", "a"], KEY)
    with pytest.raises(ValueError, match="32 bytes"):
        align_records(ch, "alice", ["a"], b"short")
    with pytest.raises(ValueError, match="role"):
        align_records(ch, "carol", ["a"], KEY)


# -- building blocks ------------------------------------------------------------------------
def _cbc_mac_reference(value: str, key: bytes) -> bytes:
    data = value.encode()
    message = len(data).to_bytes(8, "little") + data
    message += bytes(-len(message) % 16)
    state = bytes(16)
    for i in range(0, len(message), 16):
        block = bytes(x ^ y for x, y in zip(state, message[i : i + 16], strict=True))
        state = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(block)
    return state


def test_id_hash_is_length_prefixed_cbc_mac_and_keyed() -> None:
    ids = ["", "a", "a\x00", "x" * 8, "x" * 9, "\u00e9" * 40, "\U0001f600 long id " * 7, "r000"]
    key = derive_subkey(KEY, b"id")
    got = hash_ids(ids, key)
    assert [bytes(row) for row in got.view(np.uint8).reshape(-1, 16)] == [
        _cbc_mac_reference(x, key) for x in ids
    ]
    assert len({bytes(row) for row in got.view(np.uint8).reshape(-1, 16)}) == len(ids)
    other = hash_ids(ids, derive_subkey(bytes(32), b"id"))
    assert not (other == got).all(axis=1).any()  # another job's key: unlinkable hashes


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1000, 5000, 70_000])
def test_cuckoo_insertion_places_every_id_once(n: int) -> None:
    rng = np.random.default_rng(n)
    m = bin_count(n)
    assert m % 8 == 0 and m >= 1.27 * n
    hashed = rng.integers(0, 2**63, size=(n, 2), dtype=np.uint64)
    bins = cuckoo_bins(hashed, os.urandom(16), m)
    assert bins.min() >= 0 and bins.max() < m
    table, choice = cuckoo_insert(bins, m, rng)
    placed = table[table >= 0]
    assert np.array_equal(np.sort(placed), np.arange(n))
    assert np.array_equal(table[bins[np.arange(n), choice]], np.arange(n))


def test_cuckoo_insertion_succeeds_over_many_small_tables() -> None:
    rng = np.random.default_rng(11)
    for trial in range(300):
        n = 1 + trial % 97
        bins = cuckoo_bins(
            rng.integers(0, 2**63, size=(n, 2), dtype=np.uint64), os.urandom(16), bin_count(n)
        )
        cuckoo_insert(bins, bin_count(n), rng)
