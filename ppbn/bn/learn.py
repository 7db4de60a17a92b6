"""The non-private reference learner: K2 (or hill climbing) with the plaintext
oracle, then parameters.

Every secure and randomized result is compared with this one (same score mode, tau and
node order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppbn.bn.hc import DEFAULT_TABU, Edge, HCResult, hill_climb
from ppbn.bn.k2 import DEFAULT_TAU, CountsOracle, K2Result, count_table, k2_search
from ppbn.bn.model import BayesNet
from ppbn.bn.params import estimate_parameters
from ppbn.bn.scores import DEFAULT_ESS


@dataclass
class HCOptions:
    """Hill-climbing settings (``bn.hc.hill_climb``); edges are (parent, child)."""

    tabu_length: int = DEFAULT_TABU
    start: list[Edge] | None = None
    black_list: list[Edge] | None = None
    white_list: list[Edge] | None = None
    fixed_edges: list[Edge] | None = None

    def forced_parents(self) -> int:
        """The most parents the start graph and the fixed edges give one child: the search
        scores those families whatever its parent limit (black-listed start edges are
        dropped before the search, so this bounds it from above)."""
        parents: dict[str, set[str]] = {}
        for p, c in [*(self.start or ()), *(self.fixed_edges or ())]:
            parents.setdefault(c, set()).add(p)
        return max((len(ps) for ps in parents.values()), default=0)


@dataclass
class LearnedNetwork:
    search: K2Result | HCResult
    network: BayesNet
    oracle: CountsOracle

    def family_records(self) -> dict[str, int]:
        """Records each family was counted on (under available-case analysis, its complete
        records): what the secure learn job reports under ``family_records``."""
        count = self.oracle.count_fn
        return {v: int(count((*ps, v)).sum()) for v, ps in self.search.parents.items()}

    def same_moves(self, moves: list[dict]) -> bool | None:
        """Whether hill-climbing ``moves`` (as a network.json lists them: kind and edge)
        are this search's moves in the same order; None for K2, which makes none."""
        if not isinstance(self.search, HCResult):
            return None
        ours = [(m["kind"], tuple(m["edge"])) for m in moves]
        return ours == [(m.move.kind, m.move.edge) for m in self.search.moves]


def joined_count_fn(
    names: Sequence[str], states: Mapping[str, tuple[str, ...]], codes: np.ndarray
) -> Callable[[tuple[str, ...]], np.ndarray]:
    """count_fn over joined plaintext data (columns of ``codes`` in ``names`` order); a
    negative code is a missing cell, left out under the available-case rule (``count_table``)."""
    column = {n: i for i, n in enumerate(names)}

    def count(variables: tuple[str, ...]) -> np.ndarray:
        return count_table(
            codes, [column[v] for v in variables], [len(states[v]) for v in variables]
        )

    return count


def learn_reference(
    names: Sequence[str],
    states: Mapping[str, tuple[str, ...]],
    codes: np.ndarray,
    max_parents: int,
    mode: str,
    tau: float = DEFAULT_TAU,
    order: Sequence[str] | None = None,
    c_star: float = 1.0,
    pseudo_count: float = 0.0,
    progress: Callable[[int, int, str], None] | None = None,
    available_case: bool | None = None,
    search: str = "k2",
    ess: float = DEFAULT_ESS,
    hc: HCOptions | None = None,
) -> LearnedNetwork:
    """K2 (``search="k2"``, under ``order``) or hill climbing (``"hc"``, settings ``hc``;
    ``order`` is ignored) then ML (or Dirichlet) parameters on the joined data.
    ``available_case`` (default: whenever ``codes`` holds missing cells, coded negative)
    compares K2 candidates in paired mode (``CountsOracle.paired``), as the secure path does
    under --missing available-case; hill climbing scores each family on its own complete
    records."""
    count = joined_count_fn(names, states, codes)
    if available_case is None:
        available_case = bool(np.any(codes < 0))
    oracle = CountsOracle(
        count, mode, c_star, n_records=int(codes.shape[0]), paired=available_case, ess=ess
    )
    found = run_search(search, names, oracle, max_parents, tau, order, hc, progress)
    net = estimate_parameters(tuple(names), states, found.parents, count, pseudo_count)
    return LearnedNetwork(found, net, oracle)


