"""``ppbn learn``: ask a running daemon to run a job with its peer, wait, print the outcome."""

from __future__ import annotations

import argparse
import json
import sys

from ppbn.commands.checked_numbers import positive_float
from ppbn.commands.job_options import add_job_arguments, job_params
from ppbn.commands.learning_options import add_learning_options, refuse_on_private_paths
from ppbn.commands.secure_options import add_secure_options
from ppbn.errors import UserError

INTERRUPTED = 130  # the shell's code for a command ended by SIGINT
CANCEL_WAIT_S = 60.0  # how long Ctrl-C waits for the daemon to stop the job


def _learn(args: argparse.Namespace) -> int:
    from ppbn.api.daemon import Daemon
    from ppbn.commands.outcomes import outcome_json, print_outcome
    from ppbn.commands.progress import progress_reporter, status_line
    from ppbn.commands.unused_flags import refuse_unused_flags

    refuse_unused_flags(args)
    refuse_on_private_paths(args)
    params = job_params(args)
    if args.plot:  # before the job: an unwritable picture must not cost it
        from ppbn.data.outputs import check_output_file

        check_output_file(args.plot, "--plot")
    with Daemon(args.peer, args.tls_dir, insecure=args.insecure) as daemon:
        role = daemon.role
        if args.status or args.cancel:
            job = daemon.job(args.cancel or args.status)
            outcome = job.cancel() if args.cancel else job.status(following=False)
            shown = outcome.progress  # the daemon's progress fields, checked
            if args.format == "json":
                print(json.dumps({**outcome_json(outcome), "progress": shown.as_dict()}, indent=2))
            else:
                print_outcome(outcome, f"job status at {role}")
                if shown.note or shown.structured:
                    print(f"progress: {status_line(shown)}")
            return 0
        progress = progress_reporter(args.format == "json")
        try:
            if args.resume:  # the daemons take the parameters from their own checkpoints
                job = daemon.resume(args.resume, args.job)
            else:
                job = daemon.start(args.job, params, args.job_id or "")
        except KeyboardInterrupt:
            print(
                f"ppbn: interrupted while starting the job; if it started, {role}'s log names "
                f"it: stop it with {cancel_command(args, 'JOB_ID')}",
                file=sys.stderr,
            )
            return INTERRUPTED
        if args.format != "json":
            print(f"job {job.job_id} ({args.job}) started at {role} ({args.peer})", file=sys.stderr)
        if args.no_wait:
            print(json.dumps({"job_id": job.job_id}) if args.format == "json" else job.job_id)
            return 0
        try:
            outcome = job.wait(args.wait_timeout, progress)
        except KeyboardInterrupt:
            print(cancel_after_interrupt(job, args, role), file=sys.stderr)
            return INTERRUPTED
        if args.plot and outcome.state == "SUCCEEDED":
            job.result().plot(args.plot, title=f"learned privately (job {job.job_id})")
    if args.format == "json":
        print(json.dumps(outcome_json(outcome), indent=2))
    else:
        print_outcome(outcome, f"ppbn learn via {role}")
        if args.plot and outcome.state == "SUCCEEDED":
            print(f"wrote {args.plot}", file=sys.stderr)
    if outcome.state == "SUCCEEDED":
        return 0
    return (
        2 if outcome.refused else 1
    )  # 2: the input or a policy refused the job, as for other bad input


def cancel_command(args: argparse.Namespace, job_id: str) -> str:
    """The command line that cancels ``job_id`` at the daemon this command talked to."""
    how = f"--tls-dir {args.tls_dir}" if args.tls_dir else "--insecure"
    return f"ppbn learn --peer {args.peer} {how} --cancel {job_id}"


def cancel_after_interrupt(job, args: argparse.Namespace, role: str) -> str:
    """Ctrl-C while waiting: cancel the job at the daemon (which tells its peer to stop
    too) and wait, bounded, until it has stopped; one line saying what happened, or how to
    cancel it when that failed."""
    job_id = job.job_id
    print(
        f"interrupted: cancelling job {job_id} at {role} (Ctrl-C again to stop waiting)",
        file=sys.stderr,
    )
    try:
        job.cancel()
        outcome = job.wait(CANCEL_WAIT_S)
    except (UserError, KeyboardInterrupt) as exc:
        why = "interrupted again" if isinstance(exc, KeyboardInterrupt) else str(exc)
        return (
            f"ppbn: interrupted; job {job_id} may still be running at both daemons ({why}); "
            f"cancel it with: {cancel_command(args, job_id)}"
        )
    if outcome.state == "CANCELLED":
        return f"ppbn: interrupted; job {job_id} cancelled at {role}, which told its peer to stop it too"
    return f"ppbn: interrupted; job {job_id} had already ended at {role} ({outcome.state})"


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
    control.add_argument(
        "--status", metavar="JOB_ID", help="show a job's state instead of starting one"
    )
    control.add_argument(
        "--cancel", metavar="JOB_ID", help="cancel a running job (both daemons stop it)"
    )
    control.add_argument(
        "--resume",
        metavar="JOB_ID",
        help="continue an interrupted learn job from the last K2 step both daemons checkpointed "
        "(same parameters, taken from the checkpoints; each daemon checks them against its policy again)",
    )
    parser.add_argument(
        "--wait-timeout", type=positive_float, help="give up waiting after this many seconds"
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw the learned network into this PNG (needs the daemon's job folder readable "
        "from here, as on the daemon's own host)",
    )
    add_job_arguments(parser)
    add_learning_options(parser)
    add_secure_options(parser)
    parser.set_defaults(func=_learn)
