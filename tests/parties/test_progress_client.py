"""The operator's client reads a daemon's progress as text from a remote party: whatever
``progress_json`` holds, it keeps what is well-formed and never fails on the rest."""

from __future__ import annotations

import json

import pytest

from ppbn.parties.client import DaemonClient, progress_of
from ppbn.proto import party_pb2

JobInfo = party_pb2.JobInfo


def info(progress_json: str = "", note: str = "", state: int = JobInfo.RUNNING) -> JobInfo:
    return JobInfo(job_id="j", state=state, progress=note, progress_json=progress_json)


@pytest.mark.parametrize(
    "garbage",
    [
        "{",
        "not json",
        "[1, 2, 3]",
        '"a string"',
        "null",
        "1e999",
        "[" * 100_000 + "]" * 100_000,  # too long, or too deep for the parser
        '{"step": ' + "[" * 5000 + "]" * 5000 + "}",
        '{"unit": 5, "done": 1}',  # no unit: its count alone is nothing to show
    ],
)
def test_garbage_leaves_the_note(garbage):
    progress = progress_of(info(garbage, "phase tables"))
    assert progress.note == "phase tables"
    assert not progress.structured and progress.eta_s is None
    assert (progress.describe() or progress.note) == "phase tables"


def test_a_lone_surrogate_in_a_string_field_is_replaced():
    progress = progress_of(info('{"unit": "a\\ud800b", "done": 1}', "n"))
    assert progress.unit == "a?b" and progress.describe().startswith("a?b 1")


def test_fields_of_the_wrong_type_or_range_are_dropped():
    hostile = {
        "step_kind": ["K2 step"],
        "step": True,
        "steps": -3,
        "unit": {"a": 1},
        "done": "12",
        "total": 2**70,
        "bytes": 1.5,
        "elapsed_s": float("nan"),
        "eta_s": -1,
        "steps_eta_s": float("inf"),
        "phase": 7,
        "finished": True,  # the client decides that, from the job's state
        "extra": "ignored",
    }
    progress = progress_of(info(json.dumps(hostile), "n"))
    assert progress.step_kind == progress.unit == progress.phase == ""
    assert (progress.step, progress.steps, progress.done, progress.total, progress.bytes) == (
        0,
        0,
        0,
        0,
        0,
    )
    assert progress.elapsed_s == 0.0 and progress.eta_s is None and progress.steps_eta_s is None
    assert not progress.finished


def test_text_is_made_printable_and_short():
    fields = {"unit": "terms\x1b[2J\r\n", "phase": "x" * 10_000, "step_kind": "K2 step", "step": 1}
    progress = progress_of(info(json.dumps(fields), "bell\x07"))
    assert progress.unit == "terms?[2J??" and progress.note == "bell?"
    assert len(progress.phase) < 300
    assert all(ch.isprintable() for ch in progress.describe())


def test_good_fields_are_kept_and_the_state_sets_finished():
    fields = {"step_kind": "K2 step", "step": 2, "steps": 3, "unit": "ln terms", "done": 5}
    fields |= {"total": 9, "bytes": 4096, "eta_s": 12.5, "elapsed_s": 3}
    progress = progress_of(info(json.dumps(fields), "n", JobInfo.SUCCEEDED))
    assert (progress.step, progress.steps, progress.done, progress.total) == (2, 3, 5, 9)
    assert progress.eta_s == 12.5 and progress.elapsed_s == 3.0 and progress.finished


def test_wait_reports_changes_not_the_clock(monkeypatch):
    """Polls that differ only in elapsed time and estimates are not reported; the end is."""
    base = {"step_kind": "K2 step", "step": 1, "steps": 2, "unit": "ln terms", "total": 10}
    polls = [
        info(json.dumps({**base, "done": 0, "elapsed_s": 1}), "a"),
        info(json.dumps({**base, "done": 0, "elapsed_s": 2, "eta_s": 9}), "b"),
        info(json.dumps({**base, "done": 4, "elapsed_s": 3}), "c"),
        info(json.dumps({**base, "done": 4, "elapsed_s": 3}), "c", JobInfo.SUCCEEDED),
    ]
    client = DaemonClient.__new__(DaemonClient)  # no connection: status is replaced
    client.address = "127.0.0.1:1"
    monkeypatch.setattr(
        client, "status", lambda job_id, following=False: polls.pop(0), raising=False
    )
    monkeypatch.setattr("time.sleep", lambda s: None)
    seen = []
    outcome = client.wait("j", None, seen.append)
    assert outcome.state == "SUCCEEDED"
    assert [(p.done, p.finished) for p in seen] == [(0, False), (4, False), (4, True)]
