"""``ppbn perturb``: randomize data with a known mechanism, reconstruct distributions, and
learn from randomized data. The subcommands live in two helper modules."""

from __future__ import annotations

import argparse
import sys

from ppbn.commands import _perturb_data, _perturb_learn


def register(commands, bench) -> None:
    parser = commands.add_parser(
        "perturb",
        help="randomize a CSV with a known mechanism, reconstruct distributions, learn from randomized data",
    )
    sub = parser.add_subparsers(dest="perturb_command", metavar="WHAT")
    parser.set_defaults(func=lambda _args: _missing_subcommand(parser))
    _perturb_data.add_parsers(sub)
    _perturb_learn.add_parsers(sub)


def _missing_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
