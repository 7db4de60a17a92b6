"""The one skeleton of the randomized paths' jobs: PRAM (``ppbn.jobs.pram``) and the
perturbation learners (``ppbn.jobs.perturb``).

Each path has two job kinds, after Ma and Sivakumar (Sec. III-A): setup I between alice
and bob, and setup II, started at the miner, which learns from both parties' randomized
columns. Both paths check their parameters before any peer is asked, never take a
randomization seed from a job message, check a job against the local policy in the same
order (missing-value rule, path, record count, then the randomization of this party's own
columns), randomize with the party's own CSPRNG, dispatch the run by role to their
protocol module, and report the same stats, privacy rows and warning. That is written
here once; a path subclasses ``RandomizedPath`` and states only what differs: its
parameters, scheme, protocol input, the parameter a weak randomization is refused by,
and its output files.
"""

from __future__ import annotations

import json
import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ppbn.bn.schema import PARTIES, Schema
from ppbn.errors import UserError
from ppbn.jobs.base import (
    ChannelGroup,
    JobContext,
    JobKind,
    ParameterError,
    PolicyScope,
)
from ppbn.jobs.policy import FamilyBound, LocalPolicy, PolicyRefusal
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.randomized.pram.operators import RandomizationScheme, RandomSource

SEED_WARNING = (
    "randomization seed fixed by this daemon's --insecure-fixed-seed-for-testing: TESTING ONLY, "
    "anyone who knows the seed can undo the randomization"
)


def refuse_seed(prefix: str, params: dict[str, Any]) -> None:
    """A seed in a job message would let whoever sent it undo the randomization."""
    if "seed" in params:
        raise PolicyRefusal(
            "seed",
            f"{prefix}: a randomization seed is never taken from a job message (each party randomizes "
            "with its own CSPRNG; tests start the daemons with --insecure-fixed-seed-for-testing)",
        )


def number_param(prefix: str, params: dict[str, Any], key: str, default: float) -> float:
    """A finite number (not a bool), or a ParameterError naming ``key``."""
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParameterError(key, f"{prefix}: {key!r} must be a number")
    return float(value)


def json_number(value: float) -> float | str:
    return "inf" if math.isinf(value) else value


