"""``bench order``'s engine: how much K2's result depends on its node order.

It samples records from a bundled network, runs the plaintext K2 reference under the true
topological order and under ``orders`` random orders, and hill climbing (no order) once,
all with the same score, parent limit and tau; it reports each structure's structural
Hamming distance to the true network (``bn.model.structural_hamming_distance``: a
reversed edge counts once), its total score and wall time. The evidence a user needs to
choose a search when no causal order is known.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TABU, DEFAULT_TAU
from ppbn.errors import UserError

if TYPE_CHECKING:
    from ppbn.bn.learn import HCOptions


def order_sensitivity(
    network: str,
    records: int,
    orders: int,
    score: str = "bic",
    max_parents: int = 3,
    seed: int = 7,
    tau: float = DEFAULT_TAU,
    tabu: int = DEFAULT_TABU,
    ess: float = DEFAULT_ESS,
) -> dict:
    """The rows of the bench (K2 under the topological and random orders, then hc) and a
    summary of their SHDs: the report ``--format json`` prints."""
    import numpy as np

    from ppbn.bn.k2 import CountsOracle
    from ppbn.bn.learn import joined_count_fn, learn_reference
    from ppbn.bn.model import structural_hamming_distance
    from ppbn.bn.networks import NETWORKS, load_network, sample

    if network not in NETWORKS:
        raise UserError(f"--network {network!r}: one of {', '.join(NETWORKS)}")
    if orders < 0 or records < 1 or max_parents < 0:
        raise UserError("--orders must be >= 0, --records >= 1 and --max-parents >= 0")
    net = load_network(network)
    codes = sample(net, records, seed)
    truth = {v: tuple(net.parents[v]) for v in net.names}
    judge = CountsOracle(
        joined_count_fn(net.names, net.states, codes), score, n_records=records, ess=ess
    )
    rng = np.random.default_rng(seed + 1)
    runs: list[tuple[str, str, tuple[str, ...] | None]] = [
        ("k2", "topological", tuple(net.topological_order()))
    ]
    runs += [
        ("k2", f"random {i + 1}", tuple(rng.permutation(np.array(net.names, dtype=object))))
        for i in range(orders)
    ]
    runs.append(("hc", "none (empty start)", None))
    rows = []
    for search, label, order in runs:
        start = time.perf_counter()
        learned = learn_reference(
            net.names,
            net.states,
            codes,
            max_parents,
            score,
            tau,
            order,
            search=search,
            ess=ess,
            hc=None if search == "k2" else hc_options(tabu),
        )
        wall = time.perf_counter() - start
        parents = learned.search.parents
        rows.append(
            {
                "search": search,
                "order": label,
                "shd": structural_hamming_distance(parents, truth),
                "edges": sum(len(ps) for ps in parents.values()),
                "score": sum(judge.score(v, tuple(parents[v])) for v in net.names),
                "wall_s": wall,
                **({"moves": len(learned.search.moves)} if search == "hc" else {}),
            }
        )
    k2_random = [r["shd"] for r in rows if r["search"] == "k2" and r["order"].startswith("random")]
    return {
        "network": network,
        "records": records,
        "seed": seed,
        "score": score,
        "max_parents": max_parents,
        "tau": tau,
        "tabu": tabu,
        **({"ess": ess} if score == "bdeu" else {}),
        "true_edges": sum(len(ps) for ps in truth.values()),
        "runs": rows,
        "summary": {
            "k2_topological_shd": rows[0]["shd"],
            "k2_random_shd_min": min(k2_random, default=None),
            "k2_random_shd_median": float(np.median(k2_random)) if k2_random else None,
            "k2_random_shd_max": max(k2_random, default=None),
            "hc_shd": rows[-1]["shd"],
        },
    }


def hc_options(tabu: int) -> HCOptions:
    """Hill climbing's options with this tabu length."""
    from ppbn.bn.learn import HCOptions

    return HCOptions(tabu_length=tabu)


def plot(result: dict, path: str) -> None:
    """Bar chart of SHD per run (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    labels = [
        ("hc" if r["search"] == "hc" else "K2 " + r["order"].replace("random ", "r")) for r in runs
    ]
    colors = [
        "tab:green"
        if r["search"] == "hc"
        else ("tab:blue" if r["order"] == "topological" else "tab:gray")
        for r in runs
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(runs)), 3.6))
    ax.bar(range(len(runs)), [r["shd"] for r in runs], color=colors)
    ax.set_xticks(range(len(runs)), labels, rotation=45, ha="right")
    ax.set_ylabel("SHD to the true network")
    ax.set_title(
        f"{result['network']}, {result['records']} records, {result['score']}, u={result['max_parents']}: "
        f"K2 order sensitivity vs hill climbing"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
