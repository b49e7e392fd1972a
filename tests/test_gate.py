"""Applying thresholds to a run (GATE_AND_COMPARE.md §5, §7.1, §8.2)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
from support.documents import gate_on_values

from taguru_eval.catalog import scalar_of
from taguru_eval.errors import EXIT_GATE, EXIT_OK
from taguru_eval.gate import (
    CASE_VALUES_SCHEMA,
    REPORT_ONLY_NOTICE,
    UNSTABLE_CORPUS_WARNING_LINE,
    GateReport,
    Violation,
    case_metric_frame,
    summary_lines,
)
from taguru_eval.inputs.thresholds import Thresholds, parse_thresholds

SKIP_TAIL = (
    "not applicable — the case did not declare the matching expectation, "
    "or its lane did not complete"
)
UNSTABLE_REASON = (
    "the context's revision changed during this run (corpus.revision_before != "
    "corpus.revision_after) and allow_unstable_corpus is false"
)


def thresholds(document: dict[str, Any], sha: str = "test-sha") -> Thresholds:
    """A decoded thresholds document (no semantic checks, like the Rust unit tests)."""
    parsed = parse_thresholds(
        json.dumps({"taguru_evaluate_thresholds": 1, **document}).encode(), "t"
    )
    return Thresholds(
        sha256=sha,
        aggregate=parsed.aggregate,
        case_default=parsed.case_default,
        case_overrides=parsed.case_overrides,
        allow_unstable_corpus=parsed.allow_unstable_corpus,
    )


def values(rows: list[tuple[str, str, float | None]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=CASE_VALUES_SCHEMA, orient="row")


NO_VALUES = values([])


def dist(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    total = 0.0
    for sample in ordered:
        total += sample
    n = len(ordered)
    if n == 0:
        return dict.fromkeys(("min", "p50", "p90", "p99", "max", "mean", "sum"), None) | {"n": 0}

    def rank(p: int) -> float:
        return ordered[min(max((p * n + 99) // 100, 1), n) - 1]

    return {
        "n": n,
        "min": ordered[0],
        "p50": rank(50),
        "p90": rank(90),
        "p99": rank(99),
        "max": ordered[-1],
        "mean": total / n,
        "sum": total,
    }


def ratio(numerator: int, n: int) -> dict[str, Any]:
    if n == 0:
        return {"value": None, "n": 0, "numerator": None}
    return {"value": numerator / n, "n": n, "numerator": numerator}


def case_block(case_id: str, **blocks: Any) -> dict[str, Any]:
    block: dict[str, Any] = {
        "case_id": case_id,
        "query": "q",
        "limit": 10,
        "passage": {"outcome": "searched", "hits": [], "latency_ms": 5},
        "missed": [],
        "missed_truncated": 0,
    }
    block.update(blocks)
    return block


def recall(value: float) -> dict[str, Any]:
    return {"recall_at_k": value, "mrr": value, "ndcg": value, "expected_total": 1, "matched": 1}


# --------------------------------------------------------------------------- §7.1 worked example

WORKED_FILE = (
    b'{"taguru_evaluate_thresholds":1,"aggregate":{"recall.recall_at_k":{"min":0.8},'
    b'"passage.failure_rate":{"max":0.0}},"cases":{"default":{"recall.recall_at_k":{"min":0.5},'
    b'"citations.recall":{"min":1.0}},"overrides":{"c2":{"citations.recall":{"min":0.0}}}},'
    b'"allow_unstable_corpus":false}'
)

WORKED_BLOCK = """{
  "sha256": "f4089e4e537dfa3ec337efbfa270a22e34999736f74c1429cd8fdb446cea8f93",
  "passed": false,
  "allow_unstable_corpus": false,
  "violations": [
    {
      "scope": "aggregate",
      "metric": "recall.recall_at_k",
      "bound": "min",
      "threshold": 0.8,
      "actual": 0.625,
      "reason": "0.625000 < min 0.800000"
    },
    {
      "scope": "case",
      "case_id": "c2",
      "metric": "recall.recall_at_k",
      "bound": "min",
      "threshold": 0.5,
      "actual": 0.25,
      "reason": "0.250000 < min 0.500000"
    },
    {
      "scope": "corpus",
      "metric": "corpus.stable",
      "actual": null,
      "reason": "the context's revision changed during this run \
(corpus.revision_before != corpus.revision_after) and allow_unstable_corpus is false"
    }
  ],
  "skipped": [
    "case 'c3': 'citations.recall' not applicable — the case did not declare the matching \
expectation, or its lane did not complete",
    "case 'c3': 'recall.recall_at_k' not applicable — the case did not declare the matching \
expectation, or its lane did not complete"
  ]
}"""

WORKED_STDOUT = """\
  thresholds: FAIL — 3 violation(s) (sha256 f4089e4e537d…)
    [aggregate] recall.recall_at_k: 0.625000 < min 0.800000
    [corpus] corpus.stable: the context's revision changed during this run \
(corpus.revision_before != corpus.revision_after) and allow_unstable_corpus is false
    [case c2] recall.recall_at_k: 0.250000 < min 0.500000
  2 case-scoped threshold(s) skipped as not applicable"""


def worked_run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cases = [
        case_block(
            "c1",
            recall=recall(1.0),
            citations={
                "recall": {"expected_total": 1, "matched": 1, "value": 1.0},
                "validity": {"expected_total": 1, "valid": 1, "value": 1.0},
                "checks": [],
            },
        ),
        case_block(
            "c2",
            recall={
                "recall_at_k": 0.25,
                "mrr": 0.5,
                "ndcg": 0.3,
                "expected_total": 4,
                "matched": 1,
            },
            citations={
                "recall": {"expected_total": 1, "matched": 0, "value": 0.0},
                "validity": {"expected_total": 1, "valid": 1, "value": 1.0},
                "checks": [],
            },
        ),
        case_block("c3"),
    ]
    metrics = {"recall.recall_at_k": dist([1.0, 0.25]), "passage.failure_rate": ratio(0, 3)}
    return cases, metrics


def test_worked_example_block_stdout_and_exit_code_are_byte_exact() -> None:
    loaded = parse_thresholds(WORKED_FILE, "th.json")
    cases, metrics = worked_run()
    assert metrics["recall.recall_at_k"]["mean"] == 0.625
    report = gate_on_values(
        loaded,
        metrics,
        case_metric_frame(cases),
        stable=False,
        case_ids=[c["case_id"] for c in cases],
    )
    assert json.dumps(report.block, indent=2, ensure_ascii=False) == WORKED_BLOCK
    assert "\n".join(report.lines()) == WORKED_STDOUT
    assert report.exit_code == EXIT_GATE == 3
    assert report.passed is False


# --------------------------------------------------------------------------- §8.2 scenarios


def test_s14_distribution_by_mean_and_ratio_by_value() -> None:
    report = gate_on_values(
        thresholds(
            {
                "aggregate": {
                    "recall.recall_at_k": {"min": 0.75},
                    "citations.resolved": {"min": 0.75},
                }
            }
        ),
        {"recall.recall_at_k": dist([0.5, 1.0]), "citations.resolved": ratio(3, 4)},
        NO_VALUES,
        stable=True,
    )
    assert report.passed  # p50 is 0.5: a p50-based check would fail
    assert report.block == {"sha256": "test-sha", "passed": True, "allow_unstable_corpus": False}


def test_s15_a_metric_with_no_samples_is_a_violation_with_no_actual() -> None:
    report = gate_on_values(
        thresholds({"aggregate": {"recall.recall_at_k": {"min": 0.5}}}),
        {},
        NO_VALUES,
        stable=True,
    )
    assert not report.passed
    assert [v.to_json() for v in report.violations] == [
        {
            "scope": "aggregate",
            "metric": "recall.recall_at_k",
            "actual": None,
            "reason": "no samples for this metric (n=0)",
        }
    ]


def test_s16_an_undeclared_case_is_skipped_not_violated() -> None:
    cases = [case_block("c1")]
    report = gate_on_values(
        thresholds({"cases": {"default": {"recall.recall_at_k": {"min": 0.5}}}}),
        {},
        case_metric_frame(cases),
        stable=True,
        case_ids=["c1"],
    )
    assert report.passed
    assert report.violations == ()
    assert report.skipped == (f"case 'c1': 'recall.recall_at_k' {SKIP_TAIL}",)
    assert report.lines() == ["  thresholds: PASS (sha256 test-sha…)"]


def test_s17_an_override_replaces_the_default_for_that_case_only() -> None:
    cases = [case_block("low", recall=recall(0.2)), case_block("high", recall=recall(0.9))]
    report = gate_on_values(
        thresholds(
            {
                "cases": {
                    "default": {"recall.recall_at_k": {"min": 0.5}},
                    "overrides": {"low": {"recall.recall_at_k": {"min": 0.0}}},
                }
            }
        ),
        {},
        case_metric_frame(cases),
        stable=True,
        case_ids=["low", "high"],
    )
    assert report.passed
    # The same default without the override fails `low` only.
    strict = gate_on_values(
        thresholds({"cases": {"default": {"recall.recall_at_k": {"min": 0.5}}}}),
        {},
        case_metric_frame(cases),
        stable=True,
        case_ids=["low", "high"],
    )
    assert [(v.case_id, v.metric) for v in strict.violations] == [("low", "recall.recall_at_k")]


def test_s18_an_unstable_corpus_violates_by_default() -> None:
    report = gate_on_values(thresholds({}), {}, NO_VALUES, stable=False)
    assert not report.passed
    assert report.violations == (
        Violation(scope="corpus", metric="corpus.stable", actual=None, reason=UNSTABLE_REASON),
    )
    assert report.violations[0].to_json() == {
        "scope": "corpus",
        "metric": "corpus.stable",
        "actual": None,
        "reason": UNSTABLE_REASON,
    }
    assert "allow_unstable_corpus" in report.violations[0].reason


def test_s19_allow_unstable_corpus_opts_out() -> None:
    report = gate_on_values(
        thresholds({"allow_unstable_corpus": True}), {}, NO_VALUES, stable=False
    )
    assert report.passed
    assert report.block == {"sha256": "test-sha", "passed": True, "allow_unstable_corpus": True}


def test_s20_a_violation_never_carries_a_url_credential_or_body_text() -> None:
    cases = [
        case_block(
            "c1",
            query="TOP-SECRET query",
            passage={
                "outcome": "failed",
                "message": "GET https://user:Bearer-token@host/search failed",
                "latency_ms": 5,
            },
            citations={
                "recall": {"expected_total": 1, "matched": 0, "value": 0.0},
                "validity": {"expected_total": 1, "valid": 0, "value": 0.0},
                "checks": [],
            },
        )
    ]
    report = gate_on_values(
        thresholds({"cases": {"default": {"citations.recall": {"min": 1.0}}}}),
        {},
        case_metric_frame(cases),
        stable=True,
        case_ids=["c1"],
    )
    assert not report.passed
    serialized = json.dumps(report.block, ensure_ascii=False) + "\n".join(report.lines())
    for secret in ("http://", "https://", "Bearer", "token", "TOP-SECRET"):
        assert secret not in serialized


def test_s21_coverage_values_read_the_declared_category_only() -> None:
    frame = case_metric_frame(
        [case_block("c1", coverage={"concepts": {"expected": 2, "matched": 1, "value": 0.5}})]
    )
    got = {metric: value for _, metric, value in frame.rows()}
    assert got["coverage.concepts"] == 0.5
    assert "coverage.labels" not in got
    assert "coverage.associations" not in got


def test_s87_override_over_a_min_max_default_drops_the_default_max() -> None:
    report = gate_on_values(
        thresholds(
            {
                "cases": {
                    "default": {"recall.recall_at_k": {"min": 0.5, "max": 0.9}},
                    "overrides": {"c1": {"recall.recall_at_k": {"min": 0.0}}},
                }
            }
        ),
        {},
        values([("c1", "recall.recall_at_k", 0.95)]),
        stable=True,
    )
    assert report.passed


@pytest.mark.parametrize(
    ("samples", "passed"),
    [([3.0, 3.0, 4.0], True), ([1.0, 2.0], False)],
)
def test_s36_s37_integer_literal_bound_on_diversity(samples: list[float], passed: bool) -> None:
    loaded = parse_thresholds(
        b'{"taguru_evaluate_thresholds":1,"aggregate":{"diversity.sources":{"min":3}}}', "t"
    )
    report = gate_on_values(loaded, {"diversity.sources": dist(samples)}, NO_VALUES, stable=True)
    assert report.passed is passed
    if not passed:
        assert report.violations[0].to_json()["threshold"] == 3.0
        assert '"threshold": 3.0' in json.dumps(report.block)


# --------------------------------------------------------------------------- §5.1 bound check


@pytest.mark.parametrize(
    ("bound", "actual", "violation"),
    [
        ({"min": 0.8}, 0.625, ("min", 0.8, "0.625000 < min 0.800000")),
        ({"min": 0.8}, 0.8, None),
        ({"max": 3}, 5.0, ("max", 3.0, "5.000000 > max 3.000000")),
        ({"max": 3}, 3.0, None),
        ({"min": 0.5, "max": 0.9}, 0.95, ("max", 0.9, "0.950000 > max 0.900000")),
        ({"min": 0.5, "max": 0.9}, 0.1, ("min", 0.5, "0.100000 < min 0.500000")),
        ({"min": 0.5, "max": 0.5}, 0.5, None),
        ({"min": 1e-7}, 0.0, ("min", 1e-7, "0.000000 < min 0.000000")),
        ({"max": 1000}, 1234.5678901, ("max", 1000.0, "1234.567890 > max 1000.000000")),
        ({"min": -1}, -2.5, ("min", -1.0, "-2.500000 < min -1.000000")),
    ],
)
def test_bound_check_and_reason_text(
    bound: dict[str, float], actual: float, violation: tuple[str, float, str] | None
) -> None:
    for scope in ("aggregate", "case"):
        if scope == "aggregate":
            report = gate_on_values(
                thresholds({"aggregate": {"latency.passage_ms": bound}}),
                {"latency.passage_ms": dist([actual])},
                NO_VALUES,
                stable=True,
            )
        else:
            report = gate_on_values(
                thresholds({"cases": {"default": {"latency.passage_ms": bound}}}),
                {},
                values([("c1", "latency.passage_ms", actual)]),
                stable=True,
            )
        if violation is None:
            assert report.passed, scope
            continue
        assert len(report.violations) == 1
        got = report.violations[0]
        assert (got.bound, got.threshold, got.reason) == violation
        assert got.actual == actual
        assert got.scope == scope
        assert got.case_id == ("c1" if scope == "case" else None)


# --------------------------------------------------------------------------- §5.2 aggregates


@pytest.mark.parametrize(
    ("metrics", "statistics", "actual"),
    [
        ({"m": dist([0.5, 1.0])}, {"m": "distribution"}, 0.75),
        ({"m": ratio(1, 4)}, {"m": "ratio"}, 0.25),
        ({"m": {"value": 2.0, "n": 7}}, {"m": "count"}, 2.0),
        ({"m": dist([])}, {"m": "distribution"}, None),
        ({"m": ratio(0, 0)}, {"m": "ratio"}, None),
        ({"m": {"value": None, "n": 0}}, {"m": "count"}, None),
        ({}, {"m": "ratio"}, None),
        # The shape comes from the statistic, never from the value's keys.
        ({"m": ratio(1, 4)}, {"m": "distribution"}, None),
        ({"m": dist([0.5])}, {"m": "ratio"}, None),
        ({"m": ratio(1, 4)}, {"m": "histogram"}, None),
        ({"m": ratio(1, 4)}, {}, None),
        ({"m": [0.25]}, {"m": "ratio"}, None),
    ],
)
def test_aggregate_scalar_by_statistic(
    metrics: dict[str, Any], statistics: dict[str, str], actual: float | None
) -> None:
    assert scalar_of(metrics.get("m"), statistics.get("m")) == actual
    report = gate_on_values(
        Thresholds(
            sha256="s",
            aggregate=parse_thresholds(
                b'{"taguru_evaluate_thresholds":1,"aggregate":{"m":{"min":100}}}', "t"
            ).aggregate,
        ),
        metrics,
        NO_VALUES,
        stable=True,
        metric_statistics=statistics,
    )
    assert len(report.violations) == 1
    violation = report.violations[0].to_json()
    assert violation["actual"] == actual
    if actual is None:
        assert violation["reason"] == "no samples for this metric (n=0)"
        assert "bound" not in violation
        assert "threshold" not in violation


def test_aggregate_metric_nobody_produced_fails_rather_than_skips() -> None:
    report = gate_on_values(
        thresholds({"aggregate": {"rerank.ran": {"max": 1.0}}}),
        {"rerank.ran": ratio(0, 0)},
        NO_VALUES,
        stable=True,
    )
    assert not report.passed
    assert report.skipped == ()


def test_aggregate_statistics_default_to_the_catalog() -> None:
    report = gate_on_values(
        thresholds({"aggregate": {"recall.mrr": {"min": 0.7}, "citations.resolved": {"min": 0.7}}}),
        {"recall.mrr": dist([0.5, 1.0]), "citations.resolved": ratio(3, 4)},
        NO_VALUES,
        stable=True,
    )
    assert report.passed


def test_aggregate_violations_come_in_metric_name_order() -> None:
    report = gate_on_values(
        thresholds(
            {
                "aggregate": {
                    "recall.ndcg": {"min": 1},
                    "citations.recall": {"min": 1},
                    "latency.passage_ms": {"max": 1},
                }
            }
        ),
        {"latency.passage_ms": dist([5.0]), "recall.ndcg": dist([0.5])},
        NO_VALUES,
        stable=True,
    )
    assert [v.metric for v in report.violations] == [
        "citations.recall",
        "latency.passage_ms",
        "recall.ndcg",
    ]


def test_reason_suffix_follows_the_unchanged_reason() -> None:
    report = gate_on_values(
        thresholds({"aggregate": {"recall.mrr": {"min": 1.0}, "recall.ndcg": {"min": 1.0}}}),
        {"recall.mrr": dist([0.75]), "recall.ndcg": dist([])},
        NO_VALUES,
        stable=True,
        reason_suffixes={"recall.mrr": " — cases: a, b", "recall.ndcg": " — never"},
    )
    reasons = [v.reason for v in report.violations]
    assert reasons == ["0.750000 < min 1.000000 — cases: a, b", "no samples for this metric (n=0)"]


# --------------------------------------------------------------------------- §5.3 case bounds


def test_case_violations_and_skips_follow_case_order_then_metric_name() -> None:
    frame = values(
        [
            ("b", "recall.recall_at_k", 0.1),
            ("b", "latency.passage_ms", 50.0),
            ("a", "latency.passage_ms", 70.0),
            ("a", "citations.recall", 0.0),
        ]
    )
    report = gate_on_values(
        thresholds(
            {
                "aggregate": {"recall.mrr": {"min": 0.5}},
                "cases": {
                    "default": {
                        "recall.recall_at_k": {"min": 0.5},
                        "latency.passage_ms": {"max": 10},
                        "citations.recall": {"min": 1},
                    }
                },
            }
        ),
        {"recall.mrr": dist([0.1])},
        frame,
        stable=False,
        case_ids=["b", "a"],
    )
    assert [(v.scope, v.case_id, v.metric) for v in report.violations] == [
        ("aggregate", None, "recall.mrr"),
        ("case", "b", "latency.passage_ms"),
        ("case", "b", "recall.recall_at_k"),
        ("case", "a", "citations.recall"),
        ("case", "a", "latency.passage_ms"),
        ("corpus", None, "corpus.stable"),
    ]
    assert report.skipped == (
        f"case 'b': 'citations.recall' {SKIP_TAIL}",
        f"case 'a': 'recall.recall_at_k' {SKIP_TAIL}",
    )
    assert report.lines() == [
        "  thresholds: FAIL — 6 violation(s) (sha256 test-sha…)",
        "    [aggregate] recall.mrr: 0.100000 < min 0.500000",
        f"    [corpus] corpus.stable: {UNSTABLE_REASON}",
        "    [case b] latency.passage_ms: 50.000000 > max 10.000000",
        "    [case b] recall.recall_at_k: 0.100000 < min 0.500000",
        "    [case a] citations.recall: 0.000000 < min 1.000000",
        "    [case a] latency.passage_ms: 70.000000 > max 10.000000",
        "  2 case-scoped threshold(s) skipped as not applicable",
    ]


def test_a_null_value_row_is_absent_and_case_order_defaults_to_the_frame() -> None:
    frame = values([("z", "recall.mrr", None), ("y", "recall.mrr", 0.1)])
    report = gate_on_values(
        thresholds({"cases": {"default": {"recall.mrr": {"min": 0.5}}}}),
        {},
        frame,
        stable=True,
    )
    assert report.skipped == (f"case 'z': 'recall.mrr' {SKIP_TAIL}",)
    assert [v.case_id for v in report.violations] == ["y"]


def test_a_case_without_any_row_is_skipped_when_case_ids_are_given() -> None:
    report = gate_on_values(
        thresholds({"cases": {"default": {"recall.mrr": {"min": 0.5}}}}),
        {},
        NO_VALUES,
        stable=True,
        case_ids=["only"],
    )
    assert report.skipped == (f"case 'only': 'recall.mrr' {SKIP_TAIL}",)


def test_override_only_metric_is_added_for_that_case() -> None:
    frame = values([("c1", "recall.ndcg", 0.1), ("c2", "recall.ndcg", 0.1)])
    report = gate_on_values(
        thresholds({"cases": {"overrides": {"c2": {"recall.ndcg": {"min": 0.2}}}}}),
        {},
        frame,
        stable=True,
        case_ids=["c1", "c2"],
    )
    assert [(v.case_id, v.metric) for v in report.violations] == [("c2", "recall.ndcg")]


def test_latency_is_never_skipped() -> None:
    cases = [case_block("c1", passage={"outcome": "failed", "message": "x", "latency_ms": 7})]
    report = gate_on_values(
        thresholds({"cases": {"default": {"latency.passage_ms": {"max": 100}}}}),
        {},
        case_metric_frame(cases),
        stable=True,
        case_ids=["c1"],
    )
    assert report.passed
    assert report.skipped == ()


def test_nan_values_never_trip_a_bound() -> None:
    report = gate_on_values(
        thresholds({"cases": {"default": {"recall.mrr": {"min": 0.5, "max": 0.9}}}}),
        {},
        values([("c1", "recall.mrr", float("nan"))]),
        stable=True,
    )
    assert report.passed


def test_the_case_value_frame_must_have_the_agreed_columns() -> None:
    with pytest.raises(ValueError, match="value"):
        gate_on_values(
            thresholds({}),
            {},
            pl.DataFrame({"case_id": ["c"], "metric": ["recall.mrr"]}),
            stable=True,
        )


def test_integer_values_are_accepted_and_written_as_floats() -> None:
    frame = pl.DataFrame(
        {"case_id": ["c1"], "metric": ["diversity.sources"], "value": [1]},
        schema={"case_id": pl.String, "metric": pl.String, "value": pl.Int64},
    )
    report = gate_on_values(
        thresholds({"cases": {"default": {"diversity.sources": {"min": 2}}}}),
        {},
        frame,
        stable=True,
    )
    text = json.dumps(report.block)
    assert '"actual": 1.0' in text
    assert '"threshold": 2.0' in text


def test_many_cases_are_checked_in_one_pass() -> None:
    n = 20_000
    frame = pl.DataFrame(
        {
            "case_id": [f"c{i:05d}" for i in range(n)],
            "metric": ["recall.recall_at_k"] * n,
            "value": [(i % 10) / 10 for i in range(n)],
        },
        schema=CASE_VALUES_SCHEMA,
    )
    case_ids = [f"c{i:05d}" for i in range(n + 5)]  # five cases without recall
    report = gate_on_values(
        thresholds({"cases": {"default": {"recall.recall_at_k": {"min": 0.5}}}}),
        {},
        frame,
        stable=True,
        case_ids=case_ids,
    )
    assert len(report.violations) == n // 2
    assert len(report.skipped) == 5
    lines = report.lines()
    assert lines[0] == f"  thresholds: FAIL — {n // 2} violation(s) (sha256 test-sha…)"
    assert lines[1] == "    [case c00000] recall.recall_at_k: 0.000000 < min 0.500000"
    assert lines[-2] == f"    ... and {n // 2 - 10} more case-scoped violation(s)"
    assert lines[-1] == "  5 case-scoped threshold(s) skipped as not applicable"
    assert len(lines) == 1 + 10 + 2


# --------------------------------------------------------------------------- §5.5, §5.6 output


def test_block_key_order_and_omission() -> None:
    passing = GateReport(sha256="abc", allow_unstable_corpus=True, violations=(), skipped=())
    assert list(passing.block) == ["sha256", "passed", "allow_unstable_corpus"]
    failing = GateReport(
        sha256="abc",
        allow_unstable_corpus=False,
        violations=(
            Violation(
                scope="case",
                case_id="c",
                metric="m",
                bound="min",
                threshold=1.0,
                actual=0.0,
                reason="r",
            ),
        ),
        skipped=("s",),
    )
    assert list(failing.block) == [
        "sha256",
        "passed",
        "allow_unstable_corpus",
        "violations",
        "skipped",
    ]
    assert list(failing.violations[0].to_json()) == [
        "scope",
        "case_id",
        "metric",
        "bound",
        "threshold",
        "actual",
        "reason",
    ]
    assert failing.exit_code == EXIT_GATE
    assert passing.exit_code == EXIT_OK


def test_non_finite_actual_serializes_as_null() -> None:
    violation = Violation(
        scope="aggregate", metric="m", bound="max", threshold=1.0, actual=float("inf"), reason="r"
    )
    assert violation.to_json()["actual"] is None


def test_pass_line_names_the_first_twelve_hex_digits() -> None:
    report = GateReport(
        sha256="21913844c872603177f577ea2b9823dfb12bf84f0c579691447b47d6649d8beb",
        allow_unstable_corpus=False,
        violations=(),
        skipped=("ignored on PASS",),
    )
    assert summary_lines(report) == ["  thresholds: PASS (sha256 21913844c872…)"]


def test_fixed_texts() -> None:
    assert REPORT_ONLY_NOTICE == (
        "no --thresholds given — this run is report-only and always exits 0"
    )
    assert UNSTABLE_CORPUS_WARNING_LINE == (
        "  WARNING: the context's revision changed during this run — a write landed mid-run "
        "(corpus.revision_before != corpus.revision_after)"
    )


def test_case_metric_frame_reader_side_nulls_are_absent() -> None:
    frame = case_metric_frame(
        [
            case_block(
                "c1",
                recall={"recall_at_k": None, "mrr": 0.5, "ndcg": True},
                coverage={"labels": None, "concepts": {"value": None}},
                citations={"recall": {"value": 1}, "validity": None},
                diversity_sources=3,
            ),
            {"case_id": 7},  # not a string id: ignored
        ]
    )
    assert frame.schema == pl.Schema(CASE_VALUES_SCHEMA)
    assert frame.rows() == [
        ("c1", "recall.mrr", 0.5),
        ("c1", "citations.recall", 1.0),
        ("c1", "latency.passage_ms", 5.0),
        ("c1", "diversity.sources", 3.0),
    ]


def test_case_values_from_the_score_modules_wide_frame() -> None:
    from taguru_eval.gate import case_values_from_cases_frame
    from taguru_eval.tables.schemas import CASES

    schema = CASES
    rows: list[dict[str, Any]] = [dict.fromkeys(schema.names()) for _ in range(2)]
    rows[0].update(case_id="c1", recall_at_k=0.25, passage_latency_ms=7, diversity_sources=2)
    rows[1].update(case_id="c2", passage_latency_ms=9, citations_locator_validity=1.0)
    long = case_values_from_cases_frame(pl.DataFrame(rows, schema=schema))
    assert long.schema == pl.Schema(CASE_VALUES_SCHEMA)
    assert sorted(long.rows()) == [
        ("c1", "diversity.sources", 2.0),
        ("c1", "latency.passage_ms", 7.0),
        ("c1", "recall.recall_at_k", 0.25),
        ("c2", "citations.locator_validity", 1.0),
        ("c2", "latency.passage_ms", 9.0),
    ]
    report = gate_on_values(
        thresholds({"cases": {"default": {"recall.recall_at_k": {"min": 0.5}}}}),
        {},
        long,
        stable=True,
        case_ids=["c1", "c2"],
    )
    assert [v.case_id for v in report.violations] == ["c1"]
    assert report.skipped == (f"case 'c2': 'recall.recall_at_k' {SKIP_TAIL}",)


def test_summary_lines_escape_a_case_id_s_control_characters() -> None:
    # GateReport.lines() is the library's copy of the stdout block: a case_id (or
    # an abstention reason's case list) with ESC or a newline must not reach a
    # terminal raw; every line without one keeps §5.6's bytes.
    violations = (
        Violation("aggregate", "abstention.false_answers", 2.0, "2.000000 > max 0.000000: a\x1bb"),
        Violation("case", "recall.mrr", 0.25, "0.250000 < min 0.500000", "\x1b[31mRED\nFAKE"),
        Violation("case", "recall.mrr", 0.25, "0.250000 < min 0.500000", "plain"),
    )
    report = GateReport("ab" * 32, False, violations, ())
    assert summary_lines(report) == [
        "  thresholds: FAIL — 3 violation(s) (sha256 abababababab…)",
        "    [aggregate] abstention.false_answers: 2.000000 > max 0.000000: a\\u{1b}b",
        "    [case \\u{1b}[31mRED\\nFAKE] recall.mrr: 0.250000 < min 0.500000",
        "    [case plain] recall.mrr: 0.250000 < min 0.500000",
    ]
