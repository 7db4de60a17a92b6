"""Issue 10: a peer that asks for weaker parameters is refused before any data-derived byte.

For each weakening, the hostile alice opens a job at bob; bob must answer with one ABORT
frame (a code and the parameter name, no ACCEPT, no DATA), name the parameter in its own
log, create no job, and then serve the next honest job.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from hostile import PERMISSIVE, Pair, refused_at_bob, write_dataset
from timeouts import WAIT_S

from ppbn.errors import UserError
from ppbn.jobs.policy import LocalPolicy
from ppbn.proto import party_pb2

AbortCode = party_pb2.AbortCode
IDENTITY_FOR_ALL = {v: {"kind": "identity"} for v in ("a1", "b1", "a2", "b2")}

WEAKENINGS = [
    ("pram", {"p": 0.0}, "p"),
    ("pram", {"randomization": IDENTITY_FOR_ALL}, "randomization"),
    ("pram", {"randomization": {"a1": {"kind": "multi_category", "p": 0.3}}}, "randomization"),
    ("pram", {"p": 0.3, "sensitive": []}, "sensitive"),
    ("pram", {"p": 0.3, "sensitive": ["a1", "b1"]}, "sensitive"),
    ("pram", {"p": 0.05}, "p"),
    ("pram", {"p": 0.3, "seed": 7}, "seed"),
    ("learn", {"max_parents": 1, "key_bits": 1024}, "key_bits"),
    ("learn", {"max_parents": 1, "disclosure": "public"}, "disclosure"),
    ("learn", {"max_parents": 1, "workers": 10_000}, "workers"),
    ("tables", {"max_family": 2, "workers": 10_000}, "workers"),
    ("learn", {"max_parents": 50}, "max_parents"),
    ("tables", {"max_family": 2, "statistical_bits": 20}, "statistical_bits"),
    ("tables", {"max_family": 2, "key_bits": 1024}, "key_bits"),
    # a delta above bob's dp_max_delta, sent by a peer whose own policy lets it through
    ("learn", {"max_parents": 1, "dp_epsilon": 1.0, "dp_delta": 5e-4}, "dp_delta"),
]


@pytest.mark.parametrize(("kind", "params", "parameter"), WEAKENINGS, ids=lambda x: str(x)[:40])
def test_a_weaker_parameter_is_refused_before_any_data_derived_byte(
    pair, caplog, kind, params, parameter
):
    refused_at_bob(pair, caplog, kind, params, parameter)


def test_the_daemon_serves_the_next_honest_job(pair, caplog):
    refused_at_bob(pair, caplog, "pram", {"p": 0.0}, "p")
    job = pair.alice.controller.start(
        "pram", json.dumps({"p": 0.3, "max_parents": 1}), "", "honest test"
    )
    assert job.done.wait(WAIT_S), "honest job did not finish"
    assert job.error == "" and job.result is not None
    bob_side = pair.bob.jobs[job.job_id]
    assert bob_side.done.wait(WAIT_S) and bob_side.result is not None


def test_too_few_records_are_refused_with_the_reason(tmp_path, pki, caplog):
    """99 records: bob's policy minimum (100) refuses any data job, whatever alice allows."""
    files = write_dataset(tmp_path / "data", 99, seed=2)
    with Pair(tmp_path, files, pki, LocalPolicy()) as small:
        caplog.set_level(logging.ERROR, logger="ppbn.party.bob")
        refused_at_bob(small, caplog, "pram", {"p": 0.3, "max_parents": 1}, "records")
        assert any("reveal individual records" in r.getMessage() for r in caplog.records)


def test_the_requesting_daemon_refuses_its_own_operator_first(tmp_path, pki):
    """An honest daemon checks its own policy before it contacts the peer at all."""
    files = write_dataset(tmp_path / "data", 150, seed=3)
    with Pair(tmp_path, files, pki, LocalPolicy()) as running:
        bob = running.bob
        with pytest.raises(
            UserError,
            match=r"refused by bob.s policy .parameter .key_bits..: key_bits 1024 is below",
        ):
            bob.controller.start(
                "learn", json.dumps({"key_bits": 1024, "max_parents": 1}), "", "operator"
            )
        with pytest.raises(UserError, match=r"seed is never taken from a job message"):
            bob.controller.start("pram", json.dumps({"p": 0.3, "seed": 1}), "", "operator")
        assert not running.alice.jobs  # alice never heard of either


def test_a_reused_job_id_is_refused_on_disk_too(tmp_path, pki):
    files = write_dataset(tmp_path / "data", 150, seed=4)
    with Pair(tmp_path, files, pki, LocalPolicy()) as running:
        (Path(running.bob.config.out_dir) / "run1").mkdir(parents=True)
        with pytest.raises(UserError, match=r"already has a job with this id"):
            running.alice.controller.start("ping", json.dumps({"rounds": 1}), "run1", "test")
        with pytest.raises(UserError, match=r"bob already has a job 'run1'"):
            running.bob.controller.start("ping", json.dumps({"rounds": 1}), "run1", "test")


def test_a_stricter_local_policy_refuses_a_whole_path(tmp_path, pki):
    files = write_dataset(tmp_path / "data", 150, seed=5)
    secure_only = replace(LocalPolicy(), paths=("secure",), source="test: secure only")
    with (
        Pair(tmp_path, files, pki, secure_only) as running,
        pytest.raises(UserError, match=r"parameter 'kind'"),
    ):
        running.alice.controller.start("pram", json.dumps({"p": 0.4}), "", "test")
    assert PERMISSIVE.min_records == 1  # the hostile side allowed it; bob alone decided
