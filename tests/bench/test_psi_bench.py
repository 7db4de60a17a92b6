"""``ppbn.bench.psi`` from Python: a few ids between two party processes."""

from __future__ import annotations

import pytest

from ppbn.bench.psi import PsiSettings, bench_psi, psi_rows, synthetic_ids
from ppbn.errors import UserError


def test_synthetic_ids_share_the_common_part() -> None:
    alice, bob = synthetic_ids("alice", 10, 4, 7), synthetic_ids("bob", 10, 4, 7)
    assert len(alice) == len(bob) == 10 and len(set(alice) & set(bob)) == 4


def test_bench_psi_finds_the_shared_ids() -> None:
    report = bench_psi(PsiSettings(size=40, overlap=0.25, seed=3, openmined=False))
    ours = report["ppbn"]
    assert ours["correct"] and ours["intersection"] == ours["expected"] == 10
    assert report["openmined_psi"] is None and "speedup_over_openmined" not in report
    assert all(len(row) == 2 for row in psi_rows(report))


def test_bench_psi_refuses_an_overlap_above_one() -> None:
    with pytest.raises(UserError, match="--overlap"):
        bench_psi(PsiSettings(size=10, overlap=1.5))
