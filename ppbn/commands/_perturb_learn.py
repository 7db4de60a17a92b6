"""Subcommands of ``ppbn perturb`` (see ppbn/commands/perturb.py)."""

from __future__ import annotations

import argparse


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to ``ppbn perturb``."""
