"""Output files and folders that are never half-written or mixed.

Every command and the daemon build an output folder in a hidden temporary sibling
(``.NAME.tmp-XXXX``, same file system) and rename it into place only once everything is
written; a crash, a full disk or Ctrl-C leaves the old folder (or nothing) plus a
temporary sibling, never a folder mixing old and new files. Single files go through a
temporary file and ``os.replace``.

The target is checked before any work is done (``check_output_dir``), so an unwritable or
wrong ``--out`` costs nothing: the user never loses a computed result to it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ppbn.errors import UserError


def check_output_dir(path: str | Path, flag: str = "--out", force: bool = False) -> Path:
    """Refuse, with one line naming ``flag`` and the path, an output folder that cannot be made.

    The target may be missing or an empty folder; a non-empty folder is replaced only with
    ``force`` (``--force``). Its parent must exist or be creatable and be writable.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UserError(f"{flag} {out}: exists and is not a folder")
    if out.is_dir():
        if not force and any(out.iterdir()):
            raise UserError(
                f"{flag} {out}: folder exists and is not empty (choose another, or --force to replace it)"
            )
        if force and Path.cwd().resolve().is_relative_to(out.resolve()):
            raise UserError(f"{flag} {out}: will not replace the current folder or one above it")
    _probe_writable(out, flag)
    return out


def _probe_writable(out: Path, flag: str) -> None:
    """Make and remove a temporary folder where ``out``'s would go: permission bits alone
    do not tell (root, read-only mounts, /sys)."""
    parent = _nearest_existing(out.resolve().parent)
    if not parent.is_dir():
        raise UserError(f"{flag} {out}: {parent} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ppbn-write-test-", dir=parent))
    except OSError as exc:
        raise UserError(f"{flag} {out}: cannot write in {parent} ({exc.strerror})") from None


def check_output_file(path: str | Path, flag: str = "--out") -> Path:
    """Refuse an output file that is a folder or sits in a folder this user cannot write."""
    out = Path(path)
    if out.is_dir():
        raise UserError(f"{flag} {out}: is a folder, not a file")
    _probe_writable(out, flag)
    return out


def _nearest_existing(path: Path) -> Path:
    """The path itself or its closest existing ancestor (what mkdir -p would write into)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@contextlib.contextmanager
def atomic_output_dir(path: str | Path, flag: str = "--out", force: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary sibling of ``path`` to fill; rename it into place on success.

    On an exception the temporary folder is removed and ``path`` is left as it was. An
    existing ``path`` (empty, or any with ``force``) is moved aside first and deleted only
    after the new folder is in place.
    """
    out = check_output_dir(path, flag, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        raise UserError(f"{flag} {out}: cannot write there ({exc.strerror})") from None
    try:
        yield temp
        os.chmod(temp, 0o777 & ~_umask())
        commit_dir(temp, out, replace=True)
    except OSError as exc:
        failed = failed_file(exc, out.parent)
        shutil.rmtree(temp, ignore_errors=True)
        if failed is not None or (
            is_file_error(exc) and not exc.filename
        ):  # our own writes, not the work's
            inside = Path(os.path.abspath(temp))
            name = (
                f" {failed.relative_to(inside)}"
                if failed is not None and failed.is_relative_to(inside)
                else ""
            )
            raise UserError(
                f"{flag} {out}: cannot write{name} there ({reason(exc)}); nothing was written"
            ) from None
        raise
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def is_file_error(exc: BaseException) -> bool:
    """An OSError of the file system (full disk, I/O error, permission), not of a socket,
    a timeout or a process."""
    network_or_process = (
        ConnectionError,
        TimeoutError,
        BlockingIOError,
        InterruptedError,
        ChildProcessError,
        ProcessLookupError,
    )
    return (
        isinstance(exc, OSError)
        and not isinstance(exc, network_or_process)
        and exc.errno is not None
    )


def reason(exc: OSError) -> str:
    """The OS's words for an error (``No space left on device``), without errno or path."""
    return exc.strerror or str(exc)


def failed_file(exc: OSError, under: str | Path) -> Path | None:
    """The file under ``under`` that a failed write names, or None. Python's buffered
    writes report a full disk at ``write`` or ``close`` without a file name: the callers
    then name the folder they were writing in."""
    if not exc.filename:
        return None
    root = Path(os.path.abspath(under))
    named = Path(os.path.abspath(os.fsdecode(exc.filename)))
    return named if named.is_relative_to(root) else None


def io_remedy(exc: OSError, folder: str | Path) -> str:
    """What to do about a failed write in ``folder``, by the kind of failure."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"free space in {folder}"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make {folder} writable"
    if exc.errno == errno.EIO:
        return f"check the disk of {folder}"
    return f"check {folder}"


def commit_dir(temp: Path, out: Path, replace: bool = False) -> None:
    """Rename the finished folder ``temp`` to ``out``. An existing ``out`` is an error unless
    ``replace``: then it is moved aside and removed once ``temp`` is in place."""
    old = None
    if out.exists() or out.is_symlink():
        if not replace:
            raise FileExistsError(f"{out} exists")
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / out.name)
    os.rename(temp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling file and a rename."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling file, fsync, and a rename."""
    target = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _read_umask() -> int:
    """The process umask, read once at import (setting and restoring it is the only way,
    and doing that later could race with a daemon thread creating files)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _umask() -> int:
    return _UMASK


@contextlib.contextmanager
def work_folder(out: str | None, prefix: str, force: bool = False) -> Iterator[Path]:
    """A run's working folder: with ``out``, built aside and renamed to ``out`` when the run
    ends without an exception; without, a temporary folder removed at the end."""
    if out:
        with atomic_output_dir(out, force=force) as folder:
            yield folder
        return
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def relocate(value: Any, temp: Path, final: Path) -> Any:
    """``value`` (JSON-like) with every path string under ``temp`` moved under ``final``:
    results name their files while they are still in the temporary folder. An absolute
    path (the daemons report their folders absolute) stays absolute."""
    if isinstance(value, str):
        for prefix, target in (
            (str(temp), str(final)),
            (os.path.abspath(temp), os.path.abspath(final)),
        ):
            if value == prefix or value.startswith(prefix + os.sep):
                return target + value[len(prefix) :]
        return value
    if isinstance(value, dict):
        return {key: relocate(item, temp, final) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(relocate(item, temp, final) for item in value)
    return value
