"""Atomic file writes: every artifact is either complete or absent.

A crash, a full disk or Ctrl-C mid-write must never leave a half-written
evaluation.json, changes.jsonl, report or Parquet file where a reader (a CI
step, ``compare``, a BI tool) would pick it up.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory and a rename.

    The directory is not created. On any failure (``OSError`` propagates, and
    so does ``KeyboardInterrupt``) the temp file is removed and ``path`` keeps
    whatever it held before.
    """
    target = Path(path)
    directory = target.parent
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; an artifact is shared like any other output file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    fsync_directory(directory)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Persist a rename in ``directory``; best effort (some filesystems refuse it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
