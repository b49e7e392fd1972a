"""Every case of vectors/compare_classify.json (GATE_AND_COMPARE.md §6).

One test per ``check``; each dispatches on the ``expected`` keys present and
fails on a key it does not understand, so a partially asserted case is never
silently treated as fully checked.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from support.hints import hints, without_hints
from support.vectors import vector_cases, vector_doc

from taguru_eval.catalog import CASE_SCOPED_METRICS, COMPARISON_METRICS
from taguru_eval.cli.compare import main, parse_args
from taguru_eval.compare import Comparison, RunView
from taguru_eval.compare.classify import compare_views, duplicate_warnings, side_scalar
from taguru_eval.compare.load import read_view, view_from_document
from taguru_eval.errors import InputError, UsageError

TOLERANCE = 1e-9


def _view(doc: dict[str, Any], label: str) -> RunView:
    # The reference's tests build views directly, bypassing the stamp check
    # (stamp_differs compares 1 with 2).
    return view_from_document(doc, label, check_stamp=False)


def _run_doc(cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "taguru_evaluation": 1,
        "generated_at": "2026-07-29T00:00:00Z",
        "inputs": {"context": "ctx"},
        "corpus": {"revision_after": {"graph": 0, "passages": 0, "config": 0}, "stable": True},
        "thresholds": None,
        "definitions": {},
        "metrics": {},
        "cases": cases,
    }


def _pair(inp: dict[str, Any]) -> Comparison:
    base = _view(inp["base"], inp.get("base_path", "base.json"))
    head = _view(inp["head"], inp.get("head_path", "head.json"))
    return compare_views(base, head)


def _check_contains(expected: dict[str, Any], key: str, warnings: list[str]) -> bool:
    """Shared warning assertions; returns True when ``key`` was handled."""
    value: Any = expected.get(key)
    if key == "warnings":
        assert warnings == value
    elif key == "warnings_len":
        assert len(warnings) == value
    elif key == "warning_contains":
        assert any(value in w for w in warnings), warnings
    elif key == "no_warning_contains":
        assert not any(value in w for w in warnings), warnings
    elif key == "warnings_all_contain":
        assert warnings and all(value in w for w in warnings), warnings
    elif key == "warning_contains_all":
        assert warnings, "expected at least one warning"
        for part in value:
            assert part in warnings[0], warnings[0]
    else:
        return False
    return True


def _assert_entry_prefix(got: list[dict[str, Any]], prefix: list[dict[str, Any]]) -> None:
    assert len(got) >= len(prefix)
    for want, have in zip(prefix, got, strict=False):
        for key, value in want.items():
            if key == "delta_approx":
                assert have["delta"] is not None
                assert abs(have["delta"] - value) <= TOLERANCE
            else:
                assert have[key] == value, (key, have)


@pytest.mark.parametrize("case", vector_cases("compare_classify", "args"))
def test_args(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = case["input"]["argv"]
    expected = case["expected"]
    for key, value in expected.items():
        if key == "exit":
            out, err = io.StringIO(), io.StringIO()
            assert main(argv, stdout=out, stderr=err) == value
            if value == 2:
                assert err.getvalue().startswith("taguru: evaluate: ")
                # taguru's line as taguru prints it; the hint line after it names
                # the help that exists here.
                taguru_line = without_hints(err.getvalue())
                assert taguru_line.endswith(" — try 'taguru evaluate --help'\n")
                assert hints(err.getvalue())[-1].endswith("python -m taguru_eval compare --help")
                with pytest.raises(UsageError):
                    parse_args(argv)
            else:
                assert out.getvalue().startswith("usage: ")
            assert list(tmp_path.iterdir()) == []
        elif key in ("base", "head", "out"):
            parsed = parse_args(argv)
            assert parsed is not None
            assert getattr(parsed, key) == value
        else:
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "classify"))
def test_classify(case: dict[str, Any]) -> None:
    inp = case["input"]
    comparison = compare_views(
        _view(_run_doc([inp["base"]]), "base.json"), _view(_run_doc([inp["head"]]), "head.json")
    )
    row = comparison.cases.filter(comparison.cases["case_id"] == inp["case_id"])
    assert row.height == 1
    kind = row["kind"][0]
    verdict = None if kind == "unchanged" else kind
    records = comparison.records()
    metrics: list[dict[str, Any]] = records[0]["metrics"] if records else []  # type: ignore[assignment]
    warnings = list(comparison.warnings)
    for key, value in case["expected"].items():
        if key == "verdict":
            assert verdict == value
            assert len(records) == (0 if value is None else 1)
        elif key == "metrics_len":
            assert len(metrics) == value
        elif key == "metrics":
            assert metrics == value
        elif key == "metrics_prefix":
            _assert_entry_prefix(metrics, value)
        elif key == "directions":
            assert {m["direction"] for m in metrics} == set(value)
        elif not _check_contains(case["expected"], key, warnings):
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "index_cases"))
def test_index_cases(case: dict[str, Any]) -> None:
    inp = case["input"]
    view = _view(_run_doc(inp["cases"]), "side.json")
    warnings = duplicate_warnings(inp["side"], view.duplicate_case_ids)
    for key, value in case["expected"].items():
        if key == "kept_has_recall":
            assert view.cases.height == len({c.get("case_id", "") for c in inp["cases"]})
            assert view.cases["recall.recall_at_k"].is_not_null().all() is value
        elif not _check_contains(case["expected"], key, warnings):
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "aggregate_scalar"))
def test_aggregate_scalar(case: dict[str, Any]) -> None:
    view = _view(case["input"]["view"], "view.json")
    scalar, warning = side_scalar(view, "BASE", case["input"]["metric"])
    assert warning is None
    for key, value in case["expected"].items():
        if key == "scalar_approx":
            assert scalar is not None
            assert abs(scalar - value) <= TOLERANCE
        else:
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "aggregate"))
def test_aggregate(case: dict[str, Any]) -> None:
    comparison = _pair(case["input"])
    entries: list[dict[str, Any]] = comparison.header("2026-07-29T00:00:00Z")["metrics"]  # type: ignore[assignment]
    warnings = list(comparison.warnings)
    for key, value in case["expected"].items():
        if key == "diffs_len":
            assert len(entries) == value
            assert comparison.metrics.height == value
        elif key == "delta_approx":
            assert entries[0]["delta"] is not None
            assert abs(entries[0]["delta"] - value) <= TOLERANCE
        elif key == "metrics":
            assert entries == value
        elif not _check_contains(case["expected"], key, warnings):
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "mismatch"))
def test_mismatch(case: dict[str, Any]) -> None:
    comparison = _pair(case["input"])
    warnings = list(comparison.warnings)
    for key in case["expected"]:
        if not _check_contains(case["expected"], key, warnings):
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "report"))
def test_report(case: dict[str, Any]) -> None:
    comparison = _pair(case["input"])
    text = comparison.changes_jsonl("2026-07-29T00:00:00Z")
    assert text.endswith("\n")
    lines = text.split("\n")[:-1]
    parsed = [json.loads(line) for line in lines]  # every line parses alone
    header, records = parsed[0], parsed[1:]
    assert records == comparison.records()
    for key, value in case["expected"].items():
        if key == "counts":
            for name, count in value.items():
                assert header["counts"][name] == count, name
                assert comparison.counts[name] == count, name
        elif key == "records_len":
            assert len(records) == value
        elif key == "records":
            assert records == value
        elif key == "records_prefix":
            for want, have in zip(value, records, strict=False):
                for field, expected_value in want.items():
                    if field == "metrics_len":
                        assert len(have["metrics"]) == expected_value
                    elif field == "all_not_comparable_head_only":
                        assert expected_value is True
                        for entry in have["metrics"]:
                            assert entry["direction"] == "not_comparable"
                            assert entry["delta"] is None
                            assert entry["sides"]["base"] is None
                            assert entry["sides"]["head"] is not None
                    elif field in ("kind", "case_id"):
                        assert have[field] == expected_value
                    else:
                        pytest.fail(f"unknown records_prefix key {field!r}")
        elif key == "jsonl_lines":
            assert len(lines) == value
        elif key == "header":
            for field, expected_value in value.items():
                assert header[field] == expected_value
        elif key == "jsonl_excludes":
            for fragment in value:
                assert fragment not in text
        elif key == "metrics":
            assert header["metrics"] == value
        elif key == "warnings":
            assert header.get("warnings", []) == value
            assert list(comparison.warnings) == value
        else:
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "load"))
def test_load(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = case["input"]["path"]
    text = case["input"]["text"]
    if text is not None:
        Path(path).write_text(text, encoding="utf-8")
    view: RunView | None = None
    error: str | None = None
    try:
        view = read_view(path)
    except InputError as exc:
        error = exc.message
    for key, value in case["expected"].items():
        if key == "ok":
            assert (error is None) is value, error
        elif key == "error_contains":
            assert error is not None and value in error
        elif key == "error_prefix":
            assert error is not None and error.startswith(value), error
        elif key == "error":
            assert error == value
        elif key == "context":
            assert view is not None and view.context == value
        else:
            pytest.fail(f"unknown expected key {key!r}")


@pytest.mark.parametrize("case", vector_cases("compare_classify", "lexicon"))
def test_lexicon(case: dict[str, Any]) -> None:
    inp = case["input"]
    assert list(CASE_SCOPED_METRICS) == inp["case_scoped"]
    assert list(COMPARISON_METRICS) == inp["comparison"]
    for key, value in case["expected"].items():
        if key == "comparison_is_case_scoped_minus":
            assert set(COMPARISON_METRICS) == set(CASE_SCOPED_METRICS) - {value}
            assert [m for m in CASE_SCOPED_METRICS if m != value] == list(COMPARISON_METRICS)
        else:
            pytest.fail(f"unknown expected key {key!r}")


HANDLED_CHECKS = {
    "args",
    "classify",
    "index_cases",
    "aggregate_scalar",
    "aggregate",
    "mismatch",
    "report",
    "load",
    "lexicon",
}


def test_every_vector_check_is_handled() -> None:
    checks = {case["check"] for case in vector_doc("compare_classify")["cases"]}
    assert checks <= HANDLED_CHECKS, checks - HANDLED_CHECKS
