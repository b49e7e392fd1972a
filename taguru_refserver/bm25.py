"""The lexical passage index and its float32 BM25 (HTTP.md §9.4).

One document per paragraph. Every arithmetic step is rounded to binary32 in
the order the spec writes it, so served scores agree bit for bit with the
reference. (A binary64 operation on two binary32 operands followed by one
rounding to binary32 is exactly the binary32 operation: 53 >= 2·24 + 2.)

``idf`` uses the C library's ``logf``, which is what Rust's ``f32::ln``
calls on Linux; for a few arguments it is one binary32 step away from the
correctly rounded logarithm and that difference is visible in served scores.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from taguru_refserver.tokenize import distinct_term_keys, passage_term_keys

_F32 = struct.Struct("<f")


def f32(value: float) -> float:
    """Round ``value`` to the nearest binary32 (ties to even)."""
    result: float = _F32.unpack(_F32.pack(value))[0]
    return result


def _correctly_rounded_logf(value: float) -> float:
    return f32(math.log(value))


def _load_logf() -> Callable[[float], float]:
    """The platform ``logf``; the correctly rounded logarithm if libm cannot be loaded."""
    for name in (ctypes.util.find_library("m"), "libm.so.6", None):
        try:
            function = ctypes.CDLL(name).logf
        except (OSError, AttributeError):
            continue
        function.argtypes = [ctypes.c_float]
        function.restype = ctypes.c_float
        libm_logf: Callable[[float], float] = function
        return libm_logf
    return _correctly_rounded_logf


logf: Callable[[float], float] = _load_logf()

K1 = f32(1.2)
B = f32(0.75)
_K1_PLUS_ONE = f32(K1 + 1.0)
_ONE_MINUS_B = f32(1.0 - B)


def idf(live_paragraphs: int, carriers: int) -> float:
    """``ln(1 + (N − n + 0.5) / (n + 0.5))`` in binary32, left to right."""
    n_docs = f32(float(live_paragraphs))
    n = f32(float(carriers))
    numerator = f32(f32(n_docs - n) + 0.5)
    denominator = f32(n + 0.5)
    return logf(f32(1.0 + f32(numerator / denominator)))


def term_contribution(idf_value: float, tf: int, length: int, avgdl: float) -> float:
    """``idf * (tf * (k1 + 1)) / (tf + k1 * (1 − b + b * len / avgdl))`` in binary32."""
    t = f32(float(tf))
    numerator = f32(idf_value * f32(t * _K1_PLUS_ONE))
    length_ratio = f32(f32(B * f32(float(length))) / avgdl)
    denominator = f32(t + f32(K1 * f32(_ONE_MINUS_B + length_ratio)))
    return f32(numerator / denominator)


def query_terms(query: str) -> list[str]:
    """The query's term keys, deduplicated keeping first-occurrence order."""
    return distinct_term_keys(query)


def has_searchable_terms(query: str) -> bool:
    """False when the query yields no terms (plan reason "the query yields no searchable terms")."""
    return bool(distinct_term_keys(query))


@dataclass(frozen=True, slots=True)
class ScoredParagraph:
    """One lexical hit: a paragraph and its binary32 BM25 score."""

    source: str
    paragraph: int
    score: float


@dataclass(slots=True)
class _Document:
    source: str
    paragraph: int
    length: int
    term_frequencies: dict[str, int]


