"""Shared scenarios of tests/protocols/test_executor.py and tests/lab/test_ray.py: the same table phase and
the same learn job under different executors."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from timeouts import PEER_TIMEOUT_S

from ppbn.bn.networks import load_network, sample
from ppbn.bn.schema import Schema, Variable
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.learn import learn_secure
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.paillier import KeyPair
from ppbn.protocols.tables import (
    TablesConfig,
    TablesSession,
    crossing_families,
    reconstruct,
    run_tables,
)

SEED = bytes(range(32))


def network_schema(name: str) -> tuple[Schema, np.ndarray]:
    net = load_network(name)
    schema = Schema(
        "id",
        tuple(
            Variable(v, "alice" if i % 2 == 0 else "bob", net.states[v])
            for i, v in enumerate(net.names)
        ),
    )
    return schema, net


def parts(schema: Schema, full: np.ndarray) -> dict[str, np.ndarray]:
    index = {name: i for i, name in enumerate(schema.names)}
    return {
        role: np.ascontiguousarray(full[:, [index[v.name] for v in schema.owned_by(role)]])
        for role in ("alice", "bob")
    }


@functools.cache
def fixed_keys() -> dict[str, KeyPair]:
    return {role: KeyPair.generate(1024) for role in ("alice", "bob")}


def config_for(executor: str, **changes) -> TablesConfig:
    """1024-bit keys, small chunks, and serial_below=0 so the executor really runs the tasks."""
    return dataclasses.replace(
        TablesConfig(key_bits=1024, chunk_size=64, workers=2, serial_below=0, executor=executor),
        **changes,
    )


@functools.cache  # the inline runs are the yardstick of both test files: computed once per session
def tables_run(executor: str, network: str = "asia", records: int = 300, max_family: int = 2):
    """Shares and both transcripts of one table phase with fixed keys and seed."""
    schema, net = network_schema(network)
    full = sample(net, records, 3)
    split = parts(schema, full)
    families = crossing_families(schema, max_family)
    config = config_for(executor, seed=SEED)
    keys = fixed_keys()
    sessions = {role: TablesSession(config, keys=keys[role]) for role in ("alice", "bob")}

    def side(role):
        return lambda ch: run_tables(
            ch, role, schema, split[role], families, config, session=sessions[role]
        )

    pair = memory_channel_pair(timeout_s=PEER_TIMEOUT_S, keep_transcript=True)
    try:
        alice, bob = run_two_party(side("alice"), side("bob"), pair=pair)
    finally:
        for session in sessions.values():
            session.close()
    return alice, bob, [list(end.transcript) for end in pair], reconstruct(alice, bob)


@functools.cache
def learn_run(
    executor: str,
    network: str,
    records: int = 300,
    max_parents: int = 2,
    inline_below: int | None = None,
):
    """Each party's learned edges (in order) and CPTs of a secure learn job. ``inline_below``:
    both the garbling and the OT threshold (0: every garbled run and OT call on the executor)."""
    schema, net = network_schema(network)
    codes = sample(net, records, 5)
    split = parts(schema, codes)
    batches = (
        {}
        if inline_below is None
        else {"gc_inline_below": inline_below, "ot_inline_below": inline_below}
    )
    config = SecureLearnConfig(
        max_parents=max_parents, mode="bic", tables=config_for(executor), **batches
    )

    def side(role):
        return lambda ch: learn_secure(ch, role, schema, split[role], config, Ledger(role))

    results = run_two_party(side("alice"), side("bob"), timeout_s=300)
    return [(r.search.edges, r.network.cpts) for r in results]


def assert_same_learning(got, expected) -> None:
    for (edges, cpts), (want_edges, want_cpts) in zip(got, expected, strict=True):
        assert edges == want_edges
        assert set(cpts) == set(want_cpts)
        for v in cpts:
            np.testing.assert_allclose(cpts[v], want_cpts[v], atol=1e-9)
