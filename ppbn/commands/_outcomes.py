"""What the commands that run jobs show: a job's outcome and each party's figures (``learn``,
``simulate``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppbn.parties.client import JobOutcome


def party_stats(outcome: JobOutcome) -> dict[str, Any]:
    """{role: stats} for both parties, as the daemon reported them after the job."""
    out: dict[str, Any] = {}
    for stats in (outcome.stats, outcome.peer_stats):
        if stats:
            out[stats.get("role", "?")] = stats
    return dict(sorted(out.items()))


def outcome_json(outcome: JobOutcome) -> dict[str, Any]:
    """The outcome as ``--format json`` prints it: both parties' stats, by role."""
    return {
        "job_id": outcome.job_id,
        "kind": outcome.kind,
        "state": outcome.state,
        "error": outcome.error,
        "result": outcome.result,
        "out_dir": outcome.out_dir,
        "stats": party_stats(outcome),
    }


def result_text(key: str, value: Any) -> str:
    """One result value for the table: the learned edges and parents always in full (a
    person reads the network here), anything else cut at 100 characters."""
    if key == "edges" and isinstance(value, list):
        return ", ".join(f"{parent} -> {child}" for parent, child in value) or "(none)"
    if key == "parents" and isinstance(value, dict):
        return "; ".join(f"{child}: {', '.join(ps) or '-'}" for child, ps in value.items())
    if key == "privacy" and isinstance(value, dict) and "epsilon" in value:
        return (
            f"({value['epsilon']:g}, {value['delta']:.1e})-DP "
            f"({value.get('accounting', 'pure')} accounting): "
            f"{value['decisions']} noisy parent choices of epsilon "
            f"{value['epsilon_per_decision']:.3g} each, CPTs from counts with discrete "
            f"Laplace noise of scale {value['count_scale']:.3g}"
        )
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 100 else text[:97] + "..."


def print_outcome(outcome: JobOutcome, title: str, show_files: bool = True) -> None:
    """Rich tables for people: the result, then per party time, traffic and operations."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    style = "green" if outcome.state == "SUCCEEDED" else "red"
    console.print(
        f"[bold]{title}[/bold]: job {outcome.job_id} ({outcome.kind}) [{style}]{outcome.state}[/{style}]"
    )
    if outcome.error:
        console.print(f"[red]error:[/red] {outcome.error}")
    if outcome.result:
        result = Table("result", "value", title="result (contacted daemon)")
        for key, value in outcome.result.items():
            result.add_row(key, result_text(key, value))
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
            table.add_row(
                label, *(fmt.format(s[key]) if key in s else "-" for s in per_party.values())
            )
        phases = sorted({p for s in per_party.values() for p in s.get("phases", {})})
        for phase in phases:
            table.add_row(
                f"phase {phase} (s)",
                *(f"{s.get('phases', {}).get(phase, 0.0):.2f}" for s in per_party.values()),
            )
        console.print(table)
    if outcome.out_dir and show_files:
        console.print(f"files of the contacted daemon: {outcome.out_dir}")
