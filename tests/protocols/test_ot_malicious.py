"""The OT extension against a malicious receiver: a receiver whose u flips the choice bit
of an OT in a chunk takes the sender's secret s, and with it the other message of every
OT and the correlation of ``send_correlated``, at the semi-honest level; at the malicious
level the sender's consistency check (``ot_check``) catches it before it sends anything
for that block. Honest runs at the malicious level are correct and the same bytes inline
and on a pool."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.circuits.garble import FixedKeyHash
from ppbn.kernels.bits import transpose_bits
from ppbn.protocols.base_ot import DEFAULT_DH_BITS, base_ot_send, dh_group
from ppbn.protocols.channel import Channel, ProtocolError, memory_channel_pair, run_two_party
from ppbn.protocols.constants import SUBFIELD_CHOICES
from ppbn.protocols.executor import LocalExecutor
from ppbn.protocols.ggm import ggm_tree, xor_blocks
from ppbn.protocols.ot import (
    CHUNK_OTS,
    KAPPA,
    ColumnStreams,
    OTReceiver,
    OTSender,
    chunk_count,
    extension_protocol,
    receiver_columns,
)
from ppbn.protocols.ot_check import (
    PADDING_OTS,
    challenge_weights,
    element,
    gf_mul,
    receive_challenge,
    receiver_answer,
    weighted_column_sum,
)
from ppbn.protocols.security import CheatingDetected
from ppbn.protocols.seeds import RandomStream, TaskSeeds

M = 1000  # one block
SENDER_SEED = bytes(range(32))


class HostileReceiver:
    """A receiver written from the extension's public parts: an honest set-up, then u
    messages with chosen choice bits flipped in chosen chunks. It keeps its t rows, from
    which the flipped OTs' pads are 2^k guesses away."""

    def __init__(self, channel: Channel, k: int, security: str) -> None:
        self.channel, self.k, self.checked = channel, k, security != "semi-honest"
        stream = RandomStream(TaskSeeds().next())
        keys0, keys1 = base_ot_send(channel, KAPPA, dh_group(DEFAULT_DH_BITS), b"", stream)
        masked = np.empty((KAPPA, 2, 16), dtype=np.uint8)
        leaves = []
        for chunk in range(chunk_count(k)):
            chunk_leaves, sums = ggm_tree(stream.bytes(16), k)
            leaves += chunk_leaves
            for level, (left, right) in enumerate(sums):
                row = chunk * k + level
                masked[row, 0] = np.frombuffer(xor_blocks(left, keys0[row]), dtype=np.uint8)
                masked[row, 1] = np.frombuffer(xor_blocks(right, keys1[row]), dtype=np.uint8)
        channel.send_array("ot.ext.ggm", masked)
        self.streams = ColumnStreams(b"".join(leaves))
        self.offset = 0

    def extend(self, choices: np.ndarray, flips: list[tuple[int, int]]) -> np.ndarray:
        """Send one block's u for ``choices`` with OT j's bit flipped in chunk i for each
        (i, j) of ``flips``, answer the challenge as an honest receiver of ``choices``
        would (at the malicious level, with zero padding), return the t rows."""
        m = choices.size
        count = m + (PADDING_OTS if self.checked else 0)
        bits = np.zeros(max(8, -(-count // 8) * 8), dtype=np.uint8)
        bits[:m] = choices
        u, t_cols = receiver_columns(self.streams, self.offset, bits, self.k)
        self.offset += bits.size // 8
        for chunk, j in flips:
            u[chunk, j // 8] ^= np.uint8(1 << (j % 8))
        self.channel.send_array("ot.ext.u", u)
        if self.checked:
            challenge = receive_challenge(self.channel)
            self.channel.send_array("ot.ext.check", receiver_answer(t_cols, bits, challenge, count))
        return transpose_bits(t_cols, m).view(np.uint64)


def _pads(k: int, rows: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    return FixedKeyHash(extension_protocol(k) + b"/", b"").hash(rows, tweaks)


def _chunk_block(chunk: int, k: int, value: int) -> np.ndarray:
    """A 128-bit block holding ``value`` in chunk ``chunk``'s k bits."""
    whole = value << (chunk * k)
    return np.array([whole & (2**64 - 1), whole >> 64], dtype=np.uint64)


def _recover_s(k: int, cipher: np.ndarray, t_rows: np.ndarray, attacked: list[int]) -> np.ndarray:
    """s, chunk by chunk: OT attacked[i] (choice 0, flipped in chunk i) has q = t ^ s_i, so
    its first ciphertext opens under the one guess of s_i that leaves a 64-bit message."""
    s = np.zeros(2, dtype=np.uint64)
    for chunk, j in enumerate(attacked):
        guesses = np.stack([t_rows[j] ^ _chunk_block(chunk, k, g) for g in range(1 << k)])
        opened = cipher[j, 0] ^ _pads(k, guesses, np.full(1 << k, j, dtype=np.uint64))
        (right,) = np.flatnonzero(opened[:, 1] == 0)
        s ^= _chunk_block(chunk, k, int(right))
    return s


def _short_messages(rng: np.random.Generator, m: int) -> np.ndarray:
    """64-bit values in 128-bit blocks (as the share arithmetic's short values): a message
    the receiver can recognise once a guess opens it."""
    out = np.zeros((m, 2), dtype=np.uint64)
    out[:, 0] = rng.integers(0, 2**64 - 1, size=m, dtype=np.uint64, endpoint=True)
    return out


@pytest.mark.parametrize("k", SUBFIELD_CHOICES)
def test_semi_honest_extension_gives_a_hostile_receiver_s_every_message_and_delta(k: int) -> None:
    rng = np.random.default_rng(k)
    m0, m1 = _short_messages(rng, M), _short_messages(rng, M)
    delta = rng.integers(0, 2**64 - 1, size=2, dtype=np.uint64, endpoint=True)
    attacked = rng.choice(M, size=chunk_count(k), replace=False).tolist()
    choices = np.zeros(M, dtype=np.uint8)

    def sender(ch):
        end = OTSender(ch, subfield_bits=k)
        end.send(m0, m1)
        end.send_correlated(M, delta)

    def receiver(ch):
        hostile = HostileReceiver(ch, k, "semi-honest")
        t_rows = hostile.extend(choices, list(enumerate(attacked)))
        cipher = ch.recv_array("ot.ext.y", np.uint64, (M, 2, 2))
        s = _recover_s(k, cipher, t_rows, attacked)
        tweaks = np.arange(M, dtype=np.uint64)
        other = cipher[:, 1] ^ _pads(k, t_rows ^ s, tweaks)  # q = t where the choice is 0
        t_next = hostile.extend(choices, [])
        correction = ch.recv_array("ot.ext.y", np.uint64, (M, 2))
        tweaks += M
        deltas = correction ^ _pads(k, t_next, tweaks) ^ _pads(k, t_next ^ s, tweaks)
        return other, deltas

    _, (other, deltas) = run_two_party(sender, receiver, timeout_s=60)
    honest = np.setdiff1d(np.arange(M), attacked)
    np.testing.assert_array_equal(other[honest], m1[honest])  # the message it did not choose
    assert (deltas == delta).all()  # the correlation: Yao's free-XOR offset, every label


@pytest.mark.parametrize("seed", range(20))
def test_malicious_sender_catches_the_hostile_receiver_before_sending_anything(seed: int) -> None:
    k = SUBFIELD_CHOICES[seed % 2]
    rng = np.random.default_rng(100 + seed)
    m0, m1 = _short_messages(rng, M), _short_messages(rng, M)
    flips = list(enumerate(rng.choice(M, size=chunk_count(k), replace=False).tolist()))
    pair = memory_channel_pair(timeout_s=60, keep_transcript=True)

    def sender(ch):
        OTSender(ch, subfield_bits=k, security="malicious").send(m0, m1)

    def receiver(ch):
        HostileReceiver(ch, k, "malicious").extend(np.zeros(M, np.uint8), flips)
        ch.recv_array("ot.ext.y", np.uint64, (M, 2, 2))

    with pytest.raises(CheatingDetected) as caught:
        run_two_party(sender, receiver, pair=pair)
    assert caught.value.check == "ot.consistency"
    assert {"first_ot", "ots", "answer_sha256", "expected_sha256"} <= set(caught.value.evidence)
    assert all(len(v) == 64 for key, v in caught.value.evidence.items() if key.endswith("sha256"))
    assert "ot.ext.y" not in [tag for tag, _ in pair[1].transcript]  # no message for the block


def _sender_s(seed: bytes) -> int:
    """The s an ``OTSender`` with ``TaskSeeds(seed)`` draws: the first 16 bytes of the
    stream of its first seed (white box: the set-up draws s first)."""
    return int.from_bytes(RandomStream(TaskSeeds(seed).next()).bytes(KAPPA // 8), "little")


def test_a_single_flip_passes_exactly_when_its_chunk_of_s_is_zero() -> None:
    """The leakage the check allows (KOS15): flipping OT 5 in chunk 0 and answering as an
    honest receiver passes iff that chunk of s is 0, 2^-k of the time; passing is the
    guess of those k bits, and a wrong guess aborts."""
    k = 4
    seeds = [bytes([n]) * 32 for n in range(256)]
    zero = next(seed for seed in seeds if _sender_s(seed) & 15 == 0)
    other = next(seed for seed in seeds if _sender_s(seed) & 15)
    m0 = m1 = np.zeros((M, 2), dtype=np.uint64)
    for seed, passes in ((zero, True), (other, False)):

        def sender(ch, seed=seed):
            OTSender(ch, subfield_bits=k, seeds=TaskSeeds(seed), security="malicious").send(m0, m1)

        def receiver(ch):
            HostileReceiver(ch, k, "malicious").extend(np.zeros(M, np.uint8), [(0, 5)])
            return ch.recv_array("ot.ext.y", np.uint64, (M, 2, 2))

        if passes:
            run_two_party(sender, receiver, timeout_s=60)
        else:
            with pytest.raises(CheatingDetected):
                run_two_party(sender, receiver, timeout_s=60)


@pytest.mark.parametrize("k", SUBFIELD_CHOICES)
@pytest.mark.parametrize("m", [1, 77, 1000, CHUNK_OTS + 9])
def test_honest_extension_at_the_malicious_level(k: int, m: int) -> None:
    """Chosen, correlated and random OT, several calls on one extension, sizes that are no
    multiple of a byte or a block."""
    rng = np.random.default_rng(m + k)
    m0 = rng.integers(0, 2**64 - 1, size=(m, 2), dtype=np.uint64, endpoint=True)
    m1 = rng.integers(0, 2**64 - 1, size=(m, 2), dtype=np.uint64, endpoint=True)
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    delta = rng.integers(0, 2**64 - 1, size=2, dtype=np.uint64, endpoint=True)

    def sender(ch):
        end = OTSender(ch, subfield_bits=k, security="malicious")
        end.send(m0, m1)
        x0 = end.send_correlated(m, delta)
        return x0, end.pads(m), end.ots

    def receiver(ch):
        end = OTReceiver(ch, subfield_bits=k, security="malicious")
        return end.receive(choices), end.receive_correlated(choices), end.pads(choices), end.ots

    (x0, (pad0, pad1), sent), (chosen, correlated, pads, received) = run_two_party(
        sender, receiver, timeout_s=120
    )
    pick = choices[:, None] == 1
    np.testing.assert_array_equal(chosen, np.where(pick, m1, m0))
    np.testing.assert_array_equal(correlated, np.where(pick, x0 ^ delta, x0))
    np.testing.assert_array_equal(pads, np.where(pick, pad1, pad0))
    assert sent == received == 3 * m


def test_ends_at_different_levels_fail_with_a_protocol_error() -> None:
    """The level is agreed by the job, not sent: a checked sender refuses the unpadded u."""
    with pytest.raises(ProtocolError, match="ot.ext.u"):
        run_two_party(
            lambda ch: OTSender(ch, security="malicious").pads(64),
            lambda ch: OTReceiver(ch).pads(np.zeros(64, np.uint8)),
            timeout_s=10,
        )


def test_the_weighted_sum_is_the_sum_of_field_products() -> None:
    """``weighted_column_sum`` over columns (the compiled table lookups, then Horner)
    equals sum_j chi_j q_j computed row by row with ``gf_mul``; and X^127 * X reduces by
    X^128 = X^7 + X^2 + X + 1."""
    assert gf_mul(1 << 127, 2) == 0x87
    rng = np.random.default_rng(5)
    count = 200
    rows = rng.integers(0, 2**64 - 1, size=(count, 2), dtype=np.uint64, endpoint=True)
    weights = challenge_weights(bytes(range(16)), count)
    padded = np.zeros((256, 2), dtype=np.uint64)
    padded[:count] = rows
    columns = transpose_bits(padded.view(np.uint8).reshape(256, 16))  # (128, 32) bytes
    expected = 0
    for j in range(count):
        expected ^= gf_mul(element(weights[j]), element(rows[j]))
    assert weighted_column_sum(columns, weights) == expected
    assert not weights[count:].any()  # no weight past the block's OTs


def _ot_run(executor: LocalExecutor | None) -> tuple[list, list]:
    """Chosen-message and correlated OT over three blocks at the malicious level, fixed
    seeds: both ends' outputs and transcripts."""
    m = 2 * CHUNK_OTS + 1000
    rng = np.random.default_rng(4)
    m0, m1 = (rng.integers(0, 2**63, size=(m, 2), dtype=np.uint64) for _ in range(2))
    choices = rng.integers(0, 2, size=m).astype(np.uint8)
    delta = rng.integers(0, 2**63, size=2, dtype=np.uint64)
    source = None if executor is None else (lambda: executor)
    options = {"executor": source, "inline_below": 0, "security": "malicious", "subfield_bits": 4}

    def sender(ch):
        end = OTSender(ch, seeds=TaskSeeds(SENDER_SEED), **options)
        end.send(m0, m1)
        return end.send_correlated(m, delta)

    def receiver(ch):
        end = OTReceiver(ch, seeds=TaskSeeds(bytes(32)), **options)
        return end.receive(choices), end.receive_correlated(choices)

    pair = memory_channel_pair(timeout_s=120, keep_transcript=True)
    x0, (chosen, correlated) = run_two_party(sender, receiver, pair=pair)
    np.testing.assert_array_equal(chosen, np.where(choices[:, None] == 1, m1, m0))
    np.testing.assert_array_equal(correlated, np.where(choices[:, None] == 1, x0 ^ delta, x0))
    return [x0, chosen, correlated], [list(end.transcript) for end in pair]


def test_checked_blocks_are_bit_identical_inline_and_on_the_pool() -> None:
    inline_out, inline_log = _ot_run(None)
    with LocalExecutor(2) as pool:
        pool_out, pool_log = _ot_run(pool)
    for got, want in zip(pool_out, inline_out, strict=True):
        np.testing.assert_array_equal(got, want)
    assert [tag for tag, _ in inline_log[1]].count("ot.ext.challenge") == 6  # 3 blocks a call
    assert pool_log == inline_log  # every message, byte for byte
