"""Oblivious transfer: the receiver gets exactly its chosen messages, and the other
message does not decrypt under the receiver's key; SoftSpokenOT's punctured GGM trees and
the size and look of the receiver's extension messages."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ppbn.protocols.base_ot import (
    DH_GROUPS,
    base_ot_receive,
    base_ot_send,
    dh_bits_for,
    dh_group,
    random_exponent,
)
from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.ggm import ggm_tree, puncture_choices, punctured_leaves
from ppbn.protocols.ot import (
    CHUNK_OTS,
    SUBFIELD_CHOICES,
    ColumnStreams,
    OTReceiver,
    OTSender,
    check_subfield_bits,
    chunk_count,
    chunk_sums,
)
from ppbn.protocols.seeds import RandomStream, TaskSeeds

GROUP_BITS = sorted(DH_GROUPS)


def fresh() -> RandomStream:
    """A party's randomness, as the OT classes draw it: a stream under a fresh OS seed."""
    return RandomStream(TaskSeeds().next())


@pytest.mark.parametrize("bits", GROUP_BITS)
def test_groups_are_the_rfc3526_safe_prime_subgroups(bits: int) -> None:
    group = dh_group(bits)
    p = group.p
    assert p.bit_length() == bits and group.element_bytes == bits // 8
    assert gmpy2.is_prime(p, 50) and gmpy2.is_prime((p - 1) // 2, 50)
    assert gmpy2.powmod(group.generator, (p - 1) // 2, p) == 1  # 2 generates the QR subgroup


def test_group_follows_the_paillier_key_size() -> None:
    assert dh_bits_for(1024) == 2048 and dh_bits_for(2048) == 2048 and dh_bits_for(3072) == 3072
    with pytest.raises(ValueError, match="base-OT group"):
        dh_group(1536)
    with pytest.raises(ValueError, match="base-OT group"):
        OTSender(memory_channel_pair()[0], dh_bits=4096)


@pytest.mark.parametrize("bits", GROUP_BITS)
def test_exponents_are_uniform_short_and_unbiased_in_parity(bits: int) -> None:
    group = dh_group(bits)
    stream = RandomStream(TaskSeeds().next())
    samples = [int(random_exponent(group, stream)) for _ in range(400)]
    odd = sum(e & 1 for e in samples)
    assert 140 < odd < 260  # binomial(400, 1/2): 6 standard deviations either side
    assert all(0 < e < 1 << group.exponent_bits for e in samples)
    assert max(samples).bit_length() > group.exponent_bits - 8  # full width, not truncated


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 4), st.integers(1, 2**320 - 1))
def test_exponent_sampler_rejects_zero(zeros: int, value: int) -> None:
    """The sampler draws again on 0 (and only then); its result is the first non-zero draw."""
    draws = iter([0] * zeros + [value])

    class Draws:
        def randbits(self, bits: int) -> int:
            return next(draws)

    assert random_exponent(dh_group(2048), Draws()) == value


@pytest.mark.parametrize("bits", GROUP_BITS)
def test_base_ot_gives_the_chosen_key_only(bits: int) -> None:
    group = dh_group(bits)
    choices = np.array([0, 1, 1, 0, 1, 0, 0, 1], dtype=np.uint8)
    (k0, k1), got = run_two_party(
        lambda ch: base_ot_send(ch, len(choices), group, b"", fresh()),
        lambda ch: base_ot_receive(ch, choices, group, b"", fresh()),
    )
    for c, a, b, g in zip(choices, k0, k1, got, strict=True):
        assert g == (b if c else a)
        assert g != (a if c else b)


def _outside_elements(p: int) -> list[int]:
    """Values a peer might send that are not non-trivial subgroup elements: out of range,
    the identity, the order-2 element p - 1, and non-residues (outside the subgroup; -1 is
    one since p = 3 mod 4, so -4 is one too)."""
    non_residue = next(x for x in range(3, 100) if gmpy2.jacobi(x, p) == -1)
    return [0, 1, p - 1, p, (1 << p.bit_length()) - 1, non_residue, p - 4]


