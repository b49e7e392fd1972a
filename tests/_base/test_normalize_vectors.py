"""normalize.json and normalize_entry.json, every case (HTTP.md §9.1, EVALUATE.md §4.6)."""

from __future__ import annotations

from typing import Any

import pytest
from support.vectors import vector_cases

from taguru_eval._base.normalize import normalize, normalize_entry


@pytest.mark.parametrize("case", vector_cases("normalize"))
def test_normalize_vector(case: dict[str, Any]) -> None:
    given, expected = case["input"], case["expected"]
    unknown = set(expected) - {"output", "idempotent", "equal"}
    assert not unknown, f"unhandled expected keys {unknown}"
    if case["check"] == "output":
        got = normalize(given["text"])
        assert got == expected["output"]
        if expected.get("idempotent"):
            assert normalize(got) == got
    elif case["check"] == "equal":
        assert (normalize(given["a"]) == normalize(given["b"])) is expected["equal"]
    else:
        pytest.fail(f"unknown check {case['check']!r}")


# The vectors' ``normalize_entry`` is the reference's bare fold (their notes: "it does
# not trim"), which this package calls ``normalize``. This package's
# ``normalize_entry`` is the team-agreed matching helper ``normalize(trim(x))``, i.e.
# EVALUATE.md's ``normalize_entry(trim(x))``; the match/quote checks exercise it.
@pytest.mark.parametrize("case", vector_cases("normalize_entry"))
def test_normalize_entry_vector(case: dict[str, Any]) -> None:
    given, expected = case["input"], case["expected"]
    unknown = set(expected) - {"output", "differ", "idempotent", "matched"}
    assert not unknown, f"unhandled expected keys {unknown}"
    check = case["check"]
    if check == "output":
        assert normalize(given["text"]) == expected["output"]
    elif check == "differ":
        assert (normalize(given["a"]) != normalize(given["b"])) is expected["differ"]
    elif check == "idempotent":
        once = normalize(given["text"])
        assert (normalize(once) == once) is expected["idempotent"]
    elif check == "match":
        wanted = normalize_entry(given["expected"])
        matched = any(normalize_entry(name) == wanted for name in given["resolved_names"])
        assert matched is expected["matched"]
    elif check == "quote":
        matched = normalize_entry(given["quote"]) in normalize_entry(given["text"])
        assert matched is expected["matched"]
    else:
        pytest.fail(f"unknown check {check!r}")


def test_final_sigma_is_not_context_sensitive() -> None:
    # Python's str.lower() would turn the final Σ into ς; the reference never does.
    assert normalize("ΟΔΟΣ") == "οδοσ"


def test_normalize_entry_trims_then_folds() -> None:
    # Project API: trimming is part of normalize_entry (the bare fold never trims).
    assert normalize(" 青嶺 ") == " 青嶺 "
    assert normalize_entry(" 青嶺 ") == "青嶺"


def test_trim_uses_white_space_not_str_strip() -> None:
    assert normalize_entry("\u3000Ａｂ\u00a0") == "ab"
    assert normalize_entry("\x1fab") == "\x1fab"
