"""The search-only shape of ``vs_taguru.py``: a corpus of real text and one-search cases.

:func:`generated` writes ``documents`` Markdown sources (three paragraphs of
three sentences each) whose sentences are drawn from real English prose that
every Python install carries (the language reference's topics in
``pydoc_data``), and ``cases`` eval cases, each a few words of one
document's paragraph with that document as its relevant source and
``limit: 10``: a BM25 search that answers ten hits of text, one call a case.

:func:`converted` turns a public collection in the BEIR layout
(``corpus.jsonl`` with ``_id``/``title``/``text``, ``queries.jsonl`` with
``_id``/``text``, ``qrels/test.tsv``) into the same two things with
``import-qrels``'s reader: one source per document (``docs/<id>.md``), one case
per judged query (repeated up to ``cases``).

Both write a context folder in ``serve``'s layout (``context.json`` and the
``.md`` files) and an ``eval.jsonl`` beside it.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from taguru_eval.corpus.documents import write_context_folder
from taguru_eval.inputs.qrels import import_beir

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
WORD = re.compile(r"[A-Za-z]{5,}")


def _sentences() -> list[str]:
    from pydoc_data.topics import topics

    found: list[str] = []
    for text in topics.values():
        for paragraph in re.split(r"\n\s*\n", text):
            if paragraph.lstrip().startswith((">>>", "...")) or paragraph.startswith("   "):
                continue  # code examples and indented grammar
            flat = " ".join(paragraph.split())
            found.extend(s for s in SENTENCE_END.split(flat) if 40 <= len(s) <= 400)
    return found


def _write_eval(path: Path, name: str, cases: list[dict[str, object]]) -> Path:
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"taguru_eval": 1, "name": name}) + "\n")
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    return path


def generated(folder: Path, documents: int, cases: int, seed: int = 42) -> tuple[Path, Path]:
    """(context folder, eval.jsonl) of the generated collection."""
    rnd = random.Random(seed)
    sentences = _sentences()
    corpus = folder / "search"
    corpus.mkdir(parents=True)
    (corpus / "context.json").write_text("{}\n", encoding="utf-8")
    paragraphs: list[tuple[str, str]] = []
    for index in range(documents):
        source = f"doc{index:05d}.md"
        body = [" ".join(rnd.sample(sentences, 3)) for _ in range(3)]
        (corpus / source).write_text("\n\n".join(body) + "\n", encoding="utf-8")
        paragraphs.extend((source, paragraph) for paragraph in body)
    rows: list[dict[str, object]] = []
    for index in range(cases):
        source, paragraph = rnd.choice(paragraphs)
        words = WORD.findall(paragraph)
        query = " ".join(rnd.sample(words, min(4, len(words))))
        rows.append(
            {
                "case_id": f"q{index:06d}",
                "query": query,
                "expected_sources": [{"source": source, "relevance": 1}],
                "options": {"limit": 10},
            }
        )
    return corpus, _write_eval(folder / "search.eval.jsonl", "search-only", rows)


def converted(collection: Path, folder: Path, cases: int) -> tuple[Path, Path]:
    """(context folder, eval.jsonl) of a BEIR-layout collection, as ``import-qrels`` reads
    it; its judged queries repeat up to ``cases``."""
    imported = import_beir(collection)
    if imported.eval_text is None or imported.documents is None:
        raise SystemExit(f"{collection}: no judged query to run")
    corpus = folder / "search"
    write_context_folder(corpus, {}, imported.documents)
    base = [json.loads(line) for line in imported.eval_text.splitlines()[1:]]
    rows = [
        {
            "case_id": f"{base[index % len(base)]['case_id']}-{index:06d}",
            "query": base[index % len(base)]["query"],
            "expected_sources": base[index % len(base)]["expected_sources"],
            "options": {"limit": 10},
        }
        for index in range(cases)
    ]
    return corpus, _write_eval(folder / "search.eval.jsonl", collection.name, rows)
