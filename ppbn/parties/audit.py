"""The daemon's audit log: one hash-chained JSON line per job event, for an auditor.

An operator must be able to answer "what did we reveal, to whom, when" long after a job,
and show that nobody edited the answer. Each line is a JSON object with ``seq`` (1, 2,
...), ``time`` (UTC), ``party``, ``event``, ``job`` and the event's details, and ``prev``:
the SHA-256 (hex) of the previous line's bytes (without its newline), or, for line 1, of
``GENESIS`` naming the party. Changing, removing, inserting or reordering any line breaks
the chain at a line ``verify_log`` names; the head (last line's hash and the line count)
can be signed with the party's TLS key (``ppbn.parties.audit_check.sign_head``), which also
covers the last line and truncation at the end.

What never goes in: data values, record ids, shares, keys. Ledger entries are logged by
kind, count, source and the (public) variable names they concern, never by value.

The file is opened with O_APPEND, written one whole line per ``write`` and fsync'd per
line; an exclusive ``flock`` keeps a second daemon from appending to the same file. A
write the disk refuses (full, I/O error) is cut back to the previous length, so the log
never keeps half a line; a torn last line left by a crash (a valid start of the next
event, without its newline) is told apart from an edit and set aside at the next start.

A peer's refused requests are logged at most ``REFUSED_PER_WINDOW`` per source and
``REFUSED_WINDOW_S``; the rest are counted into one ``refused_summary`` line per window,
so a peer cannot grow the log faster than a fixed rate by sending requests it knows fail.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppbn.errors import UserError, printable

FORMAT_VERSION = 1
GENESIS = "ppbn audit log v1 of party {party}"
MAX_LINE_BYTES = (
    256 * 1024
)  # one event (job parameters are at most 64 KiB); a longer line in a log is refused as damaged
MAX_TEXT = 300  # reasons and errors are cut to this many characters
REFUSED_PER_WINDOW = 10  # refused requests logged one line each, per source and window
REFUSED_WINDOW_S = 60.0  # beyond that, one refused_summary line per source and window
TORN_SUFFIX = ".torn-"  # a torn last line is set aside as LOG.torn-1, LOG.torn-2, ...
# every event line has these; a line without one was changed (a key renamed or removed)
REQUIRED_FIELDS = ("seq", "time", "party", "event", "job", "prev")
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
    "refused_summary",
    "cheating",
)


class AuditLogBroken(Exception):
    """The chain is broken; ``line`` is the 1-based line number at fault."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class AuditLogTorn(AuditLogBroken):
    """The chain is intact but the log ends with an unfinished line: a write cut short (a
    crash or a full disk), not an edit. ``state`` is the intact chain before it, which is
    ``intact_bytes`` long."""

    def __init__(self, line: int, state: ChainState, intact_bytes: int) -> None:
        super().__init__(
            line,
            "is incomplete: a write cut short (by a crash or a full disk), not an edit; "
            + (f"lines 1-{line - 1} are intact" if line > 1 else "it is the only line"),
        )
        self.state = state
        self.intact_bytes = intact_bytes


def genesis_hash(party: str) -> str:
    return hashlib.sha256(GENESIS.format(party=party).encode()).hexdigest()


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ChainState:
    """Where a verified log ends: the next line's ``prev`` and sequence number."""

    party: str
    lines: int
    head: str  # hash of the last line (the genesis hash for an empty log)


def verify_log(data: bytes, party: str | None = None) -> ChainState:
    """Check every line of a log's bytes; raise ``AuditLogBroken`` naming the first bad line.

    ``party``: the party the log must belong to (None: the party of line 1). A log whose
    complete lines are intact but whose last line is unfinished raises ``AuditLogTorn``
    (a crash remnant) when that line is a valid start of the next event, and the plain
    ``AuditLogBroken`` otherwise (an unfinished line that no write of ours could leave).
    """
    if not data:
        if party is None:
            raise AuditLogBroken(1, "the log is empty")
        return ChainState(party, 0, genesis_hash(party))
    complete, newline, tail = data.rpartition(b"\n")
    lines = complete.split(b"\n") if newline else []
    state = _verify_lines(lines, party)
    if tail:
        if _is_torn_start(tail, state.lines + 1, state.party):
            raise AuditLogTorn(state.lines + 1, state, len(complete) + len(newline))
        raise AuditLogBroken(
            state.lines + 1,
            "is incomplete (no newline at the end) and is not the start of an event line: "
            "it was changed or damaged",
        )
    return state