@pytest.mark.parametrize("bits", GROUP_BITS)
def test_base_ot_rejects_elements_outside_the_subgroup(bits: int) -> None:
    group = dh_group(bits)
    width = group.element_bytes
    for bad in _outside_elements(group.p):

        def bad_sender(ch, bad=bad):
            ch.send_ints("ot.base.A", [bad], width)

        with pytest.raises(ProtocolError, match=f"subgroup of {group.name}"):
            run_two_party(
                bad_sender,
                lambda ch: base_ot_receive(ch, np.zeros(4, np.uint8), group, b"", fresh()),
            )

        def bad_receiver(ch, bad=bad):
            ch.recv_ints("ot.base.A", 1, width)
            ch.send_ints("ot.base.B", [4, bad], width)  # 4 = 2^2 is a valid element

        with pytest.raises(ProtocolError, match=f"subgroup of {group.name}"):
            run_two_party(lambda ch: base_ot_send(ch, 2, group, b"", fresh()), bad_receiver)


def test_parties_on_different_groups_fail_cleanly() -> None:
    with pytest.raises(ProtocolError, match="ot.base.A"):
        run_two_party(
            lambda ch: base_ot_send(ch, 2, dh_group(3072), b"", fresh()),
            lambda ch: base_ot_receive(ch, np.zeros(2, np.uint8), dh_group(2048), b"", fresh()),
            timeout_s=10,
        )


