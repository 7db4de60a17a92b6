"""The perturbation learners as daemon jobs over vertically partitioned data:
``perturb-learn`` (setup I: alice with bob, the class's owner learns) and
``perturb-learn-miner`` (setup II: started at the miner, which learns from both parties'
randomized columns), after Ma and Sivakumar (Sec. III-A); the protocol is
``ppbn.protocols.perturb``. What the two kinds share with the PRAM jobs is
``ppbn.jobs.randomized_job``; ``PerturbPath`` states what differs.

Parameters (the same at every daemon of the job; the mechanism is public):
``learner`` (nb: Zhan, Chang and Matwin; id3, perceptron, rules: Ma 2006, Ch. 6-7);
``class`` (nb, id3, perceptron); ``learner_party`` (rules in setup I: who learns, default
alice); the mechanism: exactly one of ``theta`` (Warner randomized response, binary
variables) and ``p`` (M-category randomization), ``randomized`` (the variables randomized;
default every variable) and ``groups`` (lists of one party's variables randomized
together); the learner's options as ``ppbn perturb learn`` has them: ``estimator``,
``alpha`` (nb), ``max_depth``, ``min_count`` (id3), ``positive``, ``encoding``, ``cost``,
``iterations``, ``pocket_seed`` (perceptron: the seed of the pocket's draws, which are
the learner's and not a randomization), ``min_support``, ``min_confidence``, ``max_size``
(rules). The randomization seed is never a job parameter: as on the PRAM path each party
randomizes with its own CSPRNG unless its daemon was started with
``--insecure-fixed-seed-for-testing``.

Before anything is sent each party checks the job against its local policy: the path
``perturb`` must be allowed, the record count at least the minimum, and every protected
variable of its own that leaves the host randomized strongly enough (in setup I the
learner's columns never leave, so only the other party's are checked). The policy
measures a mechanism against the most likely release (``policy.change_probability``), so
Warner's theta = 0, a deterministic flip, is refused as theta = 1 is.

Every daemon of the job writes ``model.json``: the learner's model (``to_dict``) plus
``mechanism``, ``privacy`` (gamma per disclosed block, as the PRAM path), ``stats``
(wall_s, phases, bytes_sent, bytes_received, rounds) and ``perturb`` (setup, role, what
was disclosed and received).
"""

from __future__ import annotations

from typing import Any

from ppbn.bn.schema import PARTIES, Schema
from ppbn.errors import DataError
from ppbn.jobs.base import JobContext, ParameterError, PolicyScope, check_known
from ppbn.jobs.policy import LocalPolicy
from ppbn.jobs.randomized_job import (
    JobOutputs,
    RandomizedPath,
    disclosure,
    number_param,
    refuse_seed,
    write_json,
)
from ppbn.protocols import perturb as perturb_protocol
from ppbn.protocols.perturb import VerticalOutcome, VerticalTask
from ppbn.protocols.pram import check_scheme_fits
from ppbn.randomized.constants import LEARNER_OPTIONS
from ppbn.randomized.perturb.estimated import ESTIMATORS
from ppbn.randomized.perturb.learners import CLASSIFIERS, LEARNERS, present_states
from ppbn.randomized.perturb.perceptron import COSTS, DEFAULT_ITERATIONS, ENCODINGS
from ppbn.randomized.perturb.response import check_theta, scheme_for
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme

SETUP_ONE_KIND = "perturb-learn"
SETUP_TWO_KIND = "perturb-learn-miner"
PATH = "perturb"
_MECHANISM = {"theta", "p", "randomized", "groups"}
_OPTIONS = {
    "nb": {"class", "estimator", "alpha"},
    "id3": {"class", "estimator", "max_depth", "min_count"},
    "perceptron": {
        "class",
        "estimator",
        "positive",
        "encoding",
        "cost",
        "iterations",
        "pocket_seed",
    },
    "rules": {"min_support", "min_confidence", "max_size"},
}
AVAILABLE_CASE_REFUSAL = (
    "{kind}: --missing available-case runs on the secure path only: randomized columns would "
    "show their receiver which cells are missing (start both daemons with --missing category)"
)


def _integer(
    kind: str, params: dict[str, Any], key: str, default: int | None, least: int
) -> int | None:
    value = params.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ParameterError(key, f"{kind}: {key!r} must be an integer >= {least}")
    return value


def _choice(
    kind: str, params: dict[str, Any], key: str, default: str | None, choices: tuple[str, ...]
) -> str | None:
    value = params.get(key, default)
    if value is not None and value not in choices:
        raise ParameterError(key, f"{kind}: {key!r} must be one of {', '.join(choices)}")
    return value


def _variables(kind: str, key: str, value: Any, schema: Schema) -> list[str]:
    if not isinstance(value, list) or not all(
        isinstance(v, str) and v in schema.names for v in value
    ):
        raise ParameterError(key, f"{kind}: {key!r} must list variables of the schema")
    return list(value)


