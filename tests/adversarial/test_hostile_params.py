"""A peer's job request whose parameters cannot be used at all (not merely weaker): bob
refuses it before any data-derived byte and names the parameter, so the requesting side
knows what to change.
"""

from __future__ import annotations

import json
import logging

import pytest
from hostile import Pair

from ppbn.errors import UserError
from ppbn.proto import party_pb2

AbortCode = party_pb2.AbortCode
THIRD = 1 / 3
# three states: multi-category p = 2/3 makes every row the same, so P has no inverse
UNUSABLE = [
    ("pram", {"p": 2 / 3, "max_parents": 1}, "p"),
    (
        "pram",
        {
            "randomization": {"b1": {"kind": "matrix", "matrix": [[THIRD] * 3] * 3}},
            "max_parents": 1,
        },
        "randomization",
    ),
]


@pytest.mark.parametrize(("kind", "params", "parameter"), UNUSABLE, ids=("uniform-p", "matrix"))
def test_a_non_invertible_pram_scheme_is_refused_naming_the_parameter(
    pair: Pair, caplog, kind, params, parameter
):
    jobs_before = set(pair.bob.jobs)
    caplog.clear()
    with (
        caplog.at_level(logging.ERROR, logger="ppbn.party.bob"),
        pytest.raises(UserError) as refused,
    ):
        pair.alice.controller.start(kind, json.dumps(params), "", "hostile test")
    message = str(refused.value)
    assert f"parameter {parameter!r}" in message and "bob" in message, message
    bob_lines = [r.getMessage() for r in caplog.records if r.name == "ppbn.party.bob"]
    assert any(
        "refused job" in line and "not invertible" in line and parameter in line
        for line in bob_lines
    ), bob_lines
    assert set(pair.bob.jobs) == jobs_before
    job = next(
        j
        for j in pair.alice.jobs.values()
        if j.error and j.job_id not in jobs_before and not j.result
    )
    assert job.channel.peer_abort_code == AbortCode.BAD_REQUEST
    assert job.channel.stats.bytes_received == 0 and job.channel.stats.messages_received == 0
