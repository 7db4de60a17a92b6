"""The data flags of commands that load or sample data: missing values and record
alignment."""

from __future__ import annotations

import argparse

from ppbn.data.constants import MISSING_HELP, MISSING_RULES
from ppbn.errors import UserError


def add_missing_options(parser: argparse.ArgumentParser, rate: bool = False) -> None:
    """``--missing`` (and ``--missing-as-category``, its older alias for ``category``) on
    every command that loads data; with ``rate`` also ``--missing-rate`` for generated data."""
    parser.add_argument("--missing", choices=MISSING_RULES, help=MISSING_HELP)
    parser.add_argument(
        "--missing-as-category",
        action="store_true",
        help="the same as --missing category: read empty cells as the schema's declared missing_state",
    )
    if rate:
        parser.add_argument(
            "--missing-rate",
            type=float,
            default=0.0,
            metavar="R",
            help="empty this fraction of the generated data's cells at random (each cell "
            "independently) before the run, to try --missing available-case (default 0)",
        )


def missing_rule(args: argparse.Namespace) -> str:
    """The rule of ``--missing`` / ``--missing-as-category`` (``error`` when neither is given)."""
    from ppbn.data.party_data import missing_rule_from

    return missing_rule_from(
        getattr(args, "missing", None), getattr(args, "missing_as_category", False)
    )


PSI_DEFAULT_OVERLAP = 0.6


def add_alignment_options(parser: argparse.ArgumentParser, sampling: bool = True) -> None:
    """--align for commands that start both daemons (and --overlap where they sample data)."""
    parser.add_argument(
        "--align",
        choices=("strict", "psi"),
        default="strict",
        help="strict (default): both parties hold the same record ids; psi: the daemons run a "
        "private set intersection of their ids and learn on the shared records only",
    )
    if sampling:
        parser.add_argument(
            "--overlap",
            type=float,
            help="share of each party's sampled records the other holds too (default 1, or "
            f"{PSI_DEFAULT_OVERLAP:g} with --align psi)",
        )


def sample_overlap(args: argparse.Namespace) -> float:
    """The overlap to sample with: given, or the default of the alignment; strict needs 1."""
    overlap = (
        args.overlap
        if args.overlap is not None
        else (PSI_DEFAULT_OVERLAP if args.align == "psi" else 1.0)
    )
    if overlap < 1.0 and args.align != "psi":
        raise UserError(f"--overlap {overlap:g}: parties with different records need --align psi")
    return overlap
