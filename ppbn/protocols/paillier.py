"""Paillier encryption for the secure count tables, with a fast encryption path.

Yang-Wright (Sec. 5.3) build their scalar-product shares on an additively homomorphic
scheme, Paillier's; ppbn uses it for whole contingency tables (``tables/``). Keys and
decryption come from ``phe`` (CRT decryption). Encryption with g = N + 1 is

    E(m) = (1 + m N) * rho  mod N^2,   rho an N-th residue (the randomizer),

and phe spends almost all of its time on rho = r^N with a 2048-bit exponent.

Fast path (the variant of Damgard, Jurik and Nielsen, "A generalization of Paillier's
public-key system"): the encrypting party picks, once per key, a secret random h in
Z*_N and sets g = h^N mod N^2. A randomizer is rho = g^a = (h^a)^N for a *short* random
exponent a of ``windows * window_bits`` bits (264 bits by default: 22 windows of 12 bits,
at least 2 x 128). g^a is a product of one entry per window from a fixed-base table
g^(d 2^(w i)) built before the job, so a randomizer costs 21 multiplications mod N^2
(or 2 x 21 mod p^2 and q^2 plus a CRT join when the key owner encrypts) instead of a
2048-bit exponentiation: about 0.1 ms against phe's ~8 ms at 2048 bits (``ppbn bench
paillier``). Randomizers can also be precomputed in a pool ahead of the job.

Security argument. A ciphertext is (1 + m N) times an element of the subgroup <g> of
N-th residues. If g^a for short a is computationally indistinguishable from a uniform
element of <g> (the short-exponent assumption: van Oorschot-Wiener, Koshiba-Kurosawa;
generic attacks such as Pollard's lambda need about 2^(bits(a)/2) = 2^132 steps, and
the order of <g> is unknown without the factorization of N), then fast ciphertexts are
indistinguishable from ciphertexts with a uniform randomizer from <g>, and those hide m
under the decisional composite residuosity assumption restricted to the subgroup <g>
(the subgroup-membership form of DCR used by Damgard-Jurik-Nielsen). Only the party
without the secret key ever sees fast ciphertexts.

The key owner, who knows the factorization, can extract the randomizer of any ciphertext
and can test characters (Legendre symbols mod p and q) of elements of <g>, or take
discrete logarithms in it. So a ciphertext that goes *to* the key owner after
homomorphic operations must be re-randomized so that its randomizer is independent of
which ciphertexts were multiplied. Every ciphertext the key owner made has its randomizer
g^a in <g> with a < 2^A (A = ``short_exponent_bits()``, 264: whole windows of the fast
path), so a product of at most n of them (a count table of n records multiplies each
record's ciphertext into a product at most once) has g^s with s < n 2^A. The other party
multiplies it by g^b with b uniform of A + bits(n) + 40 bits (``rerandomizer_spec``,
``rerandomizers_bytes``: the key owner sends its g, ``check_randomizer_base``): for any
two sets of multiplied ciphertexts, s + b and s' + b are uniform on ranges of 2^bits(b)
integers that differ by a shift below 2^(A + bits(n)), so their distributions are within
2^-40 of each other (statistical distance), and so are g^(s + b) and g^(s' + b), whatever
the key owner can compute from them, discrete logarithms included: a statistical
argument, with no assumption about the key owner's computing power. (Publishing g is
Damgard-Jurik-Nielsen's own setting, whose public key holds h^N.) The exponent is 319
bits for 20,000 records: with a fixed-base table of 8-bit windows a re-randomizer costs
40 multiplications mod N^2, against 261 for b uniform over <g> (bits(N) + 40 bits, which
needs no bound on a; docs/decisions/rerandomizer-length.md) and a 2048-bit
exponentiation for r^N with r uniform in Z*_N. ``tables/exchange.py`` re-randomizes each
masked result this way. The argument rests on the key owner encrypting with its g and
exponents below 2^A, which the semi-honest model grants (a key owner that deviates could
as well encrypt distinct plaintexts per record and read the other party's data from the
products, which no re-randomization prevents). At the ``malicious`` level
(``tables/checks.py``) the other party instead masks the whole plaintext with R uniform in
[0, N) and re-randomizes with s^N for s uniform in Z*_N (``nth_power_spec``, one full
exponentiation each): once the key proof (``paillier_proofs.py``) has shown
gcd(N, phi(N)) = 1, (R, s) -> (1 + R N) s^N is a bijection onto Z*_{N^2}, so the returned
ciphertext is uniform whatever the key owner sent.

Validation: a peer's public key goes through ``PublicKey.from_bytes``, which takes the
expected size from the caller's locally checked parameters and refuses (``ProtocolError``)
a modulus of another bit length, an even one, one with a prime factor below 2^16, a perfect
square and a prime: cheap checks that catch a malformed or degenerate N (under which the
re-randomized, masked products returned to the key owner need not hide the aggregating
party's data) without a proof of correct generation, which the semi-honest model does not
ask for. Every ciphertext received from a peer must
satisfy 0 < c < N^2 and gcd(c, N) = 1; otherwise ``ProtocolError``.

Bulk work (encryption, products of many ciphertexts, re-randomizers, decryption) is
written as pure task functions (``encrypt_bit_rows``, ``multiply_by_label``,
``combine_products``, ``rerandomizers_bytes``, ``decrypt_bytes``) that take their
randomness as a seed (``seeds.py``) and run on the party's executor (``executor.py``:
inline, a local process pool, or Ray), so results do not depend on where they ran.
"""

