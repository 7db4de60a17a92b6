"""The table phase at the ``malicious`` level (``TablesConfig.security``): what each party
adds so that a peer running a modified daemon learns nothing beyond its shares.

The attacks, on the semi-honest protocol (``exchange.py``):

- X, the key owner, encrypts record-dependent values (distinct powers of two above the
  slots, or in a guard bit) and reads from the decrypted products which of Y's records
  fell in each configuration (X1); or picks its randomizers and base G so that the
  randomizer of a product tells which records were multiplied (X2); or announces a
  modulus under which masking does not hide (X3).
- Y, the aggregator, multiplies chosen records only, a record twice, or with other
  weights, so that once the counts are opened a row is one record's X-values (Y1).

The defences:

1. Key proof (X3, ``paillier_proofs.py``): before Y sends anything derived from its data,
   it refuses an N with a prime factor below 2^16 and runs the N-th root check, which a
   modulus with gcd(N, phi(N)) != 1 passes with probability below 2^-48
   (CheatingDetected ``tables.key``).
2. Perfect masking (X1, X2): Y masks each returned product with (1 + R N) s^N, R uniform
   in [0, N) and s uniform in Z*_N (one full exponentiation, on the executor), not with
   per-slot masks and X's base. Under gcd(N, phi(N)) = 1 that factor is uniform in
   Z*_{N^2}, so the returned ciphertext is uniform whatever X sent: X learns nothing.
   Shares: X's share of slot s is digit_s(D) mod 2^64 for the decryption D, Y's is
   -digit_s(R) mod 2^64. This trades statistical hiding for statistical correctness: for
   an honest X the pair adds up to the count unless a carry enters or leaves the slot (a
   slot's digit of M is at most n < 2^bits(n), and the slot is bits(n) + sigma + 1 bits
   wide: probability at most 2^-(sigma + 1) each, 2^-sigma per slot) or M + R wraps
   mod N (the plaintexts stay below 2^(bits(N) - 1 - sigma), ``plan.slot_capacity``:
   probability at most 2^-sigma per product).
3. No derived configuration (``TablesConfig.derives_last_configuration``): with complete
   records Y would derive the last configuration's share from its own n_y, a shift no
   check sees; at this level every configuration has a slot.
4. Weights check (Y1): X adds a random 40-bit tag t_i (from X's seeds, never sent in
   clear) in the slot above each group's count slots (``tag_slot``) of every record's
   plaintext. Per (group, S_Y) pair Y returns one more product, of the records whose S_Y
   label is missing (an encryption of its mask alone when none), so that each record is
   a factor of exactly one of the pair's products, and then the sum of the pair's masks
   mod N. X checks sum(D) - sum(R) = S_g mod N, S_g the sum of all its plaintexts of the
   group. Weights w_i other than all ones (mod N) make the difference sum (w_i - 1) m_i,
   which a tag of a record with w_i != 1 must bring to one value mod N: probability at
   most 2^-40. X checks every pair before it uses any share, and raises CheatingDetected
   ``tables.weights`` (sending nothing more) on the first that fails.
   Residual, not closed here: per-product weights that sum to one for every record (2 in
   one product, -1 in another) pass this check; and, as at any level, Y chooses its own
   column (input substitution), per pair.

Cost: the key proof (three exponentiations mod N per side), one slot per ciphertext for
the tags and sigma spare bits, one more returned product per pair, and a full
exponentiation mod N^2 per re-randomizer instead of about 40 multiplications.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import numpy as np
from gmpy2 import mpz

from ppbn.protocols.channel import Channel
from ppbn.protocols.paillier import KeyPair, PublicKey
from ppbn.protocols.paillier_proofs import prove_modulus, verify_modulus
from ppbn.protocols.security import STATISTICAL_ERROR_BITS, CheatingDetected
from ppbn.protocols.seeds import RandomStream
from ppbn.protocols.tables.plan import DirectionPlan, Group

KEY_CHECK = "tables.key"
WEIGHTS_CHECK = "tables.weights"
TAG_BITS = STATISTICAL_ERROR_BITS
SHARE_MODULUS = 1 << 64


def prove_key(channel: Channel, keys: KeyPair) -> None:
    """X: answer Y's key proof (``paillier_proofs.prove_modulus``)."""
    prove_modulus(channel, keys, KEY_CHECK)


def verified_key(channel: Channel, data: bytes, key_bits: int, seed: bytes) -> PublicKey:
    """Y: the peer's public key, once it passed the key proof (CheatingDetected
    ``tables.key`` otherwise) and ``PublicKey.from_bytes``'s checks (ProtocolError)."""
    verify_modulus(channel, int.from_bytes(data, "big"), seed, KEY_CHECK)
    return PublicKey.from_bytes(data, key_bits)


