"""Known randomization mechanisms, one per column or group of columns, and their file format.

A mechanism is public: whoever reconstructs a distribution needs it. Two families:

- Categorical (PRAM, Ma 2006 Sec. 2.1-2.2): a transition matrix P[l, m] =
  Pr(randomized = m | original = l) over the column's ordered states. The matrices,
  their checks and the randomizer are ``ppbn.randomized.pram.operators`` (reused: every
  matrix passes ``validate_matrix``, so rows must sum to 1 and P must be invertible).
  Added here: Warner's randomized response (Zhan et al. Sec. 3: answer truthfully with
  probability theta, else the opposite), and Zhan's multi-attribute scheme (Sec. 3.2-3.3):
  the binary attributes of one group are all kept with probability theta or all flipped;
  independent groups multiply, two one-attribute groups giving M2 = M1 (x) M1 (eq. 5).
- Additive (Wu Sec. 2-3): z = x + y with y from a known ``Noise`` (``noise.py``).

The mechanism file (JSON; docs/user-guide.md, "Perturbation") maps column names to mechanisms::

    {"columns": {
       "smoker": {"states": ["no", "yes"], "kind": "warner", "theta": 0.8},
       "region": {"states": ["n", "e", "s", "w"], "kind": "multi_category", "p": 0.3},
       "hiv":    {"states": ["0", "1"]},
       "drug":   {"states": ["0", "1"]},
       "income": {"kind": "additive", "noise": {"kind": "gaussian", "sigma": 5000}}},
     "groups": [{"columns": ["hiv", "drug"], "kind": "zhan", "theta": 0.7}]}

A categorical column without ``kind`` is not randomized unless a group names it. Every
error is one line naming the file and the field (``mech.json: columns.smoker.theta: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.randomized.perturb.noise import Noise, noise_from_dict
from ppbn.randomized.perturb.response import flip_group, warner
from ppbn.randomized.pram.operators import (
    Block,
    RandomizationError,
    RandomizationScheme,
    RandomSource,
    kron,
)

# Parameters of each categorical kind: the PRAM kinds are built by
# RandomizationScheme.from_spec; "warner" and "zhan" here. (required, optional)
_CATEGORICAL_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "identity": ((), ()),
    "warner": (("theta",), ()),
    "zhan": (("theta",), ()),
    "binary_symmetric": (("p",), ()),
    "binary": (("p1", "p2"), ()),
    "ternary_symmetric": ((), ("p", "p1", "p2")),
    "multi_category": (("p",), ()),
    "grouped": (("groups", "p"), ()),
    "matrix": (("matrix",), ()),
}
# The field a PRAM error is about, when the kind has one main parameter.
_FIELD = {
    "warner": "theta",
    "zhan": "theta",
    "multi_category": "p",
    "binary_symmetric": "p",
    "grouped": "p",
    "matrix": "matrix",
}


def zhan_scheme(group_sizes: Sequence[int], theta: float) -> np.ndarray:
    """Independent Zhan groups as one matrix: the Kronecker product (first group slowest).

    Two one-attribute groups give M2 = M1 (x) M1 of Zhan et al. eq. 5; used to check a
    joint table, the estimators never form it (they work block by block).
    """
    return kron(*(flip_group(r, theta) for r in group_sizes))


@dataclass(frozen=True)
class Mechanisms:
    """The mechanisms of a data set's columns.

    ``states``: ordered domains of the categorical columns (randomized or not);
    ``scheme``: their PRAM blocks (a Warner column or a Zhan group is a block);
    ``noise``: the additive noise of each numeric column.
    """

    states: Mapping[str, tuple[str, ...]]
    scheme: RandomizationScheme
    noise: Mapping[str, Noise]

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.states, *self.noise)

    def is_additive(self, column: str) -> bool:
        self._check(column)
        return column in self.noise

    def _check(self, column: str) -> None:
        if column not in self.states and column not in self.noise:
            raise RandomizationError(
                f"column {column!r} has no mechanism (described: {', '.join(self.columns)})"
            )

    def partners(self, column: str) -> tuple[str, ...]:
        """The columns randomized together with ``column`` (itself first when alone)."""
        self._check(column)
        block = self.scheme.block_of(column) if column in self.states else None
        return block.variables if block is not None else (column,)

    def describe(self, column: str) -> str:
        """One phrase for reports: the noise, or the PRAM block's label."""
        if self.is_additive(column):
            return f"additive {self.noise[column].describe()}"
        block = self.scheme.block_of(column)
        if block is None:
            return "not randomized"
        return block.label + (f" on {block.name}" if len(block.variables) > 1 else "")

    def randomize(
        self, values: Mapping[str, np.ndarray], source: RandomSource
    ) -> dict[str, np.ndarray]:
        """Randomize the given columns: categorical ones as state codes 0..K-1 (every
        partner of a group must be given), additive ones as floats. Each column or group
        draws from its own stream of ``source``, so the result does not depend on order."""
        for column in values:
            self._check(column)
        out: dict[str, np.ndarray] = {}
        categorical = [c for c in values if c in self.states]
        if categorical:
            for column in categorical:
                missing = [p for p in self.partners(column) if p not in values]
                if missing:
                    raise RandomizationError(
                        f"column {column!r} is randomized together with {', '.join(missing)}: "
                        "randomize them together"
                    )
            codes = np.column_stack([np.asarray(values[c], dtype=np.int64) for c in categorical])
            randomized = self.scheme.restricted(categorical).randomize(codes, categorical, source)
            out.update({c: randomized[:, j] for j, c in enumerate(categorical)})
        for column in (c for c in values if c in self.noise):
            x = np.asarray(values[column], dtype=float)
            out[column] = x + self.noise[column].sample(len(x), source.derive(f"additive/{column}"))
        return out


