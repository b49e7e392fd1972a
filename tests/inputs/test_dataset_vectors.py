"""Every interpret-mode case of vectors/evalset_validation.json against the eval.jsonl loader.

The carry-through cases (EVALUATE.md §1.4, ``taguru benchmark search``'s mode,
"evaluate does not use it") are left out: the loader has no such mode
(docs/decisions.md)."""

from __future__ import annotations

from typing import Any

import pytest
from support.vectors import vector_cases

from taguru_eval._base.text import to_f32
from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import (
    ABSENT,
    EvalCase,
    EvalSet,
    ExpectedCitation,
    load_eval_text,
    validate_limits,
)


def _citation_dict(citation: ExpectedCitation) -> dict[str, Any]:
    out: dict[str, Any] = {"source": citation.source, "paragraph": citation.paragraph}
    if citation.section is not ABSENT:
        out["section"] = citation.section
    if citation.quote is not None:
        out["quote"] = citation.quote
    return out


def case_dict(case: EvalCase) -> dict[str, Any]:
    """The loaded case in the vector's §1.6 shape (absent section = key missing)."""
    return {
        "case_id": case.case_id,
        "query": case.query,
        "cues": list(case.cues),
        "expected_sources": [
            {"source": s.source, "paragraphs": list(s.paragraphs), "relevance": s.relevance}
            for s in case.expected_sources
        ],
        "expected_concepts": list(case.expected_concepts),
        "expected_labels": list(case.expected_labels),
        "expected_associations": [
            {"subject": a.subject, "label": a.label, "object": a.object}
            for a in case.expected_associations
        ],
        "expected_citations": [_citation_dict(c) for c in case.expected_citations],
        "options": {
            "limit": case.options.limit,
            "floor": case.options.floor,
            "tags": list(case.options.tags),
            "since": case.options.since,
            "until": case.options.until,
        },
    }


def _float_aware(value: Any) -> Any:
    """Vector floats stand for binary32 values (notes: 0.4 means float32(0.4))."""
    if isinstance(value, float):
        return to_f32(value)
    if isinstance(value, dict):
        return {k: _float_aware(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_float_aware(v) for v in value]
    return value


def _field(case: dict[str, Any], key: str) -> Any:
    """Resolve case_fields keys: 'options.tags', 'expected_citations[0].paragraph',
    'expected_associations_len'."""
    if key.endswith("_len"):
        return len(_field(case, key[: -len("_len")]))
    value: Any = case
    for part in key.replace("[", ".[").split("."):
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


def _load(case: dict[str, Any]) -> EvalSet:
    inp = case["input"]
    eval_set = load_eval_text(inp["text"], inp["label"])
    if case["check"] == "validate_limits":
        validate_limits(eval_set)
    return eval_set


def _as_in_097(case: dict[str, Any], error: str) -> str:
    """The vector's message as taguru 0.9.7 words it: ERRATA row 19 gives the
    ``options.limit`` refusal the file, the case's physical line and a colon
    after the field (the read-only vectors keep the 0.9.3 words)."""
    if case["check"] != "validate_limits":
        return error
    text = case["input"]["text"]
    case_id = error.split("'")[1]
    line = next(
        number
        for number, content in enumerate(text.split("\n"), start=1)
        if f'"case_id":"{case_id}"' in content
    )
    worded = error.replace("options.limit must", "options.limit: must")
    return f"{case['input']['label']}: line {line}: {worded}"


KNOWN_KEYS = {
    "ok",
    "error",
    "error_contains",
    "error_prefix",
    "name",
    "cases",
    "warnings",
    "cases_len",
    "warnings_len",
    "warnings_contain",
    "case_fields",
    "has_expectations",
}


VECTORS = vector_cases("evalset_validation")
INTERPRET = [param for param in VECTORS if param.values[0]["input"]["mode"] == "interpret"]


def test_only_the_carry_through_cases_are_left_out() -> None:
    left_out = [param.values[0] for param in VECTORS if param not in INTERPRET]
    assert {case["input"]["mode"] for case in left_out} == {"carry_through"}
    assert len(INTERPRET) + len(left_out) == len(VECTORS) and len(INTERPRET) >= 50


@pytest.mark.parametrize("case", INTERPRET)
def test_evalset_vector(case: dict[str, Any]) -> None:
    expected = case["expected"]
    unknown = set(expected) - KNOWN_KEYS
    assert not unknown, f"unhandled expected keys {unknown}"
    assert case["check"] in ("load", "validate_limits")

    if not expected["ok"]:
        with pytest.raises(InputError) as info:
            _load(case)
        message = str(info.value)
        assert info.value.exit_code == 2
        if "error" in expected:
            assert message == _as_in_097(case, expected["error"])
        for fragment in expected.get("error_contains", []):
            assert fragment in message
        if "error_prefix" in expected:
            assert message.startswith(expected["error_prefix"])
            assert len(message) > len(expected["error_prefix"])  # a detail follows
        assert not {"name", "cases", "warnings", "cases_len"} & set(expected)
        return

    eval_set = _load(case)
    loaded = [case_dict(c) for c in eval_set.cases]
    if "name" in expected:
        assert eval_set.name == expected["name"]
    if "cases" in expected:
        assert loaded == _float_aware(expected["cases"])
    # Interpret mode never warns (§1.3): the vectors say so with an empty list.
    assert expected.get("warnings", []) == [] and expected.get("warnings_len", 0) == 0
    if "cases_len" in expected:
        assert len(eval_set.cases) == expected["cases_len"]
    for index, fields in expected.get("case_fields", {}).items():
        for key, want in fields.items():
            assert _field(loaded[int(index)], key) == _float_aware(want), key
    if "has_expectations" in expected:
        index, want = expected["has_expectations"]
        assert eval_set.cases[index].has_expectations is want