def check_params(kind: str, params: dict[str, Any], schema: Schema, setup: int) -> dict[str, Any]:
    """The parameters checked, with the defaults of the learner's own options filled in: what
    the peer checks again, so only keys the learner knows (``full_params`` has them all)."""
    full = full_params(kind, params, schema, setup)
    known = _known(full["learner"], setup)
    return {k: v for k, v in full.items() if k in known and v is not None}


def _known(learner: str, setup: int) -> set[str]:
    """The parameters of ``learner``'s job in ``setup``."""
    rules_setup_one = {"learner_party"} if learner == "rules" and setup == 1 else set()
    return {"learner", *_MECHANISM, *_OPTIONS[learner], *rules_setup_one}


def full_params(kind: str, params: dict[str, Any], schema: Schema, setup: int) -> dict[str, Any]:
    """Every setting of the job (defaults for what the learner does not use), or a one-line
    error naming the parameter at fault."""
    refuse_seed(kind, params)
    learner = params.get("learner")
    if learner not in LEARNERS:
        raise ParameterError("learner", f"{kind}: 'learner' must be one of {', '.join(LEARNERS)}")
    check_known(kind, params, _known(learner, setup))
    out: dict[str, Any] = {"learner": learner, "class": None}
    if learner in CLASSIFIERS:
        class_name = params.get("class")
        if not isinstance(class_name, str) or class_name not in schema.names:
            raise ParameterError("class", f"{kind}: 'class' must name a variable of the schema")
        out["class"] = class_name
    out["learner_party"] = _choice(kind, params, "learner_party", "alice", PARTIES)
    out.update(_check_mechanism(kind, params, schema))
    out["estimator"] = _choice(kind, params, "estimator", None, ESTIMATORS)
    out["alpha"] = number_param(kind, params, "alpha", 1.0)
    if not out["alpha"] > 0:
        raise ParameterError("alpha", f"{kind}: 'alpha' must be > 0")
    out["max_depth"] = _integer(kind, params, "max_depth", None, 1)
    out["min_count"] = number_param(kind, params, "min_count", 1.0)
    if out["min_count"] < 0:
        raise ParameterError("min_count", f"{kind}: 'min_count' must be >= 0")
    out["positive"] = params.get("positive")
    if out["positive"] is not None and out["positive"] not in schema.variable(out["class"]).states:
        raise ParameterError(
            "positive", f"{kind}: 'positive' must name a state of the class {out['class']!r}"
        )
    if (
        learner == "perceptron"
        and out["positive"] is None
        and schema.cardinality(out["class"]) != 2
    ):
        raise ParameterError(
            "positive", f"{kind}: the class has more than 2 states: name the 'positive' one"
        )
    out["encoding"] = _choice(kind, params, "encoding", "onehot", ENCODINGS)
    out["cost"] = _choice(kind, params, "cost", "expected", COSTS)
    out["iterations"] = _integer(kind, params, "iterations", DEFAULT_ITERATIONS, 1)
    out["pocket_seed"] = _integer(kind, params, "pocket_seed", 0, 0)
    out["min_support"] = number_param(kind, params, "min_support", 0.05)
    if not 0.0 < out["min_support"] <= 1.0:
        raise ParameterError("min_support", f"{kind}: 'min_support' must be in (0, 1]")
    out["min_confidence"] = number_param(kind, params, "min_confidence", 0.6)
    if not 0.0 <= out["min_confidence"] <= 1.0:
        raise ParameterError("min_confidence", f"{kind}: 'min_confidence' must be in [0, 1]")
    out["max_size"] = _integer(kind, params, "max_size", None, 1)
    if learner == "rules":
        try:
            for variable in schema.variables:
                present_states(variable.name, variable.states)
        except DataError as exc:
            raise ParameterError("learner", f"{kind}: {exc}") from None
    return out


def _check_mechanism(kind: str, params: dict[str, Any], schema: Schema) -> dict[str, Any]:
    if ("theta" in params) == ("p" in params):
        raise ParameterError(
            "theta",
            f"{kind}: give exactly one of 'theta' (randomized response) and 'p' (M-category)",
        )
    out: dict[str, Any] = {"theta": None, "p": None}
    key = "theta" if "theta" in params else "p"
    value = number_param(kind, params, key, 0.0)
    try:
        out[key] = check_theta(value) if key == "theta" else value
    except RandomizationError as exc:
        raise ParameterError("theta", f"{kind}: {exc}") from None
    if key == "p" and not 0.0 <= value < 1.0:
        raise ParameterError("p", f"{kind}: 'p' must be in [0, 1)")
    out["randomized"] = _variables(
        kind, "randomized", params.get("randomized", list(schema.names)), schema
    )
    groups = params.get("groups", [])
    if not isinstance(groups, list):
        raise ParameterError("groups", f"{kind}: 'groups' must be a list of variable lists")
    out["groups"] = [_variables(kind, "groups", group, schema) for group in groups]
    grouped = [v for group in out["groups"] for v in group]
    if len(set(grouped)) != len(grouped) or not all(out["groups"]):
        raise ParameterError(
            "groups", f"{kind}: 'groups' must be nonempty lists, no variable in two of them"
        )
    try:
        scheme = build_scheme(out, schema)
    except RandomizationError as exc:
        raise ParameterError(key, f"{kind}: {exc}") from None
    try:
        check_scheme_fits(scheme, schema)
    except RandomizationError as exc:
        raise ParameterError("groups", f"{kind}: {exc}") from None
    return out


