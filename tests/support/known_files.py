"""Files the tests read: the project's own fixtures.

``BRISTOL`` (``PPBN_BRISTOL_DIR``) is the folder of third-party Bristol Fashion netlists
that only tests/protocols/test_yao.py still reads; it goes once that file uses the
project's generated SHA-256 netlist (tests/support/sha256_bristol.py) like the rest of
the tests (docs/decisions/test-layout.md).
"""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures"
TEST_POLICY = FIXTURES / "test-policy.toml"
# a schema whose owner bins two numeric columns (edges and MGAS) beside a categorical one
CONTINUOUS_SCHEMA = FIXTURES / "continuous-schema.json"
BRISTOL = Path(
    os.environ.get("PPBN_BRISTOL_DIR", TESTS.parent.parent / "shared" / "circuits" / "bristol")
)
