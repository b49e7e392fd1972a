"""Where a stored run keeps its evaluation.json, and how to read it back.

The one place that knows the run store's artifact layouts (docs/store.md "The run
store")::

    <run dir>/evaluation.json.zst   this layout: the written bytes, zstd-compressed
    <run dir>/evaluation.json       runs stored before it: the bytes as written

The uncompressed copy was 98% of a stored run's bytes; zstd keeps a
100,000-case run's copy at a fraction of it (benchmarks/store_size.py). The
compressed file is one standard zstd frame (``zstd -d`` reads it), written and
read by pyarrow's codec — a dependency already — as a stream, so neither
storing nor reading a 300 MB document holds it twice in memory.

Every reader finds a run's artifact with :func:`stored_artifact` and opens it
with :func:`open_artifact` or :func:`artifact_bytes`, so both layouts read
the same everywhere. A decompression failure (a damaged or truncated file) is
an :class:`OSError` whose text names the damage, as any unreadable file is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final, cast

from taguru_eval._base.filebytes import file_bytes
from taguru_eval.contract import ARTIFACT_NAME

COMPRESSED_NAME: Final = f"{ARTIFACT_NAME}.zst"
"""The artifact's file name in a run stored by this version."""

STORED_NAMES: Final = (COMPRESSED_NAME, ARTIFACT_NAME)
"""Every name a stored run's artifact has had, the current one first."""

_CODEC: Final = "zstd"
_CHUNK: Final = 1 << 20
"""Bytes moved per read while streaming (small enough to stay out of the peak)."""


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


@contextlib.contextmanager
def open_artifact(path: str | Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading its evaluation.json bytes: a plain file as
    it is (seekable), a compressed one through the codec (a forward-only
    stream). Failure → :class:`OSError`."""
    if not is_compressed(path):
        with Path(path).open("rb") as handle:
            yield handle
        return
    # Imported here: a plain evaluation.json (and ``--version``) needs no pyarrow.
    import pyarrow as pa

    # Opened by Python, so a missing or unreadable file is worded as any other.
    with (
        Path(path).open("rb") as raw,
        pa.CompressedInputStream(raw, _CODEC) as stream,
    ):
        yield cast(BinaryIO, stream)


def artifact_bytes(path: str | Path) -> bytes:
    """The evaluation.json bytes ``path`` holds (decompressed when it is a
    stored ``.zst``). Failure, a damaged stream included → :class:`OSError`."""
    if not is_compressed(path):
        return file_bytes(path)
    with open_artifact(path) as handle:
        return handle.read()


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
    already written, streamed from the file — compressed to ``path`` and
    flushed to disk. ``path`` sits in a staging directory that is renamed
    into place whole, which is what makes the write atomic."""
    import pyarrow as pa

    with pa.CompressedOutputStream(os.fspath(path), _CODEC) as out:
        if isinstance(artifact, Path):
            with artifact.open("rb") as source:
                while chunk := source.read(_CHUNK):
                    out.write(chunk)
        else:
            data = artifact.encode("utf-8")
            for start in range(0, len(data), _CHUNK):
                out.write(data[start : start + _CHUNK])
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
