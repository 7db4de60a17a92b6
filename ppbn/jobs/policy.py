"""A daemon's local policy: what this party allows to leave its host, decided by it alone.

The principle (SECURITY.md): each daemon enforces its own local policy; nothing that
arrives from the network can weaken it. Every parameter of a job, whether the job was
asked for by this daemon's operator or arrives in the peer's OPEN frame, is checked
against this policy before any byte derived from this party's data is sent. A parameter
is accepted when it is equal to the policy's bound or stronger; otherwise the job is
refused with a ``PolicyRefusal`` naming the parameter.

Resource settings (executor, workers, Ray address, ciphertext cache and spill sizes, the
sizes of garbled runs and OT calls sent to the executor, message and queue sizes) are local only: job messages never carry them, and a peer can
neither choose where this party's work runs nor how much memory it takes. The policy file is TOML or JSON; every key is optional and the defaults
below are the safe built-in policy (``ppbn policy show`` prints the effective one).

Differential privacy: ``dp_max_epsilon`` and ``dp_max_delta`` bound one DP job,
``dp_total_epsilon`` and ``dp_total_delta`` all DP jobs together on this party's data set
(kept in the daemon's budget file, ``ppbn.parties.budget``; ``ppbn budget show``),
``dp_peer_jobs_per_hour`` how many DP jobs a peer may open here in an hour (each is
reserved against the budget while it runs), and ``require_dp`` refuses every job that
releases data without a DP guarantee. Every bound is finite and every delta below 1: a
policy of unlimited epsilon is no bound, and is refused.

Security level: ``min_security`` is the weakest level (``ppbn.protocols.security``) a
job may run at here; a request at a weaker level is refused, naming ``security``.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ppbn.errors import UserError
from ppbn.protocols.constants import AUTO_LANES, MAX_TERM_LANES, SECURITY_LEVELS, SEMI_HONEST
from ppbn.protocols.executor import EXECUTORS
from ppbn.protocols.learning.lanes_agreement import lanes_offer
from ppbn.protocols.ot import OT_INLINE_BELOW
from ppbn.protocols.paillier import KEY_BITS_CHOICES, TEST_ONLY_KEY_BITS
from ppbn.protocols.security import level_rank
from ppbn.protocols.yao import GC_INLINE_BELOW
from ppbn.randomized.pram.operators import RandomizationScheme

# pram: Bayesian networks from PRAM data; perturb: the perturbation learners' jobs (both
# send randomized columns, checked against ``pram`` below)
PATHS = ("secure", "pram", "perturb")
DISCLOSURE_MODES = ("public", "owner", "shared")
ALL_VARIABLES = "*"
# no delta bound may reach this: a delta near 1 / n already allows a release that names
# one record outright (Dwork and Roth 2014, Sec. 2.3), and the sum of deltas must stay < 1
MAX_DELTA = 1e-3
# settings of this daemon's own resources: a job that names one is refused (jobs.check_known)
LOCAL_SETTINGS = (
    "workers",
    "executor",
    "ray_address",
    "cache_mb",
    "spill_mb",
    "spill_dir",
    "gc_inline_below",
    "ot_inline_below",
)
UNSET_NOTES = {
    "workers": "one worker per core",
    "ray_address": "with executor ray, a private Ray instance on this host",
    "spill_dir": "the system's temporary folder",
}


class PolicyRefusal(UserError):
    """A job parameter is weaker than this daemon's local policy allows.

    ``parameter`` is the job parameter at fault (a name from the job kind's fixed list,
    safe to show the peer); the message is the local, detailed reason.
    """

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


@dataclass(frozen=True)
class PrivacyCost:
    """What one differentially private job spends of each party's privacy budget: the
    release is (epsilon, delta)-DP (``ppbn.parties.budget`` adds them up per data set)."""

    epsilon: float
    delta: float


@dataclass(frozen=True)
class FamilyBound:
    """The largest family (a child and its parents) whose counts a job can lead to.

    A family's contingency table, and the CPT learned from it, is what the family limits
    exist for: over many parent configurations few records back each row, and a row of one
    record shows that record's values. A search's own limit is not the whole story: edges a
    request forces (fixed edges, a start graph) give a child parents the search never
    chose, so the bound is the largest of the two. ``parameter`` is the job parameter that
    sets the bound (the name a refusal shows the peer); ``reason`` says how, in words.
    """

    parents: int
    parameter: str
    reason: str

    @property
    def size(self) -> int:
        return self.parents + 1


@dataclass(frozen=True)
class PramPolicy:
    """Ma-Sivakumar randomization this party requires of its own columns.

    ``min_p`` is the smallest probability, over the original values, that a released
    value differs from the original (for M-category randomization with parameter p this
    is p); ``min_p_per_variable`` raises or lowers it per variable; ``always_randomize``
    lists this party's variables that must never leave unrandomized ("*": all of them).
    """

    min_p: float = 0.1
    min_p_per_variable: Mapping[str, float] = field(default_factory=dict)
    always_randomize: tuple[str, ...] = (ALL_VARIABLES,)

    def minimum_for(self, variable: str) -> float:
        return float(self.min_p_per_variable.get(variable, self.min_p))

    def must_randomize(self, variable: str) -> bool:
        return ALL_VARIABLES in self.always_randomize or variable in self.always_randomize


@dataclass(frozen=True)
class LocalPolicy:
    """The effective policy of one daemon (see the module docstring)."""

    paths: tuple[str, ...] = PATHS
    min_security: str = SEMI_HONEST  # the weakest security level a job may run at here
    min_key_bits: int = 2048
    disclosures: tuple[str, ...] = DISCLOSURE_MODES
    max_parents: int = 4
    max_family: int = 5
    min_statistical_bits: int = 40
    min_records: int = 100
    dp_max_epsilon: float = 10.0  # the largest epsilon one DP job may spend
    dp_total_epsilon: float = 100.0  # all DP jobs together, on this party's data set
    dp_max_delta: float = 1e-6  # the largest delta one DP job may allow
    dp_total_delta: float = 1e-5  # all DP jobs' deltas together, on this party's data set
    dp_peer_jobs_per_hour: int = 12  # DP jobs a peer may open here in any hour
    require_dp: bool = False  # every job that releases data must be a DP job
    pram: PramPolicy = field(default_factory=PramPolicy)
    workers: int | None = None
    executor: str = "local"
    ray_address: str | None = None
    cache_mb: int = 768
    spill_mb: int = 0
    spill_dir: str | None = None
    gc_inline_below: int = (
        GC_INLINE_BELOW  # garbled runs of fewer AND gates x instances: job thread
    )
    ot_inline_below: int = OT_INLINE_BELOW  # OT-extension calls of fewer OTs: job thread
    max_message_mb: int = 32
    max_queue_mb: int = 64
    max_jobs_kept: int = 100
    max_term_lanes: int = 16  # processes one job's terms lanes may start on this host
    source: str = "built-in default"

    # -- reading -------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path | None) -> LocalPolicy:
        """The built-in default, or the file's settings on top of it (TOML or JSON)."""
        if path is None:
            return cls()
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{file}: cannot read the policy file ({exc.strerror})") from None
        try:
            raw = json.loads(text) if file.suffix.lower() == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UserError(
                f"{file}: not valid {'JSON' if file.suffix == '.json' else 'TOML'}: {exc}"
            ) from None
        return cls.from_mapping(raw, str(file))

    @classmethod
    def from_mapping(cls, raw: Any, source: str) -> LocalPolicy:
        if not isinstance(raw, dict):
            raise UserError(f"{source}: the policy must be a table of settings")
        known = {f for f in cls.__dataclass_fields__ if f != "source"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise UserError(
                f"{source}: unknown policy setting {unknown[0]!r} (know: {', '.join(sorted(known))})"
            )
        values = dict(raw)
        pram_raw = values.pop("pram", {})
        if not isinstance(pram_raw, dict):
            raise UserError(f"{source}: 'pram' must be a table")
        unknown = sorted(set(pram_raw) - set(PramPolicy.__dataclass_fields__))
        if unknown:
            raise UserError(f"{source}: unknown setting pram.{unknown[0]}")
        pram = PramPolicy(
            min_p=pram_raw.get("min_p", PramPolicy.min_p),
            min_p_per_variable=dict(pram_raw.get("min_p_per_variable", {})),
            always_randomize=tuple(pram_raw.get("always_randomize", (ALL_VARIABLES,))),
        )
        for key in ("paths", "disclosures"):
            if key in values:
                values[key] = tuple(values[key]) if isinstance(values[key], list) else values[key]
        policy = replace(cls(), **values, pram=pram, source=source)
        policy.validate()
        return policy

    def validate(self) -> None:
        """One-line error for a setting out of range, naming it and the file."""
        where = self.source

        def bad(setting: str, rule: str) -> UserError:
            return UserError(f"{where}: policy setting {setting} {rule}")

        if not isinstance(self.paths, tuple) or not set(self.paths) <= set(PATHS):
            raise bad("paths", f"must list some of {', '.join(PATHS)}")
        if self.min_security not in SECURITY_LEVELS:
            raise bad("min_security", f"must be one of {', '.join(SECURITY_LEVELS)}")
        if self.min_key_bits not in KEY_BITS_CHOICES:
            raise bad("min_key_bits", f"must be one of {', '.join(map(str, KEY_BITS_CHOICES))}")
        if (
            not isinstance(self.disclosures, tuple)
            or not self.disclosures
            or not set(self.disclosures) <= set(DISCLOSURE_MODES)
        ):
            raise bad("disclosures", f"must list some of {', '.join(DISCLOSURE_MODES)}")
        for name, low, high in (
            ("max_parents", 0, 64),
            ("max_family", 2, 64),
            ("min_statistical_bits", 40, 128),
            ("min_records", 1, 10**12),
            ("max_message_mb", 1, 1024),
            ("max_queue_mb", 1, 4096),
            ("max_jobs_kept", 1, 100_000),
            ("max_term_lanes", 1, MAX_TERM_LANES),
            ("cache_mb", 0, 10**7),
            ("spill_mb", 0, 10**9),
            ("gc_inline_below", 0, 2**62),
            ("ot_inline_below", 0, 2**62),
            ("dp_peer_jobs_per_hour", 0, 10_000),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise bad(name, f"must be an integer in {low}..{high}")
        for name in ("dp_max_epsilon", "dp_total_epsilon"):
            if not finite_non_negative(getattr(self, name)):
                raise bad(name, "must be a finite number >= 0 (0: no DP job at all)")
        for name in ("dp_max_delta", "dp_total_delta"):
            value = getattr(self, name)
            if not (finite_non_negative(value) and value < MAX_DELTA):
                raise bad(name, f"must be a number in [0, {MAX_DELTA:g}) (0: no DP job at all)")
        if not isinstance(self.require_dp, bool):
            raise bad("require_dp", "must be true or false")
        if self.workers is not None and (
            isinstance(self.workers, bool)
            or not isinstance(self.workers, int)
            or not 1 <= self.workers <= 1024
        ):
            raise bad("workers", "must be an integer in 1..1024 (absent: one per core)")
        if self.executor not in EXECUTORS:
            raise bad("executor", f"must be one of {', '.join(EXECUTORS)}")
        if self.ray_address is not None and (
            not isinstance(self.ray_address, str) or self.executor != "ray"
        ):
            raise bad("ray_address", 'is a string, and only for executor = "ray"')
        if self.spill_dir is not None and not isinstance(self.spill_dir, str):
            raise bad("spill_dir", "must be a folder name")
        probabilities = {
            "pram.min_p": self.pram.min_p,
            **{f"pram.min_p_per_variable.{k}": v for k, v in self.pram.min_p_per_variable.items()},
        }
        for name, value in probabilities.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0.0 <= value < 1.0
            ):
                raise bad(name, "must be a probability in [0, 1)")
        if not all(isinstance(v, str) for v in self.pram.always_randomize):
            raise bad("pram.always_randomize", 'must list variable names (or "*")')

    def tables_settings(self) -> dict[str, Any]:
        """This party's own resources for the table phase, as ``TablesConfig`` fields."""
        return {
            "workers": self.workers,
            "executor": self.executor,
            "ray_address": self.ray_address,
            "cache_bytes": self.cache_mb * 2**20,
            "spill_bytes": self.spill_mb * 2**20,
            "spill_dir": self.spill_dir,
        }

    def batch_settings(self) -> dict[str, int]:
        """This party's thresholds for sending garbled runs and OT calls to its executor, as
        ``SecureLearnConfig`` fields."""
        return {"gc_inline_below": self.gc_inline_below, "ot_inline_below": self.ot_inline_below}

    @property
    def weak_key_allowed(self) -> bool:
        return self.min_key_bits == TEST_ONLY_KEY_BITS

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["pram"]["always_randomize"] = list(self.pram.always_randomize)
        out["paths"], out["disclosures"] = list(self.paths), list(self.disclosures)
        return out

    def to_toml(self) -> str:
        """The effective policy as a TOML file a person can edit (``ppbn policy show``)."""
        data = self.to_dict()
        source = data.pop("source")
        pram = data.pop("pram")
        lines = [f"# ppbn local policy (effective; from {source})"]
        for key, value in data.items():
            if value is None:
                lines.append(f"# {key} = (not set: {UNSET_NOTES[key]})")
            else:
                lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
        lines.append("[pram]")
        per_variable = pram.pop("min_p_per_variable")
        for key, value in pram.items():
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
        lines.append("[pram.min_p_per_variable]")
        lines.extend(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in per_variable.items())
        return "\n".join(lines) + "\n"

    # -- checks the job kinds call ---------------------------------------------------
    def require_path(self, path: str, kind: str) -> None:
        if path not in self.paths:
            raise PolicyRefusal(
                "kind",
                f"job kind {kind!r} is on the {path} path, which this party's policy does not allow "
                f"(allowed: {', '.join(self.paths) or 'none'})",
            )

    def require_records(self, n_records: int) -> None:
        if n_records < self.min_records:
            raise PolicyRefusal(
                "records",
                f"only {n_records} records, fewer than this party's policy minimum of {self.min_records}: "
                "on so few records the CPTs would reveal individual records",
            )

    def require_security(self, level: str) -> None:
        """A job runs at this party's ``min_security`` or stronger, whoever asked for it."""
        if level_rank(level) < level_rank(self.min_security):
            raise PolicyRefusal(
                "security",
                f"security level {level!r} is below this party's policy minimum "
                f"min_security {self.min_security!r}",
            )

    def require_key_bits(self, key_bits: int) -> None:
        if key_bits < self.min_key_bits:
            raise PolicyRefusal(
                "key_bits",
                f"key_bits {key_bits} is below this party's policy minimum {self.min_key_bits}",
            )

    def require_families(self, bound: FamilyBound | None) -> None:
        """The one check of every job kind's largest family against ``max_parents`` and
        ``max_family`` (``jobs.check_job_policy`` calls it; None: the job has no families)."""
        if bound is None:
            return
        if bound.parents > self.max_parents:
            raise PolicyRefusal(
                bound.parameter,
                f"{bound.reason}, above this party's policy maximum max_parents {self.max_parents}",
            )
        if bound.size > self.max_family:
            raise PolicyRefusal(
                bound.parameter,
                f"{bound.reason}, a family of {bound.size} variables, above this party's policy maximum "
                f"max_family {self.max_family}",
            )

    def require_privacy(
        self, cost: PrivacyCost | None, releases_data: bool, kind: str = "", dp_kind: bool = True
    ) -> None:
        """The per-job DP rules (``jobs.check_job_policy`` calls it; ``cost`` None: not a DP
        job): its epsilon within ``dp_max_epsilon``, its delta within ``dp_max_delta``, and
        with ``require_dp`` no job that releases data without DP (``dp_kind``: whether job
        ``kind`` has a DP release at all, for the refusal's advice). The totals over jobs
        need the daemon's budget file (``ppbn.parties.budget``), checked by the daemon after
        this."""
        if cost is None:
            if self.require_dp and releases_data:
                advice = (
                    "ask with --dp-epsilon"
                    if dp_kind
                    else f"job kind {kind or '(this)'} has no differentially private release; "
                    "run a learn job with --dp-epsilon instead"
                )
                raise PolicyRefusal(
                    "dp_epsilon" if dp_kind else "kind",
                    "the job's release is not differentially private, and this party's policy "
                    f"requires a differentially private release (require_dp); {advice}",
                )
            return
        epsilon, delta = cost.epsilon, cost.delta
        if not (finite_non_negative(epsilon) and finite_non_negative(delta)):
            raise PolicyRefusal(  # the kind's own check should have said so: never spend a refund
                "dp_epsilon",
                f"dp_epsilon {epsilon!r} and dp_delta {delta!r} must be finite numbers >= 0",
            )
        if epsilon > self.dp_max_epsilon:
            raise PolicyRefusal(
                "dp_epsilon",
                f"dp_epsilon {epsilon:g} is above this party's policy maximum dp_max_epsilon "
                f"{self.dp_max_epsilon:g}",
            )
        if delta > self.dp_max_delta:
            raise PolicyRefusal(
                "dp_delta",
                f"dp_delta {delta:g} is above this party's policy maximum dp_max_delta "
                f"{self.dp_max_delta:g}",
            )

    def require_disclosure(self, disclosure: str) -> None:
        if disclosure not in self.disclosures:
            raise PolicyRefusal(
                "disclosure",
                f"disclosure {disclosure!r} is not allowed by this party's policy (allowed: {', '.join(self.disclosures)})",
            )

    def term_lanes_offer(self) -> int:
        """The terms lanes this party offers a job that leaves their number to the parties
        (``lanes_agreement.lanes_offer``): the host's cores its pool leaves (the pool takes
        ``workers``, one per core unless the policy sets fewer), within
        ``max_term_lanes``; one with the inline executor."""
        if self.executor == "inline":
            return 1
        cores = os.cpu_count() or 1
        return lanes_offer(cores, self.workers or cores, self.max_term_lanes)

    def require_term_lanes(self, lanes: int | str) -> None:
        """A job's terms lanes are processes this daemon starts: the peer cannot ask for
        more than this party's policy allows ("auto" offers within it:
        ``term_lanes_offer``)."""
        if lanes == AUTO_LANES:
            return
        if lanes > self.max_term_lanes:
            raise PolicyRefusal(
                "term_lanes",
                f"term_lanes {lanes} is above this party's policy maximum max_term_lanes "
                f"{self.max_term_lanes}",
            )

    def require_statistical_bits(self, bits: int) -> None:
        if bits < self.min_statistical_bits:
            raise PolicyRefusal(
                "statistical_bits",
                f"statistical_bits {bits} is below this party's policy minimum {self.min_statistical_bits}",
            )

    def require_randomization(
        self, scheme: RandomizationScheme, own_variables: tuple[str, ...], parameter: str
    ) -> None:
        """Every variable of this party that the policy protects is changed with at least
        its minimum probability (for every original value) before it leaves the host."""
        for variable in own_variables:
            if not self.pram.must_randomize(variable):
                continue
            least = change_probability(scheme, variable)
            needed = self.pram.minimum_for(variable)
            if least < needed - PROBABILITY_ROUNDING or scheme.block_of(variable) is None:
                raise PolicyRefusal(
                    parameter,
                    f"variable {variable!r} would be released "
                    + ("unrandomized" if least == 0.0 else f"with change probability {least:.4g}")
                    + f", below this party's policy minimum {needed:g}",
                )


PROBABILITY_ROUNDING = 1e-12  # p / (K - 1) summed K - 1 times may round below p


def finite_non_negative(value: Any) -> bool:
    """An epsilon or delta one can add up: a number (not a bool), finite, not below 0."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def change_probability(scheme: RandomizationScheme, variable: str) -> float:
    """min over original values of Pr(released value of ``variable`` differs from the value
    most likely released for that original).

    For the mechanisms in use that keep the value most often (M-category p <= (K-1)/K,
    Warner theta > 1/2) this is the probability that the value changes. Measured against
    the most likely release, a relabelling is no randomization: Warner theta = 0 (always
    flip) or binary p near 1 is as weak as releasing the value unchanged, and the policy
    judges it so. For a joint block (several variables randomized together, Ma 2006
    Sec. 2.4) the released distribution of the variable's own component is used. 0 when
    the variable is not randomized at all.
    """
    block = scheme.block_of(variable)
    if block is None:
        return 0.0
    matrix = np.asarray(block.matrix, dtype=float)
    cards = block.cardinalities
    axis = block.variables.index(variable)
    states = np.indices(cards).reshape(len(cards), -1)[
        axis
    ]  # the variable's state per combined index
    released = np.stack([matrix[:, states == k].sum(axis=1) for k in range(cards[axis])], axis=1)
    return float(np.min(np.sort(released, axis=1)[:, :-1].sum(axis=1)))  # all but the most likely


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)
