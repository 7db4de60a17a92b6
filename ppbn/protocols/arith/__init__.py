"""Secure arithmetic on additive shares over Z_2^128: multiplication, truncation, lookup.

Two parties, semi-honest (docs/design.md, "Security model"). A shared vector x is
held as x = x_alice + x_bob mod 2^128, each share an (n, 2) uint64 ring vector (``ring``),
values in the fixed-point format of ``fixedpoint`` (two's complement, FRAC fractional
bits). Both parties call the same function with their own share and their own
``ArithSession``. Two OT extensions run over the channel: the forward one (alice sends,
bob chooses) and the reverse one (bob sends, alice chooses); a product puts one of its two
OLEs on each (``ole_two_way``) and a square its one on the reverse extension, so the OLE
bytes lean towards bob's direction, which carries less of the rest. Everything is batched
over n values. Each protocol function states what each party sees; the counters say how
much work was done (OTs, multiplications, truncations, lookups).

One kind of building block per module, each importing only those listed before it:
``checks`` (input checks, MAX_BOUND_BITS), ``session`` (``ArithSession`` and alice's
deferred lifts), ``cot`` (correlated OT with shortened corrections), ``gilboa`` (OLE, one
way or both), ``lift`` (shares with a known top bit: resharing, lifting to Z_2^128),
``products`` (truncation, ``mul``, ``square``, ``bit_mul``, ``mul_public``) and
``table_lookup`` (lookup with a masked index). This package exports what the rest of
ppbn uses.
"""

from ppbn.protocols.arith.checks import MAX_BOUND_BITS
from ppbn.protocols.arith.gilboa import OlePart, ole, ole_two_way
from ppbn.protocols.arith.lift import reshared_width
from ppbn.protocols.arith.products import (
    bit_mul,
    exact_ring,
    mul,
    mul_public,
    opening_ring,
    product_ring,
    square,
    truncate,
)
from ppbn.protocols.arith.session import ALICE, BOB, ArithSession
from ppbn.protocols.arith.table_lookup import (
    entry_bytes,
    entry_width,
    lookup,
    lookup_batch,
    lookup_many,
    table_entry_bits,
)

__all__ = [
    "ALICE",
    "BOB",
    "MAX_BOUND_BITS",
    "ArithSession",
    "OlePart",
    "bit_mul",
    "entry_bytes",
    "entry_width",
    "exact_ring",
    "lookup",
    "lookup_batch",
    "lookup_many",
    "mul",
    "mul_public",
    "ole",
    "ole_two_way",
    "opening_ring",
    "product_ring",
    "reshared_width",
    "square",
    "table_entry_bits",
    "truncate",
]
