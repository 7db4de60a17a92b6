"""Do both parties hold the same records? A keyed digest of the record ids, per job.

The secure path aligns rows by record id, so a job must stop at once if the two id sets
differ. An unsalted hash of the ids would be a dictionary oracle (anyone holding it can
test guessed id lists offline, across jobs); here the digest is an HMAC-SHA256 under a
key that exists for one job only, derived from the job id and a fresh 16-byte nonce of
every daemon of the job (``job_key``). Each party sends its digest and compares the
peer's in constant time; equal digests say the sets are equal, unequal ones say only
"they differ", never which ids.

With the data miner (PRAM setup II) the miner holds no ids: it sends each party every
nonce of the job, each party checks that its own nonce is among them and returns its
digest, and the miner compares the two digests.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

from ppbn.protocols.channel import Channel, ProtocolError

NONCE_BYTES = 16
DIGEST_BYTES = 32
_DOMAIN = b"ppbn record ids v2"
ITER_BLOCK = 1 << 16


class RecordIds(Sequence[str]):
    """A party's record ids in sorted order, one UTF-8 byte string per record in a numpy
    ``S`` array: ten million ids take ~100 MB instead of ~700 MB of Python strings. The
    byte order of UTF-8 is the code-point order of the strings, so the array's sort is
    ``sorted``'s; ids must not contain NUL (numpy strips trailing NUL bytes)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: np.ndarray) -> None:
        self._raw = raw

    @classmethod
    def from_strings(cls, ids: Iterable[str]) -> RecordIds:
        raw = np.array([i.encode("utf-8") for i in ids], dtype=bytes)
        return cls(np.sort(raw, kind="stable"))

    def __len__(self) -> int:
        return int(self._raw.shape[0])

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> RecordIds: ...

    def __getitem__(self, index: int | slice) -> str | RecordIds:
        if isinstance(index, slice):
            return RecordIds(self._raw[index])
        return bytes(self._raw[index]).decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        for value in self.encoded():
            yield value.decode("utf-8")

    def encoded(self) -> Iterator[bytes]:
        """The ids as UTF-8 bytes, in sorted order, converted a block at a time (a list of
        ten million bytes objects would cost ~500 MB)."""
        for start in range(0, len(self), ITER_BLOCK):
            yield from self._raw[start : start + ITER_BLOCK].tolist()

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, RecordIds):
            return len(self) == len(other) and bool(np.array_equal(self._raw, other._raw))
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RecordIds({len(self)} ids)"


class RecordsMismatch(ProtocolError):
    """The parties' record ids differ (their digests under the job key are unequal)."""


def job_key(job_id: str, nonces: Sequence[bytes]) -> bytes:
    """The per-job HMAC key: SHA-256 over the domain, the job id and every nonce, length-prefixed."""
    h = hashlib.sha256(_DOMAIN)
    for part in (job_id.encode("utf-8"), *nonces):
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return h.digest()


def records_digest(key: bytes, ids: Sequence[str]) -> bytes:
    """HMAC-SHA256 of the sorted ids, each length-prefixed (no two id lists collide)."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    ordered = (
        ids.encoded() if isinstance(ids, RecordIds) else (i.encode("utf-8") for i in sorted(ids))
    )
    for encoded in ordered:
        mac.update(len(encoded).to_bytes(4, "big"))
        mac.update(encoded)
    return mac.digest()


# what to do when the parties' record ids differ (docs/protocols/psi.md)
ALIGN_HINT = "; to learn on the records both hold, start both daemons with --align psi"


def check_same_records(
    channel: Channel, key: bytes, ids: Sequence[str], me: str, peer: str
) -> None:
    """Two parties: swap digests; ProtocolError unless the peer holds the same ids."""
    channel.send("job.records", records_digest(key, ids))
    theirs = channel.recv("job.records", max_bytes=DIGEST_BYTES)
    if not hmac.compare_digest(theirs, records_digest(key, ids)):
        raise RecordsMismatch(
            f"{me} and {peer} hold the same number of records but different record ids{ALIGN_HINT}"
        )


def miner_check_records(
    channels: Mapping[str, Channel], job_id: str, nonces: Sequence[bytes]
) -> None:
    """At the miner: send every party the job's nonces, compare the digests they return."""
    payload = b"".join(nonces)
    for channel in channels.values():
        channel.send("job.nonces", payload)
    digests = {
        role: ch.recv("job.records", max_bytes=DIGEST_BYTES) for role, ch in channels.items()
    }
    if any(len(d) != DIGEST_BYTES for d in digests.values()):
        raise ProtocolError("a party sent a record digest of the wrong size")
    first, *rest = digests.values()
    if not all(hmac.compare_digest(first, other) for other in rest):
        raise RecordsMismatch(
            f"{' and '.join(digests)} hold the same number of records but different record ids"
            f"{ALIGN_HINT}"
        )


def party_check_records_for_miner(
    channel: Channel, job_id: str, own_nonce: bytes, ids: Sequence[str], parties: int
) -> None:
    """At a party of a miner job: check our nonce is in the key, then send our digest."""
    payload = channel.recv("job.nonces", max_bytes=NONCE_BYTES * (parties + 1))
    if len(payload) != NONCE_BYTES * (parties + 1):
        raise ProtocolError("the miner sent a malformed nonce list")
    nonces = [payload[i : i + NONCE_BYTES] for i in range(0, len(payload), NONCE_BYTES)]
    if own_nonce not in nonces[1:]:
        raise ProtocolError("the miner left this party's nonce out of the record-digest key")
    channel.send("job.records", records_digest(job_key(job_id, nonces), ids))
