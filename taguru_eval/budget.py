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
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from taguru_eval.tables import LaneScore
from taguru_eval.text import to_f32

_ASCII_LIMIT = 0x80


def format_f32(value: float) -> str:
    """The reference's shortest-round-trip spelling of a binary32 value."""
    f32 = to_f32(value)
    if math.isnan(f32) or math.isinf(f32):
        return "null"
    if f32 == 0.0:
        return "-0.0" if math.copysign(1.0, f32) < 0 else "0.0"
    sign = "-" if f32 < 0 else ""
    digits, exponent = _shortest_digits(abs(f32))
    length = len(digits)
    kk = exponent + 1  # value = 0.D × 10^kk
    k = kk - length
    if k >= 0 and kk <= 13:
        text = digits + "0" * k + ".0"
    elif 0 < kk <= 13:
        text = digits[:kk] + "." + digits[kk:]
    elif -6 < kk <= 0:
        text = "0." + "0" * (-kk) + digits
    elif length == 1:
        text = f"{digits}e{kk - 1}"
    else:
        text = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + text


def _shortest_digits(value: float) -> tuple[str, int]:
    """(significant digits without trailing zeros, decimal exponent of the first digit)."""
    for precision in range(1, 10):
        candidate = f"{value:.{precision - 1}e}"
        if _round_trips(float(candidate), value):
            break
    mantissa, _, exponent = candidate.partition("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    return digits, int(exponent)


def _round_trips(candidate: float, value: float) -> bool:
    try:
        return to_f32(candidate) == value
    except OverflowError:  # a rounded-up spelling beyond binary32's range
        return False


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

    def emit(item: object, as_f32: bool) -> str:
        if item is None:
            return "null"
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int):
            return str(item)
        if isinstance(item, float):
            return format_f32(item) if as_f32 else _f64(item)
        if isinstance(item, str):
            return _string(item)
        if isinstance(item, Mapping):
            members = (f"{_string(str(k))}:{emit(v, str(k) in f32)}" for k, v in item.items())
            return "{" + ",".join(members) + "}"
        if isinstance(item, Sequence):
            return "[" + ",".join(emit(v, as_f32) for v in item) + "]"
        raise TypeError(f"cannot measure {type(item).__name__}")

    return emit(value, False)


def _f64(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return "null"
    text = repr(value)
    return text if ("." in text or "e" in text) else text + ".0"


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
        f'"score":{format_f32(float(hit.lanes[lane]["score"]))}}}'
        for lane in ("bm25", "vector")
        if lane in hit.lanes
    )
    candidate = _string(f"passage\u0000{context}\u0000{hit.source}\u0000{hit.paragraph}")
    return (
        f'{{"candidate_id":{candidate},"kind":"passage","fused_rank":{rank},'
        f'"lane_ranks":[{{"lane":"{lane_name(hit.lanes)}","rank":{rank}}}],'
        f'"citation_refs":[],"passage":{{"source":{_string(hit.source)},'
        f'"paragraph":{hit.paragraph},"score":{format_f32(hit.score)},'
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
