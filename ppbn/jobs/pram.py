"""The PRAM path's jobs (Ma and Sivakumar, Sec. III-A): ``pram`` (setup I, alice with bob)
and ``pram-miner`` (setup II, started at the miner, which runs it with alice and bob).

Parameters (the same at every daemon of the job; the randomization scheme is public):
``p`` (M-category randomization with this p for every variable, or for those listed in
``sensitive``) or ``randomization`` (a per-variable specification, see
``RandomizationScheme.from_spec``); the learning options ``max_parents``, ``score``,
``tau``, ``order``, ``c_star`` (the BIC penalty multiplier C*), ``eta`` (the threshold
of the Bayesian score, see ``ppbn.randomized.pram.oracle``), ``counts`` (moment or em),
``dirichlet``. The randomization seed is never a job parameter: each party draws its
randomization from its own CSPRNG, unless its daemon was started with the local flag
``--insecure-fixed-seed-for-testing`` (tests and ``ppbn compare`` only).

Before anything is randomized or sent, each party checks the scheme against its local
policy (``RandomizedPath.check_policy``, ``PramPath.randomized_parameter``): every variable
of its own that the policy protects must be changed with at least the policy's minimum
probability.

Every daemon of the job writes ``network.bif`` and ``network.json``: the JSON shape of
``ppbn reference`` plus ``stats`` (wall_s, phases, bytes_sent, bytes_received, rounds,
measured by the job itself), ``privacy`` (gamma under both zero conventions, K_p,
Dist_K and H(X | X_tilde) per disclosed block) and ``pram`` (setup, scheme, what was
received). Infinite gamma is written as the string "inf" to keep the JSON strict.

What the two kinds share with the perturbation jobs is ``ppbn.jobs.randomized_job``;
``PramPath`` states what differs.
"""

from __future__ import annotations

from typing import Any

from ppbn.bn.io import network_json, write_bif
from ppbn.bn.k2 import DEFAULT_TAU
from ppbn.bn.schema import Schema
from ppbn.bn.scores import SCORE_MODES
from ppbn.jobs.base import JobContext, ParameterError, PolicyScope, check_known
from ppbn.jobs.policy import FamilyBound, LocalPolicy
from ppbn.jobs.randomized_job import (
    JobOutputs,
    RandomizedPath,
    disclosure,
    number_param,
    refuse_seed,
    write_json,
)
from ppbn.jobs.search_params import (
    SEARCH_DEFAULTS,
    check_search_params,
    hc_options_from,
    search_family_bound,
)
from ppbn.protocols import pram as pram_protocol
from ppbn.protocols.pram import PramConfig, PramOutcome, check_scheme_fits
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme
from ppbn.randomized.pram.oracle import COUNT_METHODS

SETUP_ONE_KIND = "pram"
SETUP_TWO_KIND = "pram-miner"
DEFAULT_MAX_PARENTS = 2
_KNOWN = {
    "p",
    "randomization",
    "sensitive",
    "max_parents",
    "score",
    "tau",
    "order",
    "c_star",
    "eta",
    "counts",
    "dirichlet",
    *SEARCH_DEFAULTS,
}
HC_SETUP_ONE_REFUSAL = (
    "pram: hill climbing (search hc) needs setup II (a miner): in setup I each child's owner "
    "scores its own families, and a move is chosen among both parties' families"
)
AVAILABLE_CASE_REFUSAL = (
    "{kind}: --missing available-case runs on the secure path only: randomized columns would "
    "show their receiver which cells are missing (start both daemons with --missing category, "
    "or run the learn job)"
)


