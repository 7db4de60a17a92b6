"""The ``ppbn`` command.

Each module in ``ppbn.commands`` owns one command group and exposes
``register(commands, bench)``: ``commands`` is the top-level subparsers object and
``bench`` the subparsers of ``ppbn bench``. A registered parser sets ``func`` to a
callable taking the parsed namespace and returning an exit code. ``command_modules`` lists
them in the order of the help text; a new command is one module there and one line here
(docs/architecture.md). Modules whose names start with ``_`` are shared helpers.

Errors a user can fix (bad input files, refused peers, wrong flags) are raised as
``UserError`` and printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType

from ppbn import __version__
from ppbn.errors import UserError


def command_modules() -> tuple[ModuleType, ...]:
    """The command modules, in the order of the help text. Imported here, after
    ``quiet_grpc_core``: a command loads grpc when it runs. Their own imports are light (no
    numpy, grpc, ...: tests/commands/test_startup.py), as every command builds the parser."""
    from ppbn.commands import (
        audit,
        bench_dp,
        bench_gc,
        bench_k2,
        bench_order,
        bench_ot,
        bench_psi,
        bench_resume,
        bench_scale,
        bench_tables,
        budget,
        certs,
        circuit,
        compare,
        compare_classifiers,
        datasets,
        demo,
        learn,
        party,
        perturb,
        reference,
        sample,
        schema,
        shares,
        show,
        simulate,
    )

    return (
        audit,
        bench_dp,
        bench_gc,
        bench_k2,
        bench_order,
        bench_ot,
        bench_psi,
        bench_resume,
        bench_scale,
        bench_tables,
        budget,
        certs,
        circuit,
        compare,
        compare_classifiers,
        datasets,
        demo,
        learn,
        party,
        perturb,
        reference,
        sample,
        schema,
        shares,
        show,
        simulate,
    )


def quiet_grpc_core() -> None:
    """Keep gRPC's C-core log lines (``E1123 ... add_port.cc``) off stderr, so a failure is
    ppbn's one line; set before grpc is first imported, and never over the user's choice."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    os.environ.setdefault("GRPC_TRACE", "")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ppbn",
        description="Learn a Bayesian network over two parties' vertically partitioned data, "
        "privately (Yang-Wright secure path) or approximately (PRAM path).",
    )
    parser.add_argument("--version", action="version", version=f"ppbn {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench_parser = commands.add_parser(
        "bench", help="measure sub-protocols and whole runs (tables for people, --format json)"
    )
    bench = bench_parser.add_subparsers(dest="bench_command", metavar="WHAT")
    bench_parser.set_defaults(func=lambda _args: _missing_subcommand(bench_parser))

    for module in command_modules():
        module.register(commands, bench)
    return parser


def _missing_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    quiet_grpc_core()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"ppbn: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ppbn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()


# the exit status of a program killed by SIGPIPE, as `git log | head` leaves it
SIGPIPE_STATUS = 141


def _reader_gone() -> int:
    """The reader of our output went away (`ppbn audit show LOG | head -1`): stop quietly,
    as other tools do; stdout is pointed at /dev/null so the final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
