"""One writer per checkpoint: an exclusive ``flock`` on ``<checkpoint>/lock``.

A run takes the lock when it makes its checkpoint (its first batch), a
``--resume`` when it picks the checkpoint up, and both hold it until the run is
stored (:meth:`CheckpointLock.release`) or the process ends — the kernel drops
the lock with the process however it ends, so a SIGKILLed run's checkpoint is
resumable at once, and a live one is never taken: no pid or clock is guessed
at. The holder writes its pid into the file, for the refusal's words only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Final

from taguru_eval._base.filebytes import ReadCap, file_bytes

LOCK_NAME: Final = "lock"
_PID_CAP: Final = ReadCap(64, "a checkpoint's lock file")


class Held(Exception):
    """Another process holds the lock; ``pid`` is what it wrote (None when unread)."""

    def __init__(self, pid: int | None) -> None:
        super().__init__(pid)
        self.pid = pid


class CheckpointLock:
    """The lock of the checkpoint in ``directory``, held from :meth:`take` on."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> None:
        """Take the lock without waiting: :class:`Held` when another process has
        it; ``OSError`` when the file cannot be opened."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Held(holder(self.path)) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)

    def release(self) -> None:
        """Let the lock go (closing the file drops it); idempotent."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def holder(path: Path) -> int | None:
    """The pid the lock's holder wrote into ``path``, if it reads as one."""
    try:
        text = file_bytes(path, _PID_CAP).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
