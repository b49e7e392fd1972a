"""Load a corpus folder into a ``ServerState`` through the HTTP write path.

Layout (one sub-folder of DIR per context, named after the folder):

* ``context.json`` (optional) — the body of ``PUT /contexts/{name}``, plus
  one key of this server's own, removed before the body is sent:
  ``"vector_lane": true`` gives this context the toy vector lane
  (``vectors.py``) whatever the server's ``--vector-lane`` says.
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
whose name starts with ``.``) is ignored. Contexts are created, then sources
stored, then associations, then aliases, each through the same
``ServerState`` method an HTTP request reaches, so revision counters are real.
A problem is an ``InputError`` naming the file (and line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from taguru_eval._base import jsonstrict
from taguru_eval._base.text import parse_decimal, split_lines, trim
from taguru_eval.errors import InputError
from taguru_eval.refserver.envelope import ApiError
from taguru_eval.refserver.model import MAX_ASSOCIATIONS_PER_REQUEST, MAX_PASSAGES_PER_REQUEST
from taguru_eval.refserver.paragraphs import heading_sections, split_paragraphs
from taguru_eval.refserver.state import ServerState

CONTEXT_FILE = "context.json"
VECTOR_LANE_KEY = "vector_lane"
ASSOCIATIONS_FILE = "associations.jsonl"
ALIASES_FILE = "aliases.json"
FRONT_MATTER_FENCE = "---"
FRONT_MATTER_KEYS = ("tags", "date", "section")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISSUE_INDEX = re.compile(r"associations\[(\d+)\]")


@dataclass
class MarkdownSource:
    """One ``*.md`` file read for storing: its text and the request's ancillary entries."""

    source: str
    text: str
    sections: list[dict[str, object]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    date: int | None = None


def load_corpus_dir(state: ServerState, path: str | Path) -> list[str]:
    """Load every context folder under ``path`` into ``state``; returns the context names."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(f"{root}: not a directory", path=str(root))
    names: list[str] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        load_context_dir(state, folder)
        names.append(folder.name)
    return names


def load_context_dir(state: ServerState, folder: Path, name: str | None = None) -> None:
    """Create one context from ``folder`` and fill it (see the module doc for the layout)."""
    context = name or folder.name
    body = _read_json(folder / CONTEXT_FILE) if (folder / CONTEXT_FILE).is_file() else None
    created_from = folder / CONTEXT_FILE if body is not None else folder
    vector_lane = False
    if isinstance(body, dict) and VECTOR_LANE_KEY in body:
        body = dict(body)
        vector_lane = body.pop(VECTOR_LANE_KEY)
        if not isinstance(vector_lane, bool):
            raise InputError(
                f"{created_from}: {VECTOR_LANE_KEY} must be true or false", path=str(created_from)
            )
    _apply(created_from, state.create_context, context, body)
    if vector_lane:
        state.enable_vector_lane(context)
    sources = [read_markdown(file, folder) for file in _markdown_files(folder)]
    for start in range(0, len(sources), MAX_PASSAGES_PER_REQUEST):
        batch = sources[start : start + MAX_PASSAGES_PER_REQUEST]
        _apply(folder, state.store_passages, context, store_request(batch))
    associations_path = folder / ASSOCIATIONS_FILE
    if associations_path.is_file():
        items, lines = _read_jsonl(associations_path)
        for start in range(0, len(items), MAX_ASSOCIATIONS_PER_REQUEST):
            chunk = items[start : start + MAX_ASSOCIATIONS_PER_REQUEST]
            try:
                state.add_associations(context, chunk)
            except ApiError as error:
                line = _line_of_issue(error, lines[start : start + MAX_ASSOCIATIONS_PER_REQUEST])
                where = f"{associations_path}:{line}" if line else str(associations_path)
                raise InputError(
                    f"{where}: {error.message}", path=str(associations_path), line=line
                ) from None
    aliases_path = folder / ALIASES_FILE
    if aliases_path.is_file():
        aliases = _read_json(aliases_path)
        _apply(aliases_path, state.register_aliases, context, aliases)


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
    source = MarkdownSource(source=file.relative_to(folder).as_posix(), text=text)
    lines = text.split("\n")
    front_label: str | None = None
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
            front_label = _front_matter_line(file, number, line, source) or front_label
        source.text = "\n".join(lines[closing + 1 :])
    paragraphs = split_paragraphs(source.text)
    markers: dict[int, str] = {}
    if front_label is not None and paragraphs:
        markers[0] = front_label
    markers.update(dict(heading_sections(paragraphs)))  # a heading at paragraph 0 wins
    source.sections = [{"paragraph": p, "section": label} for p, label in sorted(markers.items())]
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
        return None
    if key == "date":
        source.date = _parse_date(value, where, file, number)
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


def _markdown_files(folder: Path) -> list[Path]:
    files = []
    for file in folder.rglob("*.md"):
        relative = file.relative_to(folder)
        if not file.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        if relative.as_posix() == "README.md":
            continue
        files.append(file)
    return sorted(files, key=lambda f: f.relative_to(folder).as_posix())


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


def _line_of_issue(error: ApiError, lines: list[int]) -> int | None:
    """The file line of the first item a refused association batch names."""
    text = error.issues[0].path if error.issues else error.message
    match = _ISSUE_INDEX.search(text) or re.search(r"\[(\d+)\]", text)
    if match is None:
        return None
    index = int(match.group(1))
    return lines[index] if index < len(lines) else None


def _apply(where: Path, write: Callable[..., object], *args: object) -> object:
    """Run one write, turning a refusal into an ``InputError`` naming ``where``."""
    try:
        return write(*args)
    except ApiError as error:
        raise InputError(f"{where}: {error.message}", path=str(where)) from None