class PassageIndex:
    """Inverted index over every live paragraph of one context.

    Search work is proportional to the postings of the query's terms, never to
    the corpus size, apart from the final sort of the touched paragraphs.
    """

    def __init__(self) -> None:
        self._documents: dict[int, _Document] = {}
        self._documents_by_source: dict[str, list[int]] = {}
        self._postings: dict[str, dict[int, int]] = {}
        self._total_length = 0
        self._next_id = 0

    @property
    def live_paragraphs(self) -> int:
        """``N``: every stored paragraph, including ones that yield no terms."""
        return len(self._documents)

    @property
    def total_length(self) -> int:
        """Sum of all document lengths (terms counted with repetition)."""
        return self._total_length

    def sources(self) -> list[str]:
        """Indexed source ids, in byte order."""
        return sorted(self._documents_by_source)

    def put_source(
        self,
        source: str,
        paragraphs: list[str],
        *,
        extra_terms_by_paragraph: dict[int, list[str]] | None = None,
    ) -> None:
        """Index ``source`` as ``paragraphs``, replacing whatever it held before.

        ``extra_terms_by_paragraph`` maps a paragraph index to doc2query
        questions (raw text); their terms join that paragraph's document after
        the paragraph's own terms. Indices outside ``paragraphs`` are ignored.
        """
        self.remove_source(source)
        extras = extra_terms_by_paragraph or {}
        ids: list[int] = []
        for index, text in enumerate(paragraphs):
            terms = passage_term_keys(text)
            for question in extras.get(index, ()):
                terms.extend(passage_term_keys(question))
            frequencies: dict[str, int] = {}
            for term in terms:
                frequencies[term] = frequencies.get(term, 0) + 1
            doc_id = self._next_id
            self._next_id += 1
            self._documents[doc_id] = _Document(source, index, len(terms), frequencies)
            for term, tf in frequencies.items():
                self._postings.setdefault(term, {})[doc_id] = tf
            self._total_length += len(terms)
            ids.append(doc_id)
        self._documents_by_source[source] = ids

    def remove_source(self, source: str) -> bool:
        """Forget every paragraph of ``source``; False when it was not indexed."""
        ids = self._documents_by_source.pop(source, None)
        if ids is None:
            return False
        for doc_id in ids:
            document = self._documents.pop(doc_id)
            self._total_length -= document.length
            for term in document.term_frequencies:
                postings = self._postings[term]
                del postings[doc_id]
                if not postings:
                    del self._postings[term]
        return True

    def average_length(self) -> float:
        """``avgdl = float32(max(total_length / N, 1.0))`` (division in binary64)."""
        if not self._documents:
            return 1.0
        return f32(max(self._total_length / len(self._documents), 1.0))

    def search(
        self,
        query: str,
        limit: int,
        eligible: Callable[[str], bool] | None = None,
    ) -> list[ScoredParagraph]:
        """Up to ``limit`` paragraphs best first (score desc, source asc, paragraph asc).

        ``eligible`` gates which sources may be served; corpus statistics
        (``N``, ``avgdl``, document frequencies) stay corpus-wide regardless.
        Every eligible paragraph sharing a term with the query is a candidate,
        even at score 0.0.
        """
        if limit <= 0 or not self._documents:
            return []
        scores = self._scores(query_terms(query), eligible)
        ranked = sorted(
            scores.items(),
            key=lambda item: (
                -item[1],
                self._documents[item[0]].source,
                self._documents[item[0]].paragraph,
            ),
        )
        return [
            ScoredParagraph(self._documents[doc_id].source, self._documents[doc_id].paragraph, s)
            for doc_id, s in ranked[:limit]
        ]

    def _scores(
        self, terms: Iterable[str], eligible: Callable[[str], bool] | None
    ) -> dict[int, float]:
        n_docs = len(self._documents)
        avgdl = self.average_length()
        verdicts: dict[str, bool] = {}
        scores: dict[int, float] = {}
        for term in terms:
            postings = self._postings.get(term)
            if not postings:
                continue
            term_idf = idf(n_docs, len(postings))
            for doc_id, tf in postings.items():
                document = self._documents[doc_id]
                if eligible is not None:
                    allowed = verdicts.get(document.source)
                    if allowed is None:
                        allowed = verdicts[document.source] = eligible(document.source)
                    if not allowed:
                        continue
                contribution = term_contribution(term_idf, tf, document.length, avgdl)
                previous = scores.get(doc_id)
                scores[doc_id] = contribution if previous is None else f32(previous + contribution)
        return scores
