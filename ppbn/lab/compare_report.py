"""The report of ``ppbn compare``: what ppbn/lab/compare.py measured, written out.

ppbn/lab/compare.py runs the comparison (the reference, the PRAM runs and the secure run over
the daemons) and returns a ``Comparison``; this module only reads one: the findings computed
from the runs (``trends``), the markdown tables of structure error, divergence and cost and of
privacy per variable, ``report.md``, ``results.json`` (``comparison_json``) and the PNG plots.
Kept apart so the measuring code and the presentation can each be read (and changed) alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppbn.lab.compare import KL_SMOOTHING, Comparison, Run


def _fmt_gamma(value: Any) -> str:
    if value in ("inf", None) or (isinstance(value, float) and math.isinf(value)):
        return "inf"
    return f"{float(value):.3g}"


def _pram_runs(comparison: Comparison) -> list[Run]:
    """The K2 PRAM runs (the trends and plots are K2's; hill climbing has its own rows)."""
    return [r for r in comparison.runs if r.path == "pram" and r.search == "k2"]


def trends(comparison: Comparison) -> list[str]:
    """The findings the acceptance asks about, computed from the runs (never assumed)."""
    lines = []
    pram = [r for r in _pram_runs(comparison) if r.available]
    for setup in (1, 2):
        for fixed in (False, True):
            series = sorted(
                (r.p, r.diff["shd"]) for r in pram if r.setup == setup and bool(r.fix) == fixed
            )
            if len(series) < 2:
                continue
            shd = [s for _, s in series]
            grows = all(b >= a for a, b in zip(shd, shd[1:], strict=False)) and shd[-1] > shd[0]
            name = f"setup {'I' if setup == 1 else 'II'}{' with the fix' if fixed else ''}"
            verdict = "grows with p" if grows else "does not grow monotonically with p"
            lines.append(
                f"Structure error, {name}: SHD {' -> '.join(map(str, shd))} over p = "
                f"{', '.join(f'{p:g}' for p, _ in series)}: {verdict}."
            )
    for setup in (1, 2):
        pairs = []
        for p in comparison.settings.ps:
            plain = [r for r in pram if r.setup == setup and r.p == p and not r.fix]
            fixed = [r for r in pram if r.setup == setup and r.p == p and r.fix]
            if plain and fixed:
                pairs.append((p, plain[0].diff["extra"], fixed[0].diff["extra"], fixed[0].fix))
        if pairs:
            fewer = sum(f < e for _, e, f, _ in pairs)
            detail = "; ".join(f"p={p:g}: {e} -> {f} ({fx})" for p, e, f, fx in pairs)
            lines.append(
                f"Extra links, setup {'I' if setup == 1 else 'II'}, plain -> fixed: {detail} "
                f"(fewer at {fewer} of {len(pairs)} p values)."
            )
    return lines


def _table_rows(comparison: Comparison) -> list[list[str]]:
    order = {"reference": 0, "secure": 1, "pram": 2}
    runs = sorted(
        comparison.runs,
        key=lambda r: (r.search != "k2", order[r.path], r.p or 0.0, r.setup or 0, r.fix),
    )
    rows = []
    for r in runs:
        p = "-" if r.p is None else f"{r.p:g}"
        if not r.available:
            rows.append([r.label, p, f"NOT AVAILABLE: {r.reason}", "", "", "", "", "", ""])
            continue
        kl = f"{r.kl:.4f}" + (f" ± {r.kl_se:.4f}" if r.kl_se else "")
        wall = f"{r.wall_s:.2f}"
        traffic = f"{r.bytes_exchanged:,}" if r.path != "reference" else "0 (plaintext)"
        d = r.diff
        rows.append(
            [
                r.label,
                p,
                str(d["shd"]),
                str(d["extra"]),
                str(d["missing"]),
                str(d["reversed"]),
                kl,
                wall,
                traffic,
            ]
        )
    return rows


TABLE_HEADER = [
    "path",
    "p",
    "SHD",
    "extra",
    "missing",
    "reversed",
    "KL (nats)",
    "wall (s)",
    "bytes",
]


def markdown_table(comparison: Comparison) -> str:
    lines = ["| " + " | ".join(TABLE_HEADER) + " |", "|" + "---|" * len(TABLE_HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in _table_rows(comparison)]
    return "\n".join(lines)


def privacy_table(comparison: Comparison) -> str:
    """gamma (strict) and K_p of every variable for each p, from setup II (all disclosed)."""
    ps = comparison.settings.ps
    by_p: dict[float, dict[str, dict[str, Any]]] = {}
    for r in _pram_runs(comparison):
        if r.available and r.setup == 2 and not r.fix:
            by_p[r.p] = {"+".join(row["variables"]): row for row in r.privacy}  # type: ignore[index]
    header = (
        ["variable", "owner", "states"]
        + [f"gamma p={p:g}" for p in ps]
        + [f"K_p p={p:g}" for p in ps]
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for v in comparison.schema.variables:
        gammas = [
            _fmt_gamma(by_p.get(p, {}).get(v.name, {}).get("gamma"))
            if v.name in by_p.get(p, {})
            else "-"
            for p in ps
        ]
        kps = [str(by_p[p][v.name]["k_p"]) if v.name in by_p.get(p, {}) else "-" for p in ps]
        lines.append("| " + " | ".join([v.name, v.owner, str(v.cardinality), *gammas, *kps]) + " |")
    return "\n".join(lines)


def write_report(comparison: Comparison, out: Path) -> list[Path]:
    """report.md, results.json and the PNG plots in ``out``; returns the written paths."""
    out.mkdir(parents=True, exist_ok=True)
    s = comparison.settings
    plots = write_plots(comparison, out)
    secure = next(r for r in comparison.runs if r.path == "secure" and r.search == "k2")
    fix_rule = (
        "C* (BIC penalty multiplier)"
        if s.score == "bic"
        else "eta (relative log-score threshold, ppbn.randomized.pram.oracle)"
    )
    lines = [
        f"# ppbn compare: {s.network}, {s.records:,} records",
        "",
        f"Settings: K2 with at most {s.max_parents} parents, score `{s.score}`, tau {s.tau:g}, "
        f"schema order; data seed {s.seed}. PRAM: M-category randomization with the same p for "
        f"every variable; extra-link fix: {fix_rule}"
        + (
            " (paper's schedule over p)."
            if (s.eta is None and s.score != "bic") or (s.c_star is None and s.score == "bic")
            else "."
        ),
        "",
        "How it ran: the reference in this process on the joined plaintext; every PRAM run and "
        "the secure run as jobs over three daemon processes (alice, bob, miner) on loopback with "
        "mutual TLS. The daemons run with a fixed test seed (local flag), so within one p all PRAM runs "
        "share one randomized copy.",
        f"KL(truth || learned): {comparison.kl_method}; learned CPTs mixed with the uniform at weight {KL_SMOOTHING:g}.",
        "wall (s): the job from start to finish as the operator saw it (the reference: the "
        "in-process learner); bytes: sent by all daemons of the job, as each counted its channels.",
        f"Reference structure: {comparison.reference_edges} edges; against the generating network "
        f"({comparison.truth_edges} edges) its SHD is {comparison.reference_vs_truth['shd']}.",
        f"Total wall time of this comparison: {comparison.wall_s:.1f} s.",
        "",
    ]
    if comparison.hc_reference_vs_truth is not None:
        lines[-1:-1] = [
            "Rows marked [hc]: hill climbing (no order; PRAM in setup II only), each measured "
            "against the hill-climbing reference, whose SHD to the generating network is "
            f"{comparison.hc_reference_vs_truth['shd']}."
        ]
    if not secure.available:
        lines += [f"**SECURE PATH NOT AVAILABLE: {secure.reason}**", ""]
    lines += [
        "## Structure error, divergence and cost (SHD etc. against the exact reference structure)",
        "",
        markdown_table(comparison),
        "",
        "## Findings (computed from the table)",
        "",
        *[f"- {t}" for t in trends(comparison)],
        "",
        "## Privacy per variable (setup II discloses every variable; setup I only the cross parents)",
        "",
        "gamma is the strict value (docs/conventions.md, 'Gamma amplification': inf when an output rules out an original); "
        "K_p is probabilistic K-anonymity under the uniform prior.",
        "",
        privacy_table(comparison),
        "",
        "## Plots",
        "",
        *[f"![{p.stem}]({p.name})" for p in plots],
        "",
    ]
    report = out / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    results = out / "results.json"
    results.write_text(json.dumps(comparison_json(comparison), indent=2) + "\n", encoding="utf-8")
    return [report, results, *plots]


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    s = comparison.settings
    return {
        "network": s.network,
        "records": s.records,
        "p": list(s.ps),
        "seed": s.seed,
        "max_parents": s.max_parents,
        "score": s.score,
        "tau": s.tau,
        "kl_method": comparison.kl_method,
        "wall_s": round(comparison.wall_s, 3),
        "reference_edges": comparison.reference_edges,
        "reference_vs_truth": comparison.reference_vs_truth,
        "hill_climbing": s.hc,
        "hc_reference_vs_truth": comparison.hc_reference_vs_truth,
        "findings": trends(comparison),
        "runs": [r.to_json() for r in comparison.runs],
    }


def write_plots(comparison: Comparison, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pram = [r for r in _pram_runs(comparison) if r.available]
    others = {
        r.path: r for r in comparison.runs if r.path != "pram" and r.available and r.search == "k2"
    }
    series = {}
    for r in pram:
        series.setdefault((r.setup, bool(r.fix)), []).append(r)
    styles = {
        (1, False): ("C0", "-"),
        (1, True): ("C0", "--"),
        (2, False): ("C1", "-"),
        (2, True): ("C1", "--"),
    }

    def label(key: tuple[int | None, bool]) -> str:
        return f"PRAM setup {'I' if key[0] == 1 else 'II'}" + (" + fix" if key[1] else "")

    def draw(ax, value: Callable[[Run], float], ylabel: str, log: bool = False) -> None:
        for key, runs in sorted(series.items()):
            runs = sorted(runs, key=lambda r: r.p)
            color, line = styles[key]
            ax.plot(
                [r.p for r in runs],
                [value(r) for r in runs],
                line,
                color=color,
                marker="o",
                label=label(key),
            )
        for name, color in (("secure", "C2"), ("reference", "C7")):
            if name in others and not math.isnan(value(others[name])):
                ax.axhline(value(others[name]), color=color, linestyle=":", label=name)
        ax.set_xlabel("randomization p")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)

    paths = []
    title = f"{comparison.settings.network}, {comparison.settings.records:,} records"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    draw(axes[0], lambda r: r.diff["shd"], "SHD to the exact reference")
    draw(axes[1], lambda r: r.diff["extra"], "extra links")
    draw(axes[2], lambda r: r.diff["missing"], "missing links")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Structure error against p ({title})")
    fig.tight_layout()
    paths.append(out / "structure.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4.2))
    draw(ax, lambda r: max(r.kl, 1e-6), "KL(truth || learned), nats", log=True)
    ax.legend(fontsize=8)
    ax.set_title(f"Divergence of the learned joint ({title})")
    fig.tight_layout()
    paths.append(out / "kl.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    draw(axes[0], lambda r: r.wall_s, "wall time (s)", log=True)
    draw(axes[1], lambda r: max(r.bytes_exchanged, 1), "bytes exchanged (all daemons)", log=True)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Cost against p ({title})")
    fig.tight_layout()
    paths.append(out / "cost.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    setup_two = sorted((r for r in pram if r.setup == 2 and not r.fix), key=lambda r: r.p)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    cards = sorted({v.cardinality for v in comparison.schema.variables})
    for k, card in enumerate(cards):
        members = [v.name for v in comparison.schema.variables if v.cardinality == card]
        xs, gammas, kps = [], [], []
        for r in setup_two:
            row = next((x for x in r.privacy if x["variables"] == [members[0]]), None)
            if row is None or _fmt_gamma(row["gamma"]) == "inf":
                continue
            xs.append(r.p)
            gammas.append(float(row["gamma"]))
            kps.append(row["k_p"])
        name = f"{card}-state variables ({len(members)})"
        axes[0].plot(xs, gammas, marker="o", color=f"C{k}", label=name)
        axes[1].plot(xs, kps, marker="o", color=f"C{k}", label=name)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("gamma-amplification (strict)")
    axes[1].set_ylabel("K_p (uniform prior)")
    for ax in axes:
        ax.set_xlabel("randomization p")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"Privacy per variable against p (every variable with the same number of states alike; {title})"
    )
    fig.tight_layout()
    paths.append(out / "privacy.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def comparison_text(comparison: Comparison, written: list[Path]) -> str:
    """What ``ppbn compare`` prints for people: the table, the trends and where the report is."""
    lines = [markdown_table(comparison), ""]
    lines += [f"- {line}" for line in trends(comparison)]
    lines.append("")
    lines.append(
        f"wall time {comparison.wall_s:.1f} s; report: {', '.join(str(p) for p in written)}"
    )
    return "\n".join(lines)