def run_search(
    search: str,
    names: Sequence[str],
    oracle: CountsOracle,
    max_parents: int,
    tau: float,
    order: Sequence[str] | None = None,
    hc: HCOptions | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> K2Result | HCResult:
    """K2 under ``order`` (default ``names``) or hill climbing with ``hc`` over a plaintext
    oracle: the one dispatch of the reference and PRAM learners."""
    if search == "k2":
        return k2_search(tuple(order or names), max_parents, oracle, tau, progress)
    if search == "hc":
        opts = hc or HCOptions()
        return hill_climb(
            tuple(names),
            oracle,
            max_parents,
            tau,
            opts.tabu_length,
            opts.start,
            opts.black_list,
            opts.white_list,
            opts.fixed_edges,
            progress=progress,
        )
    raise ValueError(f"unknown search {search!r}; choose k2 or hc")


def reference_document(
    network: BayesNet,
    learned: LearnedNetwork,
    order: Sequence[str],
    owners: Mapping[str, str],
    *,
    score: str,
    tau: float,
    search: str,
    ess: float,
    tabu: int,
    rule: str,
    wall_s: float,
) -> dict[str, Any]:
    """What ``ppbn reference`` prints and writes as network.json: the network document
    (``network`` is ``learned.network`` with the state names to show), the search's moves
    under hill climbing, and the records each family was counted on under ``rule``."""
    from ppbn.bn.io import network_json

    found = learned.search
    result = network_json(network, tuple(order), found.edges, score, tau, owners)
    result["search"] = search
    if score == "bdeu":
        result["ess"] = ess
    if isinstance(found, HCResult):
        result["moves"] = [
            {"kind": m.move.kind, "edge": list(m.move.edge), "delta": m.delta} for m in found.moves
        ]
        result["total_score"] = found.score
        result["tabu"] = tabu
        result["start"] = [[p, c] for c in network.names for p in found.start[c]]
        result["families_scored"] = found.families_scored
    records = int(learned.oracle.n_records or 0)
    result["stats"] = {"wall_s": wall_s, "records": records}
    result["family_records"] = {
        "rule": rule,
        "records": records,
        "families": learned.family_records(),
    }
    return result


def reference_text(result: Mapping[str, Any]) -> str:
    """``reference_document`` for a person: the search's edges or moves, then each CPT's
    size (small ones in full) and, under available-case, the records per family."""
    lines = [f"score {result['score']}, tau {result['tau']:g}, search {result.get('search', 'k2')}"]
    if result.get("search", "k2") == "k2":
        lines.append("order: " + ", ".join(result["order"]))
        lines.append("edges in the order added:")
        lines += [f"  {i + 1:3d}. {p} -> {c}" for i, (p, c) in enumerate(result["edges"])] or [
            "  (none)"
        ]
    else:
        lines.append(f"moves in the order applied (total score {result['total_score']:.4f}):")
        lines += [
            f"  {i + 1:3d}. {m['kind']:7s} {m['edge'][0]} -> {m['edge'][1]}  {m['delta']:+.4f}"
            for i, m in enumerate(result["moves"])
        ] or ["  (none)"]
        lines.append(f"edges: {len(result['edges'])}")
    lines.append("parameters:")
    for v, spec in result["parameters"].items():
        given = f" | {', '.join(spec['parents'])}" if spec["parents"] else ""
        flag = (
            f"  [{len(spec['unobserved'])} unobserved parent configurations: uniform]"
            if spec["unobserved"]
            else ""
        )
        lines.append(f"  P({v}{given}): {len(spec['table'])} x {len(spec['states'])}{flag}")
        if len(spec["table"]) <= 4:
            lines += ["      " + "  ".join(f"{p:.4f}" for p in row) for row in spec["table"]]
    records = result.get("family_records")
    if records and records["rule"] == "available-case":
        lines.append(f"records per family (available-case, of {records['records']}):")
        lines += [f"  {v}: {k}" for v, k in records["families"].items()]
    return "\n".join(lines)
