"""Exact parameters of the learned structure (Yang-Wright Sec. 7.1, Fig. 4; Sec. 8.1, 8.2).

alpha_ijk / alpha_ij from the table shares the search already holds, by a garbled
division circuit, revealed per the disclosure mode: ``public`` (both learn every CPT),
``owner`` (only the owner of v_i, Sec. 8.2), ``shared`` (each party keeps additive shares
mod 2^64 of theta * 2^PARAM_FRAC). Under available-case analysis the number of records
each family was counted on is opened too (``family_record_counts``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ppbn.bn.params import cpt_from_counts
from ppbn.circuits.scoring import PARAM_FRAC, division_circuit
from ppbn.protocols import ring
from ppbn.protocols.channel import ProtocolError
from ppbn.protocols.learning.config import DISCLOSURES, GARBLER, Family
from ppbn.protocols.learning.scorer import SecureScorer, local_owner
from ppbn.protocols.yao import Reveal


@dataclass
class SecureParameters:
    """This party's view of the parameters: CPTs it may see, and shares it keeps."""

    cpts: dict[str, np.ndarray]  # variable -> (q, d) CPT, for every CPT revealed to us
    unobserved: dict[str, tuple[int, ...]]
    # shared mode: variable -> {"theta": shares mod 2^64 of theta 2^PARAM_FRAC, "unobserved":
    # shares mod 2 of the flag}, one entry per CPT cell (C order)
    shares: dict[str, dict[str, list[int]]]


def _reveal_for(disclosure: str, owner: str) -> Reveal:
    """Who learns the division's outputs under ``disclosure`` for a variable of ``owner``."""
    if disclosure == "public":
        return Reveal.BOTH
    if disclosure == "shared":
        return Reveal.SHARES
    return Reveal.GARBLER if owner == GARBLER else Reveal.EVALUATOR


def _record_cpt(
    scorer: SecureScorer, view: SecureParameters, v: str, cpt: np.ndarray, unobserved, source: str
) -> None:
    view.cpts[v] = cpt
    view.unobserved[v] = tuple(int(j) for j in unobserved)
    scorer.ledger.record("parameter", {"variable": v, "cpt": cpt.tolist()}, source)


def _local_parameters(
    scorer: SecureScorer, families: dict[str, Family], disclosure: str, view: SecureParameters
) -> None:
    """Yang-Wright 7.1 case 1: a family held by one party is that party's own data, so it
    computes the CPT itself and announces it (public), keeps it (owner: it owns v_i), or
    deals shares of it (shared). Each party sends its part, then reads the peer's."""
    schema, role, channel = scorer.schema, scorer.role, scorer.channel
    mine = [v for v, f in families.items() if local_owner(schema, f) == role]
    theirs = [v for v, f in families.items() if local_owner(schema, f) not in (None, role)]
    cells = {v: scorer.count_shares[families[v]].size for v in families}
    if disclosure == "owner":
        for v in mine:
            d = schema.cardinality(v)
            cpt, unobserved = cpt_from_counts(
                scorer.count_shares[families[v]].reshape(-1, d).astype(float)
            )
            _record_cpt(scorer, view, v, cpt, unobserved, "own data (Yang-Wright 7.1, case 1)")
        return
    outgoing = []
    for v in mine:
        d = schema.cardinality(v)
        cpt, unobserved = cpt_from_counts(
            scorer.count_shares[families[v]].reshape(-1, d).astype(float)
        )
        flags = np.zeros(cpt.shape, dtype=np.uint64)
        flags[list(unobserved), :] = 1
        if disclosure == "public":
            _record_cpt(scorer, view, v, cpt, unobserved, "own data (Yang-Wright 7.1, case 1)")
            outgoing += [cpt.ravel().view(np.uint64), flags.ravel()]
        else:
            fixed = np.round(cpt.ravel() * (1 << PARAM_FRAC)).astype(np.uint64)
            rng = ring.RandomRing()
            peer_theta, peer_flags = rng.uint64(fixed.size), rng.uint64(fixed.size) & np.uint64(1)
            view.shares[v] = {
                "theta": [int(x) for x in fixed - peer_theta],
                "unobserved": [int(x) for x in flags.ravel() ^ peer_flags],
            }
            outgoing += [peer_theta, peer_flags]
    if mine:
        channel.send_array("params.local", np.concatenate(outgoing))
    if not theirs:
        return
    received = channel.recv_array("params.local", np.uint64, (2 * sum(cells[v] for v in theirs),))
    offset = 0
    for v in theirs:
        d, size = schema.cardinality(v), cells[v]
        values, flags = (
            received[offset : offset + size],
            received[offset + size : offset + 2 * size],
        )
        offset += 2 * size
        if np.any(flags > 1):
            raise ProtocolError(f"params.local: flags of {v!r} are not bits")
        if disclosure == "shared":
            view.shares[v] = {
                "theta": [int(x) for x in values],
                "unobserved": [int(x) for x in flags],
            }
            continue
        cpt = values.view(np.float64).reshape(-1, d)
        if (
            not np.all(np.isfinite(cpt))
            or np.any(cpt < 0)
            or np.any(np.abs(cpt.sum(axis=1) - 1) > 1e-9)
        ):
            raise ProtocolError(
                f"params.local: the peer's CPT of {v!r} is not a conditional distribution"
            )
        unobserved = np.flatnonzero(flags.reshape(-1, d)[:, 0])
        _record_cpt(
            scorer,
            view,
            v,
            cpt.copy(),
            unobserved,
            "announced by its owner (Yang-Wright 7.1, case 1)",
        )


