"""Importing relevance judgments (TREC qrels and topics, a BEIR folder) as an eval set.

Two inputs, one result (:class:`QrelsImport`): an eval.jsonl text whose cases
are the collection's queries — ``case_id`` the query id as it is, ``query``
its text, ``expected_sources`` its judged documents with their grades as
``relevance`` — and a report of every query and judgment that was not carried,
and why. A BEIR folder also gives its documents (:attr:`QrelsImport.documents`)
for a context folder (:mod:`taguru_eval.corpus.documents`).

* **TREC** (:func:`import_trec`): qrels lines ``qid iteration docno grade``
  (whitespace-separated; the iteration is ignored, as trec_eval ignores it)
  and a topics file: ``<top>`` SGML (``<num>``, ``<title>``, ``<desc>``,
  ``<narr>``; the ``Number:``/``Topic:``/``Description:`` labels removed), TREC
  XML (``<topics><topic number="…"><query>…``), or TSV ``qid<TAB>query``. The
  query is the topic's ``title`` (else ``query``) field, or ``topic_field``.
  Fields are percent-decoded (``export --trec`` encodes ``%`` and whitespace),
  and a docno ``source#3``, ``source#2+5`` or ``source#*`` (with an optional
  ``~2``, ``export --wildcards taguru``'s repeated entry) names paragraphs of
  a source, so an exported run's qrels come back as the eval set they left.
  Any other docno is a whole source (any paragraph), through
  ``source_template``.
* **BEIR** (:func:`import_beir`): ``corpus.jsonl`` (``_id``, ``title``,
  ``text``), ``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv``
  (header ``query-id corpus-id score``, then tab-separated lines). Each judged
  document is the source ``docs/<id>.md`` of the context folder written
  beside the eval set.
* **ir_datasets** (:func:`import_irds`, the ``ir`` extra): an ``irds:`` id's
  queries and qrels, and its documents as a BEIR folder's when it has some.

What is not carried, each counted and named in the report: a judgment graded
0 or below (eval.jsonl scores ``relevance >= 1`` only, EVALUATE.md §4.2; a
grade-0 entry would measure nothing), a judgment of a document the corpus does
not hold (taguru's preflight refuses such a source, exit 2), a query with no
topic text, and a query whose judgments are all dropped (a case with no judged
source measures nothing). A grade above 3 is an error: eval.jsonl grades are
0..=3 and rescaling them would change nDCG. Nothing here writes a file.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

from taguru_eval._base.text import split_lines, trim
from taguru_eval.contract import IMPORT_CAP
from taguru_eval.corpus.documents import document_markdown, document_source, source_fits
from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.inputs.golden import REPORT_STAMP, report_text
from taguru_eval.inputs.reading import jsonl_values, read_utf8

__all__ = [
    "BEIR_SPLIT",
    "IRDS_PREFIX",
    "MAX_GRADE",
    "Judgment",
    "QrelsImport",
    "QrelsOptions",
    "import_beir",
    "import_irds",
    "import_trec",
    "report_text",
]

MAX_GRADE: Final = 3
"""The highest ``relevance`` eval.jsonl takes (EVALUATE.md §1.2, Step E)."""
BEIR_SPLIT: Final = "test"
BEIR_CORPUS: Final = "corpus.jsonl"
BEIR_QUERIES: Final = "queries.jsonl"
BEIR_QRELS: Final = "qrels"
EXAMPLES: Final = 20
"""Dropped judgments listed per reason in the report (all are counted)."""

NOT_RELEVANT: Final = "graded 0 or below: not relevant, and eval.jsonl judges relevance >= 1 only"
NO_DOCUMENT: Final = (
    "the document is not in corpus.jsonl (taguru's preflight would refuse the source, exit 2)"
)
EMPTY_DOCUMENT: Final = "the document's title and text are both empty (a source needs text)"
NO_TOPIC: Final = "no query text: the topics (or queries.jsonl) do not hold this query id"
EMPTY_TOPIC: Final = "the query text is empty"
NO_JUDGMENT: Final = "no judgment in the qrels"
NONE_RELEVANT: Final = "no judgment left to carry (all were dropped, see judgments)"

_PASSAGE: Final = re.compile(r"(?P<source>.+)#(?P<paragraphs>\*|\d+(?:\+\d+)*)(?:~\d+)?")
_TOP: Final = re.compile(r"<top>(.*?)</top>", re.DOTALL | re.IGNORECASE)
_SGML_FIELD: Final = re.compile(r"<(\w+)>([^<]*)")
_SGML_LABELS: Final = {
    "num": "number:",
    "title": "topic:",
    "desc": "description:",
    "narr": "narrative:",
}
_DEFAULT_FIELDS: Final = ("title", "query")


@dataclass(frozen=True)
class QrelsOptions:
    """The import's knobs (``import-qrels``'s flags)."""

    name: str | None = None
    source_template: str = "{}"
    """TREC: the source id of a docno (``{}`` is the docno, or its source part)."""
    topic_field: str | None = None
    """TREC ``<top>``/XML topics: the field holding the query (default title, else query)."""
    split: str = BEIR_SPLIT
    """BEIR: the qrels file ``qrels/<split>.tsv``."""


@dataclass(frozen=True)
class Judgment:
    qid: str
    docno: str
    grade: int
    line: int


@dataclass
class QrelsImport:
    """What an import produced: the eval.jsonl text (``None`` when no query became a
    case), the report, the sources the cases name and, for a BEIR folder, the
    documents as ``{source id: markdown}``."""

    eval_text: str | None
    report: dict[str, Any]
    sources: frozenset[str] = frozenset()
    documents: dict[str, str] | None = None

    @property
    def cases(self) -> int:
        count: int = self.report["counts"]["cases"]
        return count


@dataclass
class _Drops:
    """Judgments not carried, by reason: a count and the first few, for the report."""

    reasons: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, why: str, judgment: Judgment) -> None:
        self.counts[why] = self.counts.get(why, 0) + 1
        listed = self.reasons.setdefault(why, [])
        if len(listed) < EXAMPLES:
            listed.append({"line": judgment.line, "qid": judgment.qid, "docno": judgment.docno})

    def report(self) -> list[dict[str, Any]]:
        return [
            {"why": why, "count": self.counts[why], "first": listed}
            for why, listed in self.reasons.items()
        ]


def _read_text(path: Path) -> str:
    # A byte order mark would become part of the first id; no format here gives it meaning.
    return read_utf8(path, str(path), IMPORT_CAP)[1].removeprefix("\ufeff")


def _error(shown: str, line: int, name: str, detail: str, fix: str) -> InputError:
    return InputError(
        f"{shown}: line {line}: {name}: {detail}", path=shown, line=line, field=name, hint=fix
    )


def _grade(text: str, shown: str, line: int, name: str) -> int:
    try:
        grade = int(text)
    except ValueError:
        raise _error(
            shown,
            line,
            name,
            f"'{text}' is not an integer grade",
            "a relevance grade is 0, 1, 2 or 3",
        ) from None
    if grade > MAX_GRADE:
        raise _error(
            shown,
            line,
            name,
            f"grade {grade} is above {MAX_GRADE}, the highest relevance eval.jsonl takes",
            "map the collection's grades onto 0..3 first (rescaling changes nDCG, so the "
            "import does not guess)",
        )
    return grade


def read_trec_qrels(path: Path) -> list[Judgment]:
    """``qid iteration docno grade`` lines (blank lines skipped), fields percent-decoded."""
    shown = str(path)
    judgments = []
    for index, raw in enumerate(split_lines(_read_text(path))):
        fields = raw.split()
        if not fields:
            continue
        line = index + 1
        if len(fields) != 4:
            raise _error(
                shown,
                line,
                "qrels",
                f"{len(fields)} field(s), expected 4 (qid iteration docno grade)",
                "a TREC qrels line is 'qid 0 docno grade'; a BEIR qrels file is read "
                "from its folder: import-qrels DIR",
            )
        grade = _grade(fields[3], shown, line, "grade")
        judgments.append(Judgment(unquote(fields[0]), unquote(fields[2]), grade, line))
    return judgments


def read_beir_qrels(path: Path) -> list[Judgment]:
    """A BEIR ``qrels/<split>.tsv``: a header line, then ``query-id\\tcorpus-id\\tscore``."""
    shown = str(path)
    judgments = []
    header_seen = False
    for index, raw in enumerate(split_lines(_read_text(path))):
        if not trim(raw):
            continue
        line = index + 1
        fields = raw.rstrip("\r").split("\t")
        if len(fields) != 3:
            raise _error(
                shown,
                line,
                "qrels",
                f"{len(fields)} tab-separated field(s), expected 3 (query-id corpus-id score)",
                "BEIR qrels lines are 'query-id<TAB>corpus-id<TAB>score'",
            )
        if not header_seen:
            header_seen = True
            if re.fullmatch(r"\s*-?\d+\s*", fields[2]):
                raise _error(
                    shown,
                    line,
                    "header",
                    "the first line is a judgment, not the header",
                    "add the header line 'query-id<TAB>corpus-id<TAB>score' (BEIR's own "
                    "loader skips the first line, so it would lose this judgment)",
                )
            continue
        grade = _grade(trim(fields[2]), shown, line, "score")
        judgments.append(Judgment(fields[0], fields[1], grade, line))
    return judgments


def _sgml_topics(text: str, shown: str, wanted: str | None) -> dict[str, tuple[str, int]]:
    topics: dict[str, tuple[str, int]] = {}
    for block in _TOP.finditer(text):
        line = text.count("\n", 0, block.start()) + 1
        found: dict[str, str] = {}
        for match in _SGML_FIELD.finditer(block.group(1)):
            tag = match.group(1).casefold()
            value = " ".join(match.group(2).split())
            label = _SGML_LABELS.get(tag)
            if label and value.casefold().startswith(label):
                value = value[len(label) :].strip()
            found.setdefault(tag, value)
        qid = found.get("num", "")
        if not qid:
            raise _error(shown, line, "num", "a <top> without a <num>", "give every topic a <num>")
        _add_topic(topics, qid, _field_of(found, wanted, shown, line, qid), line, shown)
    if not topics:
        raise InputError(
            f"{shown}: no <top> … </top> topic in the file",
            path=shown,
            hint="a TREC topics file holds <top> blocks; a TSV one holds 'qid<TAB>query' lines",
        )
    return topics


def _xml_topics(text: str, shown: str, wanted: str | None) -> dict[str, tuple[str, int]]:
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        line = exc.position[0]
        raise _error(shown, line, "topics", f"not well-formed XML: {exc}", "fix the XML") from None
    topics: dict[str, tuple[str, int]] = {}
    for number, topic in enumerate(root.iter("topic"), start=1):
        qid = trim(topic.get("number") or topic.get("id") or "")
        if not qid:
            raise InputError(
                f"{shown}: topic {number}: no 'number' attribute",
                path=shown,
                field="number",
                hint='give every <topic> a number="…" attribute',
            )
        found = {
            child.tag.casefold(): " ".join("".join(child.itertext()).split()) for child in topic
        }
        _add_topic(topics, qid, _field_of(found, wanted, shown, None, qid), None, shown)
    if not topics:
        raise InputError(f"{shown}: no <topic> element in the file", path=shown)
    return topics


def _field_of(
    found: Mapping[str, str], wanted: str | None, shown: str, line: int | None, qid: str
) -> str:
    names = (wanted,) if wanted else _DEFAULT_FIELDS
    for name in names:
        if name.casefold() in found:
            return found[name.casefold()]
    where = f"line {line}: " if line is not None else ""
    raise InputError(
        f"{shown}: {where}topic '{qid}' has no {' or '.join(names)} field "
        f"(it has: {', '.join(sorted(found)) or 'none'})",
        path=shown,
        line=line,
        field=names[0],
        hint="pick the query field with --topic-field",
    )


def _add_topic(
    topics: dict[str, tuple[str, int]], qid: str, query: str, line: int | None, shown: str
) -> None:
    if qid in topics:
        raise InputError(
            f"{shown}: {f'line {line}: ' if line else ''}topic '{qid}' repeats",
            path=shown,
            line=line,
            field="num",
            hint="each query id may appear once",
        )
    topics[qid] = (query, line or 0)


def _tsv_topics(text: str, shown: str) -> dict[str, tuple[str, int]]:
    topics: dict[str, tuple[str, int]] = {}
    for index, raw in enumerate(split_lines(text)):
        if not trim(raw):
            continue
        line = index + 1
        qid, tab, query = raw.rstrip("\r").partition("\t")
        if not tab:
            raise _error(
                shown,
                line,
                "query",
                "no tab: a TSV topics line is 'qid<TAB>query'",
                "separate the id and the query with a tab (or give a <top> topics file)",
            )
        _add_topic(topics, qid, trim(query), line, shown)
    return topics


def read_topics(path: Path, topic_field: str | None) -> dict[str, tuple[str, int]]:
    """``{qid: (query text, line)}`` of a ``<top>``, XML or TSV topics file (by content)."""
    shown = str(path)
    text = _read_text(path)
    head = text.lstrip("\ufeff \t\r\n")
    if head.startswith("<"):
        if _TOP.search(text):
            return _sgml_topics(text, shown, topic_field)
        return _xml_topics(text, shown, topic_field)
    if topic_field is not None:
        raise InputError(
            f"{shown}: --topic-field picks a field of <top> or <topic> topics; this file is "
            "TSV (qid<TAB>query), which has one",
            path=shown,
            hint="drop --topic-field",
        )
    return _tsv_topics(text, shown)


def _jsonl_objects(path: Path) -> Iterable[tuple[int, Mapping[str, object]]]:
    shown = str(path)
    for line, value in jsonl_values(_read_text(path), shown):
        if not isinstance(value, dict):
            raise _error(shown, line, "line", "not a JSON object", "one JSON object per line")
        yield line, value


def _string(obj: Mapping[str, object], key: str, shown: str, line: int, *, required: bool) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        kind = "missing" if value is None else f"a {type(value).__name__}, not a string"
        raise _error(shown, line, key, kind, f"'{key}' must be a JSON string")
    return value


def read_beir_queries(path: Path) -> dict[str, tuple[str, int]]:
    """``queries.jsonl``: ``{_id: (text trimmed, line)}``."""
    shown = str(path)
    queries: dict[str, tuple[str, int]] = {}
    for line, obj in _jsonl_objects(path):
        qid = _string(obj, "_id", shown, line, required=True)
        text = _string(obj, "text", shown, line, required=True)
        if qid in queries:
            raise _error(
                shown,
                line,
                "_id",
                f"query '{qid}' repeats line {queries[qid][1]}",
                "ids are unique",
            )
        queries[qid] = (trim(text), line)
    return queries


def read_beir_corpus(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``corpus.jsonl``: ``({_id: markdown}, {_id: why it is not written})``."""
    shown = str(path)
    documents: dict[str, str] = {}
    lines: dict[str, int] = {}
    unwritten: dict[str, str] = {}
    for line, obj in _jsonl_objects(path):
        doc_id = _string(obj, "_id", shown, line, required=True)
        title = _string(obj, "title", shown, line, required=False)
        text = _string(obj, "text", shown, line, required=False)
        if doc_id in lines:
            raise _error(
                shown,
                line,
                "_id",
                f"document '{doc_id}' repeats line {lines[doc_id]}",
                "ids are unique",
            )
        lines[doc_id] = line
        if not doc_id:
            raise _error(shown, line, "_id", "empty", "every document needs an id")
        if not source_fits(document_source(doc_id)):
            raise _error(
                shown,
                line,
                "_id",
                "too long for a file name once percent-encoded",
                "shorten the id (the source file is named after it)",
            )
        if not trim(title) and not trim(text):
            unwritten[doc_id] = EMPTY_DOCUMENT
            continue
        documents[doc_id] = document_markdown(title, text)
    return documents, unwritten


