"""The command line's shared options: one home for the flags several commands take, the
checks they get and what they are read into, so the same flag means the same thing in
every command (``ppbn/commands/*.py`` import them from here, never from each other).

The ``type=`` helpers check numeric flags: a count, size or duration of zero or below
means nothing; checked here, argparse names the flag the user typed ("argument
--records: must be a positive integer (got 0)") instead of a later check tripping over
some other flag it affects.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppbn.bn.constants import DEFAULT_ESS, DEFAULT_TABU, DEFAULT_TAU, SCORE_MODES
from ppbn.bn.networks import NETWORKS
from ppbn.commands.unused_flags import Noted, refuse_unused_dp_flags, refuse_unused_search_flags
from ppbn.data.constants import MISSING_HELP, MISSING_RULES
from ppbn.dp.constants import DEFAULT_DELTA, DEFAULT_STRUCTURE_SHARE
from ppbn.errors import UserError
from ppbn.protocols.constants import DEFAULT_SUBFIELD_BITS, MAX_TERM_LANES, SUBFIELD_CHOICES

if TYPE_CHECKING:
    from ppbn.bn.learn import HCOptions
    from ppbn.circuits.ir import Circuit
    from ppbn.jobs.policy import LocalPolicy

MAX_WORKERS = 1024  # a local worker pool's ceiling, as the local policy's own rule for workers


# -- checked numbers (type= of numeric flags) ----------------------------------------------


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer (got {text!r})") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number (got {text!r})") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got {text})")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1: record counts, repeats, sizes."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {value})")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0: seeds, parent limits, lengths where 0 means none."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (got {value})")
    return value


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer in low..high, e.g. a worker count."""

    def check(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high} (got {value})")
        return value

    check.__name__ = f"int in {low}..{high}"  # argparse shows the name on a conversion error
    return check


def positive_float(text: str) -> float:
    """A number > 0: timeouts, sample sizes, multipliers."""
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number (got {text})")
    return value


def non_negative_float(text: str) -> float:
    """A number >= 0: tolerances and pseudo-counts, where 0 means none."""
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative number (got {text})")
    return value


# -- learning: score, search and hill climbing ---------------------------------------------


SEARCHES = ("k2", "hc")


