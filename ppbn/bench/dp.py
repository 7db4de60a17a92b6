"""The ``bench dp`` engine: how useful the differentially private network is, against epsilon.

For each seed, ``records`` records of ``network`` are sampled (``ppbn datasets make``'s
sampler, the data set the secure job reads too); for each epsilon each method releases a
network, ``synthetic_records`` records are sampled from it (the project's forward
sampler, the same stream for every method), and the synthetic table is measured against
the real one (``ppbn.lab.dp_utility``): the average total variation distance of all
2-way marginals, of a sample of 3-way marginals, and the structural Hamming distance of
the network to the true one. The methods (``DP_METHODS``):

- ``ppbn``: the secure two-party DP learn job between two local daemons
  (``secure_release``), for the first ``secure_seeds`` seeds only (it is slow); its
  seconds and bytes are the job's own;
- ``twin``: the same mechanism run by a trusted curator in the clear (``ppbn.dp.reference``);
- ``privbayes``: DataSynthesizer's PrivBayes on the joined table (``ppbn.lab.privbayes_peer``)
  at the same epsilon as DataSynthesizer states it; ``privbayes-matched``: given
  epsilon / 1.5, which makes its synthetic records epsilon-DP under ppbn's neighbours (one
  record changed; see that module);
- ``exact``: the non-private K2 of the same score (what the secure job learns without DP),
  once per seed: the horizontal line of the plot.

With ``out`` the run keeps runs.csv (one row per run), report.json and tvd.png (median
2-way TVD against epsilon, log x axis) there.

    report = bench_dp(DpSettings("cancer", 300, epsilons=(1.0,), methods=("twin", "exact")))
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bench.constants import DP_METHODS
from ppbn.bench.pair_runs import LearnRun, run_learn
from ppbn.errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from ppbn.bn.model import BayesNet
    from ppbn.data.datasets import MadeDataset

PRIVBAYES = ("privbayes", "privbayes-matched")
FIGURES = ("tvd2", "tvd3", "shd", "seconds", "mb")
CSV_COLUMNS = ("epsilon", "seed", "method", "tvd2", "tvd3", "shd", "seconds", "bytes", "edges")
TABLE_HEADER = ("method", "runs", "2-way TVD", "3-way TVD", "SHD", "seconds", "MB")


@dataclass(frozen=True)
class DpSettings:
    """One ``bench dp`` run: ``seeds`` data sets of ``records`` records of ``network`` (the
    first seed ``seed``), each method of ``methods`` at each of ``epsilons`` (the exact
    network once per seed), ``synthetic_records`` (None: ``records``) sampled from each
    release; the secure job on the first ``secure_seeds`` seeds only."""

    network: str = "asia"
    records: int = 20000
    synthetic_records: int | None = None
    max_parents: int = 2
    score: str = "exact"
    epsilons: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
    seeds: int = 5
    seed: int = 7
    methods: tuple[str, ...] = DP_METHODS
    secure_seeds: int = 1

    @property
    def synthetic(self) -> int:
        return self.synthetic_records or self.records


def bench_dp(
    settings: DpSettings,
    progress: Callable[[str], None] | None = None,
    out: str | Path | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Every run (a line to ``progress`` as each slow one starts and as each ends) and the
    report; with ``out`` also its files there (a bad folder refused before any run)."""
    from ppbn.data.datasets import make_dataset
    from ppbn.data.outputs import check_output_dir

    unknown = [m for m in settings.methods if m not in DP_METHODS]
    if unknown or not settings.methods:
        raise UserError(f"methods are a comma list of {', '.join(DP_METHODS)} (got {unknown})")
    if out:
        check_output_dir(out, force=force)
    if set(PRIVBAYES) & set(settings.methods):
        from ppbn.lab.privbayes_peer import require_datasynthesizer

        require_datasynthesizer()
    tell = progress or (lambda text: None)
    runs: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="ppbn-bench-dp-"))
    try:
        for index in range(settings.seeds):
            seed = settings.seed + index
            folder = work / f"data-{seed}"
            made = make_dataset(settings.network, settings.records, seed, folder)
            if index == 0:
                _check_epsilons(settings, made)
            for method in settings.methods:
                if method == "ppbn" and index >= settings.secure_seeds:
                    continue
                for eps in settings.epsilons if method != "exact" else (None,):
                    at = "no DP" if eps is None else f"epsilon {eps:g}"
                    if method in ("ppbn", *PRIVBAYES):  # the slow ones
                        tell(f"  seed {seed}, {at}, {method}: running ...")
                    figures = _run_method(settings, method, made, folder, seed, eps or 0.0)
                    runs.append({"epsilon": eps, "seed": seed, "method": method, **figures})
                    tell(
                        f"  seed {seed}, {at}, {method}: 2-way TVD {figures['tvd2']:.4f}, "
                        f"SHD {figures['shd']}, {figures['seconds']:.1f} s"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = _report(settings, runs)
    if out:
        write_outputs(report, out, force)
    return report


def secure_release(data: Path, max_parents: int, score: str, epsilon: float) -> LearnRun:
    """The secure DP learn job between two local daemons on a data folder (schema.json,
    alice.csv, bob.csv), their PKI and outputs in a folder beside it."""
    from ppbn.pair.loopback import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki
    from ppbn.parties.tls import PARTY_ROLES
    from ppbn.protocols.constants import DEFAULT_TIMEOUT_S

    work = data.parent / f"secure-{data.name}-{epsilon:g}"
    make_local_pki(work / "certs", PARTY_ROLES)
    csvs = {r: data / f"{r}.csv" for r in PARTY_ROLES}
    files = PairFiles(data / "schema.json", csvs, work / "certs", work)
    params = {"max_parents": max_parents, "score": score, "dp_epsilon": epsilon}
    with LocalPair(files, DEFAULT_TIMEOUT_S) as pair:
        return run_learn(pair, params, failed=f"the secure DP job failed (epsilon {epsilon:g})")


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


def _run_method(
    settings: DpSettings, method: str, made: MadeDataset, folder: Path, seed: int, eps: float
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

        net = learn_reference(
            names, states, made.codes, settings.max_parents, settings.score
        ).network
    elif method == "twin":
        from ppbn.dp.reference import dp_learn
        from ppbn.protocols.fixedpoint import SCORE_FRAC

        rng = np.random.default_rng([seed, round(eps * 1e6)])
        net, _ = dp_learn(
            names,
            states,
            made.codes,
            eps,
            settings.max_parents,
            settings.score,
            rng=rng,
            score_frac=SCORE_FRAC,
        )
    elif method == "ppbn":
        from ppbn.lab.compare import network_from_json

        run = secure_release(folder, settings.max_parents, settings.score, eps)
        net, seconds = network_from_json(run.learned, made.schema), run.wall_s
        stats = [s for s in (run.outcome.stats, run.outcome.peer_stats) if s]
        sent = sum(int(s.get("bytes_sent", 0)) for s in stats)
    else:
        from ppbn.lab.privbayes_peer import matched_epsilon, privbayes_synthesize

        given = matched_epsilon(eps) if method == "privbayes-matched" else eps
        release = privbayes_synthesize(
            names, states, made.codes, given, settings.max_parents, settings.synthetic,
            synth_seed, folder.parent / f"{method}-{seed}-{eps:g}",
        )  # fmt: skip
        figures = _measure(made.codes, release.codes, cards, release.parents, truth, seed)
        return {**figures, "seconds": round(release.seconds, 3), "bytes": None}
    seconds = time.perf_counter() - started if seconds is None else seconds
    synth = sample(net, settings.synthetic, synth_seed)
    figures = _measure(made.codes, synth, cards, net.parents, truth, seed)
    return {**figures, "seconds": round(seconds, 3), "bytes": sent}


def _check_epsilons(settings: DpSettings, made: MadeDataset) -> None:
    """Refuse, before any run, an epsilon the DP job's plan cannot hold."""
    from ppbn.dp.accounting import plan
    from ppbn.protocols.fixedpoint import SCORE_FRAC

    cards = [v.cardinality for v in made.schema.variables]
    for eps in settings.epsilons:
        try:
            plan(
                eps,
                n_records=settings.records,
                cardinalities=cards,
                max_parents=settings.max_parents,
                mode=settings.score,
                score_frac=SCORE_FRAC,
            )
        except ValueError as exc:
            raise UserError(f"--epsilons {eps:g}: {exc}") from None


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


def _report(settings: DpSettings, runs: list[dict[str, Any]]) -> dict[str, Any]:
    exact = [r for r in runs if r["method"] == "exact"]
    by_epsilon = {
        f"{eps:g}": {
            m: _summary([r for r in runs if r["method"] == m and r["epsilon"] == eps])
            for m in settings.methods
            if m != "exact" and any(r["method"] == m and r["epsilon"] == eps for r in runs)
        }
        for eps in settings.epsilons
    }
    return {
        "network": settings.network,
        "records": settings.records,
        "synthetic_records": settings.synthetic,
        "max_parents": settings.max_parents,
        "score": settings.score,
        "epsilons": list(settings.epsilons),
        "seeds": [settings.seed + i for i in range(settings.seeds)],
        "secure_seeds": min(settings.secure_seeds, settings.seeds)
        if "ppbn" in settings.methods
        else 0,
        "methods": list(settings.methods),
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


def dp_rows(report: dict[str, Any]) -> dict[str, list[tuple[str, ...]]]:
    """The tables for people, one per epsilon (columns ``TABLE_HEADER``): each method's
    median (IQR) over seeds, and the exact network's last."""
    tables = {}
    for eps, summaries in report["by_epsilon"].items():
        rows = _rows(summaries)
        if report["exact"]:
            rows.append(_rows({"exact": report["exact"]})[0])
        tables[eps] = rows
    return tables


def plot_png(report: dict[str, Any]) -> bytes:
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


def write_outputs(report: dict[str, Any], out: str | Path, force: bool = False) -> None:
    """runs.csv, report.json and tvd.png in ``out``, written aside and renamed into place."""
    import csv
    import io
    import json

    from ppbn.data.outputs import atomic_output_dir

    table = io.StringIO()
    writer = csv.DictWriter(table, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(report["runs"])
    with atomic_output_dir(out, force=force) as folder:
        (folder / "runs.csv").write_text(table.getvalue(), encoding="utf-8")
        (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        (folder / "tvd.png").write_bytes(plot_png(report))
