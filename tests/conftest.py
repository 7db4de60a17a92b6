"""Shared fixtures: small data sets made once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ppbn.data.datasets import make_dataset
from ppbn.parties.budget import STATE_ENV

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def state_dir(tmp_path_factory):
    """Each test module's daemons keep their privacy budgets in a folder of their own (the
    default is the user's state folder, shared by every daemon of the host)."""
    before = os.environ.get(STATE_ENV)
    os.environ[STATE_ENV] = str(tmp_path_factory.mktemp("state"))
    yield Path(os.environ[STATE_ENV])
    if before is None:
        os.environ.pop(STATE_ENV, None)
    else:
        os.environ[STATE_ENV] = before


@pytest.fixture(scope="session")
def asia_dir(tmp_path_factory) -> Path:
    """5,000 Asia records split alternately between alice and bob."""
    out = tmp_path_factory.mktemp("asia")
    make_dataset("asia", 5000, 7, out)
    return out
