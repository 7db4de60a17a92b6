"""``ppbn party serve``: run one party's daemon next to its data (see ppbn.parties.daemon)."""

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
    from ppbn.parties.daemon import DaemonConfig, PartyDaemon

    configure_logging(args.role, args.verbose)
    if args.insecure:
        print(
            "ppbn: WARNING: --insecure: plaintext gRPC without certificates; the traffic can be "
            "read and either party impersonated. Use only for local tests.",
            file=sys.stderr,
        )
    config = DaemonConfig(
        role=args.role,
        schema_path=args.schema,
        data_path=args.data,
        listen=args.listen,
        peer=args.peer,
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
        help="serve one party's data to its peer daemon over mutual TLS",
        description="Load and check this party's data, listen for the peer daemon and for "
        "operators (mutual TLS with the certificates of `ppbn certs make`), and run the jobs "
        "they start. Stops gracefully on SIGTERM.",
    )
    serve.add_argument("--role", required=True, choices=("alice", "bob"), help="this party")
    serve.add_argument("--schema", required=True, help="public schema JSON (same file at both)")
    serve.add_argument("--data", required=True, help="this party's CSV (id column + its variables)")
    serve.add_argument("--listen", required=True, help="HOST:PORT to listen on, e.g. 0.0.0.0:7401")
    serve.add_argument("--peer", required=True, help="HOST:PORT of the other party's daemon")
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
