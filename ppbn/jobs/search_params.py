"""The search and BDeu parameters shared by the learn job and the PRAM jobs.

Both daemons run these checks on the job parameters they receive, the peer on the
normalised form (every default filled in): a hill-climbing setting given on a K2 job is
refused (``unused_params``), and the normalised form of a K2 job holds None for each, so
the peer's check of it passes. Edges are [parent, child] pairs of the schema.
"""

from __future__ import annotations

import math
from typing import Any

from ppbn.bn.hc import DEFAULT_TABU, prepare_start
from ppbn.bn.learn import HCOptions
from ppbn.bn.schema import Schema
from ppbn.bn.scores import DEFAULT_ESS
from ppbn.jobs.base import ParameterError
from ppbn.jobs.policy import FamilyBound
from ppbn.jobs.unused_params import HC_ONLY, refuse_unused

SEARCHES = ("k2", "hc")
MAX_TABU = 10_000  # a longer list only costs memory; pgmpy's default is 100
MAX_ESS = 1e4  # BDeu: a larger equivalent sample size would need wider secure counts
HC_EDGE_LISTS = ("start", "black_list", "white_list", "fixed_edges")
SEARCH_DEFAULTS: dict[str, Any] = {
    "ess": DEFAULT_ESS,  # BDeu's equivalent sample size (score "bdeu")
    "search": "k2",
    # hill climbing (search "hc"), pgmpy's HillClimbSearch settings
    "tabu": DEFAULT_TABU,
    **dict.fromkeys(HC_EDGE_LISTS),
}


def _edge_list(kind: str, name: str, value: Any, schema: Schema) -> list[tuple[str, str]] | None:
    if value is None:
        return None
    known = set(schema.names)
    if (
        not isinstance(value, list)
        or len(value) > len(known) ** 2
        or not all(
            isinstance(e, list)
            and len(e) == 2
            and all(isinstance(v, str) and v in known for v in e)
            and e[0] != e[1]
            for e in value
        )
    ):
        raise ParameterError(
            name,
            f"{kind}: {name} must be a list of [parent, child] pairs of distinct schema variables",
        )
    return [(e[0], e[1]) for e in value]


def hc_options_from(params: dict[str, Any], schema: Schema, kind: str = "learn") -> HCOptions:
    """The hill-climbing settings of normalised parameters (``check_search_params``); a K2
    job's (tabu None) get the default tabu length, which K2 never reads."""
    edges = {name: _edge_list(kind, name, params[name], schema) for name in HC_EDGE_LISTS}
    return HCOptions(
        DEFAULT_TABU if params["tabu"] is None else params["tabu"],
        edges["start"],
        edges["black_list"],
        edges["white_list"],
        edges["fixed_edges"],
    )


def check_search_params(
    kind: str, params: dict[str, Any], score: str, schema: Schema
) -> dict[str, Any]:
    """The search and ess settings of ``params``, normalised, or a ParameterError naming
    the one at fault. ``score`` is the job's (checked) score mode."""
    out = {name: params.get(name, default) for name, default in SEARCH_DEFAULTS.items()}
    ess = out["ess"]
    if ess != DEFAULT_ESS and score != "bdeu":
        raise ParameterError(
            "ess", f"{kind}: ess is the equivalent sample size of the bdeu score only"
        )
    if (
        isinstance(ess, bool)
        or not isinstance(ess, int | float)
        or not math.isfinite(ess)
        or not 0 < ess <= MAX_ESS
    ):
        raise ParameterError("ess", f"{kind}: ess must be a number in (0, {MAX_ESS:g}]")
    if out["search"] not in SEARCHES:
        raise ParameterError("search", f"{kind}: search must be one of {', '.join(SEARCHES)}")
    if out["search"] == "k2":
        refuse_unused(params, HC_ONLY, kind)  # the request as sent: left out means not given
        return {**out, "tabu": None}
    if params.get("order") not in (None, list(schema.names)):  # the PRAM jobs normalise to it
        raise ParameterError("order", f"{kind}: hill climbing (search hc) takes no order")
    tabu = out["tabu"]
    if isinstance(tabu, bool) or not isinstance(tabu, int) or not 0 <= tabu <= MAX_TABU:
        raise ParameterError("tabu", f"{kind}: tabu must be an integer in 0..{MAX_TABU}")
    opts = hc_options_from(out, schema, kind)
    try:
        prepare_start(schema.names, opts.start, opts.black_list, opts.white_list, opts.fixed_edges)
    except ValueError as exc:
        raise ParameterError("start", f"{kind}: {exc}") from None
    return out


def search_family_bound(params: dict[str, Any], schema: Schema, kind: str = "learn") -> FamilyBound:
    """The largest family a search with normalised ``params`` can score or parameterise.

    K2 and hill climbing never add a parent beyond ``max_parents``, but hill climbing
    starts from the start graph with the fixed edges put in, and scores (and may keep)
    those families whatever their size: a child given seven parents there has a family of
    eight. A white or black list only narrows what may be added, so it cannot enlarge a
    family. The bound names the parameter that sets it, so a refusal tells the peer which.
    """
    limit = params["max_parents"]
    bound = FamilyBound(
        limit, "max_parents", f"max_parents {limit} lets a child have {limit} parents"
    )
    if params["search"] != "hc":
        return bound
    opts = hc_options_from(params, schema, kind)
    try:
        forced, _, required = prepare_start(
            schema.names, opts.start, opts.black_list, opts.white_list, opts.fixed_edges
        )
    except ValueError as exc:
        raise ParameterError("start", f"{kind}: {exc}") from None
    for child in schema.names:
        count = len(forced[child])
        if count > bound.parents:
            fixed = sum(1 for _, c in required if c == child)  # fixed edges are always kept
            source = "fixed_edges" if fixed == count else "start"
            words = (
                "the fixed edges give"
                if source == "fixed_edges"
                else "the start graph (with the fixed edges) gives"
            )
            bound = FamilyBound(count, source, f"{words} {child!r} {count} parents")
    return bound
