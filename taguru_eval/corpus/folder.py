"""One context folder read as what a server is sent to create and fill its context.

Layout (``serve DIR`` serves every sub-folder of DIR as one context named after
it; ``load`` takes one such folder, or DIR itself):

* ``context.json`` (optional) — the body of ``PUT /contexts/{name}``, plus
  one key of the reference server's own, removed before the body is sent:
  ``"vector_lane": true`` gives that context the reference server's toy vector
  lane.
* every ``*.md`` under the context folder except a top-level ``README.md`` is
  one source whose id is its POSIX path relative to the context folder. The
  text (BOM removed) is split into paragraphs by HTTP.md §9.2; every
  heading-only paragraph becomes a section marker (§9.3 ATX rule). Optional
  front matter — a first line ``---``, ``key: value`` lines, a closing
  ``---`` — is not part of the text: ``tags: a, b``, ``date: 1700000000`` or
  ``date: 2024-05-01`` (UTC midnight), ``section: LABEL`` (a marker at
  paragraph 0).
* ``associations.jsonl`` (optional) — one ``POST …/associations`` item per line.
* ``aliases.json`` (optional) — the body of ``POST …/aliases``.

Everything else (``eval.jsonl``, ``thresholds.json``, other files, folders
whose name starts with ``.``) is ignored. A file that cannot be read is an
``InputError`` naming the file (and line); what the server would refuse is left
to the server, and every item keeps the file and line it came from so that a
refusal can name them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from taguru_eval._base import jsonstrict
from taguru_eval._base.text import parse_decimal, split_lines, trim
from taguru_eval.corpus.paragraphs import heading_label, paragraphs_with_lines
from taguru_eval.errors import InputError

CONTEXT_FILE: Final = "context.json"
VECTOR_LANE_KEY: Final = "vector_lane"
ASSOCIATIONS_FILE: Final = "associations.jsonl"
ALIASES_FILE: Final = "aliases.json"
UNREAD_MARKDOWN: Final = "README.md"
"""A top-level README.md describes the folder; it is not a source."""
FRONT_MATTER_FENCE: Final = "---"
FRONT_MATTER_KEYS: Final = ("tags", "date", "section")
ALIAS_SPACES: Final = ("concepts", "labels")
"""The two maps of an aliases body, in the order a server applies them (HTTP.md §7.4)."""
_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass
class MarkdownSource:
    """One ``*.md`` file read for storing: its text, its request entries and their lines.

    ``section_lines`` holds the file line of each marker in ``sections`` (its
    heading, or the front matter's ``section:`` line); ``tags_line`` and
    ``date_line`` the front matter lines those came from.
    """

    source: str
    text: str
    file: Path
    sections: list[dict[str, object]] = field(default_factory=list)
    section_lines: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    tags_line: int | None = None
    date: int | None = None
    date_line: int | None = None


@dataclass(frozen=True)
class Association:
    """One ``associations.jsonl`` item (any JSON value: the server judges it) and its line."""

    item: object
    line: int


@dataclass(frozen=True)
class AliasPair:
    """One binding of ``aliases.json``: ``space`` is ``concepts`` or ``labels``."""

    space: str
    alias: str
    canonical: str


@dataclass
class ContextFolder:
    """Everything one context folder asks a server to hold.

    ``settings`` is ``context.json`` without the reference server's
    ``vector_lane`` key (``None`` without the file); ``aliases`` is
    ``aliases.json`` as read (``None`` without the file).
    """

    name: str
    folder: Path
    settings: object | None = None
    vector_lane: bool = False
    sources: list[MarkdownSource] = field(default_factory=list)
    associations: list[Association] = field(default_factory=list)
    aliases: object | None = None

    @property
    def settings_file(self) -> Path:
        return self.folder / CONTEXT_FILE

    @property
    def associations_file(self) -> Path:
        return self.folder / ASSOCIATIONS_FILE

    @property
    def aliases_file(self) -> Path:
        return self.folder / ALIASES_FILE

    def alias_pairs(self) -> list[AliasPair] | None:
        """The bindings in the order a server applies them — concepts, then labels,
        each in sorted alias order — or ``None`` when ``aliases.json`` is not two
        maps of strings (it is then sent as it is, for the server to judge)."""
        if not isinstance(self.aliases, dict):
            return None
        pairs: list[AliasPair] = []
        for space in ALIAS_SPACES:
            bindings = self.aliases.get(space, {})
            if not isinstance(bindings, dict) or not all(
                isinstance(canonical, str) for canonical in bindings.values()
            ):
                return None
            pairs.extend(AliasPair(space, alias, bindings[alias]) for alias in sorted(bindings))
        return pairs


def context_folders(root: Path) -> list[Path]:
    """The context folders under ``root`` as ``serve DIR`` reads them, by name."""
    if not root.is_dir():
        raise InputError(f"{root}: not a directory", path=str(root))
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def holds_a_context(folder: Path) -> bool:
    """Whether ``folder`` is itself a context folder: it has a ``context.json``,
    ``associations.jsonl``, ``aliases.json`` or a ``*.md`` of its own (a
    ``README.md`` aside). Otherwise its sub-folders are the contexts."""
    if any((folder / name).is_file() for name in (CONTEXT_FILE, ASSOCIATIONS_FILE, ALIASES_FILE)):
        return True
    return any(
        file.is_file() and file.name != UNREAD_MARKDOWN and not file.name.startswith(".")
        for file in folder.glob("*.md")
    )


def read_context_folder(folder: Path, name: str | None = None) -> ContextFolder:
    """Read one context folder (see the module doc); the context is named ``name``,
    else after the folder."""
    read = ContextFolder(name=name or folder.name, folder=folder)
    if read.settings_file.is_file():
        read.settings, read.vector_lane = _settings(read.settings_file)
    read.sources = [read_markdown(file, folder) for file in markdown_files(folder)]
    if read.associations_file.is_file():
        items, lines = _read_jsonl(read.associations_file)
        read.associations = [
            Association(item, line) for item, line in zip(items, lines, strict=True)
        ]
    if read.aliases_file.is_file():
        read.aliases = _read_json(read.aliases_file)
    return read


def _settings(file: Path) -> tuple[object, bool]:
    """``context.json`` without ``vector_lane``, and that key's value."""
    body = _read_json(file)
    if not isinstance(body, dict) or VECTOR_LANE_KEY not in body:
        return body, False
    body = dict(body)
    vector_lane = body.pop(VECTOR_LANE_KEY)
    if not isinstance(vector_lane, bool):
        raise InputError(f"{file}: {VECTOR_LANE_KEY} must be true or false", path=str(file))
    return body, vector_lane


def store_request(sources: list[MarkdownSource]) -> dict[str, object]:
    """The ``POST …/sources`` body storing ``sources`` with their markers and metadata."""
    request: dict[str, object] = {"passages": {s.source: s.text for s in sources}}
    sections = {s.source: s.sections for s in sources if s.sections}
    tags = {s.source: s.tags for s in sources if s.tags}
    dates = {s.source: s.date for s in sources if s.date is not None}
    if sections:
        request["sections"] = sections
    if tags:
        request["tags"] = tags
    if dates:
        request["dates"] = dates
    return request


def read_markdown(file: Path, folder: Path) -> MarkdownSource:
    """Read one markdown source: front matter, paragraphs, heading sections."""
    text = _read_text(file).removeprefix("\ufeff")
    source = MarkdownSource(source=file.relative_to(folder).as_posix(), text=text, file=file)
    lines = text.split("\n")
    front_label: tuple[str, int] | None = None
    body_start = 0  # the index of the text's first line in ``lines``
    if lines and lines[0].rstrip("\r") == FRONT_MATTER_FENCE:
        closing = next(
            (i for i in range(1, len(lines)) if lines[i].rstrip("\r") == FRONT_MATTER_FENCE),
            None,
        )
        if closing is None:
            raise InputError(
                f"{file}:1: front matter opened with '---' is never closed", path=str(file), line=1
            )
        for number, line in enumerate(lines[1:closing], start=2):
            label = _front_matter_line(file, number, line, source)
            front_label = (label, number) if label is not None else front_label
        body_start = closing + 1
        source.text = "\n".join(lines[body_start:])
    paragraphs = paragraphs_with_lines(source.text)
    markers: dict[int, tuple[str, int]] = {}
    if front_label is not None and paragraphs:
        markers[0] = front_label
    for index, (first_line, paragraph) in enumerate(paragraphs):
        heading = heading_label(paragraph)
        if heading is not None:  # a heading at paragraph 0 wins over the front matter's
            markers[index] = (heading, body_start + first_line + 1)
    for index, (marker, marker_line) in sorted(markers.items()):
        source.sections.append({"paragraph": index, "section": marker})
        source.section_lines.append(marker_line)
    return source


def _front_matter_line(file: Path, number: int, line: str, source: MarkdownSource) -> str | None:
    """Apply one ``key: value`` line; returns the ``section`` label when it is one."""
    content = line.rstrip("\r")
    if not trim(content):
        return None
    key, colon, value = content.partition(":")
    key, value = trim(key), trim(value)
    where = f"{file}:{number}"
    if not colon or key not in FRONT_MATTER_KEYS:
        raise InputError(
            f"{where}: front matter line must be 'key: value' with key one of "
            f"{', '.join(FRONT_MATTER_KEYS)} (got {content!r})",
            path=str(file),
            line=number,
            field=key or None,
        )
    if key == "tags":
        source.tags = [tag for tag in (trim(part) for part in value.split(",")) if tag]
        source.tags_line = number
        return None
    if key == "date":
        source.date = _parse_date(value, where, file, number)
        source.date_line = number
        return None
    if not value:
        raise InputError(f"{where}: section must not be empty", path=str(file), line=number)
    return value


def _parse_date(value: str, where: str, file: Path, number: int) -> int:
    epoch = parse_decimal(value, jsonstrict.U64_MAX)
    if epoch is not None:
        return epoch
    if _DATE.fullmatch(value):
        try:
            moment = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            pass
        else:
            return int(moment.timestamp())
    raise InputError(
        f"{where}: date must be epoch seconds or YYYY-MM-DD (got {value!r})",
        path=str(file),
        line=number,
        field="date",
    )


def markdown_files(folder: Path) -> list[Path]:
    """The folder's sources, in source-id order."""
    files = []
    for file in folder.rglob("*.md"):
        relative = file.relative_to(folder)
        if not file.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        if relative.as_posix() == UNREAD_MARKDOWN:
            continue
        files.append(file)
    return sorted(files, key=lambda f: f.relative_to(folder).as_posix())


def alias_line(file: Path, space: str, alias: str) -> int | None:
    """The line of ``alias``'s key inside ``space`` in ``file`` (``aliases.json``),
    when the file spells it plainly; ``None`` when it cannot be told."""
    try:
        text = _read_text(file)
    except InputError:
        return None
    key = re.compile(re.escape(json.dumps(alias, ensure_ascii=False)) + r"\s*:")
    spaces = {
        match.start(): match.group(1) for match in re.finditer(r'"(concepts|labels)"\s*:', text)
    }
    for match in key.finditer(text):
        inside = [start for start in spaces if start < match.start()]
        if inside and spaces[max(inside)] == space:
            return text.count("\n", 0, match.start()) + 1
    return None


def _read_text(file: Path) -> str:
    try:
        return file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{file}: not UTF-8 text (byte {error.start})", path=str(file)) from None
    except OSError as error:
        raise InputError(f"{file}: cannot read: {error.strerror}", path=str(file)) from None


def _strict_json(text: str) -> object:
    def reject(token: str) -> object:
        raise ValueError(f"{token} is not valid JSON")

    try:
        value = json.loads(text, parse_constant=reject)
    except RecursionError:
        raise ValueError("recursion limit exceeded") from None
    # serde's nesting limit, as taguru reads these files: a file refused or
    # served whatever the depth of the stack that happens to load it.
    jsonstrict.check_depth(value)
    return value


def _read_json(file: Path) -> object:
    try:
        return _strict_json(_read_text(file).removeprefix("\ufeff"))
    except ValueError as error:
        raise InputError(f"{file}: not valid JSON: {error}", path=str(file)) from None


def _read_jsonl(file: Path) -> tuple[list[object], list[int]]:
    items: list[object] = []
    lines: list[int] = []
    text = _read_text(file).removeprefix("\ufeff")
    for number, line in enumerate(split_lines(text), start=1):
        if not trim(line):
            continue
        try:
            items.append(_strict_json(line))
        except ValueError as error:
            raise InputError(
                f"{file}:{number}: not valid JSON: {error}", path=str(file), line=number
            ) from None
        lines.append(number)
    return items, lines
