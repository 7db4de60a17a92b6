"""Fast Paillier path: correctness, randomizer form, ciphertext validation, bulk tasks on a process pool."""

from __future__ import annotations

import math

import gmpy2
import numpy as np
import pytest
from scipy import stats

from ppbn.protocols import paillier
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.executor import LocalExecutor
from ppbn.protocols.paillier import (
    FastEncryptor,
    KeyPair,
    OpCounters,
    PublicKey,
    check_randomizer_base,
    decode_ciphertexts,
    decrypt_bytes,
    encode_ciphertexts,
    encrypt_bit_rows,
    multiply_by_label,
    rerandomizer_spec,
    rerandomizers_bytes,
    short_exponent_bits,
    validate_ciphertext,
)


@pytest.fixture(scope="module")
def keys() -> KeyPair:
    return KeyPair.generate(1024)


@pytest.fixture(scope="module")
def crt_encryptor(keys: KeyPair) -> FastEncryptor:
    return FastEncryptor(keys.public, factors=(int(keys.private.p), int(keys.private.q)))


def _is_nth_residue(value: int, keys: KeyPair) -> bool:
    """x is an N-th residue mod N^2 iff x^lambda = 1 (lambda = lcm(p-1, q-1))."""
    p, q = int(keys.private.p), int(keys.private.q)
    lam = int(gmpy2.lcm(p - 1, q - 1))
    return gmpy2.powmod(value, lam, keys.public.nsquare) == 1


def test_fast_encryption_decrypts_with_phe(keys: KeyPair, crt_encryptor: FastEncryptor) -> None:
    plain = FastEncryptor(keys.public, base=int(crt_encryptor.base))
    messages = [0, 1, 2**40 + 7, keys.public.n - 1]
    counters = OpCounters()
    for encryptor in (crt_encryptor, plain):
        ciphertexts = encryptor.encrypt_many(messages, counters)
        assert [keys.decrypt(c, counters) for c in ciphertexts] == messages
        assert len(set(ciphertexts)) == len(ciphertexts)
    assert counters.encryptions == 8 and counters.decryptions == 8
    assert counters.public_key_operations == 16


def test_homomorphic_sum(keys: KeyPair, crt_encryptor: FastEncryptor) -> None:
    a, b = crt_encryptor.encrypt_many([1234, 5678])
    assert keys.decrypt(a * b % keys.public.nsquare) == 1234 + 5678


def test_randomizers_are_nth_residues_in_the_base_subgroup(
    keys: KeyPair, crt_encryptor: FastEncryptor
) -> None:
    for r in crt_encryptor.fresh_randomizers(5):
        assert _is_nth_residue(r, keys)
    # the fixed-base tables (mod N^2, or mod p^2 and q^2 joined by the CRT) give g^a for the
    # seed's exponents a: compare with direct exponentiation
    plain = FastEncryptor(keys.public, base=int(crt_encryptor.base))
    seed = bytes(range(32))
    exponents = _exponents(8, plain.windows, plain.window_bits, seed)
    expected = [gmpy2.powmod(plain.base, a, keys.public.nsquare) for a in exponents]
    assert plain.fresh_randomizers(8, seed) == expected
    assert crt_encryptor.fresh_randomizers(8, seed) == expected


def test_precomputed_pool_is_used_first(crt_encryptor: FastEncryptor, keys: KeyPair) -> None:
    crt_encryptor.precompute(3)
    assert crt_encryptor.pooled == 3
    cts = crt_encryptor.encrypt_many([5, 6, 7, 8])
    assert crt_encryptor.pooled == 0
    assert [keys.decrypt(c) for c in cts] == [5, 6, 7, 8]