# -- the mechanism file ------------------------------------------------------------------------


def parse_mechanisms(data: Any, where: str) -> Mechanisms:
    """Check a decoded mechanism file and build its mechanisms; ``where`` names the file.

    Pure: the caller reads the file (``ppbn.data.perturb_files``).
    """
    if not isinstance(data, Mapping):
        raise RandomizationError(f"{where}: expected a JSON object with 'columns'")
    unknown = sorted(set(data) - {"columns", "groups"})
    if unknown:
        raise RandomizationError(f"{where}: unknown field {unknown[0]!r} (use 'columns', 'groups')")
    columns = data.get("columns")
    if not isinstance(columns, Mapping) or not columns:
        raise RandomizationError(f"{where}: 'columns' must be a non-empty object")
    states: dict[str, tuple[str, ...]] = {}
    noise: dict[str, Noise] = {}
    own: dict[str, Mapping[str, Any]] = {}
    for name, entry in columns.items():
        at = f"{where}: columns.{name}"
        if not str(name).strip():
            raise RandomizationError(f"{where}: columns: a column name is empty")
        if not isinstance(entry, Mapping):
            raise RandomizationError(f"{at}: expected an object")
        if entry.get("kind") == "additive":
            extra = sorted(set(entry) - {"kind", "noise"})
            if extra:
                raise RandomizationError(f"{at}: unknown field {extra[0]!r} for an additive column")
            if "noise" not in entry:
                raise RandomizationError(f"{at}: an additive column needs 'noise'")
            try:
                noise[name] = noise_from_dict(entry["noise"])
            except RandomizationError as exc:
                raise RandomizationError(f"{at}.noise: {exc}") from None
            continue
        states[name] = _states(entry.get("states"), f"{at}.states")
        if entry.get("kind", "identity") != "identity":
            own[name] = entry
        else:
            _check_fields(entry, "identity", at, extra=("states",))
    blocks = [_column_block(name, entry, states[name], where) for name, entry in own.items()]
    grouped: dict[str, int] = {}
    for g, group in enumerate(_groups(data.get("groups", []), where)):
        at = f"{where}: groups[{g}]"
        members = _group_members(group, at, states, noise, own, grouped, g)
        blocks.append(_group_block(members, group, [states[m] for m in members], at))
    cards = {name: len(s) for name, s in states.items()}
    return Mechanisms(states, RandomizationScheme(cards, blocks), noise)