from __future__ import annotations

import math
import os
import secrets
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import gmpy2
import numpy as np
from gmpy2 import mpz
from phe import paillier as phe_paillier

from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.seeds import RandomStream, expand

DEFAULT_KEY_BITS = 2048
KEY_BITS_CHOICES = (1024, 2048, 3072)  # 1024 is for tests only: below today's security level
TEST_ONLY_KEY_BITS = 1024
WEAK_KEY_WARNING = (
    "WARNING: 1024-bit Paillier keys (about 80-bit security) are for tests only; use 2048 or 3072"
)
MIN_KEY_BITS = min(KEY_BITS_CHOICES)  # the smallest modulus this build ever accepts
SHORT_EXPONENT_BITS = 256
WINDOW_BITS = 12
SMALL_PRIME_BITS = 16
SMALL_PRIMES_PRODUCT = gmpy2.primorial((1 << SMALL_PRIME_BITS) - 1)  # every prime below 2^16


@dataclass
class OpCounters:
    """Public-key operations of one party; callers read them after (or during) a job.

    A homomorphic addition is a ciphertext multiplication; a homomorphic scalar
    multiplication is a ciphertext exponentiation. ``randomizers`` counts randomizers made
    (for encryption or re-randomization), ``ciphertexts_sent`` / ``ciphertexts_received`` the ciphertexts that
    crossed the channel.
    """

    encryptions: int = 0
    decryptions: int = 0
    ciphertext_multiplications: int = 0
    ciphertext_exponentiations: int = 0
    randomizers: int = 0
    ciphertexts_sent: int = 0
    ciphertexts_received: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + int(value))

    @property
    def public_key_operations(self) -> int:
        return (
            self.encryptions
            + self.decryptions
            + self.ciphertext_multiplications
            + self.ciphertext_exponentiations
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "encryptions": self.encryptions,
            "decryptions": self.decryptions,
            "ciphertext_multiplications": self.ciphertext_multiplications,
            "ciphertext_exponentiations": self.ciphertext_exponentiations,
            "randomizers": self.randomizers,
            "ciphertexts_sent": self.ciphertexts_sent,
            "ciphertexts_received": self.ciphertexts_received,
            "public_key_operations": self.public_key_operations,
        }


