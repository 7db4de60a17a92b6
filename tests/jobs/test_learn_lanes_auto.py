"""The learn job with ``term_lanes`` left to the parties ("auto", the default): both
parties in threads over the memory channel, each with its own policy. The job runs on the
smaller offer, learns what one lane learns, and records the peer's offer; a job too small
to fill two lanes runs in the job's own thread as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from secure_runs import learn_job_context
from timeouts import PEER_TIMEOUT_S

from ppbn.bn.schema import Schema
from ppbn.data.datasets import make_dataset
from ppbn.jobs.learn import NETWORK_JSON, check_learn_params, run_learn_job
from ppbn.jobs.policy import LocalPolicy
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.learning import term_lanes as lanes_module
from ppbn.protocols.learning.lanes_agreement import OFFER_TAG
from ppbn.protocols.learning.term_lanes import TermLanes

POLICIES = {  # on 16 cores alice's pool leaves 4, bob's 8 of which his policy allows 2
    "alice": replace(LocalPolicy(), workers=12),
    "bob": replace(LocalPolicy(), workers=8, max_term_lanes=2),
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("learn-lanes-auto")
    make_dataset("asia", 400, 5, out)
    return out


def run_job(data_dir: Path, out: Path, params: dict) -> tuple[dict, dict, dict]:
    """Both parties' learn job; alice's network.json, each party's context and channel."""
    schema = Schema.load(str(data_dir / "schema.json"))
    checked = check_learn_params({"max_parents": 2, "key_bits": 1024, **params}, schema)
    contexts = {
        role: learn_job_context(
            schema, data_dir, role, checked, out / role / "lanes-auto", policy=POLICIES[role]
        )
        for role in ("alice", "bob")
    }
    pair = memory_channel_pair(timeout_s=PEER_TIMEOUT_S, keep_transcript=True)
    run_two_party(
        *(lambda ch, r=role: run_learn_job(r, ch, contexts[r]) for role in ("alice", "bob")),
        pair=pair,
    )
    learned = json.loads((out / "alice" / "lanes-auto" / NETWORK_JSON).read_text())
    return learned, contexts, dict(zip(("alice", "bob"), pair, strict=True))


def test_auto_runs_on_the_smaller_offer_and_learns_what_one_lane_does(
    data_dir, tmp_path, monkeypatch
):
    one, _, _ = run_job(data_dir, tmp_path / "one", {"term_lanes": 1})
    monkeypatch.setattr(lanes_module, "MIN_LANE_TERMS", 4)  # asia's batches fill two lanes
    monkeypatch.setattr("os.cpu_count", lambda: 16)  # both parties' hosts, whatever this one is
    batches: list[int] = []
    run = TermLanes.run
    monkeypatch.setattr(
        TermLanes, "run", lambda self, x, *rest: batches.append(len(x)) or run(self, x, *rest)
    )
    auto, contexts, channels = run_job(data_dir, tmp_path / "auto", {})
    assert batches, "no batch of terms ran on the lanes"
    assert (auto["edges"], auto["parameters"]) == (one["edges"], one["parameters"])
    for role, peer_offer in (("alice", 2), ("bob", 4)):
        assert contexts[role].tallies["term_lanes"] == 2
        offers = [e.value for e in contexts[role].ledger.entries if e.kind == "term_lanes_offer"]
        assert offers == [peer_offer]
        assert [tag for tag, _ in channels[role].transcript].count(OFFER_TAG) == 1


def test_a_small_job_sends_no_offer_and_runs_in_the_jobs_thread(data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)  # offers above 1: the job's size decides
    _, contexts, channels = run_job(data_dir, tmp_path, {})
    for role in ("alice", "bob"):
        assert contexts[role].tallies["term_lanes"] == 1
        assert OFFER_TAG not in {tag for tag, _ in channels[role].transcript}
        assert "term_lanes_offer" not in contexts[role].ledger.kinds()
