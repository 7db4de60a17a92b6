"""``ppbn compare``: the report on a small network, and the measures it is built from."""

from __future__ import annotations

import json

import numpy as np
import pytest
from timeouts import PEER_TIMEOUT_S

from ppbn.bn.model import structural_hamming_distance
from ppbn.bn.networks import load_network
from ppbn.cli import main as ppbn_main
from ppbn.lab.compare import DEFAULT_ETA_SCHEDULE, KLEstimator, scheduled, structure_diff


def test_structure_diff_splits_the_structural_hamming_distance():
    reference = {"a": [], "b": ["a"], "c": ["b"], "d": []}
    learned = {"a": ["b"], "b": [], "c": ["a", "b"], "d": []}  # a-b reversed, a->c extra
    diff = structure_diff(learned, reference)
    assert (diff["extra"], diff["missing"], diff["reversed"]) == (1, 0, 1)
    assert diff["shd"] == structural_hamming_distance(learned, reference) == 2
    missing = structure_diff({"a": [], "b": [], "c": [], "d": []}, reference)
    assert (missing["extra"], missing["missing"], missing["shd"]) == (0, 2, 2)


def test_kl_is_zero_for_the_truth_and_monte_carlo_agrees_with_enumeration():
    truth = load_network("asia")
    exact = KLEstimator.build(truth, seed=1)
    assert exact.method.startswith("exact")
    assert exact.divergence(truth)[0] == pytest.approx(0.0, abs=1e-4)  # only the smoothing
    other = load_network("asia")
    other.cpts["lung"] = np.full_like(other.cpts["lung"], 0.5)
    value, _ = exact.divergence(other)
    monte_carlo = KLEstimator.build(truth, seed=2, samples=60_000)
    object.__setattr__(monte_carlo, "method", "Monte Carlo")
    estimate, se = monte_carlo.divergence(other)
    assert value > 0.05 and se > 0 and abs(estimate - value) < 4 * se + 1e-3


def test_eta_schedule_is_the_papers():
    assert [scheduled(DEFAULT_ETA_SCHEDULE, p) for p in (0.0, 0.1, 0.15, 0.2, 0.3)] == [
        1.0,
        0.99,
        0.99,
        0.98,
        0.97,
    ]


def test_compare_on_asia_writes_the_report_and_error_grows_with_p(tmp_path, capsys):
    out = tmp_path / "report"
    code = ppbn_main(
        [
            "compare",
            "--network",
            "asia",
            "--records",
            "3000",
            "--p",
            "0,0.3",
            "--out",
            str(out),
            "--no-secure",
            "--timeout",
            f"{PEER_TIMEOUT_S:g}",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "SECURE PATH NOT AVAILABLE: skipped (--no-secure)" in captured.err  # never silent
    assert "| path | p | SHD |" in captured.out
    for name in ("report.md", "results.json", "structure.png", "kl.png", "cost.png", "privacy.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    report = (out / "report.md").read_text()
    assert "| PRAM setup II | 0.3 |" in report and "**SECURE PATH NOT AVAILABLE" in report
    assert "| variable | owner | states | gamma p=0 | gamma p=0.3 |" in report
    results = json.loads((out / "results.json").read_text())
    pram = [r for r in results["runs"] if r["path"] == "pram"]
    for setup in (1, 2):
        plain = {
            r["p"]: r["structure"]["shd"] for r in pram if r["setup"] == setup and not r["fix"]
        }
        assert plain[0.0] == 0 < plain[0.3], (setup, plain)
    fixed = [r for r in pram if r["fix"]]
    assert fixed and all(
        r["p"] == 0.3 and r["fix"] == "eta=0.97" for r in fixed
    )  # p = 0 needs no fix
    setup_two = next(r for r in pram if r["setup"] == 2 and r["p"] == 0.3 and not r["fix"])
    assert {row["k_p"] for row in setup_two["privacy"]} == {2}
    assert setup_two["bytes_exchanged"] > 0 and setup_two["kl_nats"] > 0
