"""``ppbn certs``: a per-party PKI in which no private key leaves the host that made it.

Each organisation runs ``ca`` once on its CA host; each daemon or operator host runs
``request`` and sends only the request to its CA, which ``sign``s it; each daemon host
then ``trust``s the other party's CA certificate, pinned by the fingerprint the other
party read out to it over another channel. ``inspect`` shows what a certificate says.
The work is done by ``ppbn.parties.pki``, whose ``make_local_pki`` runs the same steps for demos.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from ppbn.errors import UserError
from ppbn.parties.constants import CA_DAYS, DAEMON_ROLES, EXPIRY_WARNING_DAYS, LEAF_DAYS, OPERATOR


def _check_out_folder(out: str) -> None:
    """--out of ``ca`` and ``request`` names a folder (other files in it stay untouched)."""
    if Path(out).exists() and not Path(out).is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")


def _ca(args: argparse.Namespace) -> int:
    from ppbn.parties.cert_summary import load_inspectable, summarize
    from ppbn.parties.pki import make_ca

    _check_out_folder(args.out)
    cert_path, key_path = make_ca(args.out, args.name, args.days, args.party)
    summary = summarize(load_inspectable(cert_path)[0])
    until = f"{summary.not_after:%Y-%m-%d}"
    print(f"wrote {cert_path} and {key_path} (CA {summary.subject}, until {until})")
    print(f"SHA-256 fingerprint: {summary.fingerprint}")
    print(
        f"give {cert_path.name} to the other party and read them this fingerprint over another "
        f"channel; keep {key_path.name} on this host only"
    )
    return 0


def _request(args: argparse.Namespace) -> int:
    from ppbn.parties.pki import make_request

    _check_out_folder(args.out)
    key_path, csr_path = make_request(args.out, args.role, args.party, args.host or [], args.force)
    print(f"wrote {key_path} (stays on this host) and {csr_path}")
    print(
        f"send {csr_path.name} to your CA: ppbn certs sign --ca CA_DIR --csr {csr_path.name} "
        f"--out {args.role}.crt; put the {args.role}.crt you get back and the CA's ca.crt "
        f"next to {key_path.name}"
    )
    return 0


def _sign(args: argparse.Namespace) -> int:
    from ppbn.parties.pki import sign_request

    summary, capped = sign_request(
        args.ca, args.csr, args.out, args.days, args.force, args.allow_other_party
    )
    cut = " (cut to the CA's own expiry)" if capped else ""
    print(
        f"signed {args.csr}: role {summary.role}, party {summary.party}, "
        f"hosts {', '.join(summary.hosts) or '(none: operators only connect)'}"
    )
    print(f"valid until {summary.not_after:%Y-%m-%d %H:%M} UTC{cut}; serial {summary.serial}")
    print(f"wrote {args.out} (SHA-256 {summary.fingerprint})")
    return 0


def _trust(args: argparse.Namespace) -> int:
    from ppbn.parties.pki import trust_ca

    found, added = trust_ca(args.tls_dir, args.ca, args.fingerprint)
    print(f"SHA-256 fingerprint: {found}")
    if args.fingerprint is None:
        print(
            "not pinned: compare it with the fingerprint the other party read out to you "
            "(or pass it with --fingerprint)"
        )
    else:
        print("matches the pinned fingerprint")
    where = Path(args.tls_dir) / "trusted.crt"
    print(f"added to {where}" if added else f"already trusted in {where}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from ppbn.parties.cert_summary import load_inspectable, summarize, summary_lines

    now = dt.datetime.now(dt.UTC)
    found = [(p, summarize(item)) for p in args.files for item in load_inspectable(Path(p))]
    if args.format == "json":
        print(json.dumps([{"file": path, **s.to_json(now)} for path, s in found], indent=2))
    else:
        print("\n".join(line for path, s in found for line in summary_lines(path, s, now)))
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "certs",
        help="per-party TLS certificates: ca, request, sign, trust, inspect",
        description="Each party runs its own CA. Keys are made where they are used and never "
        "copied: `request` on the daemon or operator host, `sign` on the CA host (it reads only "
        "ca.key), `trust` to accept the other party's CA after comparing its fingerprint.",
    )
    sub = parser.add_subparsers(dest="certs_command", metavar="ACTION", required=True)

    ca = sub.add_parser(
        "ca",
        help="make this party's CA (ca.crt, ca.key)",
        description="Write DIR/ca.crt and DIR/ca.key (mode 0600), an ECDSA P-256 CA. Refuses "
        "to replace an existing CA. Keep ca.key on the CA host; give ca.crt and its printed "
        "fingerprint to the other party.",
    )
    ca.add_argument("--out", required=True, metavar="DIR", help="folder for ca.crt and ca.key")
    ca.add_argument(
        "--name",
        help="CA common name; must differ from the other party's "
        "(default: ppbn CA, this host's name and a random suffix)",
    )
    ca.add_argument(
        "--days", type=int, default=CA_DAYS, help=f"lifetime in days (default {CA_DAYS})"
    )
    ca.add_argument(
        "--party",
        choices=("alice", "bob", "miner"),
        help="the party this CA belongs to (written into its certificate): other parties then "
        "accept from it only that party's daemon certificates; needed for `certs trust`. "
        "Leave out only for one CA shared by everybody",
    )
    ca.set_defaults(func=_ca)

    request = sub.add_parser(
        "request",
        help="make a key and a certificate request on the host that will use them",
        description="Write DIR/ROLE.key (mode 0600, never leaves this host) and DIR/ROLE.csr "
        "(send it to your CA). Daemons (alice, bob, miner) name every host name or IP address "
        "they are dialled at with --host; an operator names the party whose daemon it drives.",
    )
    request.add_argument(
        "--role",
        required=True,
        choices=(*DAEMON_ROLES, OPERATOR),
        help="the daemon role, or operator (for `ppbn learn`)",
    )
    request.add_argument(
        "--party", choices=DAEMON_ROLES, help="operator: the party whose daemon it may control"
    )
    request.add_argument(
        "--host",
        action="append",
        metavar="HOST",
        help="daemons: DNS name or IP address of this host (repeat)",
    )
    request.add_argument(
        "--out", required=True, metavar="DIR", help="folder for ROLE.key and ROLE.csr"
    )
    request.add_argument("--force", action="store_true", help="replace an existing key and request")
    request.set_defaults(func=_request)

    sign = sub.add_parser(
        "sign",
        help="check a certificate request and sign it with this party's CA",
        description="Check the request's signature, role, party and hosts, and write a "
        "certificate signed by CA_DIR/ca.key (the only key it reads): KeyUsage "
        "digitalSignature, serverAuth+clientAuth for daemons, clientAuth for operators.",
    )
    sign.add_argument("--ca", required=True, metavar="CA_DIR", help="folder with ca.crt and ca.key")
    sign.add_argument("--csr", required=True, metavar="FILE", help="the request (ROLE.csr)")
    sign.add_argument("--out", required=True, metavar="CRT", help="certificate file to write")
    sign.add_argument(
        "--days", type=int, default=LEAF_DAYS, help=f"lifetime in days (default {LEAF_DAYS})"
    )
    sign.add_argument("--force", action="store_true", help="replace an existing certificate file")
    sign.add_argument(
        "--allow-other-party",
        action="store_true",
        help="sign a request of another party than the CA's own (refused by default: the "
        "daemons accept a party's certificates only from that party's CA)",
    )
    sign.set_defaults(func=_sign)

    trust = sub.add_parser(
        "trust",
        help="accept another party's CA certificate (cross-trust)",
        description="Check that PEER_CA.crt is a CA certificate (and, with --fingerprint, "
        "that its SHA-256 matches the one the other party gave you out of band), then add it "
        "to DIR/trusted.crt. Prints the fingerprint either way.",
    )
    trust.add_argument("--tls-dir", required=True, metavar="DIR", help="this party's TLS folder")
    trust.add_argument(
        "--ca", required=True, metavar="PEER_CA.crt", help="the other party's ca.crt"
    )
    trust.add_argument(
        "--fingerprint",
        metavar="SHA256HEX",
        help="pinned SHA-256 of the certificate (hex, colons allowed)",
    )
    trust.set_defaults(func=_trust)

    inspect = sub.add_parser(
        "inspect",
        help="show what certificates (or requests) say and when they expire",
        description="Subject, role, party, hosts, issuer, serial, SHA-256 fingerprint, key "
        "usages, validity and days left, with a warning when expired or within "
        f"{EXPIRY_WARNING_DAYS} days of expiry. Bundles show every certificate.",
    )
    inspect.add_argument(
        "files", nargs="+", metavar="FILE", help="PEM certificate, bundle or request"
    )
    inspect.add_argument("--format", choices=("text", "json"), default="text")
    inspect.set_defaults(func=_inspect)
