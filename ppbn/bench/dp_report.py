"""``bench dp``'s report (median and interquartile range over seeds), its tables for people,
its plot and the files of ``--out``: runs.csv (one row per run, a network column),
report.json, and tvd.png (tvd-NETWORK.png each when several networks ran)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIGURES = ("tvd2", "tvd3", "shd", "accuracy", "seconds", "mb")
CSV_COLUMNS = (
    "network", "epsilon", "seed", "method", "tvd2", "tvd3", "shd", "accuracy", "seconds",
    "bytes", "edges",
)  # fmt: skip
TABLE_HEADER = (
    "method", "runs", "2-way TVD", "3-way TVD", "SHD", "accuracy", "seconds", "MB",
)  # fmt: skip


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
            values = [r[key] for r in runs if r[key] is not None]
        out[key] = _spread(values)
    return out


def dp_report(
    header: dict[str, Any], runs: list[dict[str, Any]], real: list[float]
) -> dict[str, Any]:
    """One network's report: its ``header`` (the settings, with ``methods`` and
    ``epsilons``), each method's summary per epsilon, the exact network's, and the
    classifier's accuracy on the ``real`` records."""
    exact = [r for r in runs if r["method"] == "exact"]
    by_epsilon = {
        f"{eps:g}": {
            m: _summary([r for r in runs if r["method"] == m and r["epsilon"] == eps])
            for m in header["methods"]
            if m != "exact" and any(r["method"] == m and r["epsilon"] == eps for r in runs)
        }
        for eps in header["epsilons"]
    }
    return {
        **header,
        "real": {"runs": len(real), "accuracy": _spread(real)},
        "exact": _summary(exact) if exact else None,
        "by_epsilon": by_epsilon,
        "runs": runs,
    }


def matrix_report(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several networks' reports, keyed by network."""
    return {
        "networks": [r["network"] for r in reports],
        "by_network": {r["network"]: r for r in reports},
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
            _cell(s.get("tvd2"), 3),
            _cell(s.get("tvd3"), 3),
            _cell(s.get("shd"), 1),
            _cell(s["accuracy"], 3),
            _cell(s.get("seconds"), 2),
            _cell(s.get("mb"), 1),
        )
        for method, s in summaries.items()
    ]


def dp_rows(report: dict[str, Any]) -> dict[str, list[tuple[str, ...]]]:
    """The tables for people, one per epsilon (columns ``TABLE_HEADER``): each method's
    median (IQR) over seeds, then the exact network's, then the classifier trained on the
    real records (its accuracy only)."""
    tables = {}
    for eps, summaries in report["by_epsilon"].items():
        rows = _rows(summaries)
        if report["exact"]:
            rows.append(_rows({"exact": report["exact"]})[0])
        rows.append(_rows({"real": report["real"]})[0])
        tables[eps] = rows
    return tables


def dp_notes(report: dict[str, Any]) -> list[str]:
    """What the tables' rows mean, for the methods that ran."""
    methods = report["methods"]
    notes = {
        "exact": "exact: the non-private network (the secure job's without DP), the same at "
        "every epsilon",
        "privbayes": "privbayes: DataSynthesizer at the epsilon it is given; under ppbn's "
        "neighbours (one record changed) its synthetic records are 1.5 epsilon-DP",
        "privbayes-matched": "privbayes-matched: given epsilon / 1.5, so its synthetic records "
        "are epsilon-DP",
        "mst": "mst, aim: trusted curators at the same (epsilon, delta) under ppbn's neighbours"
        + (
            f"; aim at most {report['aim_max_rounds']} rounds (the last spends the rest of the budget)"
            if "aim" in methods
            else ""
        ),
    }
    notes["marginals"] = (
        "ppbn-marginals, marginals-twin: the marginal release (--dp-release marginals), "
        "secure and its curator's twin: a tree fitted to noisy 1-way and 2-way counts"
    )
    notes["adaptive"] = (
        "ppbn-adaptive, adaptive-twin: the adaptive release (--dp-release adaptive), secure "
        "and its curator's twin: pairs chosen round by round against the fitted model"
    )
    shown = [notes[m] for m in ("exact", "privbayes", "privbayes-matched") if m in methods]
    if {"ppbn-marginals", "marginals-twin"} & set(methods):
        shown.append(notes["marginals"])
    if {"ppbn-adaptive", "adaptive-twin"} & set(methods):
        shown.append(notes["adaptive"])
    if {"mst", "aim"} & set(methods):
        shown.append(notes["mst"])
    return [*shown, "real: the classifier trained on the real records"]


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


def write_outputs(reports: Sequence[dict[str, Any]], out: str | Path, force: bool = False) -> None:
    """runs.csv (every network's runs), report.json (the one report, or the reports keyed by
    network) and the plots in ``out``, written aside and renamed into place."""
    import csv
    import io
    import json

    from ppbn.data.outputs import atomic_output_dir

    table = io.StringIO()
    writer = csv.DictWriter(table, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for report in reports:
        writer.writerows(report["runs"])
    if len(reports) == 1:
        document, plots = reports[0], {"tvd.png": reports[0]}
    else:
        document = matrix_report(reports)
        plots = {f"tvd-{r['network']}.png": r for r in reports}
    with atomic_output_dir(out, force=force) as folder:
        (folder / "runs.csv").write_text(table.getvalue(), encoding="utf-8")
        (folder / "report.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        for name, report in plots.items():
            (folder / name).write_bytes(plot_png(report))
