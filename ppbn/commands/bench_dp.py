"""``ppbn bench dp``: how useful the differentially private network is, against epsilon.

For each seed, ``--records`` records of ``--network`` are sampled (``ppbn datasets
make``'s sampler, the data set the secure job reads too); for each epsilon each method
releases a network, ``--synthetic-records`` records are sampled from it (the project's
forward sampler, the same stream for every method), and the synthetic table is measured
against the real one (``ppbn.lab.dp_utility``): the average total variation distance of
all 2-way marginals, of a sample of 3-way marginals, and the structural Hamming distance
of the network to the true one. The methods:

- ``ppbn``: the secure two-party DP learn job (``ppbn.api.simulate`` with ``dp_epsilon``),
  for the first ``--secure-seeds`` seeds only (it is slow); its seconds and bytes are the
  job's own;
- ``twin``: the same mechanism run by a trusted curator in the clear (``ppbn.dp.reference``);
- ``privbayes``: DataSynthesizer's PrivBayes on the joined table (``ppbn.lab.privbayes_peer``)
  at the same epsilon as DataSynthesizer states it; ``privbayes-matched``: given
  epsilon / 1.5, which makes its synthetic records epsilon-DP under ppbn's neighbours (one
  record changed; see that module);
- ``exact``: the non-private K2 of the same score (what the secure job learns without DP),
  once per seed: the horizontal line of the plot.

``--out DIR`` keeps runs.csv (one row per run), report.json and tvd.png (median 2-way TVD
against epsilon, log x axis).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bn.networks import NETWORKS
from ppbn.commands.options import non_negative_int, positive_int
from ppbn.dp.constants import DP_SCORES
from ppbn.errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from ppbn.bn.model import BayesNet
    from ppbn.data.datasets import MadeDataset

METHODS = ("ppbn", "twin", "privbayes", "privbayes-matched", "exact")
PRIVBAYES = ("privbayes", "privbayes-matched")
FIGURES = ("tvd2", "tvd3", "shd", "seconds", "mb")
CSV_COLUMNS = ("epsilon", "seed", "method", "tvd2", "tvd3", "shd", "seconds", "bytes", "edges")


def epsilon_list(text: str) -> tuple[float, ...]:
    """``--epsilons``: a comma list of distinct positive numbers, in ascending order."""
    try:
        values = [float(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a comma list of numbers (got {text!r})"
        ) from None
    if not values or not all(v > 0 and v < float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"every epsilon must be a positive number (got {text!r})")
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"an epsilon appears twice (got {text!r})")
    return tuple(sorted(values))


def method_list(text: str) -> tuple[str, ...]:
    """``--methods``: a comma list of ``METHODS``, each once, kept in ``METHODS`` order."""
    chosen = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [m for m in chosen if m not in METHODS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(
            f"methods are a comma list of {', '.join(METHODS)} (got {text!r})"
        )
    return tuple(m for m in METHODS if m in chosen)


def _measure(
    real: np.ndarray, synth: np.ndarray, cards: list[int], parents: dict, truth: BayesNet, seed: int
) -> dict[str, Any]:
    import numpy as np

    from ppbn.lab.dp_utility import structural_hamming_distance, tvd_2way, tvd_3way

    return {
        "tvd2": round(tvd_2way(real, synth, cards), 6),
        "tvd3": round(tvd_3way(real, synth, cards, rng=np.random.default_rng(seed)), 6),
        "shd": structural_hamming_distance(parents, truth.parents),
        "edges": sum(len(ps) for ps in parents.values()),
    }


def _secure(args: argparse.Namespace, folder: Path, seed: int, epsilon: float, made: MadeDataset):
    """The secure DP job on the seed's data set: its network, seconds and bytes."""
    from ppbn.api.simulate import simulate
    from ppbn.lab.compare import network_from_json

    sim = simulate(
        data=folder,
        seed=seed,
        max_parents=args.max_parents,
        score=args.score,
        dp_epsilon=epsilon,
        check_reference=False,
    )
    if not sim.succeeded or sim.network is None:
        raise UserError(f"the secure DP job failed (epsilon {epsilon:g}): {sim.outcome.error}")
    stats = [s for s in (sim.outcome.stats, sim.outcome.peer_stats) if s]
    sent = sum(int(s.get("bytes_sent", 0)) for s in stats)
    return network_from_json(sim.network.document, made.schema), sim.timings["job_s"], sent


