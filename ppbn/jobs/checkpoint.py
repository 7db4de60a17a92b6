"""Checkpoints of a learn job at one party: encrypted at rest, written atomically.

After every completed K2 step (wave) each daemon saves what it needs to continue the job
from that step: the public decisions so far, its own count-table shares and its own
score shares (``learning.config.K2Checkpoint``), plus the job's parameters and a digest of
its own data so a resume runs on the same records with the same parameters. Nothing of
the peer's is stored but the shares the protocol gave this party (its own shares are by
construction the only thing it holds; Paillier keys and ciphertext caches are not kept:
a resumed run makes fresh keys, see docs/user-guide.md, "Resumable jobs").

Files: ``<out>/.checkpoints/<job>/checkpoint-<step>.bin`` (the last ``KEEP`` steps, since the peer may
be one step behind), each AES-256-GCM under ``<out>/.checkpoint.key`` (32 random bytes,
created 0600 on first use, never leaves the host), with the job id, role and step as
associated data so a file cannot be replayed under another name. Written to a temporary
file, fsynced, then renamed: a crash leaves the previous checkpoint intact.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ppbn.data.outputs import failed_file, io_remedy
from ppbn.errors import UserError
from ppbn.protocols.learning.config import K2Checkpoint

KEY_FILE = ".checkpoint.key"
CHECKPOINT_DIR = (
    ".checkpoints"  # beside the job folders: a failed job's folder keeps only its record
)
KEY_BYTES = 32
NONCE_BYTES = 12
KEEP = 2  # the peer can be at most one step behind: keep this step and the one before
FORMAT = 1
_NAME = re.compile(r"^checkpoint-(\d{1,9})\.bin$")


DIGEST_ROWS = 1 << 16


def data_digest(ids: Sequence[str], codes: np.ndarray) -> str:
    """SHA-256 of this party's own records: a resume must run on the same data."""
    h = hashlib.sha256()
    # the bytes of json.dumps(list(ids)) and of codes as int64, fed piece by piece (10M records
    # would otherwise cost a gigabyte of temporary strings)
    h.update(b"[")
    for i, record_id in enumerate(ids):
        h.update((", " if i else "").encode() + json.dumps(record_id).encode())
    h.update(b"]")
    for start in range(0, codes.shape[0], DIGEST_ROWS):
        h.update(np.ascontiguousarray(codes[start : start + DIGEST_ROWS], dtype=np.int64).tobytes())
    return h.hexdigest()


