"""Checking and signing a daemon's audit log after the fact (``ppbn audit``), for an auditor.

The head of a log (its last line's hash and the line count) is signed with the party's TLS
key into ``LOG.head.sig`` (``sign_head``); ``verify_audit_log`` checks the hash chain and,
when there is a signed head, the head against it, and says what the check vouches for:
without a signed head the chain covers every line but the last, and cannot show lines
removed at the end. ``event_lines`` lists the log for a person.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ppbn.errors import UserError, printable
from ppbn.parties.audit import (
    FORMAT_VERSION,
    AuditLogBroken,
    ChainState,
    line_hash,
    read_log,
    utc_now,
    verify_log,
)
from ppbn.parties.cheating_evidence import cheating_records

SIG_SUFFIX = ".head.sig"
DETAIL_SKIP = ("seq", "time", "party", "event", "job", "prev")  # shown in their own columns


def _head_message(party: str, lines: int, head: str) -> bytes:
    return (
        f"ppbn audit head v{FORMAT_VERSION}\nparty {party}\nlines {lines}\nhead {head}\n".encode()
    )


def key_fingerprint(public_key: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def _sign(private_key: Any, message: bytes) -> tuple[str, bytes]:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

    if isinstance(private_key, ec.EllipticCurvePrivateKey):
        return "ecdsa-sha256", private_key.sign(message, ec.ECDSA(hashes.SHA256()))
    if isinstance(private_key, rsa.RSAPrivateKey):
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.MAX_LENGTH)
        return "rsa-pss-sha256", private_key.sign(message, pss, hashes.SHA256())
    if isinstance(private_key, ed25519.Ed25519PrivateKey):
        return "ed25519", private_key.sign(message)
    raise UserError(
        f"cannot sign with a {type(private_key).__name__} key: use the party's EC, RSA or Ed25519 key"
    )


def _check_signature(public_key: Any, algorithm: str, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

    try:
        if algorithm == "ecdsa-sha256" and isinstance(public_key, ec.EllipticCurvePublicKey):
            public_key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
        elif algorithm == "rsa-pss-sha256" and isinstance(public_key, rsa.RSAPublicKey):
            pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.AUTO)
            public_key.verify(signature, message, pss, hashes.SHA256())
        elif algorithm == "ed25519" and isinstance(public_key, ed25519.Ed25519PublicKey):
            public_key.verify(signature, message)
        else:
            return False
    except InvalidSignature:
        return False
    return True


def sign_head(log_path: str | Path, private_key: Any) -> dict[str, Any]:
    """Sign the verified head of a log; returns the content of ``LOG.head.sig``."""
    try:
        state = verify_log(read_log(log_path))
    except AuditLogBroken as exc:
        raise UserError(f"audit log {log_path} is broken at {exc}: not signing it") from None
    algorithm, signature = _sign(private_key, _head_message(state.party, state.lines, state.head))
    return {
        "format": f"ppbn audit head v{FORMAT_VERSION}",
        "party": state.party,
        "lines": state.lines,
        "head": state.head,
        "signed_at": utc_now(),
        "algorithm": algorithm,
        "key_sha256": key_fingerprint(private_key.public_key()),
        "signature": base64.b64encode(signature).decode(),
    }


def check_head(state: ChainState, log: bytes, sig: dict[str, Any], public_key: Any | None) -> str:
    """Check a signed head against a verified log; raises AuditLogBroken, returns a summary.

    Without ``public_key`` only the agreement of head and log is checked (and said so).
    """
    try:
        lines, head, party = int(sig["lines"]), str(sig["head"]), str(sig["party"])
        algorithm, signature = (
            str(sig["algorithm"]),
            base64.b64decode(sig["signature"], validate=True),
        )
    except (KeyError, TypeError, ValueError):
        raise AuditLogBroken(max(state.lines, 1), "the head signature file is malformed") from None
    if party != state.party:
        raise AuditLogBroken(
            1, f"the signed head is of party {printable(party, 40)!r}, the log of {state.party!r}"
        )
    if lines < 1 or lines > state.lines:
        raise AuditLogBroken(
            max(state.lines, 1),
            f"the log has {state.lines} lines but its signed head covers {lines}: lines were removed at the end",
        )
    signed_line = log.split(b"\n")[lines - 1]
    if line_hash(signed_line) != head:
        raise AuditLogBroken(lines, "differs from the signed head (the line was changed)")
    if public_key is None:
        return f"signed head covers lines 1-{lines} (signature not checked: give --cert)"
    if key_fingerprint(public_key) != sig.get("key_sha256"):
        raise AuditLogBroken(lines, "the head was signed with another key than the certificate's")
    if not _check_signature(public_key, algorithm, signature, _head_message(party, lines, head)):
        raise AuditLogBroken(lines, "the head signature is not valid for the certificate's key")
    return f"signed head covers lines 1-{lines}, signature valid"


def signature_path(log: str) -> Path:
    """Where the signed head of ``log`` lives."""
    return Path(log + SIG_SUFFIX)


def load_private_key(path: str) -> Any:
    """The party's unencrypted PEM private key, or one UserError naming the file."""
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except OSError as exc:
        raise UserError(f"cannot read key {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise UserError(f"{path}: not an unencrypted PEM private key ({exc})") from None


def load_cert_key(path: str) -> Any:
    """The public key of a PEM certificate, or one UserError naming the file."""
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(Path(path).read_bytes()).public_key()
    except OSError as exc:
        raise UserError(f"cannot read certificate {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise UserError(f"{path}: not a PEM certificate") from None


def write_head_signature(log: str, key_path: str) -> tuple[dict[str, Any], Path]:
    """Sign the head of ``log`` with the key in ``key_path`` into ``LOG.head.sig`` (through
    a temporary file and a rename); the signature's content and where it was written."""
    content = sign_head(log, load_private_key(key_path))
    target = signature_path(log)
    temp = target.with_name(target.name + ".tmp")
    try:
        temp.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        temp.replace(target)
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    return content, target


def read_head_signature(log: str, cert_given: bool) -> dict[str, Any] | None:
    """The signed head beside ``log``, None when there is none (refused when a certificate
    was given to check it with); one UserError when it cannot be read."""
    sig_path = signature_path(log)
    if not sig_path.exists():
        if cert_given:
            raise UserError(
                f"--cert given but there is no signed head {sig_path} (run `ppbn audit sign`)"
            )
        return None
    try:
        sig = json.loads(sig_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read {sig_path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError):
        raise UserError(f"{sig_path}: not a JSON head signature") from None
    if not isinstance(sig, dict):
        raise UserError(f"{sig_path}: not a JSON head signature")
    return sig


def verify_audit_log(log: str, cert: str | None = None) -> tuple[ChainState, str, list[str]]:
    """Check the chain of ``log`` and its signed head, if any (its signature with ``cert``):
    the chain's end, what the check vouches for, and one line per ``cheating`` event
    (re-checked where its evidence allows, ``cheating_evidence``). Raises ``AuditLogTorn`` or
    ``AuditLogBroken`` on a bad log, UserError when an input cannot be read."""
    data = read_log(log)
    public_key = load_cert_key(cert) if cert else None
    sig = read_head_signature(log, bool(cert))
    state = verify_log(data)
    signed = check_head(state, data, sig, public_key) if sig is not None else ""
    caught = [record.describe() for record in cheating_records(data)]
    return state, vouched(log, state.lines, sig, signed), caught


def vouched(log: str, lines: int, sig: dict[str, Any] | None, signed: str) -> str:
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


def event_lines(log: str) -> Iterator[str]:
    """The log for a person, one line per event: time, seq, event, job, details (values
    cut short, every field made printable); a line that is no JSON event says so."""
    for number, raw in enumerate(read_log(log).split(b"\n"), start=1):
        if not raw:
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            entry = None
        if not isinstance(entry, dict):
            yield f"{'?':<27} {number:>6}  (line {number} is not a JSON event)"
            continue
        details = " ".join(
            f"{key}={_short(value)}"
            for key, value in entry.items()
            if key not in DETAIL_SKIP and value not in ("", None)
        )
        yield (
            f"{printable(str(entry.get('time', '?')), 27):<27} {printable(str(entry.get('seq', '?')), 8):>6}  "
            f"{printable(str(entry.get('event', '?')), 16):<15} {printable(str(entry.get('job', '')) or '-', 64):<14} "
            f"{printable(details, 400)}"
        )


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."