def _run_method(
    args: argparse.Namespace, method: str, made: MadeDataset, folder: Path, seed: int, eps: float
) -> dict[str, Any]:
    """One method's release at ``eps`` on the seed's data, measured."""
    import numpy as np

    from ppbn.bn.networks import sample

    names, truth = made.schema.names, made.truth
    states = {v.name: v.states for v in made.schema.variables}
    cards = [len(states[v]) for v in names]
    synth_seed = 10_000 + seed  # the same synthetic stream for every method
    sent: int | None = None
    seconds: float | None = None  # the secure job's own; else the call's
    started = time.perf_counter()
    if method == "exact":
        from ppbn.bn.learn import learn_reference

        net = learn_reference(names, states, made.codes, args.max_parents, args.score).network
    elif method == "twin":
        from ppbn.dp.reference import dp_learn
        from ppbn.protocols.fixedpoint import SCORE_FRAC

        rng = np.random.default_rng([seed, round(eps * 1e6)])
        net, _ = dp_learn(
            names,
            states,
            made.codes,
            eps,
            args.max_parents,
            args.score,
            rng=rng,
            score_frac=SCORE_FRAC,
        )
    elif method == "ppbn":
        net, seconds, sent = _secure(args, folder, seed, eps, made)
    else:
        from ppbn.lab.privbayes_peer import matched_epsilon, privbayes_synthesize

        given = matched_epsilon(eps) if method == "privbayes-matched" else eps
        run = privbayes_synthesize(
            names, states, made.codes, given, args.max_parents, args.synthetic_records,
            synth_seed, folder.parent / f"{method}-{seed}-{eps:g}",
        )  # fmt: skip
        figures = _measure(made.codes, run.codes, cards, run.parents, truth, seed)
        return {**figures, "seconds": round(run.seconds, 3), "bytes": None}
    seconds = time.perf_counter() - started if seconds is None else seconds
    synth = sample(net, args.synthetic_records, synth_seed)
    figures = _measure(made.codes, synth, cards, net.parents, truth, seed)
    return {**figures, "seconds": round(seconds, 3), "bytes": sent}


def _check_epsilons(args: argparse.Namespace, made: MadeDataset) -> None:
    """Refuse, before any run, an epsilon the DP job's plan cannot hold."""
    from ppbn.dp.accounting import plan
    from ppbn.protocols.fixedpoint import SCORE_FRAC

    cards = [v.cardinality for v in made.schema.variables]
    for eps in args.epsilons:
        try:
            plan(
                eps,
                n_records=args.records,
                cardinalities=cards,
                max_parents=args.max_parents,
                mode=args.score,
                score_frac=SCORE_FRAC,
            )
        except ValueError as exc:
            raise UserError(f"--epsilons {eps:g}: {exc}") from None