def checkpoint_key(out_root: Path) -> bytes:
    """The party's checkpoint key, created 0600 on first use: written whole into a temporary
    file, then linked into place (no race, no overwrite, never an empty key on a full disk).
    An empty key file, which only an interrupted first write leaves, encrypts nothing and is
    replaced."""
    path = out_root / KEY_FILE
    out_root.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.stat().st_size == 0:
        path.unlink()
    key = AESGCM.generate_key(bit_length=8 * KEY_BYTES)
    fd, temporary = tempfile.mkstemp(prefix=f"{KEY_FILE}.tmp-", dir=out_root)  # 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temporary, path)
    except FileExistsError:
        key = path.read_bytes()
        if len(key) != KEY_BYTES:
            raise UserError(
                f"{path}: checkpoint key must be {KEY_BYTES} bytes, found {len(key)}"
            ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return key


class CheckpointStore:
    """One job's checkpoints at this party."""

    def __init__(self, out_root: Path, job_id: str, role: str) -> None:
        self.out_root = Path(out_root)
        self.folder = self.out_root / CHECKPOINT_DIR / job_id
        self.job_id = job_id
        self.role = role
        self._key: bytes | None = None

    def _aead(self) -> AESGCM:
        if self._key is None:
            self._key = checkpoint_key(self.out_root)
        return AESGCM(self._key)

    def _associated(self, step: int) -> bytes:
        return json.dumps(["ppbn/checkpoint", FORMAT, self.job_id, self.role, step]).encode()

    def path(self, step: int) -> Path:
        return self.folder / f"checkpoint-{step}.bin"

    def steps(self) -> list[int]:
        """Steps with a checkpoint on disk, ascending."""
        if not self.folder.is_dir():
            return []
        found = (_NAME.match(p.name) for p in self.folder.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def save(self, meta: dict[str, Any], state: K2Checkpoint) -> None:
        """Encrypt and atomically write the checkpoint of ``state.step``; drop older ones.
        A file system error fails the job with one line naming the file (UserError)."""
        try:
            self._save(meta, state)
        except OSError as exc:
            failed = failed_file(
                exc, self.out_root
            )  # None for a buffered write: name the checkpoint
            where = (
                failed
                if failed not in (None, Path(os.path.abspath(self.out_root)))
                else self.path(state.step)
            )
            raise UserError(
                f"{where}: cannot write the checkpoint: {exc.strerror or exc}; {io_remedy(exc, self.out_root)}, "
                "then run the job again"
            ) from None

    def _save(self, meta: dict[str, Any], state: K2Checkpoint) -> None:
        buffer = io.BytesIO()
        arrays = {f"c{i}": a for i, a in enumerate(state.count_shares.values())}
        arrays.update({f"s{i}": a for i, a in enumerate(state.score_shares.values())})
        header = {
            **meta,
            "format": FORMAT,
            "step": state.step,
            "decisions": state.decisions,
            "count_families": [list(f) for f in state.count_shares],
            "score_keys": [[c, sorted(ps)] for c, ps in state.score_shares],
        }
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        np.savez(buffer, **arrays)
        nonce = os.urandom(NONCE_BYTES)
        sealed = nonce + self._aead().encrypt(
            nonce, buffer.getvalue(), self._associated(state.step)
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.path(state.step)
        temporary = final.with_name(final.name + ".tmp")
        try:
            with open(temporary, "wb") as handle:
                handle.write(sealed)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, final)
        except BaseException:
            temporary.unlink(missing_ok=True)  # never half a checkpoint beside the whole ones
            raise
        directory = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        for old in self.steps()[:-KEEP]:
            self.path(old).unlink(missing_ok=True)

    def load(self, step: int) -> tuple[dict[str, Any], K2Checkpoint]:
        """The header and state of one step; UserError if missing, altered or another job's."""
        path = self.path(step)
        try:
            sealed = path.read_bytes()
        except FileNotFoundError:
            raise UserError(
                f"{path}: no checkpoint of step {step} (have {self.steps() or 'none'})"
            ) from None
        try:
            plain = self._aead().decrypt(
                sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], self._associated(step)
            )
        except (InvalidTag, ValueError):
            raise UserError(
                f"{path}: checkpoint does not decrypt under {self.out_root / KEY_FILE} (altered, or another job's)"
            ) from None
        with np.load(io.BytesIO(plain), allow_pickle=False) as data:
            header = json.loads(bytes(data["header"]).decode())
            counts = {tuple(f): data[f"c{i}"] for i, f in enumerate(header["count_families"])}
            scores = {
                (c, frozenset(ps)): data[f"s{i}"] for i, (c, ps) in enumerate(header["score_keys"])
            }
        # K2: a wave of [child, chosen or None]; hill climbing: [[kind, parent, child]] or []
        decisions = [
            [[None if x is None else str(x) for x in entry] for entry in wave]
            for wave in header["decisions"]
        ]
        return header, K2Checkpoint(int(header["step"]), decisions, counts, scores)

    def latest_header(self) -> dict[str, Any] | None:
        """Header of the newest checkpoint, or None when the job has none."""
        steps = self.steps()
        return self.load(steps[-1])[0] if steps else None

    def remove_all(self) -> None:
        """A finished job needs no checkpoint: its shares should not outlive it on disk."""
        for step in self.steps():
            self.path(step).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # absent, or files of a newer run: keep them
            self.folder.rmdir()
