"""``ppbn simulate``: both daemons as local processes over loopback mutual TLS, one job.

Generates (or loads) a two-party data set, makes a throw-away CA and certificates,
starts alice's and bob's daemons as separate processes on free loopback ports, runs the
job through alice's daemon as the operator, prints the result and each party's figures,
and stops both daemons however the run ends: ``ppbn.api.simulate``, the Python API's
call, does the run; this module reads the flags and prints. ``--reveal-for-testing`` adds both
parties' shares to check them against the plaintext counts: something no real
deployment may do, so it says so loudly.

``--path pram`` runs the PRAM path instead (Ma and Sivakumar, Sec. III-A): ``--setup 1``
as the ``pram`` job between alice and bob, ``--setup 2`` as the ``pram-miner`` job
started at a third daemon, the miner. It prints every daemon's result and figures and
the structure's distance to the plaintext reference learned in this process.

``--path perturb`` runs a perturbation learner the same way: ``--setup 1`` as
the ``perturb-learn`` job (the class's owner learns), ``--setup 2`` as
``perturb-learn-miner``; the job's parameters come from ``--params`` (learner, class,
theta or p, ...), and the same learner on the joined original data is the reference.
Those two paths, with the helpers every path shares, are in ppbn/commands/_simulate_paths.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from ppbn.commands.options import (
    Noted,
    add_alignment_options,
    add_job_arguments,
    add_learning_options,
    add_missing_options,
    add_pair_policy_options,
    add_secure_options,
    job_params,
    missing_rule,
    non_negative_int,
    pair_policy,
    positive_float,
    positive_int,
    refuse_on_private_paths,
    sample_overlap,
)
from ppbn.errors import UserError
from ppbn.protocols.constants import DEFAULT_TIMEOUT_S
from ppbn.randomized.constants import COUNT_METHODS

# The protocol paths `--path` selects; `run_path` is the one place that dispatches on it.
PATHS = ("secure", "pram", "perturb", "job")
SETUP_FLAGS = ("setup", "randomization_seed")  # --path pram and perturb
PRAM_FLAGS = ("p", "randomization", "eta", "counts")  # --path pram only
REVEAL_WARNING = (
    "WARNING: --reveal-for-testing ADDS BOTH PARTIES' SHARES AND PRINTS WHAT THEY REVEAL. "
    "This breaks the privacy the protocol provides; it exists only to test ppbn."
)


def reveal_tables(
    schema_path: Path,
    csvs: dict[str, Path],
    out_dirs: dict[str, Path],
    rule: str = "error",
    intersect: bool = False,
) -> dict[str, Any]:
    """Add both parties' table shares and compare with counts from the joined plaintext
    (under ``rule``: available-case counts leave out records missing in the family; with
    ``intersect``: on the records both hold, as ``--align psi``)."""
    import numpy as np

    from ppbn.bn.k2 import count_table
    from ppbn.bn.schema import Schema
    from ppbn.data.party_data import load_joined
    from ppbn.jobs.tables import load_shares
    from ppbn.protocols.tables import reconstruct

    schema = Schema.load(str(schema_path))
    names, codes = load_joined(
        schema, csvs["alice"], csvs["bob"], missing_rule=rule, intersect=intersect
    )
    column = {name: j for j, name in enumerate(names)}
    counts = reconstruct(load_shares(out_dirs["alice"]), load_shares(out_dirs["bob"]))
    wrong = []
    for family, table in counts.items():
        truth = count_table(codes, [column[v] for v in family], schema.cardinalities(family))
        if not np.array_equal(table.astype(np.int64), truth):
            wrong.append("|".join(family))
    return {"tables_checked": len(counts), "tables_wrong": wrong, "all_equal": not wrong}


def _simulate(args: argparse.Namespace) -> int:
    from ppbn.api.simulate import simulate
    from ppbn.commands._simulate_paths import raise_interrupt

    params = job_params(args)
    if args.plot:  # before any work: an unwritable picture must not cost the run
        from ppbn.data.outputs import check_output_file

        if args.job != "learn":
            raise UserError("--plot draws a learned network: it needs the learn job")
        check_output_file(args.plot, "--plot")
    if args.reveal_for_testing:
        print(REVEAL_WARNING, file=sys.stderr)
        if args.job != "tables":
            raise UserError("--reveal-for-testing applies to the tables job only")
    quiet = args.format == "json"
    from ppbn.commands.progress import progress_reporter

    progress = progress_reporter(quiet)  # a bar on a terminal, else lines

    def daemons_up(pair) -> None:
        if not quiet:
            print(
                f"daemons up: alice {pair.address('alice')}, bob {pair.address('bob')} "
                f"(mutual TLS; logs will be in {args.out or 'a temporary folder'})",
                file=sys.stderr,
            )

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        with contextlib.ExitStack() as stack:
            out = args.out
            if args.reveal_for_testing and not out:  # the shares must outlive the daemons
                out = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "run"
            sim = simulate(
                args.network,
                args.records,
                data=args.data,
                seed=args.seed,
                kind=args.job,
                params=params,
                out=out,
                force=args.force,
                policy=pair_policy(args),
                missing=missing_rule(args),
                align=args.align,
                overlap=sample_overlap(args) if not args.data else None,
                missing_rate=getattr(args, "missing_rate", 0.0),
                timeout_s=args.timeout,
                progress=progress,
                on_daemons_up=daemons_up,
            )
            outcome = sim.outcome
            if outcome.state != "SUCCEEDED":
                for role, tail in sim.logs.items():
                    print(f"{role}'s log: {tail}", file=sys.stderr)
            reveal = None
            if args.reveal_for_testing and outcome.state == "SUCCEEDED":
                folder = Path(out)
                data = Path(args.data) if args.data else folder / "data"
                reveal = reveal_tables(
                    data / "schema.json",
                    {role: data / f"{role}.csv" for role in ("alice", "bob")},
                    {role: folder / f"out-{role}" / outcome.job_id for role in ("alice", "bob")},
                    missing_rule(args),
                    args.align == "psi",
                )
    finally:
        signal.signal(signal.SIGTERM, previous)
    report = _report(args, outcome, sim.timings, reveal)
    if sim.check is not None:
        report["reference_check"] = sim.check
    if args.plot and sim.network is not None:
        # against the network the data came from when it is known (the reference's
        # equality is in the text); else against the reference
        against, name = (sim.truth, "truth.bif") if sim.truth else (sim.reference, "the reference")
        title = "learned privately" + (f" vs {name}" if against else "")
        sim.network.plot(args.plot, against, title)
        report["plot"] = args.plot
    if quiet:
        print(json.dumps(report, indent=2))
    else:
        _print_report(outcome, report, bool(args.out))
    return 0 if outcome.state == "SUCCEEDED" and (reveal is None or reveal["all_equal"]) else 1


def run_path(args: argparse.Namespace) -> int:
    """`ppbn simulate`: the secure path (job learn, checked against the reference), the
    PRAM path, or the job given by --job (path "job")."""
    from ppbn.commands._simulate_paths import simulate_perturb, simulate_pram

    if args.path is None:  # --job tables (or ping, ...) alone means the job path
        args.path = "secure" if args.job == "learn" else "job"
    refuse_unused_path_flags(args)
    refuse_on_private_paths(args, "PRAM" if args.path == "pram" else "secure")
    if args.plot and args.path in ("pram", "perturb"):
        raise UserError(f"--plot draws the secure path's network, not --path {args.path}'s")
    if args.path == "pram":
        return simulate_pram(args)
    if args.path == "perturb":
        return simulate_perturb(args)
    if args.path == "secure" and args.job != "learn":
        raise UserError(f"--job {args.job} needs --path job (the secure path is the learn job)")
    return _simulate(args)


def refuse_unused_path_flags(args: argparse.Namespace) -> None:
    """A flag of another path than ``--path`` is a user error naming it and that path,
    before any data is made or daemon started (``_unused_flags``)."""
    from ppbn.commands.unused_flags import refuse_given, refuse_unused_flags

    if args.path not in ("pram", "perturb"):
        refuse_given(args, SETUP_FLAGS, "--path pram or perturb")
    if args.path != "pram":
        refuse_given(args, PRAM_FLAGS, "--path pram")
    refuse_unused_flags(args, args.path)


def _report(
    args, outcome, timings: dict[str, float], reveal: dict[str, Any] | None
) -> dict[str, Any]:
    from ppbn.commands.outcomes import outcome_json

    report = outcome_json(outcome)
    report.update(
        {
            "network": args.network if not args.data else None,
            "data": args.data,
            "records": (outcome.result or {}).get("records", args.records),
            "seed": args.seed if not args.data else None,
            "transport": "gRPC over mutual TLS, loopback, two processes",
            "timings": {k: round(v, 3) for k, v in timings.items()},
        }
    )
    parties = report["stats"]
    if outcome.kind == "tables" and outcome.result:
        total = sum(s.get("paillier_encryptions", 0) for s in parties.values())
        paper = outcome.result["per_alpha_encryptions"]
        report["paillier_encryptions_both_parties"] = total
        report["per_alpha_encryptions"] = paper
        report["fewer_encryptions_than_per_alpha"] = round(paper / total, 1) if total else None
    if reveal is not None:
        report["reveal_for_testing"] = reveal
    return report


def _print_report(outcome, report: dict[str, Any], files_kept: bool) -> None:
    from ppbn.commands.outcomes import print_outcome

    print_outcome(outcome, "ppbn simulate", show_files=files_kept)
    timings = report["timings"]
    print(
        f"data {timings.get('data_s', 0):.2f} s, certificates {timings.get('certs_s', 0):.2f} s, "
        f"daemons up {timings.get('daemons_start_s', 0):.2f} s, job {timings.get('job_s', 0):.2f} s "
        "(start to finish, as the operator saw it)"
    )
    if "per_alpha_encryptions" in report:
        print(
            f"Paillier encryptions, both parties: {report['paillier_encryptions_both_parties']:,}; "
            f"the paper's per-alpha method on the same families: {report['per_alpha_encryptions']:,} "
            f"({report['fewer_encryptions_than_per_alpha']}x more)"
        )
    check = report.get("reference_check")
    if check is not None:
        verdict = "equal" if check["same_structure_and_order"] else "DIFFERENT"
        diff = check["max_abs_cpt_difference"]
        records = "equal" if check["same_family_records"] else "DIFFERENT"
        print(
            f"against the non-private reference (same score, tau, order, --missing rule): structure "
            f"and edge order {verdict}"
            + (f", largest CPT difference {diff:.2e}" if diff is not None else "")
            + f", records per family {records}"
        )
    reveal = report.get("reveal_for_testing")
    if reveal is not None:
        print(REVEAL_WARNING, file=sys.stderr)
        verdict = (
            "all equal"
            if reveal["all_equal"]
            else f"WRONG: {', '.join(reveal['tables_wrong'][:5])}"
        )
        print(f"revealed {reveal['tables_checked']} tables against the plaintext counts: {verdict}")


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
