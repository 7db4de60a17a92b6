"""Secure contingency tables: additive shares in Z_2^64 of every count a family needs.

Yang-Wright (Sec. 6.3) obtain each alpha_ijk = #records with (v_i, pi_i) = (k, j) as one
n-long scalar product of the parties' compatibility vectors (Sec. 5.3, Paillier): one
vector of n encryptions per alpha. ppbn computes whole tables, for many families, in one
pass, since the public-key operations are where the cost is (docs/design.md, "Where the cost is"):

1. A family F splits into the encrypting party X's variables S_X and the other party
   Y's variables S_Y. For each record, X encrypts *once* the one-hot indicators of the
   record's configuration of each of its subsets S_X, packed side by side into plaintext
   slots of w = bits(n) + sigma + 1 bits (sigma >= 40 statistical masking bits, one guard
   bit); a ciphertext holds (key_bits - 1) // w slots, so many subsets share it.
2. Y multiplies, per configuration y of S_Y, the ciphertexts of the records with S_Y = y
   (homomorphic sum: slot (S_X, x) then holds alpha(x, y)). Y first aggregates over the
   joint configurations of a *cluster* of its subsets and marginalises the products, so a
   record costs one multiplication per cluster instead of one per subset.
   With complete records (``TablesConfig.complete_records``: any ``--missing`` rule but
   available-case, agreed in the hello) at the semi-honest level the last configuration
   of each subset gets no slot: every record has exactly one configuration of S_X, so its
   count is Y's own count of y less the others (``exchange._assemble``), which saves
   1/|S_X| of the slots (half for a binary variable), and with them encryptions,
   products, ciphertexts and returns.
3. Y adds a fresh mask r < 2^(bits(n) + sigma) to every slot, re-randomizes with g^b for
   X's encryptor base g and b uniform of 264 + bits(n) + sigma bits (``paillier.py``: the
   key owner could otherwise look at the randomizer, g^s for s the sum of at most n of its
   264-bit exponents; b drowns s within 2^-sigma), and returns; X decrypts. Slot value
   v = alpha + r is statistically hidden (distance <= 2^-sigma). Shares: X holds v mod
   2^64, Y holds -r mod 2^64; their sum mod 2^64 is alpha. The shares are statistically
   hiding, not uniform in Z_2^64.

Missing cells (``--missing available-case``, code -1): each party applies the rule to its
own columns. X's indicator row for a subset with a missing variable is all zeros (an
encryption of 0, like any other); Y labels the record with an extra "missing" state of
that variable when aggregating a cluster and leaves those labels out when marginalising
to a subset that contains the variable. A record thus adds to a family's cell only if
neither party's part of the family is missing, as in ``bn.k2.count_table``.

Each party encrypts under its own key (X is always the key owner). Ciphertexts are
streamed in chunks of records (memory stays flat in n) and Y may keep them for later
calls of the same ``TablesSession`` (in memory up to ``cache_bytes``, then in a
memory-mapped spill file up to ``spill_bytes``); the plan reuses cached ciphertexts and otherwise
picks, by a cost model, which party encrypts which family (both compute the same plan
from public data). A family held entirely by one party is counted by that party: its
share is the count table itself (its own data) and the other party's share is zero.
The bulk work runs on the party's own executor (``protocols/executor.py``): X's encryption of
record chunks and decryption of the returned pieces, Y's products per chunk, combined in
a tree, and Y's re-randomizers. Randomness is drawn in this thread as per-task seeds,
so the shares and the transcript are the same whichever executor ran the tasks.
Every received message is validated (the peer's Paillier modulus by
``PublicKey.from_bytes`` against the locally configured key size, sizes, ciphertexts in
Z*_{N^2}, agreement on n, the family list, the session label and the configuration); a
mismatch raises ProtocolError.

At the ``malicious`` level (``TablesConfig.security``, ``checks``) X first proves its
modulus (gcd(N, phi(N)) = 1), Y masks each returned product whole (R uniform in [0, N),
re-randomizer s^N), no configuration is derived, and a weights check with random per-record
tags and one extra product per (group, S_Y) pair catches a Y that does not multiply every
record exactly once; a failed check raises CheatingDetected.

The modules, each importing only those above it: ``config`` (``TablesConfig``), ``plan``
(pure: families, slot layout, cost model), ``inputs`` (pure: each record's part of a
chunk's tasks), ``session`` (keys, executor, ciphertext cache), ``checks`` (the malicious
level's pieces) and ``exchange`` (the messages and ``run_tables``).
"""

from ppbn.protocols.tables.config import TablesConfig
from ppbn.protocols.tables.exchange import TREE_FANIN, reconstruct, run_tables
from ppbn.protocols.tables.inputs import MISSING, chunk_inputs, config_index
from ppbn.protocols.tables.plan import crossing_families, per_alpha_cost, slot_bits
from ppbn.protocols.tables.session import TablesSession

__all__ = [
    "MISSING",
    "TREE_FANIN",
    "TablesConfig",
    "TablesSession",
    "chunk_inputs",
    "config_index",
    "crossing_families",
    "per_alpha_cost",
    "reconstruct",
    "run_tables",
    "slot_bits",
]
