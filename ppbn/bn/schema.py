"""The public schema both parties agree on: variables, owners, ordered domains, id column.

The schema is public by design (Yang-Wright Sec. 4.2: "we assume the domains of
databases D are public"). Values are coded as the index of the state in its declared
domain, so a state that never occurs in the data is still part of every count table.
The fingerprint is a hash of the canonical JSON form; the daemons compare it in the
session handshake.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ppbn.errors import DataError

PARTIES = ("alice", "bob")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Variable:
    name: str
    owner: str
    states: tuple[str, ...]

    @property
    def cardinality(self) -> int:
        return len(self.states)


@dataclass(frozen=True)
class Schema:
    id_column: str
    variables: tuple[Variable, ...]
    missing_state: str | None = None

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

    # -- canonical form -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "id_column": self.id_column,
            "variables": [
                {"name": v.name, "owner": v.owner, "states": list(v.states)} for v in self.variables
            ],
        }
        if self.missing_state is not None:
            out["missing_state"] = self.missing_state
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON (sorted keys, no whitespace): equal iff schemas agree."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Any, source: str = "schema") -> Schema:
        """Build and check a schema; errors name ``source`` and the offending entry."""
        if not isinstance(data, dict):
            raise DataError(f"{source}: top level must be a JSON object")
        id_column = data.get("id_column")
        if not isinstance(id_column, str) or not id_column:
            raise DataError(f"{source}: 'id_column' must be a non-empty string")
        raw_vars = data.get("variables")
        if not isinstance(raw_vars, list) or not raw_vars:
            raise DataError(f"{source}: 'variables' must be a non-empty list")
        missing_state = data.get("missing_state")
        if missing_state is not None and not isinstance(missing_state, str):
            raise DataError(f"{source}: 'missing_state' must be a string")
        seen: set[str] = set()
        variables = []
        for i, raw in enumerate(raw_vars):
            where = f"{source}: variables[{i}]"
            if not isinstance(raw, dict):
                raise DataError(f"{where} must be an object")
            name, owner, states = raw.get("name"), raw.get("owner"), raw.get("states")
            if not isinstance(name, str) or not name:
                raise DataError(f"{where}: 'name' must be a non-empty string")
            where = f"{source}: variable {name!r}"
            if name == id_column:
                raise DataError(f"{where} has the same name as the id column")
            if name in seen:
                raise DataError(f"{where} is declared twice")
            seen.add(name)
            if owner not in PARTIES:
                raise DataError(f"{where}: owner must be 'alice' or 'bob', got {owner!r}")
            if (
                not isinstance(states, list)
                or len(states) < 2
                or not all(isinstance(s, str) and s for s in states)
            ):
                raise DataError(f"{where}: 'states' must list at least two non-empty strings")
            if len(set(states)) != len(states):
                raise DataError(f"{where}: 'states' has a duplicate")
            variables.append(Variable(name, owner, tuple(states)))
        return cls(id_column, tuple(variables), missing_state)

    @classmethod
    def load(cls, path: str) -> Schema:
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise DataError(f"{path}: schema file not found") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
        return cls.from_dict(data, source=str(path))
