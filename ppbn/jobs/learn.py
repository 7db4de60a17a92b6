"""The ``learn`` job: private K2 structure learning and exact parameters between the daemons.

Both daemons run ``ppbn.protocols.learning.learn.learn_secure`` with their own data and write, in
the job folder: ``network.json`` (the shape of ``ppbn reference --format json`` plus
``stats``; CPTs this party may not see are listed under ``parameters_withheld``),
``network.bif`` when this party sees every CPT, and with ``disclosure: shared`` its
``parameter_shares.json`` (additive shares; ``ppbn shares combine`` opens two of them).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ppbn.bn.hc import HCResult
from ppbn.bn.io import network_json, write_bif
from ppbn.bn.k2 import DEFAULT_TAU
from ppbn.bn.schema import Schema
from ppbn.bn.scores import SCORE_MODES
from ppbn.circuits.scoring import PARAM_BITS, PARAM_FRAC
from ppbn.dp.accounting import MARGINAL_RELEASES, DPPlan, plan
from ppbn.dp.constants import (
    DEFAULT_DELTA,
    DEFAULT_RELEASE,
    DEFAULT_STRUCTURE_SHARE,
    DP_SCORES,
    MAX_EPSILON,
    MIN_EPSILON,
    RELEASES,
)
from ppbn.dp.graphical_fit import MAX_JOINT_CELLS
from ppbn.errors import UserError
from ppbn.jobs.base import (
    JobContext,
    JobKind,
    ParameterError,
    PolicyScope,
    check_known,
)
from ppbn.jobs.checkpoint import CheckpointStore, data_digest
from ppbn.jobs.dp_bins import private_cut_count, recut
from ppbn.jobs.policy import LocalPolicy, PolicyRefusal, PrivacyCost
from ppbn.jobs.search_params import (
    SEARCH_DEFAULTS,
    check_search_params,
    hc_options_from,
    search_family_bound,
)
from ppbn.jobs.unused_params import DP_ONLY, refuse_unused
from ppbn.protocols.channel import Channel, ProtocolError
from ppbn.protocols.constants import (
    AUTO_LANES,
    DEFAULT_SUBFIELD_BITS,
    MAX_TERM_LANES,
    SUBFIELD_CHOICES,
)
from ppbn.protocols.fixedpoint import SCORE_FRAC
from ppbn.protocols.learning.config import DISCLOSURES, K2Checkpoint, SecureLearnConfig
from ppbn.protocols.learning.lanes_agreement import agreed_lanes
from ppbn.protocols.learning.learn import SecureLearnResult, learn_secure
from ppbn.protocols.ot import check_subfield_bits
from ppbn.protocols.paillier import KEY_BITS_CHOICES, TEST_ONLY_KEY_BITS, WEAK_KEY_WARNING
from ppbn.protocols.tables import TablesConfig

NETWORK_JSON = "network.json"
# the result's "search" of a marginal release: what chose its structure
SEARCH_LABELS = {"marginals": "marginal tree", "adaptive": "adaptive pairs"}
NETWORK_BIF = "network.bif"
SHARES_JSON = "parameter_shares.json"
DEFAULTS = {
    "max_parents": 2,
    "score": "exact",
    "tau": DEFAULT_TAU,
    "order": None,
    "c_star": 1.0,
    "disclosure": "public",
    "key_bits": TablesConfig.key_bits,
    "overlap_tables": True,  # scorer.SecureScorer.scores: the next families' table phase on a lane
    "split_terms": False,  # scorer.SecureScorer.terms: each batch of terms in two halves on two lanes
    # term_lanes.TermLanes: each large batch of terms across this many processes; "auto":
    # the smaller of the two parties' offers, each from its own host (lanes_agreement)
    "term_lanes": AUTO_LANES,
    "ot_k": DEFAULT_SUBFIELD_BITS,  # SoftSpokenOT's k: 8 the fewest bytes, 4 the least CPU
    # a differentially private release (docs/security-dp.md): None is the exact release
    "dp_epsilon": None,
    "dp_delta": DEFAULT_DELTA,
    "dp_structure_share": DEFAULT_STRUCTURE_SHARE,
    "dp_release": DEFAULT_RELEASE,
    **SEARCH_DEFAULTS,
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_dp_params(out: dict[str, Any], given: dict[str, Any], schema: Schema) -> None:
    """The DP parameters of ``out`` (normalised), and what a DP job needs of the others
    (``SecureLearnConfig.check_dp``). Without dp_epsilon, a dp_delta or dp_structure_share
    in ``given`` (the request as sent) is refused, and ``out`` holds None for both: the
    normalised form the peer checks, and an exact release has neither."""
    epsilon = out["dp_epsilon"]
    if epsilon is None:
        refuse_unused(given, DP_ONLY, "learn")
        out.update(dict.fromkeys(DP_ONLY))
        return
    if not _number(epsilon) or not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise ParameterError(
            "dp_epsilon",
            f"learn: dp_epsilon must be a number in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]",
        )
    if not _number(out["dp_delta"]) or not 0 < out["dp_delta"] < 1:
        raise ParameterError("dp_delta", "learn: dp_delta must be a number in (0, 1)")
    if not _number(out["dp_structure_share"]) or not 0 < out["dp_structure_share"] < 1:
        raise ParameterError(
            "dp_structure_share", "learn: dp_structure_share must be a number in (0, 1)"
        )
    for name, needed, why in (
        ("search", "k2", "a DP job searches with K2"),
        ("disclosure", "public", "a DP release goes to both parties"),
    ):
        if out[name] != needed:
            raise ParameterError(name, f"learn: {why}: {name} must be {needed}, not {out[name]}")
    if out["dp_release"] not in RELEASES:
        raise ParameterError(
            "dp_release", f"learn: dp_release must be one of {', '.join(RELEASES)}"
        )
    if out["dp_release"] in MARGINAL_RELEASES:
        check_marginal_release(out, given, schema)
    if out["score"] not in DP_SCORES:
        raise ParameterError(
            "score",
            f"learn: a DP job scores with {' or '.join(DP_SCORES)} (their sensitivity is stated), not {out['score']}",
        )


def check_marginal_release(out: dict[str, Any], given: dict[str, Any], schema: Schema) -> None:
    """The marginal releases choose pairs (``dp.marginal_release``, ``dp.adaptive_release``):
    max_parents is 1 (set when not given), and K2's node order has no part in them. The
    adaptive release reads its model's full joint: a larger domain is refused here."""
    release = out["dp_release"]
    if given.get("max_parents", 1) != 1:
        raise ParameterError(
            "max_parents",
            f"learn: the {release} release chooses pairs: max_parents must be 1 (or left out)",
        )
    if given.get("order") is not None:
        raise ParameterError(
            "order", f"learn: the {release} release chooses its pairs by noise, not an order"
        )
    cells = math.prod(len(v.states) for v in schema.variables)
    if release == "adaptive" and cells > MAX_JOINT_CELLS:
        raise ParameterError(
            "dp_release",
            f"learn: the adaptive release fits the whole joint domain, {cells:,} cells here "
            f"(at most {MAX_JOINT_CELLS:,}): use dp_release marginals",
        )
    out["max_parents"] = 1


