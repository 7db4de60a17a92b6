"""A job's files under ``--out``: written aside while it runs, put in place whole when it ends.

Each job writes into ``OUT/.JOB_ID.partial`` and the folder is renamed to ``OUT/JOB_ID``
only when the job has ended, so a reader sees a whole job folder or none. A write that
fails is told in one line naming the file, the OS's reason and what to do.

The folders are also what a daemon knows of the jobs that ended before it (re)started:
their ids stay taken, and a status query reads their state back from ``result.json``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from ppbn.data.outputs import commit_dir, failed_file, io_remedy, reason, relocate
from ppbn.errors import UserError
from ppbn.jobs.checkpoint import CheckpointStore
from ppbn.parties.job import Job, JobRefused
from ppbn.proto import party_pb2

JobInfo = party_pb2.JobInfo
AbortCode = party_pb2.AbortCode
ENDED_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")
MAX_RESULT_BYTES = 16 * 1024 * 1024  # a result.json read back for a status query


def partial_dir(out: Path, job_id: str) -> Path:
    """Where job ``job_id`` writes while it runs (job ids never start with '.')."""
    return out / f".{job_id}.partial"


def _folder_name(job_id: str) -> bool:
    """Whether ``job_id`` names a job folder directly under --out (a status query may name
    anything: nothing outside the output folder is read for it)."""
    return (
        0 < len(job_id) <= 64
        and not job_id.startswith(".")
        and not any(c in job_id for c in "/\\\0")
    )


def check_out_dir(out_dir: str) -> None:
    """Refuse to start, with one line naming --out, when job files could not be written."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except FileExistsError:
        raise UserError(f"--out {out}: exists and is not a folder") from None
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write job files there ({exc.strerror})") from None


