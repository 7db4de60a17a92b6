"""Files the tests read: the project's own fixtures, all in the repository
(docs/decisions/test-layout.md)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures"
TEST_POLICY = FIXTURES / "test-policy.toml"
# a schema whose owner bins two numeric columns (edges and MGAS) beside a categorical one
CONTINUOUS_SCHEMA = FIXTURES / "continuous-schema.json"
