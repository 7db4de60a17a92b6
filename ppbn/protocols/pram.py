"""The PRAM path as a protocol between parties: setups I and II of Ma and Sivakumar (Sec. III-A).

Both setups run over ``Channel``s, so the same code serves the daemons (gRPC) and tests or
``ppbn compare --in-process`` (memory channels).

Setup I (no data miner), between alice and bob:
  1. Each party randomizes its *cross-parent candidates*: its variables that precede, in
     the K2 node order, at least one variable of the other party (only those can become
     parents of the other party's children), extended to whole randomization blocks.
     It sends their randomized columns and the matrices of their blocks (``pram.header``
     JSON + ``pram.data`` array). The receiver checks that the matrices are the agreed
     ones (the scheme is a public job parameter) and that every code is in its domain.
  2. Each party runs the one K2 driver for its own children only, on its view (its own
     columns as they are, the peer's randomized columns) with the PRAM oracle; the K2
     decisions for a child are made by the child's owner alone. Each party estimates the
     CPTs of its own children from the same view (Sec. 5.4).
  3. Each party sends the parent sets (in the order added) and CPTs of its own children
     (``pram.families``): the structure, edge order and parameters are the job's output,
     so afterwards both hold the whole network. A node's K2 search depends only on its
     own scores, so the merged edge list is exactly what ``k2_search`` reports.

Setup II (data miner): alice and bob each randomize all their variables and send them with
their matrices to the miner, who learns structure and parameters on this one randomized
copy (``learn_pram``) and sends the network (``pram.families`` for every variable) back to
both parties.

Disclosures, recorded in the ledgers: the randomized columns (``randomized_data``) and the
matrices (``randomization_matrix``) to their receiver, then the structure, edges and
parameters. A variable the scheme does not randomize is sent as it is (identity matrix)
and the privacy report says so (K_p = 1, gamma infinite).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.bn.hc import descendants
from ppbn.bn.k2 import K2Result, k2_search
from ppbn.bn.learn import HCOptions
from ppbn.bn.model import BayesNet
from ppbn.bn.params import cpt_from_counts
from ppbn.bn.schema import PARTIES, Schema
from ppbn.bn.scores import DEFAULT_ESS
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.ledger import Ledger
from ppbn.randomized.pram.estimators import PramEstimator
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme, RandomSource
from ppbn.randomized.pram.oracle import PramOracle, learn_pram
from ppbn.randomized.pram.privacy import privacy_report

MINER = "miner"
HEADER_MAX_BYTES = 16 * 1024 * 1024
FAMILIES_MAX_BYTES = 256 * 1024 * 1024
CPT_ROW_TOLERANCE = 1e-6

Phase = Callable[[str], AbstractContextManager[Any]]
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class PramConfig:
    """Learning settings shared by every party of one run (public job parameters)."""

    max_parents: int
    mode: str
    tau: float
    order: tuple[str, ...]
    c_star: float = 1.0
    eta: float = 1.0
    counts: str = "moment"
    pseudo_count: float = 0.0
    # "k2" (under ``order``) or "hc": hill climbing with ``hc`` (setup II only)
    search: str = "k2"
    hc: HCOptions | None = None
    ess: float = DEFAULT_ESS  # BDeu's equivalent sample size


@dataclass
class PramOutcome:
    """What one party ends with: the whole network, the edge order, and what was disclosed.

    ``disclosed`` lists every variable whose (randomized) column left its owner in this
    run, in schema order; ``privacy`` measures each of their blocks (see ``privacy_rows``).
    """

    network: BayesNet
    edges: list[tuple[str, str]]
    order: tuple[str, ...]
    disclosed: tuple[str, ...]
    privacy: list[dict[str, Any]]
    received: tuple[str, ...]


def _no_phase(_name: str) -> AbstractContextManager[Any]:
    return nullcontext()


# -- what is sent -----------------------------------------------------------------------


def code_dtype(schema: Schema) -> np.dtype:
    """The smallest unsigned dtype that holds every state index (both ends derive it)."""
    largest = max(schema.cardinalities())
    for dtype in (np.uint8, np.uint16, np.uint32):
        if largest <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise RandomizationError(f"a variable has {largest} states: too many to send")


def with_block_mates(
    names: Sequence[str], scheme: RandomizationScheme, schema: Schema
) -> tuple[str, ...]:
    """``names`` plus every variable randomized jointly with one of them, in schema order."""
    chosen = set(names)
    for name in names:
        block = scheme.block_of(name)
        if block is not None:
            chosen.update(block.variables)
    return tuple(v for v in schema.names if v in chosen)


def cross_parent_candidates(
    schema: Schema, order: Sequence[str], party: str, scheme: RandomizationScheme
) -> tuple[str, ...]:
    """Setup I: ``party``'s variables that may become a parent of a peer's child.

    A variable can only become a parent of variables after it in the K2 order, so it is
    needed by the peer iff some peer variable comes later. Block mates travel along (the
    estimator needs the whole block).
    """
    position = {v: i for i, v in enumerate(order)}
    peer_positions = [position[v.name] for v in schema.variables if v.owner != party]
    last_peer = max(peer_positions, default=-1)
    own = [v.name for v in schema.owned_by(party) if position[v.name] < last_peer]
    return with_block_mates(own, scheme, schema)


def check_scheme_fits(scheme: RandomizationScheme, schema: Schema) -> None:
    """The scheme names the schema's variables with their cardinalities; no block spans owners."""
    if scheme.cardinalities != dict(zip(schema.names, schema.cardinalities(), strict=True)):
        raise RandomizationError("the randomization scheme does not match the schema's variables")
    for block in scheme.blocks:
        owners = {schema.owner(v) for v in block.variables}
        if len(owners) > 1:
            raise RandomizationError(
                f"randomization block {block.name} mixes the variables of two parties; "
                "only one party's variables can be randomized simultaneously (Ma 2006, Sec. 5.3)"
            )