class JobFiles:
    """The job folders of one daemon under its ``--out`` folder."""

    def __init__(self, role: str, out_dir: str, log: logging.Logger) -> None:
        self.role = role
        # absolute: the folders this daemon reports are read by clients in other folders
        self.out = Path(out_dir).absolute()
        self.log = log

    def on_disk(self, job_id: str) -> bool:
        """Whether a job of this id left files here: its folder, or its temporary folder
        (a job interrupted by a crash)."""
        return (self.out / job_id).exists() or partial_dir(self.out, job_id).exists()

    def taken(self, job_id: str, running: bool) -> str:
        """Why ``job_id`` cannot name a new job, and where its files are: its folder, or
        the temporary folder of a run that is going on or was interrupted with its daemon."""
        final, partial = self.out / job_id, partial_dir(self.out, job_id)
        if final.exists():
            where = f"its files are in {final}"
        elif running:
            where = f"it is running; its files are being written in {partial}"
        elif partial.exists():
            where = f"{self._interrupted(job_id)}; or choose another id"
            return f"{self.role} already has a job {job_id!r}: {where}"
        else:
            where = "it was started here before, and never ran"
        return f"{self.role} already has a job {job_id!r} ({where}); choose another id"

    def _interrupted(self, job_id: str) -> str:
        """What a run killed with its daemon left (its temporary folder) and what to do."""
        partial = partial_dir(self.out, job_id)
        text = f"a run of it was interrupted when its daemon stopped, leaving {partial}"
        if CheckpointStore(self.out, job_id, self.role).steps():
            return f"{text}: resume it (`ppbn learn --resume {job_id}`) or remove that folder"
        return f"{text} (no checkpoint to resume from): remove that folder to use the id again"

    def ended_info(self, job_id: str) -> JobInfo | None:
        """What JobStatus says of a job this daemon no longer holds in memory (it ended
        before a restart, or long ago), read from its folder; None without one."""
        if not _folder_name(job_id):
            return None
        final = self.out / job_id
        if final.is_dir():
            return self._read_result(job_id, final)
        if partial_dir(self.out, job_id).is_dir():
            return JobInfo(job_id=job_id, state=JobInfo.FAILED, error=self._interrupted(job_id))
        return None

    def _read_result(self, job_id: str, folder: Path) -> JobInfo | None:
        """The job's JobInfo from ``result.json`` and ``stats.json`` in its folder; FAILED,
        saying which file, when they cannot be read; None for a folder without one (not a
        job's: every ended job's folder has it)."""
        info = JobInfo(job_id=job_id, out_dir=str(folder))
        path = folder / "result.json"
        if not path.is_file():
            return None
        try:
            if path.stat().st_size > MAX_RESULT_BYTES:
                raise ValueError(f"over {MAX_RESULT_BYTES // (1024 * 1024)} MiB")
            status = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(status, dict) or status.get("state") not in ENDED_STATES:
                raise ValueError("no state of an ended job in it")
        except (OSError, ValueError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            info.state = JobInfo.FAILED
            info.error = f"{self.role} cannot read the job's record {path}: {why}"
            return info
        info.state = JobInfo.State.Value(status["state"])
        info.kind = str(status.get("kind") or "")
        info.error = str(status.get("error") or "")
        info.initiator = str(status.get("initiator") or "")
        info.refused = status.get("refused") is True
        if isinstance(status.get("result"), dict):
            info.result_json = json.dumps(status["result"])
        stats = _stats_file(folder / "stats.json")
        if isinstance(stats.get("self"), dict):
            info.stats_json = json.dumps(stats["self"])
        if isinstance(stats.get("peer"), dict):
            info.peer_stats_json = json.dumps(stats["peer"])
        return info

    def make_partial_dir(self, job_id: str, resume: bool = False) -> Path:
        """The folder a job writes into while it runs; renamed to OUT/JOB_ID when it ends. A
        resume starts afresh from the temporary folder a crash of the earlier run left."""
        folder = partial_dir(self.out, job_id)
        if resume and folder.is_dir():
            shutil.rmtree(folder)
        try:
            folder.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise JobRefused(
                f"{self.role} already has a job {job_id!r} on disk", AbortCode.DUPLICATE_JOB
            ) from None
        except OSError as exc:
            self.log.error("job %s: cannot make its folder %s: %s", job_id, folder, exc.strerror)
            raise JobRefused(
                f"{self.role} cannot write its job folder (see its log)", AbortCode.FAILED
            ) from None
        return folder

    def write(
        self,
        job: Job,
        state: int,
        result: dict[str, Any] | None,
        stats: dict[str, Any] | None,
        peer_stats: dict[str, Any] | None,
    ) -> dict[str, Any] | None:
        """Write result, stats and ledger beside the job's own files in its temporary folder;
        returns the result with its paths moved to where the folder will be. A job that did
        not succeed keeps only these three files: never a network beside a FAILED result."""
        temp = job.context.out_dir
        final = self.out / job.job_id
        temp.mkdir(parents=True, exist_ok=True)
        if state != JobInfo.SUCCEEDED:
            for leftover in temp.iterdir():
                if leftover.is_dir() and not leftover.is_symlink():
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()
        result = relocate(result, temp, final)
        status = {
            "job_id": job.job_id,
            "kind": job.kind.name,
            "params": job.params,
            "initiator": job.initiator,
            "state": JobInfo.State.Name(state),
            "error": job.error,
            "refused": job.refused,
            "result": result,
        }
        (temp / "result.json").write_text(json.dumps(status, indent=2) + "\n")
        (temp / "stats.json").write_text(
            json.dumps({"self": stats, "peer": peer_stats}, indent=2) + "\n"
        )
        (temp / "ledger.json").write_text(job.context.ledger.to_json() + "\n")
        return result

    def _commit(self, job: Job) -> None:
        """Rename the temporary folder to OUT/JOB_ID: a reader sees a whole job folder or
        none. A resumed job takes the interrupted run's folder inside (its ledger included),
        and gives it back if the rename fails."""
        temp = job.context.out_dir
        final = self.out / job.job_id
        interrupted = temp / "interrupted-run"
        if job.context.resume and final.is_dir():
            os.replace(final, interrupted)
        try:
            commit_dir(temp, final)
        except OSError:
            if interrupted.is_dir() and not final.exists():
                os.replace(interrupted, final)
            raise
        job.context.out_dir = final

    def finish(self, job: Job) -> None:
        """Put the ended job's folder in place. A job that failed writes its three files
        afresh; if even they cannot be written, nothing of the job stays (one line says
        so). A job that succeeded is renamed into place; if that fails the job fails here,
        after its peers confirmed theirs: the one window the end-of-job exchange leaves."""
        try:
            if job.state != JobInfo.SUCCEEDED:
                self.write(job, job.state, None, job.stats, job.peer_stats)
            self._commit(job)
        except OSError as exc:
            shutil.rmtree(job.context.out_dir, ignore_errors=True)
            where, folder = self._failed_write(exc)
            if job.state == JobInfo.SUCCEEDED:
                job.state, job.result = JobInfo.FAILED, None
                job.error = (
                    f"{self.role} cannot put the finished job in place ({where}: {reason(exc)}) after its peers "
                    f"confirmed it: they keep its outputs, {self.role} does not; {io_remedy(exc, folder)}, "
                    "then run the job again"
                )
            else:
                self.log.error(
                    "job %s: its result files cannot be written either (%s: %s): no folder is kept for it",
                    job.job_id,
                    where,
                    reason(exc),
                )

    def _failed_write(self, exc: OSError) -> tuple[str, Path]:
        """The file a failed write names (or the job's files, if it names none) and the
        folder to fix: the output folder, or the named file's own folder outside it."""
        if not exc.filename:
            return f"the job's files in {self.out}", self.out
        failed = Path(os.fsdecode(exc.filename))
        inside = failed_file(exc, self.out) is not None
        return str(failed), self.out if inside else failed.parent

    def write_failure_text(self, exc: OSError) -> str:
        """One line for a job whose files cannot be written: the file, the OS's reason, and
        what to do. Said before the peers were told, so no party keeps the job."""
        where, folder = self._failed_write(exc)
        return (
            f"{self.role} cannot write {where} ({reason(exc)}): the job's outputs are kept at no party; "
            f"{io_remedy(exc, folder)}, then run the job again"
        )


def _stats_file(path: Path) -> dict[str, Any]:
    """A job folder's stats.json; empty when it cannot be read (the figures are extras)."""
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            return {}
        stats = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return stats if isinstance(stats, dict) else {}