def add_learning_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by every learner (reference, secure, PRAM): same meaning everywhere."""
    parser.add_argument(
        "--max-parents",
        type=non_negative_int,
        default=2,
        action=Noted,
        help="parent limit u (default 2)",
    )
    parser.add_argument(
        "--score",
        choices=SCORE_MODES,
        action=Noted,
        default="exact",
        help="exact (ln f), yw (Yang-Wright eq. 6), yw0 (eq. 6 minus zero cells), bic, bdeu "
        "(default exact)",
    )
    parser.add_argument(
        "--search",
        choices=SEARCHES,
        default="k2",
        action=Noted,
        help="k2 (needs a node order; the default) or hc: hill climbing over DAGs, no order "
        "(on the PRAM path: setup 2 only)",
    )
    parser.add_argument(
        "--ess",
        type=positive_float,
        default=DEFAULT_ESS,
        action=Noted,
        help=f"BDeu equivalent sample size (default {DEFAULT_ESS:g}, as pgmpy; needs --score bdeu)",
    )
    parser.add_argument(
        "--tau",
        type=non_negative_float,
        default=DEFAULT_TAU,
        action=Noted,
        help=f"K2 tolerance in nats: add a parent only if the score rises by more than tau "
        f"(default {DEFAULT_TAU:g})",
    )
    parser.add_argument(
        "--order",
        action=Noted,
        help="K2 node order as a comma list (default: schema order; needs --search k2)",
    )
    parser.add_argument(
        "--c-star",
        type=positive_float,
        default=1.0,
        action=Noted,
        help="BIC penalty multiplier C* (default 1; needs --score bic)",
    )
    parser.add_argument(
        "--dirichlet",
        type=non_negative_float,
        default=0.0,
        action=Noted,
        metavar="A",
        help="Dirichlet pseudo-count for parameters (default 0: maximum likelihood)",
    )
    add_hc_options(parser)


def add_hc_options(parser: argparse.ArgumentParser) -> None:
    """Hill-climbing options of the reference learner (pgmpy's HillClimbSearch semantics);
    each is refused without --search hc (``refuse_unused_search_flags``)."""
    group = parser.add_argument_group(
        "hill climbing (--search hc; each of these is refused without it)"
    )
    group.add_argument(
        "--tabu",
        type=non_negative_int,
        default=DEFAULT_TABU,
        action=Noted,
        metavar="N",
        help=f"tabu list length: the last N moves may not be undone (default {DEFAULT_TABU}, as pgmpy)",
    )
    group.add_argument(
        "--start",
        action=Noted,
        metavar="FILE",
        help="start DAG: a JSON list of [parent, child] edges, or a network.json",
    )
    group.add_argument(
        "--black-list", action=Noted, metavar="FILE", help="JSON list of edges never to add"
    )
    group.add_argument(
        "--white-list",
        action=Noted,
        metavar="FILE",
        help="JSON list of the only edges that may be added",
    )
    group.add_argument(
        "--fixed-edges",
        action=Noted,
        metavar="FILE",
        help="JSON list of edges always present (never deleted or reversed)",
    )


def hc_options(args: argparse.Namespace) -> HCOptions:
    """``HCOptions`` from the command line; file and edge errors are user errors."""
    from ppbn.bn.hc import read_edge_file
    from ppbn.bn.learn import HCOptions

    def edges(option: str):
        path = getattr(args, option.replace("-", "_"), None)
        if path is None:
            return None
        try:
            return read_edge_file(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"--{option}: {path}: file not found") from None
        except ValueError as exc:  # JSONDecodeError included
            raise UserError(f"--{option}: {path}: {exc}") from None

    if args.tabu < 0:
        raise UserError("--tabu must be >= 0")
    return HCOptions(
        args.tabu, edges("start"), edges("black-list"), edges("white-list"), edges("fixed-edges")
    )


def hc_job_params(args: argparse.Namespace) -> dict:
    """The hill-climbing parameters of the learn job (none for K2, where a hill-climbing
    flag is refused): the search, the tabu length and the edge lists read from their files
    (both daemons check them)."""
    refuse_unused_search_flags(args)
    if getattr(args, "search", "k2") != "hc":
        return {}
    opts = hc_options(args)
    params: dict = {"search": "hc", "tabu": opts.tabu_length}
    for name in ("start", "black_list", "white_list", "fixed_edges"):
        edges = getattr(opts, name)
        if edges is not None:
            params[name] = [[p, c] for p, c in edges]
    return params


def search_options(args: argparse.Namespace) -> dict:
    """``learn_reference`` keyword arguments for the search the command line asked for
    (the flags of another search refused)."""
    refuse_unused_search_flags(args)
    search = getattr(args, "search", "k2")
    return {"search": search, "hc": hc_options(args) if search == "hc" else None}


def parse_order(text: str | None, names: tuple[str, ...]) -> tuple[str, ...]:
    """The K2 node order: schema order by default, or a comma list naming every variable once."""
    if not text:
        return names
    order = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [v for v in order if v not in names]
    if unknown:
        raise UserError(f"--order: {unknown[0]!r} is not a variable of the schema")
    if len(set(order)) != len(order) or len(order) != len(names):
        missing = [v for v in names if v not in order]
        raise UserError(
            f"--order must name every variable exactly once (missing: {', '.join(missing) or 'none'})"
        )
    return order


def refuse_on_private_paths(args: argparse.Namespace, path: str = "secure") -> None:
    """The one place where the private paths (``learn``, ``simulate``, ``bench k2``) refuse
    what they cannot run: hill climbing in PRAM setup I (each child's owner learns its own
    families there, while a move is chosen among both parties')."""
    if getattr(args, "search", "k2") != "k2" and path == "PRAM" and getattr(args, "setup", 2) != 2:
        raise UserError(
            "--search hc on the PRAM path needs --setup 2 (a miner): in setup I each child's owner "
            "scores its own families, and a move is chosen among both parties' families"
        )


def add_learn_run_options(parser: argparse.ArgumentParser) -> None:
    """The data and learning options of a benchmark that runs the learn job on sampled data."""
    parser.add_argument("--network", required=True, help=f"one of: {', '.join(NETWORKS)}")
    parser.add_argument("--records", type=positive_int, required=True)
    parser.add_argument("--max-parents", type=non_negative_int, default=2)
    parser.add_argument("--score", choices=SCORE_MODES, default="exact")
    parser.add_argument(
        "--ess",
        type=float,
        default=DEFAULT_ESS,
        help=f"BDeu equivalent sample size (default {DEFAULT_ESS:g})",
    )
    parser.add_argument("--tau", type=float, default=DEFAULT_TAU)
    parser.add_argument("--seed", type=non_negative_int, default=7)


# -- data: missing values and record alignment ---------------------------------------------


def add_missing_options(parser: argparse.ArgumentParser, rate: bool = False) -> None:
    """``--missing`` (and ``--missing-as-category``, its older alias for ``category``) on
    every command that loads data; with ``rate`` also ``--missing-rate`` for generated data."""
    parser.add_argument("--missing", choices=MISSING_RULES, help=MISSING_HELP)
    parser.add_argument(
        "--missing-as-category",
        action="store_true",
        help="the same as --missing category: read empty cells as the schema's declared missing_state",
    )
    if rate:
        parser.add_argument(
            "--missing-rate",
            type=float,
            default=0.0,
            metavar="R",
            help="empty this fraction of the generated data's cells at random (each cell "
            "independently) before the run, to try --missing available-case (default 0)",
        )


def missing_rule(args: argparse.Namespace) -> str:
    """The rule of ``--missing`` / ``--missing-as-category`` (``error`` when neither is given)."""
    from ppbn.data.party_data import missing_rule_from

    return missing_rule_from(
        getattr(args, "missing", None), getattr(args, "missing_as_category", False)
    )


PSI_DEFAULT_OVERLAP = 0.6


def add_alignment_options(parser: argparse.ArgumentParser, sampling: bool = True) -> None:
    """--align for commands that start both daemons (and --overlap where they sample data)."""
    parser.add_argument(
        "--align",
        choices=("strict", "psi"),
        default="strict",
        help="strict (default): both parties hold the same record ids; psi: the daemons run a "
        "private set intersection of their ids and learn on the shared records only",
    )
    if sampling:
        parser.add_argument(
            "--overlap",
            type=float,
            help="share of each party's sampled records the other holds too (default 1, or "
            f"{PSI_DEFAULT_OVERLAP:g} with --align psi)",
        )


def sample_overlap(args: argparse.Namespace) -> float:
    """The overlap to sample with: given, or the default of the alignment; strict needs 1."""
    overlap = (
        args.overlap
        if args.overlap is not None
        else (PSI_DEFAULT_OVERLAP if args.align == "psi" else 1.0)
    )
    if overlap < 1.0 and args.align != "psi":
        raise UserError(f"--overlap {overlap:g}: parties with different records need --align psi")
    return overlap


# -- jobs started on a daemon, and the secure path's options -------------------------------


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


def dp_params(args: argparse.Namespace) -> dict[str, Any]:
    """The DP parameters of a learn job, when --dp-epsilon is given (its companions are
    refused without it)."""
    refuse_unused_dp_flags(args)
    if getattr(args, "dp_epsilon", None) is None:
        return {}
    return {
        "dp_epsilon": args.dp_epsilon,
        "dp_delta": args.dp_delta,
        "dp_structure_share": args.dp_structure_share,
    }


def add_secure_options(parser: argparse.ArgumentParser) -> None:
    """Options of the secure path (job ``learn``) besides the shared learning options."""
    group = parser.add_argument_group("secure path (job learn)")
    group.add_argument(
        "--disclosure",
        choices=DISCLOSURES,
        default="public",
        action=Noted,
        help="who learns the CPTs: public (both), owner (the owner of each variable), "
        "shared (each party keeps shares; `ppbn shares combine` opens them) (default public)",
    )
    group.add_argument(
        "--key-bits",
        type=int,
        choices=(2048, 3072),
        action=Noted,
        help="Paillier key size (default 2048)",
    )
    add_overlap_option(group)
    add_dp_options(group)


def add_overlap_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--overlap-tables and --split-terms: how K2 overlaps its work with the wire."""
    parser.add_argument(
        "--overlap-tables",
        choices=("on", "off"),
        default="on",
        action=Noted,
        help="score each K2 step's families in groups, the next group's Paillier table phase "
        "running while the current group's terms cross the wire: on (default) hides most of "
        "the table phase behind a slow link; off runs the phases one after the other, which "
        "is faster when both daemons share one small host (docs/user-guide.md, 'Overlapping work with the wire')",
    )
    parser.add_argument(
        "--split-terms",
        choices=("on", "off"),
        default="off",
        action=Noted,
        help="run each batch of at least 1,024 secure ln terms as two halves side by side on "
        "two lanes, so one half computes while the other's bytes cross the wire: on for a slow "
        "link (child across 100mbit/20ms: -1.6 s on average); off (default) on a fast link or "
        "when both daemons share one small host, where the second thread costs more than it "
        "hides (docs/user-guide.md, 'Two halves of each batch of terms')",
    )
    add_term_lanes_option(
        parser,
        "run each large batch of secure ln terms across N processes of each party, each "
        "on a lane of its own, so the term phase uses N cores per party (default 1: the job's "
        "own thread); for hosts with cores to spare, each party's policy caps N "
        "(max_term_lanes; docs/user-guide.md, 'Terms on many cores')",
    )
    add_ot_k_option(parser)


def add_term_lanes_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, help_text: str
) -> None:
    """--term-lanes N: the job's terms lanes per party (``term_lanes``), 1 to MAX_TERM_LANES."""
    parser.add_argument(
        "--term-lanes",
        type=int_in(1, MAX_TERM_LANES),
        default=1,
        action=Noted,
        metavar="N",
        help=help_text,
    )


def add_ot_k_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--ot-k {4,8}: SoftSpokenOT's k of the job's OT extensions (``ot_k``)."""
    parser.add_argument(
        "--ot-k",
        type=int,
        choices=SUBFIELD_CHOICES,
        default=DEFAULT_SUBFIELD_BITS,
        action=Noted,
        help="SoftSpokenOT's k for the secure terms' OT extensions: 8 (default) sends 2 bytes "
        "of extension message per OT, the fewest bytes, best on links below about 650 Mbit/s; "
        "4 sends 4 bytes (+12%% per exact term) for an eighth of the AES work, best on faster "
        "links and on one host (docs/user-guide.md, 'Less CPU per OT on a fast link')",
    )


# -- executor and local policy -------------------------------------------------------------


def add_executor_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, who: str
) -> None:
    """--executor, --workers and --ray-address: where this party's bulk arithmetic runs."""
    parser.add_argument(
        "--executor",
        choices=("local", "ray", "inline"),
        help=f"where {who} bulk work runs (chunks of Paillier encryptions, decryptions and "
        "products; garbled chunks and OT-extension blocks of runs past the policy's gc_inline_below "
        "and ot_inline_below): local (a process pool on this host, the default), ray (this party's own Ray "
        "cluster, `pip install 'ppbn[ray]'`), inline (this process)",
    )
    parser.add_argument(
        "--workers",
        type=int_in(1, MAX_WORKERS),
        help=f"worker processes of {who} local pool (default: one per core)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="join this party's running Ray cluster (e.g. 10.0.0.5:6379; see docs/user-guide.md, 'Scale-out'); "
        "default with --executor ray: a private Ray instance on this host",
    )


def check_executor_flags(executor: str, ray_address: str | None) -> None:
    """One-line errors for an executor this host cannot run, before any data is read."""
    from ppbn.errors import UserError
    from ppbn.protocols.executor import check_ray_address, ray_missing_message

    if ray_address and executor != "ray":
        raise UserError("--ray-address is only for --executor ray")
    if executor == "ray":
        if ray_address:  # before importing ray, which takes seconds
            try:
                check_ray_address(ray_address)
            except ConnectionError as exc:
                raise UserError(f"--executor ray: cannot join Ray: {exc}") from None
        missing = ray_missing_message()
        if missing is not None:
            raise UserError(missing)


def apply_resource_flags(policy: LocalPolicy, args: argparse.Namespace) -> LocalPolicy:
    """The policy with this command line's resource flags on top (flags win; all local)."""
    from dataclasses import replace

    changes = {
        name: getattr(args, name)
        for name in ("workers", "executor", "ray_address", "cache_mb", "spill_mb", "spill_dir")
        if getattr(args, name, None) is not None
    }
    if changes:
        if "ray_address" in changes and "executor" not in changes:
            changes["executor"] = "ray"
        if changes.get("ray_address") and changes["executor"] != "ray":
            raise UserError("--ray-address is only for --executor ray")
        executor = {"executor": changes.get("executor", policy.executor)}
        for name, value in changes.items():  # each against the policy's own rule, by its flag
            try:
                replace(policy, **{**executor, name: value}).validate()
            except UserError as exc:
                rule = str(exc).partition(f"policy setting {name} ")[2] or str(exc)
                raise UserError(f"--{name.replace('_', '-')} {value}: {rule}") from None
        policy = replace(policy, **changes)
        policy.validate()
    check_executor_flags(policy.executor, policy.ray_address)
    return policy


def add_pair_policy_options(parser: argparse.ArgumentParser) -> None:
    """--policy FILE and the executor flags of a command that starts both daemons itself."""
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="local policy file both daemons enforce (default: the built-in policy, which refuses "
        "e.g. 1024-bit keys, fewer than 100 records and PRAM p below 0.1; see `ppbn policy show`)",
    )
    add_executor_options(parser.add_argument_group("executor (each daemon's own)"), "each daemon's")


def pair_policy(args: argparse.Namespace) -> LocalPolicy | None:
    """The local policy both daemons of a local pair enforce: --policy FILE, else the
    built-in; --executor, --workers and --ray-address on top (each daemon its own executor)."""
    from ppbn.jobs.policy import LocalPolicy

    if (
        not args.policy
        and args.executor is None
        and args.workers is None
        and args.ray_address is None
    ):
        return None
    return apply_resource_flags(LocalPolicy.load(args.policy), args)


# -- files named by flags ------------------------------------------------------------------


def load_bristol(path: str) -> Circuit:
    """Read and parse a Bristol Fashion file; problems become one-line user errors."""
    from ppbn.circuits.bristol import BristolError, parse_bristol

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return parse_bristol(text, source=path)
    except BristolError as exc:
        raise UserError(str(exc)) from exc