def _states(raw: Any, at: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise RandomizationError(f"{at}: a categorical column needs its ordered 'states' list")
    out = []
    for s in raw:
        if isinstance(s, bool) or not isinstance(s, str | int):
            raise RandomizationError(f"{at}: a state must be text as written in the CSV, got {s!r}")
        out.append(str(s))
    dupes = sorted({s for s in out if out.count(s) > 1})
    if dupes:
        raise RandomizationError(f"{at}: state {dupes[0]!r} is listed twice")
    return tuple(out)


def _check_fields(entry: Mapping[str, Any], kind: Any, at: str, extra: tuple[str, ...]) -> None:
    if kind not in _CATEGORICAL_KINDS:
        kinds = ", ".join([*_CATEGORICAL_KINDS, "additive"])
        raise RandomizationError(f"{at}.kind: {kind!r} is not one of {kinds}")
    required, optional = _CATEGORICAL_KINDS[kind]
    for name in required:
        if name not in entry:
            raise RandomizationError(f"{at}: kind {kind} needs {name!r}")
    unknown = sorted(set(entry) - {"kind", *extra, *required, *optional})
    if unknown:
        raise RandomizationError(f"{at}: unknown field {unknown[0]!r} for kind {kind}")


def _block(
    entry: Mapping[str, Any], variables: tuple[str, ...], states: Sequence[tuple[str, ...]], at: str
) -> Block:
    """The PRAM block of ``entry`` over the combined states of ``variables``; every error
    names the file field."""
    kind = entry["kind"]
    field = f"{at}.{_FIELD[kind]}" if kind in _FIELD else at
    cards = tuple(len(s) for s in states)
    wide = [(v, k) for v, k in zip(variables, cards, strict=True) if k != 2]
    if kind in ("warner", "zhan") and wide:
        raise RandomizationError(
            f"{at}: {kind} randomizes binary columns; {wide[0][0]!r} has {wide[0][1]} states"
        )
    try:
        if kind in ("warner", "zhan"):
            theta = entry["theta"]
            matrix = warner(theta) if len(variables) == 1 else flip_group(len(variables), theta)
            return Block(variables, cards, matrix, f"{kind} theta={float(theta):g}")
        spec = {k: v for k, v in entry.items() if k not in ("states", "columns")}
        named = dict(zip(variables, cards, strict=True))
        built = RandomizationScheme.from_spec(named, {"+".join(variables): spec}).blocks
        return built[0] if built else Block(variables, cards, np.eye(int(np.prod(cards))), kind)
    except RandomizationError as exc:
        raise RandomizationError(f"{field}: {_strip_spec_prefix(str(exc))}") from None


def _strip_spec_prefix(message: str) -> str:
    """from_spec prefixes 'randomization spec for NAME: '; the file field says it already."""
    head, sep, rest = message.partition(": ")
    return rest if sep and head.startswith("randomization spec for ") else message


def _column_block(
    name: str, entry: Mapping[str, Any], states: tuple[str, ...], where: str
) -> Block:
    at = f"{where}: columns.{name}"
    kind = entry.get("kind")
    if kind == "zhan":
        raise RandomizationError(f"{at}.kind: 'zhan' is for 'groups'; one column is 'warner'")
    _check_fields(entry, kind, at, extra=("states",))
    return _block(entry, (name,), [states], at)


def _groups(raw: Any, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(g, Mapping) for g in raw):
        raise RandomizationError(f"{where}: 'groups' must be a list of objects")
    return list(raw)


def _group_members(
    group: Mapping[str, Any],
    at: str,
    states: Mapping[str, tuple[str, ...]],
    noise: Mapping[str, Noise],
    own: Mapping[str, Any],
    grouped: dict[str, int],
    g: int,
) -> tuple[str, ...]:
    members = group.get("columns")
    if not isinstance(members, list) or len(members) < 1:
        raise RandomizationError(f"{at}.columns: a group needs a list of columns")
    for m in members:
        if m in noise:
            raise RandomizationError(f"{at}.columns: {m!r} is additive; a group is categorical")
        if m not in states:
            raise RandomizationError(f"{at}.columns: {m!r} is not declared under 'columns'")
        if m in own:
            raise RandomizationError(
                f"{at}.columns: {m!r} has its own kind {own[m]['kind']!r}; a grouped column has none"
            )
        if m in grouped:
            raise RandomizationError(f"{at}.columns: {m!r} is already in groups[{grouped[m]}]")
        grouped[m] = g
    return tuple(members)


def _group_block(
    members: tuple[str, ...], group: Mapping[str, Any], states: list[tuple[str, ...]], at: str
) -> Block:
    _check_fields(group, group.get("kind"), at, extra=("columns",))
    return _block(group, members, states, at)
