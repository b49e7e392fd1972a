"""The opt-in toy vector lane: deterministic hashed term vectors, honestly named.

This is **not** an embedding model and is never presented as one: the model
name it reports is ``refserver-toy-hash-v1``. It exists so the vector-lane
half of the contract (``lanes.vector`` on hits, ``plan … vector: {ran: true,
floor}``, fused ranks, ``passage_vector`` evidence lanes) can be exercised
end to end without a provider.

The rule, fixed so a test can predict it:

* A text's features are its passage terms — the very tokenizer BM25 uses
  (HTTP.md §9.4): lowercase ASCII words and camelCase pieces, CJK character
  pairs, lone characters. A paragraph's text is joined by its doc2query
  questions, as in the BM25 document.
* Feature ``t`` with ``n`` occurrences weighs ``1 + ln(n)``, and is hashed
  into one of ``DIMENSIONS`` buckets: ``crc32(utf8(t)) mod DIMENSIONS``, added
  with the sign of bit 31 of the same checksum (so colliding features cancel
  on average instead of piling up).
* The vector is scaled to unit length; similarity is the dot product (the
  cosine), rounded to binary32 as the reference serves it.

Texts sharing no term score ≈ 0 (only hash collisions remain, ±0.1 on the
demo corpus), a paraphrase sharing a few character pairs with a paragraph
scores 0.35–0.6, so the reference's default floor 0.35 is meaningful here.
Corpus statistics play no part: a paragraph's vector never changes when
other paragraphs are stored.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from taguru_refserver.bm25 import f32
from taguru_refserver.tokenize import passage_term_keys

MODEL = "refserver-toy-hash-v1"
DIMENSIONS = 1024
_SIGN_BIT = 1 << 31

Vector = dict[int, float]  # bucket -> weight, unit length, zero buckets absent


def embed(text: str) -> Vector:
    """The unit vector of ``text`` (empty when it has no terms)."""
    counts: dict[str, int] = {}
    for term in passage_term_keys(text):
        counts[term] = counts.get(term, 0) + 1
    vector: Vector = {}
    for term, count in counts.items():
        checksum = zlib.crc32(term.encode("utf-8"))
        sign = -1.0 if checksum & _SIGN_BIT else 1.0
        bucket = checksum % DIMENSIONS
        vector[bucket] = vector.get(bucket, 0.0) + sign * (1.0 + math.log(count))
    norm = math.sqrt(sum(weight * weight for weight in vector.values()))
    if norm == 0.0:
        return {}
    return {bucket: weight / norm for bucket, weight in vector.items() if weight != 0.0}


@dataclass(frozen=True, slots=True)
class VectorHit:
    """One paragraph's cosine against a query vector (binary32)."""

    source: str
    paragraph: int
    score: float


ParagraphKey = tuple[str, int]


class PassageVectors:
    """One vector per stored paragraph of a context, with a bucket index.

    Scoring touches only paragraphs sharing a bucket with the query; every
    other paragraph's cosine is exactly 0.0.
    """

    def __init__(self) -> None:
        self._keys_by_source: dict[str, list[ParagraphKey]] = {}
        self._postings: dict[int, dict[ParagraphKey, float]] = {}

    @property
    def rows(self) -> int:
        """How many paragraph vectors exist."""
        return sum(len(keys) for keys in self._keys_by_source.values())

    def put_source(
        self, source: str, paragraphs: list[str], questions: dict[int, list[str]]
    ) -> None:
        """Embed every paragraph of ``source`` (with its questions), replacing the old ones."""
        self.remove_source(source)
        keys: list[ParagraphKey] = []
        for index, text in enumerate(paragraphs):
            key = (source, index)
            keys.append(key)
            for bucket, weight in embed("\n".join([text, *questions.get(index, ())])).items():
                self._postings.setdefault(bucket, {})[key] = weight
        self._keys_by_source[source] = keys

    def remove_source(self, source: str) -> None:
        keys = self._keys_by_source.pop(source, None)
        if not keys:
            return
        gone = set(keys)
        for bucket in [b for b, rows in self._postings.items() if not gone.isdisjoint(rows)]:
            rows = self._postings[bucket]
            for key in gone.intersection(rows):
                del rows[key]
            if not rows:
                del self._postings[bucket]

    def search(
        self,
        query: str,
        pool: int,
        floor: float,
        eligible: Callable[[str], bool] | None = None,
    ) -> list[VectorHit]:
        """The ``pool`` best cosines at or above ``floor``, best first.

        Ties break on source then paragraph. With ``floor <= 0`` a paragraph
        sharing nothing with the query (cosine 0.0) still qualifies.
        """
        scores: dict[ParagraphKey, float] = {}
        for bucket, weight in embed(query).items():
            for key, row_weight in self._postings.get(bucket, {}).items():
                scores[key] = scores.get(key, 0.0) + weight * row_weight
        if floor <= 0.0:
            for keys in self._keys_by_source.values():
                for key in keys:
                    scores.setdefault(key, 0.0)
        hits = [
            VectorHit(source, paragraph, cosine)
            for (source, paragraph), raw in scores.items()
            if (cosine := f32(raw)) >= floor and (eligible is None or eligible(source))
        ]
        hits.sort(key=lambda hit: (-hit.score, hit.source, hit.paragraph))
        return hits[:pool]
