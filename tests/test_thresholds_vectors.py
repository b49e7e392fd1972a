"""Every case of vectors/thresholds_validation.json (loading, bounds, gate, values).

Each test dispatches on the ``expected`` keys its check uses and fails on a key
it does not understand, so a partially asserted case is never silently passed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from support.documents import gate_on_values
from support.vectors import vector_cases, vector_doc

from taguru_eval.catalog import CASE_SCOPED_METRICS, CATALOG_KEYS
from taguru_eval.errors import InputError
from taguru_eval.gate import case_metric_frame
from taguru_eval.inputs.thresholds import (
    Bound,
    bound_problem,
    load_thresholds,
    parse_thresholds,
    sha256_hex,
)

TOPIC = "thresholds_validation"
DOC = vector_doc(TOPIC)
KNOWN_CHECKS = {"load", "bound", "sha256", "catalog", "evaluate", "case_metric_value"}
NON_FINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def test_every_case_has_a_known_check() -> None:
    assert {case["check"] for case in DOC["cases"]} == KNOWN_CHECKS


def test_top_level_fixtures_match_the_catalog_module() -> None:
    assert frozenset(DOC["catalog"]) == CATALOG_KEYS
    assert list(CASE_SCOPED_METRICS) == DOC["case_scoped_metrics"]


def _unknown(expected: dict[str, Any], understood: set[str]) -> None:
    extra = set(expected) - understood
    assert not extra, f"expected key(s) this test does not understand: {sorted(extra)}"


@pytest.mark.parametrize("case", vector_cases(TOPIC, "load"))
def test_load(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = case["input"]
    expected = case["expected"]
    _unknown(
        expected,
        {
            "ok",
            "error_contains",
            "error_contains_lowercase",
            "error",
            "error_prefix",
            "exit",
            "sha256",
            "sha256_of_text",
        },
    )
    monkeypatch.chdir(tmp_path)
    raw = given["text"].encode("utf-8")
    Path(given["path"]).write_bytes(raw)
    if expected["ok"]:
        loaded = load_thresholds(given["path"], CATALOG_KEYS, given["case_ids"])
        if "sha256" in expected:
            assert loaded.sha256 == expected["sha256"]
        if expected.get("sha256_of_text"):
            assert loaded.sha256 == hashlib.sha256(raw).hexdigest()
        for key in ("error", "error_contains", "error_prefix", "error_contains_lowercase"):
            assert key not in expected
        return
    with pytest.raises(InputError) as info:
        load_thresholds(given["path"], CATALOG_KEYS, given["case_ids"])
    message = str(info.value)
    for fragment in expected.get("error_contains", []):
        assert fragment in message
    for fragment in expected.get("error_contains_lowercase", []):
        assert fragment in message.lower()
    if "error" in expected:
        assert message == expected["error"]
    if "error_prefix" in expected:
        assert message.startswith(expected["error_prefix"])
    if "exit" in expected:
        assert info.value.exit_code == expected["exit"]
    assert "sha256" not in expected


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        return NON_FINITE[value]
    assert isinstance(value, int | float)
    return float(value)


@pytest.mark.parametrize("case", vector_cases(TOPIC, "bound"))
def test_bound(case: dict[str, Any]) -> None:
    expected = case["expected"]
    _unknown(expected, {"problem", "rejected"})
    bound = Bound(min=_number(case["input"]["min"]), max=_number(case["input"]["max"]))
    problem = bound_problem(bound)
    if "problem" in expected:
        assert problem == expected["problem"]
    if "rejected" in expected:
        assert (problem is not None) is expected["rejected"]


@pytest.mark.parametrize("case", vector_cases(TOPIC, "sha256"))
def test_sha256(case: dict[str, Any]) -> None:
    expected = case["expected"]
    _unknown(expected, {"hex"})
    assert sha256_hex(case["input"]["text"].encode("utf-8")) == expected["hex"]


@pytest.mark.parametrize("case", vector_cases(TOPIC, "catalog"))
def test_catalog(case: dict[str, Any]) -> None:
    expected = case["expected"]
    _unknown(expected, {"all_in_catalog", "none_case_scoped"})
    names = case["input"]["names"]
    if "all_in_catalog" in expected:
        assert all(name in CATALOG_KEYS for name in names) is expected["all_in_catalog"]
    if "none_case_scoped" in expected:
        none_scoped = not any(name in CASE_SCOPED_METRICS for name in names)
        assert none_scoped is expected["none_case_scoped"]


@pytest.mark.parametrize("case", vector_cases(TOPIC, "evaluate"))
def test_evaluate(case: dict[str, Any]) -> None:
    given = case["input"]
    expected = case["expected"]
    _unknown(
        expected,
        {
            "passed",
            "violations_len",
            "skipped_len",
            "violations_prefix",
            "serialized_excludes",
            "report",
        },
    )
    # input.thresholds is a decoded document; the Rust tests use sha "test-sha".
    parsed = parse_thresholds(json.dumps(given["thresholds"]).encode("utf-8"), "t.json")
    thresholds = dataclasses.replace(parsed, sha256=given.get("sha256", "test-sha"))
    cases = given["cases"]
    report = gate_on_values(
        thresholds,
        {name: entry["value"] for name, entry in given["metrics"].items()},
        case_metric_frame(cases),
        stable=given["stable"],
        case_ids=[block["case_id"] for block in cases],
        metric_statistics={name: entry["statistic"] for name, entry in given["metrics"].items()},
    )
    block = report.block
    assert report.exit_code == (0 if report.passed else 3)
    if "passed" in expected:
        assert report.passed is expected["passed"]
        assert block["passed"] is expected["passed"]
    if "violations_len" in expected:
        assert len(report.violations) == expected["violations_len"]
    if "skipped_len" in expected:
        assert len(report.skipped) == expected["skipped_len"]
    if "violations_prefix" in expected:
        got = [v.to_json() for v in report.violations]
        assert len(got) >= len(expected["violations_prefix"])
        for want, have in zip(expected["violations_prefix"], got, strict=False):
            for key, value in want.items():
                assert key in have
                assert have[key] == value
    if "serialized_excludes" in expected:
        compact = json.dumps(block, ensure_ascii=False, separators=(",", ":"))
        for secret in expected["serialized_excludes"]:
            assert secret not in compact
    if "report" in expected:
        # Byte-exact, key order included.
        assert json.dumps(block, ensure_ascii=False) == json.dumps(
            expected["report"], ensure_ascii=False
        )


@pytest.mark.parametrize("case", vector_cases(TOPIC, "case_metric_value"))
def test_case_metric_value(case: dict[str, Any]) -> None:
    expected = case["expected"]
    _unknown(expected, {"values"})
    frame = case_metric_frame([case["input"]["case"]])
    present = {metric: value for _, metric, value in frame.rows()}
    for metric in case["input"]["metrics"]:
        assert present.get(metric) == expected["values"][metric], metric
        if expected["values"][metric] is not None:
            assert isinstance(present[metric], float)
