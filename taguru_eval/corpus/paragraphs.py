"""Paragraph split (HTTP.md §9.2) and markdown heading sections (HTTP.md §9.3).

Shared by the two sides of a context folder: the reference server splits a
stored text with it, and the folder reader (``corpus/folder.py``, used by
``serve DIR`` and ``load``) finds the heading markers to send with it, as
taguru's own ingest helper does on the client side.

Blank means empty or only Unicode White_Space (Rust ``char::is_whitespace``),
not Python's ``str.isspace`` which also accepts U+001C–U+001F.
"""

from __future__ import annotations

import re

from taguru_eval._base.text import is_blank, trim

MAX_SECTION_LABEL_BYTES = 512

# A whole paragraph that is one ATX heading line: 1-6 '#', at least one space
# or tab, the heading text, then optionally whitespace plus a closing '#' run.
_ATX_HEADING = re.compile(r"#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")


def split_paragraphs(text: str) -> list[str]:
    """Split ``text`` into paragraphs at runs of blank lines, in order.

    Interior line breaks (``\\n`` and ``\\r\\n``) stay inside a paragraph; the
    line break after its last line does not.
    """
    return [paragraph for _line, paragraph in paragraphs_with_lines(text)]


def paragraphs_with_lines(text: str) -> list[tuple[int, str]]:
    """:func:`split_paragraphs` with each paragraph's first line (0-based, ``\\n`` lines)."""
    paragraphs: list[tuple[int, str]] = []
    current: list[str] = []  # raw lines (without "\n") of the open paragraph
    first = 0
    for number, line in enumerate(text.split("\n")):
        content = line[:-1] if line.endswith("\r") else line
        if is_blank(content):
            if current:
                paragraphs.append((first, _close(current)))
                current = []
        else:
            if not current:
                first = number
            current.append(line)
    if current:
        paragraphs.append((first, _close(current)))
    return paragraphs


def _close(lines: list[str]) -> str:
    # Interior lines keep their "\r"; the last line contributes its content only.
    last = lines[-1]
    if last.endswith("\r"):
        lines[-1] = last[:-1]
    return "\n".join(lines)


def heading_label(paragraph: str) -> str | None:
    """The section label when ``paragraph`` is exactly one ATX heading line, else ``None``.

    Labels that are empty after stripping or longer than 512 UTF-8 bytes are
    skipped, like the upstream ingest helper does.
    """
    if "\n" in paragraph:
        return None
    match = _ATX_HEADING.fullmatch(paragraph)
    if match is None:
        return None
    label = trim(match.group(1))
    if not label or len(label.encode("utf-8")) > MAX_SECTION_LABEL_BYTES:
        return None
    return label


def heading_sections(paragraphs: list[str]) -> list[tuple[int, str]]:
    """``(paragraph index, label)`` for every heading-only paragraph, in order."""
    sections: list[tuple[int, str]] = []
    for index, paragraph in enumerate(paragraphs):
        label = heading_label(paragraph)
        if label is not None:
            sections.append((index, label))
    return sections
