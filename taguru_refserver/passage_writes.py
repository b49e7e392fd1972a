"""Decoding and applying ``POST /contexts/{name}/sources`` (HTTP.md §7.2).

``decode_store_request`` validates the whole body collect-all (any problem is
one 400 with ``issues`` and nothing stored); ``build_record`` turns one
validated source into its ``PassageRecord``, counting the markers it keeps
and drops. ``ServerState.store_passages`` runs both under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from taguru_eval.corpus.paragraphs import split_paragraphs
from taguru_refserver.envelope import Issue
from taguru_refserver.model import (
    MAX_LOCATOR_KIND_BYTES,
    MAX_LOCATOR_VALUE_BYTES,
    MAX_NAME_BYTES,
    MAX_PASSAGES_PER_REQUEST,
    MAX_QUESTION_BYTES,
    MAX_QUESTIONS_PER_PARAGRAPH,
    MAX_SECTION_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS_PER_SOURCE,
    PassageRecord,
    check_name,
    issue,
    refusal,
)
from taguru_refserver.routes_bodies import (
    Fields,
    as_list,
    as_object,
    as_str,
    as_uint,
    over_limit,
)

STORE_COUNTERS = (
    "stored",
    "questions_stored",
    "questions_dropped",
    "sections_stored",
    "sections_dropped",
    "locators_stored",
    "locators_dropped",
)


@dataclass
class StoreItem:
    """One validated source of a store request."""

    source: str
    text: str
    sections: list[tuple[int, str]]
    locators: list[tuple[int, dict[str, str]]]
    questions: list[tuple[int, str]]
    tags: list[str]
    date: int | None


def build_record(item: StoreItem, stamp: int, counts: dict[str, int]) -> PassageRecord:
    """The stored form of ``item``; adds its kept/dropped marker counts to ``counts``."""
    paragraphs = split_paragraphs(item.text)
    total = len(paragraphs)
    sections: dict[int, str] = {}
    for paragraph, label in item.sections:
        if paragraph >= total or paragraph in sections:
            counts["sections_dropped"] += 1
        if paragraph < total:
            sections[paragraph] = label  # the last marker submitted for a paragraph wins
    counts["sections_stored"] += len(sections)
    locators: dict[int, dict[str, str]] = {}
    for paragraph, locator in item.locators:
        if paragraph >= total or paragraph in locators:
            counts["locators_dropped"] += 1
        if paragraph < total:
            locators[paragraph] = locator
    counts["locators_stored"] += len(locators)
    questions: dict[int, list[str]] = {}
    for paragraph, question in item.questions:
        bucket = questions.setdefault(paragraph, []) if paragraph < total else None
        if bucket is None or len(bucket) >= MAX_QUESTIONS_PER_PARAGRAPH:
            counts["questions_dropped"] += 1
        else:
            bucket.append(question)
            counts["questions_stored"] += 1
    return PassageRecord(
        text=item.text,
        paragraphs=paragraphs,
        sections=sections,
        locators=locators,
        questions={p: qs for p, qs in questions.items() if qs},
        tags=sorted(set(item.tags)),
        date=item.date,
        stored_at=stamp,
    )


def decode_store_request(body: object) -> list[StoreItem]:
    """The sources of a store body, or the 422/400 refusal it deserves."""
    fields = Fields(body, what="struct StorePassagesRequest")
    passages = as_object(fields.required("passages"), "passages", "a map")
    if len(passages) > MAX_PASSAGES_PER_REQUEST:
        raise over_limit("passages", len(passages), MAX_PASSAGES_PER_REQUEST)
    texts = {source: as_str(text, f"passages.{source}") for source, text in passages.items()}
    issues: list[Issue] = []
    for source in texts:
        check_name(issues, f"passages['{source}']", source, MAX_NAME_BYTES)
    items = {
        source: StoreItem(source, text, [], [], [], [], None) for source, text in texts.items()
    }

    def target(mapping: str, source: str) -> StoreItem | None:
        found = items.get(source)
        if found is None:
            issues.append(
                issue(
                    f"{mapping}['{source}']",
                    "unknown_reference",
                    "a source present in 'passages'",
                    f"'{source}' is not in this request's passages",
                )
            )
        return found

    for source, entries in fields.object_map("sections").items():
        path = f"sections.{source}"
        for index, entry in enumerate(as_list(entries, path)):
            marker = Fields(entry, f"{path}[{index}]", "struct SectionMarker")
            paragraph = marker.req_uint("paragraph", "u32")
            label = marker.req_str("section")
            check_name(issues, f"sections['{source}'][{index}].section", label, MAX_SECTION_BYTES)
            item = target("sections", source)
            if item is not None:
                item.sections.append((paragraph, label))
    for source, entries in fields.object_map("locators").items():
        path = f"locators.{source}"
        for index, entry in enumerate(as_list(entries, path)):
            marker = Fields(entry, f"{path}[{index}]", "struct LocatorMarker")
            paragraph = marker.req_uint("paragraph", "u32")
            locator = Fields(marker.required("locator"), marker.at("locator"), "struct Locator")
            kind = locator.req_str("kind")
            value = locator.req_str("value")
            where = f"locators['{source}'][{index}].locator"
            check_name(issues, f"{where}.kind", kind, MAX_LOCATOR_KIND_BYTES)
            check_name(issues, f"{where}.value", value, MAX_LOCATOR_VALUE_BYTES)
            item = target("locators", source)
            if item is not None:
                item.locators.append((paragraph, {"kind": kind, "value": value}))
    for source, entries in fields.object_map("questions").items():
        path = f"questions.{source}"
        for index, entry in enumerate(as_list(entries, path)):
            marker = Fields(entry, f"{path}[{index}]", "struct QuestionMarker")
            paragraph = marker.req_uint("paragraph", "u32")
            question = marker.req_str("question")
            check_name(
                issues,
                f"questions['{source}'][{index}].question",
                question,
                MAX_QUESTION_BYTES,
            )
            item = target("questions", source)
            if item is not None:
                item.questions.append((paragraph, question))
    for source, tag_list in fields.object_map("tags").items():
        path = f"tags.{source}"
        tags = [as_str(tag, f"{path}[{i}]") for i, tag in enumerate(as_list(tag_list, path))]
        if len(set(tags)) > MAX_TAGS_PER_SOURCE:
            issues.append(
                issue(
                    f"tags['{source}']",
                    "over_limit",
                    f"at most {MAX_TAGS_PER_SOURCE} tags",
                    f"{len(set(tags))} tags",
                )
            )
        for index, tag in enumerate(tags):
            check_name(issues, f"tags['{source}'][{index}]", tag, MAX_TAG_BYTES)
        item = target("tags", source)
        if item is not None:
            item.tags = tags
    for source, date in fields.object_map("dates").items():
        stamp = as_uint(date, f"dates.{source}", "u64")
        item = target("dates", source)
        if item is not None:
            item.date = stamp
    if issues:
        raise refusal("passage store", issues)
    return list(items.values())


# -- associations --------------------------------------------------------
