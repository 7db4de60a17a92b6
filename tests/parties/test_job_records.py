"""A daemon's job folders read back for a status query (JobFiles.ended_info) without
daemons: what a damaged record, a folder that is no job's and a hostile id give."""

from __future__ import annotations

import json
import logging

import pytest

from ppbn.parties.job_files import JobFiles
from ppbn.proto import party_pb2

JobInfo = party_pb2.JobInfo


@pytest.fixture
def files(tmp_path) -> JobFiles:
    return JobFiles("alice", str(tmp_path / "out"), logging.getLogger("test"))


def test_a_damaged_record_is_a_failed_job_naming_the_file(files):
    folder = files.out / "run1"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text('{"state": "SUCC')
    info = files.ended_info("run1")
    assert info.state == JobInfo.FAILED
    assert info.error.startswith(f"alice cannot read the job's record {folder / 'result.json'}:")


def test_a_record_without_an_ended_state_is_not_taken_for_one(files):
    folder = files.out / "run2"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"state": "RUNNING", "result": {}}))
    assert files.ended_info("run2").state == JobInfo.FAILED


def test_a_folder_without_a_record_and_ids_outside_the_folder_are_no_jobs(files, tmp_path):
    (files.out / "notes").mkdir(parents=True)
    (tmp_path / "result.json").write_text(json.dumps({"state": "SUCCEEDED"}))
    for job_id in ("notes", "..", "../out", ".checkpoints", "", "a/b", "x" * 65):
        assert files.ended_info(job_id) is None, job_id


def test_an_interrupted_run_says_what_to_do(files):
    (files.out / ".run3.partial").mkdir(parents=True)
    info = files.ended_info("run3")
    assert info.state == JobInfo.FAILED
    assert str(files.out / ".run3.partial") in info.error and "remove that folder" in info.error
    assert files.taken("run3", running=False) == (
        f"alice already has a job 'run3': {info.error}; or choose another id"
    )
