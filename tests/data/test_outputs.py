"""Outputs written aside and renamed into place: the paths a result names follow the
rename, whether they were reported relative to the working folder or absolute."""

from __future__ import annotations

import os

from ppbn.data.outputs import relocate, work_folder


def test_relocate_moves_relative_and_absolute_paths_under_the_final_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with work_folder("run", "unused-") as work:
        inside = work / "out-alice" / "job1"
        inside.mkdir(parents=True)
        reported = {
            "relative": str(inside),
            "absolute": os.path.abspath(inside),  # as a daemon reports its job folder
            "elsewhere": "/var/other",
        }
    moved = relocate(reported, work, type(work)("run"))
    assert moved["absolute"] == str(tmp_path / "run" / "out-alice" / "job1")
    assert os.path.isdir(moved["absolute"]) and os.path.isdir(moved["relative"])
    assert moved["elsewhere"] == "/var/other"
