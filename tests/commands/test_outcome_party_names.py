"""The per-party table of `ppbn learn` / `ppbn simulate` heads each party's column with the
display name the caller's own schema gives it; a role it does not name stays as it came."""

from __future__ import annotations

from ppbn.commands.outcomes import print_outcome
from ppbn.parties.client import JobOutcome


def outcome() -> JobOutcome:
    return JobOutcome(
        job_id="j1",
        kind="learn",
        state="SUCCEEDED",
        error="",
        result=None,
        stats={"role": "alice", "wall_s": 1.5, "bytes_sent": 10},
        peer_stats={"role": "bob", "bytes_received": 10},
        out_dir="",
    )


def test_the_columns_carry_the_local_names(capsys):
    print_outcome(outcome(), "ppbn simulate", party_names={"alice": "Acme Insurance"})
    text = capsys.readouterr().out
    assert "Acme Insurance (alice)" in text and "bob" in text and "(bob)" not in text


def test_without_names_the_columns_are_the_roles(capsys):
    print_outcome(outcome(), "ppbn simulate")
    text = capsys.readouterr().out
    assert "alice" in text and "(alice)" not in text
