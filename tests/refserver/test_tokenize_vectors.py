"""tokenize.json, every case (HTTP.md §9.4 Tokenizer)."""

from __future__ import annotations

from typing import Any

import pytest
from support.vectors import vector_cases

from taguru_refserver.tokenize import Term, passage_terms, text_terms

KNOWN_KEYS = {
    "terms",
    "len",
    "contains",
    "contains_kind",
    "same_as",
    "different_from",
    "kinds",
    "each_spelling_retokenizes_to_itself",
    "empty",
}


def _run(spec: dict[str, Any]) -> list[Term]:
    if spec["function"] == "passage_terms":
        return passage_terms(spec["text"])
    if spec["function"] == "text_terms":
        return text_terms(spec["text"])
    raise AssertionError(f"unknown function {spec['function']!r}")


@pytest.mark.parametrize("case", vector_cases("tokenize"))
def test_tokenize_vector(case: dict[str, Any]) -> None:
    expected = case["expected"]
    unknown = set(expected) - KNOWN_KEYS
    assert not unknown, f"unhandled expected keys {unknown}"
    got = _run(case["input"])
    as_lists = [[kind, spelling] for kind, spelling in got]
    if "terms" in expected:
        assert as_lists == expected["terms"]
    if "len" in expected:
        assert len(got) == expected["len"]
    for term in expected.get("contains", []):
        assert term in as_lists
    if "contains_kind" in expected:
        assert any(kind == expected["contains_kind"] for kind, _ in got)
    if "same_as" in expected:
        assert got == _run(expected["same_as"])
    if "different_from" in expected:
        assert got != _run(expected["different_from"])
    if "kinds" in expected:
        assert [kind for kind, _ in got] == expected["kinds"]
    if expected.get("each_spelling_retokenizes_to_itself"):
        for kind, spelling in got:
            assert passage_terms(spelling)[0] == (kind, spelling)
    if "empty" in expected:
        assert (got == []) is expected["empty"]


def test_kinds_never_collide() -> None:
    # A lone kanji and a word, a pair and a two-letter word: distinct identities.
    assert passage_terms("水 ab") == [("lone", "水"), ("word", "ab")]
    assert passage_terms("水源") == [("pair", "水源")]


def test_other_alphabetic_vowel_sign_extends_run() -> None:
    # U+093F DEVANAGARI VOWEL SIGN I is Alphabetic in Rust although not str.isalnum().
    assert passage_terms("कि") == [("pair", "कि")]
