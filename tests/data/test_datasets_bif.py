"""``ppbn datasets make --bif FILE``: a two-party data set sampled from the user's own BIF
file. The network is one pgmpy does not ship; bad files give one line naming the file
(exit 2) and write nothing; the secure path on the made data equals the plaintext
reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from known_files import TEST_POLICY

from ppbn.bn.model import structural_hamming_distance
from ppbn.bn.networks import read_bif
from ppbn.cli import main

# Five variables, two or three states each (one state with a blank, one with a '-'); the
# CPTs in the layout of ppbn.bn.model: one row per parent configuration, first parent slowest.
STATES = {
    "Season": ("winter", "summer", "autumn"),
    "Rain": ("yes", "no"),
    "Sprinkler": ("on", "off"),
    "Grass": ("dry", "half-wet", "soaking wet"),
    "Slippery": ("yes", "no"),
}
PARENTS = {
    "Season": (),
    "Rain": ("Season",),
    "Sprinkler": ("Season",),
    "Grass": ("Rain", "Sprinkler"),
    "Slippery": ("Grass",),
}
CPTS = {
    "Season": [[0.3, 0.45, 0.25]],
    "Rain": [[0.8, 0.2], [0.1, 0.9], [0.6, 0.4]],
    "Sprinkler": [[0.05, 0.95], [0.85, 0.15], [0.3, 0.7]],
    "Grass": [[0.05, 0.15, 0.8], [0.1, 0.6, 0.3], [0.2, 0.7, 0.1], [0.9, 0.08, 0.02]],
    "Slippery": [[0.05, 0.95], [0.5, 0.5], [0.9, 0.1]],
}


def bif_text(cpts: dict = CPTS, parents: dict = PARENTS, states: dict = STATES) -> str:
    """The network as a BIF file written by hand (not by ppbn's writer), in the bnlearn style."""
    lines = ["network garden {", "}"]
    for v, ss in states.items():
        lines += [f"variable {v} {{", f"  type discrete [ {len(ss)} ] {{ {', '.join(ss)} }};", "}"]
    for v, rows in cpts.items():
        ps = parents[v]
        if not ps:
            lines += [f"probability ( {v} ) {{", f"  table {', '.join(map(str, rows[0]))};", "}"]
            continue
        lines.append(f"probability ( {v} | {', '.join(ps)} ) {{")
        configs = [()]
        for p in ps:
            configs = [c + (s,) for c in configs for s in states[p]]
        for config, row in zip(configs, rows, strict=True):
            lines.append(f"  ({', '.join(config)}) {', '.join(map(str, row))};")
        lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def garden(tmp_path_factory) -> tuple[Path, Path]:
    """The BIF file and a data set made from it: 500 records."""
    folder = tmp_path_factory.mktemp("garden")
    bif = folder / "garden.bif"
    bif.write_text(bif_text())
    data = folder / "data"
    assert (
        main(["datasets", "make", "--bif", str(bif), "--records", "500", "--out", str(data)]) == 0
    )
    return bif, data


def test_make_from_a_bif_file(garden, capsys):
    bif, data = garden
    assert sorted(p.name for p in data.iterdir()) == [
        "alice.csv",
        "bob.csv",
        "schema.json",
        "truth.bif",
    ]
    schema = json.loads((data / "schema.json").read_text())
    declared = {v["name"]: tuple(v["states"]) for v in schema["variables"]}
    assert declared == STATES
    assert [v["owner"] for v in schema["variables"]] == ["alice", "bob"] * 2 + ["alice"]
    for party in ("alice", "bob"):
        lines = (data / f"{party}.csv").read_text().splitlines()
        assert len(lines) == 501
    truth, name = read_bif(data / "truth.bif")
    assert name == "garden"
    assert truth.parents == PARENTS and truth.states == STATES
    for v, rows in CPTS.items():
        assert np.array_equal(truth.cpts[v], np.array(rows)), v


def test_sample_follows_the_file(garden):
    """The records come from the file's CPTs: the root's frequencies are near its table."""
    _, data = garden
    schema = json.loads((data / "schema.json").read_text())
    owner = next(v["owner"] for v in schema["variables"] if v["name"] == "Season")
    lines = (data / f"{owner}.csv").read_text().splitlines()
    column = lines[0].split(",").index("Season")
    seasons = [line.split(",")[column] for line in lines[1:]]
    shares = [seasons.count(s) / len(seasons) for s in STATES["Season"]]
    assert np.allclose(shares, CPTS["Season"][0], atol=0.07)


def _bad_sum() -> str:
    cpts = dict(CPTS)
    cpts["Grass"] = [*CPTS["Grass"][:3], [0.9, 0.08, 0.2]]
    return bif_text(cpts)


def _cycle() -> str:
    parents = {**PARENTS, "Season": ("Slippery",)}
    cpts = {**CPTS, "Season": [[0.3, 0.45, 0.25], [0.3, 0.45, 0.25]]}
    return bif_text(cpts, parents)


def _renamed(old: str, new: str) -> str:
    return bif_text().replace(old, new)


REFUSED = {
    "missing": (None, "BIF file not found"),
    "not BIF": ("Season,Rain\nwinter,yes\n", "not a BIF file (no 'variable' declaration)"),
    "not text": (b"\x89PNG\r\n\x1a\n\xff\xfe", "not a BIF file (not UTF-8 text)"),
    "cycle": (
        _cycle(),
        "not a valid Bayesian network: the graph has a cycle (the edge Grass->Slippery closes it)",
    ),
    "CPT sum": (
        _bad_sum(),
        "not a valid Bayesian network (pgmpy's check_model): the probabilities of 'Grass' "
        "given Rain=no, Sprinkler=off sum to 1.18, not 1",
    ),
    "name": (
        _renamed("Sprinkler", "Sprinkler/pump"),
        "variable 'Sprinkler/pump': the name has '/', which a BIF file cannot carry; rename it in "
        "the file (letters, digits, '_', '-', '.'), e.g. 'Sprinkler_pump'",
    ),
    "state": (
        _renamed("half-wet", "half|wet"),
        "variable 'Grass', state 'half|wet': the state has '|', which a BIF file cannot carry; "
        "rename it in the file",
    ),
    # the text itself, read before pgmpy's reader (which reads these silently, or fails later
    # without the variable or the line)
    "cut inside the last block": (
        bif_text().split("(half-wet)")[0],
        "line 37: the probability block of 'Slippery' is incomplete: the file ends before its "
        "closing '}' (is the file cut short?)",
    ),
    "cut between blocks": (
        bif_text().split("probability ( Slippery")[0],
        "line 15: variable 'Slippery' has no probability block (is the file cut short?)",
    ),
    "state count": (
        bif_text().replace("[ 2 ] { yes, no }", "[ 3 ] { yes, no }", 1),
        "line 6: variable 'Rain' declares 3 states but lists 2 (yes, no)",
    ),
    "declared twice": (
        bif_text().replace(
            "variable Grass", "variable Rain {\n  type discrete [ 2 ] { a, b };\n}\nvariable Grass"
        ),
        "line 12: variable 'Rain' is declared twice (lines 6 and 12)",
    ),
    "NaN cell": (
        _renamed("(no, on) 0.2,", "(no, on) NaN,"),
        "line 34: the probabilities of 'Grass' given Rain=no, Sprinkler=on: 'NaN' is not a number",
    ),
    "negative cell": (
        _renamed("(summer) 0.1, 0.9", "(summer) -0.1, 1.1"),
        "line 23: the probabilities of 'Rain' given Season=summer: -0.1 is negative",
    ),
    "row missing": (
        _renamed("  (yes, off) 0.1, 0.6, 0.3;\n", ""),
        "line 31: the probability block of 'Grass' has no row for Rain=yes, Sprinkler=off",
    ),
    "row too short": (
        _renamed("(dry) 0.05, 0.95", "(dry) 1.0"),
        "line 38: the probabilities of 'Slippery' given Grass=dry: 1 number, but 'Slippery' has 2 "
        "states",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_bif_is_one_line_and_writes_nothing(tmp_path, capsys, case):
    content, message = REFUSED[case]
    bif = tmp_path / "net.bif"
    if isinstance(content, bytes):
        bif.write_bytes(content)
    elif content is not None:
        bif.write_text(content)
    out = tmp_path / "out"
    code = main(["datasets", "make", "--bif", str(bif), "--records", "50", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert err.startswith(f"ppbn: error: {bif}: {message}"), err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if content is None else ["net.bif"])


def test_network_and_bif_exclude_each_other(tmp_path, capsys):
    bif = tmp_path / "net.bif"
    bif.write_text(bif_text())
    out = str(tmp_path / "out")
    with pytest.raises(SystemExit) as both:
        main(
            [
                "datasets",
                "make",
                "--network",
                "asia",
                "--bif",
                str(bif),
                "--records",
                "9",
                "--out",
                out,
            ]
        )
    assert both.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit) as neither:
        main(["datasets", "make", "--records", "9", "--out", out])
    assert neither.value.code == 2
    assert "one of the arguments --network --bif is required" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_secure_learn_on_bif_data_equals_the_reference(garden, tmp_path, capsys):
    _, data = garden
    code = main(
        [
            "simulate",
            "--data",
            str(data),
            "--max-parents",
            "2",
            "--params",
            '{"key_bits": 1024}',  # fast keys: the test policy allows them, for tests only
            "--policy",
            str(TEST_POLICY),
            "--format",
            "json",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report.get("error")
    assert report["kind"] == "learn" and report["state"] == "SUCCEEDED"
    check = report["reference_check"]
    assert check["same_structure_and_order"]
    assert check["max_abs_cpt_difference"] < 1e-9
    learned = json.loads(next((tmp_path / "run").glob("out-alice/*/network.json")).read_text())
    reference = {v: () for v in STATES}
    for p, c in check["reference_edges"]:
        reference[c] += (p,)
    ours = {v: tuple(ps) for v, ps in learned["parents"].items()}
    assert structural_hamming_distance(ours, reference) == 0
    assert learned["edges"] == check["reference_edges"] and learned["edges"]
