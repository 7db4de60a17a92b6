"""The cost model of one secure term (docs/protocols/cost-model.md): bytes per message
kind (rounds are measured, not modelled), derived from the same constants, circuits and
term arithmetic the protocol runs, so ``ppbn bench ln`` can print what the model predicts
next to what the channel counted.

A term is one count through ``SecureScorer.terms``: the normalisation circuit under Yao
(garbled AND tables, the evaluator's input OTs, decoding bits; the garbler's input labels
follow from a 16-byte seed per run), the table lookups, and the share arithmetic of
``fixedpoint.terms_on`` (products, squares, truncations), whose operand bounds a
``CountingBackend`` records by running the very same function. Per OT the extension
costs KAPPA / 8k bytes of the receiver's u message (SoftSpokenOT at the job's k,
``ot.chunk_count``); a Gilboa product's OT at bit i adds its correction of
ceil((L - i) / 8) bytes in the product's ring Z_2^L (``arith.product_ring``; a product's
two OLEs go one each way, a square's in reverse with one wrap OT forward:
``arith.ole_two_way``), a Yao input OT or a lookup OT a 16-byte correction; a product's
OLEs choose with the narrower operand's share reshared in Z_2^(b + 2) and its top bit
(b + 3 OTs; the resharing sends ceil((b + 2) / 8) bytes, ``arith.reshare``). A product's
result, and a narrow lookup entry, are lifted from an n-bit share to the whole ring by one
OT (``arith.lift_share``: the u message, a correction of ceil((128 - n) / 8) bytes, and one bit
back); a truncation of a sum of products, by masked opening, sends ceil((b + 41) / 8)
bytes (``arith.opening_ring``).
Message framing (tags and sizes) is not modelled: a few bytes per message, nothing per
term in large batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppbn.circuits.schedule import schedule_of
from ppbn.circuits.scoring import normalisation_circuit, shared_outputs
from ppbn.protocols import arith, ring, yao
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS
from ppbn.protocols.fixedpoint import (
    TABLES_ON_J,
    Shift,
    ShiftCoefficients,
    c_table,
    normalisation_spec,
    shift_frac_for,
    tables_on_k,
    terms_on,
)
from ppbn.protocols.learning.terms import normalisation_modes
from ppbn.protocols.ot import chunk_count

BLOCK = 16  # a ring element, a wire label, an OT correction


def correction_bytes(width: int, ring_bits: int) -> int:
    """Bytes of the corrections of the ``width`` OTs of one input in Z_2^ring_bits: OT i
    keeps ceil((ring_bits - i) / 8) (``arith._kept_bytes``)."""
    return sum((ring_bits - i + 7) // 8 for i in range(width))


def lift_bytes(width: int) -> int:
    """Bytes of alice's correction of one wrap OT that lifts an n-bit share (``arith.lift_share``)."""
    return correction_bytes(1, ring.BITS - width)


@dataclass(frozen=True)
class Product:
    """One product of the term arithmetic as the secure backend runs it: operand bounds,
    the ring its OLEs run in (``arith.product_ring``) and the width n of the share it lifts
    (``arith._finish_product``; None in the whole ring)."""

    operand_bits: tuple[int, ...]  # one bound for a square, two for a product
    ring_bits: int
    lifted_width: int | None

    @property
    def reshared_width(self) -> int:
        """Bits m of the narrower operand's reshared share (``arith.reshare``)."""
        return arith.reshared_width(min(self.operand_bits))

    @property
    def choice_width(self) -> int:
        """OTs of each full OLE: the m bits of the share and its top bit."""
        return self.reshared_width + 1

    @property
    def forward_ots(self) -> int:
        """OTs alice sends the corrections of (``arith.ole.y``): a product's OLE that bob
        chooses in, or a square's one wrap OT (``arith.square``)."""
        return self.choice_width if len(self.operand_bits) == 2 else 1

    @property
    def reverse_ots(self) -> int:
        """OTs bob sends the corrections of (``arith.ole.r``): one full OLE."""
        return self.choice_width

    def forward_bytes(self) -> int:
        """Bytes of alice's corrections per value."""
        if len(self.operand_bits) == 2:
            return correction_bytes(self.choice_width, self.ring_bits)
        return correction_bytes(
            1, self.ring_bits - self.reshared_width
        )  # the wrap OT, shifted by m

    def reverse_bytes(self) -> int:
        """Bytes of bob's corrections per value."""
        return correction_bytes(self.choice_width, self.ring_bits)


@dataclass(frozen=True)
class BitProduct:
    """One ``arith.bit_mul``: x of ``width`` XOR-shared bits times y below 2^y_bits, one OT
    per bit each way in the ring of ``arith.exact_ring``, lifted when that is short of 128."""

    width: int
    y_bits: int

    @property
    def ring_bits(self) -> int:
        return arith.exact_ring(self.width + self.y_bits)

    @property
    def lifted_width(self) -> int | None:
        return self.ring_bits if self.ring_bits < ring.BITS else None

    def correction_bytes(self) -> int:
        """Bytes of one direction's corrections."""
        return correction_bytes(self.width, self.ring_bits)


