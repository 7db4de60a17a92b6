"""The report of ``ppbn compare-classifiers`` (``ppbn.lab.classifier_compare``): results.json,
report.md with its tables, accuracy.png, and the text the command prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ppbn.lab.classifier_compare import LEARNERS, MODES, TITLES


def gamma_text(row: dict[str, Any], sep: str = ", ") -> str:
    """A level's gamma-amplification per block size (inf, with the figure ignoring zeros)."""
    parts = []
    for k, v in row["gamma"].items():
        loose = row["gamma_ignoring_zeros"][k]
        text = (
            f"{v:.3g}" if v is not None else f"inf ({loose:.3g} ignoring zeros)" if loose else "inf"
        )
        parts.append(f"{k} {text}")
    return sep.join(parts) or "none (identity)"


def markdown_table(results: dict[str, Any]) -> str:
    """Accuracy per learner and level: original, randomized and reconstructed (mean ± sd)."""
    lines = [
        f"| learner | {results['mechanism_parameter']} | gamma (K states) | original | randomized (uncorrected) | reconstructed |",
        "|---|---|---|---|---|---|",
    ]
    for learner in LEARNERS:
        acc = results["accuracy"][learner]
        for k, p in enumerate(results["levels"]):
            cells = [f"{acc[m][k]['mean']:.3f} ± {acc[m][k]['sd']:.3f}" for m in MODES]
            gamma = gamma_text(results["privacy"][k])
            lines.append(
                f"| {TITLES[learner]} | {p:g} | {gamma} | {acc['original']:.3f} | {cells[0]} | {cells[1]} |"
            )
    return "\n".join(lines)


def paths_table(results: dict[str, Any]) -> str:
    """Perturbation and secure path side by side: accuracy, time, what crosses (``--secure``)."""
    secure = results["secure"]
    levels = results["levels"]
    top = (
        max(levels)
        if results["mechanism_parameter"] == "p"
        else min(levels, key=lambda x: abs(x - 0.5))
    )
    k = levels.index(top)
    jobs = secure.get("perturbation_jobs", {})
    short = {"naive_bayes": "nb", "id3": "id3", "perceptron": "perceptron"}
    where = (
        "the data miner (or the class owner) receives every training record's attributes randomized"
    )
    lines = [
        "| path | classifier | accuracy | time | what the other side receives |",
        "|---|---|---|---|---|",
    ]
    for learner in LEARNERS:
        acc = results["accuracy"][learner]["reconstructed"][k]
        job = jobs.get(short[learner], {})
        cost = (
            f"{job['wall_s']:.1f} s, {job['bytes_exchanged'] / 1e6:.2f} MB as a perturb-learn job (setup I)"
            if job.get("available")
            else f"{results['seconds_per_fit'][learner]:.2f} s per fit (local)"
        )
        lines.append(
            f"| perturbation, {results['mechanism_parameter']} = {top:g} | {TITLES[learner]} | "
            f"{acc['mean']:.3f} ± {acc['sd']:.3f} | {cost} | {where} (gamma {gamma_text(results['privacy'][k])}) |"
        )
    reference = secure["reference"]
    lines.append(
        f"| none (joined data in one place) | Bayesian network, hill climbing ({secure['score']}, "
        f"u = {secure['max_parents']}) | {reference['accuracy']:.3f} | {reference['seconds']:.2f} s | "
        "every original record (the baseline no one may run) |"
    )
    run = secure["secure"]
    if not run["available"]:
        lines.append(
            f"| secure (Yang-Wright) | the same network | not available: {run['reason']} | | |"
        )
    else:
        same = (
            "equal to the reference" if run["equal_to_reference"] else "DIFFERS from the reference"
        )
        lines.append(
            f"| secure (Yang-Wright), two daemons | the same network ({run['edges']} edges, {same}) | "
            f"{run['accuracy']:.3f} | {run['wall_s']:.1f} s, {run['bytes_exchanged'] / 1e6:.1f} MB exchanged | "
            "the learned network (structure and CPTs), nothing else |"
        )
    return "\n".join(lines)


def write_report(results: dict[str, Any], folder: Path) -> list[Path]:
    """results.json, report.md and accuracy.png into ``folder``."""
    paths = [folder / "results.json", folder / "report.md", folder / "accuracy.png"]
    paths[0].write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    data = results["data"]
    head = (
        f"# Classifiers from randomized data\n\n{data['source']}; class {data['class']}; "
        f"attributes {', '.join(data['attributes'])}; "
        f"{data['records']:,} training and {data['test_records']:,} test records; "
        f"{results['mechanism']}; {results['repeats']} randomizations per p (mean ± sd); "
        f"majority-class rate {data['majority_rate']:.3f}.\n\n"
    )
    body = markdown_table(results) + "\n"
    if results["secure"] is not None:
        body += "\n## The same data on the secure path\n\n" + paths_table(results) + "\n"
    paths[1].write_text(head + body, encoding="utf-8")
    _plot(results, paths[2])
    return paths


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ps = results["levels"]
    ticks = [
        f"{p:g}\n" + gamma_text(row, "\n") for p, row in zip(ps, results["privacy"], strict=True)
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), sharey=True)
    for ax, learner in zip(axes, LEARNERS, strict=True):
        acc = results["accuracy"][learner]
        ax.axhline(acc["original"], color="C2", linestyle="--", label="original data")
        ax.axhline(
            results["data"]["majority_rate"], color="C7", linestyle=":", label="majority class"
        )
        for mode, color in (("randomized", "C3"), ("reconstructed", "C0")):
            mean = [row["mean"] for row in acc[mode]]
            sd = [row["sd"] for row in acc[mode]]
            label = (
                "randomized, uncorrected"
                if mode == "randomized"
                else "reconstructed (estimated counts)"
            )
            ax.errorbar(ps, mean, yerr=sd, color=color, marker="o", capsize=3, label=label)
        ax.set_title(TITLES[learner])
        ax.set_xticks(ps, ticks, fontsize=7)
        ax.set_xlabel(f"randomization {results['mechanism_parameter']} (gamma of K-state blocks)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy on original test records")
    axes[0].legend(fontsize=8)
    data = results["data"]
    fig.suptitle(
        f"{data['source']}; class {data['class']}; {data['records']:,} records, {results['repeats']} runs per p"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def trends(results: dict[str, Any]) -> list[str]:
    """One line per learner: how far each mode falls from the original at the largest p."""
    out = []
    last = -1
    p = results["levels"][last]
    for learner in LEARNERS:
        acc = results["accuracy"][learner]
        rec, raw = acc["reconstructed"][last]["mean"], acc["randomized"][last]["mean"]
        out.append(
            f"{TITLES[learner]} at {results['mechanism_parameter']} = {p:g}: reconstructed {rec:.3f}, uncorrected {raw:.3f}, "
            f"original {acc['original']:.3f} (majority {results['data']['majority_rate']:.3f})"
        )
    return out


def comparison_text(results: dict[str, Any], written: list[Path]) -> str:
    """What the command prints for people: the tables, the trends and where the report is."""
    lines = [markdown_table(results), ""]
    if results["secure"] is not None:
        lines += [paths_table(results), ""]
    lines += [f"- {line}" for line in trends(results)]
    lines += [
        "",
        f"wall time {results['wall_s']:.1f} s; report: {', '.join(str(p) for p in written)}",
    ]
    return "\n".join(lines)
