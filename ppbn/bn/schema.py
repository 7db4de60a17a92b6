"""The public schema both parties agree on: variables, owners, ordered domains, id column.

The schema is public by design (Yang-Wright Sec. 4.2: "we assume the domains of
databases D are public"). Values are coded as the index of the state in its declared
domain, so a state that never occurs in the data is still part of every count table.
The fingerprint is a hash of the canonical JSON form; the daemons compare it in the
session handshake.

A variable may be declared ``"type": "continuous"`` with a ``bins`` spec instead of
``states`` (see ``BinSpec``). Its public states are ``bin1..binK``: the number of bins is
public, the cut points stay with the owner unless ``publish_edges`` is true. Only the
public part of the schema enters the fingerprint, so the owner's copy may carry private
fields (its ``edges``, mgas parameters) that the peer's copy lacks. Categorical variables
have exactly the form and fingerprint they always had.

``"missing"`` lists the texts a cell may hold for "no value" besides the empty cell
(``"NA"``, ``"?"``): how each party reads its own file, so it stays out of the
fingerprint. None of them may be a declared state.

``"party_names"`` gives a party's display name (its organisation) per role, for tables,
pictures and logs: local like ``"missing"``, so outside the fingerprint (a rename opens no
new DP budget account) and never sent to a peer; each party may name the parties its own way
(docs/decisions/party-names.md).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ppbn.bn.discretize import (
    METHODS,
    DiscretizationError,
    bin_labels,
    check_edges,
    interval_labels,
)
from ppbn.bn.io import STATE_CHARS, bif_name_fix, bif_name_problem, bif_state_problem
from ppbn.errors import DataError

PARTIES = ("alice", "bob")
NAMED_ROLES = (*PARTIES, "miner")  # the roles "party_names" may name
MAX_PARTY_NAME_CHARS = 60
SCHEMA_VERSION = 1
SUPPORTED_VERSIONS = (1,)


CATEGORICAL = "categorical"
CONTINUOUS = "continuous"
_BIN_KEYS = {"method", "count", "edges", "publish_edges", "min_records", "min_granularity"}
# every key a schema file may hold: a misspelled one would otherwise be ignored silently
_TOP_KEYS = ("version", "id_column", "variables", "missing_state", "missing", "party_names")
_VARIABLE_KEYS = ("name", "owner", "states", "type", "bins")


def check_keys(
    raw: Mapping[str, Any],
    known: Sequence[str],
    where: str,
    elsewhere: Mapping[str, str] | None = None,
) -> None:
    """Refuse a key not in ``known``, naming the closest known one; ``elsewhere`` maps a key
    that is valid in another place of the file to that place."""
    for key in raw:
        if key in known:
            continue
        if elsewhere and key in elsewhere:
            raise DataError(f"{where}: key {key!r} belongs {elsewhere[key]}")
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "remove it"
        raise DataError(f"{where}: unknown key {key!r}: {hint} (known keys: {', '.join(known)})")


@dataclass(frozen=True)
class BinSpec:
    """How the owner cuts a continuous variable into ``count`` bins (``ppbn.bn.discretize``).

    Public: method, count, publish_edges, and edges when published. Owner-only: edges
    otherwise, and mgas's min_records / min_granularity (Ma 2006, Ch. 2, Sec. 2.3). For
    mgas, ``count`` is the number of groups the owner's data must yield (the load fails
    otherwise), so that the peer knows the domain size before any data is seen.
    """

    method: str
    count: int
    edges: tuple[float, ...] | None = None
    publish_edges: bool = False
    min_records: int | None = None
    min_granularity: float | None = None

    def public_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "count": self.count,
            "publish_edges": self.publish_edges,
        }
        if self.publish_edges and self.edges is not None:
            out["edges"] = list(self.edges)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The full form, private fields included (the owner's own schema file)."""
        out = self.public_dict()
        if self.edges is not None:
            out["edges"] = list(self.edges)
        if self.min_records is not None:
            out["min_records"] = self.min_records
        if self.min_granularity is not None:
            out["min_granularity"] = self.min_granularity
        return out


