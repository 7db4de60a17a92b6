"""The secure learn job's progress, both parties in threads over the memory channel: the
K2 step of every wave, the ln terms of each step counted up to their total, and not one
message more or less on the wire for it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from secure_runs import learn_job_context
from timeouts import PEER_TIMEOUT_S

from ppbn.bn.schema import Schema
from ppbn.data.datasets import make_dataset
from ppbn.data.party_data import load_party_data
from ppbn.jobs.learn import check_learn_params, run_learn_job
from ppbn.jobs.progress import JobProgress
from ppbn.protocols.channel import memory_channel_pair, run_two_party
from ppbn.protocols.learning import scorer as scoring
from ppbn.protocols.learning.config import SecureLearnConfig
from ppbn.protocols.learning.learn import learn_secure
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.tables import TablesConfig

PARAMS = {"max_parents": 2, "key_bits": 1024}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("learn-progress")
    make_dataset("asia", 400, 3, out)
    return out


def run_job(data_dir: Path, out: Path) -> dict[str, list[JobProgress]]:
    """Both parties' job functions; the progress each role saw after every report."""
    schema = Schema.load(str(data_dir / "schema.json"))
    params = check_learn_params(dict(PARAMS), schema)
    seen: dict[str, list[JobProgress]] = {"alice": [], "bob": []}

    def side(role: str):
        # each party its own checkpoints
        context = learn_job_context(
            schema, data_dir, role, params, out / role / "progress-test", job_id="progress-test"
        )
        context.on_progress = lambda major: seen[role].append(context.tracker.snapshot())
        context.notes = lambda note: seen[role].append(context.tracker.snapshot())
        return lambda channel: run_learn_job(role, channel, context)

    run_two_party(side("alice"), side("bob"), pair=memory_channel_pair(timeout_s=PEER_TIMEOUT_S))
    return seen


def test_k2_steps_and_terms_up_to_their_total(data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(scoring, "PIPELINE_MIN_TERMS", 1)  # several groups per step
    seen = run_job(data_dir, tmp_path)
    for role, progress in seen.items():
        steps = [(p.step, p.steps) for p in progress if p.step_kind == "K2 step"]
        assert sorted(set(steps)) == [(1, 2), (2, 2)], role
        assert steps == sorted(steps)  # in order
        assert progress[-1].step_kind == ""  # "K2 done" ends the search
        for step in (1, 2):
            counts = [
                (p.done, p.total) for p in progress if p.step == step and p.unit == "ln terms"
            ]
            totals = {total for _, total in counts}
            assert len(totals) == 1 and min(totals) > 0, (role, step, counts)
            done = [d for d, _ in counts]
            assert done == sorted(done) and done[0] == 0 and done[-1] == totals.pop()
            assert len(set(done)) >= 3  # counted group by group, not only at the end
        notes = [p.note for p in progress]
        assert any(n.startswith("K2 step 2/2 (") and "ln terms" in n for n in notes)


def test_progress_sends_nothing(data_dir):
    """The protocol sends the same messages whether or not anyone follows its progress."""
    schema = Schema.load(str(data_dir / "schema.json"))
    config = SecureLearnConfig(max_parents=2, tables=TablesConfig(key_bits=1024))
    calls = []

    def tags(progress) -> Counter:
        def side(role: str):
            codes = load_party_data(schema, role, data_dir / f"{role}.csv").codes
            follow = progress if role == "alice" else None
            return lambda ch: learn_secure(ch, role, schema, codes, config, Ledger(role), follow)

        pair = memory_channel_pair(timeout_s=PEER_TIMEOUT_S, keep_transcript=True)
        run_two_party(side("alice"), side("bob"), pair=pair)
        return Counter(tag for tag, _ in pair[0].transcript)

    followed = tags(lambda label, done, total: calls.append((label, done, total)))
    assert any(label == "ln terms" for label, _, _ in calls)  # it did report
    assert followed == tags(None)