# -- keys ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicKey:
    """A Paillier public key (g = N + 1), as sent to the peer: just N."""

    n: int

    @property
    def bits(self) -> int:
        return self.n.bit_length()

    @property
    def nsquare(self) -> int:
        return self.n * self.n

    @property
    def ciphertext_bytes(self) -> int:
        """Fixed width of one ciphertext on the wire."""
        return 2 * ((self.bits + 7) // 8)

    def to_bytes(self) -> bytes:
        return self.n.to_bytes((self.bits + 7) // 8, "big")

    @classmethod
    def from_bytes(cls, data: bytes, expected_bits: int) -> PublicKey:
        """Parse and check a peer's public key (see the module doc).

        ``expected_bits`` must come from this party's own checked job parameters (e.g.
        ``TablesConfig.key_bits``), never from the peer; below ``MIN_KEY_BITS`` it is a
        local error (ValueError). Each refusal of the received modulus is a one-line
        ``ProtocolError``.
        """
        if expected_bits < MIN_KEY_BITS:
            raise ValueError(
                f"expected Paillier key size {expected_bits} is below the minimum {MIN_KEY_BITS}"
            )
        n = int.from_bytes(data, "big")
        if n.bit_length() != expected_bits:
            raise ProtocolError(
                f"peer's Paillier modulus has {n.bit_length()} bits, expected {expected_bits}"
            )
        if n % 2 == 0:
            raise ProtocolError("peer's Paillier modulus is even")
        if gmpy2.gcd(n, SMALL_PRIMES_PRODUCT) != 1:
            raise ProtocolError(
                f"peer's Paillier modulus has a prime factor below 2^{SMALL_PRIME_BITS}"
            )
        if gmpy2.is_square(n):
            raise ProtocolError("peer's Paillier modulus is a perfect square")
        if gmpy2.is_prime(n):
            raise ProtocolError("peer's Paillier modulus is prime")
        return cls(n)

    def phe_key(self) -> phe_paillier.PaillierPublicKey:
        return phe_paillier.PaillierPublicKey(self.n)


@dataclass
class KeyPair:
    """A party's own key pair: phe keys, decryption with CRT through phe."""

    public: PublicKey
    private: phe_paillier.PaillierPrivateKey

    @classmethod
    def generate(cls, bits: int = DEFAULT_KEY_BITS) -> KeyPair:
        if bits not in KEY_BITS_CHOICES:
            raise ValueError(f"Paillier key size must be one of {KEY_BITS_CHOICES}, got {bits}")
        public, private = phe_paillier.generate_paillier_keypair(n_length=bits)
        return cls(PublicKey(int(public.n)), private)

    def decrypt(self, ciphertext: int, counters: OpCounters | None = None) -> int:
        validate_ciphertext(ciphertext, self.public)
        if counters is not None:
            counters.add(decryptions=1)
        return int(self.private.raw_decrypt(int(ciphertext)))

    def private_spec(self) -> tuple[int, int, int]:
        """(N, p, q) for worker processes of this party (never sent to the peer)."""
        return self.public.n, int(self.private.p), int(self.private.q)


def validate_ciphertext(ciphertext: int, public: PublicKey, what: str = "ciphertext") -> None:
    """Raise ProtocolError unless 0 < c < N^2 and gcd(c, N) = 1 (c is in Z*_{N^2})."""
    if not 0 < ciphertext < public.nsquare:
        raise ProtocolError(
            f"{what} is out of range: a Paillier ciphertext must satisfy 0 < c < N^2"
        )
    if gmpy2.gcd(ciphertext, public.n) != 1:
        raise ProtocolError(f"{what} is not invertible mod N^2 (gcd(c, N) != 1)")


def decode_ciphertexts(payload: bytes, count: int, public: PublicKey, what: str) -> list[mpz]:
    """Split a received payload into ``count`` ciphertexts and validate each one."""
    width = public.ciphertext_bytes
    if len(payload) != count * width:
        raise ProtocolError(
            f"{what}: {len(payload)} bytes, expected {count} ciphertexts of {width} bytes"
        )
    out = []
    for i in range(count):
        c = mpz(int.from_bytes(payload[i * width : (i + 1) * width], "big"))
        validate_ciphertext(c, public, f"{what}[{i}]")
        out.append(c)
    return out


def encode_ciphertexts(values: Iterable[int], public: PublicKey) -> bytes:
    width = public.ciphertext_bytes
    return b"".join(int(v).to_bytes(width, "big") for v in values)


# -- the fast encryption path ---------------------------------------------------------------


def _random_unit(n: int, stream: RandomStream | None = None) -> mpz:
    """Uniform element of Z*_N from ``stream``, or from the OS's CSPRNG."""
    draw = secrets.randbelow if stream is None else stream.randbelow
    while True:
        r = mpz(draw(n - 1) + 1)
        if gmpy2.gcd(r, n) == 1:
            return r


def exponent_digits(
    count: int, windows: int, window_bits: int, seed: bytes | None
) -> list[list[int]]:
    """``count`` exponents as ``windows`` uniform digits of ``window_bits`` bits each, least
    significant first, from ``seed`` (a task's seed) or from the OS."""
    size = 4 * count * windows
    raw = np.frombuffer(os.urandom(size) if seed is None else expand(seed, size), dtype="<u4")
    return (raw & ((1 << window_bits) - 1)).reshape(count, windows).tolist()


class FastEncryptor:
    """Encrypts under ``public`` with short-exponent fixed-base randomizers (see module doc).

    The tables are built on first use: a party whose encryption runs in worker processes
    never builds them here (each worker builds its own, ``_task_encryptor``), and the
    public key goes out without waiting for them. ``base`` lets a worker process rebuild
    the same encryptor (``spec``); it is secret to this party.
    Given the key owner's ``factors`` (p, q), the tables are kept mod p^2 and mod q^2 and
    results joined by the CRT: the same values, about 1.5 times faster. In ppbn the
    encrypting party always owns the key, so ``tables/`` uses this form.
    """

    def __init__(
        self,
        public: PublicKey,
        exponent_bits: int = SHORT_EXPONENT_BITS,
        window_bits: int = WINDOW_BITS,
        base: int | None = None,
        factors: tuple[int, int] | None = None,
        stream: RandomStream | None = None,
    ) -> None:
        self.public = public
        self.n = mpz(public.n)
        self.nsquare = self.n * self.n
        self.exponent_bits = exponent_bits
        self.window_bits = window_bits
        self.windows = short_exponent_bits(exponent_bits, window_bits) // window_bits
        if base is None:
            base = gmpy2.powmod(_random_unit(public.n, stream), self.n, self.nsquare)
        self.base = mpz(base)
        self.factors = factors
        if factors is None:
            self._moduli = [self.nsquare]
        else:
            p, q = (mpz(f) for f in factors)
            if p * q != self.n:
                raise ValueError("factors do not match the public key")
            self._moduli = [p * p, q * q]
            self._p2_inverse = gmpy2.invert(self._moduli[0], self._moduli[1])
        self._built: list[list[list[mpz]]] | None = None
        self._build_lock = threading.Lock()
        self._pool: deque[mpz] = deque()

    def build_tables(self) -> None:
        """Build the fixed-base tables now rather than on first use (to time them apart)."""
        _ = self._tables

    @property
    def tables_built(self) -> bool:
        """Whether this process holds the fixed-base tables (``build_tables`` or a first
        randomizer built them): a party whose workers encrypt never should."""
        return self._built is not None

    @property
    def _tables(self) -> list[list[list[mpz]]]:
        with self._build_lock:
            if self._built is None:
                self._built = [self._build_table(modulus) for modulus in self._moduli]
            return self._built

    def _build_table(self, modulus: mpz) -> list[list[mpz]]:
        size = 1 << self.window_bits
        table = []
        step = self.base % modulus
        for _ in range(self.windows):
            row = [mpz(1)] * size
            value = mpz(1)
            for digit in range(1, size):
                value = value * step % modulus
                row[digit] = value
            table.append(row)
            step = value * step % modulus  # step^(2^w)
        return table

    @property
    def spec(self) -> tuple:
        return self.public.n, int(self.base), self.exponent_bits, self.window_bits, self.factors

    def _digits(self, count: int, seed: bytes | None) -> list[list[int]]:
        return exponent_digits(count, self.windows, self.window_bits, seed)

    def _join(self, residues: list[mpz]) -> mpz:
        if len(residues) == 1:
            return residues[0]
        p2, q2 = self._moduli
        low, high = residues
        return low + p2 * ((high - low) * self._p2_inverse % q2)

    def fresh_randomizers(self, count: int, seed: bytes | None = None) -> list[mpz]:
        """``count`` new values g^a mod N^2, a uniform of windows * window_bits bits: the
        exponents from ``seed`` (a task's seed), or from the OS when there is none."""
        out = []
        windows = range(1, self.windows)
        tables = self._tables
        for row in self._digits(count, seed):
            residues = []
            for table, modulus in zip(tables, self._moduli, strict=True):
                acc = table[0][row[0]]
                for i in windows:
                    acc = acc * table[i][row[i]] % modulus
                residues.append(acc)
            out.append(self._join(residues))
        return out

    def precompute(self, count: int) -> None:
        """Fill the pool of randomizers ahead of time (e.g. while waiting for a job)."""
        self._pool.extend(self.fresh_randomizers(count))

    def add_to_pool(self, payload: bytes) -> None:
        """Add randomizers made by worker processes (``fast_randomizers_bytes``) to the pool."""
        width = self.public.ciphertext_bytes
        self._pool.extend(
            mpz(int.from_bytes(payload[i : i + width], "big"))
            for i in range(0, len(payload), width)
        )

    @property
    def pooled(self) -> int:
        return len(self._pool)

    def take_pooled(self, count: int) -> bytes:
        """``count`` precomputed randomizers out of the pool, fixed width (for a task)."""
        return encode_ciphertexts((self._pool.popleft() for _ in range(count)), self.public)

    def randomizers(self, count: int) -> list[mpz]:
        taken = [self._pool.popleft() for _ in range(min(count, len(self._pool)))]
        return taken + self.fresh_randomizers(count - len(taken))

    def encrypt_many(
        self, plaintexts: Sequence[int], counters: OpCounters | None = None
    ) -> list[mpz]:
        n, nsquare = self.n, self.nsquare
        for m in plaintexts:
            if not 0 <= m < n:
                raise ValueError("Paillier plaintext must lie in [0, N)")
        randomizers = self.randomizers(len(plaintexts))
        out = [(1 + m * n) * r % nsquare for m, r in zip(plaintexts, randomizers, strict=True)]
        if counters is not None:
            counters.add(encryptions=len(out), randomizers=len(out))
        return out

    def encrypt(self, plaintext: int, counters: OpCounters | None = None) -> mpz:
        return self.encrypt_many([plaintext], counters)[0]


# -- bulk tasks (pure functions of their arguments, for any executor) --------------------------

_ENCRYPTORS: OrderedDict[tuple, FastEncryptor] = OrderedDict()
_ENCRYPTORS_KEPT = (
    4  # both parties of an in-process test run encrypt and re-randomize, each under its own key
)
_ENCRYPTORS_LOCK = threading.Lock()


def remember_encryptor(encryptor: FastEncryptor) -> None:
    """Let tasks run in this process use ``encryptor``'s tables instead of rebuilding them."""
    with _ENCRYPTORS_LOCK:
        _ENCRYPTORS[encryptor.spec] = encryptor
        while len(_ENCRYPTORS) > _ENCRYPTORS_KEPT:
            _ENCRYPTORS.popitem(last=False)


def forget_encryptor(encryptor: FastEncryptor) -> None:
    """Drop this process's reference to ``encryptor`` (its base is secret): end of a job."""
    with _ENCRYPTORS_LOCK:
        _ENCRYPTORS.pop(encryptor.spec, None)


def _task_encryptor(spec: tuple) -> FastEncryptor:
    """The encryptor ``spec`` describes, built once per process (one key per job: a new key
    evicts the oldest, so a worker's memory stays bounded)."""
    with _ENCRYPTORS_LOCK:
        encryptor = _ENCRYPTORS.get(spec)
    if encryptor is None:
        n, base, exponent_bits, window_bits, factors = spec
        encryptor = FastEncryptor(PublicKey(n), exponent_bits, window_bits, base, factors)
        remember_encryptor(encryptor)
    return encryptor


def encrypt_bit_rows(
    spec: tuple, positions: np.ndarray, seed: bytes, randomizers: bytes = b""
) -> bytes:
    """Encrypt, for each row of ``positions``, the integer with a 1 at each listed bit (-1 = none).

    This is a packed one-hot plaintext (``tables/inputs.py``). The randomizers are ``randomizers``
    (precomputed, fixed width) when given, else fresh ones from ``seed``. Returns the
    ciphertexts, fixed width.
    """
    enc = _task_encryptor(spec)
    plaintexts = []
    for row in positions.tolist():
        m = 0
        for bit in row:
            if bit >= 0:
                m |= 1 << bit
        plaintexts.append(m)
    width = enc.public.ciphertext_bytes
    if randomizers:
        rhos = [
            mpz(int.from_bytes(randomizers[i : i + width], "big"))
            for i in range(0, len(randomizers), width)
        ]
    else:
        rhos = enc.fresh_randomizers(len(plaintexts), seed)
    n, nsquare = enc.n, enc.nsquare
    return encode_ciphertexts(
        ((1 + m * n) * r % nsquare for m, r in zip(plaintexts, rhos, strict=True)), enc.public
    )


def fast_randomizers_bytes(spec: tuple, count: int, seed: bytes) -> bytes:
    """``count`` fast randomizers of the encryptor described by ``spec`` (for ``add_to_pool``)."""
    encryptor = _task_encryptor(spec)
    return encode_ciphertexts(encryptor.fresh_randomizers(count, seed), encryptor.public)


def multiply_by_label(
    n: int, payload: bytes, labels: np.ndarray, label_counts: Sequence[int]
) -> tuple[list[bytes], int]:
    """Products of the ciphertexts in ``payload`` grouped by label, once per labelling.

    ``labels`` has one row per labelling and one column per ciphertext; row k takes
    values in [0, label_counts[k]). Returns, per labelling, the products (empty product
    = 1) as fixed-width bytes, and the number of multiplications. Raises ProtocolError
    (``tables.ciphertexts: ...``) if a ciphertext is not in Z*_{N^2}: out of range is
    checked for each one, invertibility on the products (gcd(prod, N) = 1 iff every factor
    is invertible, and every ciphertext is a factor of one product per labelling).
    """
    public = PublicKey(n)
    width = public.ciphertext_bytes
    big_n = mpz(n)
    nsquare = big_n * big_n
    count = labels.shape[1]
    if len(payload) != count * width:
        raise ProtocolError(
            f"tables.ciphertexts: {len(payload)} bytes, expected {count} ciphertexts of {width} bytes"
        )
    cts = []
    for i in range(count):
        c = mpz(int.from_bytes(payload[i * width : (i + 1) * width], "big"))
        if not 0 < c < nsquare:
            raise ProtocolError(
                f"tables.ciphertexts: ciphertext {i} of the chunk is out of range (need 0 < c < N^2)"
            )
        cts.append(c)
    products_out = []
    multiplications = 0
    for row, size in zip(labels.tolist(), label_counts, strict=True):
        acc: list[mpz | None] = [None] * size
        for label, c in zip(row, cts, strict=True):
            current = acc[label]
            if current is None:
                acc[label] = c
            else:
                acc[label] = current * c % nsquare
                multiplications += 1
        for value in acc:
            if value is not None and gmpy2.gcd(value, big_n) != 1:
                raise ProtocolError(
                    "tables.ciphertexts: a ciphertext of the chunk is not invertible mod N^2 (gcd(c, N) != 1)"
                )
        products_out.append(encode_ciphertexts((1 if v is None else v for v in acc), public))
    return products_out, multiplications


def combine_products(n: int, *parts: tuple[list[bytes], int]) -> tuple[list[bytes], int]:
    """Elementwise product of several ``multiply_by_label`` results (same labellings): one
    node of the aggregation tree. A product of 1 is an empty one and costs nothing, so the
    multiplication count is the same whatever the tree's shape."""
    width = PublicKey(n).ciphertext_bytes
    big_n = mpz(n)
    nsquare = big_n * big_n
    first, multiplications = parts[0]
    out = []
    for k, blob in enumerate(first):
        acc: list[mpz | None] = [
            None if v == 1 else v
            for v in (
                mpz(int.from_bytes(blob[i : i + width], "big")) for i in range(0, len(blob), width)
            )
        ]
        for other, _ in parts[1:]:
            row = other[k]
            for u in range(len(acc)):
                value = mpz(int.from_bytes(row[u * width : (u + 1) * width], "big"))
                if value == 1:
                    continue
                current = acc[u]
                if current is None:
                    acc[u] = value
                else:
                    acc[u] = current * value % nsquare
                    multiplications += 1
        out.append(encode_ciphertexts((1 if v is None else v for v in acc), PublicKey(n)))
    multiplications += sum(m for _, m in parts[1:])
    return out, multiplications


# re-randomizer tables: 40 windows x 256 entries at 20,000 records, 5 MB at 2048 bits
REPLY_WINDOW_BITS = 8
REPLY_TABLE_FROM = 32  # a task of fewer re-randomizers (and no table yet) exponentiates directly
NTH_POWER = "nth-power"  # first item of the spec of the malicious level's re-randomizers s^N


def short_exponent_bits(
    exponent_bits: int = SHORT_EXPONENT_BITS, window_bits: int = WINDOW_BITS
) -> int:
    """Bits of a fast encryptor's exponents a: ``exponent_bits`` rounded up to whole
    windows (264 by default), so every a < 2^short_exponent_bits()."""
    return math.ceil(exponent_bits / window_bits) * window_bits


def rerandomizer_spec(
    public: PublicKey, base: int, statistical_bits: int, max_factors: int
) -> tuple:
    """The ``FastEncryptor`` spec of the re-randomizers g^b of ciphertexts returned to the
    key owner, each a product of at most ``max_factors`` of its own ciphertexts: g the base
    of the key owner's encryptor (``FastEncryptor.base``), b uniform of at least
    ``short_exponent_bits()`` + bits(``max_factors``) + ``statistical_bits`` bits, which
    hides the sum of their exponents within 2^-statistical_bits (see the module doc)."""
    if max_factors < 1:
        raise ValueError("a re-randomized product has at least one factor")
    bits = short_exponent_bits() + max_factors.bit_length() + statistical_bits
    return public.n, int(base), bits, REPLY_WINDOW_BITS, None


def check_randomizer_base(value: int, public: PublicKey, what: str) -> mpz:
    """A peer's encryptor base g, checked as a ciphertext (in Z*_{N^2}) and of order above
    2 (g != 1 and g^2 != 1), else ``ProtocolError``: the re-randomizers are powers of it."""
    validate_ciphertext(value, public, what)
    base = mpz(value)
    if base == 1 or base * base % public.nsquare == 1:
        raise ProtocolError(f"{what}: the base has order at most 2")
    return base


def nth_power_spec(public: PublicKey) -> tuple:
    """The spec of the ``malicious`` level's re-randomizers s^N mod N^2, s uniform in Z*_N
    (``rerandomizers_bytes``): uniform over the N-th residues whatever the key owner sent,
    with no base of its choosing (see the module doc)."""
    return NTH_POWER, public.n


def rerandomizers_bytes(spec: tuple, count: int, seed: bytes) -> bytes:
    """``count`` re-randomizers, fixed width: s^N for ``nth_power_spec`` (one exponentiation
    each); g^b for ``rerandomizer_spec``, from the fixed-base table of this process (built
    on first use, ``_task_encryptor``) or, for a task too small to pay for a table none has
    built yet, by direct exponentiation of the same exponents."""
    if spec[0] == NTH_POWER:
        return _nth_powers_bytes(spec[1], count, seed)
    n, base, exponent_bits, window_bits, _ = spec
    with _ENCRYPTORS_LOCK:
        tabled = spec in _ENCRYPTORS
    if tabled or count >= REPLY_TABLE_FROM:
        return fast_randomizers_bytes(spec, count, seed)
    windows = math.ceil(exponent_bits / window_bits)
    big_n = mpz(n)
    nsquare, g = big_n * big_n, mpz(base)
    exponents = (
        sum(d << (window_bits * i) for i, d in enumerate(row))
        for row in exponent_digits(count, windows, window_bits, seed)
    )
    return encode_ciphertexts((gmpy2.powmod(g, e, nsquare) for e in exponents), PublicKey(n))


def _nth_powers_bytes(n: int, count: int, seed: bytes) -> bytes:
    """``count`` values s^N mod N^2, s uniform in Z*_N from ``seed``."""
    stream = RandomStream(seed)
    big_n = mpz(n)
    nsquare = big_n * big_n
    return encode_ciphertexts(
        (gmpy2.powmod(_random_unit(n, stream), big_n, nsquare) for _ in range(count)),
        PublicKey(n),
    )


def decrypt_bytes(private_spec: tuple[int, int, int], payload: bytes) -> list[int]:
    """Decrypt fixed-width ciphertexts (already validated) with CRT through phe."""
    n, p, q = private_spec
    public = phe_paillier.PaillierPublicKey(n)
    private = phe_paillier.PaillierPrivateKey(public, p, q)
    width = PublicKey(n).ciphertext_bytes
    return [
        int(private.raw_decrypt(int.from_bytes(payload[i : i + width], "big")))
        for i in range(0, len(payload), width)
    ]
