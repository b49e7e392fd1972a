"""Reading a file whole, up to a cap, a path holding a NUL byte reported as taguru
reports it.

Every input is read through :func:`file_bytes` with the cap of its kind
(:class:`ReadCap`, declared in :mod:`taguru_eval.contract`): a regular file
larger than the cap is refused from its size, before a byte is read; anything
else (a pipe, ``/dev/zero``, ``<(yes …)``) is read in chunks and refused as
soon as it passes the cap, having read at most cap + 1 bytes. The refusal is
:class:`TooLarge`, an :class:`OSError`, so every reader's ``cannot read {path}:
…`` wording covers it. A stop signal is checked for between chunks.

Only a library caller can pass a path holding a NUL byte (argv cannot hold
one). Python's ``open`` raises ``ValueError`` for it; Rust's std::io, which
taguru reads its files with, answers an I/O error worded :data:`NUL_IN_PATH`.
:func:`file_bytes` raises that as an :class:`OSError` too.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from taguru_eval._base.signals import check

NUL_IN_PATH: Final = "file name contained an unexpected NUL byte"

_CHUNK: Final = 16 << 20
"""Bytes read at a time from a stream (a stop signal is checked between them)."""


@dataclass(frozen=True)
class ReadCap:
    """The most an input of one kind may hold, in bytes, and its kind's name in
    the refusal (``an eval set``)."""

    limit: int
    kind: str


def size_text(size: int) -> str:
    """``4 GiB``, ``256 MiB``, ``64 KiB``, else the byte count."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size:,} bytes"


class TooLarge(OSError):
    """An input longer than its cap (nothing past cap + 1 bytes was read)."""

    def __init__(self, cap: ReadCap) -> None:
        super().__init__(None, f"longer than {size_text(cap.limit)}, the most {cap.kind} may hold")
        self.cap = cap


def file_bytes(path: str | Path, cap: ReadCap) -> bytes:
    """The bytes of ``path``, at most ``cap.limit`` of them (else :class:`TooLarge`);
    a NUL byte in ``path`` is an :class:`OSError` worded as taguru words it."""
    if "\0" in os.fspath(path):
        raise OSError(None, NUL_IN_PATH)
    with Path(path).open("rb") as handle:
        return read_capped(handle, cap)


def read_capped(handle: BinaryIO, cap: ReadCap) -> bytes:
    """What ``handle`` holds from where it stands, refused past ``cap`` (a regular
    file by its size, before reading; a stream once it has given cap + 1 bytes)."""
    try:
        status = os.fstat(handle.fileno())
    except (OSError, ValueError, AttributeError):
        status = None
    chunks: list[bytes] = []
    total = 0
    if status is not None and stat.S_ISREG(status.st_mode):
        remaining = status.st_size - handle.tell()
        if remaining > cap.limit:
            raise TooLarge(cap)
        data = handle.read(remaining + 1)
        if len(data) <= remaining:
            return data
        # The file grew while it was read: the rest is read as a stream's would be.
        chunks.append(data)
        total = len(data)
        if total > cap.limit:
            raise TooLarge(cap)
    while chunk := handle.read(min(_CHUNK, cap.limit + 1 - total)):
        check()
        chunks.append(chunk)
        total += len(chunk)
        if total > cap.limit:
            raise TooLarge(cap)
    return b"".join(chunks)
