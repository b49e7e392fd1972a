"""Where a stored run keeps its evaluation.json, and how to read it back.

The one place that knows the run store's artifact layouts (docs/store.md "The run
store")::

    <run dir>/evaluation.json.zst   this layout: the written bytes, zstd-compressed
    <run dir>/evaluation.json       runs stored before it: the bytes as written

The uncompressed copy was 98% of a stored run's bytes; zstd keeps a
100,000-case run's copy at a fraction of it (benchmarks/store_size.py). The
compressed file is one standard zstd frame (``zstd -d`` reads it), written by
python-zstandard as a stream, so storing a 300 MB document never holds it twice
in memory.

It is read back as untrusted input (a store may be downloaded): by python-zstandard,
frame by frame (:class:`_OneFrame`), so every reader sees the same thing — the
first frame's bytes, refused when anything follows it (a second frame, trailing
bytes) and once they pass :func:`decompressed_cap` (a small file inflating to
gigabytes is a bomb, not a run). A plain evaluation.json is read up to
:data:`~taguru_eval.contract.ARTIFACT_CAP`.

Every reader finds a run's artifact with :func:`stored_artifact` and opens it
with :func:`open_artifact` or :func:`artifact_bytes`, so both layouts read
the same everywhere. A decompression failure (a damaged or truncated file, a
second frame, a bomb) is an :class:`OSError` whose text names the damage, as
any unreadable file is.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final, cast

from taguru_eval._base.filebytes import ReadCap, TooLarge, file_bytes, read_capped, size_text
from taguru_eval._base.signals import check
from taguru_eval.contract import (
    ARTIFACT_CAP,
    ARTIFACT_NAME,
    ARTIFACT_STAMP,
    STORED_FLOOR,
    STORED_RATIO,
)

COMPRESSED_NAME: Final = f"{ARTIFACT_NAME}.zst"
"""The artifact's file name in a run stored by this version."""

STORED_NAMES: Final = (COMPRESSED_NAME, ARTIFACT_NAME)
"""Every name a stored run's artifact has had, the current one first."""

_LEVEL: Final = 1
"""zstd's level for the stored copy: the fastest, as pyarrow's codec wrote it
before (its default level); a JSON document compresses well at any level."""
_CHUNK: Final = 1 << 20
"""Bytes moved per read while streaming (small enough to stay out of the peak)."""


def stamp_problem(stamp: int) -> str | None:
    """What is wrong with a ``taguru_evaluation`` stamp this build cannot read
    (GATE_AND_COMPARE.md §6.2's words, which every reader uses), else None."""
    if 1 <= stamp <= ARTIFACT_STAMP:
        return None
    return f"taguru_evaluation must be within 1..={ARTIFACT_STAMP}, got {stamp}"


def stored_artifact(run_directory: str | Path) -> Path:
    """The artifact file of the stored run in ``run_directory``: its
    ``evaluation.json.zst``, else (a run stored before it) its
    ``evaluation.json``; the current name when neither is there, so a message
    about the missing file names what a run holds today."""
    directory = Path(run_directory)
    for name in STORED_NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return directory / COMPRESSED_NAME


def has_artifact(run_directory: str | Path) -> bool:
    """Whether ``run_directory`` holds a stored artifact in either layout."""
    return stored_artifact(run_directory).is_file()


def stored_runs(parent: str | Path, pattern: str) -> list[Path]:
    """The run directories matching ``pattern`` under ``parent`` (``run=*``,
    ``context=*/run=*``) that hold an artifact in either layout, sorted.

    Directories whose name starts with a dot (``.staging``, a resume's
    ``.partial``) are never runs: a glob's ``*`` does not match them.
    """
    return sorted(
        directory
        for directory in Path(parent).glob(pattern)
        if not directory.name.startswith(".") and has_artifact(directory)
    )


NEWEST_LISTED: Final = 3
"""How many runs the hint for a store root given as a run names."""


def not_a_run_hint(directory: str | Path) -> str | None:
    """When ``directory`` is a run store's root (``context=*/run=*`` under it) or
    one context's folder (``run=*``) rather than a run: what to give instead,
    naming its newest runs; ``None`` for anything else."""
    folder = Path(directory)
    if not folder.is_dir() or has_artifact(folder):
        return None
    for pattern, kind in (("context=*/run=*", "a run store"), ("run=*", "a context's runs")):
        runs = stored_runs(folder, pattern)
        if runs:
            newest = sorted(runs, key=lambda run: run.name, reverse=True)[:NEWEST_LISTED]
            listed = ", ".join(str(run) for run in newest)
            return (
                f"{directory} is {kind}, not one run: give a run directory; the newest "
                f"of its {len(runs)} run(s): {listed}"
            )
    return None