def send_randomized(
    channel: Channel,
    schema: Schema,
    columns: Sequence[str],
    own_columns: Sequence[str],
    own_codes: np.ndarray,
    scheme: RandomizationScheme,
    source: RandomSource,
) -> None:
    """Randomize ``columns`` (a subset of the sender's own) and send them with their matrices."""
    columns = tuple(columns)
    idx = [list(own_columns).index(c) for c in columns]
    sub = scheme.restricted(columns)
    randomized = sub.randomize(own_codes[:, idx], columns, source)
    header = {"records": int(own_codes.shape[0]), "columns": list(columns), "scheme": sub.to_dict()}
    channel.send("pram.header", json.dumps(header).encode())
    channel.send_array("pram.data", randomized.astype(code_dtype(schema)))


def recv_randomized(
    channel: Channel,
    schema: Schema,
    expected: Sequence[str],
    records: int | None,
    agreed: RandomizationScheme,
    ledger: Ledger,
    sender: str,
) -> tuple[np.ndarray, RandomizationScheme]:
    """Receive randomized columns, check them against what the protocol and scheme say.

    ``records`` is the agreed record count, or None when the header states it (the miner,
    which checks it across senders itself). Returns (codes (n, len(expected)), scheme).
    """
    try:
        header = json.loads(channel.recv("pram.header", max_bytes=HEADER_MAX_BYTES))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError(f"{sender} sent a randomization header that is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("records"), int):
        raise ProtocolError(f"{sender} sent a malformed randomization header")
    columns = tuple(header.get("columns") or ())
    if columns != tuple(expected):
        raise ProtocolError(
            f"{sender} sent columns {list(columns)}, the protocol expects {list(expected)}"
        )
    n = header["records"]
    if n < 1 or (records is not None and n != records):
        raise ProtocolError(f"{sender} sent {n} records, expected {records}")
    try:
        received = RandomizationScheme.from_dict(header.get("scheme"))
    except RandomizationError as exc:
        raise ProtocolError(f"{sender} sent an unusable randomization matrix: {exc}") from None
    _check_agreed(received, agreed.restricted(columns), sender)
    dtype = code_dtype(schema)
    codes = channel.recv_array("pram.data", dtype, (n, len(columns))).astype(np.int64)
    for j, name in enumerate(columns):
        if codes.size and codes[:, j].max() >= schema.cardinality(name):
            raise ProtocolError(f"{sender} sent a code outside the domain of {name!r}")
    ledger.record("randomized_data", {"variables": list(columns), "records": n}, sender)
    for block in received.blocks:
        ledger.record(
            "randomization_matrix",
            {
                "variables": list(block.variables),
                "label": block.label,
                "matrix": block.matrix.tolist(),
            },
            sender,
        )
    return codes, received


def recv_from_both_parties(
    channels: Mapping[str, Channel], schema: Schema, scheme: RandomizationScheme, ledger: Ledger
) -> np.ndarray:
    """The miner's receipt of setup II: every column of alice, then of bob, randomized under
    the agreed scheme, on the same number of records; (n, every variable in schema order)."""
    if set(channels) != set(PARTIES):
        raise ValueError("the miner needs one channel to alice and one to bob")
    parts: dict[str, np.ndarray] = {}
    records = None
    for party in PARTIES:
        columns = tuple(v.name for v in schema.owned_by(party))
        parts[party], _ = recv_randomized(
            channels[party], schema, columns, records, scheme, ledger, party
        )
        records = parts[party].shape[0]
    by_name = {
        v.name: parts[v.owner][:, [u.name for u in schema.owned_by(v.owner)].index(v.name)]
        for v in schema.variables
    }
    return np.column_stack([by_name[v] for v in schema.names])


def _check_agreed(received: RandomizationScheme, agreed: RandomizationScheme, sender: str) -> None:
    if received.cardinalities != agreed.cardinalities:
        raise ProtocolError(f"{sender}'s randomization scheme names other variables than agreed")
    mine = {b.variables: b.matrix for b in agreed.blocks}
    theirs = {b.variables: b.matrix for b in received.blocks}
    if set(mine) != set(theirs) or any(
        not np.allclose(mine[k], theirs[k], rtol=0, atol=1e-12) for k in mine
    ):
        raise ProtocolError(f"{sender} randomized with other matrices than the agreed scheme")


# -- families on the wire ---------------------------------------------------------------


Family = tuple[
    tuple[str, ...], np.ndarray, tuple[int, ...]
]  # (parents in order added, CPT, unobserved rows)


def network_families(network: BayesNet, children: Sequence[str]) -> dict[str, Family]:
    return {
        v: (network.parents[v], network.cpts[v], network.unobserved.get(v, ())) for v in children
    }


def encode_families(families: Mapping[str, Family]) -> bytes:
    """Parent sets (in the order added) and CPTs, as JSON."""
    return json.dumps(
        {
            v: {"parents": list(parents), "table": cpt.tolist(), "unobserved": list(unobserved)}
            for v, (parents, cpt, unobserved) in families.items()
        }
    ).encode()


def decode_families(
    payload: bytes, schema: Schema, children: Sequence[str], config: PramConfig, sender: str
) -> dict[str, Family]:
    """Check and parse ``encode_families`` output: {child: (parents, cpt, unobserved)}."""
    try:
        raw = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError(f"{sender} sent families that are not JSON") from None
    if not isinstance(raw, dict) or set(raw) != set(children):
        raise ProtocolError(f"{sender} sent families for other variables than {sorted(children)}")
    position = {v: i for i, v in enumerate(config.order)}
    # K2 keeps parents before their child in the order; hill climbing only needs a DAG
    # (checked below, once every family is read)
    ordered = config.search != "hc"
    out = {}
    for child in children:
        entry = raw[child]
        if not isinstance(entry, dict):
            raise ProtocolError(f"{sender} sent a malformed family for {child!r}")
        parents = entry.get("parents")
        if (
            not isinstance(parents, list)
            or len(parents) > config.max_parents
            or len(set(map(str, parents))) != len(parents)
            or any(
                p not in position or p == child or (ordered and position[p] >= position[child])
                for p in parents
            )
        ):
            where = "in the K2 order" if ordered else "of the schema"
            raise ProtocolError(
                f"{sender} sent parents {parents!r} for {child!r}: not distinct predecessors "
                f"{where}, at most {config.max_parents}"
            )
        q = math.prod(schema.cardinality(p) for p in parents)
        try:
            table = np.array(entry.get("table"), dtype=float)
        except (TypeError, ValueError):
            raise ProtocolError(f"{sender} sent a non-numeric CPT for {child!r}") from None
        shape = (q, schema.cardinality(child))
        if (
            table.shape != shape
            or not np.all(np.isfinite(table))
            or np.any(table < 0)
            or not np.allclose(table.sum(axis=1), 1.0, atol=CPT_ROW_TOLERANCE)
        ):
            raise ProtocolError(
                f"{sender} sent a CPT for {child!r} that is not a {shape} stochastic table"
            )
        unobserved = entry.get("unobserved", [])
        if not isinstance(unobserved, list) or any(
            not isinstance(j, int) or not 0 <= j < q for j in unobserved
        ):
            raise ProtocolError(f"{sender} sent bad unobserved rows for {child!r}")
        out[child] = (tuple(parents), table, tuple(unobserved))
    if not ordered and set(children) == set(schema.names):
        try:
            descendants(schema.names, {v: out[v][0] for v in schema.names})
        except ValueError as exc:
            raise ProtocolError(f"{sender} sent a network that is not a DAG: {exc}") from None
    return out


def _record_network(ledger: Ledger, network: BayesNet, edges, children, source: str) -> None:
    ledger.record("structure", {v: list(network.parents[v]) for v in children}, source)
    for parent, child in edges:
        if child in children:
            ledger.record("edge", [parent, child], source)
    for v in children:
        ledger.record("parameter", {"variable": v, "table": network.cpts[v].tolist()}, source)


def _assemble(
    schema: Schema,
    families: Mapping[str, Family],
    order: Sequence[str],
) -> tuple[BayesNet, list[tuple[str, str]]]:
    names = schema.names
    states = {v.name: v.states for v in schema.variables}
    parents = {v: families[v][0] for v in names}
    cpts = {v: families[v][1] for v in names}
    unobserved = {v: families[v][2] for v in names if families[v][2]}
    edges = [(p, v) for v in order for p in parents[v]]
    return BayesNet(names, states, parents, cpts, unobserved), edges


# -- privacy report ---------------------------------------------------------------------


def privacy_rows(
    scheme: RandomizationScheme, disclosed: Sequence[str], schema: Schema
) -> list[dict[str, Any]]:
    """gamma (strict, and ignoring zeros: docs/conventions.md, "Gamma amplification"), K_p, Dist_K and H(X | X_tilde) per
    disclosed block, uniform prior; a variable sent unrandomized has K_p = 1, gamma = inf."""
    chosen = set(disclosed)
    rows = []
    for entry in privacy_report(scheme.restricted(with_block_mates(disclosed, scheme, schema))):
        rows.append(
            {
                "variables": list(entry.variables),
                "owner": schema.owner(entry.variables[0]),
                "randomization": entry.label,
                "gamma": entry.gamma.value,
                "gamma_ignoring_zeros": entry.gamma.value_ignoring_zeros,
                "gamma_convention": entry.gamma.convention,
                "k_p": entry.k_anonymity.k_p,
                "dist_k_bits": entry.k_anonymity.dist_k,
                "entropy_bits": entry.entropy_bits,
                "prior_entropy_bits": entry.prior_entropy_bits,
            }
        )
    for name in schema.names:
        if name in chosen and scheme.block_of(name) is None:
            card = schema.cardinality(name)
            rows.append(
                {
                    "variables": [name],
                    "owner": schema.owner(name),
                    "randomization": "none (sent as it is)",
                    "gamma": math.inf,
                    "gamma_ignoring_zeros": 1.0,
                    "gamma_convention": "strict (infinite: not randomized)",
                    "k_p": 1,
                    "dist_k_bits": 0.0,
                    "entropy_bits": 0.0,
                    "prior_entropy_bits": math.log2(card),
                }
            )
    position = {v: i for i, v in enumerate(schema.names)}
    return sorted(rows, key=lambda r: position[r["variables"][0]])


# -- setup I ----------------------------------------------------------------------------


@dataclass
class _OwnChildrenOracle:
    """Answers K2 steps for ``own`` children with the PRAM oracle, stops the others'."""

    oracle: PramOracle
    own: frozenset[str]

    def best_parent(
        self, child: str, parents: tuple[str, ...], candidates: tuple[str, ...], tau: float
    ) -> str | None:
        if child not in self.own:
            return None
        return self.oracle.best_parent(child, parents, candidates, tau)


def run_setup_one(
    role: str,
    channel: Channel,
    schema: Schema,
    own_codes: np.ndarray,
    scheme: RandomizationScheme,
    config: PramConfig,
    source: RandomSource,
    ledger: Ledger,
    phase: Phase = _no_phase,
    progress: Progress | None = None,
) -> PramOutcome:
    """One party's side of setup I (see the module docstring); both end with the network."""
    if role not in PARTIES:
        raise ValueError(f"setup I runs between alice and bob, not {role!r}")
    peer = "bob" if role == "alice" else "alice"
    check_scheme_fits(scheme, schema)
    own_columns = tuple(v.name for v in schema.owned_by(role))
    n = int(own_codes.shape[0])
    to_send = cross_parent_candidates(schema, config.order, role, scheme)
    to_receive = cross_parent_candidates(schema, config.order, peer, scheme)
    with phase("exchange randomized data"):
        if to_send:
            send_randomized(channel, schema, to_send, own_columns, own_codes, scheme, source)
        if to_receive:
            theirs, their_scheme = recv_randomized(
                channel, schema, to_receive, n, scheme, ledger, peer
            )
        else:
            theirs, their_scheme = np.zeros((n, 0), dtype=np.int64), RandomizationScheme({})
    with phase("learn own families"):
        columns = own_columns + to_receive
        view = np.hstack([own_codes.astype(np.int64), theirs])
        view_scheme = RandomizationScheme(
            {c: schema.cardinality(c) for c in columns}, their_scheme.blocks
        )
        estimator = PramEstimator(columns, view, view_scheme)
        oracle = PramOracle(
            estimator, config.mode, config.c_star, config.eta, config.counts, config.ess
        )
        search: K2Result = k2_search(
            config.order,
            config.max_parents,
            _OwnChildrenOracle(oracle, frozenset(own_columns)),
            config.tau,
            progress,
        )
        own_families: dict[str, Family] = {}
        for child in own_columns:
            family = (*search.parents[child], child)
            table = estimator.counts(family, config.counts).reshape(-1, schema.cardinality(child))
            cpt, unobserved = cpt_from_counts(table, config.pseudo_count)
            own_families[child] = (search.parents[child], cpt, unobserved)
    with phase("exchange families"):
        channel.send("pram.families", encode_families(own_families))
        peer_columns = tuple(v.name for v in schema.owned_by(peer))
        theirs_families = decode_families(
            channel.recv("pram.families", max_bytes=FAMILIES_MAX_BYTES),
            schema,
            peer_columns,
            config,
            peer,
        )
    network, edges = _assemble(schema, {**own_families, **theirs_families}, config.order)
    _record_network(ledger, network, edges, peer_columns, peer)
    disclosed = tuple(v for v in schema.names if v in set(to_send) | set(to_receive))
    return PramOutcome(
        network, edges, config.order, disclosed, privacy_rows(scheme, disclosed, schema), to_receive
    )


# -- setup II ---------------------------------------------------------------------------


def run_setup_two_party(
    role: str,
    channel: Channel,
    schema: Schema,
    own_codes: np.ndarray,
    scheme: RandomizationScheme,
    config: PramConfig,
    source: RandomSource,
    ledger: Ledger,
    phase: Phase = _no_phase,
) -> PramOutcome:
    """alice's or bob's side of setup II: send everything randomized, receive the network."""
    check_scheme_fits(scheme, schema)
    own_columns = tuple(v.name for v in schema.owned_by(role))
    with phase("send randomized data"):
        send_randomized(channel, schema, own_columns, own_columns, own_codes, scheme, source)
    with phase("wait for the miner"):
        families = decode_families(
            channel.recv("pram.families", max_bytes=FAMILIES_MAX_BYTES),
            schema,
            schema.names,
            config,
            MINER,
        )
    network, edges = _assemble(schema, families, config.order)
    _record_network(ledger, network, edges, schema.names, MINER)
    disclosed = schema.names
    return PramOutcome(
        network, edges, config.order, disclosed, privacy_rows(scheme, disclosed, schema), ()
    )


def run_setup_two_miner(
    channels: Mapping[str, Channel],
    schema: Schema,
    scheme: RandomizationScheme,
    config: PramConfig,
    ledger: Ledger,
    phase: Phase = _no_phase,
    progress: Progress | None = None,
) -> PramOutcome:
    """The miner's side of setup II: join both randomized copies, learn, send the network back."""
    check_scheme_fits(scheme, schema)
    with phase("receive randomized data"):
        randomized = recv_from_both_parties(channels, schema, scheme, ledger)
    with phase("learn"):
        states = {v.name: v.states for v in schema.variables}
        learned = learn_pram(
            schema.names,
            states,
            randomized,
            scheme,
            config.max_parents,
            config.mode,
            config.tau,
            config.order,
            config.c_star,
            config.eta,
            config.counts,
            config.pseudo_count,
            progress,
            search=config.search,
            hc=config.hc,
            ess=config.ess,
        )
    with phase("send network"):
        payload = encode_families(network_families(learned.network, schema.names))
        for party in PARTIES:
            channels[party].send("pram.families", payload)
    disclosed = schema.names
    return PramOutcome(
        learned.network,
        learned.search.edges,
        config.order,
        disclosed,
        privacy_rows(scheme, disclosed, schema),
        disclosed,
    )


def iter_privacy_text(rows: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """One line per disclosed block for people: gamma (both conventions) and K_p."""
    for row in rows:
        gamma = row["gamma"]
        shown = "inf" if math.isinf(gamma) else f"{gamma:.3g}"
        yield (
            f"{'+'.join(row['variables'])} ({row['owner']}, {row['randomization']}): gamma {shown} "
            f"(ignoring zeros {row['gamma_ignoring_zeros']:.3g}), K_p {row['k_p']}"
        )
