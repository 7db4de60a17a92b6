"""``ppbn learn``: ask a running daemon to run a job with its peer, wait, print the outcome."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ppbn.commands._flag_types import positive_float, positive_int
from ppbn.commands.reference import add_learning_options, hc_job_params, refuse_on_private_paths
from ppbn.errors import UserError

DEFAULT_JOB = "learn"
INTERRUPTED = 130  # the shell's code for a command ended by SIGINT
CANCEL_WAIT_S = 60.0  # how long Ctrl-C waits for the daemon to stop the job
DISCLOSURES = ("public", "owner", "shared")


def learn_params(args: argparse.Namespace) -> dict[str, Any]:
    """Parameters of the ``learn`` job (the secure path) from the shared learning options."""
    if getattr(args, "dirichlet", 0.0):
        raise UserError("--dirichlet: the secure path computes maximum-likelihood parameters (Yang-Wright 7.1)")
    params: dict[str, Any] = {
        "max_parents": args.max_parents,
        "score": args.score,
        "tau": args.tau,
        "c_star": args.c_star,
        "disclosure": args.disclosure,
        "overlap_tables": args.overlap_tables == "on",
        "split_terms": args.split_terms == "on",
    }
    if args.order:
        params["order"] = [v.strip() for v in args.order.split(",") if v.strip()]
    if args.key_bits is not None:
        params["key_bits"] = args.key_bits
    if args.score == "bdeu":
        params["ess"] = args.ess
    params.update(hc_job_params(args))
    return params


def add_secure_options(parser: argparse.ArgumentParser) -> None:
    """Options of the secure path (job ``learn``) besides the shared learning options."""
    group = parser.add_argument_group("secure path (job learn)")
    group.add_argument(
        "--disclosure", choices=DISCLOSURES, default="public",
        help="who learns the CPTs: public (both), owner (the owner of each variable), "
        "shared (each party keeps shares; `ppbn shares combine` opens them) (default public)",
    )  # fmt: skip
    group.add_argument("--key-bits", type=int, choices=(2048, 3072), help="Paillier key size (default 2048)")
    add_overlap_option(group)


def add_overlap_option(parser) -> None:
    """--overlap-tables and --split-terms: how K2 overlaps its work with the wire."""
    parser.add_argument(
        "--overlap-tables", choices=("on", "off"), default="on",
        help="score each K2 step's families in groups, the next group's Paillier table phase "
        "running while the current group's terms cross the wire: on (default) hides most of "
        "the table phase behind a slow link; off runs the phases one after the other, which "
        "is faster when both daemons share one small host (README 'Overlapping work with the wire')",
    )  # fmt: skip
    parser.add_argument(
        "--split-terms", choices=("on", "off"), default="off",
        help="run each batch of at least 1,024 secure ln terms as two halves side by side on "
        "two lanes, so one half computes while the other's bytes cross the wire: on for a slow "
        "link (child across 100mbit/20ms: -1.6 s on average); off (default) on a fast link or "
        "when both daemons share one small host, where the second thread costs more than it "
        "hides (README 'Two halves of each batch of terms')",
    )  # fmt: skip


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


def party_stats(outcome) -> dict[str, Any]:
    """{role: stats} for both parties, as the daemon reported them after the job."""
    out: dict[str, Any] = {}
    for stats in (outcome.stats, outcome.peer_stats):
        if stats:
            out[stats.get("role", "?")] = stats
    return dict(sorted(out.items()))


def outcome_json(outcome) -> dict[str, Any]:
    return {
        "job_id": outcome.job_id,
        "kind": outcome.kind,
        "state": outcome.state,
        "error": outcome.error,
        "result": outcome.result,
        "out_dir": outcome.out_dir,
        "stats": party_stats(outcome),
    }


def print_outcome(outcome, title: str, show_files: bool = True) -> None:
    """Rich tables for people: the result, then per party time, traffic and operations."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    style = "green" if outcome.state == "SUCCEEDED" else "red"
    console.print(f"[bold]{title}[/bold]: job {outcome.job_id} ({outcome.kind}) [{style}]{outcome.state}[/{style}]")
    if outcome.error:
        console.print(f"[red]error:[/red] {outcome.error}")
    if outcome.result:
        result = Table("result", "value", title="result (contacted daemon)")
        for key, value in outcome.result.items():
            text = json.dumps(value) if not isinstance(value, str) else value
            result.add_row(key, text if len(text) <= 100 else text[:97] + "...")
        console.print(result)
    per_party = party_stats(outcome)
    if per_party:
        table = Table("figure", *per_party, title="per party")
        rows = [
            ("wall time (s)", "wall_s", "{:.2f}"),
            ("bytes sent", "bytes_sent", "{:,}"),
            ("bytes received", "bytes_received", "{:,}"),
            ("messages sent", "messages_sent", "{:,}"),
            ("rounds", "rounds", "{:,}"),
            ("public-key operations", "public_key_operations", "{:,}"),
            ("Paillier encryptions", "paillier_encryptions", "{:,}"),
        ]
        for label, key, fmt in rows:  # "-": the peer's own figures never cross the wire
            table.add_row(label, *(fmt.format(s[key]) if key in s else "-" for s in per_party.values()))
        phases = sorted({p for s in per_party.values() for p in s.get("phases", {})})
        for phase in phases:
            table.add_row(
                f"phase {phase} (s)",
                *(f"{s.get('phases', {}).get(phase, 0.0):.2f}" for s in per_party.values()),
            )
        console.print(table)
    if outcome.out_dir and show_files:
        console.print(f"files of the contacted daemon: {outcome.out_dir}")


