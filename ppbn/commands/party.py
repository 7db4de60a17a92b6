"""``ppbn party serve``: run one party's daemon next to its data, or the data miner's daemon
of setup II (``--role miner``, no data; see ppbn.parties.daemon)."""

from __future__ import annotations

import argparse
import logging
import sys

from ppbn.commands.checked_numbers import non_negative_int, positive_float
from ppbn.commands.data_options import add_missing_options
from ppbn.commands.executor_options import add_executor_options, apply_resource_flags

# Longest silence a job accepts from the peer. A killed, stopped or cut-off peer is seen
# sooner: gRPC keepalive (ppbn.parties.net) drops a dead connection within ~15 s.
PEER_TIMEOUT_S = 60.0


def configure_logging(role: str, verbose: bool = False, log_format: str = "text") -> None:
    """Text lines for people, or (``json``) one JSON object per line for log shippers."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format=f"%(asctime)s {role} %(levelname)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
        stream=sys.stderr,
    )
    if log_format == "json":
        from ppbn.parties.logs import JsonFormatter

        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter(role))


def _serve(args: argparse.Namespace) -> int:
    from ppbn.errors import UserError
    from ppbn.jobs.policy import LocalPolicy
    from ppbn.parties.daemon import DaemonConfig, PartyDaemon

    configure_logging(args.role, args.verbose, args.log_format)
    policy = apply_resource_flags(LocalPolicy.load(args.policy), args)
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
        timeout_s=args.peer_timeout,
        missing_as_category=args.missing_as_category,
        missing_rule=args.missing,
        align=args.align,
        policy=policy,
        fixed_seed_for_testing=args.insecure_fixed_seed_for_testing,
        audit_log=args.audit_log,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
    )
    if (
        policy.executor == "ray"
    ):  # at start-up, from the main thread: a bad address fails here, in one line
        from ppbn.protocols.executor import connect_ray

        try:
            connect_ray(policy.ray_address, policy.workers)
        except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ...
            raise UserError(
                f"--executor ray: cannot start or join Ray: {str(exc).splitlines()[0]}"
            ) from None
    PartyDaemon(config).serve_forever()
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:

    parser = commands.add_parser("party", help="run a party's daemon")
    sub = parser.add_subparsers(dest="party_command", metavar="ACTION", required=True)
    serve = sub.add_parser(
        "serve",
        help="serve one party's data to its peer daemon over mutual TLS (or run the data miner)",
        description="Load and check this party's data, listen for the peer daemon and for "
        "this party's operators (mutual TLS with the certificates of `ppbn certs request/sign`), "
        "and run the jobs they start. Every job's parameters are checked against this daemon's "
        "local policy (--policy; `ppbn policy show` prints the effective one) before anything "
        "derived from the data is sent: nothing from the network can weaken it. DP jobs are "
        "charged to the data set's privacy budget in this host's state folder ($PPBN_STATE_DIR, "
        "else ~/.local/state/ppbn; `ppbn budget show`), whatever --out and --audit-log say. "
        "Stops gracefully on SIGTERM.",
    )
    serve.add_argument(
        "--role",
        required=True,
        choices=("alice", "bob", "miner"),
        help="this party, or miner: the data miner of setup II (no data; jobs pram-miner and "
        "perturb-learn-miner)",
    )
    serve.add_argument("--schema", required=True, help="public schema JSON (same file at both)")
    serve.add_argument(
        "--data", help="this party's CSV (id column + its variables); not for the miner"
    )
    serve.add_argument("--listen", required=True, help="HOST:PORT to listen on, e.g. 0.0.0.0:7401")
    serve.add_argument("--peer", help="HOST:PORT of the other party's daemon (alice and bob)")
    serve.add_argument(
        "--miner", help="alice and bob: HOST:PORT of the data miner whose jobs (setup II) to accept"
    )
    serve.add_argument("--alice", help="miner: HOST:PORT of alice's daemon")
    serve.add_argument("--bob", help="miner: HOST:PORT of bob's daemon")
    serve.add_argument(
        "--tls-dir",
        help="this party's folder: ca.crt (own CA), trusted.crt (peer CAs), ROLE.crt, ROLE.key",
    )
    policy = serve.add_argument_group("local policy (never weakened by a job message)")
    policy.add_argument(
        "--policy",
        metavar="FILE",
        help="policy file (TOML or JSON): allowed paths, minimum Paillier key size, allowed "
        "disclosure modes, PRAM minimum change probability and variables that must be randomized, "
        "maximum parents / family size, minimum records, executor, workers, cache, message and queue sizes "
        "(default: the safe built-in policy; see `ppbn policy show`)",
    )
    add_executor_options(policy, "this party's")
    policy.add_argument(
        "--cache-mb",
        type=non_negative_int,
        metavar="MB",
        help="peer ciphertexts kept in memory for later K2 steps of a learn job (default 768)",
    )
    policy.add_argument(
        "--spill-mb",
        type=non_negative_int,
        metavar="MB",
        help="more kept past --cache-mb in a memory-mapped temporary file (default 0: none)",
    )
    policy.add_argument(
        "--spill-dir",
        metavar="DIR",
        help="folder of that file (default: the system's temporary folder)",
    )
    policy.add_argument(
        "--insecure-fixed-seed-for-testing",
        metavar="SEED",
        help="TESTING ONLY: fix this daemon's randomization (PRAM, perturbation learners) so runs repeat; anyone who "
        "knows the seed can undo it. Never taken from a job message.",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="plaintext, no certificates (loopback tests only)"
    )
    serve.add_argument(
        "--out", default="ppbn-out", help="folder for job outputs (default ppbn-out)"
    )
    serve.add_argument(
        "--peer-timeout",
        "--timeout",
        dest="peer_timeout",
        type=positive_float,
        default=PEER_TIMEOUT_S,
        help=f"longest wait for the peer before a job fails (default {PEER_TIMEOUT_S:g} s)",
    )
    add_missing_options(serve)
    serve.add_argument(
        "--align",
        choices=("strict", "psi"),
        default="strict",
        help="strict (default): both parties must hold exactly the same record ids; psi: the ids "
        "overlap in part, and every job first runs a private set intersection and works on the "
        "shared records only (both daemons must use the same --align)",
    )
    serve.add_argument("--verbose", action="store_true", help="debug logging")
    ops = serve.add_argument_group("operations: audit log, metrics, log format")
    ops.add_argument(
        "--audit-log",
        metavar="PATH",
        help="append-only, hash-chained audit log of job events (default OUT/audit.log; "
        "`ppbn audit verify|show|sign`)",
    )
    ops.add_argument(
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve Prometheus metrics at http://HOST:N/metrics (plain HTTP, no authentication; "
        "default off; 0 picks a free port and logs it)",
    )
    ops.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address of the metrics endpoint (default 127.0.0.1: keep it local)",
    )
    ops.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object per line (time, level, logger, message, job)",
    )
    serve.set_defaults(func=_serve)

    policy_parser = commands.add_parser("policy", help="show a daemon's effective local policy")
    policy_sub = policy_parser.add_subparsers(
        dest="policy_command", metavar="ACTION", required=True
    )
    show = policy_sub.add_parser(
        "show",
        help="print the effective policy (the built-in default, or FILE on top of it) as TOML",
        description="Print the local policy a daemon started with --policy FILE would enforce, "
        "as a TOML file that can be edited and passed back with --policy.",
    )
    show.add_argument("--policy", metavar="FILE", help="policy file to read (default: built-in)")
    show.add_argument("--format", choices=("toml", "json"), default="toml")
    show.set_defaults(func=_show_policy)


def _show_policy(args: argparse.Namespace) -> int:
    import json

    from ppbn.jobs.policy import LocalPolicy

    policy = LocalPolicy.load(args.policy)
    print(
        json.dumps(policy.to_dict(), indent=2) if args.format == "json" else policy.to_toml(),
        end="",
    )
    return 0
