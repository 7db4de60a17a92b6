"""s-probe-resistant input encoding: the evaluator's input bits as a linear code's message.

Why (Lindell and Pinkas, EUROCRYPT 2007, Sec. 3.1.1; shelat and Shen, EUROCRYPT 2013):
in the covert cut-and-choose of ``yao_covert`` a garbler may corrupt the OT message of
value b on one of the evaluator's input wires (selective failure): whether something then
goes wrong tells it whether the wire carries b. So the evaluator does not feed its n input
bits y; it feeds m encoded bits y' with M y' = y over GF(2), for a public n x m binary
matrix M, y' uniform among the solutions, and the garbled circuit computes y = M y' with
XOR gates ahead of the agreed circuit (free under free-XOR: no tables, no AND gates, the
same tweaks).

The property: M is s-probe-resistant when the XOR of any nonempty set of its rows has
Hamming weight at least s, i.e. its rows generate a binary linear code of dimension n and
minimum distance at least s. Then for any set S of fewer than s encoded wires, y'_S is
uniform and independent of y: for every nonzero a, a^T M has a 1 outside S, so the rows of
M and the unit vectors of S are linearly independent, the map y' -> (M y', y'_S) is onto,
and a uniform y' gives a uniform (y, y'_S); conditioned on y = M y', y'_S stays uniform.
A garbler that corrupts one message on each wire of S (corrupting both messages of a wire
fails whatever y is) gets an outcome that is a function of y'_S: independent of y when
|S| < s. When |S| >= s the run goes on unharmed only if y' avoids every corrupted message,
i.e. y'_S is one vector, which has probability at most 2^-(s-1) for every y (already a
subset of s - 1 wires of S is uniform); so "did my cheating go unnoticed" moves by at most
2^-(s-1) with y. With ``yao_covert.PROBE_RESISTANCE`` s = 40 that is 2^-39, the bound of
the 40 independent XOR shares per bit this encoding replaces.

The matrix (``probe_encoding``), systematic M = [I_n | P], built, not drawn, so the
property is guaranteed rather than likely (a drawn n x m matrix cannot be checked for n in
the hundreds: 2^n row sets), and both parties get the same M from (n, s) alone:

- BCH: the rows of M are the codewords x^(D+i) + (x^(D+i) mod g(x)), i < n, of the
  narrow-sense binary BCH code of length 2^r - 1 with the consecutive roots alpha^1 ..
  alpha^(s-1) in GF(2^r), shortened to length m = n + D, D = deg g. The BCH bound gives
  minimum distance >= s, and shortening keeps it. g's roots are the cyclotomic cosets of
  the odd numbers below s, at most r each, so D <= r ceil((s - 1) / 2); r is the least
  with 2^r - 1 >= n + D (r <= ``MAX_FIELD_BITS``), so m = n + O(s log n): for n = 128 and
  s = 40, r = 9 and m = 128 + 171 = 299 (the bound says 308; 40 n = 5,120).
- Repetition: P = blockwise s - 1 ones per bit, m = s n: each bit the XOR of s shares, the
  encoding this replaces. It is used when it is shorter (n <= 2 at s = 40) and above the
  largest field in the table (n over about 65,000 bits per instance): there the BCH code
  would need a larger field, so the encoding falls back to it.

The evaluator picks y' as M y' = y has it in systematic form: the last m - n bits z
uniform, the first n bits y XOR P z (``ProbeEncoding.encode``), each solution equally
likely. The circuit computes y_i = y'_i XOR (P z)_i with one balanced XOR tree per bit
(``encoded_circuit``): weight(row i) - 1 free gates, about D / 2 per bit for BCH.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ppbn.circuits.ir import Bundle, Circuit, Op
from ppbn.protocols.seeds import RandomStream

# primitive polynomials of degree r over GF(2), bit i the coefficient of x^i (Lin and
# Costello, "Error Control Coding", table 2.7); ``field_tables`` checks each is primitive
PRIMITIVE_POLYNOMIALS = {
    3: 0b1011,
    4: 0b10011,
    5: 0b100101,
    6: 0b1000011,
    7: 0b10001001,
    8: 0b100011101,
    9: 0b1000010001,
    10: 0b10000001001,
    11: 0b100000000101,
    12: 0b1000001010011,
    13: 0b10000000011011,
    14: 0b100010001000011,
    15: 0b1000000000000011,
    16: 0b10001000000001011,
}
MAX_FIELD_BITS = max(PRIMITIVE_POLYNOMIALS)
ENCODED_BUNDLE = "probe-encoded evaluator input"


@dataclass(frozen=True)
class ProbeEncoding:
    """M = [I_n | parity] for n input bits: ``parity`` (n, m - n) uint8, ``construction``
    "bch", "repetition" or "identity" (s = 1: no encoding)."""

    parity: np.ndarray
    construction: str

    @property
    def inputs(self) -> int:
        return self.parity.shape[0]

    @property
    def width(self) -> int:
        """m: the encoded bits, one OT each per instance."""
        return sum(self.parity.shape)

    def matrix(self) -> np.ndarray:
        """M, (n, m) uint8."""
        return np.concatenate([np.eye(self.inputs, dtype=np.uint8), self.parity], axis=1)

    def encode(self, bits: np.ndarray, stream: RandomStream) -> np.ndarray:
        """(n, instances) bits as (m, instances): z uniform from ``stream``, then y XOR P z."""
        n, instances = bits.shape
        free = self.parity.shape[1]
        count = free * instances
        drawn = np.frombuffer(stream.bytes((count + 7) // 8), dtype=np.uint8)
        z = np.unpackbits(drawn, count=count, bitorder="little").reshape(free, instances)
        head = bits.astype(np.uint8) ^ parity_product(self.parity, z)
        return np.concatenate([head, z], axis=0)

    def decode(self, encoded: np.ndarray) -> np.ndarray:
        """M y' for (m, instances) bits: what the encoded circuit computes."""
        n = self.inputs
        return encoded[:n].astype(np.uint8) ^ parity_product(self.parity, encoded[n:])


