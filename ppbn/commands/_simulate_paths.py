"""The PRAM and perturbation paths of ``ppbn simulate``, and the daemon running they share.

ppbn/commands/simulate.py is the command: its parser, the secure path (job learn, checked
against the plaintext reference), the job path and the dispatch on ``--path``. This module
holds what only ``--path pram`` and ``--path perturb`` use: the pram job's parameters, the
run of the pram / pram-miner or perturb-learn(-miner) job over alice, bob and, for setup II,
the miner, with the reference learned in this process, and the printing of those reports
(every daemon's figures). It also holds the few helpers every path needs (the data set, the
SIGTERM handler, moving an outcome's file names into ``--out``), here rather than in
simulate.py because a helper module never imports a command module.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ppbn.commands._options import (
    hc_job_params,
    missing_rule,
    pair_policy,
    params_json,
    parse_order,
    sample_overlap,
    search_options,
)
from ppbn.data.outputs import check_output_dir, relocate, work_folder
from ppbn.errors import UserError

PRAM_SEED_WARNING = (
    "WARNING: --randomization-seed fixes the daemons' randomization: TESTING ONLY, every daemon of the "
    "job can undo it."
)
PRAM_AVAILABLE_CASE = (
    "--missing available-case runs on the secure path only: the PRAM path sends randomized "
    "columns, which would show the receiver which cells are missing (use --missing category)"
)


def data_files(args: argparse.Namespace, work: Path) -> tuple[Path, Path, Path]:
    """The data set of ``--data``, or ``--records`` sampled from ``--network`` into ``work``."""
    from ppbn.api.simulate import make_data

    files = make_data(
        work,
        args.network,
        args.records,
        args.seed,
        args.data,
        overlap=sample_overlap(args) if not args.data else 1.0,
        missing_rate=getattr(args, "missing_rate", 0.0),
    )
    return files.schema, files.alice, files.bob


def moved_outcome(outcome, work: Path, out: Path):
    """A job outcome whose file names point into ``out``, where the run's folder now is."""
    moved = relocate({"out_dir": outcome.out_dir, "result": outcome.result}, work, out)
    return dataclasses.replace(outcome, **moved)


def raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run_with_daemons(
    args: argparse.Namespace,
    work: Path,
    data: tuple[Path, Path, Path],
    start_role: str,
    kind: str,
    params: dict[str, Any],
    quiet: bool,
) -> tuple[str, dict[str, Any], float, float]:
    """Start alice and bob (and the miner for setup II) under ``work``, run one job from
    ``start_role``; returns the job id, every daemon's outcome, the start-up and job seconds.
    A failed job shows the last lines of every daemon's log on stderr."""
    from ppbn.lab.harness import LocalPair, PairFiles
    from ppbn.parties.pki import make_local_pki

    schema_path, alice_csv, bob_csv = data
    make_local_pki(work / "certs")
    files = PairFiles(schema_path, {"alice": alice_csv, "bob": bob_csv}, work / "certs", work)
    started = time.perf_counter()
    with LocalPair(
        files,
        args.timeout,
        miner=args.setup == 2,
        policy=pair_policy(args),
        fixed_seed_for_testing=args.randomization_seed,
        missing_rule=missing_rule(args),
        align=args.align,
    ) as daemons:
        up = time.perf_counter() - started
        if not quiet:
            print(
                f"daemons up: {', '.join(f'{r} {daemons.address(r)}' for r in daemons.roles)} "
                "(mutual TLS)",
                file=sys.stderr,
            )
        from ppbn.commands._progress import progress_reporter

        progress = progress_reporter(quiet)  # a bar on a terminal, else lines
        started = time.perf_counter()
        job_id, outcomes = daemons.run_job(start_role, kind, params, progress)
        job_s = time.perf_counter() - started
        if any(o.state != "SUCCEEDED" for o in outcomes.values()):
            for role in daemons.roles:
                print(f"{role}'s log: {daemons.log_tail(role, 3)}", file=sys.stderr)
    return job_id, outcomes, up, job_s


def pram_params(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    """The pram / pram-miner job parameters from the command line."""
    if (args.p is None) == (args.randomization is None):
        raise UserError("--path pram needs exactly one of --p P and --randomization FILE")
    params: dict[str, Any] = {}
    if args.p is not None:
        params["p"] = args.p
    else:
        try:
            params["randomization"] = json.loads(
                Path(args.randomization).read_text(encoding="utf-8")
            )
        except FileNotFoundError:
            raise UserError(f"{args.randomization}: randomization file not found") from None
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{args.randomization}: not valid JSON (line {exc.lineno}): {exc.msg}"
            ) from None
    params.update(
        max_parents=args.max_parents,
        score=args.score,
        tau=args.tau,
        c_star=args.c_star,
        eta=args.eta,
        counts=args.counts,
        dirichlet=args.dirichlet,
    )
    if args.search == "k2":
        params["order"] = list(parse_order(args.order, names))
    if args.score == "bdeu":
        params["ess"] = args.ess
    params.update(hc_job_params(args))
    return params


