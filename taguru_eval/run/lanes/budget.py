"""Baseline client-side budget truncation (EVALUATE.md §7.3), byte-exact.

With ``--max-items/--max-bytes/--max-tokens`` in baseline mode, the search
hits are admitted "skip, don't stop" against the same accounting the server
uses for an evidence package: every hit is measured as the compact JSON of
its evidence envelope (§7.3.1) — its real ``text`` included — in UTF-8 bytes
and in token quarters (1 per ASCII scalar, 4 per other scalar). The text is
only measured here; nothing of it is returned.

Binary32 numbers are spelled the way the reference's serializer writes an
``f32`` (§7.3.3: ``1.0``, ``0.54696476``, ``1e-7``, ``3.4028235e38``), which is
not Python's ``repr`` of the widened double.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from taguru_eval._base.text import F32, dumps_json, json_f32
from taguru_eval.tables.shapes import LaneScore

_ASCII_LIMIT = 0x80


def quarters(text: str) -> int:
    """Token quarters of ``text``: 1 per ASCII scalar, 4 per any other scalar."""
    other = sum(1 for ch in text if ord(ch) >= _ASCII_LIMIT)
    return len(text) + 3 * other


def token_estimate(text: str) -> int:
    """Estimated tokens of ``text`` (``ceil(quarters / 4)``)."""
    return -(-quarters(text) // 4)


def array_overhead(n: int) -> int:
    """Bytes (and quarters) of the brackets and commas of a compact array of ``n`` items."""
    return 2 if n == 0 else n + 1


def _string(text: str) -> str:
    # serde_json's escapes are Python's with ensure_ascii=False (lower-case \u00xx).
    return json.dumps(text, ensure_ascii=False)


def compact_json(value: object, f32_fields: Iterable[str] = ()) -> str:
    """Compact JSON text of ``value``; floats under a key in ``f32_fields`` are binary32."""
    f32 = frozenset(f32_fields)

    def mark(item: object, as_f32: bool) -> object:
        if isinstance(item, float) and not isinstance(item, bool):
            return F32(item) if as_f32 else item
        if isinstance(item, Mapping):
            return {str(key): mark(child, str(key) in f32) for key, child in item.items()}
        if isinstance(item, list | tuple):
            return [mark(child, as_f32) for child in item]
        return item

    return dumps_json(mark(value, False))


def measure(text: str) -> tuple[int, int]:
    """(UTF-8 bytes, quarters) of a serialized text."""
    return len(text.encode("utf-8")), quarters(text)


@dataclass(frozen=True, slots=True)
class MeasuredHit:
    """One search hit as the budget sees it (``text`` is measured, never kept)."""

    source: str
    paragraph: int
    score: float
    text: str
    lanes: Mapping[str, LaneScore]


def lane_name(lanes: Mapping[str, object]) -> str:
    """``passage_fused`` with both lanes, ``passage_vector`` with only vector, else bm25."""
    if "bm25" in lanes and "vector" in lanes:
        return "passage_fused"
    if "vector" in lanes:
        return "passage_vector"
    return "passage_bm25"


def passage_envelope(context: str, hit: MeasuredHit, rank: int) -> str:
    """The compact evidence envelope of the hit at 1-based ``rank`` (§7.3.1)."""
    lanes = ",".join(
        f'"{lane}":{{"rank":{int(hit.lanes[lane]["rank"])},'
        f'"score":{json_f32(float(hit.lanes[lane]["score"]))}}}'
        for lane in ("bm25", "vector")
        if lane in hit.lanes
    )
    candidate = _string(f"passage\u0000{context}\u0000{hit.source}\u0000{hit.paragraph}")
    return (
        f'{{"candidate_id":{candidate},"kind":"passage","fused_rank":{rank},'
        f'"lane_ranks":[{{"lane":"{lane_name(hit.lanes)}","rank":{rank}}}],'
        f'"citation_refs":[],"passage":{{"source":{_string(hit.source)},'
        f'"paragraph":{hit.paragraph},"score":{json_f32(hit.score)},'
        f'"text":{_string(hit.text)},"lanes":{{{lanes}}}}}}}'
    )


@dataclass(frozen=True, slots=True)
class Truncation:
    """Which hits a budget admitted and the usage it reports (§7.3.5)."""

    kept: tuple[int, ...]
    items_used: int
    bytes_used: int
    tokens_used: int
    omitted_total: int


def truncate(
    context: str, hits: Sequence[MeasuredHit], max_items: int, max_bytes: int, max_tokens: int
) -> Truncation:
    """Admit hits in server order, skipping (not stopping at) any that does not fit."""
    kept: list[int] = []
    total_bytes = 0
    total_quarters = 0
    omitted = 0
    for index, hit in enumerate(hits):
        size, weight = measure(passage_envelope(context, hit, index + 1))
        count = len(kept) + 1
        cand_bytes = array_overhead(count) + total_bytes + size + 2
        cand_tokens = -(-(array_overhead(count) + total_quarters + weight + 2) // 4)
        if count <= max_items and cand_bytes <= max_bytes and cand_tokens <= max_tokens:
            kept.append(index)
            total_bytes += size
            total_quarters += weight
        else:
            omitted += 1
    n = len(kept)
    return Truncation(
        kept=tuple(kept),
        items_used=n,
        bytes_used=array_overhead(n) + total_bytes + 2,
        tokens_used=-(-(array_overhead(n) + total_quarters + 2) // 4),
        omitted_total=omitted,
    )
