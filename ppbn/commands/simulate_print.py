"""What ``ppbn simulate`` prints: the secure path's (or another job's) report, with the
check against the non-private reference and ``--plot``'s picture, and the PRAM and
perturbation paths' reports with every daemon's figures. As JSON with ``--format json``,
else as text and tables for people. ``ppbn.api.simulate`` did the run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppbn.pair.loopback import LocalPair

REVEAL_WARNING = (
    "WARNING: --reveal-for-testing ADDS BOTH PARTIES' SHARES AND PRINTS WHAT THEY REVEAL. "
    "This breaks the privacy the protocol provides; it exists only to test ppbn."
)
SEED_WARNING = (
    "WARNING: --randomization-seed fixes the daemons' randomization: TESTING ONLY, every daemon of the "
    "job can undo it."
)


def print_warnings(args: argparse.Namespace) -> None:
    """The testing-only flags say so on stderr before any work."""
    if args.reveal_for_testing:
        print(REVEAL_WARNING, file=sys.stderr)
    if args.randomization_seed is not None:
        print(SEED_WARNING, file=sys.stderr)


def print_daemons_up(args: argparse.Namespace) -> Callable[[LocalPair], None]:
    """What tells a person, on stderr, where the daemons listen once they are up."""

    def daemons_up(pair: LocalPair) -> None:
        if args.path in ("pram", "perturb"):
            roles = ", ".join(f"{role} {pair.address(role)}" for role in pair.roles)
            print(f"daemons up: {roles} (mutual TLS)", file=sys.stderr)
            return
        print(
            f"daemons up: alice {pair.address('alice')}, bob {pair.address('bob')} "
            f"(mutual TLS; logs will be in {args.out or 'a temporary folder'})",
            file=sys.stderr,
        )

    return daemons_up


def print_simulation(args: argparse.Namespace, sim) -> int:
    """Print the run's report; the exit status: 0 when the job (and the reveal) succeeded."""
    if args.path in ("pram", "perturb"):
        return _print_path_simulation(args, sim)
    outcome = sim.outcome
    if not sim.succeeded:
        for role, tail in sim.logs.items():
            print(f"{role}'s log: {tail}", file=sys.stderr)
    report = _report(args, sim)
    if args.plot and sim.network is not None:
        # against the network the data came from when it is known (the reference's
        # equality is in the text); else against the reference
        against, name = (sim.truth, "truth.bif") if sim.truth else (sim.reference, "the reference")
        title = "learned privately" + (f" vs {name}" if against else "")
        sim.network.plot(args.plot, against, title)
        report["plot"] = args.plot
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        _print_report(outcome, report, bool(args.out), _party_names(args))
    return 0 if sim.succeeded and (sim.reveal is None or sim.reveal["all_equal"]) else 1


def _report(args: argparse.Namespace, sim) -> dict[str, Any]:
    from ppbn.commands.outcomes import outcome_json

    outcome = sim.outcome
    report = outcome_json(outcome)
    report.update(
        {
            "network": args.network if not args.data else None,
            "data": args.data,
            "records": (outcome.result or {}).get("records", args.records),
            "seed": args.seed if not args.data else None,
            "transport": "gRPC over mutual TLS, loopback, two processes",
            "timings": {k: round(v, 3) for k, v in sim.timings.items()},
        }
    )
    parties = report["stats"]
    if outcome.kind == "tables" and outcome.result:
        total = sum(s.get("paillier_encryptions", 0) for s in parties.values())
        paper = outcome.result["per_alpha_encryptions"]
        report["paillier_encryptions_both_parties"] = total
        report["per_alpha_encryptions"] = paper
        report["fewer_encryptions_than_per_alpha"] = round(paper / total, 1) if total else None
    if sim.reveal is not None:
        report["reveal_for_testing"] = sim.reveal
    if sim.check is not None:
        report["reference_check"] = sim.check
    return report


def _party_names(args: argparse.Namespace) -> dict[str, str]:
    """The display names in --data's schema.json (generated data names no party)."""
    from ppbn.bn.schema import Schema

    return dict(Schema.load(f"{args.data}/schema.json").party_names) if args.data else {}


def _print_report(outcome, report: dict[str, Any], files_kept: bool, names: dict[str, str]) -> None:
    from ppbn.commands.outcomes import print_outcome

    print_outcome(outcome, "ppbn simulate", show_files=files_kept, party_names=names)
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


def _print_path_simulation(args: argparse.Namespace, sim) -> int:
    """The PRAM or perturbation report; a failed job shows every daemon's last log lines."""
    from rich.console import Console

    if not sim.succeeded:
        for role, tail in sim.logs.items():
            print(f"{role}'s log: {tail}", file=sys.stderr)
    report = sim.report
    if args.format == "json":
        print(json.dumps(report, indent=2))
    elif report["path"] == "pram":
        _print_pram(Console(), report)
    else:
        _print_perturb(Console(), report)
    return 0 if sim.succeeded else 1


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


def _print_pram(console, report: dict[str, Any]) -> None:
    from ppbn.protocols.pram import iter_privacy_text

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


def _print_perturb(console, report: dict[str, Any]) -> None:
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