def _verify_lines(lines: list[bytes], party: str | None) -> ChainState:
    """The chain over complete lines (without their newlines)."""
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
        missing = [name for name in REQUIRED_FIELDS if name not in entry]
        if missing:
            raise AuditLogBroken(
                number,
                f"has no {', '.join(repr(m) for m in missing)} field (a key was renamed or removed: "
                "the line was changed)",
            )
        if party is None:
            party = entry["party"] if isinstance(entry["party"], str) else ""
            head = genesis_hash(party)
        if entry["party"] != party:
            raise AuditLogBroken(
                number,
                f"belongs to party {_shown(entry['party'])}, not {party!r}"
                " (the line was changed, or it is another party's log)",
            )
        if entry["seq"] != number:
            raise AuditLogBroken(
                number,
                f"has sequence number {printable(str(entry['seq']), 20)}, expected {number} "
                "(lines were removed, inserted or reordered before it)",
            )
        if entry["prev"] != head:
            what = "the genesis hash" if number == 1 else f"the hash of line {number - 1}"
            raise AuditLogBroken(
                number,
                f"its prev does not match {what} (line {number - 1 if number > 1 else 1} was changed, "
                "or lines were removed, inserted or reordered here)",
            )
        head = line_hash(raw)
    party = party or ""
    return ChainState(party, len(lines), head or genesis_hash(party))


def _shown(value: Any) -> str:
    """A field's value for a message: a string quoted as Python does, anything else as JSON."""
    return (
        repr(printable(value, 40)) if isinstance(value, str) else printable(json.dumps(value), 40)
    )


_TIME_CHARS = frozenset("0123456789-:.TZ")


