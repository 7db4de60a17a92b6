"""What the commands that run jobs show: a job's outcome and each party's figures (``learn``,
``simulate``).

Everything here came from a daemon: its texts go to the terminal through ``printable``
and into rich as ``Text``, never as markup. The parties' display names are the caller's
own (its local schema's ``party_names``), never a daemon's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ppbn.errors import printable

if TYPE_CHECKING:
    from ppbn.parties.client import JobOutcome

MAX_VALUE_CHARS = 100  # a result value other than the network, cut to this


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
    """One result value for the table, printable: the learned edges and parents always in
    full (a person reads the network here), anything else cut at 100 characters."""
    text = _network_text(key, value)
    if text is None:
        text = json.dumps(value) if not isinstance(value, str) else value
        if len(text) > MAX_VALUE_CHARS:
            text = text[: MAX_VALUE_CHARS - 3] + "..."
    return printable(text, len(text))


def _network_text(key: str, value: Any) -> str | None:
    """The edges, the parents or the privacy of a result as a person reads them; None
    when ``value`` has not the shape of one."""
    if key == "edges" and _names(value, pairs=True):
        return ", ".join(f"{parent} -> {child}" for parent, child in value) or "(none)"
    if key == "parents" and isinstance(value, dict) and all(_names(ps) for ps in value.values()):
        return "; ".join(f"{child}: {', '.join(ps) or '-'}" for child, ps in value.items())
    if key == "privacy" and isinstance(value, dict) and "epsilon" in value:
        from ppbn.api.show import privacy_text

        return privacy_text(value)
    return None


def _names(value: Any, pairs: bool = False) -> bool:
    """A list of names, or (``pairs``) of [parent, child] pairs of names."""
    if not isinstance(value, list):
        return False
    if pairs:
        return all(isinstance(p, list) and len(p) == 2 and _names(p) for p in value)
    return all(isinstance(name, str) for name in value)


def print_outcome(
    outcome: JobOutcome,
    title: str,
    show_files: bool = True,
    party_names: Mapping[str, str] | None = None,
) -> None:
    """Rich tables for people: the result, then per party time, traffic and operations;
    a party's column is headed by its display name in ``party_names`` (role -> name)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ppbn.bn.schema import party_label

    console = Console()
    style = "green" if outcome.state == "SUCCEEDED" else "red"
    console.print(
        Text.assemble(
            (printable(title, 200), "bold"),
            f": job {outcome.job_id} ({outcome.kind}) ",
            (outcome.state, style),
        )
    )
    if outcome.error:
        console.print(Text.assemble(("error:", "red"), f" {outcome.error}"))
    if outcome.result:
        result = Table("result", "value", title="result (contacted daemon)")
        for key, value in outcome.result.items():
            result.add_row(Text(printable(key, 60)), Text(result_text(key, value)))
        console.print(result)
    per_party = party_stats(outcome)
    if per_party:
        table = Table("figure", title="per party")
        for role in per_party:
            # a role a local name is given for is a known one; any other came from a daemon
            named = role in (party_names or {})
            table.add_column(Text(party_label(role, party_names) if named else printable(role, 40)))
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
                Text(f"phase {printable(phase, 60)} (s)"),
                *(_seconds(s.get("phases", {}).get(phase)) for s in per_party.values()),
            )
        console.print(table)
    if outcome.out_dir and show_files:
        console.print(Text(f"files of the contacted daemon: {printable(outcome.out_dir, 500)}"))


def _seconds(value: float | None) -> str:
    """A phase's time, or "-" for a party that reported none (the peer's never cross)."""
    return "-" if value is None else f"{value:.2f}"
