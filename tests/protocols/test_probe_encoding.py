"""The probe-resistant input encoding (``ppbn.protocols.probe_encoding``): M y' = y for the
encoded bits the evaluator draws and in the circuit that decodes them; every nonempty set
of M's rows XORs to weight >= s, checked over all row sets for small n; and the widths the
covert runs use."""

from __future__ import annotations

import numpy as np
import pytest

from ppbn.circuits import builders as B
from ppbn.circuits.evaluate import evaluate_bits
from ppbn.circuits.ir import Op
from ppbn.protocols.probe_encoding import (
    ENCODED_BUNDLE,
    MAX_FIELD_BITS,
    ProbeEncoding,
    bch_parity,
    encoded_circuit,
    field_tables,
    probe_encoding,
)
from ppbn.protocols.seeds import RandomStream
from ppbn.protocols.yao_covert import PROBE_RESISTANCE


def min_row_set_weight(matrix: np.ndarray) -> int:
    """The least Hamming weight of the XOR of a nonempty set of ``matrix``'s rows, over all
    2^n - 1 sets (in Gray-code order, one row XOR a set)."""
    rows = [int("".join(map(str, row[::-1])), 2) for row in matrix]
    best, current = matrix.shape[1] + 1, 0
    for step in range(1, 1 << len(rows)):
        current ^= rows[(step & -step).bit_length() - 1]
        best = min(best, current.bit_count())
    return best


def test_every_field_polynomial_is_primitive() -> None:
    for r in range(3, MAX_FIELD_BITS + 1):
        exp, log = field_tables(r)
        assert sorted(exp[: (1 << r) - 1]) == list(range(1, 1 << r))


@pytest.mark.parametrize("r", range(6, 14))
def test_bch_rows_of_each_field_are_probe_resistant(r: int) -> None:
    """The code of each field, shortened to 16 rows, at s = 40 and s = 9."""
    for s in (9, 40):
        parity = bch_parity(16, s, r)
        if parity is None:
            continue
        matrix = ProbeEncoding(parity, "bch").matrix()
        assert min_row_set_weight(matrix) >= s, (r, s)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9, 14])
@pytest.mark.parametrize("s", [2, 5, PROBE_RESISTANCE])
def test_drawn_encodings_are_probe_resistant(n: int, s: int) -> None:
    """What ``probe_encoding`` gives (BCH or repetition, whichever is shorter)."""
    assert min_row_set_weight(probe_encoding(n, s).matrix()) >= s


def test_the_widths_and_the_bound_on_m() -> None:
    """m <= n + r ceil((s - 1) / 2) for BCH over GF(2^r); repetition only where shorter."""
    aes = probe_encoding(128, PROBE_RESISTANCE)
    assert aes.construction == "bch" and aes.width <= 128 + 9 * 20
    assert probe_encoding(1, PROBE_RESISTANCE).construction == "repetition"
    assert probe_encoding(1, PROBE_RESISTANCE).width == PROBE_RESISTANCE
    assert probe_encoding(7, 1).construction == "identity" and probe_encoding(7, 1).width == 7
    for n in (3, 12, 300, 1000):
        assert probe_encoding(n, PROBE_RESISTANCE).width < n * PROBE_RESISTANCE


@pytest.mark.parametrize("n", [1, 4, 128])
def test_encode_solves_m_y_prime_equals_y(n: int) -> None:
    encoding = probe_encoding(n, PROBE_RESISTANCE)
    bits = np.random.default_rng(n).integers(0, 2, size=(n, 50), dtype=np.uint8)
    encoded = encoding.encode(bits, RandomStream(bytes(32)))
    assert encoded.shape == (encoding.width, 50)
    product = (encoding.matrix().astype(np.int64) @ encoded.astype(np.int64)) & 1
    assert (product == bits).all() and (encoding.decode(encoded) == bits).all()


def test_the_encoded_bits_are_uniform_for_a_fixed_input() -> None:
    """One input, many encodings: each encoded bit is 1 about half the time."""
    encoding = probe_encoding(4, PROBE_RESISTANCE)
    bits = np.ones((4, 4000), dtype=np.uint8)
    means = encoding.encode(bits, RandomStream(bytes(range(32)))).mean(axis=1)
    assert ((means > 0.43) & (means < 0.57)).all()


def test_the_encoded_circuit_decodes_in_xor_gates_only() -> None:
    """y' fed to the encoded circuit gives the agreed circuit's outputs on y = M y'; the
    evaluator's bundles become one encoded bundle at the first one's place."""
    b = B.CircuitBuilder()
    g, e, f = b.input("g", 6), b.input("e", 6), b.input("f", 3)
    b.output("y", B.add(b, g, e) + [b.and_(f[0], g[0])])
    circuit = b.build()
    encoded = encoded_circuit(circuit, ("e", "f"), PROBE_RESISTANCE)
    assert [x.name for x in encoded.inputs] == ["g", ENCODED_BUNDLE]
    encoding = probe_encoding(9, PROBE_RESISTANCE)
    assert encoded.input(ENCODED_BUNDLE).width == encoding.width
    assert int((encoded.ops == Op.AND).sum()) == int(
        (circuit.ops == Op.AND).sum()
    )  # AND gates alike
    rng = np.random.default_rng(3)
    plain = rng.integers(0, 2, size=(15, 30), dtype=np.uint8)
    secret = encoding.encode(plain[6:], RandomStream(bytes(32)))
    assert (
        evaluate_bits(encoded, np.concatenate([plain[:6], secret])) == evaluate_bits(circuit, plain)
    ).all()
    assert encoded_circuit(circuit, ("e", "f"), 1) is circuit
