"""Budgeted selection of fused evidence (HTTP.md §9.10 step 7 and §8.1's accounting).

In order: passages whose normalized text is a near duplicate (character
bigram Dice ≥ 0.9) of a better-ranked kept passage are omitted as
``duplicate_passage``; an optional reorder (the reranker) permutes the
survivors; associations sharing (subject, label) form a contradiction group
admitted or omitted as one unit; units are reordered in tiers of
``max(1, max_items // 4)`` putting units whose primary source is new first;
then units are admitted greedily, an over-budget unit being skipped
(``budget_exceeded``, or ``contradiction_group_exceeds_budget`` for a group)
while the walk goes on.

Every item is charged the UTF-8 length of its compact JSON (without its own
``bytes``/``estimated_tokens``) and its token quarters (1 per ASCII scalar,
4 per other scalar); a citation entry is charged once, by the first unit
that introduces it. ``bytes_used`` adds both arrays' bracket-and-comma
overhead, and tokens are the ceiling of the summed quarters over four.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from taguru_eval._base.normalize import normalize_entry
from taguru_refserver.envelope import MAX_LISTED_ISSUES
from taguru_refserver.fusion import KIND_ASSOCIATION, KIND_PASSAGE, FusedCandidate, Locator
from taguru_refserver.jsonsize import json_size

NEAR_DUPLICATE_DICE = 0.9
DUPLICATE_PASSAGE = "duplicate_passage"
BUDGET_EXCEEDED = "budget_exceeded"
GROUP_EXCEEDS_BUDGET = "contradiction_group_exceeds_budget"

Reorder = Callable[[list[FusedCandidate]], list[int] | None]


@dataclass(frozen=True)
class BudgetLimits:
    max_items: int
    max_bytes: int
    max_tokens: int

    def to_wire(self) -> dict[str, object]:
        return {
            "max_items": self.max_items,
            "max_bytes": self.max_bytes,
            "max_tokens": self.max_tokens,
        }


def array_overhead(count: int) -> int:
    """Brackets and commas of a compact array of ``count`` elements."""
    return 2 if count == 0 else count + 1


def tokens(quarters: int) -> int:
    return -(-quarters // 4)


def bigrams(text: str) -> frozenset[str]:
    """Character bigrams of the normalized text; a 1-character text pairs with itself."""
    folded = normalize_entry(text)
    if len(folded) < 2:
        return frozenset(ch + ch for ch in folded)
    return frozenset(folded[i : i + 2] for i in range(len(folded) - 1))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    """``2|A∩B| / (|A|+|B|)``; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    return 2 * len(a & b) / (len(a) + len(b))


def omission(candidate: FusedCandidate, reason: str) -> dict[str, object]:
    return {
        "candidate_id": candidate.candidate.candidate_id,
        "kind": candidate.candidate.kind,
        "reason": reason,
    }


def suppress_near_duplicates(
    fused: Sequence[FusedCandidate],
) -> tuple[list[FusedCandidate], list[dict[str, object]]]:
    """Survivors in fused order, and one ``duplicate_passage`` omission per dropped passage."""
    survivors: list[FusedCandidate] = []
    omitted: list[dict[str, object]] = []
    kept: list[tuple[str, frozenset[str]]] = []
    for group in fused:
        if group.candidate.kind != KIND_PASSAGE:
            survivors.append(group)
            continue
        grams = bigrams(group.candidate.text)
        original = next(
            (cid for cid, seen in kept if dice(seen, grams) >= NEAR_DUPLICATE_DICE), None
        )
        if original is None:
            kept.append((group.candidate.candidate_id, grams))
            survivors.append(group)
        else:
            omitted.append({**omission(group, DUPLICATE_PASSAGE), "duplicate_of": original})
    return survivors, omitted


def admission_units(survivors: Sequence[FusedCandidate]) -> list[list[int]]:
    """Survivor indices grouped into units, each placed at its first member's position."""
    members: dict[tuple[str, str], list[int]] = {}
    for index, group in enumerate(survivors):
        key = group.candidate.subject_label
        if key is not None:
            members.setdefault(key, []).append(index)
    units: list[list[int]] = []
    placed: set[int] = set()
    for index, group in enumerate(survivors):
        if index in placed:
            continue
        key = group.candidate.subject_label
        unit = members[key] if key is not None and len(members[key]) > 1 else [index]
        placed.update(unit)
        units.append(unit)
    return units


def diversity_order(
    units: list[list[int]], survivors: Sequence[FusedCandidate], width: int
) -> list[list[int]]:
    """Within each tier of ``width`` units, units with a not-yet-seen primary source first.

    A unit's primary source is its first member's; an unsourced unit always
    counts as novel and never marks a source seen.
    """
    seen: set[str] = set()
    ordered: list[list[int]] = []
    for start in range(0, len(units), width):
        novel: list[list[int]] = []
        repeat: list[list[int]] = []
        for unit in units[start : start + width]:
            source = survivors[unit[0]].candidate.source
            if source is None:
                novel.append(unit)
            elif source in seen:
                repeat.append(unit)
            else:
                seen.add(source)
                novel.append(unit)
        ordered += novel + repeat
    return ordered


@dataclass
class _Prepared:
    item: dict[str, object]
    bytes: int
    quarters: int
    citations: list[tuple[Locator, dict[str, object], int, int]]  # entry, bytes, quarters


