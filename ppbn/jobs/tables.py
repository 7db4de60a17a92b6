"""The ``tables`` job: shares of the count tables of every crossing family, at both daemons.

Runs ``ppbn.protocols.tables.run_tables`` (one packed Paillier pass for all families,
docs/design.md, "Where the cost is") over the job's channel. Each party writes only its own
shares: ``shares.npz`` (one uint64 array per family, ``f0``, ``f1``, ... in the order of
``families.json``). A share alone is statistically independent of the counts; adding
both parties' shares mod 2^64 gives the counts, which only tests and
``ppbn simulate --reveal-for-testing`` ever do (``load_shares`` + ``reconstruct``).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ppbn.bn.schema import Schema
from ppbn.errors import UserError
from ppbn.jobs.base import (
    JobContext,
    JobKind,
    ParameterError,
    PolicyScope,
    check_known,
    job_security,
)
from ppbn.jobs.policy import FamilyBound, LocalPolicy
from ppbn.protocols.channel import Channel
from ppbn.protocols.constants import SECURITY_LEVELS
from ppbn.protocols.paillier import KEY_BITS_CHOICES, TEST_ONLY_KEY_BITS, WEAK_KEY_WARNING
from ppbn.protocols.tables import (
    TablesConfig,
    TablesSession,
    crossing_families,
    per_alpha_cost,
    run_tables,
)

SHARES_FILE = "shares.npz"
FAMILIES_FILE = "families.json"
DEFAULT_MAX_FAMILY = 3


def check_tables_params(params: dict[str, Any], schema: Schema) -> dict[str, Any]:
    check_known("tables", params, {"max_family", "key_bits", "statistical_bits", "chunk_size"})
    out = {
        "max_family": params.get("max_family", DEFAULT_MAX_FAMILY),
        "key_bits": params.get("key_bits", TablesConfig.key_bits),
        "statistical_bits": params.get("statistical_bits", TablesConfig.statistical_bits),
        "chunk_size": params.get("chunk_size", TablesConfig.chunk_size),
    }
    for name in out:
        if isinstance(out[name], bool) or not isinstance(out[name], int):
            raise ParameterError(name, f"tables: {name} must be an integer")
    if not 2 <= out["max_family"] <= len(schema.variables):
        raise ParameterError(
            "max_family", f"tables: max_family must be an integer in 2..{len(schema.variables)}"
        )
    if out["key_bits"] not in KEY_BITS_CHOICES:
        raise ParameterError(
            "key_bits", f"tables: key_bits must be one of {', '.join(map(str, KEY_BITS_CHOICES))}"
        )
    if not 40 <= out["statistical_bits"] <= 128:
        raise ParameterError(
            "statistical_bits", "tables: statistical_bits must be an integer in 40..128"
        )
    if not 1 <= out["chunk_size"] <= 1 << 20:
        raise ParameterError("chunk_size", "tables: chunk_size must be an integer in 1..1048576")
    return out


def check_tables_policy(params: dict[str, Any], policy: LocalPolicy, scope: PolicyScope) -> None:
    """Table shares under this party's policy: key size, masking, family size, records."""
    policy.require_path("secure", "tables")
    policy.require_records(scope.n_records)
    policy.require_key_bits(params["key_bits"])
    policy.require_statistical_bits(params["statistical_bits"])


def tables_family_bound(params: dict[str, Any], schema: Schema) -> FamilyBound:
    """The job shares the counts of every crossing family of ``max_family`` variables."""
    size = params["max_family"]
    return FamilyBound(
        size - 1, "max_family", f"max_family {size} lets a child have {size - 1} parents"
    )


class _PhaseClock:
    """Turns run_tables' (phase, done, total) progress calls into wall time per phase."""

    def __init__(self, context: JobContext, first: str) -> None:
        self.context = context
        self.current = first
        self.since = time.perf_counter()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase != self.current:
            self.switch(phase)
        self.context.advance(phase, done, total)

    def switch(self, phase: str) -> None:
        self.finish()
        self.current = phase
        self.context.progress(f"phase {phase}")

    def finish(self) -> None:
        now = time.perf_counter()
        phases = self.context.phases
        phases[self.current] = phases.get(self.current, 0.0) + now - self.since
        self.since = now


def run_tables_job(role: str, channel: Channel, context: JobContext) -> dict[str, Any]:
    """Shares of every crossing family of at most ``max_family`` variables, written to files."""
    params = context.params
    schema = context.schema
    families = crossing_families(schema, params["max_family"])
    if not families:
        raise UserError("tables: no family of that size has variables of both parties")
    config = TablesConfig(
        key_bits=params["key_bits"],
        statistical_bits=params["statistical_bits"],
        chunk_size=params["chunk_size"],
        complete_records=context.data.missing_rule != "available-case",
        security=job_security(params),
        # one run_tables call per job: no later call could reuse cached ciphertexts
        **{**context.policy.tables_settings(), "cache_bytes": 0, "spill_bytes": 0},
    )
    if config.key_bits == TEST_ONLY_KEY_BITS:
        context.progress(WEAK_KEY_WARNING)
    context.progress(
        f"tables: {len(families)} crossing families of at most {params['max_family']} variables"
    )
    clock = _PhaseClock(context, "setup")
    with TablesSession(config) as session:
        shares = run_tables(
            channel,
            role,
            schema,
            context.data.codes,
            families,
            config,
            context.counters,
            clock,
            session,
        )
        clock.switch("write")
    write_shares(context.out_dir, role, families, shares)
    clock.finish()
    n = context.data.n_records
    paper = per_alpha_cost(schema, families, n, config.key_bits)
    return {
        "families": len(families),
        "cells": int(sum(math.prod(schema.cardinalities(f)) for f in families)),
        "records": n,
        "key_bits": config.key_bits,
        "shares_file": str(context.out_dir / SHARES_FILE),
        "paillier_encryptions": context.counters.encryptions,
        "per_alpha_encryptions": paper.encryptions,
        "per_alpha_public_key_operations": paper.public_key_operations,
        "security": config.security,
        **({"warning": WEAK_KEY_WARNING} if config.key_bits == TEST_ONLY_KEY_BITS else {}),
    }


def write_shares(out_dir: Path, role: str, families: list[tuple[str, ...]], shares: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez(out_dir / SHARES_FILE, **{f"f{i}": shares[f] for i, f in enumerate(families)})
    meta = {
        "role": role,
        "share_modulus": "2^64",
        "note": "additive shares: this file alone says nothing about the counts",
        "families": [list(f) for f in families],
    }
    (out_dir / FAMILIES_FILE).write_text(json.dumps(meta, indent=2) + "\n")


def load_shares(out_dir: str | Path) -> dict[tuple[str, ...], np.ndarray]:
    """One party's shares as written by the job: {family: uint64 array}."""
    base = Path(out_dir)
    meta = json.loads((base / FAMILIES_FILE).read_text())
    with np.load(base / SHARES_FILE) as data:
        return {tuple(f): data[f"f{i}"] for i, f in enumerate(meta["families"])}


TABLES_JOB = JobKind(
    "tables",
    run_tables_job,
    check_tables_params,
    "shares of the count tables of every crossing family of at most max_family variables",
    check_tables_policy,
    tables_family_bound,
    # every level: the table phase's defences (``protocols/tables/checks.py``) run above
    # semi-honest, and the job opens nothing else
    security_levels=SECURITY_LEVELS,
)
