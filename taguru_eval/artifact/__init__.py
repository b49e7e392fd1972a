"""evaluation.json (EVALUATE.md §6): written from the score frames, and read back.

The public names are imported on first use (:func:`~taguru_eval._base.lazy.lazy_names`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taguru_eval._base.lazy import by_module, lazy_names

if TYPE_CHECKING:
    from taguru_eval.artifact.build import RunContext, build_artifact
    from taguru_eval.artifact.codec import read_artifact
    from taguru_eval.artifact.document import WrittenDocument
    from taguru_eval.artifact.read import LoadedRun, load_artifact, tables_from_artifact

__all__ = [
    "LoadedRun",
    "RunContext",
    "WrittenDocument",
    "build_artifact",
    "load_artifact",
    "read_artifact",
    "tables_from_artifact",
]

__getattr__ = lazy_names(
    __name__,
    by_module(
        __name__,
        {
            "build": "RunContext build_artifact",
            "codec": "read_artifact",
            "document": "WrittenDocument",
            "read": "LoadedRun load_artifact tables_from_artifact",
        },
    ),
)
