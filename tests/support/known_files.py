"""Files the tests read: the project's own fixtures, and the public Bristol circuits.

The Bristol Fashion AES-128 and SHA-256 netlists are third-party test vectors and stay
out of the repository (docs/decisions/test-layout.md): the known-answer tests that need
them read ``PPBN_BRISTOL_DIR`` (default: the circuits folder a checkout of the project's
shared material places beside the repository) and skip when it is absent.
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
