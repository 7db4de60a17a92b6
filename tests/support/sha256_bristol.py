"""The project's own large known-answer circuit: one SHA-256 compression in Bristol Fashion.

The tests need a big netlist whose right answer comes from a standard rather than from
the code under test. Third-party netlists with no named licence stay out of the project
(docs/decisions/test-layout.md), so this module writes one gate by gate from FIPS 180-4:
XOR, AND and INV gates, 32-bit ripple-carry adders (one AND per bit), Ch = g ^ (e & (f ^ g)),
Maj = (a & b) ^ (c & (a ^ b)), the 48 extra message-schedule words, 64 rounds and the
final additions to the chaining value.

Bristol layout and bit order (docs/conventions.md, "Bristol Fashion bit order"): input 0 is
the 512-bit padded block, input 1 the 256-bit chaining value, the output the 256-bit new
chaining value; within each, wire k carries bit k of the value read as one big integer
from its hex string, least significant bit first. Word 0 of a block is therefore its top
32 bits.
"""

from __future__ import annotations

import functools

from ppbn.circuits.bristol import parse_bristol
from ppbn.circuits.ir import Circuit

SHA256_IV = "6a09e667bb67ae853c6ef372a54ff53a510e527f9b05688c1f83d9ab5be0cd19"
ABC_BLOCK = "616263" + "80" + "00" * 52 + "0000000000000018"
ABC_DIGEST = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

ROUND_CONSTANTS = (
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
)  # fmt: skip

# A bit is a wire number (>= 0) or one of these two constants, which need no gate.
ZERO, ONE = -1, -2
Word = list[int]  # 32 bits, least significant first


class Netlist:
    """Gates in creation order; wires are numbered from the last input wire up."""

    def __init__(self, n_input_wires: int) -> None:
        self.next_wire = n_input_wires
        self.gates: list[tuple[str, tuple[int, ...], int]] = []  # (op, input wires, output)

    def emit(self, op: str, *ins: int) -> int:
        wire = self.next_wire
        self.next_wire += 1
        self.gates.append((op, ins, wire))
        return wire

    def xor(self, x: int, y: int) -> int:
        if x == ZERO:
            return y
        if y == ZERO:
            return x
        if x == ONE:
            return self.inv(y)
        if y == ONE:
            return self.inv(x)
        return self.emit("XOR", x, y)

    def inv(self, x: int) -> int:
        if x < 0:
            return ONE if x == ZERO else ZERO
        return self.emit("INV", x)

    def and_(self, x: int, y: int) -> int:
        if ZERO in (x, y):
            return ZERO
        if x == ONE:
            return y
        if y == ONE:
            return x
        return self.emit("AND", x, y)

    def xor_words(self, *words: Word) -> Word:
        out = words[0]
        for word in words[1:]:
            out = [self.xor(a, b) for a, b in zip(out, word, strict=True)]
        return out

    def add(self, x: Word, y: Word) -> Word:
        """x + y mod 2**32, ripple carry: carry' = c ^ ((x ^ c) & (y ^ c)), one AND a bit."""
        carry, out = ZERO, []
        for j, (a, b) in enumerate(zip(x, y, strict=True)):
            out.append(self.xor(self.xor(a, b), carry))
            if j < 31:
                carry = self.xor(carry, self.and_(self.xor(a, carry), self.xor(b, carry)))
        return out

    def ch(self, e: Word, f: Word, g: Word) -> Word:
        return [
            self.xor(gj, self.and_(ej, self.xor(fj, gj)))
            for ej, fj, gj in zip(e, f, g, strict=True)
        ]

    def maj(self, a: Word, b: Word, c: Word) -> Word:
        return [
            self.xor(self.and_(aj, bj), self.and_(cj, self.xor(aj, bj)))
            for aj, bj, cj in zip(a, b, c, strict=True)
        ]


def rotr(x: Word, n: int) -> Word:
    return [x[(j + n) % 32] for j in range(32)]


