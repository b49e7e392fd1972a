"""Where a command writes, checked before it reads a file or sends a request.

Every command that writes shares two rules (exit 2, nothing written):

* an output path is never empty (``--out ''`` would fail only at the end);
* no output is one of the command's inputs or another of its outputs, after
  ``..`` and symbolic links are resolved: ``--out`` naming the eval set, or
  ``--junit`` naming ``--out``, would destroy what the command reads or let one
  output replace another. A stored run given as an input is its
  ``evaluation.json``.

Run mode also checks, before its first request, that each output's directory
exists (exit 1, with the line the write would print at the end,
``writing {path}: {error}``): a typo must not cost a whole run. taguru's own
``evaluate`` runs every case first and then fails the same way.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping

from taguru_eval._base.filebytes import NUL_IN_PATH
from taguru_eval.errors import RunError, UsageError, os_error_text
from taguru_eval.store_artifact import stored_artifact


def refuse_overlaps(inputs: Mapping[str, str | None], outputs: Mapping[str, str | None]) -> None:
    """A :class:`UsageError` for a path holding a NUL byte, an empty output path,
    or an output that is an input or an earlier output. Keys name each path as
    the user knows it (a flag, ``BASE``, ``the CSV``); ``None`` values are paths
    not given."""
    for name, path in {**inputs, **outputs}.items():
        # Only a library caller can pass one (argv cannot): the OS calls would raise.
        if path and "\0" in path:
            raise UsageError(f"{name} '{path}': {NUL_IN_PATH}")
    seen: dict[str, str] = {}
    for name, path in inputs.items():
        if path:
            seen.setdefault(_real(_input_file(path)), name)
    for name, path in outputs.items():
        if path is None:
            continue
        if not path:
            raise UsageError(f"{name} needs a file path, not an empty one")
        real = _real(path)
        if real in seen:
            raise UsageError(f"{name} '{path}' is the same file as {seen[real]}")
        seen[real] = name


def require_output_directories(outputs: Mapping[str, str | None]) -> None:
    """A :class:`RunError` (exit 1) naming the first output whose directory does
    not exist or is not a directory, or that is itself a directory."""
    for path in outputs.values():
        if not path:
            continue
        directory = os.path.dirname(path) or "."
        try:
            if os.path.isdir(path):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if not os.path.isdir(directory):
                os.stat(directory)  # the missing one raises here with its own words
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        except OSError as exc:
            raise RunError(f"writing {path}: {os_error_text(exc)}") from None


def _input_file(path: str) -> str:
    """A stored run directory stands for its evaluation.json."""
    return str(stored_artifact(path)) if os.path.isdir(path) else path


def _real(path: str) -> str:
    return os.path.realpath(path)