def secure_parameters(
    scorer: SecureScorer, parents: dict[str, tuple[str, ...]], disclosure: str
) -> SecureParameters:
    """alpha_ijk / alpha_ij for the learned structure (Yang-Wright Sec. 7.1, Fig. 4), from
    the table shares the search already holds (Sec. 8.1).

    Case 1 (one party holds the whole family) is computed locally by that party. Cases 2
    (one party holds all parents) and 3 (the general case) both use the garbled division:
    the paper's shortcut for case 2 would let the parents' owner learn the counts
    alpha_ijk in the clear (derivable from the public CPT and its own alpha_ij, but not
    under the owner and shared disclosure modes, and not an output in the ledger's
    sense); the division costs about (PARAM_FRAC + 1) count_bits AND gates per cell
    (``builders.fraction``). One division run per group of variables with the same number
    of states and the same owner."""
    if disclosure not in DISCLOSURES:
        raise ValueError(f"disclosure must be one of {DISCLOSURES}")
    started = time.perf_counter()
    schema, role = scorer.schema, scorer.role
    families = {v: (*parents[v], v) for v in schema.names}
    scorer.table_shares(list(families.values()))
    view = SecureParameters({}, {}, {})
    _local_parameters(scorer, families, disclosure, view)
    groups: dict[tuple[int, str], list[str]] = {}
    for v in schema.names:
        if local_owner(schema, families[v]) is None:
            groups.setdefault((schema.cardinality(v), schema.owner(v)), []).append(v)
    scorer.phase("parameters")
    suffix = "a" if role == GARBLER else "b"
    for (d, owner), variables in sorted(groups.items()):
        cells = [scorer.count_shares[families[v]].reshape(-1, d) for v in variables]
        low = np.uint64((1 << scorer.count_bits) - 1)  # counts fit: shares mod 2^count_bits suffice
        numerators = np.concatenate([c.ravel() for c in cells]).astype(np.uint64) & low
        denominators = (
            np.concatenate([np.repeat(c.sum(axis=1, dtype=np.uint64), d) for c in cells]) & low
        )
        reveal = _reveal_for(disclosure, owner)
        out = scorer.yao.run(
            division_circuit(scorer.count_bits, d),
            garbler=role == GARBLER,
            inputs={f"n{suffix}": numerators, f"d{suffix}": denominators},
            outputs={"theta": reveal, "unobserved": reveal},
        )
        if "theta" not in out:
            continue  # owner mode, the peer's variables
        offsets = np.cumsum([0] + [c.size for c in cells])
        for i, v in enumerate(variables):
            theta = [int(x) for x in out["theta"][offsets[i] : offsets[i + 1]]]
            flags = [int(x) for x in out["unobserved"][offsets[i] : offsets[i + 1]]]
            if disclosure == "shared":
                view.shares[v] = {"theta": theta, "unobserved": flags}
                continue
            cpt = np.array(theta, dtype=float).reshape(-1, d) / (1 << PARAM_FRAC)
            unobserved = np.flatnonzero(np.array(flags).reshape(-1, d)[:, 0])
            _record_cpt(
                scorer,
                view,
                v,
                cpt,
                unobserved,
                "garbled division (Yang-Wright 7.1, cases 2 and 3)",
            )
    scorer.clock.add("parameters", started)
    return view


def family_record_counts(
    scorer: SecureScorer, parents: dict[str, tuple[str, ...]]
) -> dict[str, int]:
    """Open N_i = sum_jk alpha_ijk of each family of the learned network to both parties.

    Under available-case analysis a family counts only its complete records, so N_i may be
    below n; no earlier step reveals it (the CPTs are ratios, the decisions single bits).
    Each party sums its own shares of the family's table mod 2^64 and sends the sum: the
    two sums add up to N_i and, since each table share is the count plus (or minus) a mask
    that only its sum with the other share cancels, the pair reveals N_i and nothing else.
    Both parties record the values in their ledgers (kind ``family_records``)."""
    schema = scorer.schema
    families = {v: (*parents[v], v) for v in schema.names}
    tables = scorer.table_shares(list(families.values()))
    mine = [int(tables[families[v]].sum(dtype=np.uint64)) for v in schema.names]
    scorer.channel.send_u64s("family_records", mine)
    theirs = scorer.channel.recv_u64s("family_records", len(mine))
    counts = {}
    for v, a, b in zip(schema.names, mine, theirs, strict=True):
        total = (a + b) % (1 << 64)
        if total > scorer.n_records:
            raise ProtocolError(
                f"family_records: the count of {v!r}'s family exceeds the {scorer.n_records} records"
            )
        counts[v] = total
    scorer.ledger.record(
        "family_records",
        counts,
        "sum of the family's table shares, opened (available-case analysis)",
    )
    return counts
