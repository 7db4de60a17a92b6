"""Fixtures of the hostile-peer tests live in hostile.py (importable by the test modules)."""

from hostile import pair, pki  # noqa: F401 - pytest fixtures
