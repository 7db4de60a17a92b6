"""PRAM randomization operators and the generator that applies them to records.

Post-randomization (Ma and Sivakumar, Sec. II; Ma 2006 dissertation, Sec. 2.1-2.2)
replaces each value of a sensitive variable by a random value drawn from the row of a
public transition matrix ``P[l, m] = Pr(randomized = m | original = l)`` (rows sum to 1,
docs/conventions.md, "PRAM matrices"). This module builds the standard matrices, checks any matrix a user or a peer
supplies, groups variables into *blocks* (one variable, or several randomized
simultaneously as one combined variable), and randomizes coded records.

Combined variables follow docs/conventions.md, "Combined variables": the state of the combined variable (X1, ..., Xr) is
the C-order index over the declared domains (first variable slowest), so randomizing
X1 and X2 independently is the block ``np.kron(P1, P2)``.

Random generator: AES-256 in counter mode (``cryptography``) as a keystream, 53 bits per
uniform draw. A seeded NumPy bit generator (PCG64) would be reproducible but its state
can be recovered from its outputs; whoever receives randomized data could then undo the
randomization. AES-CTR output is indistinguishable from random without the key, the key
comes from ``secrets`` by default, and a test seed is turned into a key with SHA-256 so
tests are reproducible. Each block draws from its own stream, derived with HMAC-SHA256
from the key and the block's variable names, so the result does not depend on the order
in which blocks are randomized.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppbn.errors import UserError

ROW_SUM_TOLERANCE = 1e-9
# A matrix whose condition number exceeds this cannot be inverted to useful precision:
# the moment estimator would multiply the sampling noise by more than 1e10.
MAX_CONDITION_NUMBER = 1e10


class RandomizationError(UserError, ValueError):
    """A randomization matrix or specification is unusable; the message names the variable."""


# -- standard matrices (dissertation Sec. 2.1, Fig. 2.1; Sec. 2.2 for grouping) --------------


def _check_probability(value: float, what: str) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise RandomizationError(f"{what} must be a probability in [0, 1], got {value}")
    return value


def identity(cardinality: int) -> np.ndarray:
    """The matrix of a variable that is not randomized (non-sensitive)."""
    if cardinality < 1:
        raise RandomizationError(f"cardinality must be at least 1, got {cardinality}")
    return np.eye(cardinality)


def binary(p1: float, p2: float) -> np.ndarray:
    """Binary randomization (Fig. 1 left): state 0 flips with p1, state 1 flips with p2."""
    p1 = _check_probability(p1, "binary randomization p1")
    p2 = _check_probability(p2, "binary randomization p2")
    return np.array([[1.0 - p1, p1], [p2, 1.0 - p2]])


def binary_symmetric(p: float) -> np.ndarray:
    """Binary symmetric randomization: each value flips with probability p."""
    return binary(p, p)


def ternary_symmetric(p1: float, p2: float | None = None) -> np.ndarray:
    """Ternary symmetric randomization (Fig. 1 right), read as the circulant matrix.

    State l moves to l+1 (mod 3) with p1 and to l+2 (mod 3) with p2, so every column holds
    {1-p1-p2, p1, p2} and gamma = (1-p1-p2)/p2 when 1-p1-p2 >= p1 >= p2 (Sec. 3.1.2).
    """
    p1 = _check_probability(p1, "ternary randomization p1")
    p2 = p1 if p2 is None else _check_probability(p2, "ternary randomization p2")
    if p1 + p2 > 1.0:
        raise RandomizationError(f"ternary randomization needs p1 + p2 <= 1, got {p1} + {p2}")
    stay = 1.0 - p1 - p2
    return np.array([[stay, p1, p2], [p2, stay, p1], [p1, p2, stay]])


def multi_category(cardinality: int, p: float) -> np.ndarray:
    """M-category randomization (Sec. 2.1): keep with 1-p, else any other state with p/(K-1)."""
    p = _check_probability(p, "multi-category randomization p")
    if cardinality < 2:
        raise RandomizationError(
            f"multi-category randomization needs at least 2 states, got {cardinality}"
        )
    off = p / (cardinality - 1)
    matrix = np.full((cardinality, cardinality), off)
    np.fill_diagonal(matrix, 1.0 - p)
    return matrix


def grouped(
    cardinality: int, groups: Sequence[Sequence[int]], blocks: Sequence[np.ndarray]
) -> np.ndarray:
    """Grouped randomization (Sec. 2.2): a state moves only within its group.

    ``groups`` partitions the states 0..K-1; ``blocks[g]`` is the matrix of group g over
    its states in the order listed. With contiguous groups the result is block-diagonal.
    """
    if len(groups) != len(blocks):
        raise RandomizationError(
            f"grouped randomization: {len(groups)} groups but {len(blocks)} blocks"
        )
    flat = [int(s) for g in groups for s in g]
    if sorted(flat) != list(range(cardinality)):
        raise RandomizationError(
            f"grouped randomization: groups must partition the states 0..{cardinality - 1}, got {list(map(list, groups))}"
        )
    matrix = np.zeros((cardinality, cardinality))
    for g, (states, block) in enumerate(zip(groups, blocks, strict=True)):
        block = np.asarray(block, dtype=float)
        if block.shape != (len(states), len(states)):
            raise RandomizationError(
                f"grouped randomization: group {g} has {len(states)} states but its block is {block.shape}"
            )
        idx = np.asarray(states, dtype=int)
        matrix[np.ix_(idx, idx)] = block
    return matrix


def grouped_multi_category(
    cardinality: int, groups: Sequence[Sequence[int]], p: float
) -> np.ndarray:
    """Grouped randomization with M-category randomization inside each group (Fig. 3.1(b))."""
    blocks = [multi_category(len(g), p) if len(g) > 1 else identity(1) for g in groups]
    return grouped(cardinality, groups, blocks)


def kron(*matrices: np.ndarray) -> np.ndarray:
    """Independent randomization of several variables written as one combined matrix.

    First factor slowest (docs/conventions.md, "Combined variables"; np.kron order). Only for building or checking a
    combined block: the estimators never form a Kronecker product.
    """
    out = np.ones((1, 1))
    for m in matrices:
        out = np.kron(out, np.asarray(m, dtype=float))
    return out


def validate_matrix(matrix: Any, name: str, size: int | None = None) -> np.ndarray:
    """Return ``matrix`` as a float array or raise a one-line error naming ``name``.

    Checks: square, of the expected size, finite, nonnegative, rows summing to 1, and
    invertible (the moment estimator needs P^{-1}; condition number at most 1e10).
    """
    try:
        arr = np.array(matrix, dtype=float)
    except (TypeError, ValueError):
        raise RandomizationError(f"randomization matrix for {name}: not a numeric matrix") from None
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise RandomizationError(
            f"randomization matrix for {name}: must be square, got shape {arr.shape}"
        )
    if size is not None and arr.shape[0] != size:
        raise RandomizationError(
            f"randomization matrix for {name}: must be {size}x{size} (one row per state), got {arr.shape[0]}x{arr.shape[1]}"
        )
    if not np.all(np.isfinite(arr)):
        raise RandomizationError(f"randomization matrix for {name}: has a non-finite entry")
    if np.any(arr < 0):
        r, c = np.argwhere(arr < 0)[0]
        raise RandomizationError(
            f"randomization matrix for {name}: entry [{r}, {c}] = {arr[r, c]} is negative"
        )
    sums = arr.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOLERANCE)
    if bad.size:
        raise RandomizationError(
            f"randomization matrix for {name}: rows must sum to 1 (row {bad[0]} sums to {sums[bad[0]]:.12g})"
        )
    cond = np.linalg.cond(arr)
    if not np.isfinite(cond) or cond > MAX_CONDITION_NUMBER:
        raise RandomizationError(
            f"randomization matrix for {name}: not invertible (condition number {cond:.3g}); "
            "the counts could not be estimated (e.g. binary symmetric p = 0.5)"
        )
    return arr


# -- blocks and schemes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """Variables randomized together as one combined variable, and their matrix.

    ``matrix`` is over the combined states, C order over ``variables`` (first slowest).
    A one-variable block is ordinary independent randomization.
    """

    variables: tuple[str, ...]
    cardinalities: tuple[int, ...]
    matrix: np.ndarray = field(repr=False)
    label: str = ""

    def __post_init__(self) -> None:
        if not self.variables:
            raise RandomizationError("a randomization block needs at least one variable")
        if len(set(self.variables)) != len(self.variables):
            raise RandomizationError(f"randomization block {self.name}: a variable is listed twice")
        if len(self.cardinalities) != len(self.variables):
            raise RandomizationError(
                f"randomization block {self.name}: one cardinality per variable needed"
            )
        checked = validate_matrix(self.matrix, self.name, int(np.prod(self.cardinalities)))
        checked.setflags(write=False)
        object.__setattr__(self, "matrix", checked)

    @property
    def name(self) -> str:
        return "+".join(self.variables)

    @property
    def size(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def is_identity(self) -> bool:
        return bool(np.array_equal(self.matrix, np.eye(self.size)))


class RandomizationScheme:
    """Which variables are randomized, in which blocks, with which matrices.

    ``cardinalities`` covers every variable of the data (schema order); variables in no
    block are not randomized (identity matrix, Sec. 2.4.1). A variable may be in at most
    one block. Schemes travel between parties as ``to_dict``/``from_dict``, which
    re-validates every matrix.
    """

    def __init__(self, cardinalities: Mapping[str, int], blocks: Sequence[Block] = ()) -> None:
        self.cardinalities = {str(k): int(v) for k, v in cardinalities.items()}
        seen: dict[str, str] = {}
        kept = []
        for block in blocks:
            for var, card in zip(block.variables, block.cardinalities, strict=True):
                if var not in self.cardinalities:
                    raise RandomizationError(
                        f"randomization block {block.name}: unknown variable {var!r}"
                    )
                if self.cardinalities[var] != card:
                    raise RandomizationError(
                        f"randomization block {block.name}: variable {var!r} has {self.cardinalities[var]} states, not {card}"
                    )
                if var in seen:
                    raise RandomizationError(
                        f"variable {var!r} is in two randomization blocks ({seen[var]} and {block.name})"
                    )
                seen[var] = block.name
            if not block.is_identity:
                kept.append(block)
        self.blocks: tuple[Block, ...] = tuple(kept)
        self._block_of = {v: b for b in self.blocks for v in b.variables}

    # -- lookups ------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.cardinalities)

    @property
    def randomized(self) -> tuple[str, ...]:
        return tuple(v for v in self.cardinalities if v in self._block_of)

    def cardinalities_of(self, names: Sequence[str]) -> tuple[int, ...]:
        return tuple(self.cardinalities[n] for n in names)

    def block_of(self, name: str) -> Block | None:
        """The block that randomizes ``name``, or None when it is sent unchanged."""
        if name not in self.cardinalities:
            raise KeyError(name)
        return self._block_of.get(name)

    def matrix_for(self, name: str) -> np.ndarray:
        """The per-variable matrix; only defined when ``name`` is randomized on its own."""
        block = self.block_of(name)
        if block is None:
            return identity(self.cardinalities[name])
        if len(block.variables) != 1:
            raise RandomizationError(
                f"variable {name!r} is randomized jointly with {block.name}: it has no matrix of its own"
            )
        return np.array(block.matrix)

    def restricted(self, names: Sequence[str]) -> RandomizationScheme:
        """The scheme over a subset of the variables; blocks must lie inside the subset."""
        chosen = [str(n) for n in names]
        for n in chosen:
            self.block_of(n)
        blocks = [b for b in self.blocks if set(b.variables) & set(chosen)]
        for b in blocks:
            if not set(b.variables) <= set(chosen):
                raise RandomizationError(f"randomization block {b.name} is only partly in {chosen}")
        return RandomizationScheme({n: self.cardinalities[n] for n in chosen}, blocks)

    # -- construction helpers ------------------------------------------------------------------
    @classmethod
    def uniform(
        cls, cardinalities: Mapping[str, int], p: float, sensitive: Sequence[str] | None = None
    ) -> RandomizationScheme:
        """M-category randomization with the same p for every sensitive variable (Sec. 5.6.2).

        For binary variables this is binary symmetric randomization with parameter p.
        ``sensitive`` defaults to every variable.
        """
        chosen = list(cardinalities) if sensitive is None else list(sensitive)
        blocks = []
        for name in chosen:
            card = int(cardinalities[name])
            try:
                matrix = multi_category(card, p)
            except RandomizationError as exc:
                raise RandomizationError(f"variable {name!r}: {exc}") from None
            blocks.append(Block((name,), (card,), matrix, f"multi-category p={p:g}"))
        return cls(cardinalities, blocks)

    @classmethod
    def from_spec(
        cls, cardinalities: Mapping[str, int], spec: Mapping[str, Any]
    ) -> RandomizationScheme:
        """Build a scheme from a JSON-style mapping (the per-variable randomization file).

        Keys are variable names, or several names joined by ``+`` for simultaneous
        randomization. Values: ``{"kind": "binary_symmetric", "p": ...}``, ``"binary"``
        (p1, p2), ``"ternary_symmetric"`` (p1, p2), ``"multi_category"`` (p),
        ``"grouped"`` (groups, p), ``"identity"``, or ``"matrix"`` (matrix: list of rows).
        A combined key also accepts ``"multi_category"`` over all combined states.
        """
        blocks = []
        for key, entry in spec.items():
            variables = tuple(part.strip() for part in str(key).split("+"))
            for v in variables:
                if v not in cardinalities:
                    raise RandomizationError(f"randomization spec: unknown variable {v!r}")
            cards = tuple(int(cardinalities[v]) for v in variables)
            try:
                matrix, label = _matrix_from_entry(int(np.prod(cards)), entry)
            except RandomizationError as exc:
                raise RandomizationError(f"randomization spec for {key}: {exc}") from None
            except (KeyError, TypeError, ValueError) as exc:
                raise RandomizationError(
                    f"randomization spec for {key}: malformed entry ({exc})"
                ) from None
            blocks.append(Block(variables, cards, matrix, label))
        return cls(cardinalities, blocks)

    # -- transport --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "cardinalities": dict(self.cardinalities),
            "blocks": [
                {"variables": list(b.variables), "label": b.label, "matrix": b.matrix.tolist()}
                for b in self.blocks
            ],
        }

    @classmethod
    def from_dict(cls, data: Any) -> RandomizationScheme:
        """Rebuild a scheme received from a peer, re-checking every matrix."""
        if not isinstance(data, dict) or not isinstance(data.get("cardinalities"), dict):
            raise RandomizationError(
                "randomization scheme: expected an object with 'cardinalities'"
            )
        cards = {}
        for k, v in data["cardinalities"].items():
            if not isinstance(v, int) or v < 1:
                raise RandomizationError(
                    f"randomization scheme: cardinality of {k!r} must be a positive integer"
                )
            cards[str(k)] = v
        blocks = []
        for raw in data.get("blocks", []):
            if not isinstance(raw, dict) or not isinstance(raw.get("variables"), list):
                raise RandomizationError(
                    "randomization scheme: each block needs a 'variables' list"
                )
            variables = tuple(str(v) for v in raw["variables"])
            for v in variables:
                if v not in cards:
                    raise RandomizationError(
                        f"randomization scheme: block names unknown variable {v!r}"
                    )
            blocks.append(
                Block(
                    variables,
                    tuple(cards[v] for v in variables),
                    raw.get("matrix"),
                    str(raw.get("label", "")),
                )
            )
        return cls(cards, blocks)

    # -- randomizing records -------------------------------------------------------------------
    def randomize(
        self, codes: np.ndarray, columns: Sequence[str], source: RandomSource
    ) -> np.ndarray:
        """Return a randomized copy of ``codes`` (n x len(columns), state indices).

        Columns of variables that are not randomized are copied unchanged; every block
        must have all of its variables among ``columns``.
        """
        codes = np.asarray(codes)
        columns = list(columns)
        if codes.ndim != 2 or codes.shape[1] != len(columns):
            raise RandomizationError(
                f"randomize: codes must be (n, {len(columns)}), got {codes.shape}"
            )
        position = {c: i for i, c in enumerate(columns)}
        out = codes.astype(np.int64, copy=True)
        for block in self.blocks:
            missing = [v for v in block.variables if v not in position]
            if missing:
                raise RandomizationError(f"randomize: block {block.name} needs column(s) {missing}")
            idx = [position[v] for v in block.variables]
            for v, i, card in zip(block.variables, idx, block.cardinalities, strict=True):
                col = codes[:, i]
                if col.size and (col.min() < 0 or col.max() >= card):
                    raise RandomizationError(
                        f"randomize: column {v!r} has a code outside 0..{card - 1}"
                    )
            combined = np.ravel_multi_index(tuple(codes[:, i] for i in idx), block.cardinalities)
            drawn = sample_rows(
                block.matrix, combined, source.derive(block.name).uniform(len(combined))
            )
            for i, part in zip(idx, np.unravel_index(drawn, block.cardinalities), strict=True):
                out[:, i] = part
        return out


def _matrix_from_entry(size: int, entry: Any) -> tuple[np.ndarray, str]:
    if not isinstance(entry, Mapping) or "kind" not in entry:
        raise RandomizationError("each entry needs a 'kind'")
    kind = entry["kind"]
    if kind == "identity":
        return identity(size), "identity"
    if kind == "binary_symmetric":
        _need_size(size, 2, kind)
        return binary_symmetric(entry["p"]), f"binary symmetric p={entry['p']}"
    if kind == "binary":
        _need_size(size, 2, kind)
        return binary(entry["p1"], entry["p2"]), f"binary p1={entry['p1']} p2={entry['p2']}"
    if kind == "ternary_symmetric":
        _need_size(size, 3, kind)
        p1 = entry.get("p1", entry.get("p"))
        p2 = entry.get("p2", p1)
        return ternary_symmetric(p1, p2), f"ternary symmetric p1={p1} p2={p2}"
    if kind == "multi_category":
        return multi_category(size, entry["p"]), f"multi-category p={entry['p']}"
    if kind == "grouped":
        return grouped_multi_category(
            size, entry["groups"], entry["p"]
        ), f"grouped {entry['groups']} p={entry['p']}"
    if kind == "matrix":
        return np.array(entry["matrix"], dtype=float), "matrix"
    raise RandomizationError(f"unknown kind {kind!r}")


def _need_size(size: int, wanted: int, kind: str) -> None:
    if size != wanted:
        raise RandomizationError(
            f"{kind} needs a variable with {wanted} states, this one has {size}"
        )


def sample_rows(matrix: np.ndarray, states: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Draw a new state for each record: ``states[i]`` moves along row ``matrix[states[i]]``.

    Inverse-CDF sampling with one uniform per record. A zero entry is an empty interval,
    so an impossible transition is never drawn; cumulative sums are pinned to 1 from the
    last nonzero entry of each row on, so rounding cannot push a draw past it.
    """
    cum = np.cumsum(matrix, axis=1)
    for row in range(matrix.shape[0]):
        last = np.flatnonzero(matrix[row] > 0)[-1]
        cum[row, last:] = 1.0
    out = np.empty(len(states), dtype=np.int64)
    for row in np.unique(states):
        mask = states == row
        out[mask] = np.searchsorted(cum[row], uniforms[mask], side="right")
    return out


class RandomSource:
    """AES-256-CTR keystream turned into uniform floats in [0, 1) (see the module docstring)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = secrets.token_bytes(32) if key is None else bytes(key)
        if len(self._key) != 32:
            raise ValueError("RandomSource needs a 32-byte key")
        self._stream = Cipher(algorithms.AES(self._key), modes.CTR(bytes(16))).encryptor()

    @classmethod
    def from_seed(cls, seed: int | str | bytes) -> RandomSource:
        """A reproducible source for tests and experiments: key = SHA-256 of the seed."""
        raw = seed if isinstance(seed, bytes) else str(seed).encode("utf-8")
        return cls(hashlib.sha256(b"ppbn/pram/seed/v1:" + raw).digest())

    def derive(self, label: str) -> RandomSource:
        """An independent stream for ``label`` (HMAC-SHA256 of the key)."""
        return RandomSource(hmac.new(self._key, label.encode("utf-8"), hashlib.sha256).digest())

    def uniform(self, n: int) -> np.ndarray:
        """n independent uniforms on [0, 1) with 53 random bits each."""
        raw = self._stream.update(bytes(8 * int(n)))
        words = np.frombuffer(raw, dtype="<u8") >> np.uint64(11)
        return words.astype(np.float64) * 2.0**-53
