"""``ppbn perturb randomize`` and ``ppbn perturb reconstruct``: files, output, one-line errors."""

import json

import numpy as np
import pandas as pd
import pytest

from ppbn.cli import main

MECHANISM = {
    "columns": {
        "smoker": {"states": ["no", "yes"], "kind": "warner", "theta": 0.8},
        "hiv": {"states": ["0", "1"]},
        "drug": {"states": ["0", "1"]},
        "income": {"kind": "additive", "noise": {"kind": "gaussian", "sigma": 5}},
    },
    "groups": [{"columns": ["hiv", "drug"], "kind": "zhan", "theta": 0.75}],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("perturb")
    rng = np.random.default_rng(0)
    n = 3000
    hiv = rng.choice(["0", "1"], n, p=[0.8, 0.2])
    pd.DataFrame(
        {
            "id": np.arange(n),
            "smoker": rng.choice(["no", "yes"], n, p=[0.7, 0.3]),
            "hiv": hiv,
            "drug": np.where(hiv == "1", "1", rng.choice(["0", "1"], n, p=[0.9, 0.1])),
            "income": np.where(
                rng.random(n) < 0.6, rng.normal(30, 3, n), rng.normal(60, 4, n)
            ).round(2),
            "note": "kept",
        }
    ).to_csv(folder / "original.csv", index=False)
    (folder / "mech.json").write_text(json.dumps(MECHANISM))
    assert (
        main(
            [
                "perturb",
                "randomize",
                "--in",
                str(folder / "original.csv"),
                "--mechanism",
                str(folder / "mech.json"),
                "--out",
                str(folder / "randomized.csv"),
                "--seed",
                "7",
            ]
        )
        == 0
    )
    return folder


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["perturb", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_randomize_writes_a_csv_of_the_same_shape_and_is_reproducible(files, capsys):
    original = pd.read_csv(files / "original.csv", dtype=str)
    randomized = pd.read_csv(files / "randomized.csv", dtype=str)
    assert list(randomized.columns) == list(original.columns) and len(randomized) == len(original)
    assert randomized["note"].eq("kept").all() and randomized["id"].equals(original["id"])
    assert set(randomized["smoker"]) == {"no", "yes"}
    flipped = (randomized["hiv"] != original["hiv"]).to_numpy()
    assert np.array_equal(flipped, (randomized["drug"] != original["drug"]).to_numpy())  # Zhan
    again = files / "again.csv"
    code, out, _ = run(
        capsys,
        "randomize",
        "--in",
        str(files / "original.csv"),
        "--mechanism",
        str(files / "mech.json"),
        "--out",
        str(again),
        "--seed",
        "7",
    )
    assert code == 0 and "3,000 records" in out and "whoever knows the seed" in out
    assert again.read_bytes() == (files / "randomized.csv").read_bytes()
    code, _, _ = run(
        capsys,
        "randomize",
        "--in",
        str(files / "original.csv"),
        "--mechanism",
        str(files / "mech.json"),
        "--out",
        str(again),
        "--columns",
        "smoker",
    )
    assert code == 0
    partial = pd.read_csv(again, dtype=str)
    assert partial["income"].equals(original["income"]) and partial["hiv"].equals(original["hiv"])


def test_reconstruct_categorical_json(files, capsys):
    code, out, _ = run(
        capsys,
        "reconstruct",
        "--in",
        str(files / "randomized.csv"),
        "--mechanism",
        str(files / "mech.json"),
        "--column",
        "hiv",
        "--column",
        "drug",
        "--original",
        str(files / "original.csv"),
        "--format",
        "json",
    )
    assert code == 0
    result = json.loads(out)
    assert result["method"] == "em" and result["cells"][0] == "hiv=0, drug=0"
    assert sum(result["estimate"]) == pytest.approx(1.0)
    assert result["information_loss"] < 0.06  # expected about 0.025 (3,000 records, theta 0.75)
    assert result["information_loss"] < 0.5 * sum(
        abs(a - b) for a, b in zip(result["original"], result["randomized"], strict=True)
    )


def test_reconstruct_additive_every_method_and_the_plot(files, capsys):
    losses = {}
    for method in ("em", "binned-em", "richardson-lucy", "fourier"):
        code, out, _ = run(
            capsys,
            "reconstruct",
            "--in",
            str(files / "randomized.csv"),
            "--mechanism",
            str(files / "mech.json"),
            "--column",
            "income",
            "--method",
            method,
            "--range",
            "15",
            "80",
            "--bins",
            "13",
            "--harmonics",
            "6",
            "--original",
            str(files / "original.csv"),
            "--format",
            "json",
        )
        assert code == 0
        result = json.loads(out)
        assert len(result["estimate"]) == 13 and result["edges"][0] == 15
        losses[method] = result["information_loss"]
    assert losses["binned-em"] == pytest.approx(losses["richardson-lucy"], abs=1e-12)
    assert max(losses.values()) < 0.15
    plot = files / "income.png"
    code, out, _ = run(
        capsys,
        "reconstruct",
        "--in",
        str(files / "randomized.csv"),
        "--mechanism",
        str(files / "mech.json"),
        "--column",
        "income",
        "--plot",
        str(plot),
        "--original",
        str(files / "original.csv"),
    )
    assert code == 0 and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "information loss 1/2 sum|h - h_hat|" in out and "iterations" in out


def _error(capsys, *argv: str) -> str:
    code, _, err = run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppbn: error: ")
    return lines[0]


def test_bad_input_is_a_one_line_error(files, capsys, tmp_path):
    bad = tmp_path / "bad.json"
    mech = json.loads(json.dumps(MECHANISM))
    mech["columns"]["smoker"]["theta"] = 0.5
    bad.write_text(json.dumps(mech))
    args = ("--in", str(files / "randomized.csv"), "--out", str(tmp_path / "o.csv"))
    assert "columns.smoker.theta: Warner theta = 0.5 is not invertible" in _error(
        capsys, "randomize", "--mechanism", str(bad), *args
    )
    mech["columns"]["smoker"] = {
        "states": ["no", "yes"],
        "kind": "matrix",
        "matrix": [[0.9, 0.2], [0.1, 0.9]],
    }
    bad.write_text(json.dumps(mech))
    assert "columns.smoker.matrix: randomization matrix for smoker: rows must sum to 1" in _error(
        capsys, "randomize", "--mechanism", str(bad), *args
    )
    bad.write_text("{")
    assert f"{bad}: not valid JSON" in _error(capsys, "randomize", "--mechanism", str(bad), *args)
    rows = tmp_path / "rows.csv"
    rows.write_text("smoker,hiv,drug,income\nno,0,1,3.5\nmaybe,0,1,2\n")
    assert (
        f"{rows}: line 3, column 'smoker': value 'maybe' is not in the declared domain"
        in _error(
            capsys,
            "randomize",
            "--in",
            str(rows),
            "--mechanism",
            str(files / "mech.json"),
            "--out",
            str(tmp_path / "o.csv"),
        )
    )
    rows.write_text("smoker,hiv,drug,income\nno,0,1,3.5\nno,0,1,x\n")
    assert f"{rows}: line 3, column 'income': value 'x' is not a finite number" in _error(
        capsys,
        "randomize",
        "--in",
        str(rows),
        "--mechanism",
        str(files / "mech.json"),
        "--out",
        str(tmp_path / "o.csv"),
    )
    assert "--columns: column 'hiv' is randomized together with drug" in _error(
        capsys,
        "randomize",
        "--in",
        str(rows),
        "--mechanism",
        str(files / "mech.json"),
        "--out",
        str(tmp_path / "o.csv"),
        "--columns",
        "hiv",
    )
    recon = (
        "reconstruct",
        "--in",
        str(files / "randomized.csv"),
        "--mechanism",
        str(files / "mech.json"),
    )
    assert "--method moment: 'income' is additive" in _error(
        capsys, *recon, "--column", "income", "--method", "moment"
    )
    assert "--method fourier: 'smoker' is categorical" in _error(
        capsys, *recon, "--column", "smoker", "--method", "fourier"
    )
    assert "--column 'age': no mechanism" in _error(capsys, *recon, "--column", "age")
    mech = json.loads(json.dumps(MECHANISM))
    mech["columns"]["income"]["noise"] = {"kind": "uniform", "low": -25, "high": 25}
    bad.write_text(json.dumps(mech))
    message = _error(
        capsys,
        "reconstruct",
        "--in",
        str(files / "randomized.csv"),
        "--mechanism",
        str(bad),
        "--column",
        "income",
        "--method",
        "fourier",
        "--range",
        "0",
        "100",
    )
    assert message.startswith(f"ppbn: error: {files / 'randomized.csv'}, column 'income' ({bad}): ")
    assert "is zero" in message and "at harmonic 2 of the range [0, 100]" in message
    assert not (tmp_path / "o.csv").exists()  # nothing written by a failed command
