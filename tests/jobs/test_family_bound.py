"""The largest family a job can lead to, and the one policy check every job kind runs on it.

A search's parent limit is not the whole bound: the edges a request forces (fixed edges,
a start graph) give a child parents the search never chose. Each forced-edge source sets
the bound and is the parameter a refusal names; a white or black list only narrows.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ppbn.bn.schema import Schema
from ppbn.jobs.base import ParameterError, PolicyScope, check_job_policy
from ppbn.jobs.policy import FamilyBound, LocalPolicy, PolicyRefusal
from ppbn.jobs.registry import job_kind
from ppbn.jobs.search_params import SEARCH_DEFAULTS, search_family_bound

NAMES = ("asia", "tub", "smoke", "lung", "bronc", "either", "xray", "dysp")
OWNERS = ("alice", "bob") * 4
SCHEMA = Schema.from_dict(
    {
        "id_column": "id",
        "variables": [
            {"name": n, "owner": o, "states": ["no", "yes"]}
            for n, o in zip(NAMES, OWNERS, strict=True)
        ],
    }
)
ALL_INTO_DYSP = [[v, "dysp"] for v in NAMES if v != "dysp"]


def params(**given) -> dict:
    return {**SEARCH_DEFAULTS, "max_parents": 2, **given}


def test_k2_is_bounded_by_its_parent_limit():
    bound = search_family_bound(params(max_parents=3), SCHEMA)
    assert (bound.parents, bound.size, bound.parameter) == (3, 4, "max_parents")


def test_fixed_edges_set_the_bound_and_are_named():
    bound = search_family_bound(params(search="hc", fixed_edges=ALL_INTO_DYSP), SCHEMA)
    assert (bound.parents, bound.parameter) == (7, "fixed_edges")
    assert "'dysp' 7 parents" in bound.reason


def test_a_start_graph_sets_the_bound_and_is_named():
    bound = search_family_bound(params(search="hc", start=ALL_INTO_DYSP[:5]), SCHEMA)
    assert (bound.parents, bound.parameter) == (5, "start")


def test_start_and_fixed_edges_add_up_for_one_child():
    bound = search_family_bound(
        params(search="hc", start=ALL_INTO_DYSP[:2], fixed_edges=ALL_INTO_DYSP[2:4]), SCHEMA
    )
    assert (bound.parents, bound.parameter) == (4, "start")


def test_forced_families_within_the_parent_limit_leave_it_the_bound():
    bound = search_family_bound(
        params(search="hc", max_parents=3, fixed_edges=ALL_INTO_DYSP[:3]), SCHEMA
    )
    assert (bound.parents, bound.parameter) == (3, "max_parents")


def test_white_and_black_lists_cannot_enlarge_a_family():
    every_edge = [[u, v] for u in NAMES for v in NAMES if u != v]
    bound = search_family_bound(
        params(search="hc", white_list=every_edge, black_list=ALL_INTO_DYSP[:1]), SCHEMA
    )
    assert (bound.parents, bound.parameter) == (2, "max_parents")


def test_black_listed_start_edges_do_not_count():
    bound = search_family_bound(
        params(search="hc", start=ALL_INTO_DYSP[:5], black_list=ALL_INTO_DYSP[:3]), SCHEMA
    )
    assert bound.parents == 2


@pytest.mark.parametrize(
    ("policy", "bound", "words"),
    [
        (LocalPolicy(), FamilyBound(5, "fixed_edges", "x"), "max_parents 4"),
        (
            replace(LocalPolicy(), max_family=3),
            FamilyBound(3, "max_parents", "x"),
            "a family of 4 variables",
        ),
        (
            replace(LocalPolicy(), max_parents=8, max_family=3),
            FamilyBound(3, "max_family", "x"),
            "max_family 3",
        ),
    ],
)
def test_a_bound_over_either_limit_is_refused_naming_the_parameter(policy, bound, words):
    with pytest.raises(PolicyRefusal) as refused:
        policy.require_families(bound)
    assert refused.value.parameter == bound.parameter
    assert words in str(refused.value)


def test_bounds_within_both_limits_and_jobs_without_families_pass():
    LocalPolicy().require_families(FamilyBound(4, "max_parents", "x"))
    LocalPolicy().require_families(None)


SCOPE = PolicyScope("alice", SCHEMA, 5000)


@pytest.mark.parametrize(
    ("kind", "raw", "parameter"),
    [
        ("learn", {"search": "hc", "max_parents": 2, "fixed_edges": ALL_INTO_DYSP}, "fixed_edges"),
        ("learn", {"search": "hc", "max_parents": 2, "start": ALL_INTO_DYSP}, "start"),
        ("learn", {"max_parents": 4}, "max_parents"),  # K2 at u = 4 under max_family 3
        ("learn", {"search": "hc", "max_parents": 4}, "max_parents"),
        ("pram", {"p": 0.3, "max_parents": 4}, "max_parents"),
        (
            "pram-miner",
            {"p": 0.3, "search": "hc", "max_parents": 1, "fixed_edges": ALL_INTO_DYSP},
            "fixed_edges",
        ),
        ("tables", {"max_family": 4}, "max_family"),
    ],
)
def test_every_job_kind_goes_through_the_family_check(kind, raw, parameter):
    strict = replace(LocalPolicy(), max_family=3, source="test: max_family 3")
    job = job_kind(kind)
    normalised = job.check_params(raw, SCHEMA)
    with pytest.raises(PolicyRefusal) as refused:
        check_job_policy(job, normalised, strict, SCOPE)
    assert refused.value.parameter == parameter


def test_k2_takes_no_forced_edges_at_all():
    with pytest.raises(ParameterError) as refused:
        job_kind("learn").check_params({"max_parents": 1, "fixed_edges": ALL_INTO_DYSP}, SCHEMA)
    assert refused.value.parameter == "fixed_edges"


def test_a_peer_cannot_make_a_party_start_more_terms_lanes_than_its_policy_allows():
    """Each terms lane is a process the daemon starts: the job's term_lanes is checked
    against this party's own max_term_lanes, whatever the peer asked for."""
    job = job_kind("learn")
    strict = replace(LocalPolicy(), max_term_lanes=4, source="test: max_term_lanes 4")
    check_job_policy(job, job.check_params({"term_lanes": 4}, SCHEMA), strict, SCOPE)
    with pytest.raises(PolicyRefusal) as refused:
        check_job_policy(job, job.check_params({"term_lanes": 5}, SCHEMA), strict, SCOPE)
    assert refused.value.parameter == "term_lanes"
    assert "term_lanes 5 is above this party's policy maximum max_term_lanes 4" in str(
        refused.value
    )