def simulate_pram(args: argparse.Namespace) -> int:
    from ppbn.bn.learn import learn_reference
    from ppbn.bn.schema import Schema
    from ppbn.data.party_data import load_joined
    from ppbn.lab.compare import structure_diff

    quiet = args.format == "json"
    if missing_rule(args) == "available-case":
        raise UserError(PRAM_AVAILABLE_CASE)
    if args.randomization_seed is not None:
        print(PRAM_SEED_WARNING, file=sys.stderr)
    keep = bool(args.out)
    if keep:  # before any work: a bad --out must not cost the run
        check_output_dir(args.out, force=args.force)
    with work_folder(args.out, "ppbn-simulate-", args.force) as work:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            schema_path, alice_csv, bob_csv = data_files(args, work)
            schema = Schema.load(str(schema_path))
            params = pram_params(args, schema.names)
            start_role, kind = ("miner", "pram-miner") if args.setup == 2 else ("alice", "pram")
            job_id, outcomes, up, job_s = run_with_daemons(
                args, work, (schema_path, alice_csv, bob_csv), start_role, kind, params, quiet
            )
            names, codes = load_joined(
                schema,
                alice_csv,
                bob_csv,
                missing_rule=missing_rule(args),
                intersect=args.align == "psi",
            )
            states = {v.name: v.states for v in schema.variables}
            reference = learn_reference(
                names,
                states,
                codes,
                args.max_parents,
                args.score,
                args.tau,
                params.get("order"),
                ess=args.ess,
                **search_options(args),
            )
        finally:
            signal.signal(signal.SIGTERM, previous)
    if keep:  # the run's files were written aside and are now in --out
        outcomes = {role: moved_outcome(o, work, Path(args.out)) for role, o in outcomes.items()}
    mine = outcomes[start_role]
    ok = all(o.state == "SUCCEEDED" for o in outcomes.values())
    report: dict[str, Any] = {
        "path": "pram",
        "setup": args.setup,
        "kind": kind,
        "job_id": job_id,
        "state": "SUCCEEDED" if ok else "FAILED",
        "params": params,
        "transport": f"gRPC over mutual TLS, loopback, {len(outcomes)} processes",
        "timings": {"daemons_start_s": round(up, 3), "job_s": round(job_s, 3)},
        "parties": {
            role: {"state": o.state, "error": o.error, "stats": o.stats, "result": o.result}
            for role, o in sorted(outcomes.items())
        },
    }
    if mine.result:
        reference_parents = {v: list(reference.search.parents[v]) for v in names}
        report["reference_edges"] = len(reference.search.edges)
        report["structure_vs_reference"] = structure_diff(mine.result["parents"], reference_parents)
        report["privacy"] = mine.result["privacy"]
        report["edges"] = mine.result["edges"]
    if quiet:
        print(json.dumps(report, indent=2))
    else:
        _print_pram(report)
    return 0 if ok else 1


def _print_pram(report: dict[str, Any]) -> None:
    from rich.console import Console

    from ppbn.protocols.pram import iter_privacy_text

    console = Console()
    style = "green" if report["state"] == "SUCCEEDED" else "red"
    console.print(
        f"[bold]ppbn simulate --path pram --setup {report['setup']}[/bold]: job "
        f"{report['job_id']} ({report['kind']}) [{style}]{report['state']}[/{style}]"
    )
    parties = report["parties"]
    console.print(_daemon_figures(parties, "per daemon (measured by the PRAM job itself)"))
    for role, party in parties.items():
        if party["error"]:
            console.print(f"[red]{role}: {party['error']}[/red]")
    if "edges" in report:
        console.print(
            "edges in the order added: " + ", ".join(f"{p}->{c}" for p, c in report["edges"])
        )
        diff = report["structure_vs_reference"]
        console.print(
            f"against the plaintext reference ({report['reference_edges']} edges): SHD {diff['shd']} "
            f"({diff['extra']} extra, {diff['missing']} missing, {diff['reversed']} reversed)"
        )
        console.print(
            "privacy of what was disclosed (gamma strict, docs/conventions.md, 'Gamma amplification'):"
        )
        for line in iter_privacy_text(report["privacy"]):
            console.print(f"  {line}")
    timings = report["timings"]
    console.print(
        f"daemons up {timings['daemons_start_s']:.2f} s, job {timings['job_s']:.2f} s (as the operator saw it)"
    )