def _trec_entry(template: str) -> Callable[[Judgment], dict[str, Any]]:
    """A TREC judgment's ``expected_sources`` entry: a passage docno names paragraphs."""

    def entry(judgment: Judgment) -> dict[str, Any]:
        match = _PASSAGE.fullmatch(judgment.docno)
        if match is None:
            return {"source": template.replace("{}", judgment.docno), "relevance": judgment.grade}
        listed = match.group("paragraphs")
        return {
            "source": template.replace("{}", match.group("source")),
            "paragraphs": [] if listed == "*" else [int(p) for p in listed.split("+")],
            "relevance": judgment.grade,
        }

    return entry


def _beir_entry(judgment: Judgment) -> dict[str, Any]:
    """A BEIR judgment's entry: the document's source in the written context folder."""
    return {"source": document_source(judgment.docno), "relevance": judgment.grade}


def _assemble(
    judgments: Sequence[Judgment],
    topics: Mapping[str, tuple[str, int]],
    name: str,
    *,
    entry: Callable[[Judgment], dict[str, Any]],
    held: Mapping[str, str],
) -> tuple[str | None, dict[str, Any], frozenset[str]]:
    """The eval.jsonl text, the report's counts/queries/judgments, the named sources.

    Cases follow the topics' order, entries the qrels' order; ``entry`` makes a
    judgment's ``expected_sources`` entry and ``held`` maps a docno that is not
    carried (a BEIR document the corpus lacks or cannot hold) to why.
    """
    drops = _Drops()
    by_query: dict[str, dict[str, Judgment]] = {}
    repeated = 0
    for judgment in judgments:
        seen = by_query.setdefault(judgment.qid, {})
        earlier = seen.get(judgment.docno)
        if earlier is not None:
            repeated += 1
            if earlier.grade >= judgment.grade:
                continue
        seen[judgment.docno] = judgment
    carried: dict[str, list[Judgment]] = {}
    for qid, docs in by_query.items():
        kept = []
        for judgment in docs.values():
            if judgment.grade <= 0:
                drops.add(NOT_RELEVANT, judgment)
            elif judgment.docno in held:
                drops.add(held[judgment.docno], judgment)
            else:
                kept.append(judgment)
        carried[qid] = kept
    cases: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for qid, (query, _line) in topics.items():
        if qid not in carried:
            queries.append({"qid": qid, "why": NO_JUDGMENT})
        elif not query:
            queries.append({"qid": qid, "why": EMPTY_TOPIC})
        elif not carried[qid]:
            queries.append({"qid": qid, "why": NONE_RELEVANT})
        elif not trim(qid):
            queries.append({"qid": qid, "why": "the query id is blank (a case_id must not be)"})
        else:
            cases.append(
                {
                    "case_id": qid,
                    "query": query,
                    "expected_sources": [entry(judgment) for judgment in carried[qid]],
                }
            )
    for qid in carried.keys() - topics.keys():
        queries.append({"qid": qid, "why": NO_TOPIC})
    eval_text = None
    if cases:
        lines = [json.dumps({"taguru_eval": 1, "name": name}, ensure_ascii=False)]
        lines.extend(json.dumps(case, ensure_ascii=False) for case in cases)
        eval_text = "\n".join(lines) + "\n"
        load_eval_text(eval_text, "eval.jsonl")  # what is written loads as an eval set
    carried_count = sum(len(case["expected_sources"]) for case in cases)
    counts = {
        "queries": len(topics),
        "judgments": len(judgments),
        "cases": len(cases),
        "judgments_carried": carried_count,
        "judgments_dropped": sum(drops.counts.values()),
        "judgments_of_dropped_queries": sum(len(carried.get(d["qid"], [])) for d in queries),
        "repeated_judgments": repeated,
    }
    why_counts: dict[str, int] = {}
    for dropped in queries:
        why_counts[dropped["why"]] = why_counts.get(dropped["why"], 0) + 1
    report: dict[str, Any] = {
        "counts": counts,
        "queries_dropped": queries,
        "queries_dropped_by_reason": why_counts,
        "judgments_dropped": drops.report(),
        "warnings": (
            [
                f"{repeated} (query, document) pair(s) are judged more than once: the highest "
                "grade is kept"
            ]
            if repeated
            else []
        ),
    }
    sources = frozenset(entry["source"] for case in cases for entry in case["expected_sources"])
    return eval_text, report, sources


