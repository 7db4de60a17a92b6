"""Talk to a running daemon as its party's operator: start a job, follow it, cancel it, and
read what it learned.

The daemon checks every job against its own local policy and runs it with its peer, which
checks its own (SECURITY.md); this client only asks. It holds an operator certificate of
the daemon's party (docs/user-guide.md and README.md show how to make one).

    with Daemon("alice.example.org:7401", tls_dir="op") as alice:
        job = alice.learn(max_parents=3, score="exact")
        outcome = job.wait()
        network = job.result()          # a NetworkResult

Every answer of the daemon is checked before it is used (``parties.client``): a malformed
one, or one about another job, raises ``BadAnswer`` (a ``UserError``) in one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.api.result import NETWORK_FILE, NetworkResult, load_result
from ppbn.errors import UserError, printable

if TYPE_CHECKING:
    from ppbn.parties.client import DaemonClient, JobOutcome

RESULT_FILE = "result.json"  # beside network.json in a job's folder: names the job


class Daemon:
    """An operator's connection to one daemon (``address`` is HOST:PORT)."""

    def __init__(self, address: str, tls_dir: str | Path | None = None, insecure: bool = False):
        from ppbn.parties.client import DaemonClient

        self.address = address
        self.client: DaemonClient = DaemonClient(
            address, str(tls_dir) if tls_dir is not None else None, insecure=insecure
        )

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()

    @property
    def role(self) -> str:
        """The party this daemon serves (from its health answer)."""
        return printable(self.client.health().role, 32)

    def start(
        self, kind: str = "learn", params: dict[str, Any] | None = None, job_id: str = ""
    ) -> Job:
        """Start a job of ``kind`` with its JSON parameters (``ppbn learn --params``)."""
        return Job(self, self.client.start(kind, dict(params or {}), job_id))

    def learn(self, job_id: str = "", **params: Any) -> Job:
        """Start the secure learn job; keyword arguments are its parameters (max_parents,
        score, tau, order, disclosure, search, dp_epsilon for a differentially private
        release, ...; the defaults are the daemon's). A keyword the job would not use (a
        hill-climbing setting under K2, dp_delta without dp_epsilon) is refused here."""
        from ppbn.jobs.unused_params import refuse_unused

        refuse_unused(params, kind="learn")
        return self.start("learn", params, job_id)

    def resume(self, job_id: str, kind: str = "learn") -> Job:
        """Continue an interrupted job from the checkpoints both daemons kept."""
        return Job(self, self.client.start(kind, {}, job_id, resume=True))

    def job(self, job_id: str) -> Job:
        """A handle on a job started earlier (by this client or another)."""
        return Job(self, job_id)


class Job:
    """One job at one daemon."""

    def __init__(self, daemon: Daemon, job_id: str):
        self.daemon = daemon
        self.job_id = job_id
        self.outcome: JobOutcome | None = None

    def __repr__(self) -> str:
        state = self.outcome.state if self.outcome else "?"
        return f"Job({self.job_id!r} at {self.daemon.address}, {state})"

    def status(self, following: bool = True) -> JobOutcome:
        """The job's state now, where it is (``progress``) and its result once it has ended.
        ``following``: this client saw the job running, so a daemon that stops answering is
        reported as lost during the job rather than as unreachable."""
        from ppbn.parties.client import JobOutcome

        info = self.daemon.client.status(self.job_id, following=following)
        return JobOutcome.from_info(info, self.daemon.address)

    def wait(
        self, timeout_s: float | None = None, progress: Callable[[Any], None] | None = None
    ) -> JobOutcome:
        """Block until the job ends (or ``timeout_s`` passes: UserError); ``progress`` is
        called with the job's progress whenever it changes."""
        self.outcome = self.daemon.client.wait(self.job_id, timeout_s, progress)
        return self.outcome

    def cancel(self) -> JobOutcome:
        """Ask the daemon to stop the job; it tells its peer to stop too."""
        from ppbn.parties.client import JobOutcome

        return JobOutcome.from_info(self.daemon.client.cancel(self.job_id), self.daemon.address)

    def result(self) -> NetworkResult:
        """The learned network. With every CPT when the daemon's files are readable from
        here (the same host, or a shared folder) and its result.json names this job;
        otherwise the structure only, from the job's result (the CPTs stay in
        network.json at the daemon's host)."""
        outcome = self.outcome or self.status()
        if outcome.state != "SUCCEEDED" or not outcome.result:
            raise UserError(f"job {self.job_id} has no result ({outcome.state}): {outcome.error}")
        network = Path(outcome.out_dir) / NETWORK_FILE if outcome.out_dir else None
        if network is not None and network.is_file():
            self._check_files(network.parent)
            return load_result(network)
        return NetworkResult.from_document(outcome.result, source=f"job {self.job_id}")

    def _check_files(self, folder: Path) -> None:
        """Refuse a folder whose result.json is not this job's: the folder is the daemon's
        word, and a network read from it is shown as this job's."""
        from ppbn.parties.client import BadAnswer

        try:
            written = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            written = None
        named = written.get("job_id") if isinstance(written, dict) else None
        if named != self.job_id:
            said = (
                f"names job {printable(named, 64)!r}" if isinstance(named, str) else "names no job"
            )
            raise BadAnswer(
                f"the daemon at {self.daemon.address} names {printable(folder, 300)} as job "
                f"{self.job_id}'s folder, but its {RESULT_FILE} {said}"
            )
