"""The circuit commands: `ppbn circuit run` (plain and garbled), `ppbn circuit costs`, and
that `ppbn bench gc` / `ppbn bench ot` run and report their JSON keys (tiny sizes; no timing
is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sha256_bristol import ABC_BLOCK, ABC_DIGEST, SHA256_IV, sha256_compression_bristol

from ppbn.cli import main


@pytest.fixture
def sha256_file(tmp_path: Path) -> Path:
    """The project's generated SHA-256 compression netlist, written where the CLI reads it."""
    path = tmp_path / "sha256.txt"
    path.write_text(sha256_compression_bristol())
    return path


@pytest.mark.parametrize("garbled", [False, True])
def test_circuit_run_prints_the_sha256_known_answer(
    garbled: bool, sha256_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["circuit", "run", "--bristol", str(sha256_file), "--input", ABC_BLOCK]
    argv += ["--input", SHA256_IV] + (["--garbled"] if garbled else [])
    assert main(argv) == 0
    assert capsys.readouterr().out.split() == [ABC_DIGEST]


def test_circuit_run_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["circuit", "run", "--bristol", str(tmp_path / "missing.txt"), "--input", "0"]) == 2
    assert "cannot read" in capsys.readouterr().err
    adder = tmp_path / "and.txt"
    adder.write_text("1 3\n2 1 1\n1 1\n2 1 0 1 2 AND\n")
    assert main(["circuit", "run", "--bristol", str(adder), "--input", "1"]) == 2
    assert "2 inputs" in capsys.readouterr().err
    assert main(["circuit", "run", "--bristol", str(adder), "--input", "2", "--input", "1"]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert (
        main(
            ["circuit", "run", "--bristol", str(adder), "--input", "1", "--input", "1", "--garbled"]
        )
        == 0
    )
    assert capsys.readouterr().out.split() == ["1"]


def test_circuit_costs_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["circuit", "costs", "--width", "16", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["width"] == 16 and report["and_gates"]["add"] == 15


def test_bench_gc_and_ot_report_their_keys(
    sha256_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "gc", "--bristol", str(sha256_file), "--instances", "2", "--repeats", "1"]
    assert main([*argv, "--format", "json"]) == 0
    gc = json.loads(capsys.readouterr().out)
    assert {
        "garble_and_per_s",
        "eval_and_per_s",
        "bytes_per_and",
        "single_instance_garble_and_per_s",
    } <= set(gc)
    assert gc["bytes_per_and"] == 32.0
    assert gc["and_gates"] == sha256_compression_bristol().count(" AND\n")
    for parties in ("processes", "threads"):
        argv = ["bench", "ot", "--count", "1000", "--repeats", "1", "--parties", parties]
        assert main([*argv, "--format", "json"]) == 0
        ot = json.loads(capsys.readouterr().out)
        assert ot["parties"] == parties
        assert (
            ot["count"] == 1000 and ot["ot_per_s"] > 0 and 34 <= ot["bytes_per_ot"] < 35
        )  # u: 2 bytes (SoftSpokenOT k = 8), y: 32
