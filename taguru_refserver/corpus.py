"""Load a corpus folder into a ``ServerState`` through the HTTP write path.

DIR holds one context folder per context, named after the folder; the layout
and its reader are ``taguru_eval/corpus/folder.py``, shared with ``load``, which
sends the same writes to a server over HTTP. Here each write goes through the
``ServerState`` method its HTTP request reaches — create, then the sources, the
associations and the aliases, in the batches ``corpus/writes.py`` makes under
this server's own caps — so revision counters are real. The context folder's
``"vector_lane": true`` gives it the toy vector lane (``vectors.py``) whatever
the server's ``--vector-lane`` says. A problem is an ``InputError`` naming the
file (and line).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from taguru_eval.corpus.folder import context_folders, read_context_folder
from taguru_eval.corpus.writes import Caps, Location, Write, fill_writes
from taguru_eval.errors import InputError
from taguru_refserver.envelope import ApiError
from taguru_refserver.model import (
    MAX_ALIAS_PAIRS_PER_REQUEST,
    MAX_ASSOCIATIONS_PER_REQUEST,
    MAX_PASSAGES_PER_REQUEST,
)
from taguru_refserver.state import ServerState

CAPS = Caps(
    sources=MAX_PASSAGES_PER_REQUEST,
    associations=MAX_ASSOCIATIONS_PER_REQUEST,
    alias_pairs=MAX_ALIAS_PAIRS_PER_REQUEST,
)
"""A folder's writes are batched under the caps this server enforces on HTTP writes."""


def load_corpus_dir(state: ServerState, path: str | Path) -> list[str]:
    """Load every context folder under ``path`` into ``state``; returns the context names."""
    names: list[str] = []
    for folder in context_folders(Path(path)):
        load_context_dir(state, folder)
        names.append(folder.name)
    return names


def load_context_dir(state: ServerState, folder: Path, name: str | None = None) -> None:
    """Create one context from ``folder`` and fill it (see ``corpus/folder.py`` for the layout)."""
    read = read_context_folder(folder, name)
    created_from = read.settings_file if read.settings_file.is_file() else folder
    _apply(Location(created_from), state.create_context, read.name, read.settings)
    if read.vector_lane:
        state.enable_vector_lane(read.name)
    for write in fill_writes(read, CAPS):
        _write(state, read.name, write)


def _write(state: ServerState, context: str, write: Write) -> None:
    methods: dict[str, Callable[..., object]] = {
        "sources": state.store_passages,
        "associations": state.add_associations,
        "aliases": state.register_aliases,
    }
    try:
        methods[write.kind](context, write.body())
    except ApiError as error:
        path = error.issues[0].path if error.issues else None
        where = write.where(path, error.message)
        raise InputError(
            f"{where}: {error.message}", path=str(where.file), line=where.line
        ) from None


def _apply(where: Location, write: Callable[..., object], *args: object) -> object:
    """Run one write, turning a refusal into an ``InputError`` naming ``where``."""
    try:
        return write(*args)
    except ApiError as error:
        raise InputError(f"{where}: {error.message}", path=str(where.file)) from None