def _bench_dp(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from ppbn.data.datasets import make_dataset
    from ppbn.data.outputs import check_output_dir

    if args.out:
        check_output_dir(args.out, force=args.force)
    if set(PRIVBAYES) & set(args.methods):
        from ppbn.lab.privbayes_peer import require_datasynthesizer

        require_datasynthesizer()
    args.synthetic_records = args.synthetic_records or args.records
    quiet = args.format == "json"
    runs: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-dp-"))
    try:
        for index in range(args.seeds):
            seed = args.seed + index
            folder = work / f"data-{seed}"
            made = make_dataset(args.network, args.records, seed, folder)
            if index == 0:
                _check_epsilons(args, made)
            for method in args.methods:
                if method == "ppbn" and index >= args.secure_seeds:
                    continue
                for eps in args.epsilons if method != "exact" else (None,):
                    at = "no DP" if eps is None else f"epsilon {eps:g}"
                    if not quiet and method in ("ppbn", *PRIVBAYES):  # the slow ones
                        print(f"  seed {seed}, {at}, {method}: running ...", flush=True)
                    figures = _run_method(args, method, made, folder, seed, eps or 0.0)
                    runs.append({"epsilon": eps, "seed": seed, "method": method, **figures})
                    if not quiet:
                        print(
                            f"  seed {seed}, {at}, {method}: 2-way TVD {figures['tvd2']:.4f}, "
                            f"SHD {figures['shd']}, {figures['seconds']:.1f} s",
                            flush=True,
                        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = _report(args, runs)
    if args.out:
        _write(args, report)
    _print(report, args.format)
    return 0


def _spread(values: list[float]) -> dict[str, float] | None:
    """Median and interquartile range."""
    import numpy as np

    if not values:
        return None
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3)}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": len(runs)}
    for key in FIGURES:
        if key == "mb":
            values = [r["bytes"] / 1e6 for r in runs if r["bytes"] is not None]
        else:
            values = [r[key] for r in runs]
        out[key] = _spread(values)
    return out


