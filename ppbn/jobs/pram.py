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
policy (``check_pram_policy``): every variable of its own that the policy protects must be
changed with at least the policy's minimum probability.

Every daemon of the job writes ``network.bif`` and ``network.json``: the JSON shape of
``ppbn reference`` plus ``stats`` (wall_s, phases, bytes_sent, bytes_received, rounds,
measured by the job itself), ``privacy`` (gamma under both zero conventions, K_p,
Dist_K and H(X | X_tilde) per disclosed block) and ``pram`` (setup, scheme, what was
received). Infinite gamma is written as the string "inf" to keep the JSON strict.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from ppbn.bn.io import network_json, write_bif
from ppbn.bn.k2 import DEFAULT_TAU
from ppbn.bn.schema import Schema
from ppbn.bn.scores import SCORE_MODES
from ppbn.errors import UserError
from ppbn.jobs.base import (
    ChannelGroup,
    JobContext,
    JobKind,
    ParameterError,
    PolicyScope,
    check_known,
)
from ppbn.jobs.policy import FamilyBound, LocalPolicy, PolicyRefusal
from ppbn.jobs.search_params import (
    SEARCH_DEFAULTS,
    check_search_params,
    hc_options_from,
    search_family_bound,
)
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.pram import (
    PramConfig,
    PramOutcome,
    check_scheme_fits,
    run_setup_one,
    run_setup_two_miner,
    run_setup_two_party,
)
from ppbn.randomized.pram.operators import RandomizationError, RandomizationScheme, RandomSource
from ppbn.randomized.pram.oracle import COUNT_METHODS

SETUP_ONE_KIND = "pram"
SETUP_TWO_KIND = "pram-miner"
DEFAULT_MAX_PARENTS = 2
SEED_WARNING = (
    "randomization seed fixed by this daemon's --insecure-fixed-seed-for-testing: TESTING ONLY, "
    "anyone who knows the seed can undo the randomization"
)
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


def _number(params: dict[str, Any], key: str, default: float) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ParameterError(key, f"pram: {key!r} must be a number")
    return float(value)


