"""The run store's two artifact layouts, for tests that read or damage a run.

A run stored by this version holds ``evaluation.json.zst``; a run stored
before it holds an uncompressed ``evaluation.json``
(:mod:`taguru_eval.store_artifact`). Tests that edit the artifact's text by
hand turn a run into the old layout first (:func:`to_old_layout`): the text
is then a plain file, and every reader must still take it.
"""

from __future__ import annotations

from pathlib import Path

from taguru_eval.contract import ARTIFACT_NAME
from taguru_eval.store_artifact import COMPRESSED_NAME, artifact_bytes, stored_artifact

__all__ = ["artifact_text", "stored_artifact", "stored_bytes", "to_old_layout"]


def stored_bytes(run_directory: Path) -> bytes:
    """The evaluation.json bytes a stored run holds, in either layout."""
    return artifact_bytes(stored_artifact(run_directory))


def artifact_text(run_directory: Path) -> str:
    """The evaluation.json text a stored run holds, in either layout."""
    return stored_bytes(run_directory).decode("utf-8")


def to_old_layout(run_directory: Path) -> Path:
    """Rewrite ``run_directory`` as a run stored before compression was: its
    artifact as a plain ``evaluation.json`` (no ``.zst``); returns that file."""
    plain = run_directory / ARTIFACT_NAME
    compressed = run_directory / COMPRESSED_NAME
    if compressed.is_file():
        plain.write_bytes(artifact_bytes(compressed))
        compressed.unlink()
    return plain