def parity_product(parity: np.ndarray, z: np.ndarray) -> np.ndarray:
    """P z over GF(2), (n, instances) uint8 (float32 sums are exact below 2^24 terms)."""
    sums = parity.astype(np.float32) @ z.astype(np.float32)
    return (sums.astype(np.int64) & 1).astype(np.uint8)


@lru_cache(maxsize=16)
def field_tables(r: int) -> tuple[list[int], list[int]]:
    """exp and log tables of GF(2^r) from ``PRIMITIVE_POLYNOMIALS[r]``; raises when the
    polynomial's root does not generate all 2^r - 1 nonzero elements."""
    poly, order = PRIMITIVE_POLYNOMIALS[r], (1 << r) - 1
    exp, log = [0] * (2 * order), [0] * (order + 1)
    value = 1
    for i in range(order):
        if i and value == 1:
            raise ValueError(f"x has order {i} modulo the degree-{r} polynomial: not primitive")
        exp[i] = exp[i + order] = value
        log[value] = i
        value <<= 1
        if value >> r:
            value ^= poly
    return exp, log


def bch_roots(r: int, s: int) -> set[int]:
    """Exponents j of the roots alpha^j of the BCH generator: the cyclotomic cosets of
    1 .. s - 1 modulo 2^r - 1 (closed under squaring, so g has binary coefficients)."""
    order, roots = (1 << r) - 1, set()
    for start in range(1, s):
        j = start % order
        while j not in roots:
            roots.add(j)
            j = 2 * j % order
    return roots


def bch_generator(r: int, s: int) -> int:
    """g(x) = prod (x - alpha^j) over ``bch_roots``, as a bit mask (bit i: x^i)."""
    exp, log = field_tables(r)
    coeffs = [1]  # field elements, coeffs[i] of x^i
    for j in sorted(bch_roots(r, s)):
        shifted = [0, *coeffs]
        for i, c in enumerate(coeffs):
            if c:
                shifted[i] ^= exp[log[c] + j]
        coeffs = shifted
    if any(c > 1 for c in coeffs):
        raise ArithmeticError(f"BCH generator over GF(2^{r}) is not binary")
    return sum(c << i for i, c in enumerate(coeffs))


