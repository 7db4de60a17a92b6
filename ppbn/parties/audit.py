"""The daemon's audit log: one hash-chained JSON line per job event, for an auditor.

An operator must be able to answer "what did we reveal, to whom, when" long after a job,
and show that nobody edited the answer. Each line is a JSON object with ``seq`` (1, 2,
...), ``time`` (UTC), ``party``, ``event``, ``job`` and the event's details, and ``prev``:
the SHA-256 (hex) of the previous line's bytes (without its newline), or, for line 1, of
``GENESIS`` naming the party. Changing, removing, inserting or reordering any line breaks
the chain at a line ``verify_log`` names; the head (last line's hash and the line count)
can be signed with the party's TLS key (``sign_head``), which also covers the last line
and truncation at the end.

What never goes in: data values, record ids, shares, keys. Ledger entries are logged by
kind, count, source and the (public) variable names they concern, never by value.

The file is opened with O_APPEND, written one whole line per ``write`` and fsync'd per
line; an exclusive ``flock`` keeps a second daemon from appending to the same file.
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import json
import os
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppbn.errors import UserError

FORMAT_VERSION = 1
GENESIS = "ppbn audit log v1 of party {party}"
SIG_SUFFIX = ".head.sig"
MAX_LINE_BYTES = (
    256 * 1024
)  # one event (job parameters are at most 64 KiB); a longer line in a log is refused as damaged
MAX_TEXT = 300  # reasons and errors are cut to this many characters
EVENTS = (
    "daemon_started",
    "daemon_stopped",
    "requested",
    "refused",
    "started",
    "revealed",
    "finished",
    "failed",
    "aborted",
    "cancelled",
    "resumed",
)


class AuditLogBroken(Exception):
    """The chain is broken; ``line`` is the 1-based line number at fault."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def genesis_hash(party: str) -> str:
    return hashlib.sha256(GENESIS.format(party=party).encode()).hexdigest()


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def clean_text(text: str, limit: int = MAX_TEXT) -> str:
    """Bounded text without control characters (the log is for people too)."""
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in str(text)[:limit])
    return cleaned + ("..." if len(str(text)) > limit else "")


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ChainState:
    """Where a verified log ends: the next line's ``prev`` and sequence number."""

    party: str
    lines: int
    head: str  # hash of the last line (the genesis hash for an empty log)


def verify_log(data: bytes, party: str | None = None) -> ChainState:
    """Check every line of a log's bytes; raise ``AuditLogBroken`` naming the first bad line.

    ``party``: the party the log must belong to (None: the party of line 1).
    """
    if not data:
        if party is None:
            raise AuditLogBroken(1, "the log is empty")
        return ChainState(party, 0, genesis_hash(party))
    lines = data.split(b"\n")
    if lines[-1] != b"":
        raise AuditLogBroken(
            len(lines), "is incomplete (no newline at the end: the log was cut off)"
        )
    lines.pop()
    head = genesis_hash(party) if party is not None else ""
    for number, raw in enumerate(lines, start=1):
        if len(raw) > MAX_LINE_BYTES:
            raise AuditLogBroken(number, f"is longer than {MAX_LINE_BYTES} bytes")
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            raise AuditLogBroken(number, "is not a JSON object (changed or cut)") from None
        if not isinstance(entry, dict):
            raise AuditLogBroken(number, "is not a JSON object (changed or cut)")
        if party is None:
            party = entry.get("party") if isinstance(entry.get("party"), str) else ""
            head = genesis_hash(party)
        if entry.get("party") != party:
            raise AuditLogBroken(
                number,
                f"belongs to party {clean_text(str(entry.get('party')), 40)!r}, not {party!r}",
            )
        if entry.get("seq") != number:
            raise AuditLogBroken(
                number,
                f"has sequence number {clean_text(str(entry.get('seq')), 20)}, expected {number} "
                "(lines were removed, inserted or reordered before it)",
            )
        if entry.get("prev") != head:
            what = "the genesis hash" if number == 1 else f"the hash of line {number - 1}"
            raise AuditLogBroken(
                number,
                f"its prev does not match {what} (line {number - 1 if number > 1 else 1} was changed, "
                "or lines were removed, inserted or reordered here)",
            )
        head = line_hash(raw)
    assert party is not None
    return ChainState(party, len(lines), head)