@pytest.mark.parametrize(
    ("m", "k"), [(1, 8), (7, 8), (300, 8), (70_000, 8), (300, 4), (CHUNK_OTS + 9, 4)]
)
def test_chosen_message_ot_extension(m: int, k: int) -> None:
    """Both k, one block and two (the second block's ciphertexts follow its own u)."""
    rng = np.random.default_rng(m)
    m0 = rng.integers(0, 2**64 - 1, size=(m, 2), dtype=np.uint64, endpoint=True)
    m1 = rng.integers(0, 2**64 - 1, size=(m, 2), dtype=np.uint64, endpoint=True)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    pair = memory_channel_pair(timeout_s=30, keep_transcript=True)

    def sender(ch):
        s = OTSender(ch, subfield_bits=k)
        s.send(m0, m1)
        s.send(m1, m0)  # a second batch continues the PRG streams and tweak counter
        return s.ots

    def receiver(ch):
        r = OTReceiver(ch, subfield_bits=k)
        return r.receive(choices), r.receive(choices), r.ots

    sent, (got, got_swapped, received) = run_two_party(sender, receiver, pair=pair)
    assert sent == received == 2 * m
    chosen = np.where(choices[:, None] == 1, m1, m0)
    other = np.where(choices[:, None] == 1, m0, m1)
    assert (got == chosen).all()
    assert (got_swapped == other).all()

    # The receiver saw both ciphertexts of the first batch; its key opens only the chosen one.
    receiver_end = pair[1]
    first_batch = [p for tag, p in receiver_end.transcript if tag == "ot.ext.y"][
        : -(-m // CHUNK_OTS)
    ]
    cipher = np.frombuffer(b"".join(first_batch), dtype=np.uint64).reshape(m, 2, 2)
    rows = np.arange(m)
    pad = cipher[rows, choices.astype(np.intp)] ^ got
    opened_other = cipher[rows, 1 - choices.astype(np.intp)] ^ pad
    assert not (opened_other == other).all(axis=1).any()


@pytest.mark.parametrize(("bits", "k"), [(bits, 8) for bits in GROUP_BITS] + [(GROUP_BITS[0], 4)])
def test_correlated_ot_extension(bits: int, k: int) -> None:
    m = 5000
    rng = np.random.default_rng(9)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    delta = rng.integers(0, 2**64 - 1, size=2, dtype=np.uint64, endpoint=True)

    def sender(ch):
        return OTSender(ch, dh_bits=bits, subfield_bits=k).send_correlated(m, delta)

    def receiver(ch):
        return OTReceiver(ch, dh_bits=bits, subfield_bits=k).receive_correlated(choices)

    pair = memory_channel_pair(timeout_s=30, keep_transcript=True)
    x0, got = run_two_party(sender, receiver, pair=pair)
    # the extension's sender is the base-OT receiver: it receives A
    base_a = next(p for tag, p in pair[0].transcript if tag == "ot.base.A")
    assert len(base_a) == bits // 8  # the base OTs ran in the group asked for
    assert (got == np.where(choices[:, None] == 1, x0 ^ delta, x0)).all()
    assert len(np.unique(x0[:, 0])) == m  # the sender's messages are fresh random blocks


def test_bad_choice_bits_are_rejected() -> None:
    a, _ = memory_channel_pair(timeout_s=1)
    with pytest.raises(ValueError, match="0 or 1"):
        OTReceiver(a).receive([0, 2, 1])


@pytest.mark.parametrize("k", [0, 1, 3, 16, True, 4.0])
def test_only_the_subfields_the_extension_runs_at_are_accepted(k) -> None:
    with pytest.raises(ValueError, match="k must be 4 or 8"):
        OTSender(memory_channel_pair()[0], subfield_bits=k)
    assert [check_subfield_bits(k) for k in SUBFIELD_CHOICES] == list(SUBFIELD_CHOICES)


def test_ends_at_different_k_fail_with_a_protocol_error() -> None:
    """k is agreed by the job, not sent: a receiver at 4 and a sender at 8 disagree on the
    size of the u message, which the sender refuses by name."""
    pair = memory_channel_pair(timeout_s=5)
    with pytest.raises(ProtocolError, match="ot.ext.u"):
        run_two_party(
            lambda ch: OTSender(ch, subfield_bits=8).pads(64),
            lambda ch: OTReceiver(ch, subfield_bits=4).pads(np.zeros(64, np.uint8)),
            pair=pair,
        )


@given(st.binary(min_size=16, max_size=16), st.data())
@settings(max_examples=40, deadline=None)
@pytest.mark.parametrize("k", SUBFIELD_CHOICES)
def test_punctured_tree_gives_every_leaf_but_the_point(k: int, root: bytes, data) -> None:
    point = data.draw(st.integers(0, (1 << k) - 1))
    leaves, sums = ggm_tree(root, k)
    assert len(set(leaves)) == 1 << k
    off_path = [sums[level][side] for level, side in enumerate(puncture_choices(point, k))]
    got = punctured_leaves(point, off_path, k)
    assert got[:point] == leaves[:point] and got[point + 1 :] == leaves[point + 1 :]
    assert got[point] == bytes(16)  # the one leaf the sender must not know


@pytest.mark.parametrize(("k", "u_bytes"), [(8, 2), (4, 4)])
def test_receiver_sends_128_over_k_bits_and_its_messages_look_uniform(k: int, u_bytes: int) -> None:
    """u = R ^ c per chunk: 16 bits per OT at k = 8 (an eighth of IKNP's), 32 at k = 4, and
    uniform whatever the choices (all 0 or all 1)."""
    m = 8192
    seen = []
    for value in (0, 1):
        pair = memory_channel_pair(timeout_s=30, keep_transcript=True)
        choices = np.full(m, value, np.uint8)
        run_two_party(
            lambda ch: OTSender(ch, subfield_bits=k).pads(m),
            lambda ch, c=choices: OTReceiver(ch, subfield_bits=k).pads(c),
            pair=pair,
        )
        (u,) = [p for tag, p in pair[0].transcript if tag == "ot.ext.u"]
        assert len(u) == chunk_count(k) * m // 8 == u_bytes * m
        seen.append(np.frombuffer(u, dtype=np.uint8))
    for u in seen:
        assert stats.chisquare(np.bincount(u, minlength=256)).pvalue > 1e-4
    assert stats.ks_2samp(seen[0], seen[1]).pvalue > 1e-4


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 200), st.integers(1, 40))
@pytest.mark.parametrize("k", SUBFIELD_CHOICES)
def test_chunk_sums_are_the_xors_over_the_leaves_with_each_bit_set(
    k: int, offset: int, width: int
) -> None:
    """The halving in ``chunk_sums`` against the definition: S[i, b] is the XOR of chunk i's
    leaf streams x with bit b of x set and T[i] that of all of them, at any offset of the
    streams (an open set of streams read in order, and streams opened at the offset)."""
    chunks, n_leaves = chunk_count(k), 1 << k
    keys = RandomStream(b"chunk sums".ljust(32, b"\0")).bytes(16 * chunks * n_leaves)
    streams = ColumnStreams(keys).read(0, offset + width)[:, offset:]
    leaves = streams.reshape(chunks, n_leaves, width)
    has_bit = (np.arange(n_leaves)[None, :] >> np.arange(k)[:, None]) & 1  # (k, 2^k)
    expected = np.stack(
        [np.bitwise_xor.reduce(leaves[:, has_bit[b] == 1], axis=1) for b in range(k)], axis=1
    )
    opened = ColumnStreams(keys)
    opened.read(0, offset)
    for source in (keys, opened):
        sums, totals = chunk_sums(source, offset, width, k)
        np.testing.assert_array_equal(sums[..., :width], expected)
        np.testing.assert_array_equal(totals[:, :width], np.bitwise_xor.reduce(leaves, axis=1))
