"""`ppbn audit show LOG | head -1`: the reader going away ends the command quietly, with
no BrokenPipeError traceback (the exit status of a program SIGPIPE would have ended)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path):
    log = tmp_path / "audit.log"
    events = (
        json.dumps({"seq": i, "time": "2026-01-01T00:00:00Z", "event": "started", "job": f"j{i}"})
        for i in range(20_000)  # far more than a pipe holds
    )
    log.write_text("\n".join(events) + "\n")
    show = subprocess.Popen(
        [sys.executable, "-m", "ppbn.cli", "audit", "show", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = show.stdout.readline()
    show.stdout.close()  # as `head -1` does once it has its line
    err = show.stderr.read().decode()
    assert show.wait(timeout=120) == 141
    assert b"started" in first
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
