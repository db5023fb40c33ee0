"""Atomic file writes: a temporary file in the target's folder, then ``os.replace``.

A crash or Ctrl-C never leaves a half-written file: readers see the old file or the new one. Every
writer of the project goes through this module.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

_UMASK: Final = os.umask(0)  # read by setting it: once, at import
os.umask(_UMASK)
FILE_MODE: Final = 0o666 & ~_UMASK  # what open gives a new file (0644 under umask 022)


@contextlib.contextmanager
def atomic_target(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``.

    For writers that need a file name (``savefig``): the temporary name ends in ``suffix`` (e.g.
    ``.png``) so that the writer picks the right format.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    except OSError as err:  # named by the file asked for, not the temporary one
        raise type(err)(err.errno, err.strerror, str(target)) from None
    os.close(fd)
    try:
        os.chmod(tmp, FILE_MODE)  # mkstemp's 0600 would make every record private
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (flushed and synced before the rename)."""
    with atomic_target(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def atomic_save(path: str | os.PathLike[str], saver: Callable[[io.BytesIO], Any]) -> None:
    """``saver(buffer)`` (e.g. ``model.save``) into memory, then write the bytes atomically."""
    buf = io.BytesIO()
    saver(buf)
    atomic_write_bytes(path, buf.getvalue())


def read_json(path: str | os.PathLike[str], default: Any) -> Any:
    """The JSON document in ``path``, or ``default`` when there is no such file; a file that
    is not JSON (a damaged record) is a ``ValueError`` naming it."""
    target = Path(path)
    if not target.is_file():
        return default
    try:
        return json.loads(target.read_text(encoding="utf-8"))
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError alike
        raise ValueError(f"{target}: not a JSON document ({err})") from None


def check_writable(path: str | os.PathLike[str], flag: str, folder: bool = False) -> None:
    """Refuse, before any work, an output the writers above could not write: ``ValueError``
    naming ``flag`` and the path when it is a folder where a file is wanted (or a file where
    a ``folder`` is), lies under a file, or would go in a folder this process cannot write
    (a read-only file system included). Nothing is created."""
    target = Path(path)
    if not folder and target.is_dir():
        raise ValueError(f"{flag} {target}: is a directory, not a file")
    if folder and target.exists() and not target.is_dir():
        raise ValueError(f"{flag} {target}: is a file, not a directory")
    place = target if folder and target.is_dir() else target.parent
    while not place.exists() and place != place.parent:  # the folder that would hold it
        place = place.parent
    if not place.is_dir():
        raise ValueError(f"{flag} {target}: {place} is a file, not a directory")
    if not os.access(place, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {target}: cannot write in {place} (read-only or not yours)")
