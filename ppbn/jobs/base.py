"""The job framework: what a daemon can run with its peer, and what a job gets to run with.

A job kind is declared once as a ``JobKind``: a parameter check that runs before the
peer is contacted (bad parameters are the operator's error, not the peer's), a check of
the normalised parameters against the daemon's local policy (``ppbn.jobs.policy``),
which both daemons run before they send anything derived from their data, and a
function ``run(role, channel, context) -> dict`` that both daemons call, each with its
own role, its end of the job's channel and a ``JobContext``. The result must be a
JSON-serialisable dict of what this party may show its operator; large outputs (shares,
networks) go to files under ``context.out_dir``.

The daemon owns everything around ``run``: the channel, the worker thread, timeouts,
cancellation, the final exchange of statistics with the peer, and the files
``result.json``, ``stats.json`` and ``ledger.json`` in the job's output folder.

Built-in kinds live in their own modules (ping, the link check, here) and are listed in
``ppbn/jobs/registry.py``, which the daemon asks; declaring a kind registers nothing.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ppbn.bn.schema import Schema
from ppbn.data.party_data import PartyData
from ppbn.errors import UserError
from ppbn.jobs.policy import (
    LOCAL_SETTINGS,
    FamilyBound,
    LocalPolicy,
    PolicyRefusal,
    PrivacyCost,
)
from ppbn.jobs.progress import ProgressTracker
from ppbn.protocols.channel import Channel, ChannelStats, PeerGone, ProtocolError
from ppbn.protocols.constants import SECURITY_LEVELS, SEMI_HONEST
from ppbn.protocols.ledger import Ledger
from ppbn.protocols.paillier import OpCounters

SECURITY_PARAM = "security"  # a job's security level: every kind's parameter, checked here


class ParameterError(UserError):
    """A job parameter that is malformed, out of range or unknown; ``parameter`` names it
    (a key of the request, shown to the peer only when it is a plain identifier)."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def check_known(kind: str, params: dict[str, Any], known: set[str] | frozenset[str]) -> None:
    """Refuse the first unknown parameter by name; resources are never job parameters."""
    for name in LOCAL_SETTINGS:
        if name in params and name not in known:
            raise PolicyRefusal(
                name,
                f"{kind}: {name} is this party's local setting (policy file or party serve flag), never a job parameter",
            )
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ParameterError(
            unknown[0],
            f"{kind}: unknown parameter {unknown[0]!r} (know: {', '.join(sorted(known))})",
        )


class JobChannel(Protocol):
    """What a job's channel offers the daemon besides the protocol messages (the daemon's
    gRPC channel, ``ppbn/parties/grpc_channel.py``, is one): traffic, failure, abort, close."""

    stats: ChannelStats

    @property
    def failure(self) -> str | None: ...

    def abort(self, code: int, parameter: str = "") -> None: ...

    def close(self) -> None: ...


class ChannelGroup:
    """The channels of one job with several peers (the miner's), handled by the daemon as one.

    The job function reads ``channels`` (role -> channel); the daemon aborts, closes and
    counts them together. ``stats`` adds the traffic up; its ``rounds`` is the largest
    count of one channel, since the channels run side by side.
    """

    def __init__(self, channels: dict[str, JobChannel]) -> None:
        self.channels = channels

    @property
    def stats(self) -> ChannelStats:
        total = ChannelStats()
        for channel in self.channels.values():
            total.add(channel.stats)
        return total

    def label_traffic(self, section: str) -> None:
        """Count what follows under ``section`` (the job's phase) on every channel."""
        for channel in self.channels.values():
            channel.stats.section = section

    @property
    def failure(self) -> str | None:
        for role, channel in self.channels.items():
            if channel.failure:
                return f"{role}: {channel.failure}"
        return None

    def abort(self, code: int, parameter: str = "") -> None:
        for channel in self.channels.values():
            channel.abort(code, parameter)

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()


class JobCancelled(Exception):
    """Raised inside a job (by ``progress`` or ``check_cancelled``) once it was cancelled."""


class JobFunction(Protocol):
    def __call__(self, role: str, channel: Channel, context: JobContext) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PolicyScope:
    """What a policy check knows besides the parameters: who is checking, on what data."""

    role: str
    schema: Schema
    n_records: int  # 0 at the miner, which holds no records
    missing_rule: str = "error"  # this daemon's --missing ("" at the miner)

    @property
    def own_variables(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.schema.variables if v.owner == self.role)


def no_policy_check(params: dict[str, Any], policy: LocalPolicy, scope: PolicyScope) -> None:
    """For diagnostic jobs that send only fresh random bytes (ping): nothing to protect."""


def no_families(params: dict[str, Any], schema: Schema) -> None:
    """For jobs that compute no family of a network (ping, the perturbation learners)."""


def no_privacy_cost(params: dict[str, Any]) -> PrivacyCost | None:
    """For jobs that are not differentially private: they spend no budget (``require_dp``
    refuses them where the policy asks for DP, unless they release no data)."""
    return None


