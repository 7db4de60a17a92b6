"""The local pair's daemons import the installed ppbn, whatever the working folder holds:
a clone named ``ppbn`` in the folder where a user runs ``ppbn simulate`` must not shadow
the package in the daemons it starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PPBN = Path(sys.executable).parent / "ppbn"  # the console script, as a user runs it


def test_a_ppbn_folder_in_the_working_folder_does_not_shadow_the_package(tmp_path):
    (tmp_path / "ppbn").mkdir()
    (tmp_path / "ppbn" / "__init__.py").write_text("raise ImportError('the clone, not ppbn')\n")
    argv = ["simulate", "--network", "asia", "--records", "200", "--path", "job"]
    run = subprocess.run(
        [str(PPBN), *argv, "--job", "ping", "--out", str(tmp_path / "run")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "the clone, not ppbn" not in run.stdout + run.stderr