def learn_privacy_cost(params: dict[str, Any]) -> PrivacyCost | None:
    """What a DP learn job spends of each party's budget: its epsilon, and the delta it
    allows (the plan's delta is at most that, ``dp.accounting.plan``)."""
    if params.get("dp_epsilon") is None:
        return None
    return PrivacyCost(float(params["dp_epsilon"]), float(params["dp_delta"]))


def dp_plan(params: dict[str, Any], schema: Schema, n_records: int) -> DPPlan | None:
    """The job's privacy plan, the same at both parties: everything in it is public."""
    if params["dp_epsilon"] is None:
        return None
    try:
        return plan(
            float(params["dp_epsilon"]),
            n_records=n_records,
            cardinalities=[v.cardinality for v in schema.variables],
            max_parents=params["max_parents"],
            mode=params["score"],
            score_frac=SCORE_FRAC,
            structure_share=float(params["dp_structure_share"]),
            delta=float(params["dp_delta"]),
            bins_cuts=private_cut_count(schema),
            release=params["dp_release"],
        )
    except ValueError as exc:
        raise ParameterError("dp_epsilon", f"learn: {exc}") from None


def check_learn_params(params: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """Normalise and check the job parameters (both daemons run this before starting)."""
    check_known("learn", params, set(DEFAULTS))
    out = {**DEFAULTS, **params}
    if (
        isinstance(out["max_parents"], bool)
        or not isinstance(out["max_parents"], int)
        or not 0 <= out["max_parents"] < len(schema.variables)
    ):
        raise ParameterError(
            "max_parents",
            f"learn: max_parents must be an integer in 0..{len(schema.variables) - 1}",
        )
    if out["score"] not in SCORE_MODES:
        raise ParameterError("score", f"learn: score must be one of {', '.join(SCORE_MODES)}")
    if (
        isinstance(out["tau"], bool)
        or not isinstance(out["tau"], int | float)
        or not 1e-6 <= out["tau"] <= 1e3
    ):
        raise ParameterError(
            "tau",
            "learn: tau must be a number in [1e-6, 1e3] (nats); the secure fixed-point error is ~1e-9",
        )
    if (
        isinstance(out["c_star"], bool)
        or not isinstance(out["c_star"], int | float)
        or not math.isfinite(out["c_star"])
        or out["c_star"] < 0
    ):
        raise ParameterError("c_star", "learn: c_star must be a finite number >= 0")
    if out["disclosure"] not in DISCLOSURES:
        raise ParameterError(
            "disclosure", f"learn: disclosure must be one of {', '.join(DISCLOSURES)}"
        )
    if out["key_bits"] not in KEY_BITS_CHOICES or isinstance(out["key_bits"], bool):
        raise ParameterError(
            "key_bits", f"learn: key_bits must be one of {', '.join(map(str, KEY_BITS_CHOICES))}"
        )
    if not isinstance(out["overlap_tables"], bool):
        raise ParameterError("overlap_tables", "learn: overlap_tables must be true or false")
    if not isinstance(out["split_terms"], bool):
        raise ParameterError("split_terms", "learn: split_terms must be true or false")
    lanes = out["term_lanes"]
    if lanes != AUTO_LANES and (
        isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= MAX_TERM_LANES
    ):
        raise ParameterError(
            "term_lanes",
            f"learn: term_lanes must be an integer in 1..{MAX_TERM_LANES} or {AUTO_LANES!r}",
        )
    if lanes != AUTO_LANES and lanes > 1 and out["split_terms"]:
        raise ParameterError(
            "term_lanes",
            "learn: term_lanes above 1 and split_terms are two ways to split; pick one",
        )
    try:
        check_subfield_bits(out["ot_k"])
    except ValueError:
        raise ParameterError(
            "ot_k", f"learn: ot_k must be one of {', '.join(map(str, SUBFIELD_CHOICES))}"
        ) from None
    if out["order"] is not None:
        order = out["order"]
        if (
            not isinstance(order, list)
            or not all(isinstance(v, str) for v in order)
            or sorted(order) != sorted(schema.names)
            or len(set(order)) != len(order)
        ):
            raise ParameterError(
                "order", "learn: order must list every variable of the schema exactly once"
            )
    out.update(check_search_params("learn", params, out["score"], schema))
    check_dp_params(out, params, schema)
    return out


def check_learn_policy(params: dict[str, Any], policy: LocalPolicy, scope: PolicyScope) -> None:
    """The secure path under this party's policy: key size, disclosure, records (the search
    size is the family bound, ``search_params.search_family_bound``)."""
    policy.require_path("secure", "learn")
    policy.require_records(scope.n_records)
    policy.require_key_bits(params["key_bits"])
    policy.require_disclosure(params["disclosure"])
    policy.require_term_lanes(params["term_lanes"])
    if params["dp_epsilon"] is not None and scope.missing_rule == "available-case":
        raise PolicyRefusal(
            "dp_epsilon",
            "a DP job needs complete records; this party runs --missing available-case",
        )


def result_json(
    result: SecureLearnResult,
    schema: Schema,
    config: SecureLearnConfig,
    state_names: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """The reference JSON shape, for whatever part of the parameters this party sees.

    ``state_names`` are this party's local names (its continuous variables' bins as
    intervals, ``Schema.state_names``); default the public ones."""
    search = result.search
    names = state_names or {v.name: v.states for v in schema.variables}
    owners = {v.name: v.owner for v in schema.variables}  # public, like the schema
    if result.network is not None:
        net = result.network.with_state_names(names)
        out = network_json(
            net, search.order, search.edges, config.mode, config.tau, owners, schema.party_names
        )
    else:
        out = {
            "order": list(search.order),
            "edges": [list(e) for e in search.edges],
            "parents": {v: list(ps) for v, ps in search.parents.items()},
            "parameters": {
                v: {
                    "parents": list(search.parents[v]),
                    "states": list(names[v]),
                    "table": cpt.tolist(),
                    "unobserved": list(result.parameters.unobserved.get(v, ())),
                }
                for v, cpt in result.parameters.cpts.items()
            },
            "score": config.mode,
            "tau": config.tau,
            "owners": owners,
        }
        if schema.party_names:  # this party's own display names, never the peer's
            out["party_names"] = dict(schema.party_names)
        out["parameters_withheld"] = [v for v in schema.names if v not in result.parameters.cpts]
    out["disclosure"] = config.disclosure
    out["search"] = search_label(config)
    if config.mode == "bdeu":
        out["ess"] = config.ess
    if isinstance(search, HCResult):
        # the moves in order, as both ledgers list them; their deltas stay hidden
        out["moves"] = [{"kind": m.move.kind, "edge": list(m.move.edge)} for m in search.moves]
        out["tabu"] = config.hc.tabu_length
        out["start"] = [[p, c] for c in search.names for p in search.start[c]]
        out["families_scored"] = search.families_scored
    return out


def search_label(config: SecureLearnConfig) -> str:
    """How the structure was found: k2, hc, or a marginal release's pairs."""
    if config.dp is not None and config.dp.release in SEARCH_LABELS:
        return SEARCH_LABELS[config.dp.release]
    return config.search


def write_parameter_shares(
    path: Path, role: str, result: SecureLearnResult, schema: Schema
) -> None:
    shares = {
        v: {
            "parents": list(result.search.parents[v]),
            "states": list(schema.variable(v).states),
            "theta": part["theta"],
            "unobserved": part["unobserved"],
        }
        for v, part in result.parameters.shares.items()
    }
    meta = {
        "role": role,
        "schema_fingerprint": schema.fingerprint(),
        "theta_modulus": f"2^{PARAM_BITS}",
        "theta_frac_bits": PARAM_FRAC,
        "unobserved_modulus": "2",
        "layout": "one entry per CPT cell, rows = parent configurations in C order, child state fastest",
        "note": "additive shares: this file alone says nothing about the parameters",
        "variables": shares,
    }
    path.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def combine_parameter_shares(
    alice: dict[str, Any], bob: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Open two parameter-share files into CPTs (both parties must agree to do this)."""
    if {alice.get("role"), bob.get("role")} != {"alice", "bob"}:
        raise UserError("shares combine needs one file of alice and one of bob")
    if alice.get("schema_fingerprint") != bob.get("schema_fingerprint"):
        raise UserError("the two share files come from different schemas")
    if set(alice["variables"]) != set(bob["variables"]):
        raise UserError("the two share files hold different variables")
    modulus, frac = 1 << PARAM_BITS, alice["theta_frac_bits"]
    out = {}
    for v, a in alice["variables"].items():
        b = bob["variables"][v]
        d = len(a["states"])
        if len(a["theta"]) != len(b["theta"]) or len(a["theta"]) % d:
            raise UserError(f"variable {v!r}: the two share files disagree on the table size")
        theta = [
            ((x + y) % modulus) / (1 << frac) for x, y in zip(a["theta"], b["theta"], strict=True)
        ]
        flags = [(x + y) % 2 for x, y in zip(a["unobserved"], b["unobserved"], strict=True)]
        out[v] = {
            "parents": a["parents"],
            "states": a["states"],
            "table": [theta[i : i + d] for i in range(0, len(theta), d)],
            "unobserved": [i // d for i in range(0, len(flags), d) if flags[i]],
        }
    return out


def family_records_json(
    counts: dict[str, int] | None, n_records: int, rule: str, names: tuple[str, ...]
) -> dict[str, Any]:
    """Records each family of the learned network was counted on. Under available-case
    analysis these are the counts opened by ``learning.parameters.family_record_counts`` (in both
    ledgers); under the other rules every family uses all n records (public)."""
    families = counts if counts is not None else dict.fromkeys(names, n_records)
    return {"rule": rule, "records": n_records, "families": {v: int(families[v]) for v in names}}


def checkpoint_meta(context: JobContext) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: job, party, parameters, schema, own data."""
    return {
        "job_id": context.job_id,
        "kind": "learn",
        "role": context.role,
        "params": context.params,
        "schema": context.schema.fingerprint(),
        "data": data_digest(context.data.ids, context.data.codes),
    }


def checkpoint_store(context: JobContext) -> CheckpointStore:
    return CheckpointStore(context.out_dir.parent, context.job_id, context.role)


def agree_resume_step(
    channel: Channel, store: CheckpointStore, meta: dict[str, Any]
) -> K2Checkpoint | None:
    """Both parties reveal only their last completed K2 step (a public number) and continue
    from the smaller one; this party loads its own checkpoint of that step."""
    steps = store.steps()
    mine = steps[-1] if steps else 0
    channel.send_u64s("resume.step", [mine])
    theirs = channel.recv_u64s("resume.step", 1)[0]
    step = min(mine, theirs)
    if step == 0:
        return None
    if step not in steps:
        raise ProtocolError(
            f"cannot resume: the peer's last completed K2 step is {theirs}, and {meta['role']} no longer "
            f"holds a checkpoint of step {step} (it has {steps or 'none'})"
        )
    header, state = store.load(step)
    for key in ("job_id", "kind", "role", "params", "schema", "data"):
        if header.get(key) != meta[key]:
            raise ProtocolError(
                f"cannot resume: the checkpoint of step {step} was made with another {key}"
            )
    return state


def job_term_lanes(channel: Channel, context: JobContext) -> int:
    """The job's terms lanes: its ``term_lanes`` as asked, or for "auto" the two parties'
    agreement (``lanes_agreement.agreed_lanes``, this party offering from its own policy).
    A job that runs no ln terms in lanes (``split_terms``, a marginal release) takes one
    without an offer. The number is in the job's statistics (``term_lanes``)."""
    params = context.params
    lanes = params["term_lanes"]
    if lanes == AUTO_LANES:
        lanes = 1
        if not params["split_terms"] and params["dp_release"] not in MARGINAL_RELEASES:
            cards = [v.cardinality for v in context.schema.variables]
            offer = context.policy.term_lanes_offer()
            lanes = agreed_lanes(channel, offer, cards, context.ledger)
    context.count("term_lanes", lanes)
    return int(lanes)


def run_learn_job(role: str, channel: Channel, context: JobContext) -> dict[str, Any]:
    params = context.params
    schema = context.schema
    lanes = job_term_lanes(channel, context)  # the job's first message where it has one
    config = SecureLearnConfig(
        max_parents=params["max_parents"],
        mode=params["score"],
        tau=float(params["tau"]),
        order=tuple(params["order"]) if params["order"] else None,
        c_star=float(params["c_star"]),
        disclosure=params["disclosure"],
        tables=TablesConfig(key_bits=params["key_bits"], **context.policy.tables_settings()),
        **context.policy.batch_settings(),
        # the rule both daemons agreed on in the handshake (Hello.missing_rule)
        available_case=context.data.missing_rule == "available-case",
        search=params["search"],
        hc=hc_options_from(params, schema),
        ess=float(params["ess"]),
        overlap_tables=params["overlap_tables"],
        split_terms=params["split_terms"],
        term_lanes=lanes,
        ot_k=params["ot_k"],
        dp=dp_plan(params, schema, context.data.n_records),
    )

    if params["key_bits"] == TEST_ONLY_KEY_BITS:
        context.progress(WEAK_KEY_WARNING)

    progress = context.advance  # phases, K2 / hc steps, units of work (ln terms, encrypt, ...)

    data = context.data
    if config.dp is not None and config.dp.bins_cuts:
        # the owners' cut points drawn again under DP (jobs.dp_bins): the checkpoints of an
        # earlier run hold shares of other bins, so such a job resumes from its start
        data = recut(data, config.dp.epsilon_per_cut)
    store = checkpoint_store(context)
    meta = checkpoint_meta(context)
    resumable = context.resume and data is context.data
    start = agree_resume_step(channel, store, meta) if resumable else None
    if context.resume:
        context.progress(f"phase resume after K2 step {start.step if start else 0}")

    def save(state: K2Checkpoint) -> None:
        store.save(meta, state)
        context.checkpoint_written()
        context.progress(f"checkpoint after K2 step {state.step}")

    result = learn_secure(
        channel,
        role,
        schema,
        data.codes,
        config,
        context.ledger,
        progress,
        context.counters,
        resume=start,
        checkpoint=save,
        before_release=context.before_release,
    )
    for phase, seconds in result.stats["phases"].items():
        context.phases[phase] = context.phases.get(phase, 0.0) + seconds
    context.count("and_gates", result.stats["and_gates"])
    context.count("ots", result.stats["ots"])
    context.count("ln_evaluations", result.stats["ln_evaluations"])
    # local: intervals only for cut points this party knows and may write (a DP job's own
    # private cut points, published ones; never the exact cuts of its records under DP)
    state_names = schema.state_names(data.bins)
    out = result_json(result, schema, config, state_names)
    out["family_records"] = family_records_json(
        result.family_records, context.data.n_records, context.data.missing_rule, schema.names
    )
    if config.dp is not None:
        out["privacy"] = config.dp.as_dict()
    out["stats"] = result.stats
    context.out_dir.mkdir(parents=True, exist_ok=True)
    (context.out_dir / NETWORK_JSON).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    files = [str(context.out_dir / NETWORK_JSON)]
    if result.network is not None:
        write_bif(result.network.with_state_names(state_names), context.out_dir / NETWORK_BIF)
        files.append(str(context.out_dir / NETWORK_BIF))
    if config.disclosure == "shared":
        write_parameter_shares(context.out_dir / SHARES_JSON, role, result, schema)
        files.append(str(context.out_dir / SHARES_JSON))
    store.remove_all()
    return {
        "search": search_label(config),
        **({"moves": len(out["moves"])} if "moves" in out else {}),
        "edges": out["edges"],
        "parents": out["parents"],
        "score": config.mode,
        "tau": config.tau,
        "disclosure": config.disclosure,
        "parameters_visible": sorted(result.parameters.cpts),
        "family_records": out["family_records"],
        **({"privacy": out["privacy"]} if "privacy" in out else {}),
        "files": files,
        "paillier_encryptions": context.counters.encryptions,
        **({"warning": WEAK_KEY_WARNING} if params["key_bits"] == TEST_ONLY_KEY_BITS else {}),
    }


LEARN_JOB = JobKind(
    "learn",
    run_learn_job,
    check_learn_params,
    "private K2 structure learning and exact parameters (Yang-Wright secure path)",
    check_learn_policy,
    search_family_bound,
    privacy_cost=learn_privacy_cost,
)