def check_pram_params(params: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """Normalise the job parameters or raise a one-line UserError (before any peer is asked)."""
    if "seed" in params:
        raise PolicyRefusal(
            "seed",
            "pram: a randomization seed is never taken from a job message (each party randomizes "
            "with its own CSPRNG; tests start the daemons with --insecure-fixed-seed-for-testing)",
        )
    check_known("pram", params, _KNOWN)
    if ("p" in params) == ("randomization" in params):
        raise ParameterError(
            "p", "pram: give exactly one of 'p' (every variable) and 'randomization' (per variable)"
        )
    out: dict[str, Any] = {}
    if "p" in params:
        out["p"] = _number(params, "p", 0.0)
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
    out["tau"] = _number(params, "tau", DEFAULT_TAU)
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
    out["c_star"] = _number(params, "c_star", 1.0)
    out["eta"] = _number(params, "eta", 1.0)
    if not out["c_star"] > 0 or not 0.0 < out["eta"] <= 1.0:
        raise ParameterError("c_star", "pram: 'c_star' must be > 0 and 'eta' in (0, 1]")
    out["counts"] = params.get("counts", "moment")
    if out["counts"] not in COUNT_METHODS:
        raise ParameterError("counts", f"pram: 'counts' must be one of {', '.join(COUNT_METHODS)}")
    out["dirichlet"] = _number(params, "dirichlet", 0.0)
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


AVAILABLE_CASE_REFUSAL = (
    "pram: --missing available-case runs on the secure path only: randomized columns would "
    "show their receiver which cells are missing (start both daemons with --missing category, "
    "or run the learn job)"
)


def check_pram_policy(params: dict[str, Any], policy: LocalPolicy, scope: PolicyScope) -> None:
    """The randomization of this party's own columns under its policy (the miner has none).

    Available-case analysis is refused: PRAM sends every randomized cell, and a missing cell
    cannot be randomized into a state without showing (or faking) that it was missing."""
    if scope.missing_rule == "available-case":
        raise UserError(AVAILABLE_CASE_REFUSAL)
    policy.require_path("pram", "pram")
    if scope.role == "miner":
        return
    policy.require_records(scope.n_records)
    parameter = "p" if "p" in params else "randomization"
    if "p" in params and params.get("sensitive") is not None:
        parameter = "sensitive"
    policy.require_randomization(build_scheme(params, scope.schema), scope.own_variables, parameter)


def pram_family_bound(params: dict[str, Any], schema: Schema) -> FamilyBound:
    """The search's largest family, as for the learn job (the miner's network has them)."""
    return search_family_bound(params, schema, "pram")


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


def pram_config(params: dict[str, Any], schema: Schema) -> PramConfig:
    return PramConfig(
        max_parents=params["max_parents"],
        mode=params["score"],
        tau=params["tau"],
        order=tuple(params["order"]),
        c_star=params["c_star"],
        eta=params["eta"],
        counts=params["counts"],
        pseudo_count=params["dirichlet"],
        search=params["search"],
        hc=hc_options_from(params, schema, "pram"),
        ess=float(params["ess"]),
    )


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


def _write_outputs(
    context: JobContext, outcome: PramOutcome, setup: int, scheme: RandomizationScheme, stats: dict
) -> dict[str, Any]:
    params = context.params
    # this party's own continuous variables are named by their intervals (local only)
    network = outcome.network.with_state_names(context.schema.state_names(context.data.bins))
    owners = {v.name: v.owner for v in context.schema.variables}  # public, like the schema
    document = network_json(
        network, outcome.order, outcome.edges, params["score"], params["tau"], owners
    )
    privacy = json_privacy(outcome.privacy)
    document["stats"] = stats
    document["privacy"] = privacy
    document["pram"] = {
        "setup": setup,
        "role": context.role,
        "scheme": scheme.to_dict(),
        "eta": params["eta"],
        "c_star": params["c_star"],
        "counts": params["counts"],
        "disclosed": list(outcome.disclosed),
        "received": list(outcome.received),
    }
    out = context.out_dir
    out.mkdir(parents=True, exist_ok=True)
    write_bif(network, out / "network.bif")
    (out / "network.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    result: dict[str, Any] = {
        "setup": setup,
        "records": context.data.n_records or None,
        "parents": document["parents"],
        "edges": document["edges"],
        "received": list(outcome.received),
        "privacy": privacy,
        "stats": stats,
        "network_json": str(out / "network.json"),
        "network_bif": str(out / "network.bif"),
    }
    if context.fixed_seed_for_testing is not None:
        result["warning"] = SEED_WARNING
    return result


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


def _progress(context: JobContext):
    """The search's (done, total, label) reports as the job's structured progress: the K2
    step or hill-climbing move it is on (``JobContext.advance``)."""
    return lambda done, total, label: context.advance(label, done, total)


def run_setup_one_job(role: str, channel: Channel, context: JobContext) -> dict[str, Any]:
    """Setup I between alice and bob: each learns its own children's families."""
    started = time.perf_counter()
    params, schema = context.params, context.schema
    scheme = build_scheme(params, schema)
    outcome = run_setup_one(
        role,
        channel,
        schema,
        context.data.codes,
        scheme,
        pram_config(params, schema),
        randomization_source(context),
        context.ledger,
        context.phase,
        _progress(context),
    )
    return _write_outputs(context, outcome, 1, scheme, job_stats(context, channel, started))


def run_setup_two_job(
    role: str, channel: Channel | ChannelGroup, context: JobContext
) -> dict[str, Any]:
    """Setup II: the miner learns from both parties' randomized data and sends the network back."""
    started = time.perf_counter()
    params, schema = context.params, context.schema
    scheme = build_scheme(params, schema)
    config = pram_config(params, schema)
    if isinstance(channel, ChannelGroup):
        outcome = run_setup_two_miner(
            channel.channels,
            schema,
            scheme,
            config,
            context.ledger,
            context.phase,
            _progress(context),
        )
    elif isinstance(channel, Channel) and role in ("alice", "bob"):
        outcome = run_setup_two_party(
            role,
            channel,
            schema,
            context.data.codes,
            scheme,
            config,
            randomization_source(context),
            context.ledger,
            context.phase,
        )
    else:
        raise ProtocolError(f"{SETUP_TWO_KIND} runs at the miner with alice and bob, not at {role}")
    return _write_outputs(context, outcome, 2, scheme, job_stats(context, channel, started))


SETUP_ONE_JOB = JobKind(
    SETUP_ONE_KIND,
    run_setup_one_job,
    check_setup_one_params,
    "PRAM setup I: randomized cross parents to the child's owner; both learn the network",
    check_pram_policy,
    pram_family_bound,
)
SETUP_TWO_JOB = JobKind(
    SETUP_TWO_KIND,
    run_setup_two_job,  # type: ignore[arg-type]
    check_pram_params,
    "PRAM setup II: start at the miner; alice and bob send randomized data, the miner learns",
    check_pram_policy,
    pram_family_bound,
)
