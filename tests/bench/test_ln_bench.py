"""``ppbn.bench.ln`` from Python: a few secure ln terms between two threads."""

from __future__ import annotations

import pytest

from ppbn.bench.ln import LnSettings, bench_ln
from ppbn.errors import UserError


def test_a_few_exact_terms_in_threads() -> None:
    settings = LnSettings(count=100, max_count=50, modes=("exact",), parties="threads")
    report = bench_ln(settings)
    (row,) = report["modes"]
    assert row["mode"] == "exact" and row["evaluations"] == 100
    assert row["bytes_per_evaluation"] > 0 and row["model_bytes_per_evaluation"] > 0
    assert row["bytes_alice_to_bob"] > 0 and row["bytes_bob_to_alice"] > 0
    assert report["transport"].startswith("in-memory channel")
    assert report["executor"]["kind"] == "local" and report["max_count"] == 50
    kinds = report["bytes_by_mode_and_kind"]
    assert kinds and all(k["phase"].startswith("exact: ") for k in kinds)
    assert sum(k["total"] for k in kinds) == row["bytes_alice_to_bob"] + row["bytes_bob_to_alice"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (LnSettings(count=0), "--count must be at least 1"),
        (LnSettings(modes=("exact", "magic")), "--modes: unknown score mode 'magic'"),
        (LnSettings(parties="cluster"), "--parties"),
        (LnSettings(link="fast"), "--link 'fast'"),
    ],
)
def test_a_bad_setting_is_refused_before_any_term(settings: LnSettings, message: str) -> None:
    with pytest.raises(UserError, match=message):
        bench_ln(settings)