def shr(x: Word, n: int) -> Word:
    return [x[j + n] if j + n < 32 else ZERO for j in range(32)]


def constant(value: int) -> Word:
    return [ONE if value >> j & 1 else ZERO for j in range(32)]


def words_of(first_wire: int, count: int) -> list[Word]:
    """The bundle's words, most significant first: word i holds bits 32*(count-1-i) and up."""
    return [
        list(range(first_wire + 32 * (count - 1 - i), first_wire + 32 * (count - i)))
        for i in range(count)
    ]


@functools.cache
def sha256_compression_bristol() -> str:
    """Bristol Fashion text of one SHA-256 compression (block, chaining value) -> new value."""
    net = Netlist(512 + 256)
    w = words_of(0, 16)
    for t in range(16, 64):
        s0 = net.xor_words(rotr(w[t - 15], 7), rotr(w[t - 15], 18), shr(w[t - 15], 3))
        s1 = net.xor_words(rotr(w[t - 2], 17), rotr(w[t - 2], 19), shr(w[t - 2], 10))
        w.append(net.add(net.add(net.add(w[t - 16], s0), w[t - 7]), s1))
    chaining = words_of(512, 8)
    a, b, c, d, e, f, g, h = chaining
    for t in range(64):
        big_s1 = net.xor_words(rotr(e, 6), rotr(e, 11), rotr(e, 25))
        big_s0 = net.xor_words(rotr(a, 2), rotr(a, 13), rotr(a, 22))
        t1 = net.add(
            net.add(net.add(h, big_s1), net.ch(e, f, g)),
            net.add(w[t], constant(ROUND_CONSTANTS[t])),
        )
        t2 = net.add(big_s0, net.maj(a, b, c))
        a, b, c, d, e, f, g, h = net.add(t1, t2), a, b, c, net.add(d, t1), e, f, g
    digest = [
        net.add(old, new) for old, new in zip(chaining, (a, b, c, d, e, f, g, h), strict=True)
    ]
    # The output wires must be the last ones, word 7's bit 0 first (least significant).
    out_wires = [bit for word in reversed(digest) for bit in word]
    return renumbered(net, out_wires)


def renumbered(net: Netlist, out_wires: list[int]) -> str:
    """Bristol text of ``net`` with ``out_wires`` renumbered to the top wires, in order."""
    if min(out_wires) < 0 or len(set(out_wires)) != len(out_wires):
        raise ValueError("every output bit must be its own gate's output")
    n_wires = net.next_wire
    first_out = n_wires - len(out_wires)
    rename = list(range(n_wires))  # input wires keep their numbers
    for pos, wire in enumerate(out_wires):
        rename[wire] = first_out + pos
    outputs = set(out_wires)
    next_internal = n_wires - len(net.gates)  # the first wire after the inputs
    for _, _, wire in net.gates:
        if wire not in outputs:
            rename[wire] = next_internal
            next_internal += 1
    lines = [f"{len(net.gates)} {n_wires}", "2 512 256", "1 256"]
    for op, ins, wire in net.gates:
        wires = " ".join(str(rename[x]) for x in (*ins, wire))
        lines.append(f"{len(ins)} 1 {wires} {op}")
    return "\n".join(lines) + "\n"


@functools.cache
def sha256_circuit() -> Circuit:
    """The parsed compression circuit, parsed once per test session (it is large)."""
    return parse_bristol(sha256_compression_bristol(), source="sha256_bristol")


def padded_blocks(message: bytes) -> list[str]:
    """FIPS 180-4 padding of ``message``, as 512-bit blocks in hex (the circuit's input 0)."""
    padded = message + b"\x80" + b"\0" * ((55 - len(message)) % 64)
    padded += (8 * len(message)).to_bytes(8, "big")
    return [padded[i : i + 64].hex() for i in range(0, len(padded), 64)]
