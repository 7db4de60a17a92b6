"""A peer cannot get round this daemon's family limits with edges its request forces.

The hostile alice sends each request exactly as written; bob's policy allows families
of at most 3 variables (max_family 3, max_parents 4). Each source of a large family (the
search's own limit, fixed edges, a start graph, the table job's family size) must be
refused at bob before anything derived from its data is sent, naming the parameter, with
no job created; an honest job runs afterwards and stays within the limits.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hostile import Pair, refused_at_bob, write_dataset
from timeouts import WAIT_S

from ppbn.jobs.policy import LocalPolicy

INTO_B2 = [["a1", "b2"], ["b1", "b2"], ["a2", "b2"]]  # three parents: a family of four

FORCED = [
    ("learn", {"search": "hc", "max_parents": 1, "fixed_edges": INTO_B2}, "fixed_edges"),
    ("learn", {"search": "hc", "max_parents": 1, "start": INTO_B2}, "start"),
    (
        "learn",
        {"search": "hc", "max_parents": 1, "start": INTO_B2[:2], "fixed_edges": INTO_B2[2:]},
        "start",
    ),
    (
        "learn",
        {"max_parents": 1, "fixed_edges": INTO_B2},
        "fixed_edges",
    ),  # K2 takes no forced edges
    ("learn", {"max_parents": 3}, "max_parents"),  # K2 within max_parents, over max_family
    ("learn", {"search": "hc", "max_parents": 3}, "max_parents"),
    ("pram", {"p": 0.3, "max_parents": 3}, "max_parents"),
    ("tables", {"max_family": 4}, "max_family"),
]


@pytest.fixture(scope="module")
def strict_pair(tmp_path_factory, pki):
    base = tmp_path_factory.mktemp("forced")
    files = write_dataset(base / "data", 150, seed=11)
    policy = replace(LocalPolicy(), max_family=3, source="test: families of at most 3")
    with Pair(base, files, pki, policy) as running:
        yield running


@pytest.mark.parametrize(("kind", "params", "parameter"), FORCED, ids=lambda x: str(x)[:48])
def test_a_family_over_the_limit_is_refused_whatever_forces_it(
    strict_pair, caplog, kind, params, parameter
):
    refused_at_bob(strict_pair, caplog, kind, params, parameter)


def test_an_honest_job_with_forced_edges_runs_afterwards_within_the_limits(strict_pair, caplog):
    refused_at_bob(strict_pair, caplog, *FORCED[0])
    params = {"search": "hc", "max_parents": 2, "fixed_edges": INTO_B2[:2]}
    job = strict_pair.alice.controller.start("learn", json.dumps(params), "", "honest test")
    assert job.done.wait(WAIT_S), "honest job did not finish"
    assert job.error == "", job.error
    bob_side = strict_pair.bob.jobs[job.job_id]
    assert bob_side.done.wait(WAIT_S) and bob_side.error == ""
    network = json.loads(
        (Path(strict_pair.bob.config.out_dir) / job.job_id / "network.json").read_text()
    )
    assert {"a1", "b1"} <= set(network["parents"]["b2"])
    assert max(len(ps) for ps in network["parents"].values()) <= 2
