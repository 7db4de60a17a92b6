"""The key proof of the malicious level (``paillier_proofs.py``): an honest key passes, a
modulus with a small factor or with gcd(N, phi(N)) != 1 is caught, and the challenges are
fixed by the verifier's seed, never chosen by it.

``bad_key`` builds key pairs for such moduli; ``test_tables_malicious.py`` uses it too.
"""

from __future__ import annotations

import random

import gmpy2
import pytest
from phe import paillier as phe_paillier

from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.paillier import KeyPair, PublicKey
from ppbn.protocols.paillier_proofs import (
    answer_root_challenges,
    has_small_factor,
    prove_modulus,
    root_challenges,
    roots_hold,
    verify_modulus,
)
from ppbn.protocols.security import CheatingDetected

BAD_MODULI = ("small_factor", "p_divides_q_minus_1", "p_squared_q")


def _prime(bits: int, rng: random.Random) -> int:
    return int(gmpy2.next_prime(rng.getrandbits(bits) | (1 << (bits - 1))))


def bad_factors(kind: str, bits: int = 1024, seed: int = 7) -> tuple[int, int]:
    """Two factors (f1, f2) of a ``bits``-bit modulus N = f1 f2 that a cheating key owner could
    announce: 3 q (a prime factor below 2^16), p q with a 20-bit p dividing q - 1, or
    p^2 q (f1 = p^2); the last two have gcd(N, phi(N)) != 1."""
    rng = random.Random(seed)
    while True:
        if kind == "small_factor":
            f1 = 3
            f2 = _prime(bits - 1, rng)
        elif kind == "p_divides_q_minus_1":
            f1 = _prime(20, rng)
            while True:
                f2 = 2 * f1 * rng.getrandbits(bits - 41) + 1
                if gmpy2.is_prime(f2):
                    break
        else:
            p = _prime(bits // 3, rng)
            f1, f2 = p * p, _prime(bits - 2 * (bits // 3), rng)
        if (f1 * f2).bit_length() == bits:
            return f1, f2


def bad_key(kind: str, bits: int = 1024) -> KeyPair:
    """A key pair (phe's decryption keys) for a bad modulus of ``bad_factors``."""
    f1, f2 = bad_factors(kind, bits)
    public = phe_paillier.PaillierPublicKey(f1 * f2)
    return KeyPair(PublicKey(f1 * f2), phe_paillier.PaillierPrivateKey(public, f1, f2))


@pytest.fixture(scope="module")
def keys() -> KeyPair:
    return KeyPair.generate(1024)


def test_an_honest_key_answers_every_challenge(keys: KeyPair) -> None:
    n = keys.public.n
    challenges = root_challenges(n, bytes(32), b"job")
    assert len(challenges) == 3 and all(
        0 < rho < n and gmpy2.gcd(rho, n) == 1 for rho in challenges
    )
    answers = answer_root_challenges(n, int(keys.private.p), int(keys.private.q), challenges)
    assert roots_hold(n, challenges, answers)
    assert not roots_hold(n, challenges, [answers[0], answers[1], answers[2] + 1])
    assert not roots_hold(n, challenges, [answers[0] + n, answers[1], answers[2]])  # not reduced
    assert not roots_hold(n, challenges, answers[:2])
    assert not has_small_factor(n)


def test_challenges_follow_the_seed_the_session_and_the_modulus(keys: KeyPair) -> None:
    """The verifier picks a seed, not the challenges: it cannot ask for the N-th root of a
    value of its choosing (the residue mod N of one of the prover's ciphertexts)."""
    n = keys.public.n
    first = root_challenges(n, bytes(32), b"job")
    assert root_challenges(n, bytes(32), b"job") == first
    assert root_challenges(n, bytes(31) + b"\x01", b"job") != first
    assert root_challenges(n, bytes(32), b"another job") != first
    assert root_challenges(n + 2, bytes(32), b"job") != first


@pytest.mark.parametrize("kind", BAD_MODULI)
def test_bad_moduli_are_refused_or_have_almost_no_nth_roots(kind: str) -> None:
    """A small factor is refused outright; with gcd(N, phi(N)) != 1 at most 1/p of Z*_N has
    an N-th root (p >= 2^16 the prime in the gcd), so no cheating prover can answer: none of
    200 challenges has a root, and the prover's formula has no exponent or a wrong one."""
    f1, f2 = bad_factors(kind)
    n = f1 * f2
    if kind == "small_factor":
        assert has_small_factor(n)
        return
    assert not has_small_factor(n)
    challenges = root_challenges(n, bytes(32), b"job", count=200)
    if kind == "p_divides_q_minus_1":  # rho has an N-th root iff rho^((q-1)/p) = 1 mod q
        rooted = [gmpy2.powmod(rho, (f2 - 1) // f1, f2) == 1 for rho in challenges]
    else:  # N = p^2 q: a root needs rho^(p-1) = 1 mod p^2
        p = gmpy2.isqrt(f1)
        rooted = [gmpy2.powmod(rho, p - 1, f1) == 1 for rho in challenges]
    assert not any(rooted)
    if kind == "p_divides_q_minus_1":
        with pytest.raises(ValueError, match="cannot be certified"):
            answer_root_challenges(n, f1, f2, challenges[:3])
    else:  # (p^2 - 1)(q - 1) is not phi(N) and is prime to N: its "roots" are wrong
        answers = answer_root_challenges(n, f1, f2, challenges[:3])
        assert not roots_hold(n, challenges[:3], answers)


def _prove_and_verify(keys: KeyPair, verify_n: int | None = None) -> None:
    pair = memory_channel_pair(timeout_s=30, session=b"job")

    def verifier(channel):
        return verify_modulus(channel, verify_n or keys.public.n, bytes(range(32)), "tables.key")

    run_two_party(lambda ch: prove_modulus(ch, keys, "tables.key"), verifier, pair=pair)


def test_the_proof_over_a_channel(keys: KeyPair) -> None:
    _prove_and_verify(keys)
    # a prover that answers for another modulus (or anything else) is caught
    with pytest.raises(CheatingDetected, match="N-th root check") as caught:
        _prove_and_verify(keys, verify_n=KeyPair.generate(1024).public.n)
    assert caught.value.check == "tables.key"
    evidence = caught.value.evidence
    assert set(evidence) == {"modulus", "session", "seed", "answer_0", "answer_1", "answer_2"}
    assert evidence["session"] == b"job".hex() and evidence["seed"] == bytes(range(32)).hex()


def test_a_small_factor_is_caught_before_any_challenge() -> None:
    keys = bad_key("small_factor")
    pair = memory_channel_pair(timeout_s=30)
    with pytest.raises(CheatingDetected, match="prime factor below 2\\^16"):
        run_two_party(
            lambda ch: prove_modulus(ch, keys, "tables.key"),
            lambda ch: verify_modulus(ch, keys.public.n, bytes(32), "tables.key"),
            pair=pair,
        )
    assert pair[1].stats.messages_sent == 0  # not even the challenge's seed
