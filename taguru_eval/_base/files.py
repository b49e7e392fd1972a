"""Atomic file writes: every artifact is either complete or absent — and what a
killed writer left behind is removed by the next one.

A crash, a full disk or Ctrl-C mid-write must never leave a half-written
evaluation.json, changes.jsonl, report or Parquet file where a reader (a CI
step, ``compare``, a BI tool) would pick it up. An interrupt is handled (the
temp file is removed); a SIGKILL or a power loss cannot be, so every temp name
carries its writer's process id and the next writer of the same file removes
the temp files whose writer is gone (:func:`is_abandoned`).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from taguru_eval._base.signals import checked


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file's bytes, read a MiB at a time (an eval set's identity:
    ``--resume``'s fingerprint, the MLflow ``eval.sha256`` param)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _process_start() -> float:
    """When this process started (seconds since the epoch).

    Linux gives it exactly (``/proc/self/stat`` field 22, in clock ticks since
    boot, plus the boot time); elsewhere the time this module was imported,
    which is later — so fewer files count as older than the process, never more.
    """
    with contextlib.suppress(OSError, ValueError, IndexError, StopIteration):
        with open("/proc/self/stat", encoding="ascii") as handle:
            # The command name (field 2) may hold spaces; the fields after it do not.
            fields = handle.read().rpartition(")")[2].split()
        with open("/proc/stat", encoding="ascii") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return time.time()


PROCESS_STARTED: Final = _process_start()
"""This process's start time, against which left-over files are judged."""

_TEMP_REST: Final = re.compile(r"(?P<pid>[1-9][0-9]*)\.[a-z0-9_]{8}\.tmp")
"""What follows ``.{name}.`` in a temp file name: the writer's pid, mkstemp's
eight random characters, ``.tmp``."""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (as far as this process can see).

    Anything that cannot be decided — another user's process, a platform
    without POSIX signals — counts as alive, so its files are kept.
    """
    if pid <= 0 or os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def is_abandoned(path: str | os.PathLike[str], pid: int) -> bool:
    """Whether ``path``, written by process ``pid``, is a killed writer's leftover:
    last modified before this process started, and ``pid`` no longer running.

    Both conditions, so neither a writer that started after this process nor a
    live one that started before it (a concurrent run) ever loses its file.
    """
    try:
        modified = os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return False
    return modified < PROCESS_STARTED and pid != os.getpid() and not pid_alive(pid)


def remove_abandoned_temp_files(target: str | os.PathLike[str]) -> list[Path]:
    """Remove the temp files killed writers of ``target`` left in its directory
    (``.{name}.{pid}.{random}.tmp``, see :func:`is_abandoned`); returns them.

    Best effort: a file that cannot be removed stays, and nothing is raised.
    """
    path = Path(target)
    prefix = f".{path.name}."
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for candidate in path.parent.glob(glob.escape(prefix) + "*.tmp"):
            owner = _TEMP_REST.fullmatch(candidate.name[len(prefix) :])
            if owner is not None and is_abandoned(candidate, int(owner.group("pid"))):
                with contextlib.suppress(OSError):
                    candidate.unlink()
                    removed.append(candidate)
    return removed


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes | Iterable[bytes]) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory and a rename.

    ``data`` is bytes, or chunks written as they come (a 300 MB document is never
    whole in memory): a failure while the chunks are made (they may be computed as
    they are written) removes the temp file too, and so does a stop signal, which
    is checked for before each chunk (:func:`~taguru_eval._base.signals.check`).
    The directory is not created. A target that exists and is not a regular file
    (``/dev/null``, a FIFO, a terminal) is written through, never replaced: a
    rename would put a regular file where the device was (as root, in ``/dev``).
    The temp file is ``.{name}.{pid}.{random}.tmp``;
    the temp files a killed writer of the same ``path`` left are removed first
    (:func:`remove_abandoned_temp_files`). On any failure (``OSError``
    propagates, and so does ``KeyboardInterrupt``) the temp file is removed and
    ``path`` keeps whatever it held before. A symbolic link is followed: the
    file it names is replaced, and the link stays (:func:`_followed`).
    """
    target = _followed(Path(path))
    if not isinstance(data, bytes):
        data = checked(iter(data))
    if _is_special(target):
        _write_through(target, data)
        return
    temp = _staged(target, data)
    try:
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    fsync_directory(target.parent)


class WriteFailed(OSError):
    """One of the files :func:`write_all_atomic` writes could not be written."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(error.errno, error.strerror)
        self.path = path
        self.error = error


def write_all_atomic(files: Sequence[tuple[str | os.PathLike[str], bytes]]) -> None:
    """Write every file of a set or none of them: each is written to a temp file
    beside its target (as :func:`write_bytes_atomic`), and only once all are
    written are they renamed into place, so a full disk or a missing directory
    halfway leaves every target as it was (only a rename failing after another
    succeeded, a directory removed meanwhile, could leave part of the set). A
    failure is :class:`WriteFailed` naming the file; the temp files are removed.
    """
    staged: list[tuple[Path, Path]] = []
    through: list[tuple[Path, bytes]] = []
    try:
        for path, data in files:
            target = _followed(Path(path))
            if _is_special(target):
                through.append((target, data))
                continue
            try:
                staged.append((_staged(target, data), target))
            except OSError as exc:
                raise WriteFailed(target, exc) from exc
        for target, data in through:
            try:
                _write_through(target, data)
            except OSError as exc:
                raise WriteFailed(target, exc) from exc
        for index, (temp, target) in enumerate(staged):
            try:
                os.replace(temp, target)
            except OSError as exc:
                raise WriteFailed(target, exc) from exc
            staged[index] = (target, target)  # in place: nothing to clean up
    except BaseException:
        for temp, target in staged:
            if temp != target:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
        raise
    for directory in dict.fromkeys(target.parent for _, target in staged):
        fsync_directory(directory)


def _followed(target: Path) -> Path:
    """``target``, or the file its symbolic link(s) name. An output given as a link
    (``evaluation.json -> runs/latest.json``) is written where the link points, as
    a shell redirection would; renaming over the link itself would turn it into
    a regular file and leave the file it named stale. The inputs-versus-outputs
    check resolves links the same way (``inputs/outputs.py``)."""
    return target.resolve() if target.is_symlink() else target


def _is_special(target: Path) -> bool:
    """Whether ``target`` exists as something other than a regular file or a
    directory (a device, a FIFO, a socket), following a symbolic link."""
    try:
        mode = target.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def writes_through(target: str | os.PathLike[str]) -> bool:
    """Whether a write to ``target`` goes into it as it is (a device, a FIFO, a
    socket), not through a temp file and a rename."""
    return _is_special(Path(target))


def _write_through(target: Path, data: bytes | Iterable[bytes]) -> None:
    """``data`` written into the device or FIFO ``target`` (``/dev/full`` fails)."""
    with target.open("wb") as handle:
        handle.writelines([data] if isinstance(data, bytes) else data)
        handle.flush()


def _staged(target: Path, data: bytes | Iterable[bytes]) -> Path:
    """``data`` written and flushed to a fresh temp file beside ``target`` (removed
    again on failure)."""
    remove_abandoned_temp_files(target)
    fd, temp = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.writelines([data] if isinstance(data, bytes) else data)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; an artifact is shared like any other output file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    return Path(temp)


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
