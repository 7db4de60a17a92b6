"""``ppbn certs make``: a CA and one certificate per daemon (alice, bob, miner) and for the operator."""

from __future__ import annotations

import argparse


def _make(args: argparse.Namespace) -> int:
    from ppbn.parties.tls import make_certificates

    written = make_certificates(args.out, args.hosts)
    names = ", ".join(p.name for p in written)
    print(f"wrote {names} to {args.out}")
    print(
        "give each host ca.crt and its own ROLE.crt/ROLE.key (alice, bob, or miner for the "
        "PRAM data miner), operators "
        "ca.crt and operator.crt/.key; keep ca.key offline"
    )
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("certs", help="make TLS certificates for the daemons")
    sub = parser.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    make = sub.add_parser(
        "make",
        help="make a CA and certificates for alice, bob, miner and operator",
        description="Write ca.crt/ca.key and alice, bob, miner (the PRAM data miner) and "
        "operator certificates and keys "
        "(ECDSA P-256) signed by that CA. Party certificates name their role, localhost, "
        "127.0.0.1, ::1 and every --hosts entry.",
    )
    make.add_argument("--out", required=True, help="output folder (created if missing)")
    make.add_argument(
        "--hosts", nargs="*", default=[], help="extra DNS names or IP addresses of the party hosts"
    )
    make.set_defaults(func=_make)
