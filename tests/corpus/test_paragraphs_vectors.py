"""paragraph_split.json (HTTP.md §9.2) and the ATX heading rule of §9.3."""

from __future__ import annotations

from typing import Any

import pytest
from support.vectors import vector_cases

from taguru_eval.corpus.paragraphs import heading_sections, split_paragraphs


@pytest.mark.parametrize("case", vector_cases("paragraph_split"))
def test_paragraph_split_vector(case: dict[str, Any]) -> None:
    unknown = set(case["expected"]) - {"paragraphs"}
    assert not unknown, f"unhandled expected keys {unknown}"
    assert split_paragraphs(case["input"]["text"]) == case["expected"]["paragraphs"]


@pytest.mark.parametrize(
    ("paragraph", "label"),
    [
        ("# 沿革", "沿革"),
        ("###### Six", "Six"),
        ("## Closing run ##", "Closing run"),
        ("#\tTab separated\t", "Tab separated"),
        ("# C#", "C#"),
        ("####### Seven", None),
        ("#NoSpace", None),
        ("#", None),
        ("#   ", None),
        (" # Indented", None),
        ("# Heading\nbody text", None),
        ("Title\n=====", None),
        ("# " + "あ" * 171, "あ" * 171),  # 513 bytes
        ("# " + "a" * 512, "a" * 512),
    ],
)
def test_heading_rule(paragraph: str, label: str | None) -> None:
    if label is not None and len(label.encode("utf-8")) > 512:
        label = None
    expected = [] if label is None else [(0, label)]
    assert heading_sections([paragraph]) == expected


def test_heading_sections_index_paragraphs() -> None:
    text = "# 沿革\n\n青嶺酒造は1897年に創業した。\n\n## 仕込み\n\n水は伏流水。\n"
    paragraphs = split_paragraphs(text)
    assert heading_sections(paragraphs) == [(0, "沿革"), (2, "仕込み")]
