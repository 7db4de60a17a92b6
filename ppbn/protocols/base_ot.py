"""Base oblivious transfer over a prime-order group: the seed OTs of the OT extension.

The extension (``ppbn.protocols.ot``) needs KAPPA = 128 random OTs, once per extension
instance, from public-key operations; this module holds them and their groups, apart from
the symmetric-key extension, so the group choice, the element checks and the key
derivation can be read and tested on their own.

Base OT: the "simplest OT" of Chou and Orlandi (LATINCRYPT 2015, Fig. 1), a
Diffie-Hellman OT in the line of Naor and Pinkas (SODA 2001), in the quadratic-residue
subgroup (prime order q = (p-1)/2) of an RFC 3526 MODP group, generator 2 (a quadratic
residue since p = 7 mod 8), with gmpy2. Two groups (``DH_GROUPS``): group 14 (2048-bit
p) and group 15 (3072-bit p). A job picks the group that matches its Paillier key (``dh_bits_for``):
3072-bit keys use group 15 so the whole job sits at the 128-bit level of NIST SP 800-57
Part 1 (Table 2); 2048-bit keys (112-bit level) and the 1024-bit test keys use group 14.
Both parties derive the group from their own checked job parameters, never from a
received value; every received group element is checked to lie in the prime-order
subgroup of the group in use (``_check_element``).

Exponents are uniform in [1, 2^k) with k = 320 (group 14) or 420 (group 15), the top of
RFC 3526's recommended exponent sizes (Sec. 8), and never 0 (``random_exponent``). That is the
short-exponent discrete-log assumption (van Oorschot-Wiener, EUROCRYPT 1996): g^b for
such b is indistinguishable from a uniform subgroup element (Koshiba-Kurosawa, PKC 2004),
so the receiver's B = g^b or A g^b hides its choice computationally. (Forcing b odd would
halve the exponent space for no reason and is not covered by that statement; uniform
exponents are.) Semi-honest security. It yields random OT: the
sender gets two 128-bit keys per OT, the receiver the one it chose. The keys are
SHA-256 of the protocol id, the channel's session label, the OT index and the group
elements (``_key``), so base OTs of different jobs or protocol instances never share a
key derivation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import gmpy2
import numpy as np

from ppbn.circuits.garble import length_prefixed
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.seeds import RandomStream


@dataclass(frozen=True)
class DHGroup:
    """A safe-prime MODP group: elements are the quadratic residues mod p (order (p-1)/2)."""

    name: str
    p: gmpy2.mpz
    exponent_bits: int
    generator: gmpy2.mpz = gmpy2.mpz(2)

    @property
    def bits(self) -> int:
        return int(self.p.bit_length())

    @property
    def element_bytes(self) -> int:
        return (self.bits + 7) // 8


def _hex(*lines: str) -> gmpy2.mpz:
    return gmpy2.mpz(int("".join(lines), 16))


MODP_2048 = _hex(  # RFC 3526, Sec. 3: 2^2048 - 2^1984 - 1 + 2^64 * ([2^1918 pi] + 124476)
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879",
    "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B",
    "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836",
    "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804",
    "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6",
    "955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF",
)
MODP_3072 = _hex(  # RFC 3526, Sec. 4: 2^3072 - 2^3008 - 1 + 2^64 * ([2^2942 pi] + 1690314)
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879",
    "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B",
    "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836",
    "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804",
    "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6",
    "955817183995497CEA956AE515D2261898FA051015728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64",
    "ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7ABF5AE8CDB0933D71E8C94E04A25619DCEE3D226",
    "1AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200CBBE117577A615D6C770988C0BAD946E2",
    "08E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
)
DH_GROUPS = {
    2048: DHGroup("RFC 3526 group 14", MODP_2048, exponent_bits=320),
    3072: DHGroup("RFC 3526 group 15", MODP_3072, exponent_bits=420),
}
DEFAULT_DH_BITS = 2048
BASE_OT_PROTOCOL = b"ppbn/ot/base/co15"


def dh_bits_for(key_bits: int) -> int:
    """The base-OT group size for a job with ``key_bits``-bit Paillier keys.

    3072-bit keys (128-bit level) take the 3072-bit group; 2048-bit keys (112-bit level)
    and the 1024-bit test keys take the 2048-bit group. Both parties call this on their
    own, locally checked key size.
    """
    return 3072 if key_bits >= 3072 else DEFAULT_DH_BITS


def dh_group(bits: int) -> DHGroup:
    """The base-OT group of ``bits`` bits (a local parameter: a bad value is a ValueError)."""
    try:
        return DH_GROUPS[bits]
    except KeyError:
        raise ValueError(
            f"base-OT group must be one of {sorted(DH_GROUPS)} bits, got {bits}"
        ) from None


def random_exponent(group: DHGroup, stream: RandomStream) -> gmpy2.mpz:
    """Uniform in [1, 2^exponent_bits) from this party's stream (AES-256-CTR under a seed
    from the OS's CSPRNG, ``protocols.seeds``): rejection of 0 (probability 2^-k) keeps it
    uniform."""
    while True:
        e = stream.randbits(group.exponent_bits)
        if e:
            return gmpy2.mpz(e)


def _check_element(group: DHGroup, x: int, what: str) -> gmpy2.mpz:
    """A received value must be a non-trivial element of the prime-order subgroup: 1 < x <
    p - 1 and a quadratic residue (Jacobi symbol 1), which excludes the order-2 element p - 1
    and everything outside the subgroup of order (p-1)/2."""
    x = gmpy2.mpz(x)
    if not 1 < x < group.p - 1 or gmpy2.jacobi(x, group.p) != 1:
        raise ProtocolError(
            f"base OT: {what} is not an element of the prime-order subgroup of {group.name}"
        )
    return x


def _key_prefix(instance: bytes, session: bytes) -> bytes:
    """Domain of the base-OT key derivation: protocol id (with the owning instance) and session."""
    return b"ppbn base OT v2" + length_prefixed(BASE_OT_PROTOCOL + b"/" + instance, session)


def _key(prefix: bytes, group: DHGroup, index: int, a: int, b: int, shared: int) -> bytes:
    """SHA-256(prefix || index || A || B || shared)[:16], integers at the group's element width."""
    width = group.element_bytes
    body = b"".join(int(v).to_bytes(width, "big") for v in (index, a, b, shared))
    return hashlib.sha256(prefix + body).digest()[:16]


