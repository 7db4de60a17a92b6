"""``ppbn perturb learn nb|id3|perceptron|rules``: end to end in process, bad input in one line."""

import json

import numpy as np
import pandas as pd
import pytest

from ppbn.cli import main
from ppbn.randomized.perturb.response import scheme_for
from ppbn.randomized.pram.operators import RandomSource


def _csv(path, n, seed, theta=None):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = (rng.random((n, 3)) < 0.2 + np.array([0.6, 0.4, 0.1]) * y[:, None]).astype(int)
    codes = np.column_stack([x, y])
    columns = ["a", "b", "c", "y"]
    if theta is not None:
        scheme = scheme_for(dict.fromkeys(columns, 2), ["a", "b", "c"], theta=theta)
        codes = scheme.randomize(codes, columns, RandomSource.from_seed(seed))
    frame = pd.DataFrame(np.where(codes == 1, "yes", "no"), columns=columns)
    frame.insert(0, "rid", [f"r{i}" for i in range(n)])
    frame.to_csv(path, index=False)
    return path


def _folder(path, n, seed):
    """A `ppbn datasets make`-style folder (schema.json, alice.csv, bob.csv) without pgmpy."""
    from ppbn.bn.schema import Schema
    from ppbn.data.party_data import write_party_csv

    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = (rng.random((n, 4)) < 0.2 + np.array([0.6, 0.4, 0.1, 0.3]) * y[:, None]).astype(int)
    codes = np.column_stack([x, y])
    names = ("a", "b", "c", "d", "y")
    owners = ("alice", "bob", "alice", "bob", "alice")
    schema = Schema.from_dict(
        {
            "id_column": "id",
            "variables": [
                {"name": v, "owner": o, "states": ["yes", "no"]}
                for v, o in zip(names, owners, strict=True)
            ],
        }
    )
    path.mkdir()
    (path / "schema.json").write_text(schema.to_json())
    ids = [f"r{i}" for i in range(n)]
    for party in ("alice", "bob"):
        own = tuple(v for v, o in zip(names, owners, strict=True) if o == party)
        write_party_csv(
            path / f"{party}.csv", schema, ids, own, 1 - codes[:, [names.index(v) for v in own]]
        )
    return path


def _run(capsys, *argv):
    code = main(["perturb", "learn", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_nb_on_a_randomized_csv(tmp_path, capsys):
    train = _csv(tmp_path / "train.csv", 3000, 1, theta=0.8)
    test = _csv(tmp_path / "test.csv", 1000, 2)
    code, out, _ = _run(
        capsys,
        "nb",
        "--data",
        str(train),
        "--test",
        str(test),
        "--class",
        "y",
        "--id",
        "rid",
        "--theta",
        "0.8",
        "--format",
        "json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["mechanism"] == "randomized response theta = 0.8; class not randomized"
    assert report["accuracy"] > 0.75
    assert report["privacy"][0]["gamma"] == pytest.approx(4.0)
    assert set(report["model"]["prior"]) == {"no", "yes"}
    code, out, _ = _run(
        capsys,
        "nb",
        "--data",
        str(train),
        "--test",
        str(test),
        "--class",
        "y",
        "--id",
        "rid",
        "--ignore-randomization",
        "--format",
        "json",
    )
    assert json.loads(out)["mechanism"] == "none" and not json.loads(out)["corrected"]


def test_one_group_randomized_here_then_corrected_or_ignored(tmp_path, capsys):
    """Zhan's one-group scheme randomized by the command itself: the strict gamma is
    infinite (each output comes from two originals), 7/3 ignoring zeros."""
    train, test = _csv(tmp_path / "train.csv", 3000, 6), _csv(tmp_path / "test.csv", 1000, 7)
    argv = [
        "nb",
        "--data",
        str(train),
        "--test",
        str(test),
        "--class",
        "y",
        "--id",
        "rid",
        "--theta",
        "0.3",
        "--groups",
        "all",
        "--randomize",
        "9",
    ]
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    assert "gamma-amplification per randomized block: inf (2.33 ignoring zeros)" in out
    corrected = float(out.split("test records: ")[1].split()[0])
    code, out, _ = _run(capsys, *argv, "--ignore-randomization")
    assert "(taken as if not randomized)" in out
    assert (
        float(out.split("test records: ")[1].split()[0]) < corrected - 0.2
    )  # theta < 0.5 inverts the signal


def test_every_learner_on_a_data_folder(tmp_path, capsys):
    train, test = _folder(tmp_path / "train", 4000, 4), _folder(tmp_path / "test", 1000, 5)
    common = ["--data", str(train), "--p", "0.2", "--randomize", "5"]
    for learner, extra in [
        ("nb", []),
        ("id3", ["--max-depth", "2"]),
        ("perceptron", ["--iterations", "2000"]),
    ]:
        code, out, _ = _run(capsys, learner, *common, "--test", str(test), "--class", "y", *extra)
        assert code == 0, learner
        assert "accuracy on 1,000 test records" in out
        assert float(out.split("test records")[1].split(": ")[1].split()[0]) > 0.75
    out_dir = tmp_path / "rules"
    code, out, _ = _run(
        capsys,
        "rules",
        *common,
        "--groups",
        "a,b:c,d,y",
        "--min-support",
        "0.1",
        "--out",
        str(out_dir),
    )
    assert code == 0
    assert "gamma-amplification per randomized block: 12, 28" in out
    saved = json.loads((out_dir / "report.json").read_text())
    assert saved["randomized_here"] is True
    assert json.loads((out_dir / "model.json").read_text())["records"] == 4000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["nb", "--class", "y", "--theta", "0.5"], "theta = 0.5 is not invertible"),
        (["nb", "--class", "y"], "name the mechanism"),
        (["nb", "--class", "y", "--theta", "0.8", "--p", "0.1"], "give one mechanism"),
        (["nb", "--class", "zz", "--theta", "0.8"], "--class 'zz': not a column"),
        (["id3", "--class", "y", "--p", "0.1", "--groups", "a,b:b"], "'b' is in two groups"),
        (["perceptron", "--class", "y", "--p", "0.1", "--positive", "maybe"], "--positive 'maybe'"),
        (["rules", "--p", "0.1", "--randomize", "1"], "column 'rid' has values"),
        (
            ["nb", "--class", "y", "--p", "0.1", "--randomize-class", "--ignore-randomization"],
            "give no mechanism",
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    data = _csv(tmp_path / "d.csv", 200, 3)
    id_flag = [] if argv[0] == "rules" else ["--id", "rid"]
    code, _, err = _run(capsys, *argv, "--data", str(data), *id_flag)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


def test_empty_cell_names_the_line(tmp_path, capsys):
    path = tmp_path / "gap.csv"
    path.write_text("a,y\nyes,no\n,yes\n")
    code, _, err = _run(capsys, "nb", "--data", str(path), "--class", "y", "--theta", "0.9")
    assert code == 2
    assert "line 3: column 'a' is empty" in err