@dataclass(frozen=True)
class Variable:
    name: str
    owner: str
    states: tuple[str, ...]
    bins: BinSpec | None = None  # None: categorical

    @property
    def cardinality(self) -> int:
        return len(self.states)

    @property
    def kind(self) -> str:
        return CATEGORICAL if self.bins is None else CONTINUOUS

    @property
    def is_continuous(self) -> bool:
        return self.bins is not None

    @classmethod
    def continuous(cls, name: str, owner: str, bins: BinSpec) -> Variable:
        return cls(name, owner, bin_labels(bins.count), bins)

    def public_dict(self) -> dict[str, Any]:
        """What crosses between the parties (and is fingerprinted)."""
        if self.bins is None:
            return {"name": self.name, "owner": self.owner, "states": list(self.states)}
        return {
            "name": self.name,
            "owner": self.owner,
            "type": CONTINUOUS,
            "bins": self.bins.public_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        if self.bins is None:
            return self.public_dict()
        return {
            "name": self.name,
            "owner": self.owner,
            "type": CONTINUOUS,
            "bins": self.bins.to_dict(),
        }


@dataclass(frozen=True)
class Schema:
    id_column: str
    variables: tuple[Variable, ...]
    missing_state: str | None = None
    # cells read as missing besides the empty cell (a file's "NA", "?"): never a state
    missing: tuple[str, ...] = ()
    # role -> display name (its organisation): local, display only, so not compared
    party_names: Mapping[str, str] = field(default_factory=dict, compare=False)

    # -- lookups ------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variables)

    def variable(self, name: str) -> Variable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    def cardinality(self, name: str) -> int:
        return self.variable(name).cardinality

    def cardinalities(self, names: Iterable[str] | None = None) -> tuple[int, ...]:
        chosen = self.names if names is None else tuple(names)
        return tuple(self.cardinality(n) for n in chosen)

    def owner(self, name: str) -> str:
        return self.variable(name).owner

    def owned_by(self, party: str) -> tuple[Variable, ...]:
        return tuple(v for v in self.variables if v.owner == party)

    def continuous(self) -> tuple[Variable, ...]:
        return tuple(v for v in self.variables if v.is_continuous)

    def state_names(self, cuts: Mapping[str, Sequence[float]]) -> dict[str, tuple[str, ...]]:
        """The state names a holder of ``cuts`` (its own continuous variables' cut points)
        writes in its outputs: intervals where it knows the cut points (its own, or
        published ones), the public bin1..binK elsewhere. Codes are unchanged."""
        names: dict[str, tuple[str, ...]] = {}
        for v in self.variables:
            if v.bins is not None and v.name in cuts:
                names[v.name] = interval_labels(cuts[v.name])
            elif v.bins is not None and v.bins.publish_edges and v.bins.edges is not None:
                names[v.name] = interval_labels(v.bins.edges)
            else:
                names[v.name] = v.states
        return names

    def party_name(self, role: str) -> str:
        """The display name this party's copy gives ``role``, or the role itself."""
        return self.party_names.get(role, role)

    def party_label(self, role: str) -> str:
        """``"Acme Insurance (alice)"`` where a name is given, else ``"alice"``."""
        return party_label(role, self.party_names)

    # -- canonical form -------------------------------------------------------------
    def _dict(self, variables: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "id_column": self.id_column,
            "variables": variables,
        }
        if self.missing_state is not None:
            out["missing_state"] = self.missing_state
        return out

    def to_dict(self) -> dict[str, Any]:
        """The full form (an owner's private bin fields, the missing markers and the party
        names included): what its file holds."""
        out = self._dict([v.to_dict() for v in self.variables])
        if self.missing:
            out["missing"] = list(self.missing)
        if self.party_names:
            out["party_names"] = dict(self.party_names)
        return out

    def public_dict(self) -> dict[str, Any]:
        """Only what the parties share: names, owners, domains, bin counts and methods,
        published edges. Equal to ``to_dict`` for an all-categorical schema without
        missing markers or party names."""
        return self._dict([v.public_dict() for v in self.variables])

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def fingerprint(self) -> str:
        """SHA-256 of the canonical public JSON (sorted keys, no whitespace): equal iff the
        parties' schemas agree on everything public. Private bin fields do not enter it."""
        canonical = json.dumps(self.public_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Any, source: str = "schema") -> Schema:
        """Build and check a schema; errors name ``source`` and the offending entry."""
        if not isinstance(data, dict):
            raise DataError(f"{source}: top level must be a JSON object")
        check_keys(data, _TOP_KEYS, source)
        version = data.get("version", SCHEMA_VERSION)
        if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
            supported = ", ".join(map(str, SUPPORTED_VERSIONS))
            raise DataError(
                f"{source}: schema 'version' {version!r} is not supported: this ppbn reads version {supported}"
            )
        id_column = data.get("id_column")
        if not isinstance(id_column, str) or not id_column:
            raise DataError(f"{source}: 'id_column' must be a non-empty string")
        raw_vars = data.get("variables")
        if not isinstance(raw_vars, list) or not raw_vars:
            raise DataError(f"{source}: 'variables' must be a non-empty list")
        missing_state = data.get("missing_state")
        if missing_state is not None and not isinstance(missing_state, str):
            raise DataError(f"{source}: 'missing_state' must be a string")
        missing = parse_missing(data.get("missing", []), source)
        party_names = parse_party_names(data.get("party_names", {}), source)
        seen: dict[str, str] = {}  # lower case -> name: pgmpy's BIF reader ignores case
        variables = []
        for i, raw in enumerate(raw_vars):
            where = f"{source}: variables[{i}]"
            if not isinstance(raw, dict):
                raise DataError(f"{where} must be an object")
            name, owner, states = raw.get("name"), raw.get("owner"), raw.get("states")
            if isinstance(name, str) and name:
                where = f"{source}: variable {name!r}"
            check_keys(
                raw,
                _VARIABLE_KEYS,
                where,
                {
                    "missing_state": "at the top level of the schema, not in a variable",
                    "missing": "at the top level of the schema, not in a variable",
                    "party_names": "at the top level of the schema, not in a variable",
                },
            )
            kind = raw.get("type", CATEGORICAL)
            if not isinstance(name, str) or not name:
                raise DataError(f"{where}: 'name' must be a non-empty string")
            if name == id_column:
                raise DataError(f"{where} has the same name as the id column")
            other = seen.get(name.lower())
            if other == name:
                raise DataError(f"{where} is declared twice")
            if other is not None:
                raise DataError(
                    f"{where}: the name differs from {other!r} only in letter case, which pgmpy's BIF "
                    "reader cannot tell apart; rename one of them in the schema and the data"
                )
            problem = bif_name_problem(name)
            if problem:
                raise DataError(
                    f"{where}: the name {problem}; {bif_name_fix(name, ' in the schema and the data')}"
                )
            seen[name.lower()] = name
            if owner not in PARTIES:
                raise DataError(f"{where}: owner must be 'alice' or 'bob', got {owner!r}")
            if kind == CONTINUOUS:
                if states is not None:
                    raise DataError(
                        f"{where}: a continuous variable has 'bins', not 'states' (its states are bin1..binK)"
                    )
                variables.append(
                    Variable.continuous(name, owner, parse_bins(raw.get("bins"), where))
                )
                continue
            if kind != CATEGORICAL:
                raise DataError(
                    f"{where}: 'type' must be 'categorical' or 'continuous', got {kind!r}"
                )
            if "bins" in raw:
                raise DataError(f'{where}: \'bins\' needs "type": "continuous"')
            if (
                not isinstance(states, list)
                or len(states) < 2
                or not all(isinstance(s, str) and s for s in states)
            ):
                raise DataError(f"{where}: 'states' must list at least two non-empty strings")
            if len(set(states)) != len(states):
                raise DataError(f"{where}: 'states' has a duplicate")
            for state in states:
                if state in missing:
                    raise DataError(
                        f"{where}, state {state!r}: the schema's 'missing' lists it as a missing "
                        "value: remove it from 'missing' or rename the state"
                    )
                problem = bif_state_problem(state)
                if problem:
                    raise DataError(
                        f"{where}, state {state!r}: the state {problem}; rename it in the schema and "
                        f"the data ({STATE_CHARS})"
                    )
            variables.append(Variable(name, owner, tuple(states)))
        return cls(id_column, tuple(variables), missing_state, missing, party_names)

    @classmethod
    def load(cls, path: str) -> Schema:
        """Read and check a schema file (errors name the file)."""
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise DataError(f"{path}: schema file not found") from None
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
            ) from None
        return cls.from_dict(data, source=str(path))


