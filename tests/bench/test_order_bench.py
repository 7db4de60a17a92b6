"""``ppbn.bench.order`` from Python: K2 under a few orders and hc on a small sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppbn.bench.order import order_sensitivity, plot
from ppbn.errors import UserError


def test_order_sensitivity_runs_k2_and_hc(tmp_path: Path) -> None:
    report = order_sensitivity("asia", records=300, orders=2, seed=1)
    assert [(r["search"], r["order"]) for r in report["runs"]] == [
        ("k2", "topological"),
        ("k2", "random 1"),
        ("k2", "random 2"),
        ("hc", "none (empty start)"),
    ]
    assert report["summary"]["hc_shd"] == report["runs"][-1]["shd"]
    pytest.importorskip("matplotlib")
    plot(report, str(tmp_path / "order.png"))
    assert (tmp_path / "order.png").stat().st_size > 0


def test_order_sensitivity_refuses_an_unknown_network() -> None:
    with pytest.raises(UserError, match="--network"):
        order_sensitivity("nowhere", records=10, orders=1)
