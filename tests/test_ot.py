"""Oblivious transfer: the receiver gets exactly its chosen messages, and the other
message does not decrypt under the receiver's key."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.protocols.channel import ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.ot import (
    GENERATOR,
    MODP_2048,
    OTReceiver,
    OTSender,
    base_ot_receive,
    base_ot_send,
    transpose_bits,
)


def test_group_is_the_rfc3526_safe_prime_subgroup() -> None:
    import gmpy2

    assert MODP_2048.bit_length() == 2048
    assert gmpy2.is_prime(MODP_2048) and gmpy2.is_prime((MODP_2048 - 1) // 2)
    assert gmpy2.powmod(GENERATOR, (MODP_2048 - 1) // 2, MODP_2048) == 1


def test_base_ot_gives_the_chosen_key_only() -> None:
    choices = np.array([0, 1, 1, 0, 1, 0, 0, 1], dtype=np.uint8)
    (k0, k1), got = run_two_party(lambda ch: base_ot_send(ch, len(choices)), lambda ch: base_ot_receive(ch, choices))
    for c, a, b, g in zip(choices, k0, k1, got, strict=True):
        assert g == (b if c else a)
        assert g != (a if c else b)


def test_base_ot_rejects_elements_outside_the_subgroup() -> None:
    def bad_sender(ch):
        ch.send_ints("ot.base.A", [MODP_2048 - 1], 256)  # order 2, not in the subgroup

    with pytest.raises(ProtocolError, match="subgroup"):
        run_two_party(bad_sender, lambda ch: base_ot_receive(ch, np.zeros(4, np.uint8)))


@pytest.mark.parametrize(("rows", "cols"), [(128, 8), (128, 1000 * 8), (16, 24)])
def test_transpose_bits_matches_unpacked_transpose(rows: int, cols: int) -> None:
    rng = np.random.default_rng(rows + cols)
    matrix = rng.integers(0, 256, size=(rows, cols // 8), dtype=np.uint8)
    bits = np.unpackbits(matrix, axis=1, bitorder="little")
    expected = np.packbits(bits.T, axis=1, bitorder="little")
    assert (transpose_bits(matrix) == expected).all()


@pytest.mark.parametrize("m", [1, 7, 300, 70_000])
def test_chosen_message_ot_extension(m: int) -> None:
    rng = np.random.default_rng(m)
    m0 = rng.integers(0, 2**64 - 1, size=(m, 2), dtype=np.uint64, endpoint=True)
    m1 = rng.integers(0, 2**64 - 1, size=(m, 2), dtype=np.uint64, endpoint=True)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    pair = memory_channel_pair(timeout_s=30, keep_transcript=True)

    def sender(ch):
        s = OTSender(ch)
        s.send(m0, m1)
        s.send(m1, m0)  # a second batch continues the PRG streams and tweak counter
        return s.ots

    def receiver(ch):
        r = OTReceiver(ch)
        return r.receive(choices), r.receive(choices), r.ots

    sent, (got, got_swapped, received) = run_two_party(sender, receiver, pair=pair)
    assert sent == received == 2 * m
    chosen = np.where(choices[:, None] == 1, m1, m0)
    other = np.where(choices[:, None] == 1, m0, m1)
    assert (got == chosen).all()
    assert (got_swapped == other).all()

    # The receiver saw both ciphertexts of the first batch; its key opens only the chosen one.
    receiver_end = pair[1]
    cipher = np.frombuffer(
        next(p for tag, p in receiver_end.transcript if tag == "ot.ext.y"), dtype=np.uint64
    ).reshape(m, 2, 2)
    rows = np.arange(m)
    pad = cipher[rows, choices.astype(np.intp)] ^ got
    opened_other = cipher[rows, 1 - choices.astype(np.intp)] ^ pad
    assert not (opened_other == other).all(axis=1).any()


def test_correlated_ot_extension() -> None:
    m = 5000
    rng = np.random.default_rng(9)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    delta = rng.integers(0, 2**64 - 1, size=2, dtype=np.uint64, endpoint=True)

    def sender(ch):
        return OTSender(ch).send_correlated(m, delta)

    def receiver(ch):
        return OTReceiver(ch).receive_correlated(choices)

    x0, got = run_two_party(sender, receiver)
    assert (got == np.where(choices[:, None] == 1, x0 ^ delta, x0)).all()
    assert len(np.unique(x0[:, 0])) == m  # the sender's messages are fresh random blocks


def test_bad_choice_bits_are_rejected() -> None:
    a, _ = memory_channel_pair(timeout_s=1)
    with pytest.raises(ValueError, match="0 or 1"):
        OTReceiver(a).receive([0, 2, 1])