def _learn(args: argparse.Namespace) -> int:
    from ppbn.parties.client import DaemonClient, JobOutcome

    refuse_on_private_paths(args)
    params = job_params(args)
    with DaemonClient(args.peer, args.tls_dir, insecure=args.insecure) as client:
        health = client.health()
        if args.status or args.cancel:
            info = client.cancel(args.cancel) if args.cancel else client.status(args.status)
            outcome = JobOutcome.from_info(info)
            if args.format == "json":
                print(json.dumps({**outcome_json(outcome), "progress": info.progress}, indent=2))
            else:
                print_outcome(outcome, f"job status at {health.role}")
                if info.progress:
                    print(f"last progress: {info.progress}")
            return 0
        progress = None if args.format == "json" else (lambda note: print(f"  {note}", file=sys.stderr))
        try:
            if args.resume:  # the daemons take the parameters from their own checkpoints
                job_id = client.start(args.job, {}, args.resume, resume=True)
            else:
                job_id = client.start(args.job, params, args.job_id or "")
        except KeyboardInterrupt:
            print(f"ppbn: interrupted while starting the job; if it started, {health.role}'s log names "
                  f"it: stop it with {cancel_command(args, 'JOB_ID')}", file=sys.stderr)  # fmt: skip
            return INTERRUPTED
        if args.format != "json":
            print(f"job {job_id} ({args.job}) started at {health.role} ({args.peer})", file=sys.stderr)
        if args.no_wait:
            print(json.dumps({"job_id": job_id}) if args.format == "json" else job_id)
            return 0
        try:
            outcome = client.wait(job_id, args.wait_timeout, progress)
        except KeyboardInterrupt:
            print(cancel_after_interrupt(client, args, job_id, health.role), file=sys.stderr)
            return INTERRUPTED
    if args.format == "json":
        print(json.dumps(outcome_json(outcome), indent=2))
    else:
        print_outcome(outcome, f"ppbn learn via {health.role}")
    if outcome.state == "SUCCEEDED":
        return 0
    return 2 if outcome.refused else 1  # 2: the input or a policy refused the job, as for other bad input


def cancel_command(args: argparse.Namespace, job_id: str) -> str:
    """The command line that cancels ``job_id`` at the daemon this command talked to."""
    how = f"--tls-dir {args.tls_dir}" if args.tls_dir else "--insecure"
    return f"ppbn learn --peer {args.peer} {how} --cancel {job_id}"


def cancel_after_interrupt(client, args: argparse.Namespace, job_id: str, role: str) -> str:
    """Ctrl-C while waiting: cancel the job at the daemon (which tells its peer to stop
    too) and wait, bounded, until it has stopped; one line saying what happened, or how to
    cancel it when that failed."""
    print(f"interrupted: cancelling job {job_id} at {role} (Ctrl-C again to stop waiting)", file=sys.stderr)
    try:
        client.cancel(job_id)
        outcome = client.wait(job_id, CANCEL_WAIT_S)
    except (UserError, KeyboardInterrupt) as exc:
        why = "interrupted again" if isinstance(exc, KeyboardInterrupt) else str(exc)
        return (f"ppbn: interrupted; job {job_id} may still be running at both daemons ({why}); "
                f"cancel it with: {cancel_command(args, job_id)}")  # fmt: skip
    if outcome.state == "CANCELLED":
        return f"ppbn: interrupted; job {job_id} cancelled at {role}, which told its peer to stop it too"
    return f"ppbn: interrupted; job {job_id} had already ended at {role} ({outcome.state})"


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--job", default=DEFAULT_JOB,
        help=f"job kind (default {DEFAULT_JOB}: private K2 and parameters; also tables, ping, pram, "
        "perturb-learn: a perturbation learner, setup I, e.g. --params '{\"learner\": \"nb\", \"class\": "
        "\"dysp\", \"theta\": 0.8}'; at the miner's daemon: pram-miner, perturb-learn-miner)",
    )  # fmt: skip
    parser.add_argument(
        "--max-family", type=positive_int, help="tables job: largest family size (default 3)"
    )
    parser.add_argument(
        "--params",
        help="job parameters as a JSON object (pram, perturb-learn and their -miner kinds take theirs "
        "here; see the README)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "learn",
        help="start a job on a running daemon (which runs it with its peer) and wait for it",
        description="Connect to your party's daemon with your operator certificate, start a "
        "job (the daemon checks it against its local policy and coordinates with its peer, which "
        "checks its own), wait for it and print the result and this party's figures (the peer's "
        "own figures never cross the wire; its traffic is shown as this daemon saw it). Exit "
        "code 0 when the job succeeded, 1 when it failed.",
    )
    parser.add_argument("--peer", required=True, help="HOST:PORT of the daemon to ask")
    parser.add_argument(
        "--tls-dir",
        help="folder with operator.crt/.key (an operator certificate for the daemon's party, issued "
        "by that party's CA) and ca.crt; a daemon takes job requests from its own operator only",
    )
    parser.add_argument("--insecure", action="store_true", help="plaintext (test daemons only)")
    parser.add_argument("--job-id", help="job id (default: generated)")
    parser.add_argument("--no-wait", action="store_true", help="print the job id and return")
    control = parser.add_mutually_exclusive_group()
    control.add_argument("--status", metavar="JOB_ID", help="show a job's state instead of starting one")
    control.add_argument("--cancel", metavar="JOB_ID", help="cancel a running job (both daemons stop it)")
    control.add_argument(
        "--resume", metavar="JOB_ID",
        help="continue an interrupted learn job from the last K2 step both daemons checkpointed "
        "(same parameters, taken from the checkpoints; each daemon checks them against its policy again)",
    )  # fmt: skip
    parser.add_argument("--wait-timeout", type=positive_float, help="give up waiting after this many seconds")
    add_job_arguments(parser)
    add_learning_options(parser)
    add_secure_options(parser)
    parser.set_defaults(func=_learn)
