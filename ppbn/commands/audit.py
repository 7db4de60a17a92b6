"""``ppbn audit show|verify|sign``: read, check and sign a daemon's audit log.

``verify`` exits 0 on an intact log, 1 with one line naming the first bad line on a broken
one, and 2 when the log, signature or certificate cannot be read (a user error). Its
message says what the check can vouch for: without a signed head the hash chain covers
every line but the last, and cannot show lines removed at the end. A log that ends in an
unfinished line (a write cut short) is told apart from an edited one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ppbn.errors import UserError

DETAIL_SKIP = ("seq", "time", "party", "event", "job", "prev")


def _load_private_key(path: str) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except OSError as exc:
        raise UserError(f"cannot read key {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise UserError(f"{path}: not an unencrypted PEM private key ({exc})") from None


def _load_cert_key(path: str) -> Any:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(Path(path).read_bytes()).public_key()
    except OSError as exc:
        raise UserError(f"cannot read certificate {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise UserError(f"{path}: not a PEM certificate") from None


def _sig_path(log: str) -> Path:
    from ppbn.parties.audit import SIG_SUFFIX

    return Path(log + SIG_SUFFIX)


def _sign(args: argparse.Namespace) -> int:
    from ppbn.parties.audit import sign_head

    key = _load_private_key(args.key)
    content = sign_head(args.log, key)
    target = _sig_path(args.log)
    temp = target.with_name(target.name + ".tmp")
    try:
        temp.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        temp.replace(target)
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    print(
        f"signed the head of {args.log} ({content['lines']} lines, party {content['party']}) into {target}"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ppbn.parties.audit import AuditLogBroken, AuditLogTorn, check_head, read_log, verify_log

    data = read_log(args.log)
    public_key = _load_cert_key(args.cert) if args.cert else None
    sig_path = _sig_path(args.log)
    sig: dict[str, Any] | None = None
    if sig_path.exists():
        try:
            sig = json.loads(sig_path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"cannot read {sig_path}: {exc.strerror or exc}") from None
        except (ValueError, RecursionError):
            raise UserError(f"{sig_path}: not a JSON head signature") from None
        if not isinstance(sig, dict):
            raise UserError(f"{sig_path}: not a JSON head signature")
    elif args.cert:
        raise UserError(
            f"--cert given but there is no signed head {sig_path} (run `ppbn audit sign`)"
        )
    try:
        state = verify_log(data)
        signed = check_head(state, data, sig, public_key) if sig is not None else ""
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
    print(
        f"audit log {args.log}: {state.lines} lines of party {state.party}; {_vouched(args.log, state.lines, sig, signed)}"
    )
    return 0


def _vouched(log: str, lines: int, sig: dict[str, Any] | None, signed: str) -> str:
    """What an intact chain (and a signed head, if any) vouches for: a chain alone covers
    every line but the last (each line's hash is in the next) and not lines removed at
    the end; a signed head covers the lines up to the one it names."""
    if sig is None:
        covered = f"vouching for lines 1-{lines - 1}" if lines > 1 else "vouching for no line"
        return (
            f"hash chain intact, {covered}; the log is unsigned, so a change to line {lines} or lines "
            f"removed at the end cannot be detected: sign its head with `ppbn audit sign {log} --key KEY` "
            f"and check it with `ppbn audit verify {log} --cert CERT`"
        )
    head = int(sig["lines"])  # check_head accepted it
    text = f"chain intact; {signed}"
    if head < lines:
        text += f"; lines {head + 1}-{lines} were added after it (line {lines} is vouched for by nothing): sign the head again"
    return text


def _show(args: argparse.Namespace) -> int:
    from ppbn.errors import printable
    from ppbn.parties.audit import read_log

    for number, raw in enumerate(read_log(args.log).split(b"\n"), start=1):
        if not raw:
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            entry = None
        if not isinstance(entry, dict):
            print(f"{'?':<27} {number:>6}  (line {number} is not a JSON event)")
            continue
        details = " ".join(
            f"{key}={_short(value)}"
            for key, value in entry.items()
            if key not in DETAIL_SKIP and value not in ("", None)
        )
        print(
            f"{printable(str(entry.get('time', '?')), 27):<27} {printable(str(entry.get('seq', '?')), 8):>6}  "
            f"{printable(str(entry.get('event', '?')), 16):<15} {printable(str(entry.get('job', '')) or '-', 64):<14} "
            f"{printable(details, 400)}"
        )
    return 0


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


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
