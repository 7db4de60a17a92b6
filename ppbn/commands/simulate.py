"""``ppbn simulate``: both daemons as local processes over loopback mutual TLS, one job.

A two-party data set, throw-away certificates, alice's and bob's daemons on free loopback
ports, the job run through alice's daemon, the result and each party's figures; every
daemon is stopped however the run ends. ``--path pram`` runs the PRAM path (Ma and
Sivakumar, Sec. III-A), ``--path perturb`` a perturbation learner, in ``--setup 1`` or
``--setup 2`` (a third daemon, the miner, learns). ``ppbn.simulate`` (ppbn/api) runs
every path and refuses, naming the flags, what it cannot run; this module reads the
flags and simulate_print.py prints. ``--reveal-for-testing`` opens both parties' shares:
something no real deployment may do, so it says so loudly.
"""

from __future__ import annotations

import argparse
import signal
from typing import Any

from ppbn.commands.checked_numbers import non_negative_int, positive_float, positive_int
from ppbn.commands.data_options import add_alignment_options, add_missing_options, missing_rule
from ppbn.commands.executor_options import add_pair_policy_options, pair_policy
from ppbn.commands.job_options import add_job_arguments, job_params, params_json
from ppbn.commands.learning_options import add_learning_options, hc_job_params
from ppbn.commands.secure_options import add_secure_options
from ppbn.commands.unused_flags import Noted
from ppbn.errors import UserError
from ppbn.protocols.constants import DEFAULT_TIMEOUT_S, SEMI_HONEST
from ppbn.randomized.constants import COUNT_METHODS

# The protocol paths `--path` selects; "job" is the secure path's machinery running --job.
PATHS = ("secure", "pram", "perturb", "job")
RANDOMIZED_PATHS = ("pram", "perturb")
SETUP_FLAGS = ("setup", "randomization_seed")  # --path pram and perturb
PRAM_FLAGS = ("p", "randomization", "eta", "counts")  # --path pram only


def raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run_path(args: argparse.Namespace) -> int:
    """`ppbn simulate`: the secure path (job learn, checked against the reference), the
    PRAM or perturbation path, or the job given by --job (path "job")."""
    from ppbn.api.simulate import simulate
    from ppbn.api.spelling import FLAGS
    from ppbn.commands.progress import progress_reporter
    from ppbn.commands.simulate_print import print_daemons_up, print_simulation, print_warnings

    if args.path is None:  # --job tables (or ping, ...) alone means the job path
        args.path = "secure" if args.job == "learn" else "job"
    refuse_unused_path_flags(args)
    if args.plot and args.path in RANDOMIZED_PATHS:
        raise UserError(f"--plot draws the secure path's network, not --path {args.path}'s")
    if args.path == "secure" and args.job != "learn":
        raise UserError(f"--job {args.job} needs --path job (the secure path is the learn job)")
    path_arguments = _path_arguments(args)
    if args.plot:  # before any work: an unwritable picture must not cost the run
        from ppbn.data.outputs import check_output_file

        if args.job != "learn":
            raise UserError("--plot draws a learned network: it needs the learn job")
        check_output_file(args.plot, "--plot")
    print_warnings(args)
    quiet = args.format == "json"
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        sim = simulate(
            args.network,
            args.records,
            data=args.data,
            seed=args.seed,
            out=args.out,
            force=args.force,
            policy=pair_policy(args),
            missing=missing_rule(args),
            align=args.align,
            overlap=args.overlap if not args.data else None,
            missing_rate=args.missing_rate,
            timeout_s=args.timeout,
            reveal_for_testing=args.reveal_for_testing,
            progress=progress_reporter(quiet),  # a bar on a terminal, else lines
            on_daemons_up=None if quiet else print_daemons_up(args),
            spell=FLAGS,
            **path_arguments,
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    return print_simulation(args, sim)


def _path_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """``simulate``'s path, job kind and parameters from the flags of ``--path``."""
    if args.path not in RANDOMIZED_PATHS:
        return {"kind": args.job, "params": job_params(args)}
    randomized = {
        "path": args.path,
        "setup": args.setup,
        "randomization_seed": args.randomization_seed,
    }
    if args.path == "perturb":
        return {**randomized, "params": params_json(args)}
    params: dict[str, Any] = {
        "p": args.p,
        "randomization": args.randomization,
        "max_parents": args.max_parents,
        "score": args.score,
        "tau": args.tau,
        "c_star": args.c_star,
        "eta": args.eta,
        "counts": args.counts,
        "dirichlet": args.dirichlet,
    }
    if args.search == "k2":  # the schema's order unless --order names another
        params["order"] = [v.strip() for v in (args.order or "").split(",") if v.strip()]
    if args.score == "bdeu":
        params["ess"] = args.ess
    params.update(hc_job_params(args))
    return {**randomized, "params": params}


def refuse_unused_path_flags(args: argparse.Namespace) -> None:
    """A flag of another path than ``--path`` is a user error naming it and that path,
    before any data is made or daemon started (``unused_flags``)."""
    from ppbn.commands.unused_flags import refuse_given, refuse_unused_flags

    if args.path in RANDOMIZED_PATHS and args.security not in (None, SEMI_HONEST):
        raise UserError(
            f"--security {args.security}: the {args.path} path runs at semi-honest only (its "
            "randomization protects each column before it leaves; SECURITY.md)"
        )
    if args.path not in RANDOMIZED_PATHS:
        refuse_given(args, SETUP_FLAGS, "--path pram or perturb")
    if args.path != "pram":
        refuse_given(args, PRAM_FLAGS, "--path pram")
    refuse_unused_flags(args, args.path)


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "simulate",
        help="run both daemons locally over loopback mutual TLS and one job between them",
        description="Generate (or load) a two-party data set, make certificates, start alice's "
        "and bob's daemons as separate processes on loopback ports, run the job, print the "
        "result and per party wall time per phase, bytes, rounds and public-key operations, "
        "and stop both daemons whatever happens.",
    )
    parser.add_argument("--network", help="network to sample from (see `ppbn datasets make`)")
    parser.add_argument("--records", type=positive_int, help="number of records to sample")
    parser.add_argument("--seed", type=non_negative_int, default=7, help="random seed (default 7)")
    parser.add_argument(
        "--data", help="folder with schema.json, alice.csv, bob.csv instead of sampling"
    )
    parser.add_argument(
        "--out",
        help="keep data, certificates, logs and outputs in this folder (new or empty; "
        "written aside and renamed into place at the end)",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw the learned network (each variable's owner; edges that differ from the "
        "reference marked) into this PNG",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"daemons' peer timeout in seconds (default {DEFAULT_TIMEOUT_S:g})",
    )
    add_pair_policy_options(parser)
    parser.add_argument(
        "--reveal-for-testing",
        action="store_true",
        help="TESTING ONLY: add both parties' shares and check them against the plaintext counts",
    )
    add_missing_options(parser, rate=True)
    add_alignment_options(parser)
    add_job_arguments(parser)
    add_path_arguments(parser)
    parser.set_defaults(func=run_path)


def add_path_arguments(parser: argparse.ArgumentParser) -> None:
    """--path and the options of the learning paths (PRAM here; shared learning options)."""
    parser.add_argument(
        "--path",
        choices=PATHS,
        help="secure: private K2 and parameters (Yang-Wright; the default); pram: the PRAM "
        "path (--setup, --p); perturb: a perturbation learner (--setup, --params with learner, "
        "class, theta or p); job: the --job kind (the default when --job names another kind)",
    )
    add_learning_options(parser)
    add_secure_options(parser)
    pram = parser.add_argument_group(
        "PRAM and perturbation paths (--path pram, --path perturb; refused on the others)"
    )
    pram.add_argument(
        "--setup",
        type=int,
        choices=(1, 2),
        default=1,
        action=Noted,
        help="1: no data miner (alice and bob); 2: a third daemon, the miner, learns (default 1)",
    )
    pram.add_argument(
        "--p",
        type=float,
        action=Noted,
        help="M-category randomization with this p for every variable",
    )
    pram.add_argument(
        "--randomization",
        action=Noted,
        metavar="FILE",
        help="per-variable randomization JSON {variable or a+b: {kind, ...}} instead of --p",
    )
    pram.add_argument(
        "--eta",
        type=float,
        default=1.0,
        action=Noted,
        help="eta threshold of the Bayesian score against extra links (default 1: plain K2)",
    )
    pram.add_argument(
        "--counts",
        choices=COUNT_METHODS,
        default="moment",
        action=Noted,
        help="count estimator: moment (clipped at 0) or em (default moment)",
    )
    pram.add_argument(
        "--randomization-seed",
        action=Noted,
        help="TESTING ONLY: start the daemons with --insecure-fixed-seed-for-testing so the "
        "randomization repeats (anyone who knows the seed can undo it)",
    )
