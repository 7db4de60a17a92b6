"""Shared fixtures: small data sets made once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppbn.data.datasets import make_dataset

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def asia_dir(tmp_path_factory) -> Path:
    """5,000 Asia records split alternately between alice and bob."""
    out = tmp_path_factory.mktemp("asia")
    make_dataset("asia", 5000, 7, out)
    return out
