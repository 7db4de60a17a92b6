"""Oblivious transfer: base OTs over a prime-order group and IKNP OT extension.

Base OT: the "simplest OT" of Chou and Orlandi (LATINCRYPT 2015, Fig. 1) in the
quadratic-residue subgroup (prime order q = (p-1)/2) of the 2048-bit MODP group of
RFC 3526 (group 14), generator 2 (a quadratic residue since p = 7 mod 8), with gmpy2.
Exponents have 320 bits, the top of RFC 3526's recommended exponent sizes for this group
(short-exponent discrete-log assumption). Semi-honest security; every received group
element is checked to lie in the subgroup. It yields random OT: the sender gets two
128-bit keys per OT, the receiver the one it chose.

Extension: Ishai, Kilian, Nissim and Petrank (CRYPTO 2003), Sec. 3, with 128 base OTs in
the reverse direction, an AES-CTR PRG to stretch the base keys into columns, and the
correlated-OT variant of Asharov, Lindell, Schneider and Zohner (CCS 2013), Sec. 5.4: for
correlated OT the sender's first message is H(q_j) and only one 16-byte correction per OT
is sent. The hash is the fixed-key tweakable hash of ``ppbn.circuits.garble`` with the
OT's index as tweak, offset by 2^63 so OT tweaks never meet garbling tweaks. The 128 x m bit matrix is transposed with 8x8 bit-block transposes on
uint64 words (numpy), so no per-bit Python work is done.

Messages are 128-bit blocks held as (m, 2) uint64 arrays, the same layout as wire labels.
Both ends count completed OTs in ``ots``.
"""

from __future__ import annotations

import hashlib
import os

import gmpy2
import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.circuits.garble import FixedKeyHash
from ppbn.protocols.channel import Channel, ProtocolError

MODP_2048 = gmpy2.mpz(
    int(
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
        "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
        "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836"
        "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804"
        "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6"
        "955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF",
        16,
    )
)
GENERATOR = gmpy2.mpz(2)
EXPONENT_BITS = 320
ELEMENT_BYTES = 256
KAPPA = 128  # base OTs, the computational security parameter
CHUNK_OTS = 1 << 17  # OTs per extension message: u is 2 MB, y at most 4 MB
TWEAK_DOMAIN = 1 << 63  # OT hash tweaks live above every garbling tweak


