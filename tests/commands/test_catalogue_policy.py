"""The family limits through the normal CLI: real daemons, the default or a stricter policy.

The requesting daemon refuses its own operator's request before it contacts the peer (the
peer's own refusal of the same request is tested with a hostile peer in
tests/adversarial/test_forced_families.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppbn.cli import main

ASIA = ("asia", "tub", "smoke", "lung", "bronc", "either", "xray", "dysp")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("policy-cli")
    edges = base / "into-dysp.json"
    edges.write_text(json.dumps([[v, "dysp"] for v in ASIA if v != "dysp"]))
    strict = base / "strict.toml"
    strict.write_text("max_family = 3\n")
    return {"edges": edges, "strict": strict}


SIMULATE = ["simulate", "--network", "asia", "--records", "300", "--format", "json"]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            ["--search", "hc", "--max-parents", "4", "--fixed-edges", "{edges}"],
            "(parameter 'fixed_edges'): the fixed edges give 'dysp' 7 parents, above this party's policy maximum max_parents 4",
        ),
        (
            ["--search", "hc", "--max-parents", "1", "--disclosure", "owner", "--start", "{edges}"],
            "(parameter 'start'): the start graph (with the fixed edges) gives 'dysp' 7 parents",
        ),
        (
            ["--max-parents", "4", "--policy", "{strict}"],
            "(parameter 'max_parents'): max_parents 4 lets a child have 4 parents, a family of 5 variables, "
            "above this party's policy maximum max_family 3",
        ),
        (
            ["--search", "hc", "--max-parents", "4", "--policy", "{strict}"],
            "policy maximum max_family 3",
        ),
    ],
)
def test_a_family_over_the_policy_is_refused_in_one_line(files, capsys, extra, words):
    argv = SIMULATE + [a.format(**{k: str(v) for k, v in files.items()}) for a in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("ppbn: error")]
    assert len(lines) == 1 and words in lines[0], err
    assert "Traceback" not in err
