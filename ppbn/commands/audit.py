"""``ppbn audit show|verify|sign``: read, check and sign a daemon's audit log.

``verify`` exits 0 on an intact log, 1 with one line naming the first bad line on a broken
one, and 2 when the log, signature or certificate cannot be read (a user error). Its
message says what the check can vouch for: without a signed head the hash chain covers
every line but the last, and cannot show lines removed at the end. A log that ends in an
unfinished line (a write cut short) is told apart from an edited one.
"""

from __future__ import annotations

import argparse
import sys


def _sign(args: argparse.Namespace) -> int:
    from ppbn.parties.audit_check import write_head_signature

    content, target = write_head_signature(args.log, args.key)
    print(
        f"signed the head of {args.log} ({content['lines']} lines, party {content['party']}) into {target}"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ppbn.parties.audit import AuditLogBroken, AuditLogTorn
    from ppbn.parties.audit_check import verify_audit_log

    try:
        state, vouched, caught = verify_audit_log(args.log, args.cert)
    except AuditLogTorn as exc:
        print(
            f"ppbn: audit log {args.log} ends with a torn line: {exc}; the daemon sets it aside "
            f"as {args.log}.torn-N when it next starts",
            file=sys.stderr,
        )
        return 1
    except AuditLogBroken as exc:
        print(f"ppbn: audit log {args.log} is broken (changed or damaged): {exc}", file=sys.stderr)
        return 1
    print(f"audit log {args.log}: {state.lines} lines of party {state.party}; {vouched}")
    if caught:
        print(f"{len(caught)} cheating event(s) (a peer failed a check of the malicious level):")
        for line in caught:
            print(f"  {line}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from ppbn.parties.audit_check import event_lines

    for line in event_lines(args.log):
        print(line)
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("audit", help="show, verify and sign a daemon's audit log")
    sub = parser.add_subparsers(dest="audit_command", metavar="ACTION", required=True)
    show = sub.add_parser(
        "show",
        help="print the log for a person: time, seq, event, job, details (one line per event)",
    )
    show.add_argument(
        "log", metavar="LOG", help="the audit log (default of a daemon: OUT/audit.log)"
    )
    show.set_defaults(func=_show)
    verify = sub.add_parser(
        "verify",
        help="check the hash chain (and the signed head, if LOG.head.sig exists)",
        description="Check every line's sequence number and hash link. Exit 0 if intact, 1 "
        "naming the first bad line if changed, removed, inserted, reordered or cut, 2 if "
        "the input cannot be read. A changed last line or lines removed at the end are "
        "detected only against a signed head (ppbn audit sign).",
    )
    verify.add_argument("log", metavar="LOG")
    verify.add_argument(
        "--cert", help="the party's certificate (e.g. tls/alice.crt): check the head signature"
    )
    verify.set_defaults(func=_verify)
    sign = sub.add_parser(
        "sign", help="sign the log's head (last line's hash and line count) into LOG.head.sig"
    )
    sign.add_argument("log", metavar="LOG")
    sign.add_argument("--key", required=True, help="the party's private key, e.g. tls/alice.key")
    sign.set_defaults(func=_sign)
