"""The secure path through the daemons: `ppbn simulate` (default path), `ppbn learn`
parameters, the shared disclosure and `ppbn shares combine`."""

from __future__ import annotations

import json

import pytest
from known_files import TEST_POLICY as KNOWN_POLICY

from ppbn.bn.schema import Schema
from ppbn.cli import main
from ppbn.errors import UserError
from ppbn.jobs.learn import check_learn_params

TEST_POLICY = str(KNOWN_POLICY)


def test_simulate_secure_path_equals_the_reference(tmp_path, capsys):
    code = main(
        [
            "simulate",
            "--network",
            "asia",
            "--records",
            "1200",
            "--seed",
            "3",
            "--max-parents",
            "2",
            "--score",
            "yw0",
            "--params",
            '{"key_bits": 1024}',
            "--policy",
            TEST_POLICY,
            "--format",
            "json",
            "--out",
            str(tmp_path),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report.get("error")
    assert report["kind"] == "learn" and report["state"] == "SUCCEEDED"
    assert report["reference_check"]["same_structure_and_order"]
    assert report["reference_check"]["max_abs_cpt_difference"] < 1e-9
    assert "for tests only" in report["result"]["warning"]  # 1024-bit keys never pass quietly
    for role in ("alice", "bob"):
        stats = report["stats"][role]
        for key in (
            "wall_s",
            "phases",
            "bytes_sent",
            "bytes_received",
            "rounds",
            "paillier_encryptions",
            "and_gates",
            "ots",
        ):
            assert key in stats, key
        out = next(tmp_path.glob(f"out-{role}/*/network.json"))
        network = json.loads(out.read_text())
        assert network["edges"] == report["reference_check"]["reference_edges"]
        assert {"order", "edges", "parents", "parameters", "score", "tau", "stats"} <= set(network)
        assert (out.parent / "network.bif").is_file()
        ledger = json.loads((out.parent / "ledger.json").read_text())
        assert {e["kind"] for e in ledger["entries"]} <= {
            "schema",
            "record_count",
            "records_match",
            "security_level",
            "k2_decision",
            "edge",
            "structure",
            "parameter",
        }


def test_shared_disclosure_and_combine(tmp_path, capsys):
    """Also the daemons' path of SoftSpokenOT at k = 4 (``--ot-k 4``: job parameter ot_k)."""
    code = main(
        [
            "simulate",
            "--network",
            "asia",
            "--records",
            "800",
            "--max-parents",
            "1",
            "--ot-k",
            "4",
            "--disclosure",
            "shared",
            "--params",
            '{"key_bits": 1024}',
            "--policy",
            TEST_POLICY,
            "--format",
            "json",
            "--out",
            str(tmp_path),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["reference_check"]["max_abs_cpt_difference"] is None
    assert report["reference_check"]["same_structure_and_order"], report["reference_check"]
    alice = report["stats"]["alice"]
    u_bytes = sum(
        kinds["ot.ext.u"]["bytes_sent"] + kinds["ot.ext.u"]["bytes_received"]
        for kinds in alice["bytes_by_phase_and_kind"].values()
        if "ot.ext.u" in kinds
    )
    assert 3.9 < u_bytes / alice["ots"] < 4.1  # 128 / 4 bits of u per OT (2 bytes at k = 8)
    files = {
        role: next(tmp_path.glob(f"out-{role}/*/parameter_shares.json"))
        for role in ("alice", "bob")
    }
    network = json.loads(next(tmp_path.glob("out-alice/*/network.json")).read_text())
    assert network["parameters"] == {} and sorted(network["parameters_withheld"]) == sorted(
        network["order"]
    )
    opened_path = tmp_path / "opened.json"
    assert (
        main(
            [
                "shares",
                "combine",
                "--alice",
                str(files["alice"]),
                "--bob",
                str(files["bob"]),
                "--out",
                str(opened_path),
            ]
        )
        == 0
    )
    opened = json.loads(opened_path.read_text())["parameters"]
    for v, spec in opened.items():
        assert all(abs(sum(row) - 1) < 1e-9 for row in spec["table"]), v
    assert (
        main(["shares", "combine", "--alice", str(files["alice"]), "--bob", str(files["alice"])])
        == 2
    )
    assert "one file of alice and one of bob" in capsys.readouterr().err


def test_learn_parameters_are_checked(asia_dir):
    schema = Schema.load(str(asia_dir / "schema.json"))
    assert check_learn_params({}, schema)["score"] == "exact"
    assert check_learn_params({}, schema)["overlap_tables"] is True
    assert check_learn_params({"overlap_tables": False}, schema)["overlap_tables"] is False
    assert check_learn_params({}, schema)["split_terms"] is False
    assert check_learn_params({"split_terms": True}, schema)["split_terms"] is True
    assert check_learn_params({}, schema)["term_lanes"] == "auto"
    assert check_learn_params({"term_lanes": 8}, schema)["term_lanes"] == 8
    both = check_learn_params({"term_lanes": "auto", "split_terms": True}, schema)
    assert both["term_lanes"] == "auto" and both["split_terms"] is True  # "auto" yields to it
    assert check_learn_params({}, schema)["ot_k"] == 8
    assert check_learn_params({"ot_k": 4}, schema)["ot_k"] == 4
    for bad, message in [
        ({"ot_k": 2}, "ot_k must be one of 4, 8"),
        ({"ot_k": 16}, "ot_k must be one of 4, 8"),
        ({"ot_k": "8"}, "ot_k must be one of 4, 8"),
        ({"ot_k": True}, "ot_k must be one of 4, 8"),
        ({"ot_k": 4.0}, "ot_k must be one of 4, 8"),
        ({"term_lanes": 0}, "term_lanes must be an integer in 1..64"),
        ({"term_lanes": 65}, "term_lanes must be an integer in 1..64"),
        ({"term_lanes": True}, "term_lanes must be an integer"),
        ({"term_lanes": 2.0}, "term_lanes must be an integer"),
        ({"term_lanes": "Auto"}, "term_lanes must be an integer in 1..64 or 'auto'"),
        ({"term_lanes": "4"}, "term_lanes must be an integer in 1..64 or 'auto'"),
        ({"term_lanes": 2, "split_terms": True}, "two ways to split; pick one"),
        ({"overlap_tables": "yes"}, "overlap_tables must be true or false"),
        ({"split_terms": 1}, "split_terms must be true or false"),
        ({"score": "nope"}, "score must be one of"),
        ({"tau": 0}, "tau must be a number"),
        ({"max_parents": 99}, "max_parents must be an integer"),
        ({"order": ["asia"]}, "order must list every variable"),
        ({"disclosure": "everyone"}, "disclosure must be one of"),
        ({"colour": 1}, "unknown parameter 'colour'"),
    ]:
        with pytest.raises(UserError, match=message):
            check_learn_params(bad, schema)
