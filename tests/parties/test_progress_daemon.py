"""A secure learn job between two in-process daemons: its progress as the operator's
client sees it (JobInfo.progress_json), in the daemon's JSON log and in
``ppbn learn --status``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from daemon_trio import Trio
from known_files import TEST_POLICY
from timeouts import WAIT_S

from ppbn.cli import main as ppbn_main
from ppbn.data.datasets import make_dataset
from ppbn.jobs.policy import LocalPolicy
from ppbn.parties.logs import JsonFormatter
from ppbn.parties.pki import make_local_pki

FIELDS = {"phase", "step_kind", "step", "steps", "unit", "done", "total", "bytes", "eta_s"}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("progress-daemons")
    make_dataset("asia", 400, 5, base / "data")
    make_local_pki(base / "certs")
    return base


@pytest.fixture
def pair(world, tmp_path):
    trio = Trio(world, tmp_path, "progress-seed")
    policy = LocalPolicy.load(TEST_POLICY)  # 1024-bit keys: quick
    for role in ("alice", "bob"):
        trio.start(role, accept_miner=False, policy=policy)
    trio.daemons.pop("miner", None)
    trio.wait_for_handshakes()
    yield trio
    trio.stop()


class JsonLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(JsonFormatter("alice"))
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


def test_learn_job_progress_reaches_the_operator_and_the_log(pair, world, capsys):
    logger = logging.getLogger("ppbn.party.alice")
    handler, level = JsonLines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    seen = []
    try:
        with pair.client("alice") as client:
            job_id = client.start("learn", {"max_parents": 2, "key_bits": 1024})
            outcome = client.wait(job_id, WAIT_S, seen.append)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert outcome.state == "SUCCEEDED", outcome.error

    # the client: structured progress while it ran, then the end
    assert seen and seen[-1].finished and not any(p.finished for p in seen[:-1])
    assert any(p.structured and p.bytes > 0 for p in seen)
    moved = [p.bytes for p in seen]
    assert moved == sorted(moved)

    # the JSON log: each K2 step as it begins, with the fields as keys
    records = [line["progress"] for line in handler.lines if "progress" in line]
    assert records and all(set(r) >= FIELDS for r in records)
    steps = [(r["step"], r["steps"]) for r in records if r["step_kind"] == "K2 step"]
    assert (1, 2) in steps and (2, 2) in steps
    assert any(r["unit"] == "ln terms" and r["total"] > 0 for r in records)
    assert all(line["job"] == job_id for line in handler.lines if "progress" in line)

    # ppbn learn --status: the progress object, then the human line
    address = ["--peer", pair.address("alice"), "--tls-dir", str(world / "certs" / "alice")]
    assert ppbn_main(["learn", *address, "--status", job_id, "--format", "json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert set(status["progress"]) >= FIELDS and status["progress"]["bytes"] > 0
    assert ppbn_main(["learn", *address, "--status", job_id]) == 0
    assert "progress: phase parameters" in capsys.readouterr().out
