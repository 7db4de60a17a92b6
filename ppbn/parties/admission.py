"""Which jobs a daemon takes: the checks a request passes against the local policy and the
budget, the job's id, and the checkpoint a resume continues from. The job controller
(``ppbn.parties.controller``) asks them on both paths and reserves the daemon's one slot.

Local policy (``ppbn.jobs.policy``): each daemon enforces its own; nothing that arrives
from the network can weaken it. A job's parameters are checked against it at both
daemons, by the initiator before it contacts the peer and by the peer before it answers
ACCEPT, and before anything is allocated for the job, so a refusal costs at most the
request's (bounded) size. Seeds, masks and keys come from the local CSPRNG; resources
(workers, message and queue sizes) come from the policy, never from a job message. A
differentially private job must also fit in what this daemon's privacy budget has left
(``ppbn.parties.budget``): checked here before the peer is contacted, charged by the runner.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

from ppbn.errors import UserError, printable
from ppbn.jobs.base import (
    SECURITY_PARAM,
    JobKind,
    ParameterError,
    PolicyScope,
    check_job_policy,
    checked_params,
    job_security,
)
from ppbn.jobs.checkpoint import CheckpointStore, data_digest
from ppbn.jobs.policy import PolicyRefusal
from ppbn.jobs.registry import job_kind
from ppbn.parties.budget_home import check_home
from ppbn.parties.config import DaemonSetup
from ppbn.parties.handshake import MINER_JOB_KINDS, other_role
from ppbn.parties.job import Job, JobRefused
from ppbn.parties.tls import MINER, PARTY_ROLES
from ppbn.proto import party_pb2
from ppbn.protocols.constants import SEMI_HONEST

AbortCode = party_pb2.AbortCode
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # also a folder name: no "..", no "/"
MAX_PARAMS_BYTES = 64 * 1024  # a job request's JSON parameters; a refusal costs no more than this


class Admission:
    """The checks a job request passes at this daemon, on both paths (started here, opened
    by a peer), before anything is allocated for the job."""

    def __init__(self, setup: DaemonSetup) -> None:
        self.setup = setup
        self.config = setup.config
        self.role = setup.role
        # the peer of two-party jobs; the miner has none (its jobs involve both parties)
        self.peer_role = other_role(self.role) if self.role in PARTY_ROLES else ""
        self.schema, self.data, self.hello = setup.schema, setup.data, setup.hello
        self.files, self.budget, self.dataset = setup.files, setup.budget, setup.dataset

    def job_peers(self, kind_name: str) -> tuple[str, ...]:
        """Who a job of this kind started here runs with; refuse kinds that start elsewhere."""
        if self.role == MINER:
            if kind_name not in MINER_JOB_KINDS:
                raise UserError(
                    f"the miner runs only {', '.join(sorted(MINER_JOB_KINDS))} jobs, not {kind_name!r}"
                )
            return PARTY_ROLES
        if kind_name in MINER_JOB_KINDS:
            raise UserError(
                f"job kind {kind_name} runs between the miner and both parties: start it at the miner's daemon"
            )
        return (self.peer_role,)

    def checked(
        self, kind_name: str, params_json: str, resumed_id: str, peer: str
    ) -> tuple[JobKind, dict[str, Any]]:
        """The job kind and its parameters, checked against the local policy, and a DP job's
        epsilon and delta against what this daemon's budget has left (``resumed_id``: the
        job resumed, a new run charged again; ``peer``: the peer that opens it, held to
        the policy's rate of DP jobs per peer)."""
        try:
            kind = job_kind(kind_name)
        except UserError as exc:
            raise JobRefused(str(exc), AbortCode.BAD_REQUEST) from None
        params = self.checked_params(kind, params_json)
        self._check_budget(kind, params, resumed_id, peer)
        return kind, params

    def checked_params(self, kind: JobKind, params_json: str) -> dict[str, Any]:
        """Parse, normalise and check a job's parameters against the local policy."""
        if len(params_json.encode("utf-8", "replace")) > MAX_PARAMS_BYTES:
            raise JobRefused(
                f"job parameters are over {MAX_PARAMS_BYTES // 1024} KiB", AbortCode.BAD_REQUEST
            )
        try:
            raw = json.loads(params_json or "{}")
        except json.JSONDecodeError as exc:
            raise JobRefused(
                f"job parameters are not valid JSON: {exc.msg}", AbortCode.BAD_REQUEST
            ) from None
        except RecursionError:
            raise JobRefused(
                "job parameters are nested too deeply", AbortCode.BAD_REQUEST
            ) from None
        if not isinstance(raw, dict):
            raise JobRefused("job parameters must be a JSON object", AbortCode.BAD_REQUEST)
        try:
            params = checked_params(kind, raw, self.schema)
            scope = PolicyScope(
                self.role, self.schema, self.data.n_records, self.hello.missing_rule
            )
            check_job_policy(kind, params, self.config.policy, scope)
            self._check_alignment_level(params)
        except PolicyRefusal as exc:
            raise self._refused(exc) from None
        except ParameterError as exc:
            raise JobRefused(
                f"{exc} (parameter {exc.parameter!r})", AbortCode.BAD_REQUEST, exc.parameter
            ) from None
        except JobRefused:
            raise
        except UserError as exc:
            raise JobRefused(str(exc), AbortCode.BAD_REQUEST) from None
        except RecursionError:
            raise JobRefused(
                "job parameters are nested too deeply", AbortCode.BAD_REQUEST
            ) from None
        return params

    def _check_alignment_level(self, params: dict[str, Any]) -> None:
        """The record alignment runs before every job: at a level it has no defences for,
        the job is refused (the PSI is semi-honest)."""
        if self.config.align == "psi" and job_security(params) != SEMI_HONEST:
            raise ParameterError(
                SECURITY_PARAM,
                f"security level {job_security(params)!r}: {self.role} aligns records by PSI "
                "(--align psi), which runs at semi-honest only; align the files beforehand",
            )

    def _refused(self, exc: PolicyRefusal) -> JobRefused:
        """A refusal by this party's policy, naming the parameter at fault."""
        return JobRefused(
            f"refused by {self.role}'s policy (parameter {exc.parameter!r}): {exc}",
            AbortCode.POLICY,
            exc.parameter,
        )

    def _check_budget(
        self, kind: JobKind, params: dict[str, Any], resumed_id: str, peer: str
    ) -> None:
        """Refuse a DP job (normalised ``params``) that would spend more epsilon or delta
        than this daemon's data set has left, or whose data set's account cannot be found
        (``budget_home``); ``resumed_id`` names a resumed job (a new run, reserved again);
        ``peer`` the peer opening it, held to ``dp_peer_jobs_per_hour``. After
        ``checked_params`` (the per-job policy), before the peer is contacted."""
        cost = kind.privacy_cost(params)
        if cost is None:
            return
        try:
            dataset = self.dataset()
            check_home(self.budget, dataset, self.config.out_dir, self.config.audit_log)
            self.budget.check(
                resumed_id, dataset, cost, peer, self.config.policy.dp_peer_jobs_per_hour
            )
        except PolicyRefusal as exc:
            raise self._refused(exc) from None
        except UserError as exc:  # the budget cannot be read or found: no DP job until it can
            raise JobRefused(str(exc), AbortCode.FAILED) from None

    def job_id(
        self, requested: str, jobs: dict[str, Job], resume: bool, charged: frozenset[str]
    ) -> str:
        """The requested id if it is free in memory and on disk, else a fresh one; a reused id
        would overwrite an earlier job's result, ledger and network files. A resume continues
        its own unfinished job (checked by ``resume_request``) in the same folder. A DP job
        takes no id in ``charged`` (the budget's, whose folder may be gone): the budget
        charges a job id once, so a new job under an old id would spend nothing."""
        if resume:
            earlier = jobs.get(requested)
            if earlier is not None and not earlier.done.is_set():
                raise JobRefused(f"job {requested} is still running at {self.role}", AbortCode.BUSY)
            return requested
        if not requested:
            while True:
                candidate = uuid.uuid4().hex[:12]
                if (
                    candidate not in jobs
                    and not self.files.on_disk(candidate)
                    and candidate not in charged
                ):
                    return candidate
        if not _JOB_ID.match(requested):
            raise JobRefused(
                f"job id {printable(requested, 64)!r} must be 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit",
                AbortCode.BAD_REQUEST,
            )
        if requested in jobs or self.files.on_disk(requested):
            earlier = jobs.get(requested)
            running = earlier is not None and not earlier.done.is_set()
            raise JobRefused(self.files.taken(requested, running), AbortCode.DUPLICATE_JOB)
        if requested in charged:
            raise JobRefused(
                f"{self.role} already charged a job {requested!r} to its privacy budget "
                f"in {self.budget.folder}; choose another id",
                AbortCode.DUPLICATE_JOB,
            )
        return requested

    def charged_ids(self) -> frozenset[str]:
        try:
            return self.budget.job_ids(self.dataset())
        except UserError as exc:
            raise JobRefused(str(exc), AbortCode.FAILED) from None

    def resume_request(self, job_id: str, params_json: str) -> tuple[str, str]:
        """Kind and parameters of the job to resume, from this daemon's own newest checkpoint.

        The checkpoint must exist, decrypt under this daemon's key and have been made on the
        same data; parameters given with the request must equal the checkpoint's."""
        if not _JOB_ID.match(job_id or ""):
            raise JobRefused(
                f"resume needs the id of an earlier job, not {printable(job_id, 64)!r}",
                AbortCode.BAD_REQUEST,
                "resume",
            )
        store = CheckpointStore(Path(self.config.out_dir), job_id, self.role)
        try:
            header = store.latest_header()
        except UserError as exc:
            raise JobRefused(
                f"cannot resume job {job_id}: {exc}", AbortCode.BAD_REQUEST, "resume"
            ) from None
        if header is None:
            raise JobRefused(
                f"{self.role} has no checkpoint of job {job_id} in {store.folder}: nothing to resume",
                AbortCode.BAD_REQUEST,
                "resume",
            )
        # under --align psi the job's data is the intersection, known only after the PSI: the
        # resumed job compares its digest with the checkpoint's (ppbn.jobs.learn.agree_resume_step)
        same_data = self.config.align == "psi" or header.get("data") == data_digest(
            self.data.ids, self.data.codes
        )
        if header.get("role") != self.role or not same_data:
            raise JobRefused(
                f"cannot resume job {job_id}: {self.role}'s data changed since its checkpoint",
                AbortCode.BAD_REQUEST,
                "resume",
            )
        if params_json and params_json.strip() not in ("", "{}"):
            try:
                asked = json.loads(params_json)
            except (json.JSONDecodeError, RecursionError):
                asked = None
            if asked != header["params"]:
                raise JobRefused(
                    f"resume of job {job_id}: parameters differ from the checkpoint's (give none)",
                    AbortCode.BAD_REQUEST,
                    "resume",
                )
        return str(header["kind"]), json.dumps(header["params"])
