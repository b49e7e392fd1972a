"""The ready file: how a server tells a CI script it answers, without a race.

``serve --ready-file PATH`` writes PATH once its socket listens and the app
answers ``/health``, and removes it on shutdown; ``wait --ready-file PATH``
reads it. The file is one JSON line, ``{"url": "http://host:port", "pid": N}``,
written atomically (temp file + rename), so a reader sees the whole line or no
file — never a half-written one — and can take the URL of a ``--port 0``
server from it instead of parsing the listening line.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from taguru_eval._base.filebytes import ReadCap, file_bytes
from taguru_eval._base.files import write_bytes_atomic

READY_CAP: Final = ReadCap(64 << 10, "a ready file")
"""A ready file is one short line; a path that names an endless stream is refused."""


@dataclass(frozen=True, slots=True)
class ReadyFile:
    """What a ready file says: the server's base URL and its process id."""

    url: str
    pid: int

    def to_bytes(self) -> bytes:
        """The file's whole content: one JSON line, ``url`` first."""
        return (json.dumps({"url": self.url, "pid": self.pid}) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> ReadyFile:
        """Parse a ready file's content; ``ValueError`` says what is wrong."""
        try:
            document = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a ready file (not a JSON line: {exc})") from None
        if not isinstance(document, dict):
            raise ValueError("not a ready file (not a JSON object)")
        url, pid = document.get("url"), document.get("pid")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError("not a ready file (no 'url' string starting with http:// or https://)")
        # bool is an int to Python; a pid of true is not a pid.
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise ValueError("not a ready file (no positive integer 'pid')")
        return cls(url=url, pid=pid)


def write_ready_file(path: Path, ready: ReadyFile) -> bytes:
    """Write ``ready`` to ``path`` atomically; returns the bytes written (for
    :func:`remove_ready_file`). ``OSError`` propagates."""
    data = ready.to_bytes()
    write_bytes_atomic(path, data)
    return data


def read_ready_file(path: Path) -> ReadyFile | None:
    """The ready file at ``path``, or ``None`` while there is none.

    ``ValueError`` for content that is not a ready file; any other ``OSError``
    than a missing file (a directory, no permission) propagates.
    """
    try:
        data = file_bytes(path, READY_CAP)
    except FileNotFoundError:
        return None
    return ReadyFile.from_bytes(data)


def remove_ready_file(path: Path, written: bytes) -> None:
    """Remove ``path`` if it still holds ``written`` (best effort, never raises).

    A file that changed since — another server given the same path wrote its
    own — is left alone, so one server's shutdown never takes away another's
    announcement.
    """
    with contextlib.suppress(OSError):
        if path.read_bytes() == written:
            os.unlink(path)


def remove_stale_ready_file(path: Path) -> None:
    """Remove a ready file an earlier server left (killed before it could), so a
    waiter started with this server never reads the old URL. Only a regular
    file is removed; a missing one is fine. ``OSError`` propagates."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_file():
            path.unlink()