def base_ot_send(
    channel: Channel, count: int, group: DHGroup, instance: bytes, stream: RandomStream
) -> tuple[list[bytes], list[bytes]]:
    """Random OT, sender side: returns (keys0, keys1), ``count`` 16-byte keys each.

    ``group`` is the job's group (``dh_group(dh_bits_for(key_bits))``); ``instance`` the
    owning protocol's id. Both must match the receiver's. ``stream``: this party's randomness.
    """
    p, width = group.p, group.element_bytes
    prefix = _key_prefix(instance, channel.session)
    a = random_exponent(group, stream)
    big_a = gmpy2.powmod(group.generator, a, p)
    channel.send_ints("ot.base.A", [big_a], width)
    bs = [_check_element(group, b, "B") for b in channel.recv_ints("ot.base.B", count, width)]
    a_pow_a_inv = gmpy2.invert(gmpy2.powmod(big_a, a, p), p)
    keys0, keys1 = [], []
    for i, b in enumerate(bs):
        shared0 = gmpy2.powmod(b, a, p)
        keys0.append(_key(prefix, group, i, big_a, b, shared0))
        keys1.append(_key(prefix, group, i, big_a, b, shared0 * a_pow_a_inv % p))
    return keys0, keys1


def base_ot_receive(
    channel: Channel, choices: np.ndarray, group: DHGroup, instance: bytes, stream: RandomStream
) -> list[bytes]:
    """Random OT, receiver side: the key of each chosen message (same ``group`` and
    ``instance`` as the sender; ``stream``: this party's randomness)."""
    p, width = group.p, group.element_bytes
    prefix = _key_prefix(instance, channel.session)
    (big_a,) = channel.recv_ints("ot.base.A", 1, width)
    big_a = _check_element(group, big_a, "A")
    exps = [random_exponent(group, stream) for _ in choices]
    bs = []
    for c, b in zip(choices, exps, strict=True):
        g_b = gmpy2.powmod(group.generator, b, p)
        bs.append(g_b * big_a % p if c else g_b)
    channel.send_ints("ot.base.B", bs, width)
    return [
        _key(prefix, group, i, big_a, bs[i], gmpy2.powmod(big_a, b, p)) for i, b in enumerate(exps)
    ]