def is_compressed(path: str | Path) -> bool:
    """Whether ``path`` is a compressed artifact (read through the codec)."""
    return os.fspath(path).endswith(".zst")


def decompressed_cap(compressed_size: int) -> ReadCap:
    """What a stored artifact of ``compressed_size`` bytes may decompress to."""
    limit = min(ARTIFACT_CAP.limit, max(STORED_FLOOR, STORED_RATIO * compressed_size))
    return ReadCap(
        limit,
        f"a stored evaluation.json of {size_text(compressed_size)} "
        f"({STORED_RATIO} times its size, at least {size_text(STORED_FLOOR)})",
    )


_PIECE: Final = 4096
"""Compressed bytes decompressed at a time: zstd expands a piece at most ~32,000
times (128 MiB), so the cap is never overshot by more than that."""


class _OneFrame(io.RawIOBase):
    """The bytes of the one zstd frame ``raw`` holds, decompressed as they are read.

    Refused (:class:`OSError`) when the stream is not zstd, is cut short, holds
    anything after its frame, or decompresses past ``cap``."""

    def __init__(self, raw: BinaryIO, cap: ReadCap) -> None:
        import zstandard

        self._raw = raw
        self._cap = cap
        self._error = zstandard.ZstdError
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._out = memoryview(b"")
        self._total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._out:
            if not self._more():
                return 0
        size = min(len(buffer), len(self._out))
        buffer[:size] = self._out[:size]
        self._out = self._out[size:]
        return size

    def _more(self) -> bool:
        """Decompress the next piece; False at the frame's end."""
        if self._frame.eof:
            return False
        piece = self._raw.read(_PIECE)
        if not piece:
            raise OSError(None, "the zstd frame is cut short (a truncated file)")
        try:
            out = self._frame.decompress(piece)
        except self._error as exc:
            raise OSError(None, f"not a zstd frame ({exc})") from None
        self._total += len(out)
        if self._total > self._cap.limit:
            raise TooLarge(self._cap)
        self._out = memoryview(out)
        if self._frame.eof and (self._frame.unused_data or self._raw.read(1)):
            raise OSError(None, "bytes follow its zstd frame (a stored artifact is one frame)")
        check()
        return True


@contextlib.contextmanager
def open_artifact(path: str | Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading its evaluation.json bytes: a plain file as
    it is (seekable), a compressed one through :class:`_OneFrame` (a forward-only
    stream). Failure → :class:`OSError`."""
    if not is_compressed(path):
        with Path(path).open("rb") as handle:
            yield handle
        return
    # Opened by Python, so a missing or unreadable file is worded as any other.
    with Path(path).open("rb") as raw:
        cap = decompressed_cap(os.fstat(raw.fileno()).st_size)
        with io.BufferedReader(_OneFrame(raw, cap), _CHUNK) as stream:
            yield cast(BinaryIO, stream)


def artifact_bytes(path: str | Path) -> bytes:
    """The evaluation.json bytes ``path`` holds (decompressed when it is a
    stored ``.zst``), at most their cap. Failure, a damaged stream included →
    :class:`OSError`."""
    if not is_compressed(path):
        return file_bytes(path, ARTIFACT_CAP)
    with open_artifact(path) as handle:
        return read_capped(handle, ARTIFACT_CAP)


def same_bytes(path: str | Path, data: bytes) -> bool:
    """Whether ``path`` holds exactly ``data`` (compared as it streams, so a
    differing artifact stops being read at its first different chunk)."""
    offset = 0
    with open_artifact(path) as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                return offset == len(data)
            if data[offset : offset + len(chunk)] != chunk:
                return False
            offset += len(chunk)


def write_stored(path: Path, artifact: str | Path) -> None:
    """Write ``artifact`` — the evaluation.json text, or the ``Path`` of one
    already written, streamed from the file — compressed to ``path`` (one zstd
    frame, by python-zstandard, the library that reads it back) and flushed to
    disk. ``path`` sits in a staging directory that is renamed into place
    whole, which is what makes the write atomic."""
    # Imported here: a plain evaluation.json (and ``--version``) needs no zstd.
    import zstandard

    with path.open("wb") as out:
        with zstandard.ZstdCompressor(level=_LEVEL).stream_writer(out, closefd=False) as frame:
            if isinstance(artifact, Path):
                with artifact.open("rb") as source:
                    while chunk := source.read(_CHUNK):
                        frame.write(chunk)
            else:
                data = artifact.encode("utf-8")
                for start in range(0, len(data), _CHUNK):
                    frame.write(data[start : start + _CHUNK])
        # Leaving the writer ends the frame and flushes it into ``out``.
        out.flush()
        os.fsync(out.fileno())