def check_pram_params(params: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """Normalise the job parameters or raise a one-line UserError (before any peer is asked)."""
    refuse_seed("pram", params)
    check_known("pram", params, _KNOWN)
    if ("p" in params) == ("randomization" in params):
        raise ParameterError(
            "p", "pram: give exactly one of 'p' (every variable) and 'randomization' (per variable)"
        )
    out: dict[str, Any] = {}
    if "p" in params:
        out["p"] = number_param("pram", params, "p", 0.0)
        if not 0.0 <= out["p"] < 1.0:
            raise ParameterError("p", "pram: 'p' must be in [0, 1)")
        sensitive = params.get("sensitive")
        if sensitive is not None:
            if not isinstance(sensitive, list) or any(v not in schema.names for v in sensitive):
                raise ParameterError(
                    "sensitive", "pram: 'sensitive' must list variables of the schema"
                )
            out["sensitive"] = list(sensitive)
    else:
        if not isinstance(params["randomization"], dict):
            raise ParameterError(
                "randomization", "pram: 'randomization' must be an object {variable: {kind, ...}}"
            )
        out["randomization"] = params["randomization"]
    max_parents = params.get("max_parents", DEFAULT_MAX_PARENTS)
    if (
        isinstance(max_parents, bool)
        or not isinstance(max_parents, int)
        or not 0 <= max_parents < len(schema.names)
    ):
        raise ParameterError(
            "max_parents", f"pram: 'max_parents' must be an integer in 0..{len(schema.names) - 1}"
        )
    out["max_parents"] = max_parents
    out["score"] = params.get("score", "exact")
    if out["score"] not in SCORE_MODES:
        raise ParameterError("score", f"pram: 'score' must be one of {', '.join(SCORE_MODES)}")
    out.update(check_search_params("pram", params, out["score"], schema))
    out["tau"] = number_param("pram", params, "tau", DEFAULT_TAU)
    if out["tau"] < 0:
        raise ParameterError("tau", "pram: 'tau' must be >= 0")
    order = params.get("order") or list(schema.names)
    if (
        not isinstance(order, list)
        or sorted(order) != sorted(schema.names)
        or len(set(order)) != len(order)
    ):
        raise ParameterError(
            "order", "pram: 'order' must list every variable of the schema exactly once"
        )
    out["order"] = [str(v) for v in order]
    out["c_star"] = number_param("pram", params, "c_star", 1.0)
    out["eta"] = number_param("pram", params, "eta", 1.0)
    if not out["c_star"] > 0 or not 0.0 < out["eta"] <= 1.0:
        raise ParameterError("c_star", "pram: 'c_star' must be > 0 and 'eta' in (0, 1]")
    out["counts"] = params.get("counts", "moment")
    if out["counts"] not in COUNT_METHODS:
        raise ParameterError("counts", f"pram: 'counts' must be one of {', '.join(COUNT_METHODS)}")
    out["dirichlet"] = number_param("pram", params, "dirichlet", 0.0)
    if out["dirichlet"] < 0:
        raise ParameterError("dirichlet", "pram: 'dirichlet' must be >= 0")
    try:
        check_scheme_fits(build_scheme(out, schema), schema)
    except RandomizationError as exc:
        raise ParameterError(_scheme_parameter(out), f"pram: {exc}") from None
    return out


def check_setup_one_params(params: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """Setup I's parameters: those of every PRAM job, with K2 only."""
    out = check_pram_params(params, schema)
    if out["search"] != "k2":
        raise ParameterError("search", HC_SETUP_ONE_REFUSAL)
    return out


def _scheme_parameter(params: dict[str, Any]) -> str:
    """The job parameter a randomization scheme comes from, named to the peer on refusal."""
    return "p" if "p" in params else "randomization"


def build_scheme(params: dict[str, Any], schema: Schema) -> RandomizationScheme:
    """The public randomization scheme the parameters describe; a scheme that cannot be
    built (e.g. not invertible) is a ParameterError naming 'p' or 'randomization'."""
    cards = dict(zip(schema.names, schema.cardinalities(), strict=True))
    try:
        if "p" in params:
            return RandomizationScheme.uniform(cards, params["p"], params.get("sensitive"))
        return RandomizationScheme.from_spec(cards, params["randomization"])
    except RandomizationError as exc:
        raise ParameterError(_scheme_parameter(params), f"pram: {exc}") from None


class PramPath(RandomizedPath):
    """The PRAM path: the network is learned from the randomized columns with the PRAM
    score oracle; refusals say "pram" for both setups."""

    path = "pram"
    kinds = (SETUP_ONE_KIND, SETUP_TWO_KIND)
    summaries = (
        "PRAM setup I: randomized cross parents to the child's owner; both learn the network",
        "PRAM setup II: start at the miner; alice and bob send randomized data, the miner learns",
    )
    available_case_refusal = AVAILABLE_CASE_REFUSAL
    protocol = pram_protocol
    reports_search_progress = True

    def message_prefix(self, kind: str) -> str:
        """Both setups' refusals say "pram", as their parameter errors do."""
        return "pram"

    def check_params(
        self, kind: str, params: dict[str, Any], schema: Schema, setup: int
    ) -> dict[str, Any]:
        return (
            check_setup_one_params(params, schema)
            if setup == 1
            else check_pram_params(params, schema)
        )

    def settings(
        self, kind: str, params: dict[str, Any], schema: Schema, setup: int
    ) -> dict[str, Any]:
        """The normalised parameters hold every setting already."""
        return params

    def scheme(self, settings: dict[str, Any], schema: Schema) -> RandomizationScheme:
        return build_scheme(settings, schema)

    def plan(self, settings: dict[str, Any], schema: Schema) -> PramConfig:
        return PramConfig(
            max_parents=settings["max_parents"],
            mode=settings["score"],
            tau=settings["tau"],
            order=tuple(settings["order"]),
            c_star=settings["c_star"],
            eta=settings["eta"],
            counts=settings["counts"],
            pseudo_count=settings["dirichlet"],
            search=settings["search"],
            hc=hc_options_from(settings, schema, "pram"),
            ess=float(settings["ess"]),
        )

    def randomized_parameter(
        self, settings: dict[str, Any], policy: LocalPolicy, scope: PolicyScope, setup: int
    ) -> str:
        if "p" in settings and settings.get("sensitive") is not None:
            return "sensitive"
        return _scheme_parameter(settings)

    def family_bound(self, params: dict[str, Any], schema: Schema) -> FamilyBound:
        """The search's largest family, as for the learn job (the miner's network has them)."""
        return search_family_bound(params, schema, "pram")

    def write_outputs(
        self,
        context: JobContext,
        settings: dict[str, Any],
        outcome: PramOutcome,
        setup: int,
        scheme: RandomizationScheme,
        privacy: list[dict[str, Any]],
        stats: dict[str, Any],
    ) -> JobOutputs:
        """network.bif and network.json; this party's own continuous variables are named by
        their intervals (local only), every variable's owner is public like the schema."""
        network = outcome.network.with_state_names(context.schema.state_names(context.data.bins))
        owners = {v.name: v.owner for v in context.schema.variables}
        document = network_json(
            network, outcome.order, outcome.edges, settings["score"], settings["tau"], owners
        )
        document["stats"] = stats
        document["privacy"] = privacy
        document["pram"] = disclosure(
            setup,
            context.role,
            outcome,
            scheme=scheme.to_dict(),
            eta=settings["eta"],
            c_star=settings["c_star"],
            counts=settings["counts"],
        )
        out = context.out_dir
        write_bif(network, out / "network.bif")
        summary = {
            "records": context.data.n_records or None,
            "parents": document["parents"],
            "edges": document["edges"],
        }
        files = {
            "network_json": write_json(out / "network.json", document),
            "network_bif": str(out / "network.bif"),
        }
        return JobOutputs(summary, files)


PRAM = PramPath()
SETUP_ONE_JOB = PRAM.job(1)
SETUP_TWO_JOB = PRAM.job(2)