def parse_missing(raw: Any, source: str) -> tuple[str, ...]:
    """The schema's ``"missing"`` list: distinct strings, the empty one left out (an empty
    cell is always missing)."""
    if not isinstance(raw, list) or not all(isinstance(m, str) for m in raw):
        raise DataError(
            f'{source}: \'missing\' must be a list of strings (the cells read as missing, e.g. ["NA", "?"])'
        )
    twice = [m for m in raw if raw.count(m) > 1]
    if twice:
        raise DataError(f"{source}: 'missing' lists {twice[0]!r} twice")
    return tuple(m for m in raw if m)


def parse_party_names(raw: Any, source: str) -> dict[str, str]:
    """The schema's ``"party_names"``: role -> display name, each on one line of printable
    characters (it reaches terminals, pictures and log lines), at most 60 of them."""
    if not isinstance(raw, dict):
        raise DataError(
            f"{source}: 'party_names' must be an object of role -> display name "
            '(e.g. {"alice": "Acme Insurance", "bob": "City Clinic"})'
        )
    for role, name in raw.items():
        where = f"{source}: 'party_names' {role!r}"
        if role not in NAMED_ROLES:
            raise DataError(f"{where}: not a role (known roles: {', '.join(NAMED_ROLES)})")
        if not isinstance(name, str) or not name.strip():
            raise DataError(f"{where}: the name must be a non-empty string")
        odd = next((ch for ch in name if not ch.isprintable()), None)
        if odd is not None:
            raise DataError(
                f"{where}: the name holds the non-printable character {odd!r}; "
                "write it on one line of printable characters"
            )
        if len(name) > MAX_PARTY_NAME_CHARS:
            raise DataError(
                f"{where}: the name has {len(name)} characters, at most {MAX_PARTY_NAME_CHARS}"
            )
    return dict(raw)


