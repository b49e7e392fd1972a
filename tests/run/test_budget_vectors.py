"""Conformance vectors of the budget accounting (EVALUATE.md §7.3)."""

from __future__ import annotations

from typing import Any

import pytest
from support.vectors import vector_cases

from taguru_eval._base.text import json_f32
from taguru_eval.options import resolve_budget
from taguru_eval.run.lanes.budget import (
    MeasuredHit,
    array_overhead,
    compact_json,
    measure,
    passage_envelope,
    quarters,
    token_estimate,
    truncate,
)


def _hit(raw: dict[str, Any]) -> MeasuredHit:
    return MeasuredHit(
        source=raw["source"],
        paragraph=raw["paragraph"],
        score=raw["score"],
        text=raw["text"],
        lanes=raw.get("lanes", {}),
    )


def _ceil4(value: int) -> int:
    return -(-value // 4)


def _package_usage(items: list[Any], citations: list[Any]) -> dict[str, int]:
    item_sizes = [measure(compact_json(item)) for item in items]
    cite_sizes = [measure(compact_json(cite)) for cite in citations]
    fixed = array_overhead(len(items)) + array_overhead(len(citations))
    return {
        "items_used": len(items),
        "bytes_used": fixed + sum(b for b, _ in item_sizes) + sum(b for b, _ in cite_sizes),
        "tokens_used": _ceil4(
            fixed + sum(q for _, q in item_sizes) + sum(q for _, q in cite_sizes)
        ),
    }


def _actual(case: dict[str, Any]) -> dict[str, Any]:
    """What the project computes for one vector case, keyed like ``expected``."""
    check, data = case["check"], case["input"]
    if check == "resolve_limits":
        budget = resolve_budget(data["max_items"], data["max_bytes"], data["max_tokens"])
        return budget.to_json()
    if check == "token_estimate":
        return {"quarters": quarters(data["text"]), "tokens": token_estimate(data["text"])}
    if check == "array_overhead":
        return {"bytes": array_overhead(data["n"])}
    if check == "f32_format":
        return {"text": json_f32(data["value"])}
    if check == "content_metrics":
        text = compact_json(data["object"], data.get("f32_fields", ()))
        size, weight = measure(text)
        return {"serialized": text, "bytes": size, "quarters": weight}
    if check == "item_cost":
        size, weight = measure(compact_json(data["item"]))
        return {"bytes": size, "estimated_tokens": _ceil4(weight)}
    if check == "package_usage":
        return _package_usage(data["items"], data["citations"])
    if check == "passage_envelope":
        text = passage_envelope(data["context"], _hit(data["hit"]), data["rank"])
        size, weight = measure(text)
        return {"text": text, "bytes": size, "quarters": weight, "estimated_tokens": _ceil4(weight)}
    if check == "truncate":
        limits = data["limits"]
        result = truncate(
            data["context"],
            [_hit(h) for h in data["hits"]],
            limits["max_items"],
            limits["max_bytes"],
            limits["max_tokens"],
        )
        return {
            "admitted": list(result.kept),
            "items_used": result.items_used,
            "bytes_used": result.bytes_used,
            "tokens_used": result.tokens_used,
            "omitted_total": result.omitted_total,
        }
    raise AssertionError(f"unknown check {check!r}")


@pytest.mark.parametrize("case", vector_cases("budget_accounting"))
def test_budget_accounting(case: dict[str, Any]) -> None:
    actual = _actual(case)
    for key, expected in case["expected"].items():
        if key == "serialized_contains":
            assert expected in actual["serialized"]
        elif key == "serialized_not_contains":
            assert expected not in actual["serialized"]
        elif key == "text_contains":
            assert expected in actual["text"]
        elif key == "text_not_contains":
            assert expected not in actual["text"]
        elif key == "omitted_total_at_least":
            assert actual["omitted_total"] >= expected
        elif key in actual:
            assert actual[key] == expected, key
        else:
            raise AssertionError(f"expected key {key!r} is not understood by this test")
