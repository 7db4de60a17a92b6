"""``ppbn shares combine``: open two parties' parameter-share files (disclosure ``shared``).

Opening needs both files, so it happens only when both organisations agree to it; until
then each file alone says nothing about the parameters.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ppbn.errors import UserError


def _read(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: share file not found") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON (line {exc.lineno}): {exc.msg}") from None


def _combine(args: argparse.Namespace) -> int:
    from ppbn.data.outputs import atomic_write_text, check_output_file
    from ppbn.jobs.learn import combine_parameter_shares

    if args.out:  # before any work
        check_output_file(args.out)
    alice, bob = _read(args.alice), _read(args.bob)
    for path, data in ((args.alice, alice), (args.bob, bob)):
        if not isinstance(data, dict) or "variables" not in data or "theta_frac_bits" not in data:
            raise UserError(f"{path}: not a ppbn parameter-share file")
    opened = combine_parameter_shares(alice, bob)
    text = json.dumps({"parameters": opened}, indent=2)
    if args.out:
        atomic_write_text(args.out, text + "\n")
        print(f"wrote the opened CPTs of {len(opened)} variables to {args.out}")
    else:
        print(text)
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("shares", help="work with parameter shares (disclosure shared)")
    sub = parser.add_subparsers(dest="shares_command", metavar="ACTION", required=True)
    combine = sub.add_parser(
        "combine",
        help="open alice's and bob's parameter_shares.json into CPTs (both must agree)",
    )
    combine.add_argument("--alice", required=True, help="alice's parameter_shares.json")
    combine.add_argument("--bob", required=True, help="bob's parameter_shares.json")
    combine.add_argument("--out", help="write the CPTs as JSON here (default: print)")
    combine.set_defaults(func=_combine)