def party_label(role: str, names: Mapping[str, str] | None) -> str:
    """``"Acme Insurance (alice)"`` where ``names`` (role -> display name) names ``role``,
    else the role: for tables and legends, where the organisation matters most."""
    name = (names or {}).get(role)
    return f"{name} ({role})" if name else role


def role_label(role: str, names: Mapping[str, str] | None) -> str:
    """``"bob (City Clinic)"`` where ``names`` names ``role``, else the role: for log
    lines, which keep the role first so that they are found by it."""
    name = (names or {}).get(role)
    return f"{role} ({name})" if name else role


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_bins(raw: Any, where: str) -> BinSpec:
    """Check a continuous variable's ``bins`` object; ``where`` names file and variable."""
    if not isinstance(raw, dict):
        raise DataError(f"{where}: a continuous variable needs a 'bins' object")
    check_keys(raw, sorted(_BIN_KEYS), f"{where}: bins")
    method, count = raw.get("method"), raw.get("count")
    if method not in METHODS:
        raise DataError(f"{where}: bins: unknown method {method!r} (one of {', '.join(METHODS)})")
    if isinstance(count, bool) or not isinstance(count, int) or count < 2:
        raise DataError(f"{where}: bins: 'count' must be an integer >= 2, got {count!r}")
    publish = raw.get("publish_edges", False)
    if not isinstance(publish, bool):
        raise DataError(f"{where}: bins: 'publish_edges' must be true or false")
    edges = raw.get("edges")
    if edges is not None:
        if not isinstance(edges, list) or not all(_is_number(e) for e in edges):
            raise DataError(f"{where}: bins: 'edges' must be a list of finite numbers")
        try:
            edges = check_edges(edges, count)
        except DiscretizationError as exc:
            raise DataError(f"{where}: bins: {exc}") from None
    elif publish:
        raise DataError(f"{where}: bins: 'publish_edges' needs the 'edges' to publish")
    if edges is not None and method != "edges" and not publish:
        raise DataError(
            f"{where}: bins: 'edges' are used only with method 'edges' (or published, to check "
            f"the {method} cut points against them)"
        )
    min_records, min_granularity = raw.get("min_records"), raw.get("min_granularity")
    if method != "mgas" and (min_records is not None or min_granularity is not None):
        raise DataError(
            f"{where}: bins: 'min_records' and 'min_granularity' apply to method 'mgas' only"
        )
    if min_records is not None and (
        isinstance(min_records, bool) or not isinstance(min_records, int) or min_records < 1
    ):
        raise DataError(f"{where}: bins: 'min_records' must be an integer >= 1")
    if min_granularity is not None and (not _is_number(min_granularity) or min_granularity < 0):
        raise DataError(f"{where}: bins: 'min_granularity' must be a number >= 0")
    return BinSpec(
        method,
        count,
        edges,
        publish,
        min_records,
        None if min_granularity is None else float(min_granularity),
    )
