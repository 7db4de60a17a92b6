"""What the benchmarks with party processes share (``bench tables``, ``bench psi``,
``bench ln``, ``bench ot``): collecting each party process's report, and peak memory."""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path

from ppbn.errors import UserError


def collect_reports(
    processes: list[multiprocessing.Process], report_in: Connection
) -> dict[str, dict]:
    """Each started party process's report, by role; a dead process or a reported error
    ends the bench with one line, and no party process outlives it."""
    reports: dict[str, dict] = {}
    try:
        while len(reports) < 2:
            if not report_in.poll(1.0):
                if any(p.exitcode not in (None, 0) for p in processes):
                    raise UserError("a party process died; see its traceback above")
                continue
            item = report_in.recv()
            reports[item["role"]] = item
            if "error" in item:
                raise UserError(f"{item['role']}: {item['error']}")
    finally:
        for p in processes:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
    return reports


def peak_rss_mib(pid: int | str = "self") -> float:
    """VmHWM of one process: the peak resident set of its own address space (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def children_peak_rss_mib() -> float:
    """Largest VmHWM among this process's children (the worker pool)."""
    me = str(os.getpid())
    peaks = [0.0]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[1] == me:
                peaks.append(peak_rss_mib(entry.name))
        except OSError:
            continue
    return max(peaks)
