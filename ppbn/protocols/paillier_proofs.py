"""Proof that a peer's Paillier modulus N lets the ``malicious`` level's masking hide.

Why: at the ``malicious`` level the party without the key masks every product it returns
to the key owner with (1 + R N) s^N mod N^2, R uniform in [0, N), s uniform in Z*_N
(``tables/checks.py``). That factor makes the returned ciphertext uniform in Z*_{N^2},
whatever the key owner put into the product, exactly when x -> x^N permutes Z*_N, that is
when gcd(N, phi(N)) = 1. A key owner that announces another N (p^2 q, or p q with
p | q - 1) could read the other party's data from the decryptions. ``PublicKey.from_bytes``
only refuses malformed moduli; this module certifies the one property the masking needs.

The test is the N-th root check of Goldberg, Reyzin, Sagga and Baldimtsi ("Efficient
noninteractive certification of RSA moduli and beyond", ASIACRYPT 2019), run
interactively:

1. the verifier refuses an N with a prime factor below alpha = 2^16 (one gcd with the
   product of those primes: trial division at once);
2. it sends a fresh 32-byte seed of its own; both sides derive ``ROOT_CHALLENGES`` = 3
   challenges rho_j in Z*_N from it, the job's session label and N by a hash. The
   verifier cannot choose them: an N-th root mod N of a value of its choosing would open
   any of the prover's ciphertexts c, whose residue mod N is r^N;
3. the prover answers sigma_j = rho_j^(N^-1 mod phi(N)) mod N;
4. the verifier checks sigma_j^N = rho_j mod N for every j.

Soundness: if gcd(N, phi(N)) != 1, the kernel of x -> x^N on Z*_N has an order divisible
by a prime p dividing N, and p >= 2^16 once step 1 passed, so at most 2^-16 of Z*_N has an
N-th root; three independent challenges all pass with probability below 2^-48 (the
``malicious`` level asks for 2^-40). Completeness: an honest key (N = p q, p and q primes
of the same size) has gcd(N, phi(N)) = 1, and every challenge has its root. Cost: three
exponentiations mod N at each side, a few milliseconds at 2048 bits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import gmpy2
from gmpy2 import mpz

from ppbn.circuits.garble import length_prefixed
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.paillier import SMALL_PRIME_BITS, SMALL_PRIMES_PRODUCT, KeyPair
from ppbn.protocols.security import CheatingDetected
from ppbn.protocols.seeds import SEED_BYTES, RandomStream

ROOT_CHALLENGES = 3  # each passes a bad modulus with probability < 2^-16: < 2^-48 in all
PROOF_PROTOCOL = b"ppbn/paillier-modulus"


def has_small_factor(n: int) -> bool:
    """Whether ``n`` has a prime factor below 2^16 (trial division by all of them at once)."""
    return gmpy2.gcd(n, SMALL_PRIMES_PRODUCT) != 1


def root_challenges(n: int, seed: bytes, session: bytes, count: int = ROOT_CHALLENGES) -> list[int]:
    """``count`` challenges uniform in Z*_N, derived from the verifier's ``seed``, the job's
    ``session`` label and N, so that neither side chooses them."""
    key = hashlib.blake2b(
        length_prefixed(
            PROOF_PROTOCOL, session, int(n).to_bytes((n.bit_length() + 7) // 8, "big"), seed
        ),
        digest_size=SEED_BYTES,
    ).digest()
    stream = RandomStream(key)
    out: list[int] = []
    while len(out) < count:
        rho = stream.randbelow(n)
        if rho and gmpy2.gcd(rho, n) == 1:
            out.append(rho)
    return out


def answer_root_challenges(n: int, p: int, q: int, challenges: Sequence[int]) -> list[int]:
    """The prover's N-th roots of ``challenges`` mod N = p q; ValueError if the key has no
    such roots (gcd(N, phi(N)) != 1: not a key this build makes)."""
    phi = (mpz(p) - 1) * (mpz(q) - 1)
    if p * q != n or gmpy2.gcd(n, phi) != 1:
        raise ValueError("this key cannot be certified: gcd(N, phi(N)) != 1")
    exponent = gmpy2.invert(mpz(n), phi)
    return [int(gmpy2.powmod(rho, exponent, n)) for rho in challenges]


def roots_hold(n: int, challenges: Sequence[int], answers: Sequence[int]) -> bool:
    """The verifier's check: every answer is in [0, N) and its N-th power is its challenge."""
    return len(answers) == len(challenges) and all(
        0 <= sigma < n and gmpy2.powmod(sigma, n, n) == rho
        for rho, sigma in zip(challenges, answers, strict=True)
    )


def _modulus_bytes(n: int) -> int:
    return (n.bit_length() + 7) // 8


def prove_modulus(channel: Channel, keys: KeyPair, check: str) -> None:
    """The key owner's side: receive the verifier's seed, send the roots of its challenges."""
    seed = channel.recv(f"{check}.challenge", max_bytes=SEED_BYTES)
    if len(seed) != SEED_BYTES:
        raise ProtocolError(f"{check}.challenge: {len(seed)} bytes, expected {SEED_BYTES}")
    n = keys.public.n
    p, q = int(keys.private.p), int(keys.private.q)
    answers = answer_root_challenges(n, p, q, root_challenges(n, seed, channel.session))
    channel.send_ints(f"{check}.proof", answers, _modulus_bytes(n))


def verify_modulus(channel: Channel, n: int, seed: bytes, check: str) -> None:
    """The verifier's side, with a fresh ``seed`` of its own: CheatingDetected(``check``)
    unless N has no prime factor below 2^16 and passes the N-th root check (module doc).
    Call it before sending anything that N's hiding must protect."""
    # the public values of the check, so that an auditor can recompute it from the audit
    # log alone (``parties/cheating_evidence.py``): the modulus, the seed, the session
    evidence: dict[str, str | int] = {
        "modulus": format(int(n), "x"),
        "session": channel.session.hex(),
    }
    if has_small_factor(n):
        raise CheatingDetected(
            check,
            f"peer's Paillier modulus has a prime factor below 2^{SMALL_PRIME_BITS}",
            evidence,
        )
    channel.send(f"{check}.challenge", seed)
    answers = channel.recv_ints(f"{check}.proof", ROOT_CHALLENGES, _modulus_bytes(n))
    if not roots_hold(n, root_challenges(n, seed, channel.session), answers):
        evidence["seed"] = seed.hex()
        evidence.update({f"answer_{j}": format(int(a), "x") for j, a in enumerate(answers)})
        raise CheatingDetected(
            check,
            "peer's Paillier modulus failed the N-th root check (gcd(N, phi(N)) != 1)",
            evidence,
        )
