"""``bench paillier``'s engine: ppbn's fast Paillier encryption (protocols/paillier.py)
timed against phe's ``encrypt`` with the same key in the same run, so both meet the same
machine noise."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from ppbn.errors import UserError


@dataclass(frozen=True)
class PaillierSettings:
    """What ``bench paillier`` times: the key size and how many encryptions of each kind."""

    key_bits: int = 2048
    count: int = 600
    phe_count: int = 60


def bench_paillier(settings: PaillierSettings) -> dict:
    """Milliseconds per encryption: ppbn's key-owner path (CRT), its public-key-only path,
    with precomputed randomizers, and phe's; the figures ``--format json`` prints."""
    from ppbn.protocols.paillier import FastEncryptor, KeyPair

    count, phe_count = settings.count, settings.phe_count
    if count < 1 or phe_count < 1:
        raise UserError("--count and --phe-count must be at least 1")
    keys = KeyPair.generate(settings.key_bits)
    start = time.perf_counter()
    fast = FastEncryptor(keys.public, factors=(int(keys.private.p), int(keys.private.q)))
    fast.build_tables()
    setup_s = time.perf_counter() - start
    public_only = FastEncryptor(keys.public, base=int(fast.base))
    public_only.build_tables()  # outside the timed runs, as the key owner's
    phe_key = keys.public.phe_key()
    messages = [secrets.randbits(64) for _ in range(max(count, phe_count))]
    totals = {"ppbn": 0.0, "public_only": 0.0, "phe": 0.0}
    rounds = 3  # interleaved, so machine noise hits both paths alike
    for r in range(rounds):
        batch = messages[r * count // rounds : (r + 1) * count // rounds]
        start = time.perf_counter()
        cts = fast.encrypt_many(batch)
        totals["ppbn"] += time.perf_counter() - start
        start = time.perf_counter()
        public_only.encrypt_many(batch)
        totals["public_only"] += time.perf_counter() - start
        for m in messages[r * phe_count // rounds : (r + 1) * phe_count // rounds]:
            start = time.perf_counter()
            phe_key.encrypt(m)
            totals["phe"] += time.perf_counter() - start
    if keys.decrypt(cts[0]) != batch[0]:
        raise RuntimeError("fast encryption did not decrypt to its plaintext")
    fast.precompute(count)
    start = time.perf_counter()
    fast.encrypt_many(messages[:count])
    pooled_ms = (time.perf_counter() - start) / count * 1e3
    ppbn_ms = totals["ppbn"] / count * 1e3
    phe_ms = totals["phe"] / phe_count * 1e3
    public_ms = totals["public_only"] / count * 1e3
    return {
        "key_bits": settings.key_bits,
        "ppbn_encrypt_ms": round(ppbn_ms, 4),
        "phe_encrypt_ms": round(phe_ms, 4),
        "ratio": round(phe_ms / ppbn_ms, 1),
        "ppbn_public_key_only_encrypt_ms": round(public_ms, 4),
        "ratio_public_key_only": round(phe_ms / public_ms, 1),
        "ppbn_precomputed_encrypt_ms": round(pooled_ms, 4),
        "ratio_precomputed": round(phe_ms / pooled_ms, 1),
        "table_setup_s": round(setup_s, 3),
        "exponent_bits": fast.windows * fast.window_bits,
        "window_bits": fast.window_bits,
        "ppbn_count": count,
        "phe_count": phe_count,
    }


def paillier_rows(report: dict) -> list[tuple[str, str, str]]:
    """The table ``bench paillier`` prints for people: what, time, speed-up over phe."""
    return [
        ("phe encrypt", f"{report['phe_encrypt_ms']:.3f} ms", "1x"),
        (
            "ppbn fast path (key owner, CRT)",
            f"{report['ppbn_encrypt_ms']:.4f} ms",
            f"{report['ratio']}x",
        ),
        (
            "ppbn fast path (public key only)",
            f"{report['ppbn_public_key_only_encrypt_ms']:.4f} ms",
            f"{report['ratio_public_key_only']}x",
        ),
        (
            "ppbn with precomputed randomizers",
            f"{report['ppbn_precomputed_encrypt_ms']:.4f} ms",
            f"{report['ratio_precomputed']}x",
        ),
        ("fixed-base table setup (once per key)", f"{report['table_setup_s']:.2f} s", ""),
        (
            "short exponent",
            f"{report['exponent_bits']} bits, windows of {report['window_bits']}",
            "",
        ),
    ]
