"""``ppbn bench order``: how much K2's result depends on its node order.

Samples records from a bundled network, runs the plaintext K2 reference under the true
topological order and under ``--orders`` random orders, and hill climbing (no order)
once, all with the same score, parent limit and tau; reports each structure's structural
Hamming distance to the true network (``bn.model.structural_hamming_distance``: a
reversed edge counts once), its total score and wall time. The evidence a user needs to
choose a search when no causal order is known.
"""

from __future__ import annotations

import argparse
import json
import time

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TABU, DEFAULT_TAU, SCORE_MODES
from ppbn.commands.options import non_negative_int, positive_int
from ppbn.errors import UserError


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
    """The rows of the bench: K2 under the topological and random orders, then hc."""
    import numpy as np

    from ppbn.bn.k2 import CountsOracle
    from ppbn.bn.learn import joined_count_fn, learn_reference
    from ppbn.bn.model import structural_hamming_distance
    from ppbn.bn.networks import load_network, sample

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
            hc=None if search == "k2" else _hc(tabu),
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


def _hc(tabu: int):
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


def _bench_order(args: argparse.Namespace) -> int:
    from ppbn.bn.networks import NETWORKS

    if args.network not in NETWORKS:
        raise UserError(f"--network {args.network!r}: one of {', '.join(NETWORKS)}")
    if args.orders < 0 or args.records < 1 or args.max_parents < 0:
        raise UserError("--orders must be >= 0, --records >= 1 and --max-parents >= 0")
    result = order_sensitivity(
        args.network,
        args.records,
        args.orders,
        args.score,
        args.max_parents,
        args.seed,
        args.tau,
        args.tabu,
        args.ess,
    )
    if args.plot:
        plot(result, args.plot)
        result["plot"] = args.plot
    if args.format == "json":
        print(json.dumps(result, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"{args.network}, {args.records} records, seed {args.seed}, score {args.score}, "
        f"u={args.max_parents}, tau {args.tau:g}: SHD to the true network ({result['true_edges']} edges)"
    )
    for column, justify in (
        ("search", "left"),
        ("order", "left"),
        ("SHD", "right"),
        ("edges", "right"),
        ("total score", "right"),
        ("wall s", "right"),
    ):
        table.add_column(column, justify=justify)
    for r in result["runs"]:
        extra = f" ({r['moves']} moves)" if "moves" in r else ""
        table.add_row(
            r["search"],
            r["order"] + extra,
            str(r["shd"]),
            str(r["edges"]),
            f"{r['score']:.1f}",
            f"{r['wall_s']:.2f}",
        )
    Console().print(table)
    s = result["summary"]
    if s["k2_random_shd_min"] is not None:
        print(
            f"K2 random orders: SHD {s['k2_random_shd_min']}..{s['k2_random_shd_max']} (median "
            f"{s['k2_random_shd_median']:g}); topological {s['k2_topological_shd']}; hc {s['hc_shd']}"
        )
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser(
        "order",
        help="K2's dependence on the node order: SHD under the true and random orders, and hc",
        description="Sample --records from --network, learn with the plaintext K2 reference under "
        "the topological order and --orders random orders, and with hill climbing once; report "
        "each result's structural Hamming distance to the true network, total score and wall time.",
    )
    parser.add_argument("--network", required=True, help="a bundled network, e.g. alarm")
    parser.add_argument(
        "--records", type=positive_int, default=20000, help="records to sample (default 20000)"
    )
    parser.add_argument(
        "--orders", type=positive_int, default=10, help="random K2 orders (default 10)"
    )
    parser.add_argument(
        "--score", choices=SCORE_MODES, default="bic", help="score mode (default bic)"
    )
    parser.add_argument(
        "--max-parents", type=non_negative_int, default=3, help="parent limit (default 3)"
    )
    parser.add_argument(
        "--tau", type=float, default=DEFAULT_TAU, help=f"tolerance (default {DEFAULT_TAU:g})"
    )
    parser.add_argument(
        "--tabu",
        type=non_negative_int,
        default=DEFAULT_TABU,
        help=f"hc tabu length (default {DEFAULT_TABU})",
    )
    parser.add_argument(
        "--ess", type=float, default=DEFAULT_ESS, help=f"BDeu ess (default {DEFAULT_ESS:g})"
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=7, help="sampling and order seed (default 7)"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="also draw the SHD of each run (matplotlib)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_bench_order)
