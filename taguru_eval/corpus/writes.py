"""A context folder as the write requests that fill its context, batched under caps.

The order is HTTP.md §7's: the sources (``POST …/sources``), then the
associations in file order (``POST …/associations``: an association's paragraph
is kept only once its passage is stored), then the aliases
(``POST …/aliases``) in the order a server applies them — concepts, then labels,
each in sorted alias order —, so a split batch applies exactly as one would.
Creating the context is the caller's (its body is ``ContextFolder.settings``).

Each batch holds at most the caps' item count and, when ``Caps.body_bytes`` is
set, at most that many bytes of compact JSON body; an item bigger than that on
its own goes alone, for the server to judge. Every write keeps where its items
came from, so a refusal is told as the file and line of the item it names
(:meth:`SourcesWrite.where` and its siblings).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final, TypeVar

from taguru_eval._base.text import encode_json
from taguru_eval.corpus.folder import (
    ALIAS_SPACES,
    AliasPair,
    Association,
    ContextFolder,
    MarkdownSource,
    alias_line,
    store_request,
)

_SOURCE_MAPS: Final = ("passages", "sections", "tags", "dates")
_SOURCES_OVERHEAD: Final = len(encode_json({key: {} for key in _SOURCE_MAPS})) + len(_SOURCE_MAPS)
_ALIASES_OVERHEAD: Final = len(encode_json({key: {} for key in ALIAS_SPACES})) + len(ALIAS_SPACES)
_ASSOCIATIONS_OVERHEAD: Final = 2
# ``associations[12].weight`` — the index of the item an association refusal names
# (an issue's path; a refusal without issues may only say ``[12].weight: …``).
_ITEM_INDEX: Final = re.compile(r"^associations\[(\d+)\]")
_ANY_INDEX: Final = re.compile(r"\[(\d+)\]")
# ``applied 3 aliases, then …`` (taguru) / ``applied 3 of 9 aliases, then: …``: the
# bindings before the refused one, which a server applies in the body's order.
_APPLIED: Final = re.compile(r"\bapplied (\d+)\b")
_Item = TypeVar("_Item")


@dataclass(frozen=True)
class Caps:
    """The most one request may carry: items per route and, optionally, body bytes."""

    sources: int
    associations: int
    alias_pairs: int
    body_bytes: int | None = None


@dataclass(frozen=True)
class Location:
    """Where a refused item came from: a file, and its line when it can be told."""

    file: Path
    line: int | None = None

    def __str__(self) -> str:
        return str(self.file) if self.line is None else f"{self.file}:{self.line}"


@dataclass(frozen=True)
class SourcesWrite:
    """One ``POST /contexts/{name}/sources`` request."""

    sources: tuple[MarkdownSource, ...]
    folder: Path

    kind: ClassVar[str] = "sources"

    @property
    def items(self) -> int:
        return len(self.sources)

    def body(self) -> object:
        return store_request(list(self.sources))

    def where(self, issue_path: str | None, message: str) -> Location:
        """The file (and line) of the source an issue path such as
        ``sections['a.md'][0].section`` or ``tags['a.md'][1]`` names (without a
        path, the one source of a one-source request)."""
        if issue_path is None:
            return Location(self.sources[0].file if self.items == 1 else self.folder)
        # Source ids may hold quotes and brackets: the longest id that fits wins.
        named = [
            (source, issue_path[len(f"{field}['{source.source}']") :], field)
            for source in self.sources
            for field in _SOURCE_MAPS
            if issue_path.startswith(f"{field}['{source.source}']")
        ]
        if not named:
            return Location(self.folder)
        source, rest, field = max(named, key=lambda found: len(found[0].source))
        line: int | None = None
        if field == "sections":
            index = re.match(r"\[(\d+)\]", rest)
            if index is not None and int(index.group(1)) < len(source.section_lines):
                line = source.section_lines[int(index.group(1))]
        elif field == "tags":
            line = source.tags_line
        elif field == "dates":
            line = source.date_line
        return Location(source.file, line)


@dataclass(frozen=True)
class AssociationsWrite:
    """One ``POST /contexts/{name}/associations`` request."""

    associations: tuple[Association, ...]
    file: Path

    kind: ClassVar[str] = "associations"

    @property
    def items(self) -> int:
        return len(self.associations)

    def body(self) -> object:
        return [association.item for association in self.associations]

    def where(self, issue_path: str | None, message: str) -> Location:
        """The line of the item an issue path such as ``associations[3].weight`` names
        (without one, the one item of a one-item request)."""
        index = _ITEM_INDEX.match(issue_path or "") or _ANY_INDEX.search(message)
        found = None if index is None else int(index.group(1))
        if found is None and self.items == 1:
            found = 0
        if found is None or found >= len(self.associations):
            return Location(self.file)
        return Location(self.file, self.associations[found].line)


@dataclass(frozen=True)
class AliasesWrite:
    """One ``POST /contexts/{name}/aliases`` request: ``pairs`` in the order a server
    applies them, or ``raw`` (``aliases.json`` as read when it is not in that shape)."""

    pairs: tuple[AliasPair, ...]
    file: Path
    raw: object | None = None

    kind: ClassVar[str] = "aliases"

    @property
    def items(self) -> int:
        return len(self.pairs) if self.raw is None else 1

    def body(self) -> object:
        if self.raw is not None:
            return self.raw
        return {
            space: {pair.alias: pair.canonical for pair in self.pairs if pair.space == space}
            for space in ALIAS_SPACES
        }

    def where(self, issue_path: str | None, message: str) -> Location:
        """The binding a refusal stopped at: the one after those it says it applied
        (without that, the one binding of a one-binding request)."""
        applied = _APPLIED.search(message)
        index = int(applied.group(1)) if applied is not None else 0 if self.items == 1 else None
        if self.raw is not None or index is None or index >= len(self.pairs):
            return Location(self.file)
        pair = self.pairs[index]
        return Location(self.file, alias_line(self.file, pair.space, pair.alias))


Write = SourcesWrite | AssociationsWrite | AliasesWrite


def fill_writes(folder: ContextFolder, caps: Caps) -> list[Write]:
    """Every write that fills ``folder``'s context once it exists, in order."""
    writes: list[Write] = []
    writes += source_writes(folder.sources, folder.folder, caps)
    writes += association_writes(folder.associations, folder.associations_file, caps)
    pairs = folder.alias_pairs()
    if pairs is None and folder.aliases is not None:
        writes.append(AliasesWrite((), folder.aliases_file, raw=folder.aliases))
    elif pairs:
        writes += alias_writes(pairs, folder.aliases_file, caps)
    return writes