@dataclass(frozen=True)
class JobKind:
    """A job the daemons can run: ``check_params`` normalises the JSON parameters or raises UserError;
    ``check_policy`` raises ``PolicyRefusal`` when they are weaker than the local policy;
    ``family_bound`` says the largest family (child and parents) the normalised parameters
    can lead to, which ``check_job_policy`` holds against the family limits for every kind;
    ``privacy_cost`` says what a differentially private job spends of each party's budget
    (None: not a DP job); ``releases_data`` is False only for jobs that send nothing derived
    from the data (ping), which ``require_dp`` lets through. ``security_levels``: the levels
    (``ppbn.protocols.security``) at which every phase of the kind has its defences; a
    request for another is refused."""

    name: str
    run: JobFunction
    check_params: Callable[[dict[str, Any], Schema], dict[str, Any]]
    summary: str
    check_policy: Callable[[dict[str, Any], LocalPolicy, PolicyScope], None] = no_policy_check
    family_bound: Callable[[dict[str, Any], Schema], FamilyBound | None] = no_families
    privacy_cost: Callable[[dict[str, Any]], PrivacyCost | None] = no_privacy_cost
    releases_data: bool = True
    security_levels: tuple[str, ...] = (SEMI_HONEST,)


def checked_params(kind: JobKind, raw: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """The kind's normalised parameters and the request's security level.

    ``security`` (default semi-honest) is taken out before the kind's own check and put
    back only when it is stronger, so a semi-honest job's parameters are those the kind
    alone would give. A level the kind has no defences for is refused here, before the
    peer is contacted."""
    rest = dict(raw)
    level = checked_level(kind, rest.pop(SECURITY_PARAM, SEMI_HONEST))
    params = kind.check_params(rest, schema)
    if level != SEMI_HONEST:
        params[SECURITY_PARAM] = level
    return params


def checked_level(kind: JobKind, level: object) -> str:
    """``level`` if it is a security level the kind has its defences for, else a
    ParameterError naming ``security`` and the kind's levels."""
    if level not in SECURITY_LEVELS:
        raise ParameterError(
            SECURITY_PARAM,
            f"{kind.name}: security must be one of {', '.join(SECURITY_LEVELS)}",
        )
    if level not in kind.security_levels:
        raise ParameterError(
            SECURITY_PARAM,
            f"{kind.name}: security level {level!r} is not available for {kind.name} jobs "
            f"(they run at {', '.join(kind.security_levels)}; SECURITY.md, 'Security levels')",
        )
    return str(level)


def job_security(params: dict[str, Any]) -> str:
    """The security level of a job's normalised parameters."""
    return str(params.get(SECURITY_PARAM, SEMI_HONEST))


def check_job_policy(
    kind: JobKind, params: dict[str, Any], policy: LocalPolicy, scope: PolicyScope
) -> None:
    """Normalised parameters under this daemon's policy: the family limits first (one rule
    for every kind, whatever in the request sets the family), then the DP rules (the
    per-job epsilon, ``require_dp``; the budget is the daemon's, ``ppbn.parties.budget``),
    then the kind's own checks. The security level comes first of all: a daemon never runs
    below its policy's ``min_security``."""
    policy.require_security(job_security(params))
    policy.require_families(kind.family_bound(params, scope.schema))
    policy.require_privacy(
        kind.privacy_cost(params),
        kind.releases_data,
        kind.name,
        kind.privacy_cost is not no_privacy_cost,
    )
    kind.check_policy(params, policy, scope)


@dataclass
class JobContext:
    """Everything a job function may use besides its channel.

    ``counters`` counts Paillier operations (protocols add to them); ``count(name, k)``
    tallies any other operation (AND gates, OTs, ...). The job's stats report both, the
    tallies also as top-level keys. ``phase(name)`` times a stretch of the job
    and ``progress(note)`` reports where it is, ``advance(label, done, total)`` the same
    with numbers (a search step, a unit of work; ``ppbn.jobs.progress``); both are also
    where a long local computation stops when the job was cancelled or the peer went away.
    """

    job_id: str
    kind: str
    role: str
    schema: Schema
    data: PartyData
    params: dict[str, Any]
    out_dir: Path
    ledger: Ledger
    policy: LocalPolicy = field(default_factory=LocalPolicy)
    fixed_seed_for_testing: str | None = (
        None  # local flag of `party serve`, never from a job message
    )
    counters: OpCounters = field(default_factory=OpCounters)
    tallies: Counter = field(default_factory=Counter)
    phases: dict[str, float] = field(default_factory=dict)
    cancelled: threading.Event = field(default_factory=threading.Event)
    notes: Callable[[str], None] = field(default=lambda note: None)
    last_progress: str = ""
    cancel_reason: str = ""
    link_failure: Callable[[], str | None] = field(default=lambda: None)
    resume: bool = False  # continue from the checkpoint both parties hold (``ppbn learn --resume``)
    current_phase: str = ""  # the last "phase ..." note: named when the job fails
    checkpoint_written: Callable[[], None] = field(default=lambda: None)  # for the daemon's metrics
    # a DP job calls it before this party contributes its first noise word (the daemon
    # marks the run's budget reservation spent: ``ppbn.parties.budget``)
    before_release: Callable[[], None] = field(default=lambda: None)
    # told each new phase name: the daemon counts the channel's bytes per phase with it
    on_phase: Callable[[str], None] = field(default=lambda name: None)
    tracker: ProgressTracker = field(default_factory=ProgressTracker)
    # told after each ``advance`` whether it began a step: the daemon's log (``notes`` gets the rest)
    on_progress: Callable[[bool], None] = field(default=lambda major: None)
    _tally_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str, amount: int = 1) -> None:
        with self._tally_lock:
            self.tallies[name] += int(amount)

    def cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        self.cancelled.set()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.progress(f"phase {name}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def report(self, note: str) -> None:
        """Say where the job is without stopping there: for steps whose result this party
        must still judge itself (the PSI's intersection against its own policy), so that a
        peer's abort arriving meanwhile cannot replace this party's own reason. A cancelled
        job still stops at its next message (the daemon aborts the channel)."""
        self.last_progress = note
        self.tracker.note(note)
        self.notes(note)

    def progress(self, note: str) -> None:
        self.check_cancelled()
        self.last_progress = note
        if note.startswith("phase "):
            self.current_phase = note[len("phase ") :]
            self.on_phase(self.current_phase)
        self.tracker.note(note)
        self.notes(note)

    def advance(self, label: str, done: int = 0, total: int = 0) -> None:
        """Progress with numbers: "phase X" is ``progress``; a search step ("K2 step 3:
        ...", ``done`` steps of at most ``total``) or ``done`` of ``total`` of the unit
        ``label`` go to the tracker only, so a call costs a few assignments."""
        if label.startswith("phase "):
            self.progress(label)
            return
        self.check_cancelled()
        self.on_progress(self.tracker.update(label, done, total))

    def check_cancelled(self) -> None:
        """Stop here if the job was cancelled or the peer is gone (aborted, died, closed)."""
        if self.cancelled.is_set():
            raise JobCancelled(self.cancel_reason or "job was cancelled")
        failure = self.link_failure()
        if failure:
            raise PeerGone(failure)


# -- ping: the link check every deployment wants first ---------------------------------
MAX_PING_ROUNDS = 100_000
MAX_PING_BYTES = 64 * 1024 * 1024


def _check_ping(params: dict[str, Any], schema: Schema) -> dict[str, Any]:
    unknown = set(params) - {"rounds", "bytes"}
    if unknown:
        raise UserError(f"ping: unknown parameter {sorted(unknown)[0]!r} (know: rounds, bytes)")
    rounds, size = params.get("rounds", 10), params.get("bytes", 1024)
    if not isinstance(rounds, int) or not 1 <= rounds <= MAX_PING_ROUNDS:
        raise UserError(f"ping: 'rounds' must be an integer in 1..{MAX_PING_ROUNDS}")
    if not isinstance(size, int) or not 0 <= size <= MAX_PING_BYTES:
        raise UserError(f"ping: 'bytes' must be an integer in 0..{MAX_PING_BYTES}")
    return {"rounds": rounds, "bytes": size}


def run_ping(role: str, channel: Channel, context: JobContext) -> dict[str, Any]:
    """Alice sends random payloads, Bob echoes them, Alice checks: latency and throughput."""
    rounds, size = context.params["rounds"], context.params["bytes"]
    rng = np.random.default_rng()
    times = []
    with context.phase("ping"):
        for i in range(rounds):
            if i % 64 == 0:
                context.progress(f"ping round {i + 1}/{rounds}")
            if role == "alice":
                payload = rng.bytes(size)
                start = time.perf_counter()
                channel.send("ping", payload)
                if channel.recv("pong", max_bytes=size) != payload:
                    raise ProtocolError(f"peer echoed a different payload in round {i + 1}")
                times.append(time.perf_counter() - start)
            else:
                channel.send("pong", channel.recv("ping", max_bytes=size))
    if role != "alice":
        return {"rounds": rounds, "bytes": size}
    total = float(sum(times))
    return {
        "rounds": rounds,
        "bytes": size,
        "rtt_ms_median": round(float(np.median(times)) * 1e3, 3),
        "throughput_mb_s": round(2 * rounds * size / total / 1e6, 3) if total > 0 else 0.0,
    }


PING_JOB = JobKind(
    "ping",
    run_ping,
    _check_ping,
    "echo payloads: link latency and throughput",
    releases_data=False,  # fresh random bytes only
    security_levels=SECURITY_LEVELS,  # nothing to protect at any level
)
