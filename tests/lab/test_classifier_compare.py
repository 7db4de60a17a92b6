"""``ppbn compare-classifiers`` on the Lens data (no network file to load): a small run end
to end, the report files, and bad input in one line."""

import json

import pytest

from ppbn.cli import main


def test_lens_comparison_writes_json_markdown_and_plot(tmp_path, capsys):
    out = tmp_path / "report"
    code = main(
        [
            "compare-classifiers",
            "--lenses",
            "--records",
            "3000",
            "--test-records",
            "2000",
            "--p",
            "0.1,0.3",
            "--repeats",
            "2",
            "--perceptron-estimator",
            "moment",
            "--pocket-iterations",
            "4000",
            "--out",
            str(out),
            "--format",
            "json",
        ]
    )
    assert code == 0
    results = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in out.iterdir()) == ["accuracy.png", "report.md", "results.json"]
    assert (out / "accuracy.png").read_bytes()[:4] == b"\x89PNG"
    assert results["levels"] == [0.1, 0.3]
    assert results["privacy"][1]["gamma"] == {
        "K=2": pytest.approx(0.7 / 0.3),
        "K=3": pytest.approx(0.7 * 2 / 0.3),
    }
    for learner in ("naive_bayes", "id3", "perceptron"):
        acc = results["accuracy"][learner]
        assert len(acc["reconstructed"]) == 2 and len(acc["reconstructed"][0]["runs"]) == 2
        # at p = 0.3 the corrected learner keeps most of the original accuracy; taking the
        # randomized records at face value falls to about the majority rate (0.73)
        assert acc["reconstructed"][1]["mean"] > acc["randomized"][1]["mean"] + 0.1, learner
        assert acc["reconstructed"][1]["mean"] > acc["original"] - 0.06, learner
    assert "| naive Bayes (Zhan) | 0.3 | K=2 2.33, K=3 4.67 |" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--lenses", "--network", "asia"], "give --network NAME (with --class) or --lenses"),
        (["--network", "asia"], "--network needs --class"),
        (["--lenses", "--p", "0.1,0.5"], "not invertible"),
        (["--lenses", "--p", "0,0.2"], "distinct randomization levels in (0, 1)"),
        (["--lenses", "--theta", "0.2"], "Table 6.2 (give --p, not --theta)"),
        (["--lenses", "--p", "0.2", "--one-group"], "--one-group is Zhan's scheme"),
        (["--lenses", "--repeats", "0"], "--repeats must be at least 1"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    code = main(
        [
            "compare-classifiers",
            *argv,
            "--records",
            "100",
            "--test-records",
            "50",
            "--out",
            str(tmp_path / "x"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "x").exists()