def import_trec(
    qrels: str | Path, topics: str | Path, options: QrelsOptions | None = None
) -> QrelsImport:
    """TREC qrels and topics as an eval set (see the module docstring).

    Raises :class:`InputError` (exit 2) naming the file, line and field of the
    first malformed line, a grade above 3, or a repeated topic.
    """
    opts = options or QrelsOptions()
    judgments = read_trec_qrels(Path(qrels))
    read = read_topics(Path(topics), opts.topic_field)
    name = opts.name or Path(qrels).stem
    eval_text, body, sources = _assemble(
        judgments, read, name, entry=_trec_entry(opts.source_template), held={}
    )
    report: dict[str, Any] = {
        REPORT_STAMP: 1,
        "format": "trec",
        "qrels": str(qrels),
        "topics": str(topics),
        **body,
        "fields_not_carried": {
            "iteration": "the qrels' second field; trec_eval ignores it too",
        },
    }
    return QrelsImport(eval_text, report, sources)


def import_beir(folder: str | Path, options: QrelsOptions | None = None) -> QrelsImport:
    """A BEIR folder as an eval set and its documents (see the module docstring)."""
    opts = options or QrelsOptions()
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{root}: not a directory", path=str(root))
    qrels_file = root / BEIR_QRELS / f"{opts.split}.tsv"
    for required in (root / BEIR_CORPUS, root / BEIR_QUERIES, qrels_file):
        if not required.is_file():
            present = sorted(p.name for p in (root / BEIR_QRELS).glob("*.tsv"))
            splits = f" (qrels/ holds: {', '.join(present)})" if present else ""
            raise InputError(
                f"{root}: no {required.relative_to(root).as_posix()}{splits}",
                path=str(required),
                hint="a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv; "
                "pick the split with --split",
            )
    documents, unwritten = read_beir_corpus(root / BEIR_CORPUS)
    queries = read_beir_queries(root / BEIR_QUERIES)
    judgments = read_beir_qrels(qrels_file)
    held = {
        judgment.docno: NO_DOCUMENT
        for judgment in judgments
        if judgment.docno not in documents and judgment.docno not in unwritten
    }
    held.update(unwritten)
    name = opts.name or root.name
    eval_text, body, sources = _assemble(judgments, queries, name, entry=_beir_entry, held=held)
    report: dict[str, Any] = {
        REPORT_STAMP: 1,
        "format": "beir",
        "folder": str(root),
        "split": opts.split,
        **body,
        "documents": {"read": len(documents) + len(unwritten), "written": len(documents)},
        "documents_not_written": [{"id": doc_id, "why": why} for doc_id, why in unwritten.items()],
        "fields_not_carried": {
            "metadata": "corpus.jsonl and queries.jsonl metadata have no field in a source "
            "or an eval case",
        },
    }
    return QrelsImport(
        eval_text,
        report,
        sources,
        {document_source(doc_id): markdown for doc_id, markdown in documents.items()},
    )