def read_log(path: str | Path) -> bytes:
    """A log's bytes, or a one-line UserError naming the file."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read audit log {path}: {exc.strerror or exc}") from None


def ledger_summary(ledger: Any) -> list[dict[str, Any]]:
    """What a job's ledger holds, by kind: count, sources, public variable names; no values."""
    counts: Counter[str] = Counter()
    sources: dict[str, set[str]] = {}
    variables: dict[str, set[str]] = {}
    for entry in ledger.entries:
        counts[entry.kind] += 1
        sources.setdefault(entry.kind, set()).add(clean_text(entry.source, 80))
        value = entry.value
        if isinstance(value, dict):
            named = value.get("variables", [value.get("variable")])
            if isinstance(named, list):
                variables.setdefault(entry.kind, set()).update(
                    clean_text(v, 64) for v in named if isinstance(v, str)
                )
    summary = []
    for kind in sorted(counts):
        item: dict[str, Any] = {
            "class": kind,
            "count": counts[kind],
            "sources": sorted(sources[kind])[:10],
        }
        if variables.get(kind):
            item["variables"] = sorted(variables[kind])[:200]
        summary.append(item)
    return summary


class AuditLog:
    """An open, verified audit log of one party; ``event`` appends one chained line.

    Thread-safe: the daemon's RPC and job threads append concurrently.
    """

    def __init__(self, path: str | Path, party: str) -> None:
        self.path = Path(path)
        self.party = party
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UserError(f"cannot open audit log {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise UserError(
                f"audit log {self.path} is in use by another process (another daemon?)"
            ) from None
        try:
            state = verify_log(read_log(self.path), party)
        except AuditLogBroken as exc:
            self.close()
            raise UserError(
                f"audit log {self.path} is broken at {exc}; keep it for the auditor and start "
                "with another --audit-log"
            ) from None
        except UserError:
            self.close()
            raise
        self._seq, self._head = state.lines, state.head

    @property
    def lines(self) -> int:
        return self._seq

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)  # also releases the flock
                self._fd = -1

    def event(self, event: str, job: str = "", **details: Any) -> None:
        """Append one event line and fsync it; raises OSError if the disk refuses it."""
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        with self._lock:
            if self._fd < 0:
                raise OSError(f"audit log {self.path} is closed")
            entry = {
                "seq": self._seq + 1,
                "time": _utc_now(),
                "party": self.party,
                "event": event,
                "job": job,
                **details,
                "prev": self._head,
            }
            line = json.dumps(entry, separators=(",", ":"), ensure_ascii=True, default=str).encode()
            if len(line) > MAX_LINE_BYTES:
                raise ValueError(f"audit event {event} is over {MAX_LINE_BYTES} bytes")
            _write_all(self._fd, line + b"\n")
            os.fsync(self._fd)
            self._seq, self._head = self._seq + 1, line_hash(line)

    # -- the job events, with the fields an auditor reads --------------------------------
    def requested(self, job: str, kind: str, by: str, params: dict[str, Any]) -> None:
        self.event("requested", job, kind=kind, by=clean_text(by, 160), params=params)

    def refused(
        self,
        job: str,
        kind: str,
        by: str,
        code: str,
        reason: str,
        parameter: str = "",
        refused_by: str = "",
    ) -> None:
        """A request refused before it ran: by this daemon or (``refused_by``) by the peer."""
        self.event(
            "refused", clean_text(job, 64), kind=clean_text(kind, 32), by=clean_text(by, 160),
            refused_by=clean_text(refused_by or self.party, 16), code=code,
            parameter=clean_text(parameter, 64), reason=clean_text(reason),
        )  # fmt: skip

    def started(self, job: str, kind: str, peers: list[str]) -> None:
        self.event("started", job, kind=kind, peers=peers)

    def revealed(self, job: str, ledger: Any) -> None:
        """One line per ledger class the job filled: what this party learned in the clear."""
        for item in ledger_summary(ledger):
            self.event("revealed", job, **item)

    def ended(self, job: str, event: str, code: str, error: str, figures: dict[str, Any]) -> None:
        """``finished``, ``failed``, ``aborted`` or ``cancelled``, with the abort code."""
        self.event(event, job, code=code, error=clean_text(error), **figures)

    def resumed(self, job: str, kind: str, by: str, checkpoint: str, **details: Any) -> None:
        """A job continued from a checkpoint (called by the resume path)."""
        self.event(
            "resumed",
            job,
            kind=kind,
            by=clean_text(by, 160),
            checkpoint=clean_text(checkpoint, 160),
            **details,
        )


def _write_all(fd: int, data: bytes) -> None:
    """One ``write`` normally; a short write (disk nearly full) continues, at most len(data) times."""
    view = memoryview(data)
    for _ in range(len(data)):
        written = os.write(fd, view)
        view = view[written:]
        if not view:
            return
    raise OSError(f"could not write {len(data)} bytes to the audit log")


# -- the signed head ---------------------------------------------------------------------
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
        "signed_at": _utc_now(),
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
            1, f"the signed head is of party {clean_text(party, 40)!r}, the log of {state.party!r}"
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