def test_validation_rejects_malformed_ciphertexts(
    keys: KeyPair, crt_encryptor: FastEncryptor
) -> None:
    n, nsq = keys.public.n, keys.public.nsquare
    good = crt_encryptor.encrypt(3)
    validate_ciphertext(good, keys.public)
    for bad in (0, nsq, nsq + 5, n, int(keys.private.p) * 12345):
        with pytest.raises(ProtocolError):
            validate_ciphertext(bad, keys.public)
    with pytest.raises(ProtocolError, match="out of range"):
        keys.decrypt(0)
    payload = encode_ciphertexts([good, good], keys.public)
    assert decode_ciphertexts(payload, 2, keys.public, "x") == [good, good]
    with pytest.raises(ProtocolError, match="expected 3 ciphertexts"):
        decode_ciphertexts(payload, 3, keys.public, "x")
    with pytest.raises(ProtocolError, match="not invertible"):
        decode_ciphertexts(encode_ciphertexts([good, n], keys.public), 2, keys.public, "x")


def test_public_key_parsing(keys: KeyPair) -> None:
    assert PublicKey.from_bytes(keys.public.to_bytes(), 1024) == keys.public
    with pytest.raises(ProtocolError, match="has 1024 bits, expected 2048"):
        PublicKey.from_bytes(keys.public.to_bytes(), 2048)