IRDS_PREFIX: Final = "irds:"
"""An ``import-qrels`` source naming an ``ir_datasets`` id (``irds:beir/scifact/test``)."""
IRDS_NO_DOCUMENT: Final = "the document is not in the dataset's documents"


def _utf8(value: str, shown: str, where: str, field_name: str) -> str:
    """``value`` when UTF-8 can hold it; a lone surrogate (a dataset's text decoded
    with ``surrogateescape``) is refused: no file can be written with it."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{shown}: {where}: {field_name} holds a lone surrogate at character "
            f"{exc.start}, which UTF-8 cannot write",
            path=shown,
            field=field_name,
            hint="fix the dataset's text (it was decoded from bytes that are not UTF-8)",
        ) from None
    return value


def import_irds(dataset_id: str, options: QrelsOptions | None = None) -> QrelsImport:
    """An ``ir_datasets`` dataset (the ``ir`` extra) as an eval set: its queries
    (``default_text()``, or the field ``topic_field`` names) and qrels, and, when
    it has documents, those documents as a context folder's sources, as a BEIR
    folder's are (``docs/<id>.md``, judgments of absent documents dropped).
    Without documents each doc id is a source through ``source_template``.

    Whatever ``ir_datasets`` itself does for the id happens (a registered
    public dataset may be downloaded to its cache by ir_datasets); an unknown id
    is an :class:`InputError`, and a failure inside ir_datasets a
    :class:`~taguru_eval.errors.RunError` naming the id.
    """
    from taguru_eval._base.extras import load_extra
    from taguru_eval.errors import RunError

    opts = options or QrelsOptions()
    ir_datasets = load_extra("ir", "ir_datasets")
    shown = f"{IRDS_PREFIX}{dataset_id}"
    try:
        dataset = ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(
            f"{shown}: ir_datasets knows no dataset '{dataset_id}'",
            path=shown,
            hint="list the ids with 'ir_datasets list', or register a local dataset first",
        ) from None
    for part in ("queries", "qrels"):
        if not getattr(dataset, f"has_{part}")():
            raise InputError(f"{shown}: the dataset has no {part}", path=shown)
    try:
        topics: dict[str, tuple[str, int]] = {}
        for number, query in enumerate(dataset.queries_iter(), start=1):
            if opts.topic_field is not None and not hasattr(query, opts.topic_field):
                raise InputError(
                    f"{shown}: query {number}: no field '{opts.topic_field}' "
                    f"(it has: {', '.join(query._fields)})",
                    path=shown,
                    field=opts.topic_field,
                    hint="pick one of the query's fields with --topic-field",
                )
            text = (
                getattr(query, opts.topic_field)
                if opts.topic_field is not None
                else query.default_text()
            )
            text = _utf8(str(text), shown, f"query {number}", opts.topic_field or "text")
            _add_topic(topics, str(query.query_id), trim(text), number, shown)
        judgments = [
            Judgment(str(qrel.query_id), str(qrel.doc_id), int(qrel.relevance), number)
            for number, qrel in enumerate(dataset.qrels_iter(), start=1)
        ]
        for judgment in judgments:
            if judgment.grade > MAX_GRADE:
                _grade(str(judgment.grade), shown, judgment.line, "relevance")
        documents: dict[str, str] | None = None
        unwritten: dict[str, str] = {}
        if dataset.has_docs():
            documents = {}
            for doc in dataset.docs_iter():
                doc_id = str(doc.doc_id)
                title = str(getattr(doc, "title", "") or "")
                title = _utf8(title, shown, f"document '{doc_id}'", "title")
                text = str(getattr(doc, "text", None) or doc.default_text())
                text = _utf8(text, shown, f"document '{doc_id}'", "text")
                if not source_fits(document_source(doc_id)):
                    raise InputError(
                        f"{shown}: document '{doc_id}': too long for a file name once "
                        "percent-encoded",
                        path=shown,
                        field="doc_id",
                    )
                if not trim(title) and not trim(text):
                    unwritten[doc_id] = EMPTY_DOCUMENT
                else:
                    documents[doc_id] = document_markdown(title, text)
    except (InputError, KeyboardInterrupt):
        raise
    except Exception as exc:  # ir_datasets' own failures: a download, a bad file
        raise RunError(
            f"{shown}: ir_datasets could not read it: {type(exc).__name__}: {exc}"
        ) from None
    if documents is None:
        entry, held = _trec_entry(opts.source_template), {}
    else:
        entry = _beir_entry
        held = {j.docno: IRDS_NO_DOCUMENT for j in judgments if j.docno not in documents}
        held.update(unwritten)
    name = opts.name or dataset_id.replace("/", "-")
    eval_text, body, sources = _assemble(judgments, topics, name, entry=entry, held=held)
    report: dict[str, Any] = {
        REPORT_STAMP: 1,
        "format": "ir_datasets",
        "dataset": dataset_id,
        **body,
    }
    if documents is not None:
        report["documents"] = {"read": len(documents) + len(unwritten), "written": len(documents)}
        report["documents_not_written"] = [
            {"id": doc_id, "why": why} for doc_id, why in unwritten.items()
        ]
    report["fields_not_carried"] = {
        "iteration": "the qrels' iteration; trec_eval ignores it too",
    }
    documents_out = (
        None
        if documents is None
        else {document_source(doc_id): markdown for doc_id, markdown in documents.items()}
    )
    return QrelsImport(eval_text, report, sources, documents_out)