def source_writes(
    sources: Sequence[MarkdownSource], folder: Path, caps: Caps
) -> list[SourcesWrite]:
    """``sources`` in batches under ``caps``."""
    slices = _batches(sources, _source_bytes, caps.sources, caps.body_bytes, _SOURCES_OVERHEAD)
    return [SourcesWrite(tuple(sources[part]), folder) for part in slices]


def association_writes(
    associations: Sequence[Association], file: Path, caps: Caps
) -> list[AssociationsWrite]:
    """``associations`` in file order, in batches under ``caps``."""
    slices = _batches(
        associations,
        lambda association: len(encode_json(association.item)) + 1,
        caps.associations,
        caps.body_bytes,
        _ASSOCIATIONS_OVERHEAD,
    )
    return [AssociationsWrite(tuple(associations[part]), file) for part in slices]


def alias_writes(pairs: Sequence[AliasPair], file: Path, caps: Caps) -> list[AliasesWrite]:
    """``pairs`` in application order, in batches under ``caps``."""
    slices = _batches(
        pairs,
        lambda pair: len(encode_json(pair.alias)) + len(encode_json(pair.canonical)) + 2,
        caps.alias_pairs,
        caps.body_bytes,
        _ALIASES_OVERHEAD,
    )
    return [AliasesWrite(tuple(pairs[part]), file) for part in slices]


def split_write(write: Write, caps: Caps) -> list[Write]:
    """``write``'s items in batches under ``caps`` (a smaller body cap than it was
    made under splits it; one item, or a raw aliases body, stays whole)."""
    if isinstance(write, SourcesWrite):
        return list(source_writes(write.sources, write.folder, caps))
    if isinstance(write, AssociationsWrite):
        return list(association_writes(write.associations, write.file, caps))
    if write.raw is not None:
        return [write]
    return list(alias_writes(write.pairs, write.file, caps))


def _source_bytes(source: MarkdownSource) -> int:
    """An upper bound of what ``source`` adds to a store body: its entry in each map
    it appears in, each with its key, colon and comma."""
    key = len(encode_json(source.source)) + 2
    size = key + len(encode_json(source.text))
    if source.sections:
        size += key + len(encode_json(source.sections))
    if source.tags:
        size += key + len(encode_json(source.tags))
    if source.date is not None:
        size += key + len(str(source.date))
    return size


def _batches(
    items: Sequence[_Item],
    size: Callable[[_Item], int],
    max_items: int,
    max_bytes: int | None,
    overhead: int,
) -> list[slice]:
    """Consecutive slices of ``items``: at most ``max_items`` each and, when
    ``max_bytes`` is set, at most that many bytes (``overhead`` plus each item's
    ``size``) unless one item alone is more."""
    slices: list[slice] = []
    start, total = 0, overhead
    for index, item in enumerate(items):
        cost = size(item) if max_bytes is not None else 0
        full = index - start >= max_items or (max_bytes is not None and total + cost > max_bytes)
        if index > start and full:
            slices.append(slice(start, index))
            start, total = index, overhead
        total += cost
    if start < len(items):
        slices.append(slice(start, len(items)))
    return slices
