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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppbn.commands.options import (
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
    from ppbn.pair.loopback import LocalPair, PairFiles
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
        from ppbn.commands.progress import progress_reporter

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


def _refuse_available_case(args: argparse.Namespace, path: str) -> None:
    if missing_rule(args) == "available-case":
        raise UserError(PRAM_AVAILABLE_CASE.replace("the PRAM path", path))


def _run_setup(
    args: argparse.Namespace,
    path: str,
    kinds: tuple[str, str],
    prepare: Callable[[str, tuple[Path, Path, Path]], dict[str, Any]],
    reference_of: Callable[[tuple[Path, Path, Path], dict[str, Any]], Any],
) -> tuple[dict[str, Any], Any, Any]:
    """What ``--path pram`` and ``--path perturb`` share: the data set, the job of
    ``kinds`` (setup I, setup II) started at alice or the miner over every daemon, and the
    reference learned here. ``prepare(kind, data)`` gives the job's parameters (checked
    before any daemon starts); ``reference_of(data, params)`` learns the reference.
    Returns the report every daemon's outcome fills, the starting daemon's outcome and
    the reference."""
    if args.randomization_seed is not None:
        print(PRAM_SEED_WARNING, file=sys.stderr)
    if args.out:  # before any work: a bad --out must not cost the run
        check_output_dir(args.out, force=args.force)
    start_role, kind = ("miner", kinds[1]) if args.setup == 2 else ("alice", kinds[0])
    quiet = args.format == "json"
    with work_folder(args.out, "ppbn-simulate-", args.force) as work:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            data = data_files(args, work)
            params = prepare(kind, data)
            job_id, outcomes, up, job_s = run_with_daemons(
                args, work, data, start_role, kind, params, quiet
            )
            reference = reference_of(data, params)
        finally:
            signal.signal(signal.SIGTERM, previous)
    if args.out:  # the run's files were written aside and are now in --out
        outcomes = {role: moved_outcome(o, work, Path(args.out)) for role, o in outcomes.items()}
    ok = all(o.state == "SUCCEEDED" for o in outcomes.values())
    report: dict[str, Any] = {
        "path": path,
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
    return report, outcomes[start_role], reference


def _finish(args: argparse.Namespace, report: dict[str, Any], show) -> int:
    """Print the report (JSON, or ``show`` for people); exit 0 when every daemon succeeded."""
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        show(report)
    return 0 if report["state"] == "SUCCEEDED" else 1


def simulate_pram(args: argparse.Namespace) -> int:
    from ppbn.bn.learn import learn_reference
    from ppbn.bn.schema import Schema
    from ppbn.data.party_data import load_joined
    from ppbn.lab.compare import structure_diff

    _refuse_available_case(args, "the PRAM path")
    schema: Schema | None = None  # read by prepare, once the data set is there

    def prepare(_kind: str, data: tuple[Path, Path, Path]) -> dict[str, Any]:
        nonlocal schema
        schema = Schema.load(str(data[0]))
        return pram_params(args, schema.names)

    def reference_of(data: tuple[Path, Path, Path], params: dict[str, Any]):
        names, codes = load_joined(
            schema,
            data[1],
            data[2],
            missing_rule=missing_rule(args),
            intersect=args.align == "psi",
        )
        states = {v.name: v.states for v in schema.variables}
        return learn_reference(
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

    report, mine, reference = _run_setup(
        args, "pram", ("pram", "pram-miner"), prepare, reference_of
    )
    if mine.result:
        reference_parents = {v: list(ps) for v, ps in reference.search.parents.items()}
        report["reference_edges"] = len(reference.search.edges)
        report["structure_vs_reference"] = structure_diff(mine.result["parents"], reference_parents)
        report["privacy"] = mine.result["privacy"]
        report["edges"] = mine.result["edges"]
    return _finish(args, report, _print_pram)


def _print_head(console, report: dict[str, Any], measured_by: str) -> None:
    """The job's line, every daemon's figures and errors."""
    style = "green" if report["state"] == "SUCCEEDED" else "red"
    console.print(
        f"[bold]ppbn simulate --path {report['path']} --setup {report['setup']}[/bold]: job "
        f"{report['job_id']} ({report['kind']}) [{style}]{report['state']}[/{style}]"
    )
    parties = report["parties"]
    console.print(_daemon_figures(parties, f"per daemon (measured by {measured_by})"))
    for role, party in parties.items():
        if party["error"]:
            console.print(f"[red]{role}: {party['error']}[/red]")


def _print_timings(console, report: dict[str, Any]) -> None:
    timings = report["timings"]
    console.print(
        f"daemons up {timings['daemons_start_s']:.2f} s, job {timings['job_s']:.2f} s (as the operator saw it)"
    )


def _print_pram(report: dict[str, Any]) -> None:
    from rich.console import Console

    from ppbn.protocols.pram import iter_privacy_text

    console = Console()
    _print_head(console, report, "the PRAM job itself")
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
    _print_timings(console, report)


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

    _refuse_available_case(args, "the perturbation path")
    params = params_json(args)
    if not params:
        raise UserError(
            '--path perturb needs the job parameters: --params \'{"learner": "nb", "class": VAR, "theta": 0.8}\''
        )
    full: dict[str, Any] = {}

    def prepare(kind: str, data: tuple[Path, Path, Path]) -> dict[str, Any]:
        full.update(full_params(kind, params, Schema.load(str(data[0])), args.setup))
        return params

    def reference_of(data: tuple[Path, Path, Path], _params: dict[str, Any]):
        (table,) = load_tables([data[0].parent])
        return learn(full["learner"], table, None, full["class"], None, learner_options(full))

    report, _mine, reference = _run_setup(
        args, "perturb", (SETUP_ONE_KIND, SETUP_TWO_KIND), prepare, reference_of
    )
    report["reference_model"] = model_summary(reference["learner"], reference["model"])
    return _finish(args, report, _print_perturb)


def _print_perturb(report: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    _print_head(console, report, "the job itself")
    for role, party in report["parties"].items():
        if not party["error"] and party["result"]:
            console.print(f"{role}: model {json.dumps(party['result']['model'])}")
    console.print(
        f"reference (the same learner on the joined original data): {json.dumps(report['reference_model'])}"
    )
    _print_timings(console, report)


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
