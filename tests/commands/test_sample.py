"""``ppbn sample``: a synthetic table from a learned network, written whole: the schema's
columns, only valid states, the network's 1-way marginals; the same seed gives the same
file; withheld CPTs, an existing --out, a bad --records and bad input are refused in one
line; a DP release's (epsilon, delta) is stated, an exact release warned about."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ppbn.api.result import load_result
from ppbn.cli import main

RECORDS = 20_000


@pytest.fixture(scope="module")
def learned(tmp_path_factory, small_data) -> dict[str, Path]:
    """The reference learner's job folder on the catalogue's 300 Asia records."""
    job = tmp_path_factory.mktemp("sample-cli") / "job"
    assert main(["reference", "--data", str(small_data), "--out", str(job)]) == 0
    return {"job": job, "schema": small_data / "schema.json", "truth": small_data / "truth.bif"}


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _job_copy(learned, tmp_path, change) -> Path:
    """A copy of the job folder with its network.json changed by ``change(document)``."""
    job = tmp_path / "job"
    shutil.copytree(learned["job"], job)
    document = json.loads((job / "network.json").read_text())
    change(document)
    (job / "network.json").write_text(json.dumps(document))
    return job


def test_the_table_has_the_schemas_columns_and_the_networks_marginals(learned, tmp_path, capsys):
    from pgmpy.inference import VariableElimination

    out = tmp_path / "synth.csv"
    argv = ["sample", str(learned["job"]), "--records", str(RECORDS), "--seed", "5"]
    code, stdout, _ = _run([*argv, "--out", str(out), "--schema", str(learned["schema"])], capsys)
    assert code == 0
    assert stdout.splitlines() == [f"wrote {out} (csv): {RECORDS} synthetic records of 8 variables"]
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    schema = json.loads(learned["schema"].read_text())
    assert list(frame.columns) == [v["name"] for v in schema["variables"]]
    assert len(frame) == RECORDS
    network = load_result(learned["job"])
    inference = VariableElimination(network.to_pgmpy())
    for v in frame.columns:
        assert set(frame[v]) <= set(network.cpts[v].states)
        exact = inference.query([v], show_progress=False)
        counts = frame[v].value_counts()
        for state, p in zip(exact.state_names[v], exact.values, strict=True):
            se = math.sqrt(p * (1 - p) / RECORDS)
            assert abs(counts.get(state, 0) / RECORDS - p) <= 5 * se + 1e-12, (v, state, p)


def test_the_same_seed_gives_the_same_file(learned, tmp_path, capsys):
    files = [tmp_path / name for name in ("a.csv", "b.csv", "c.csv")]
    for path, seed in zip(files, ("7", "7", "8"), strict=True):
        argv = ["sample", str(learned["job"] / "network.json"), "--records", "2000"]
        assert _run([*argv, "--seed", seed, "--out", str(path)], capsys)[0] == 0
    assert files[0].read_bytes() == files[1].read_bytes() != files[2].read_bytes()


def test_parquet_from_a_bif_file(learned, tmp_path, capsys):
    out = tmp_path / "synth.pq"
    argv = ["sample", str(learned["truth"]), "--records", "100", "--out", str(out)]
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0 and stdout.startswith(f"wrote {out} (parquet): 100 synthetic records")
    assert f"warning: {learned['truth']} is an exact release" in stderr
    assert len(pd.read_parquet(out)) == 100


def test_an_existing_out_is_refused_unless_forced(learned, tmp_path, capsys):
    out = tmp_path / "synth.csv"
    out.write_text("keep me\n")
    argv = ["sample", str(learned["job"]), "--records", "10", "--out", str(out)]
    code, stdout, stderr = _run(argv, capsys)
    assert code == 2 and stdout == ""
    assert stderr == (
        f"ppbn: error: --out {out}: exists (choose another, or --force to replace it)\n"
    )
    assert out.read_text() == "keep me\n"
    assert _run([*argv, "--force"], capsys)[0] == 0
    assert len(pd.read_csv(out)) == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["synth.csv"]  # no temporary left


def test_withheld_cpts_are_refused(learned, tmp_path, capsys):
    def withhold(document):
        for v in ("tub", "bronc"):
            del document["parameters"][v]

    job = _job_copy(learned, tmp_path, withhold)
    out = tmp_path / "synth.csv"
    code, _, stderr = _run(["sample", str(job), "--records", "10", "--out", str(out)], capsys)
    assert code == 2 and len(stderr.splitlines()) == 1
    assert f"{job / 'network.json'}: the CPTs of tub, bronc are withheld" in stderr
    assert not out.exists()


def test_a_dp_release_states_its_guarantee(learned, tmp_path, capsys):
    def dp(document):
        document["privacy"] = {"epsilon": 2.0, "delta": 1e-9}

    job = _job_copy(learned, tmp_path, dp)
    out = tmp_path / "synth.csv"
    code, stdout, stderr = _run(["sample", str(job), "--records", "50", "--out", str(out)], capsys)
    assert code == 0 and stderr == ""
    assert len(stdout.splitlines()) == 1
    assert "synthetic records under the network's (epsilon, delta)-DP guarantee" in stdout
    assert "(epsilon = 2, delta = 1e-09;" in stdout


def test_an_exact_release_is_warned_about(learned, tmp_path, capsys):
    out = tmp_path / "synth.csv"
    code, stdout, stderr = _run(
        ["sample", str(learned["job"]), "--records", "50", "--out", str(out)], capsys
    )
    assert code == 0 and "DP guarantee" not in stdout
    assert stderr == (
        f"warning: {learned['job'] / 'network.json'} is an exact release: no DP guarantee, the "
        "synthetic records carry whatever its CPTs disclose\n"
    )


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--records", "0"), ("--records", "-5"), ("--records", "ten"), ("--records", "2.5")]
    + [("--seed", "-1"), ("--seed", "x")],
)
def test_records_and_seed_must_be_whole_numbers(learned, tmp_path, capsys, flag, value):
    argv = ["sample", str(learned["job"]), "--out", str(tmp_path / "x.csv")]
    argv += ["--records", "10", flag, value] if flag == "--seed" else [flag, value]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda d: d.joinpath("notes.json").write_text("[1, 2]"), "not a ppbn network.json"),
        (lambda d: d.joinpath("notes.csv").write_text("a,b\n1,2\n"), "not a BIF file"),
        (lambda d: d / "missing.json", "file not found"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path, capsys, make, why):
    made = make(tmp_path)
    path = made if isinstance(made, Path) else next(tmp_path.glob("notes.*"))
    argv = ["sample", str(path), "--records", "10", "--out", str(tmp_path / "x.csv")]
    code, _, stderr = _run(argv, capsys)
    assert code == 2 and len(stderr.splitlines()) == 1
    assert stderr.startswith(f"ppbn: error: {path}: ") and why in stderr


def test_a_malformed_privacy_object_names_the_file(learned, tmp_path, capsys):
    def bad(document):
        document["privacy"] = {"epsilon": "one", "delta": 1e-9}

    job = _job_copy(learned, tmp_path, bad)
    out = tmp_path / "synth.csv"
    code, _, stderr = _run(["sample", str(job), "--records", "10", "--out", str(out)], capsys)
    assert code == 2 and stderr.startswith(f"ppbn: error: {job / 'network.json'}: ")
    assert "'privacy' object" in stderr and not out.exists()


def test_a_pram_release_is_warned_about_too(learned, tmp_path, capsys):
    def pram(document):
        document["privacy"] = [{"variables": ["asia"], "gamma": 3.0}]

    job = _job_copy(learned, tmp_path, pram)
    out = tmp_path / "synth.csv"
    code, _, stderr = _run(["sample", str(job), "--records", "10", "--out", str(out)], capsys)
    assert code == 0 and "is a PRAM-path release" in stderr and "no DP guarantee" in stderr