def _prepare(
    group: FusedCandidate,
    contradicts: list[str],
    citations: Mapping[Locator, dict[str, object]],
) -> _Prepared:
    candidate = group.candidate
    located = sorted(loc for loc in candidate.locators if loc in citations)
    refs = [{"source": source, "paragraph": paragraph} for source, paragraph in located]
    # taguru's EvidenceItem field order; the optional fields are left out when empty.
    head: dict[str, object] = {
        "candidate_id": candidate.candidate_id,
        "kind": candidate.kind,
        "fused_rank": group.fused_rank,
        "lane_ranks": [
            {"lane": lane, "rank": group.lane_ranks[lane]} for lane in sorted(group.lane_ranks)
        ],
        "citation_refs": refs,
    }
    if candidate.kind == KIND_ASSOCIATION and refs:
        attributions = candidate.payload["attributions"]
        assert isinstance(attributions, list)
        head["corroboration"] = {
            "sources": sorted({str(a["source"]) for a in attributions}),
            "attributions": refs,
        }
    if contradicts:
        head["contradicts"] = sorted(contradicts)
    payload = {candidate.kind: candidate.payload}
    # The item is charged its own JSON without these two counts (key order
    # does not change the size).
    size, quarters = json_size({**head, **payload})
    item = {**head, "bytes": size, "estimated_tokens": tokens(quarters), **payload}
    entries = []
    for source, paragraph in located:
        entry = {
            "source": source,
            "paragraph": paragraph,
            "citation": citations[(source, paragraph)],
        }
        entries.append(((source, paragraph), entry, *json_size(entry)))
    return _Prepared(item, size, quarters, entries)


@dataclass
class _Totals:
    items: int = 0
    item_bytes: int = 0
    item_quarters: int = 0
    citations: int = 0
    citation_bytes: int = 0
    citation_quarters: int = 0

    def bytes(self) -> int:
        return (
            array_overhead(self.items)
            + self.item_bytes
            + array_overhead(self.citations)
            + self.citation_bytes
        )

    def tokens(self) -> int:
        return tokens(
            array_overhead(self.items)
            + self.item_quarters
            + array_overhead(self.citations)
            + self.citation_quarters
        )

    def fits(self, limits: BudgetLimits) -> bool:
        return (
            self.items <= limits.max_items
            and self.bytes() <= limits.max_bytes
            and self.tokens() <= limits.max_tokens
        )


def select(
    fused: Sequence[FusedCandidate],
    dedup_dropped: int,
    limits: BudgetLimits,
    citations: Mapping[Locator, dict[str, object]],
    reorder: Reorder | None = None,
) -> dict[str, object]:
    """The package fields ``items``, ``citations``, ``budget``, ``omitted*`` and ``selection``,
    in taguru's order (``selection`` goes into the caller's ``plan``).

    ``citations`` maps every resolvable locator to its ``Citation``; a
    locator missing from it is left out of ``citation_refs``.
    """
    survivors, omitted = suppress_near_duplicates(fused)
    if reorder is not None:
        order = reorder(survivors)
        if order is not None and sorted(order) == list(range(len(survivors))):
            survivors = [survivors[index] for index in order]
    units = admission_units(survivors)
    contradicts: dict[int, list[str]] = {}
    for unit in units:
        if len(unit) > 1:
            ids = [survivors[i].candidate.candidate_id for i in unit]
            for i, own in zip(unit, ids, strict=True):
                contradicts[i] = [cid for cid in ids if cid != own]
    width = max(1, limits.max_items // 4)
    prepared = [
        _prepare(group, contradicts.get(index, []), citations)
        for index, group in enumerate(survivors)
    ]
    totals = _Totals()
    items: list[dict[str, object]] = []
    admitted: dict[Locator, dict[str, object]] = {}
    for unit in diversity_order(units, survivors, width):
        fresh: dict[Locator, tuple[dict[str, object], int, int]] = {}
        for index in unit:
            for locator, entry, size, quarters in prepared[index].citations:
                if locator not in admitted and locator not in fresh:
                    fresh[locator] = (entry, size, quarters)
        candidate = _Totals(
            totals.items + len(unit),
            totals.item_bytes + sum(prepared[i].bytes for i in unit),
            totals.item_quarters + sum(prepared[i].quarters for i in unit),
            totals.citations + len(fresh),
            totals.citation_bytes + sum(size for _, size, _ in fresh.values()),
            totals.citation_quarters + sum(q for _, _, q in fresh.values()),
        )
        if not candidate.fits(limits):
            reason = GROUP_EXCEEDS_BUDGET if len(unit) > 1 else BUDGET_EXCEEDED
            omitted += [omission(survivors[i], reason) for i in unit]
            continue
        totals = candidate
        admitted.update({locator: entry for locator, (entry, _, _) in fresh.items()})
        items += [prepared[i].item for i in unit]
    by_reason: dict[str, int] = {}
    for entry in omitted:
        reason = str(entry["reason"])
        by_reason[reason] = by_reason.get(reason, 0) + 1
    return {
        "items": items,
        "citations": [admitted[locator] for locator in sorted(admitted)],
        "budget": {
            "items_used": totals.items,
            "bytes_used": totals.bytes(),
            "tokens_used": totals.tokens(),
            "limits": limits.to_wire(),
        },
        "omitted": omitted[:MAX_LISTED_ISSUES],
        "omitted_total": len(omitted),
        "omitted_by_reason": dict(sorted(by_reason.items())),
        "selection": {
            "dedup_dropped": dedup_dropped,
            "contradiction_groups": sum(1 for unit in units if len(unit) > 1),
            "diversity_tier_width": width,
        },
    }