def json_privacy(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Privacy rows with infinite gamma written as "inf" (strict JSON)."""
    return [
        {
            k: json_number(v) if k.startswith("gamma") and isinstance(v, float) else v
            for k, v in row.items()
        }
        for row in rows
    ]


def job_stats(
    context: JobContext, channel: Channel | ChannelGroup, started: float
) -> dict[str, Any]:
    """wall_s, phases, bytes and rounds of this party's end of the job, measured by the job."""
    traffic = channel.stats
    return {
        "wall_s": round(time.perf_counter() - started, 4),
        "phases": {name: round(seconds, 4) for name, seconds in context.phases.items()},
        "bytes_sent": traffic.bytes_sent,
        "bytes_received": traffic.bytes_received,
        "rounds": traffic.rounds,
    }


def randomization_source(context: JobContext) -> RandomSource:
    """This party's CSPRNG, or the daemon's --insecure-fixed-seed-for-testing (never a job parameter)."""
    seed = context.fixed_seed_for_testing
    return RandomSource() if seed is None else RandomSource.from_seed(seed)


def search_progress(context: JobContext):
    """The search's (done, total, label) reports as the job's structured progress: the K2
    step or hill-climbing move it is on (``JobContext.advance``)."""
    return lambda done, total, label: context.advance(label, done, total)


def disclosure(setup: int, role: str, outcome: Any, **details: Any) -> dict[str, Any]:
    """The output document's section on the run: setup, role, the path's ``details``, and
    what was disclosed and received in the clear."""
    return {
        "setup": setup,
        "role": role,
        **details,
        "disclosed": list(outcome.disclosed),
        "received": list(outcome.received),
    }


def write_json(path: Path, document: dict[str, Any]) -> str:
    """Write one output document; its path for the result."""
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return str(path)


@dataclass(frozen=True)
class JobOutputs:
    """What a path adds to the job's result: ``summary`` after the setup, ``files`` (the
    paths written) at the end."""

    summary: dict[str, Any]
    files: dict[str, str]


class RandomizedPath(ABC):
    """One randomized path: its two job kinds, built by ``job(setup)``."""

    path: str  # the path's name in the local policy's ``paths``
    kinds: tuple[str, str]  # the job kinds of setup I and setup II
    summaries: tuple[str, str]
    available_case_refusal: str  # "{kind}" is the message prefix
    protocol: ModuleType  # run_setup_one, run_setup_two_miner, run_setup_two_party
    reports_search_progress: bool = False  # the protocol takes ``progress`` (setup I, miner)

    def message_prefix(self, kind: str) -> str:
        """What the path's refusals start with and the policy calls the job: its kind."""
        return kind

    @abstractmethod
    def check_params(
        self, kind: str, params: dict[str, Any], schema: Schema, setup: int
    ) -> dict[str, Any]:
        """The normalised parameters (what the peer checks again), or a ParameterError."""

    @abstractmethod
    def settings(
        self, kind: str, params: dict[str, Any], schema: Schema, setup: int
    ) -> dict[str, Any]:
        """Every setting the run and the policy check read, from normalised parameters."""

    @abstractmethod
    def scheme(self, settings: dict[str, Any], schema: Schema) -> RandomizationScheme:
        """The public randomization scheme of the job."""

    @abstractmethod
    def plan(self, settings: dict[str, Any], schema: Schema) -> Any:
        """What the protocol learns with (``PramConfig``, ``VerticalTask``)."""

    @abstractmethod
    def randomized_parameter(
        self, settings: dict[str, Any], policy: LocalPolicy, scope: PolicyScope, setup: int
    ) -> str | None:
        """The parameter a too weak randomization of this party's columns is refused by;
        None when none of its columns leave its host."""

    @abstractmethod
    def write_outputs(
        self,
        context: JobContext,
        settings: dict[str, Any],
        outcome: Any,
        setup: int,
        scheme: RandomizationScheme,
        privacy: list[dict[str, Any]],
        stats: dict[str, Any],
    ) -> JobOutputs:
        """Write the path's files under ``context.out_dir`` (which exists)."""

    def family_bound(self, params: dict[str, Any], schema: Schema) -> FamilyBound | None:
        """The largest family the job can lead to (None: it learns no network)."""
        return None

    def check_policy(
        self, setup: int, params: dict[str, Any], policy: LocalPolicy, scope: PolicyScope
    ) -> None:
        """The job under this party's local policy (the miner holds no columns).

        Available-case analysis is refused: every randomized cell is sent, and a missing
        cell cannot be randomized into a state without showing (or faking) that it was
        missing."""
        kind = self.kinds[setup - 1]
        settings = self.settings(kind, params, scope.schema, setup)
        prefix = self.message_prefix(kind)
        if scope.missing_rule == "available-case":
            raise UserError(self.available_case_refusal.format(kind=prefix))
        policy.require_path(self.path, prefix)
        if scope.role == "miner":
            return
        policy.require_records(scope.n_records)
        parameter = self.randomized_parameter(settings, policy, scope, setup)
        if parameter is not None:
            scheme = self.scheme(settings, scope.schema)
            policy.require_randomization(scheme, scope.own_variables, parameter)

    def run(
        self, setup: int, role: str, channel: Channel | ChannelGroup, context: JobContext
    ) -> dict[str, Any]:
        """Setup I between alice and bob, or setup II at the miner (a ``ChannelGroup``) and
        at each party; every daemon writes its outputs and reports the same result keys."""
        started = time.perf_counter()
        schema, codes = context.schema, context.data.codes
        kind = self.kinds[setup - 1]
        settings = self.settings(kind, context.params, schema, setup)
        scheme = self.scheme(settings, schema)
        plan = self.plan(settings, schema)
        progress = {"progress": search_progress(context)} if self.reports_search_progress else {}
        if setup == 1:
            outcome = self.protocol.run_setup_one(
                role,
                channel,
                schema,
                codes,
                scheme,
                plan,
                randomization_source(context),
                context.ledger,
                context.phase,
                **progress,
            )
        elif isinstance(channel, ChannelGroup):
            outcome = self.protocol.run_setup_two_miner(
                channel.channels, schema, scheme, plan, context.ledger, context.phase, **progress
            )
        elif isinstance(channel, Channel) and role in PARTIES:
            outcome = self.protocol.run_setup_two_party(
                role,
                channel,
                schema,
                codes,
                scheme,
                plan,
                randomization_source(context),
                context.ledger,
                context.phase,
            )
        else:
            raise ProtocolError(f"{kind} runs at the miner with alice and bob, not at {role}")
        stats = job_stats(context, channel, started)
        privacy = json_privacy(outcome.privacy)
        context.out_dir.mkdir(parents=True, exist_ok=True)
        outputs = self.write_outputs(context, settings, outcome, setup, scheme, privacy, stats)
        result: dict[str, Any] = {
            "setup": setup,
            **outputs.summary,
            "received": list(outcome.received),
            "privacy": privacy,
            "stats": stats,
            **outputs.files,
        }
        if context.fixed_seed_for_testing is not None:
            result["warning"] = SEED_WARNING
        return result

    def job(self, setup: int) -> JobKind:
        """The job kind of ``setup`` (1 or 2), for the registry."""
        kind = self.kinds[setup - 1]

        def check_params(params: dict[str, Any], schema: Schema) -> dict[str, Any]:
            return self.check_params(kind, params, schema, setup)

        def check_policy(params: dict[str, Any], policy: LocalPolicy, scope: PolicyScope) -> None:
            self.check_policy(setup, params, policy, scope)

        def run(role: str, channel: Channel | ChannelGroup, context: JobContext) -> dict[str, Any]:
            return self.run(setup, role, channel, context)

        return JobKind(
            kind, run, check_params, self.summaries[setup - 1], check_policy, self.family_bound
        )
