"""``ppbn.bench.paillier`` from Python: a small key, a few encryptions of each kind."""

from __future__ import annotations

import pytest

from ppbn.bench.paillier import PaillierSettings, bench_paillier, paillier_rows
from ppbn.errors import UserError


def test_bench_paillier_reports_each_path() -> None:
    report = bench_paillier(PaillierSettings(key_bits=1024, count=6, phe_count=3))
    assert report["key_bits"] == 1024 and report["ppbn_count"] == 6 and report["phe_count"] == 3
    for key in ("ppbn_encrypt_ms", "phe_encrypt_ms", "ppbn_precomputed_encrypt_ms"):
        assert report[key] > 0
    assert report["exponent_bits"] % report["window_bits"] == 0
    rows = paillier_rows(report)
    assert [row[0] for row in rows][:2] == ["phe encrypt", "ppbn fast path (key owner, CRT)"]


def test_bench_paillier_refuses_no_encryptions() -> None:
    with pytest.raises(UserError, match="at least 1"):
        bench_paillier(PaillierSettings(key_bits=1024, count=0))
