"""Fixtures shared by the CLI-level catalogue tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppbn.data.datasets import make_dataset


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> Path:
    """300 Asia records split between alice and bob, made once per test module."""
    out = tmp_path_factory.mktemp("catalogue") / "asia"
    make_dataset("asia", 300, 7, out)
    return out