# -- base OT ---------------------------------------------------------------------------
def _exponent() -> gmpy2.mpz:
    return gmpy2.mpz(int.from_bytes(os.urandom(EXPONENT_BITS // 8), "big") | 1)


def _check_element(x: int, what: str) -> gmpy2.mpz:
    x = gmpy2.mpz(x)
    if not 1 < x < MODP_2048 - 1 or gmpy2.jacobi(x, MODP_2048) != 1:
        raise ProtocolError(f"base OT: {what} is not an element of the prime-order subgroup")
    return x


def _key(index: int, a: int, b: int, shared: int) -> bytes:
    h = hashlib.sha256(b"ppbn base OT")
    for v in (index, a, b, shared):
        h.update(int(v).to_bytes(ELEMENT_BYTES, "big"))
    return h.digest()[:16]


def base_ot_send(channel: Channel, count: int) -> tuple[list[bytes], list[bytes]]:
    """Random OT, sender side: returns (keys0, keys1), ``count`` 16-byte keys each."""
    a = _exponent()
    big_a = gmpy2.powmod(GENERATOR, a, MODP_2048)
    channel.send_ints("ot.base.A", [big_a], ELEMENT_BYTES)
    bs = [_check_element(b, "B") for b in channel.recv_ints("ot.base.B", count, ELEMENT_BYTES)]
    a_pow_a_inv = gmpy2.invert(gmpy2.powmod(big_a, a, MODP_2048), MODP_2048)
    keys0, keys1 = [], []
    for i, b in enumerate(bs):
        shared0 = gmpy2.powmod(b, a, MODP_2048)
        keys0.append(_key(i, big_a, b, shared0))
        keys1.append(_key(i, big_a, b, shared0 * a_pow_a_inv % MODP_2048))
    return keys0, keys1


def base_ot_receive(channel: Channel, choices: np.ndarray) -> list[bytes]:
    """Random OT, receiver side: the key of each chosen message."""
    (big_a,) = channel.recv_ints("ot.base.A", 1, ELEMENT_BYTES)
    big_a = _check_element(big_a, "A")
    exps = [_exponent() for _ in choices]
    bs = []
    for c, b in zip(choices, exps, strict=True):
        g_b = gmpy2.powmod(GENERATOR, b, MODP_2048)
        bs.append(g_b * big_a % MODP_2048 if c else g_b)
    channel.send_ints("ot.base.B", bs, ELEMENT_BYTES)
    return [_key(i, big_a, bs[i], gmpy2.powmod(big_a, b, MODP_2048)) for i, b in enumerate(exps)]


# -- bit-matrix transpose ------------------------------------------------------------
_MASKS = (
    (np.uint64(7), np.uint64(0x00AA00AA00AA00AA)),
    (np.uint64(14), np.uint64(0x0000CCCC0000CCCC)),
    (np.uint64(28), np.uint64(0x00000000F0F0F0F0)),
)


def transpose_bits(matrix: np.ndarray) -> np.ndarray:
    """Transpose a bit matrix: (r, c/8) uint8 rows -> (c, r/8) uint8 rows; r, c multiples of 8.

    Bits are little-endian within bytes (bit j of a row is bit j % 8 of byte j // 8).
    Works on 8x8 blocks packed in uint64 words (Hacker's Delight, transpose8).
    """
    rows, col_bytes = matrix.shape
    if rows % 8:
        raise ValueError("row count must be a multiple of 8")
    groups = rows // 8
    words = np.empty((groups, col_bytes), dtype=np.uint64)
    np.copyto(words.view(np.uint8).reshape(groups, col_bytes, 8), matrix.reshape(groups, 8, col_bytes).transpose(0, 2, 1))
    tmp = np.empty_like(words)
    for shift, mask in _MASKS:
        np.right_shift(words, shift, out=tmp)
        tmp ^= words
        tmp &= mask
        words ^= tmp
        np.left_shift(tmp, shift, out=tmp)
        words ^= tmp
    out = np.empty((col_bytes * 8, groups), dtype=np.uint8)
    np.copyto(out.reshape(col_bytes, 8, groups), words.view(np.uint8).reshape(groups, col_bytes, 8).transpose(1, 2, 0))
    return out


# -- IKNP extension --------------------------------------------------------------------
class _Prg:
    """AES-CTR keystream under a base-OT key; continues where the last batch stopped."""

    def __init__(self, key: bytes) -> None:
        self._stream = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()

    def fill(self, out: np.ndarray, zeros: memoryview) -> None:
        out[:] = np.frombuffer(self._stream.update(zeros[: out.size]), dtype=np.uint8)


def _tweaks(first: int, m: int) -> np.ndarray:
    return np.arange(TWEAK_DOMAIN + first, TWEAK_DOMAIN + first + m, dtype=np.uint64)


def _padded(m: int) -> int:
    return max(8, -(-m // 8) * 8)


def _send_rows(channel: Channel, tag: str, array: np.ndarray) -> None:
    """Send an array in messages of at most CHUNK_OTS rows (bounded message size)."""
    for start in range(0, array.shape[0], CHUNK_OTS):
        channel.send_array(tag, array[start : start + CHUNK_OTS])


def _recv_rows(channel: Channel, tag: str, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=np.uint64)
    for start in range(0, shape[0], CHUNK_OTS):
        rows = min(CHUNK_OTS, shape[0] - start)
        out[start : start + rows] = channel.recv_array(tag, np.uint64, (rows, *shape[1:]))
    return out


def _as_blocks(values: np.ndarray, m: int, what: str) -> np.ndarray:
    arr = np.ascontiguousarray(values, dtype=np.uint64)
    if arr.shape == (2,):
        arr = np.broadcast_to(arr, (m, 2))
    if arr.shape != (m, 2):
        raise ValueError(f"{what} must have shape ({m}, 2) of uint64, got {arr.shape}")
    return arr


class OTSender:
    """IKNP extension sender: holds the message pairs (and is the base-OT receiver)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ots = 0
        self._prgs: list[_Prg] | None = None
        self._hash = FixedKeyHash()

    def _setup(self) -> None:
        secret = np.frombuffer(os.urandom(KAPPA // 8), dtype=np.uint8)
        self._s_bits = np.unpackbits(secret, bitorder="little")
        self._s_block = secret.view(np.uint64).copy()
        keys = base_ot_receive(self.channel, self._s_bits)
        self._prgs = [_Prg(k) for k in keys]

    def _extend(self, m: int) -> np.ndarray:
        """Rows q_j = t_j ^ r_j s of the next m OTs, as (m, 2) uint64 (one message per chunk)."""
        if self._prgs is None:
            self._setup()
        q_rows = np.empty((m, 2), dtype=np.uint64)
        for start in range(0, m, CHUNK_OTS):
            size = min(CHUNK_OTS, m - start)
            width = _padded(size) // 8
            u = self.channel.recv_array("ot.ext.u", np.uint8, (KAPPA, width))
            cols = np.empty((KAPPA, width), dtype=np.uint8)
            zeros = memoryview(bytes(width))
            for i, prg in enumerate(self._prgs):
                prg.fill(cols[i], zeros)
            cols[self._s_bits.astype(bool)] ^= u[self._s_bits.astype(bool)]
            q_rows[start : start + size] = transpose_bits(cols).view(np.uint64)[:size]
        return q_rows

    def _pads(self, q_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = q_rows.shape[0]
        tweaks = _tweaks(self.ots, m)
        pad0 = self._hash.hash(q_rows, tweaks)
        pad1 = self._hash.hash(q_rows ^ self._s_block, tweaks)
        return pad0, pad1

    def send(self, m0: np.ndarray, m1: np.ndarray) -> None:
        """Chosen-message OT of (m, 2) uint64 blocks: the receiver learns m_c[j] for its c[j]."""
        m = np.asarray(m0).shape[0]
        m0, m1 = _as_blocks(m0, m, "m0"), _as_blocks(m1, m, "m1")
        pad0, pad1 = self._pads(self._extend(m))
        cipher = np.empty((m, 2, 2), dtype=np.uint64)
        np.bitwise_xor(m0, pad0, out=cipher[:, 0])
        np.bitwise_xor(m1, pad1, out=cipher[:, 1])
        _send_rows(self.channel, "ot.ext.y", cipher)
        self.ots += m

    def send_correlated(self, m: int, delta: np.ndarray) -> np.ndarray:
        """Correlated OT: returns random x0 (m, 2); the receiver gets x0 ^ c[j] delta[j]."""
        delta = _as_blocks(delta, m, "delta")
        pad0, pad1 = self._pads(self._extend(m))
        correction = pad0 ^ pad1
        correction ^= delta
        _send_rows(self.channel, "ot.ext.y", correction)
        self.ots += m
        return pad0


class OTReceiver:
    """IKNP extension receiver: holds the choice bits (and is the base-OT sender)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ots = 0
        self._prgs: list[tuple[_Prg, _Prg]] | None = None
        self._hash = FixedKeyHash()

    def _setup(self) -> None:
        keys0, keys1 = base_ot_send(self.channel, KAPPA)
        self._prgs = [(_Prg(k0), _Prg(k1)) for k0, k1 in zip(keys0, keys1, strict=True)]

    def _extend(self, choices: np.ndarray) -> np.ndarray:
        """Send u for each chunk; return the rows t_j (m, 2) uint64."""
        if self._prgs is None:
            self._setup()
        m = choices.shape[0]
        t_rows = np.empty((m, 2), dtype=np.uint64)
        for start in range(0, m, CHUNK_OTS):
            size = min(CHUNK_OTS, m - start)
            padded = _padded(size)
            width = padded // 8
            bits = np.zeros(padded, dtype=np.uint8)
            bits[:size] = choices[start : start + size]
            r = np.packbits(bits, bitorder="little")
            t_cols = np.empty((KAPPA, width), dtype=np.uint8)
            u = np.empty((KAPPA, width), dtype=np.uint8)
            zeros = memoryview(bytes(width))
            for i, (prg0, prg1) in enumerate(self._prgs):
                prg0.fill(t_cols[i], zeros)
                prg1.fill(u[i], zeros)
            u ^= t_cols
            u ^= r
            self.channel.send_array("ot.ext.u", u)
            t_rows[start : start + size] = transpose_bits(t_cols).view(np.uint64)[:size]
        return t_rows

    def _choices(self, choices: np.ndarray | list[int]) -> np.ndarray:
        c = np.asarray(choices, dtype=np.uint8).ravel()
        if c.size and c.max() > 1:
            raise ValueError("choice bits must be 0 or 1")
        return c

    def receive(self, choices: np.ndarray | list[int]) -> np.ndarray:
        """Chosen-message OT: returns m_{c[j]}[j] as (m, 2) uint64."""
        c = self._choices(choices)
        m = c.size
        t_rows = self._extend(c)
        pad = self._hash.hash(t_rows, _tweaks(self.ots, m))
        cipher = _recv_rows(self.channel, "ot.ext.y", (m, 2, 2))
        chosen = cipher[np.arange(m), c.astype(np.intp)]
        chosen ^= pad
        self.ots += m
        return chosen

    def receive_correlated(self, choices: np.ndarray | list[int]) -> np.ndarray:
        """Correlated OT: returns x0[j] ^ c[j] delta[j] as (m, 2) uint64."""
        c = self._choices(choices)
        m = c.size
        t_rows = self._extend(c)
        out = self._hash.hash(t_rows, _tweaks(self.ots, m))
        correction = _recv_rows(self.channel, "ot.ext.y", (m, 2))
        out ^= correction & np.negative(c.astype(np.uint64))[:, None]
        self.ots += m
        return out
