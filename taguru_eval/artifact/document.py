"""A written evaluation.json as a mapping that reads its cases only when asked.

A run streams its artifact to disk and keeps only the document's head (every
member but ``cases``: inputs, corpus, metrics, …), which is all the console
summary, the gate and the CI reports read. ``doc["cases"]`` reads the written
file back, once, so a notebook gets the whole document as before while a
100,000-case run never holds its cases as Python objects unless someone looks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from taguru_eval.artifact.codec import read_artifact


def without_cases(head: Mapping[str, Any]) -> dict[str, Any]:
    """``head`` (the document with its ``cases`` member in place) without the cases."""
    return {key: value for key, value in head.items() if key != "cases"}


class WrittenDocument(Mapping[str, Any]):
    """The evaluation.json at ``path``: ``head`` in memory, the cases read on demand.

    Iterates its keys in the file's order. The file must stay as written while
    the cases are still to be read (a run's ``--out``, or a private copy when
    ``--out`` is a device).
    """

    def __init__(self, head: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
        self._keys = tuple(head)
        self._head = without_cases(head)
        self._path = Path(path)
        self._cases: list[Any] | None = None

    @property
    def path(self) -> Path:
        """The file the document was written to (or a private copy of it)."""
        return self._path

    @property
    def head(self) -> dict[str, Any]:
        """Every member but ``cases``."""
        return self._head

    def __getitem__(self, key: str) -> Any:
        if key != "cases" or "cases" not in self._keys:
            return self._head[key]
        if self._cases is None:
            self._cases = read_artifact(self._path)["cases"]
        return self._cases

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"WrittenDocument({str(self._path)!r}, keys={list(self._keys)!r})"
