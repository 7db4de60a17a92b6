"""``ppbn party serve``: run one party's daemon next to its data, or the PRAM data miner's
daemon (``--role miner``, no data; see ppbn.parties.daemon)."""

from __future__ import annotations

import argparse
import logging
import sys

from ppbn.protocols.channel import DEFAULT_TIMEOUT_S


def configure_logging(role: str, verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format=f"%(asctime)s {role} %(levelname)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
        stream=sys.stderr,
    )


def _serve(args: argparse.Namespace) -> int:
    from ppbn.errors import UserError
    from ppbn.parties.daemon import DaemonConfig, PartyDaemon

    configure_logging(args.role, args.verbose)
    if args.role == "miner":
        if args.data or args.peer or args.miner:
            raise UserError("the miner has no --data, --peer or --miner: give --alice and --bob")
        peers = {"alice": args.alice or "", "bob": args.bob or ""}
    else:
        if not args.data or not args.peer:
            raise UserError(f"{args.role} needs --data and --peer")
        if args.alice or args.bob:
            raise UserError("--alice and --bob are for the miner; alice and bob take --peer")
        peers = {"miner": args.miner} if args.miner else {}
    if args.insecure:
        print(
            "ppbn: WARNING: --insecure: plaintext gRPC without certificates; the traffic can be "
            "read and either party impersonated. Use only for local tests.",
            file=sys.stderr,
        )
    config = DaemonConfig(
        role=args.role,
        schema_path=args.schema,
        data_path=args.data or "",
        listen=args.listen,
        peer=args.peer or "",
        peers=peers,
        tls_dir=args.tls_dir,
        insecure=args.insecure,
        out_dir=args.out,
        timeout_s=args.timeout,
        max_message_bytes=args.max_message_mb * 1024 * 1024,
        missing_as_category=args.missing_as_category,
    )
    PartyDaemon(config).serve_forever()
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("party", help="run a party's daemon")
    sub = parser.add_subparsers(dest="party_command", metavar="ACTION", required=True)
    serve = sub.add_parser(
        "serve",
        help="serve one party's data to its peer daemon over mutual TLS (or run the PRAM miner)",
        description="Load and check this party's data, listen for the peer daemon and for "
        "operators (mutual TLS with the certificates of `ppbn certs make`), and run the jobs "
        "they start. Stops gracefully on SIGTERM.",
    )
    serve.add_argument(
        "--role", required=True, choices=("alice", "bob", "miner"),
        help="this party, or miner: the data miner of the PRAM path's setup II (no data)",
    )  # fmt: skip
    serve.add_argument("--schema", required=True, help="public schema JSON (same file at both)")
    serve.add_argument("--data", help="this party's CSV (id column + its variables); not for the miner")
    serve.add_argument("--listen", required=True, help="HOST:PORT to listen on, e.g. 0.0.0.0:7401")
    serve.add_argument("--peer", help="HOST:PORT of the other party's daemon (alice and bob)")
    serve.add_argument(
        "--miner", help="alice and bob: HOST:PORT of the PRAM data miner whose jobs to accept"
    )
    serve.add_argument("--alice", help="miner: HOST:PORT of alice's daemon")
    serve.add_argument("--bob", help="miner: HOST:PORT of bob's daemon")
    serve.add_argument("--tls-dir", help="folder with ca.crt, ROLE.crt and ROLE.key")
    serve.add_argument(
        "--insecure", action="store_true", help="plaintext, no certificates (loopback tests only)"
    )
    serve.add_argument("--out", default="ppbn-out", help="folder for job outputs (default ppbn-out)")
    serve.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for the peer before failing a job (default {DEFAULT_TIMEOUT_S:g})",
    )
    serve.add_argument(
        "--max-message-mb", type=int, default=512, help="largest protocol message in MiB (default 512)"
    )
    serve.add_argument(
        "--missing-as-category",
        action="store_true",
        help="read empty cells as the schema's missing_state",
    )
    serve.add_argument("--verbose", action="store_true", help="debug logging")
    serve.set_defaults(func=_serve)
