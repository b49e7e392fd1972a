"""A collection's documents written as a context folder ``serve`` and ``load`` read.

``import-qrels`` turns a BEIR folder's ``corpus.jsonl`` into a context folder in
the layout :mod:`taguru_eval.corpus.folder` reads: a ``context.json`` and one
markdown source per document, ``docs/<id>.md``. Its text is the title (on one
line) as the first paragraph and the document's text after a blank line, so
paragraph 0 is the title, as a BEIR retriever that indexes ``title + text``
sees it. The sources sit under ``docs/`` so that no document can be the
top-level ``README.md`` that a folder reader skips; ``context.json`` makes the
folder one context even though its markdown lives in a sub-folder.

A document id becomes a file name with every character outside
``A-Z a-z 0-9 _ . - ~`` percent-encoded (a ``/`` or a space cannot split or
escape the folder) and a leading ``.`` encoded too (a dot-file is not read).
The folder is written whole or not at all: into a staging folder beside the
target, renamed into place once complete.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final
from urllib.parse import quote

from taguru_eval._base.text import encode_json
from taguru_eval.corpus.folder import CONTEXT_FILE, FRONT_MATTER_FENCE

DOCUMENTS_FOLDER: Final = "docs"
"""The sub-folder holding one markdown source per document."""
MAX_FILE_NAME_BYTES: Final = 255
"""The longest file name Linux and macOS file systems take (NAME_MAX)."""
_LINE_BREAKS: Final = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


def document_source(doc_id: str) -> str:
    """The source id (path inside the context folder) of document ``doc_id``."""
    name = quote(doc_id, safe="")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return f"{DOCUMENTS_FOLDER}/{name}.md"


def source_fits(source: str) -> bool:
    """Whether the file name of ``source`` fits a file system's name limit."""
    return len(source.rpartition("/")[2].encode()) <= MAX_FILE_NAME_BYTES


def document_markdown(title: str, text: str) -> str:
    """The markdown of one document: its title on one line as paragraph 0, then
    its text. A document whose first line would read as a front-matter fence
    (``---``) gets an empty front matter first, so the line stays text."""
    heading = _LINE_BREAKS.sub(" ", title).strip()
    body = f"{heading}\n\n{text}" if heading else text
    if body.split("\n", 1)[0].rstrip("\r") == FRONT_MATTER_FENCE:
        body = f"{FRONT_MATTER_FENCE}\n{FRONT_MATTER_FENCE}\n{body}"
    return body if body.endswith("\n") else body + "\n"


def write_context_folder(
    target: Path, settings: Mapping[str, object], docs: Mapping[str, str]
) -> None:
    """Write ``context.json`` (``settings``) and each ``docs`` entry (source id ->
    markdown) under ``target``, which must not exist yet: all staged in a sibling
    folder and renamed into place, or nothing (the staging folder is removed on
    any failure). Raises :class:`OSError` naming what failed."""
    parent = target.parent
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    try:
        (staging / CONTEXT_FILE).write_bytes(encode_json(dict(settings)) + b"\n")
        (staging / DOCUMENTS_FOLDER).mkdir()
        for source, markdown in docs.items():
            (staging / source).write_text(markdown, encoding="utf-8", newline="")
        os.rename(staging, target)  # refuses a non-empty target instead of replacing it
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
