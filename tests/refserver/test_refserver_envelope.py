"""JSON text as serde_json writes it (taguru_eval.text): float layout (HTTP.md §8.2), raw UTF-8."""

from __future__ import annotations

from typing import Any

import pytest
from support.vectors import vector_cases

from taguru_eval._base.text import F32, dumps_json, json_f32, json_f64


@pytest.mark.parametrize("case", vector_cases("budget_accounting", "f32_format"))
def test_f32_format_vectors(case: dict[str, Any]) -> None:
    expected = case["expected"]
    assert set(expected) == {"text"}, f"unknown expected keys {sorted(expected)}"
    assert json_f32(case["input"]["value"]) == expected["text"]
    assert dumps_json(F32(case["input"]["value"])) == expected["text"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.0, "2.0"),
        (12340000000.0, "12340000000.0"),
        (12.34, "12.34"),
        (0.001234, "0.001234"),
        (1e30, "1e30"),
        (1.234e-7, "1.234e-7"),
        (1e16, "1e16"),
        (1e15, "1000000000000000.0"),
        (0.00001, "0.00001"),
        (0.000001, "1e-6"),
        (0.6666666666666666, "0.6666666666666666"),
        (-2.5, "-2.5"),
        (0.0, "0.0"),
    ],
)
def test_f64_layout(value: float, text: str) -> None:
    assert json_f64(value) == text


def test_dumps_is_compact_raw_utf8_with_serde_escapes() -> None:
    doc = {"a": [1, True, None, 0.5, F32(0.28768211603164673)], "名": '青嶺\u0000\n"/'}
    assert dumps_json(doc) == '{"a":[1,true,null,0.5,0.28768212],"名":"青嶺\\u0000\\n\\"/"}'
