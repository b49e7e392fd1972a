"""Test oracles: the writers and builders the fast paths replaced, kept only to check them.

``dumps_json`` is the recursive pure-Python serde_json writer that
``taguru_eval._base.text`` used before it moved to msgspec; ``expected_rows``
is the row-at-a-time ``expected`` table builder the eval.jsonl loader used
before the columnar one. Both are exactly as they were (apart from names), and
nothing in the package imports them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import polars as pl

from taguru_eval._base.text import F32, json_f32, json_f64
from taguru_eval.inputs.evalcase import Absent, EvalCase
from taguru_eval.tables import EXPECTED as EXPECTED_SCHEMA


def dumps_json(value: object, indent: int | None = None) -> str:
    """The old writer: serde_json's bytes, one recursive call per value."""
    parts: list[str] = []
    _encode(value, parts, indent, 0)
    return "".join(parts)


def _encode(value: object, out: list[str], indent: int | None, level: int) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, F32):
        out.append(json_f32(value))
    elif isinstance(value, float):
        out.append(json_f64(value))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, Mapping):
        _encode_container("{", "}", list(value.items()), out, indent, level)
    elif isinstance(value, list | tuple):
        _encode_container("[", "]", list(value), out, indent, level)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _encode_container(
    opening: str, closing: str, items: list[Any], out: list[str], indent: int | None, level: int
) -> None:
    if not items:
        out.append(opening + closing)
        return
    keyed = opening == "{"
    separator = "," if indent is None else ",\n" + " " * (indent * (level + 1))
    out.append(opening if indent is None else opening + "\n" + " " * (indent * (level + 1)))
    for position, item in enumerate(items):
        if position:
            out.append(separator)
        if keyed:
            key, item = item
            if not isinstance(key, str):
                raise TypeError(f"object key {key!r} is not a string")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":" if indent is None else ": ")
        _encode(item, out, indent, level + 1)
    out.append(closing if indent is None else "\n" + " " * (indent * level) + closing)


def expected_rows(cases: list[EvalCase]) -> pl.DataFrame:
    """The old ``expected`` table builder: one dict of values per row."""
    rows: dict[str, list[object]] = {name: [] for name in EXPECTED_SCHEMA.names()}

    def add(
        case_index: int, case: EvalCase, kind: str, entry: int, item: int, **values: object
    ) -> None:
        rows["case_id"].append(case.case_id)
        rows["case_index"].append(case_index)
        rows["kind"].append(kind)
        rows["entry_index"].append(entry)
        rows["item_index"].append(item)
        for name in EXPECTED_SCHEMA.names()[5:]:
            rows[name].append(values.get(name))

    for case_index, case in enumerate(cases):
        item = 0
        for entry, source in enumerate(case.expected_sources):
            paragraphs: list[int | None] = list(dict.fromkeys(source.paragraphs)) or [None]
            for paragraph in paragraphs:
                add(
                    case_index,
                    case,
                    "source",
                    entry,
                    item,
                    source=source.source,
                    paragraph=paragraph,
                    relevance=source.relevance,
                )
                item += 1
        for entry, text in enumerate(case.expected_concepts):
            add(case_index, case, "concept", entry, entry, text=text)
        for entry, text in enumerate(case.expected_labels):
            add(case_index, case, "label", entry, entry, text=text)
        for entry, association in enumerate(case.expected_associations):
            add(
                case_index,
                case,
                "association",
                entry,
                entry,
                subject=association.subject,
                label=association.label,
                object=association.object,
            )
        for entry, citation in enumerate(case.expected_citations):
            section = citation.section
            add(
                case_index,
                case,
                "citation",
                entry,
                entry,
                source=citation.source,
                paragraph=citation.paragraph,
                section_declared=citation.section_declared,
                section=None if isinstance(section, Absent) else section,
                quote=citation.quote,
            )
    return pl.DataFrame(rows, schema=EXPECTED_SCHEMA)