def bch_parity(n: int, s: int, r: int) -> np.ndarray | None:
    """The parity part of the systematic BCH rows (module doc) over GF(2^r): row i holds
    the bits of x^(D+i) mod g; None when the code is shorter than n + D."""
    if s - 1 >= (1 << r) - 1:
        return None
    g = bch_generator(r, s)
    degree = g.bit_length() - 1
    if n + degree > (1 << r) - 1:
        return None
    remainders, remainder = [], g ^ (1 << degree)  # x^D mod g
    for _ in range(n):
        remainders.append(remainder)
        remainder <<= 1
        if remainder >> degree:
            remainder ^= g
    masks = np.array(remainders, dtype=object)
    bits = [(masks >> j) & 1 for j in range(degree)]
    return np.array(bits, dtype=np.uint8).T.reshape(n, degree)


def repetition_parity(n: int, s: int) -> np.ndarray:
    """Bit i as the XOR of s shares: s - 1 ones per row, in its own columns."""
    return np.kron(np.eye(n, dtype=np.uint8), np.ones((1, s - 1), dtype=np.uint8))


@lru_cache(maxsize=64)
def probe_encoding(n: int, s: int) -> ProbeEncoding:
    """The s-probe-resistant encoding of n bits: the shortest of BCH over the least field
    that fits and repetition (module doc); the identity when s <= 1."""
    if s <= 1:
        return ProbeEncoding(np.zeros((n, 0), dtype=np.uint8), "identity")
    repetition = ProbeEncoding(repetition_parity(n, s), "repetition")
    for r in range(3, MAX_FIELD_BITS + 1):
        parity = bch_parity(n, s, r)
        if parity is not None:
            bch = ProbeEncoding(parity, "bch")
            return bch if bch.width < repetition.width else repetition
    return repetition


def xor_tree(wires: list[int], target: int, n_wires: int) -> tuple[list[tuple], int]:
    """XOR gates (in0, in1, out) of a balanced tree over ``wires`` (two or more) whose root
    is ``target``; new inner wires from ``n_wires``. Returns the gates and the next wire."""
    gates, level = [], list(wires)
    while len(level) > 2:
        pairs = len(level) // 2
        sums = list(range(n_wires, n_wires + pairs))
        gates += zip(level[0 : 2 * pairs : 2], level[1 : 2 * pairs : 2], sums, strict=True)
        n_wires += pairs
        level = sums + level[2 * pairs :]
    gates.append((level[0], level[1], target))
    return gates, n_wires


@lru_cache(maxsize=64)
def encoded_circuit(circuit: Circuit, bundles: tuple[str, ...], s: int) -> Circuit:
    """``circuit`` with the bits y of its input ``bundles`` (in circuit order) computed as
    M y' (``probe_encoding`` of their width and s) by XOR trees ahead of its gates, which
    stay as they are (same AND gates, tables and tweaks). The bundles give way to one input
    bundle ``ENCODED_BUNDLE`` of width m at the first one's place, bit j of it y'_j. Both
    parties build it from the agreed circuit; s <= 1 leaves the circuit as it is."""
    targets = [w for b in circuit.inputs if b.name in bundles for w in b.wires]
    if s <= 1 or not targets:
        return circuit
    encoding = probe_encoding(len(targets), s)
    n_wires, n = circuit.n_wires, len(targets)
    encoded = list(range(n_wires, n_wires + encoding.width))
    n_wires += encoding.width
    gates: list[tuple] = []
    for i, target in enumerate(targets):
        sources = [encoded[i]] + [encoded[n + j] for j in np.flatnonzero(encoding.parity[i])]
        tree, n_wires = xor_tree(sources, target, n_wires)
        gates += tree
    inputs = [b for b in circuit.inputs if b.name not in bundles]
    first = next(i for i, b in enumerate(circuit.inputs) if b.name in bundles)
    inputs.insert(first, Bundle(ENCODED_BUNDLE, tuple(encoded)))
    in0, in1, out = (list(column) for column in zip(*gates, strict=True))
    return Circuit(
        n_wires,
        [int(Op.XOR)] * len(gates) + circuit.ops.tolist(),
        in0 + circuit.in0.tolist(),
        in1 + circuit.in1.tolist(),
        out + circuit.out.tolist(),
        inputs,
        circuit.outputs,
    )