def simulate_perturb(args: argparse.Namespace) -> int:
    """A perturbation learner's job over the daemons (setup I or II), with the same learner
    on the joined original data as the reference."""
    from ppbn.bn.schema import Schema
    from ppbn.jobs.perturb import (
        SETUP_ONE_KIND,
        SETUP_TWO_KIND,
        full_params,
        learner_options,
        model_summary,
    )
    from ppbn.lab.randomized_learning import learn, load_tables

    quiet = args.format == "json"
    if missing_rule(args) == "available-case":
        raise UserError(PRAM_AVAILABLE_CASE.replace("the PRAM path", "the perturbation path"))
    params = params_json(args)
    if not params:
        raise UserError(
            '--path perturb needs the job parameters: --params \'{"learner": "nb", "class": VAR, "theta": 0.8}\''
        )
    if args.randomization_seed is not None:
        print(PRAM_SEED_WARNING, file=sys.stderr)
    keep = bool(args.out)
    if keep:  # before any work: a bad --out must not cost the run
        check_output_dir(args.out, force=args.force)
    start_role, kind = ("miner", SETUP_TWO_KIND) if args.setup == 2 else ("alice", SETUP_ONE_KIND)
    with work_folder(args.out, "ppbn-simulate-", args.force) as work:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            schema_path, alice_csv, bob_csv = data_files(args, work)
            full = full_params(
                kind, params, Schema.load(str(schema_path)), args.setup
            )  # before any daemon
            job_id, outcomes, up, job_s = run_with_daemons(
                args, work, (schema_path, alice_csv, bob_csv), start_role, kind, params, quiet
            )
            (table,) = load_tables([schema_path.parent])
            reference = learn(
                full["learner"], table, None, full["class"], None, learner_options(full)
            )
        finally:
            signal.signal(signal.SIGTERM, previous)
    if keep:  # the run's files were written aside and are now in --out
        outcomes = {role: moved_outcome(o, work, Path(args.out)) for role, o in outcomes.items()}
    ok = all(o.state == "SUCCEEDED" for o in outcomes.values())
    report: dict[str, Any] = {
        "path": "perturb",
        "setup": args.setup,
        "kind": kind,
        "job_id": job_id,
        "state": "SUCCEEDED" if ok else "FAILED",
        "params": params,
        "transport": f"gRPC over mutual TLS, loopback, {len(outcomes)} processes",
        "timings": {"daemons_start_s": round(up, 3), "job_s": round(job_s, 3)},
        "parties": {
            role: {"state": o.state, "error": o.error, "stats": o.stats, "result": o.result}
            for role, o in sorted(outcomes.items())
        },
        "reference_model": model_summary(reference["learner"], reference["model"]),
    }
    if quiet:
        print(json.dumps(report, indent=2))
    else:
        _print_perturb(report)
    return 0 if ok else 1


def _print_perturb(report: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    style = "green" if report["state"] == "SUCCEEDED" else "red"
    console.print(
        f"[bold]ppbn simulate --path perturb --setup {report['setup']}[/bold]: job "
        f"{report['job_id']} ({report['kind']}) [{style}]{report['state']}[/{style}]"
    )
    parties = report["parties"]
    console.print(_daemon_figures(parties, "per daemon (measured by the job itself)"))
    for role, party in parties.items():
        if party["error"]:
            console.print(f"[red]{role}: {party['error']}[/red]")
        elif party["result"]:
            console.print(f"{role}: model {json.dumps(party['result']['model'])}")
    console.print(
        f"reference (the same learner on the joined original data): {json.dumps(report['reference_model'])}"
    )
    timings = report["timings"]
    console.print(
        f"daemons up {timings['daemons_start_s']:.2f} s, job {timings['job_s']:.2f} s (as the operator saw it)"
    )


def _daemon_figures(parties: dict[str, Any], title: str):
    """Time, bytes, rounds and phases per daemon, as each job measured them."""
    from rich.table import Table

    table = Table("figure", *parties, title=title)
    job_stats = {role: (p["result"] or {}).get("stats", {}) for role, p in parties.items()}
    for label, key in (
        ("wall time (s)", "wall_s"),
        ("bytes sent", "bytes_sent"),
        ("bytes received", "bytes_received"),
        ("rounds", "rounds"),
    ):
        table.add_row(
            label,
            *(
                f"{s.get(key, 0):,}" if key != "wall_s" else f"{s.get(key, 0):.2f}"
                for s in job_stats.values()
            ),
        )
    for phase in sorted({ph for s in job_stats.values() for ph in s.get("phases", {})}):
        table.add_row(
            f"phase {phase} (s)",
            *(f"{s.get('phases', {}).get(phase, 0.0):.3f}" for s in job_stats.values()),
        )
    return table