def build_scheme(params: dict[str, Any], schema: Schema) -> RandomizationScheme:
    """The public scheme of the parameters."""
    cards = dict(zip(schema.names, schema.cardinalities(), strict=True))
    return scheme_for(
        cards, params["randomized"], theta=params["theta"], p=params["p"], groups=params["groups"]
    )


def learner_options(params: dict[str, Any]) -> dict[str, Any]:
    """The learner's options of ``full_params`` in the names of ``fit_learner`` (and of
    ``ppbn perturb learn``)."""
    options = {k: params[k] for k in LEARNER_OPTIONS if k != "seed"}
    options["seed"] = params["pocket_seed"]
    return options


def _mechanism(params: dict[str, Any], scheme: RandomizationScheme) -> dict[str, Any]:
    kind = (
        {"kind": "randomized response", "theta": params["theta"]}
        if params["theta"] is not None
        else {"kind": "M-category", "p": params["p"]}
    )
    return {
        **kind,
        "randomized": params["randomized"],
        "groups": params["groups"],
        "scheme": scheme.to_dict(),
    }


def model_summary(learner: str, model: dict[str, Any]) -> dict[str, Any]:
    """A few figures of the model for the operator (the whole model is in model.json)."""
    if learner == "nb":
        return {"prior": model["prior"]}
    if learner == "id3":
        return {"nodes": model["nodes"], "depth": model["depth"]}
    if learner == "perceptron":
        return {"positive": model["positive"], "training_correct": model["training_correct"]}
    return {"frequent_itemsets": len(model["frequent_itemsets"]), "rules": len(model["rules"])}


class PerturbPath(RandomizedPath):
    """The perturbation learners: a model learned from estimated counts of the randomized
    columns; in setup I the learner's own columns never leave its host."""

    path = PATH
    kinds = (SETUP_ONE_KIND, SETUP_TWO_KIND)
    summaries = (
        "perturbation learner, setup I: the class's owner learns from the other's randomized columns",
        "perturbation learner, setup II: start at the miner; alice and bob send randomized columns",
    )
    available_case_refusal = AVAILABLE_CASE_REFUSAL
    protocol = perturb_protocol

    def check_params(
        self, kind: str, params: dict[str, Any], schema: Schema, setup: int
    ) -> dict[str, Any]:
        return check_params(kind, params, schema, setup)

    def settings(
        self, kind: str, params: dict[str, Any], schema: Schema, setup: int
    ) -> dict[str, Any]:
        return full_params(kind, params, schema, setup)

    def scheme(self, settings: dict[str, Any], schema: Schema) -> RandomizationScheme:
        return build_scheme(settings, schema)

    def plan(self, settings: dict[str, Any], schema: Schema) -> VerticalTask:
        return VerticalTask(
            settings["learner"],
            settings["class"],
            learner_options(settings),
            settings["learner_party"],
        )

    def randomized_parameter(
        self, settings: dict[str, Any], policy: LocalPolicy, scope: PolicyScope, setup: int
    ) -> str | None:
        """The mechanism's parameter, or 'randomized' when it leaves out a protected
        variable; None for setup I's learner, whose columns stay home."""
        learner = self.plan(settings, scope.schema).learning_party(scope.schema)
        if setup == 1 and scope.role == learner:
            return None
        listed = {*settings["randomized"], *(v for group in settings["groups"] for v in group)}
        if any(policy.pram.must_randomize(v) and v not in listed for v in scope.own_variables):
            return "randomized"
        return "theta" if settings["theta"] is not None else "p"

    def write_outputs(
        self,
        context: JobContext,
        settings: dict[str, Any],
        outcome: VerticalOutcome,
        setup: int,
        scheme: RandomizationScheme,
        privacy: list[dict[str, Any]],
        stats: dict[str, Any],
    ) -> JobOutputs:
        """model.json: the model, the mechanism, privacy, stats and what was disclosed."""
        document = {
            **outcome.model,
            "mechanism": _mechanism(settings, scheme),
            "privacy": privacy,
            "stats": stats,
            "perturb": disclosure(setup, context.role, outcome, learner=settings["learner"]),
        }
        summary = {
            "learner": settings["learner"],
            "class": settings["class"],
            "records": context.data.n_records or None,
            "model": model_summary(settings["learner"], outcome.model),
        }
        return JobOutputs(
            summary, {"model_json": write_json(context.out_dir / "model.json", document)}
        )


PERTURB = PerturbPath()
SETUP_ONE_JOB = PERTURB.job(1)
SETUP_TWO_JOB = PERTURB.job(2)
