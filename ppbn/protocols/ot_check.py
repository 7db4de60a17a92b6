"""The OT extension's consistency check above ``semi-honest``: a receiver whose u messages
fit no single choice vector is caught before it gets anything for the block.

Why it is needed. The sender's rows are q_j = t_j ^ c_j s only if the receiver used one
choice bit c_j for OT j in every chunk of its u message (``ot.sender_columns``). A receiver
that sends chunk i with c_j flipped gets q_j = t_j ^ (s restricted to chunk i), so one of
the sender's pads for OT j is H(t_j ^ s_i) for the chunk's k bits s_i: 2^k guesses
against any message it can recognise open it, chunk after chunk all of s, and with s
every pad of the extension, the correlation delta of ``send_correlated`` included (the
garbler's free-XOR offset in Yao: every label, so the garbler's inputs).

The check (Keller, Orsini and Scholl, CRYPTO 2015, Sec. 4, as Roy, CRYPTO 2022, Sec. 5,
carries it over to SoftSpokenOT's subspace VOLE). Each extension block carries
``PADDING_OTS`` = 256 extra OTs with random choice bits after its real ones; they are
never hashed or used. Once the receiver's u of the block is in, the sender sends a
fresh random 16-byte challenge; both expand it (AES-128-CTR) into weights chi_j in
GF(2^128), one per OT of the block, padding included. The receiver answers
x = sum chi_j c_j and t = sum chi_j t_j; the sender checks sum chi_j q_j == t + x * s
(products in GF(2^128) = GF(2)[X] / (X^128 + X^7 + X^2 + X + 1), bit b of a block the
coefficient of X^b) and raises ``CheatingDetected("ot.consistency")`` on a mismatch,
before it sends anything derived from that block's pads. The sums are taken over the
columns of q and t as the extension holds them (``weighted_column_sum``): one table lookup
per 4 OTs and column, 33 ns an OT (``kernels.bits.weighted_row_sums``).

What the answer reveals: x masks the real choices with the padding's, which is uniform
over GF(2^128) as soon as the padding weights span it, and t = sum chi_j q_j + x * s is
fixed by x and what the sender holds. KOS15 pads with kappa + 40 OTs, enough for a
challenge drawn by coin tossing (their weights fail to span with probability 2^-40). Here
the sender draws the challenge alone, so a cheating sender could try seeds offline until
the padding weights of one fail to span, then learn a parity of the choices from x; 128
spare weights make each try succeed with probability 2^-128, for 88 OTs more a block.

Soundness, and what a cheating receiver can still learn. Whatever it sends (u chunks with
different choices, or GGM level sums that fit no tree, which make the sender's leaves
depend on its point), the sender's sum chi_j q_j is a function of s that the receiver can
compute, and after the challenge it picks x and t; the check then passes exactly for the
s in a set of its choosing. Passing tells it that s lies in that set, which happens with
probability |set| / 2^128: it learns l bits of s only by risking an abort with
probability 1 - 2^-l (as in KOS15, whose check allows the same guessing). Flipping one
OT in one chunk with the honest answer passes iff that chunk of s is zero, 2^-k; choices
that differ between chunks pass without such a guess only if two chunks' weighted sums
collide, probability 2^-128 per pair of chunks for the challenge drawn after u. The
remaining unknown bits of s keep the pads of IKNP03 / ALSZ13 hashing pseudorandom. Each
block is checked on its own with its own challenge, so the guesses of many blocks only
add up: the abort probability grows with the bits learned. The check says nothing about a
cheating sender (one that sends inconsistent messages); that is the next row of
docs/decisions/threat-model.md.
"""

from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.kernels.bits import weighted_row_sums
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.security import CheatingDetected
from ppbn.protocols.seeds import RandomStream

FIELD_BITS = 128  # GF(2^128), the width of the extension's rows
FIELD_MASK = (1 << FIELD_BITS) - 1
# extra random-choice OTs per checked block, so that x = sum chi_j c_j is uniform: KOS15's
# kappa + s with s = 128, not 40, since the sender picks the challenge (module doc); a
# multiple of 8, so the padding fills whole bytes of the columns
PADDING_OTS = 2 * FIELD_BITS
CHALLENGE_BYTES = 16
CHECK = "ot.consistency"


def gf_mul(a: int, b: int) -> int:
    """a * b in GF(2^128): the carry-less product, reduced (a few per block, in Python)."""
    product = 0
    while b:
        if b & 1:
            product ^= a
        a <<= 1
        b >>= 1
    return gf_reduce(product)


def gf_reduce(value: int) -> int:
    """A polynomial of degree below 255 modulo X^128 + X^7 + X^2 + X + 1 (GCM's): the high
    half h comes back as h (X^7 + X^2 + X + 1)."""
    while value >> FIELD_BITS:
        high = value >> FIELD_BITS
        value = (value & FIELD_MASK) ^ high ^ (high << 1) ^ (high << 2) ^ (high << 7)
    return value