def _report(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    exact = [r for r in runs if r["method"] == "exact"]
    by_epsilon = {
        f"{eps:g}": {
            m: _summary([r for r in runs if r["method"] == m and r["epsilon"] == eps])
            for m in args.methods
            if m != "exact" and any(r["method"] == m and r["epsilon"] == eps for r in runs)
        }
        for eps in args.epsilons
    }
    return {
        "network": args.network,
        "records": args.records,
        "synthetic_records": args.synthetic_records,
        "max_parents": args.max_parents,
        "score": args.score,
        "epsilons": list(args.epsilons),
        "seeds": [args.seed + i for i in range(args.seeds)],
        "secure_seeds": min(args.secure_seeds, args.seeds) if "ppbn" in args.methods else 0,
        "methods": list(args.methods),
        "exact": _summary(exact) if exact else None,
        "by_epsilon": by_epsilon,
        "runs": runs,
    }


def _cell(spread: dict[str, float] | None, digits: int) -> str:
    """The median and, in brackets, the interquartile range's width."""
    if spread is None:
        return "-"
    return f"{spread['median']:.{digits}f} ({spread['q3'] - spread['q1']:.{digits}f})"


def _rows(summaries: dict[str, dict[str, Any]]) -> list[tuple[str, ...]]:
    return [
        (
            method,
            str(s["runs"]),
            _cell(s["tvd2"], 3),
            _cell(s["tvd3"], 3),
            _cell(s["shd"], 1),
            _cell(s["seconds"], 2),
            _cell(s["mb"], 1),
        )
        for method, s in summaries.items()
    ]


def _print(report: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        import json

        print(json.dumps(report, indent=2))
        return
    from ppbn.commands.tables import print_table

    header = ("method", "runs", "2-way TVD", "3-way TVD", "SHD", "seconds", "MB")
    print(
        f"ppbn bench dp: {report['network']}, {report['records']:,} records, "
        f"u = {report['max_parents']}, {report['score']}; median (IQR) over seeds"
    )
    for eps, summaries in report["by_epsilon"].items():
        rows = _rows(summaries)
        if report["exact"]:
            rows.append(_rows({"exact": report["exact"]})[0])
        print_table(f"epsilon {eps}", rows, header)
    if report["exact"]:
        print(
            "exact: the non-private network (the secure job's without DP), the same at every epsilon"
        )
    if "privbayes" in report["methods"]:
        print(
            "privbayes: DataSynthesizer at the epsilon it is given; under ppbn's neighbours "
            "(one record changed) its synthetic records are 1.5 epsilon-DP"
        )
    if "privbayes-matched" in report["methods"]:
        print("privbayes-matched: given epsilon / 1.5, so its synthetic records are epsilon-DP")


def _plot_png(report: dict[str, Any]) -> bytes:
    """Median 2-way TVD against epsilon (log x), one line per DP method, and the exact
    network's median as a horizontal line."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    for method in report["methods"]:
        points = [
            (float(eps), s[method]["tvd2"]["median"])
            for eps, s in report["by_epsilon"].items()
            if method in s
        ]
        runs = max(
            (s[method]["runs"] for s in report["by_epsilon"].values() if method in s), default=0
        )
        if points:  # the secure job often runs on fewer seeds: the legend says how many
            label = f"{method} ({runs} seed{'s' if runs != 1 else ''})"
            ax.plot(*zip(*points, strict=True), marker="o", label=label)
    if report["exact"]:
        level = report["exact"]["tvd2"]["median"]
        ax.axhline(level, color="grey", linestyle="--", label="exact (secure, no DP)")
    ax.set_xscale("log")
    ax.set_xticks([float(e) for e in report["by_epsilon"]], list(report["by_epsilon"]))
    ax.minorticks_off()
    ax.set_xlabel("epsilon")
    ax.set_ylabel("median 2-way TVD")
    ax.set_title(f"{report['network']}, {report['records']:,} records, u = {report['max_parents']}")
    ax.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


def _write(args: argparse.Namespace, report: dict[str, Any]) -> None:
    import csv
    import io
    import json

    from ppbn.data.outputs import atomic_output_dir

    table = io.StringIO()
    writer = csv.DictWriter(table, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(report["runs"])
    with atomic_output_dir(args.out, force=args.force) as folder:
        (folder / "runs.csv").write_text(table.getvalue(), encoding="utf-8")
        (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        (folder / "tvd.png").write_bytes(_plot_png(report))


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    dp = bench.add_parser(
        "dp",
        help="utility of the differentially private network against epsilon, with PrivBayes",
        description="For each seed and epsilon, release a network with each method (the "
        "secure DP job, its trusted-curator twin, DataSynthesizer's PrivBayes, and the "
        "exact non-private network), sample synthetic records from it, and measure them "
        "against the real records: 2-way and 3-way marginal TVD, SHD to the true network, "
        "seconds, and the secure job's bytes. A measurement, never a test.",
    )
    dp.add_argument(
        "--network", default="asia", help=f"one of: {', '.join(NETWORKS)} (default asia)"
    )
    dp.add_argument(
        "--records", type=positive_int, default=20000, help="records sampled (default 20000)"
    )
    dp.add_argument(
        "--synthetic-records",
        type=positive_int,
        help="records sampled from each released network (default: --records)",
    )
    dp.add_argument(
        "--max-parents", type=non_negative_int, default=2, help="parent limit u (default 2)"
    )
    dp.add_argument("--score", choices=DP_SCORES, default="exact")
    dp.add_argument(
        "--epsilons",
        type=epsilon_list,
        default="0.1,0.2,0.5,1,2,5",
        metavar="E,E,...",
        help="privacy budgets of the whole release, a comma list (default 0.1,0.2,0.5,1,2,5)",
    )
    dp.add_argument("--seeds", type=positive_int, default=5, help="data sets (default 5)")
    dp.add_argument("--seed", type=non_negative_int, default=7, help="the first seed (default 7)")
    dp.add_argument(
        "--methods",
        type=method_list,
        default=",".join(METHODS),
        metavar="M,M,...",
        help=f"a comma list of {', '.join(METHODS)} (default all)",
    )
    dp.add_argument(
        "--secure-seeds",
        type=non_negative_int,
        default=1,
        help="how many of the seeds run the real two-party secure job (default 1)",
    )
    dp.add_argument("--out", metavar="DIR", help="write runs.csv, report.json and tvd.png")
    dp.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    dp.add_argument("--format", choices=("table", "json"), default="table")
    dp.set_defaults(func=_bench_dp)
