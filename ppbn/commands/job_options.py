"""Jobs started on a daemon: the job kind and its JSON parameters, the secure learn
job's parameters from the shared flags, and the DP release's flags."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ppbn.commands.checked_numbers import positive_float, positive_int
from ppbn.commands.learning_options import hc_job_params
from ppbn.commands.unused_flags import GIVEN, Noted, refuse_unused_dp_flags
from ppbn.dp.constants import DEFAULT_DELTA, DEFAULT_RELEASE, DEFAULT_STRUCTURE_SHARE, RELEASES
from ppbn.errors import UserError
from ppbn.protocols.constants import SECURITY_LEVELS, SEMI_HONEST

DEFAULT_JOB = "learn"
DISCLOSURES = ("public", "owner", "shared")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--job",
        default=DEFAULT_JOB,
        help=f"job kind (default {DEFAULT_JOB}: private K2 and parameters; also tables, ping, pram, "
        'perturb-learn: a perturbation learner, setup I, e.g. --params \'{"learner": "nb", "class": '
        '"dysp", "theta": 0.8}\'; at the miner\'s daemon: pram-miner, perturb-learn-miner)',
    )
    parser.add_argument(
        "--max-family", type=positive_int, help="tables job: largest family size (default 3)"
    )
    parser.add_argument(
        "--security",
        choices=SECURITY_LEVELS,
        help=f"security level of the job (default {SEMI_HONEST}); covert and malicious: a peer "
        "running a modified daemon is caught or learns nothing (tables and ping so far; "
        "SECURITY.md). Each daemon refuses a level below its policy's min_security",
    )
    parser.add_argument(
        "--params",
        help="job parameters as a JSON object (pram, perturb-learn and their -miner kinds take theirs "
        "here; see their --help and docs/user-guide.md)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")


def params_json(args: argparse.Namespace) -> dict[str, Any]:
    """--params as a JSON object ({} without it)."""
    if not args.params:
        return {}
    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as exc:
        raise UserError(f"--params is not valid JSON: {exc.msg}") from None
    if not isinstance(params, dict):
        raise UserError("--params must be a JSON object")
    return params


def job_params(args: argparse.Namespace) -> dict[str, Any]:
    """The job's JSON parameters: --params, then the shortcut flags on top."""
    params = params_json(args)
    if args.job == "tables" and args.max_family is not None:
        params["max_family"] = args.max_family
    if args.job == "learn" and getattr(args, "max_parents", None) is not None:
        params = {**learn_params(args), **params}
    if args.security is not None:
        params["security"] = args.security
    return params


def learn_params(args: argparse.Namespace) -> dict[str, Any]:
    """Parameters of the ``learn`` job (the secure path) from the shared learning options."""
    if getattr(args, "dirichlet", 0.0):
        raise UserError(
            "--dirichlet: the secure path computes maximum-likelihood parameters (Yang-Wright 7.1)"
        )
    params: dict[str, Any] = {
        "max_parents": args.max_parents,
        "score": args.score,
        "tau": args.tau,
        "c_star": args.c_star,
        "disclosure": args.disclosure,
        "overlap_tables": args.overlap_tables == "on",
        "split_terms": args.split_terms == "on",
        "term_lanes": args.term_lanes,
        "ot_k": args.ot_k,
    }
    if args.order:
        params["order"] = [v.strip() for v in args.order.split(",") if v.strip()]
    if args.key_bits is not None:
        params["key_bits"] = args.key_bits
    if args.score == "bdeu":
        params["ess"] = args.ess
    params.update(hc_job_params(args))
    params.update(dp_params(args))
    return params


def add_dp_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--dp-epsilon and its companions: a differentially private release (job learn)."""
    parser.add_argument(
        "--dp-epsilon",
        type=positive_float,
        action=Noted,
        metavar="E",
        help="release the network under (E, delta)-differential privacy: K2's parent choices "
        "by report-noisy-max and CPTs from noisily opened counts, the noise drawn inside the "
        "secure computation; each daemon charges E to its own budget (docs/security-dp.md). "
        "Needs --search k2, --score exact or bic, --disclosure public",
    )
    parser.add_argument(
        "--dp-delta",
        type=positive_float,
        default=DEFAULT_DELTA,
        action=Noted,
        metavar="D",
        help=f"needs --dp-epsilon: the largest delta accepted (default {DEFAULT_DELTA:g}); zCDP accounting, taken "
        "where it gives less noise, spends most of it, the noise's finite precision the rest "
        "(about 1e-13); a tiny delta such as 1e-30 keeps pure DP",
    )
    parser.add_argument(
        "--dp-structure-share",
        type=positive_float,
        default=DEFAULT_STRUCTURE_SHARE,
        action=Noted,
        metavar="S",
        help=f"needs --dp-epsilon: the structure's share of the budget (of epsilon under pure DP, of rho under "
        f"zCDP), the rest for the CPTs (default {DEFAULT_STRUCTURE_SHARE:g}, PrivBayes's beta)",
    )
    parser.add_argument(
        "--dp-release",
        choices=RELEASES,
        default=DEFAULT_RELEASE,
        action=Noted,
        help="needs --dp-epsilon: what is released: network (K2's structure and every family's "
        "noisy counts; the default), marginals (MST's way without a curator: noisy 1-way "
        "counts, a tree of pairs chosen by noisy L1 error, their noisy 2-way counts, and the "
        "network private-pgm fits to them) or adaptive (AIM's way: pairs chosen round by round "
        "against the model fitted so far; domains up to 2^24 cells); both --max-parents 1",
    )


def dp_params(args: argparse.Namespace) -> dict[str, Any]:
    """The DP parameters of a learn job, when --dp-epsilon is given (its companions are
    refused without it). The marginal releases choose pairs: max_parents 1 unless given."""
    refuse_unused_dp_flags(args)
    if getattr(args, "dp_epsilon", None) is None:
        return {}
    params = {
        "dp_epsilon": args.dp_epsilon,
        "dp_delta": args.dp_delta,
        "dp_structure_share": args.dp_structure_share,
        "dp_release": args.dp_release,
    }
    if args.dp_release != "network" and "max_parents" not in getattr(args, GIVEN, {}):
        params["max_parents"] = 1
    return params