def tag_slot(group: Group) -> int:
    """The slot of the weights check's tags: the one above the group's count slots."""
    return group.slots


def tagged_positions(positions: np.ndarray, seed: bytes, tag_bit: int) -> np.ndarray:
    """X's bit positions of a chunk (``inputs.bit_positions``) with each record's random
    ``TAG_BITS``-bit tag from ``seed`` added as the bits from ``tag_bit`` up."""
    rows = positions.shape[0]
    raw = np.frombuffer(RandomStream(seed).bytes(8 * rows), dtype="<u8")
    tags = raw & np.uint64((1 << TAG_BITS) - 1)
    bits = np.arange(TAG_BITS, dtype=np.uint64)
    set_bits = ((tags[:, None] >> bits[None, :]) & np.uint64(1)).astype(bool)
    columns = np.where(set_bits, tag_bit + np.arange(TAG_BITS, dtype=np.int64), -1)
    return np.concatenate([positions, columns], axis=1)


def plaintext_sum(positions: np.ndarray) -> int:
    """The sum of the plaintexts that rows of bit positions (-1: none) encode."""
    bits, counts = np.unique(positions[positions >= 0], return_counts=True)
    return sum(int(c) << int(b) for b, c in zip(bits.tolist(), counts.tolist(), strict=True))


def mask_pair(
    products: Sequence[mpz | None],
    missing: mpz | None,
    masks: RandomStream,
    rerandomizers: Iterator[mpz],
    public: PublicKey,
    slots: int,
    width: int,
) -> tuple[list[mpz], np.ndarray, int]:
    """Y's returns of one (group, S_Y) pair: each configuration's product, then that of the
    records missing in S_Y (None: empty), times (1 + R N) s^N with R uniform in [0, N)
    and s^N from ``rerandomizers``. Also Y's shares of the configurations' slots,
    -digit_s(R) mod 2^64, and the sum of the pair's masks mod N for the weights check."""
    n = mpz(public.n)
    nsquare = n * n
    slot_mask = (1 << width) - 1
    table = np.empty((len(products), slots), dtype=np.uint64)
    outgoing = []
    total = 0
    for y, value in enumerate([*products, missing]):
        mask = masks.randbelow(public.n)
        mask_ct = (1 + mask * n) * next(rerandomizers) % nsquare
        outgoing.append(mask_ct if value is None else value * mask_ct % nsquare)
        total += mask
        if y < len(products):
            table[y] = [-((mask >> (width * s)) & slot_mask) % SHARE_MODULUS for s in range(slots)]
    return outgoing, table, total % public.n


def send_mask_sums(channel: Channel, sums: Sequence[int], public: PublicKey) -> None:
    """Y: the sum of each pair's masks mod N, after the products."""
    channel.send_ints("tables.mask_sums", sums, (public.bits + 7) // 8)


def _digest(value: int) -> str:
    return hashlib.blake2b(
        value.to_bytes((value.bit_length() + 7) // 8 or 1, "big"), digest_size=16
    ).hexdigest()


def check_weights(
    channel: Channel,
    public: PublicKey,
    plan: DirectionPlan,
    returns: Sequence[int],
    decrypted: Sequence[int],
    group_sums: Sequence[int],
) -> None:
    """X: receive Y's mask sums and check, for every pair before any share is used, that
    its decrypted products less the masks add up to the sum of X's plaintexts of the group
    (module doc), else CheatingDetected ``tables.weights``. ``decrypted``: the pairs'
    ``returns`` products in plan order, each pair's configurations then the product of its
    records missing in S_Y; ``group_sums``: per group, the sum of X's plaintexts."""
    n = public.n
    mask_sums = channel.recv_ints("tables.mask_sums", len(plan.pairs), (public.bits + 7) // 8)
    position = 0
    for (gi, sy), size, mask_sum in zip(plan.pairs, returns, mask_sums, strict=True):
        found = (sum(decrypted[position : position + size]) - mask_sum) % n
        position += size
        expected = group_sums[gi] % n
        if found != expected:
            raise CheatingDetected(
                WEIGHTS_CHECK,
                f"peer's products do not count every record once (group {gi}, subset {','.join(sy)})",
                {
                    "group": gi,
                    "subset": ",".join(sy),
                    "expected": _digest(expected),
                    "found": _digest(found),
                    "session": channel.session.hex(),
                },
            )