def _modulus(bits: int, *factors: int) -> int:
    """A number of exactly ``bits`` bits: the given factors times one large prime."""
    prefix = math.prod(factors)
    rest = gmpy2.next_prime((1 << (bits - 1)) // prefix + 1)
    n = int(prefix * rest)
    assert n.bit_length() == bits
    return n


def _big_prime(bits: int) -> int:
    return int(gmpy2.next_prime((1 << (bits - 1)) + 12345))


SQUARE_ROOT = int(gmpy2.next_prime(gmpy2.isqrt(1 << 1023)))  # its square has 1024 bits
BIG = 500  # bits of the large factor of the wrong-length moduli


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda: _modulus(1016, _big_prime(BIG)), "1016 bits, expected 1024", id="short"
        ),
        pytest.param(
            lambda: _modulus(1032, _big_prime(BIG)), "1032 bits, expected 1024", id="long"
        ),
        pytest.param(lambda: _modulus(1024, 2), "is even", id="even"),
        pytest.param(lambda: _modulus(1024, 3), "prime factor below 2\\^16", id="factor-3"),
        pytest.param(lambda: _modulus(1024, 65521), "prime factor below 2\\^16", id="factor-65521"),
        pytest.param(lambda: SQUARE_ROOT**2, "perfect square", id="square"),
        pytest.param(lambda: _big_prime(1024), "is prime", id="prime"),
    ],
)
def test_bad_peer_modulus_is_refused_with_its_reason(make, message: str) -> None:
    n = make()
    data = n.to_bytes((n.bit_length() + 7) // 8, "big")
    with pytest.raises(ProtocolError, match=message) as err:
        PublicKey.from_bytes(data, 1024)
    assert "\n" not in str(err.value)


def test_expected_key_size_is_a_local_parameter() -> None:
    with pytest.raises(ValueError, match="below the minimum"):
        PublicKey.from_bytes(bytes(64), 512)


def test_a_factor_just_above_2_16_is_not_flagged_as_small() -> None:
    n = _modulus(1024, 65537, _big_prime(400))  # composite, not a square, no factor < 2^16
    assert PublicKey.from_bytes(n.to_bytes(128, "big"), 1024).n == n


def test_multiply_by_label_groups_products(keys: KeyPair, crt_encryptor: FastEncryptor) -> None:
    messages = [1, 10, 100, 1000, 10000]
    payload = encode_ciphertexts(crt_encryptor.encrypt_many(messages), keys.public)
    labels = np.array([[0, 1, 0, 2, 1], [0, 0, 0, 0, 0]])
    products, multiplications = multiply_by_label(keys.public.n, payload, labels, [4, 1])
    assert multiplications == 2 + 4
    width = keys.public.ciphertext_bytes
    sums = [
        keys.decrypt(int.from_bytes(products[0][i * width : (i + 1) * width], "big"))
        for i in range(4)
    ]
    assert sums == [101, 10010, 1000, 0]
    assert keys.decrypt(int.from_bytes(products[1], "big")) == sum(messages)
    bad = encode_ciphertexts([crt_encryptor.encrypt(1), keys.public.n * 3], keys.public)
    with pytest.raises(ProtocolError, match="tables.ciphertexts: .*not invertible"):
        multiply_by_label(keys.public.n, bad, np.array([[0, 0]]), [1])


def test_process_pool_encrypts_packed_rows(keys: KeyPair, crt_encryptor: FastEncryptor) -> None:
    positions = np.array([[0, 5], [-1, 3], [-1, -1]])
    with LocalExecutor(2) as pool:
        blob = pool.submit(encrypt_bit_rows, crt_encryptor.spec, positions, bytes(32)).result()
        plain = pool.submit(decrypt_bytes, keys.private_spec(), blob).result()
    assert plain == [1 + 32, 8, 0]
    assert blob == encrypt_bit_rows(
        crt_encryptor.spec, positions, bytes(32)
    )  # the seed fixes the randomizers


def test_2048_bit_key_round_trip() -> None:
    keys = KeyPair.generate(2048)
    encryptor = FastEncryptor(keys.public, factors=(int(keys.private.p), int(keys.private.q)))
    c = encryptor.encrypt(2**2000 + 1)
    assert keys.public.bits == 2048 and keys.public.ciphertext_bytes == 512
    assert keys.decrypt(c) == 2**2000 + 1
    with pytest.raises(ValueError):
        KeyPair.generate(1536)


def _rerandomizers(spec: tuple, count: int, seed: bytes) -> list[int]:
    width = PublicKey(spec[0]).ciphertext_bytes
    blob = rerandomizers_bytes(spec, count, seed)
    return [int.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]


def _exponents(count: int, windows: int, window_bits: int, seed: bytes) -> list[int]:
    rows = paillier.exponent_digits(count, windows, window_bits, seed)
    return [sum(d << (window_bits * i) for i, d in enumerate(row)) for row in rows]


def test_rerandomizers_are_powers_of_the_key_owners_base_that_hide_a_sum_of_exponents(
    keys: KeyPair, crt_encryptor: FastEncryptor
) -> None:
    """g^b with b of A + bits(n) + 40 bits, A the bits of the key owner's exponents: the
    same values by the fixed-base table as by direct exponentiation (a small task with no
    table yet), each an N-th residue in <g>."""
    spec = rerandomizer_spec(keys.public, crt_encryptor.base, 40, 20_000)
    assert short_exponent_bits() == 264 and spec[2] == 264 + 15 + 40
    paillier._ENCRYPTORS.pop(spec, None)
    seed = bytes(range(32))
    direct = _rerandomizers(spec, 3, seed)
    tabled = _rerandomizers(spec, paillier.REPLY_TABLE_FROM, seed)[:3]  # builds the table
    assert direct == tabled and len(set(direct)) == 3
    assert spec in paillier._ENCRYPTORS
    (b,) = _exponents(1, -(-spec[2] // spec[3]), spec[3], seed)
    assert direct[0] == gmpy2.powmod(crt_encryptor.base, b, keys.public.nsquare)
    assert all(_is_nth_residue(r, keys) for r in direct)
    with pytest.raises(ValueError):
        rerandomizer_spec(keys.public, crt_encryptor.base, 40, 0)


def test_a_product_of_the_key_owners_ciphertexts_has_the_sum_of_their_short_exponents(
    keys: KeyPair, crt_encryptor: FastEncryptor
) -> None:
    """What the re-randomizers' length rests on (module doc): each fast randomizer is g^a
    with a < 2^short_exponent_bits(), so the randomizer of a product of n ciphertexts is
    g^s with s < n 2^A, and a re-randomized product is g^(s + b): b's 40 spare bits above
    bits(n) + A bound the statistical distance between any two such s by 2^-40."""
    seed = bytes([7]) * 32
    windows, window_bits = crt_encryptor.windows, crt_encryptor.window_bits
    exponents = _exponents(12, windows, window_bits, seed)
    randomizers = crt_encryptor.fresh_randomizers(12, seed)
    nsq = keys.public.nsquare
    assert all(a < 1 << short_exponent_bits() for a in exponents)
    assert randomizers == [gmpy2.powmod(crt_encryptor.base, a, nsq) for a in exponents]
    product = math.prod(randomizers) % nsq
    assert product == gmpy2.powmod(crt_encryptor.base, sum(exponents), nsq)
    spec = rerandomizer_spec(keys.public, crt_encryptor.base, 40, 12)
    assert spec[2] - 40 >= (12 * ((1 << short_exponent_bits()) - 1)).bit_length()


@pytest.mark.parametrize(
    ("base", "reason"),
    [
        (lambda k: 0, "out of range"),
        (lambda k: k.public.nsquare, "out of range"),
        (lambda k: 1, "order at most 2"),
        (lambda k: k.public.nsquare - 1, "order at most 2"),
        (lambda k: int(k.private.p), "not invertible"),
    ],
)
def test_a_degenerate_randomizer_base_is_refused(keys: KeyPair, base, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        check_randomizer_base(base(keys), keys.public, "tables.randomizer_base")


def test_the_key_owner_cannot_tell_which_ciphertexts_a_rerandomized_product_holds(
    keys: KeyPair,
) -> None:
    """What the key owner can compute of a returned product's randomizer x: its N-th root
    y mod N (it knows lambda) and y's Legendre symbols mod p and q. With g = h^N for an h
    that is a non-residue mod p and mod q, every element of <g> has equal symbols, so a
    randomizer g^e shows the parity of e: for the empty product (randomizer 1) and for a
    product of 12 of the key owner's own ciphertexts, each re-randomized by g^b, the two
    symbol pairs (-1, -1) and (1, 1) come up equally often and alike for both products.
    Without the re-randomization the empty product would always show (1, 1)."""
    p, q, n = int(keys.private.p), int(keys.private.q), keys.public.n
    nsq = keys.public.nsquare
    h = next(h for h in range(2, 1000) if gmpy2.legendre(h, p) == gmpy2.legendre(h, q) == -1)
    encryptor = FastEncryptor(keys.public, base=int(gmpy2.powmod(h, n, nsq)), factors=(p, q))
    root = int(gmpy2.invert(n, gmpy2.lcm(p - 1, q - 1)))
    spec = rerandomizer_spec(keys.public, encryptor.base, 40, 12)
    product = 1
    for c in encryptor.encrypt_many([0] * 12):
        product = product * c % nsq
    seen = []
    for index, start in enumerate((1, product)):
        counts = {(-1, -1): 0, (1, 1): 0}
        for rho in _rerandomizers(spec, 800, bytes([index]) * 32):
            y = gmpy2.powmod(start * rho % nsq % n, root, n)
            counts[(gmpy2.legendre(y, p), gmpy2.legendre(y, q))] += 1  # a KeyError if unequal
        assert stats.binomtest(counts[(1, 1)], 800).pvalue > 1e-4, counts
        seen.append(list(counts.values()))
    assert stats.chi2_contingency(np.array(seen)).pvalue > 1e-4


def test_fixed_base_tables_are_built_on_first_use(keys: KeyPair) -> None:
    """A party whose workers encrypt never builds the tables in its own process: the
    constructor only picks the base; the first randomizer builds them."""
    encryptor = FastEncryptor(keys.public, factors=(int(keys.private.p), int(keys.private.q)))
    assert not encryptor.tables_built
    (rho,) = encryptor.fresh_randomizers(1)
    assert encryptor.tables_built and _is_nth_residue(int(rho), keys)