def _is_torn_start(tail: bytes, seq: int, party: str) -> bool:
    """Whether ``tail`` is what an interrupted ``AuditLog.event`` leaves: a prefix of the
    next line, which starts ``{"seq":SEQ,"time":"<27 chars>","party":PARTY,"event":``
    (the field order ``event`` writes), in printable ASCII, with no newline."""
    if len(tail) > MAX_LINE_BYTES or not all(32 <= b < 127 for b in tail):
        return False
    text = tail.decode("ascii")
    template = f'{{"seq":{seq},"time":"' + "\0" * 27 + '","party":'
    if party:
        template += json.dumps(party) + ',"event":"'
    for char, expected in zip(text, template, strict=False):
        if char != expected and not (expected == "\0" and char in _TIME_CHARS):
            return False
    return True


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
        sources.setdefault(entry.kind, set()).add(printable(entry.source, 80))
        value = entry.value
        if isinstance(value, dict):
            named = value.get("variables", [value.get("variable")])
            if isinstance(named, list):
                variables.setdefault(entry.kind, set()).update(
                    printable(v, 64) for v in named if isinstance(v, str)
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


@dataclass
class _RefusedWindow:
    """Refused requests from one source in the current window: how many were logged, and
    what was only counted (for the window's summary line)."""

    start: float  # monotonic time the window opened
    logged: int = 0
    counted: int = 0
    first: str = ""  # UTC time of the first counted request
    last: str = ""
    codes: Counter[str] = field(default_factory=Counter)


class AuditLog:
    """An open, verified audit log of one party; ``event`` appends one chained line.

    Thread-safe: the daemon's RPC and job threads append concurrently. ``log`` receives
    the warning when a torn last line is set aside at opening.
    """

    def __init__(
        self,
        path: str | Path,
        party: str,
        log: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` times the windows of refused requests (a test passes its own)."""
        self.path = Path(path)
        self.party = party
        self._lock = threading.Lock()
        self._clock = clock
        self._refused: dict[str, _RefusedWindow] = {}
        self._cut_back_to: int | None = None  # length to restore before the next append
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
            data = read_log(self.path)
            state = verify_log(data, party)
        except AuditLogTorn as torn:
            state = self._set_aside_torn_tail(data, torn, log or logging.getLogger("ppbn.audit"))
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

    def _set_aside_torn_tail(
        self, data: bytes, torn: AuditLogTorn, log: logging.Logger
    ) -> ChainState:
        """Move the unfinished last line into ``LOG.torn-N`` and cut the log back to its
        intact lines, so the chain goes on where it really ended; the bytes are kept for
        the auditor, not dropped."""
        tail = data[torn.intact_bytes :]
        try:
            aside = _write_new_file(self.path, TORN_SUFFIX, tail)
            os.ftruncate(self._fd, torn.intact_bytes)
            os.fsync(self._fd)
        except OSError as exc:
            self.close()
            raise UserError(
                f"audit log {self.path} ends with an unfinished line that cannot be set aside "
                f"({exc.strerror or exc}): free space on its disk and start again"
            ) from None
        log.warning(
            "audit log %s ended with an unfinished line %d (%d bytes: a write cut short by a crash "
            "or a full disk, not an edit): set aside as %s; lines 1-%d are intact and the log "
            "goes on from there",
            self.path,
            torn.line,
            len(tail),
            aside,
            torn.state.lines,
        )
        return torn.state

    @property
    def lines(self) -> int:
        return self._seq

    def close(self) -> None:
        """Write the pending summaries of refused requests (if the disk lets us), then close."""
        with self._lock:
            if self._fd < 0:
                return
            with contextlib.suppress(OSError, ValueError):  # the daemon logged why it cannot write
                self._write_summaries(None)
            os.close(self._fd)  # also releases the flock
            self._fd = -1

    def event(self, event: str, job: str = "", **details: Any) -> None:
        """Append one event line and fsync it; raises OSError if the disk refuses it (the
        log is then cut back to where it was: no half line stays)."""
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        with self._lock:
            self._write_summaries(None if event == "daemon_stopped" else self._clock())
            self._append(event, job, details)

    def _append(self, event: str, job: str, details: dict[str, Any]) -> None:
        """Append one line; the caller holds the lock."""
        if self._fd < 0:
            raise OSError(f"audit log {self.path} is closed")
        if self._cut_back_to is not None:  # an earlier failed write could not be undone then
            os.ftruncate(self._fd, self._cut_back_to)
            self._cut_back_to = None
        entry = {
            "seq": self._seq + 1,
            "time": utc_now(),
            "party": self.party,
            "event": event,
            "job": job,
            **details,
            "prev": self._head,
        }
        line = json.dumps(entry, separators=(",", ":"), ensure_ascii=True, default=str).encode()
        if len(line) > MAX_LINE_BYTES:
            raise ValueError(f"audit event {event} is over {MAX_LINE_BYTES} bytes")
        length = os.fstat(self._fd).st_size
        try:
            write_all(self._fd, line + b"\n")
            os.fsync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, length)
            except OSError:
                self._cut_back_to = length  # retried before the next line is written
            raise
        self._seq, self._head = self._seq + 1, line_hash(line)

    def _write_summaries(self, now: float | None) -> None:
        """One ``refused_summary`` line per source whose window is over (``now`` None: every
        source with counted requests); the caller holds the lock."""
        for source, window in list(self._refused.items()):
            if now is not None and now - window.start < REFUSED_WINDOW_S:
                continue
            if window.counted:
                self._append(
                    "refused_summary",
                    "",
                    dict(
                        source=source,
                        count=window.counted,
                        first=window.first,
                        last=window.last,
                        codes=dict(sorted(window.codes.items())),
                        note=f"{window.counted} more refused requests from {source} between "
                        f"{window.first} and {window.last}, not logged one by one",
                    ),
                )
            del self._refused[source]

    # -- the job events, with the fields an auditor reads --------------------------------
    def requested(self, job: str, kind: str, by: str, params: dict[str, Any]) -> None:
        self.event("requested", job, kind=kind, by=printable(by, 160), params=params)

    def refused(
        self,
        job: str,
        kind: str,
        by: str,
        code: str,
        reason: str,
        parameter: str = "",
        refused_by: str = "",
        source: str = "",
    ) -> None:
        """A request refused before it ran: by this daemon or (``refused_by``) by the peer.

        ``source`` is who sent it, as authenticated (the peer's certified role, the
        operator): not text the sender chose, so a peer cannot escape its bound by varying
        the initiator it claims. Beyond ``REFUSED_PER_WINDOW`` lines per source and window
        the request is only counted, for the window's ``refused_summary`` line.
        """
        key = printable(source or by, 160)
        with self._lock:
            now = self._clock()
            self._write_summaries(now)
            window = self._refused.setdefault(key, _RefusedWindow(now))
            if window.logged >= REFUSED_PER_WINDOW:
                stamp = utc_now()
                window.first = window.first or stamp
                window.last = stamp
                window.counted += 1
                window.codes[printable(code, 32)] += 1
                return
            self._append(
                "refused",
                printable(job, 64),
                dict(
                    kind=printable(kind, 32),
                    by=printable(by, 160),
                    refused_by=printable(refused_by or self.party, 16),
                    code=code,
                    parameter=printable(parameter, 64),
                    reason=printable(reason, MAX_TEXT),
                ),
            )
            window.logged += 1

    def started(self, job: str, kind: str, peers: list[str], security: str) -> None:
        self.event("started", job, kind=kind, peers=peers, security=security)

    def cheating(
        self, job: str, peers: list[str], check: str, detail: str, evidence: dict[str, Any]
    ) -> None:
        """A peer failed a check of the ``malicious`` level: which check, what it found
        (public values and digests only; ``ppbn.protocols.security.CheatingDetected``)."""
        self.event(
            "cheating",
            job,
            peers=peers,
            check=printable(check, 64),
            detail=printable(detail, MAX_TEXT),
            evidence={printable(k, 64): _evidence_value(v) for k, v in evidence.items()},
        )

    def revealed(self, job: str, ledger: Any) -> None:
        """One line per ledger class the job filled: what this party learned in the clear."""
        for item in ledger_summary(ledger):
            self.event("revealed", job, **item)

    def ended(self, job: str, event: str, code: str, error: str, figures: dict[str, Any]) -> None:
        """``finished``, ``failed``, ``aborted`` or ``cancelled``, with the abort code."""
        self.event(event, job, code=code, error=printable(error, MAX_TEXT), **figures)

    def resumed(self, job: str, kind: str, by: str, checkpoint: str, **details: Any) -> None:
        """A job continued from a checkpoint (called by the resume path)."""
        self.event(
            "resumed",
            job,
            kind=kind,
            by=printable(by, 160),
            checkpoint=printable(checkpoint, 160),
            **details,
        )


MAX_EVIDENCE_HEX = 4096  # a public value of a check (a modulus, a challenge) in hex digits


def _evidence_value(value: Any) -> Any:
    """An evidence field as the log keeps it: an integer as is, a hex string of a public
    value up to ``MAX_EVIDENCE_HEX`` digits, anything else as bounded text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and len(value) <= MAX_EVIDENCE_HEX and _is_hex(value):
        return value
    return printable(value, MAX_TEXT)


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _write_new_file(path: Path, suffix: str, data: bytes) -> Path:
    """Write ``data`` into the first free ``PATH<suffix>N`` (N = 1, 2, ...), fsync'd; a
    failed write leaves no such file."""
    for number in range(1, 100_000):
        target = path.with_name(f"{path.name}{suffix}{number}")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError:
            os.close(fd)
            target.unlink(missing_ok=True)
            raise
        os.close(fd)
        return target
    raise OSError(f"no free name {path.name}{suffix}N beside it")


def write_all(fd: int, data: bytes) -> None:
    """One ``write`` normally; a short write (disk nearly full) continues, at most len(data) times."""
    view = memoryview(data)
    for _ in range(len(data)):
        written = os.write(fd, view)
        view = view[written:]
        if not view:
            return
    raise OSError(f"could not write {len(data)} bytes to the audit log")