def element(words: np.ndarray) -> int:
    """A 128-bit block (2,) uint64 as a field element: bit b is the coefficient of X^b."""
    return int(words[0]) | int(words[1]) << 64


def element_words(value: int) -> np.ndarray:
    """The (2,) uint64 block of a field element (``element``'s inverse)."""
    return np.array([value & (2**64 - 1), value >> 64], dtype=np.uint64)


def padding_choices(stream: RandomStream) -> np.ndarray:
    """The random choice bits of a block's ``PADDING_OTS``, from the receiver's stream."""
    drawn = np.frombuffer(stream.bytes(PADDING_OTS // 8), dtype=np.uint8)
    return np.unpackbits(drawn, bitorder="little")


def challenge_weights(challenge: bytes, count: int) -> np.ndarray:
    """The weights chi_j of a block's ``count`` OTs: AES-128-CTR under the challenge, as
    (n, 2) uint64 with n = count rounded up to a multiple of 64, zero past ``count`` (the
    padding bits of the block's last word count for nothing)."""
    words = -(-count // 64) * 64
    stream = Cipher(algorithms.AES(challenge), modes.CTR(bytes(16))).encryptor()
    weights = np.zeros((words, 2), dtype=np.uint64)
    weights[:count] = np.frombuffer(stream.update(bytes(16 * count)), dtype=np.uint64).reshape(
        count, 2
    )
    return weights


def weighted_column_sum(columns: np.ndarray, weights: np.ndarray) -> int:
    """sum_j chi_j r_j over the rows r_j of the bit matrix whose 128 columns are given
    (128, bytes) uint8, bytes a multiple of 8 covering the weights: per column b the XOR
    of the weights of its set bits, then sum_b X^b times it (Horner, in Python)."""
    sums = np.empty((columns.shape[0], 2), dtype=np.uint64)
    weighted_row_sums(columns.view(np.uint64), weights, sums)
    total = 0
    for column in range(columns.shape[0] - 1, -1, -1):
        total = gf_reduce(total << 1) ^ element(sums[column])
    return total


def _row_words(bits: np.ndarray, words: int) -> np.ndarray:
    """Choice bits packed into one row of ``words`` uint64 words (zero past the bits)."""
    row = np.zeros(words * 8, dtype=np.uint8)
    packed = np.packbits(bits, bitorder="little")
    row[: packed.size] = packed
    return row.view(np.uint64)[None, :]


def receiver_answer(
    t_columns: np.ndarray, choice_bits: np.ndarray, challenge: bytes, count: int
) -> np.ndarray:
    """The receiver's answer (x, t) as (2, 2) uint64: x = sum chi_j c_j over its choice bits
    (the block's, then the padding's) and t = sum chi_j t_j over its t columns."""
    weights = challenge_weights(challenge, count)
    chosen = np.empty((1, 2), dtype=np.uint64)
    weighted_row_sums(_row_words(choice_bits[:count], weights.shape[0] // 64), weights, chosen)
    t_sum = weighted_column_sum(t_columns, weights)
    return np.stack([chosen[0], element_words(t_sum)])


def sender_sum(q_columns: np.ndarray, challenge: bytes, count: int) -> int:
    """The sender's side of the check: sum chi_j q_j over the block's q columns."""
    return weighted_column_sum(q_columns, challenge_weights(challenge, count))


def send_challenge(channel: Channel, stream: RandomStream) -> bytes:
    """Draw a block's challenge from the sender's stream and send it."""
    challenge = stream.bytes(CHALLENGE_BYTES)
    channel.send("ot.ext.challenge", challenge)
    return challenge


def receive_challenge(channel: Channel) -> bytes:
    challenge = channel.recv("ot.ext.challenge", max_bytes=CHALLENGE_BYTES)
    if len(challenge) != CHALLENGE_BYTES:
        raise ProtocolError(f"ot.ext.challenge has {len(challenge)} bytes, not {CHALLENGE_BYTES}")
    return challenge


def receive_answer(channel: Channel) -> np.ndarray:
    return channel.recv_array("ot.ext.check", np.uint64, (2, 2))


def verify_answer(
    q_sum: int, answer: np.ndarray, s: int, challenge: bytes, first: int, size: int
) -> None:
    """CheatingDetected unless sum chi_j q_j == t + x * s for the receiver's (x, t). The
    evidence names the block (its first OT and size) and holds digests only."""
    x, t = element(answer[0]), element(answer[1])
    if q_sum == t ^ gf_mul(x, s):
        return
    raise CheatingDetected(
        CHECK,
        f"the receiver's u messages of OTs {first} to {first + size - 1} fit no single "
        "choice vector",
        {
            "first_ot": first,
            "ots": size,
            "challenge_sha256": _digest(challenge),
            "answer_sha256": _digest(answer.tobytes()),
            "expected_sha256": _digest(q_sum.to_bytes(16, "little")),
        },
    )


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