@dataclass
class CountingBackend:
    """``fixedpoint.Backend`` that computes nothing and records what the secure backend
    would send: each product (``Product``, ``BitProduct``) and the bound of each truncation
    by masked opening."""

    products: list[Product] = field(default_factory=list)
    bit_products: list[BitProduct] = field(default_factory=list)
    truncations: list[int] = field(default_factory=list)

    def add(self, x, y):
        return x

    def sub(self, x, y):
        return x

    def scale(self, x, c: int):
        return x

    def scale_each(self, x, cs: list[int]):
        return x

    def constant(self, c: int, like):
        return like

    def truncate(self, x, bits: int, bound_bits: int):
        self.truncations.append(bound_bits)
        return x

    def _product(self, x, bits: int, bound_bits: int, operand_bits: tuple[int, ...]):
        pair = operand_bits * 2 if len(operand_bits) == 1 else operand_bits
        ring_bits = arith.product_ring(bits, bound_bits, pair)
        lifted = ring_bits - bits if ring_bits < ring.BITS else None
        self.products.append(Product(operand_bits, ring_bits, lifted))
        return x

    def mul(self, x, y, bits: int, bound_bits: int, operand_bits: tuple[int, int]):
        return self._product(x, bits, bound_bits, tuple(operand_bits))

    def square(self, x, bits: int, bound_bits: int, operand_bits: int):
        return self._product(x, bits, bound_bits, (operand_bits,))

    def bit_mul(self, x, y, x_bits: int, y_bits: int):
        self.bit_products.append(BitProduct(x_bits, y_bits))
        return y


def opening_bytes(bound_bits: int) -> int:
    """Bytes of one masked opening (truncation or lift) of a value below 2^bound_bits."""
    return (arith.opening_ring(bound_bits) + 7) // 8


def table_bytes(table: tuple[int, ...]) -> int:
    """Bytes of one instance's masked copy of a public table (``arith.entry_bytes``)."""
    return len(table) * arith.entry_bytes(arith.table_entry_bits(table))


YAO = "ln terms (Yao)"
SHARES = "ln terms (shares)"


@dataclass(frozen=True)
class TermCost:
    """Predicted bytes of one secure term by (phase, message kind), and its AND gates and OTs."""

    bytes_by_kind: dict[tuple[str, str], float]
    and_gates: int
    ots: int

    @property
    def total(self) -> float:
        return sum(self.bytes_by_kind.values())


def term_cost(
    count_bits: int, mode: str, shift: float | None = None, ot_k: int = DEFAULT_SUBFIELD_BITS
) -> TermCost:
    """The model of one term of counts below 2^count_bits in ``mode`` (bdeu: the public
    shift a) with OT extensions at SoftSpokenOT's ``ot_k``; see the module docstring for
    what each kind is made of."""
    u_bytes = chunk_count(ot_k) / 8  # the OT receiver's u message per OT
    shift_frac = shift_frac_for(count_bits) if mode == "bdeu" else 0
    the_shift = Shift(shift, shift_frac) if mode == "bdeu" else None
    spec = normalisation_spec(count_bits, mode, the_shift)
    circuit = normalisation_circuit(spec)
    outputs = normalisation_modes(spec)
    garbled = yao.garbled_circuit(circuit, outputs)
    decode_bits = sum(
        garbled.output(name).width for name, how in outputs.items() if how != yao.Reveal.BIT_SHARES
    )

    be = CountingBackend()
    tables = [tables_on_k(mode, count_bits, shift_frac), list(TABLES_ON_J)]
    c = c_table(mode, the_shift)
    if c is not None:
        tables.append([c])
    lookup_ots = sum(len(group[0]).bit_length() - 1 for group in tables)
    coefficients = ShiftCoefficients.of([the_shift]) if the_shift is not None else None
    shared = {name: name for name in shared_outputs(spec)}
    terms_on(be, mode, count_bits, shared, "r", "K", "J", "C", coefficients, shift_frac)
    # every share that ends in ``arith.lift_share``: products, bit products, narrow table entries
    lifted = [
        p.lifted_width for p in [*be.products, *be.bit_products] if p.lifted_width is not None
    ]
    lifted += [
        arith.entry_width(bits)
        for group in tables
        for t in group
        if (bits := arith.table_entry_bits(t)) is not None
    ]
    bit_ots = sum(2 * p.width for p in be.bit_products)
    share_ots = (
        sum(p.forward_ots + p.reverse_ots for p in be.products) + bit_ots + lookup_ots + len(lifted)
    )
    forward = sum(p.forward_bytes() for p in be.products)  # ``arith.ole_two_way``
    reverse = sum(p.reverse_bytes() for p in be.products)
    kinds = {
        (YAO, "yao.tables"): 2 * BLOCK * schedule_of(garbled).n_and,
        (YAO, "ot.ext.u"): u_bytes * count_bits,  # the evaluator's count share, by OT
        (YAO, "ot.ext.y"): BLOCK * count_bits,
        (YAO, "yao.decode"): decode_bits / 8,
        (SHARES, "arith.ole.y"): forward,
        (SHARES, "arith.ole.r"): reverse,
        (SHARES, "ot.ext.u"): u_bytes * share_ots,
        (SHARES, "arith.lookup"): sum(table_bytes(t) for group in tables for t in group),
        (SHARES, "arith.reshare"): sum((p.reshared_width + 7) // 8 for p in be.products),
        (SHARES, "arith.trunc"): sum(opening_bytes(b) for b in be.truncations),
        (SHARES, "arith.wrap"): sum(lift_bytes(n) for n in lifted),
        (SHARES, "arith.wrap.d"): len(lifted) / 8,
        (SHARES, "arith.bits.y"): sum(p.correction_bytes() for p in be.bit_products),
        (SHARES, "arith.bits.r"): sum(p.correction_bytes() for p in be.bit_products),
    }
    return TermCost(kinds, schedule_of(garbled).n_and, count_bits + share_ots)
