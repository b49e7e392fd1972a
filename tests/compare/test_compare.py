"""``compare`` end to end: GATE_AND_COMPARE.md §6, the §7.2 worked example
byte for byte, every §8.5–§8.12 scenario, taguru-written input, malformed
input and unwritable output.

Test runs are built programmatically (``run_doc`` / ``case``) instead of
through run mode, so each test states exactly the fields it depends on.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.layouts import artifact_text
from support.paths import PROJECT_ROOT

from taguru_eval.catalog import COMPARISON_METRICS, definitions
from taguru_eval.cli.compare import DEFAULT_OUT, main, parse_args
from taguru_eval.compare import Comparison, compare
from taguru_eval.errors import InputError

NOW = "2026-07-29T00:00:00Z"
DIGEST = "21913844c872603177f577ea2b9823dfb12bf84f0c579691447b47d6649d8beb"
PREFIX = "taguru: evaluate: "
USAGE_SUFFIX = " — try 'taguru evaluate --help'\n  hint: see python -m taguru_eval compare --help"


# ------------------------------------------------------------------ builders


def case(
    case_id: str,
    *,
    recall: tuple[float, float, float] | None = None,
    concepts: float | None = None,
    labels: float | None = None,
    associations: float | None = None,
    citations: tuple[float, float] | None = None,
    diversity: int | None = None,
    latency_ms: int = 5,
) -> dict[str, Any]:
    """A case block shaped as evaluation.json writes it (§6.6), with only the
    metric-bearing blocks that were asked for."""
    block: dict[str, Any] = {
        "case_id": case_id,
        "query": f"query of {case_id}",
        "limit": 10,
        "passage": {"outcome": "searched", "hits": [], "latency_ms": latency_ms},
    }
    if recall is not None:
        rk, mrr, ndcg = recall
        block["recall"] = {
            "recall_at_k": rk,
            "mrr": mrr,
            "ndcg": ndcg,
            "expected_total": 1,
            "matched": 1,
        }
    coverage = {
        key: {"expected": 2, "matched": 1, "value": value}
        for key, value in (
            ("concepts", concepts),
            ("labels", labels),
            ("associations", associations),
        )
        if value is not None
    }
    if coverage:
        block["coverage"] = coverage
    if citations is not None:
        cit_recall, validity = citations
        block["citations"] = {
            "recall": {"expected_total": 1, "matched": 1, "value": cit_recall},
            "validity": {"expected_total": 1, "valid": 1, "value": validity},
            "checks": [],
        }
    block["missed"] = []
    block["missed_truncated"] = 0
    if diversity is not None:
        block["diversity_sources"] = diversity
    return block


def distribution(mean: float | None, n: int = 2) -> dict[str, Any]:
    if mean is None:
        return dict.fromkeys(("n", "min", "p50", "p90", "p99", "max", "mean", "sum")) | {"n": 0}
    return {
        "n": n,
        "min": mean,
        "p50": mean,
        "p90": mean,
        "p99": mean,
        "max": mean,
        "mean": mean,
        "sum": mean * n,
    }


def ratio(numerator: int | None, n: int) -> dict[str, Any]:
    if n == 0 or numerator is None:
        return {"value": None, "n": 0, "numerator": None}
    return {"value": numerator / n, "n": n, "numerator": numerator}


def run_doc(
    cases: list[dict[str, Any]] | None = None,
    *,
    context: str = "sake",
    stamp: int = 1,
    generated_at: str = "2026-07-28T10:00:00Z",
    revision: tuple[int, int, int] = (1, 1, 1),
    stable: bool | None = True,
    thresholds: str | None = None,
    budget: tuple[int, int, int] | None = None,
    statistics: dict[str, str] | None = None,
    metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An evaluation.json document; ``statistics`` gives ``definitions``."""
    inputs: dict[str, Any] = {
        "eval": {"path": "eval.jsonl", "name": None, "cases": len(cases or [])},
        "context": context,
        "url": "http://127.0.0.1:7070",
        "out": "evaluation.json",
        "default_limit": 10,
        "resolve_limit": 5,
        "mode": "baseline" if budget is None else "assembly",
    }
    if budget is not None:
        inputs["budget"] = dict(zip(("max_items", "max_bytes", "max_tokens"), budget, strict=True))
    inputs["concurrency"] = 8
    graph, passages, config = revision
    corpus: dict[str, Any] = {
        "revision_before": {"graph": graph, "passages": passages, "config": config},
        "revision_after": {"graph": graph, "passages": passages, "config": config},
    }
    if stable is not None:
        corpus["stable"] = stable
    corpus["sources_count"] = 3
    return {
        "taguru_evaluation": stamp,
        "generated_at": generated_at,
        "inputs": inputs,
        "corpus": corpus,
        "thresholds": None
        if thresholds is None
        else {"sha256": thresholds, "passed": True, "allow_unstable_corpus": False},
        "definitions": {name: {"statistic": s} for name, s in (statistics or {}).items()},
        "cases": cases or [],
        "metrics": metrics or {},
    }


def write(path: Path, doc: dict[str, Any]) -> Path:
    """Write a document pretty-printed, as evaluation.json is (§1.3)."""
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def records_of(comparison: Comparison) -> list[dict[str, Any]]:
    return comparison.records()


@pytest.fixture()
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ------------------------------------------------------------------ §8.5 arguments


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [],
            "evaluate compare takes exactly two positional arguments, BASE.json and "
            "HEAD.json (got 0)",
        ),
        (
            ["base.json"],
            "evaluate compare takes exactly two positional arguments, BASE.json and "
            "HEAD.json (got 1)",
        ),
        (
            ["a.json", "b.json", "c.json"],
            "evaluate compare takes exactly two positional arguments, BASE.json and "
            "HEAD.json (got 3)",
        ),
        (["a.json", "b.json", "--out", "x.jsonl", "--out", "y.jsonl"], "--out given twice"),
        (["a.json", "b.json", "--out"], "--out needs a file path"),
        # taguru asks for the value before it looks for a repeat
        (["a.json", "b.json", "--out", "x.jsonl", "--out"], "--out needs a file path"),
        (["a.json", "b.json", "--bogus"], "unknown flag '--bogus' for evaluate compare"),
        (["--bogus", "--help"], "unknown flag '--bogus' for evaluate compare"),
    ],
)
def test_usage_errors_exit_2_with_the_exact_line(
    argv: list[str], message: str, in_tmp: Path
) -> None:
    code, out, err = cli(argv)
    assert code == 2
    assert out == ""
    assert err == f"{PREFIX}{message}{USAGE_SUFFIX}\n"
    assert list(in_tmp.iterdir()) == []


def test_out_defaults_and_is_captured() -> None:
    parsed = parse_args(["base.json", "head.json"])
    assert parsed is not None
    assert (parsed.base, parsed.head, parsed.out) == ("base.json", "head.json", DEFAULT_OUT)
    assert DEFAULT_OUT == "changes.jsonl"
    custom = parse_args(["base.json", "head.json", "--out", "custom.jsonl"])
    assert custom is not None and custom.out == "custom.jsonl"


def test_out_value_is_taken_verbatim_and_single_dash_words_are_positionals() -> None:
    parsed = parse_args(["--out", "--help", "-x", "-"])
    assert parsed is not None
    assert (parsed.base, parsed.head, parsed.out) == ("-x", "-", "--help")


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["a.json", "--help", "--bogus"]])
def test_help_exits_0_without_positionals(argv: list[str]) -> None:
    code, out, err = cli(argv)
    assert code == 0
    assert err == ""
    first, *rest = out.splitlines()
    assert first == "usage: python -m taguru_eval compare BASE.json HEAD.json [--out FILE]"
    body = "\n".join(rest)
    for word in ("BASE.json", "HEAD.json", "--out", "exit codes", "  0 ", "  1 ", "  2 "):
        assert word in body


# ------------------------------------------------------------------ §8.6 classification


def _one_case(base_case: dict[str, Any], head_case: dict[str, Any]) -> Comparison:
    return compare(run_doc([base_case]), run_doc([head_case]))


def test_a_single_metric_increase_is_improved() -> None:
    result = _one_case(case("c1", recall=(0.5, 0.5, 0.5)), case("c1", recall=(0.8, 0.5, 0.5)))
    [record] = records_of(result)
    assert record["kind"] == "improved"
    [entry] = record["metrics"]
    assert entry["metric"] == "recall.recall_at_k"
    assert entry["direction"] == "improved"
    assert abs(entry["delta"] - 0.3) <= 1e-9
    assert result.warnings == ()


def test_a_single_metric_decrease_is_regressed() -> None:
    result = _one_case(case("c1", recall=(0.8, 0.5, 0.5)), case("c1", recall=(0.5, 0.5, 0.5)))
    [record] = records_of(result)
    assert record["kind"] == "regressed"
    assert [e["direction"] for e in record["metrics"]] == ["regressed"]


def test_a_mixed_case_with_any_regression_is_regressed_and_keeps_both_directions() -> None:
    result = _one_case(
        case("c1", recall=(0.5, 0.5, 0.5), citations=(1.0, 1.0)),
        case("c1", recall=(0.75, 0.5, 0.5), citations=(0.5, 1.0)),
    )
    [record] = records_of(result)
    assert record["kind"] == "regressed"
    assert [(e["metric"], e["direction"]) for e in record["metrics"]] == [
        ("recall.recall_at_k", "improved"),
        ("citations.recall", "regressed"),
    ]


def test_identical_values_are_unchanged() -> None:
    result = _one_case(case("c1", recall=(0.6, 0.6, 0.6)), case("c1", recall=(0.6, 0.6, 0.6)))
    assert records_of(result) == []
    assert result.counts["unchanged"] == 1
    assert result.warnings == ()


def test_taguru_negative_zero_ndcg_equals_our_zero(tmp_path: Path) -> None:
    """taguru writes a fully missed case's nDCG as -0.0 (so does this package since
    ERRATA row 25; an older artifact has 0.0): read from an evaluation.json, it
    compares as unchanged against 0.0 either way."""
    taguru_doc = run_doc([case("c1", recall=(0.0, 0.0, -0.0))])
    our_doc = run_doc([case("c1", recall=(0.0, 0.0, 0.0))])
    base = tmp_path / "taguru.json"
    head = tmp_path / "ours.json"
    base.write_text(json.dumps(taguru_doc), encoding="utf-8")
    head.write_text(json.dumps(our_doc), encoding="utf-8")
    assert '"ndcg": -0.0' in base.read_text(encoding="utf-8")
    for first, second in ((base, head), (head, base)):
        result = compare(first, second)
        assert result.counts["unchanged"] == 1
        assert records_of(result) == []


@pytest.mark.parametrize("head_value", [0.6 + 1e-12, 0.6 - 1e-12, 0.6 + 1e-9 - 1e-17])
def test_a_sub_epsilon_delta_is_unchanged(head_value: float) -> None:
    result = _one_case(
        case("c1", recall=(0.6, 0.6, 0.6)), case("c1", recall=(head_value, 0.6, 0.6))
    )
    assert result.counts["unchanged"] == 1
    assert records_of(result) == []


def test_just_over_epsilon_counts() -> None:
    result = _one_case(case("c1", recall=(0.0, 0.0, 0.0)), case("c1", recall=(2e-9, 0.0, 0.0)))
    assert result.counts["improved"] == 1


def test_negative_zero_equals_zero() -> None:
    result = _one_case(case("c1", recall=(0.0, 0.0, 0.0)), case("c1", recall=(-0.0, 0.0, 0.0)))
    assert result.counts["unchanged"] == 1


def test_latency_never_classifies_but_diversity_does() -> None:
    result = _one_case(
        case("c1", diversity=2, latency_ms=5), case("c1", diversity=2, latency_ms=900)
    )
    assert result.counts["unchanged"] == 1
    result = _one_case(case("c1", diversity=3), case("c1", diversity=2))
    [record] = records_of(result)
    assert record["metrics"] == [
        {
            "metric": "diversity.sources",
            "sides": {"base": 3.0, "head": 2.0},
            "delta": -1.0,
            "direction": "regressed",
        }
    ]
    assert "latency.passage_ms" not in COMPARISON_METRICS


def test_a_metric_present_on_only_one_side_does_not_drive_classification_but_warns() -> None:
    result = _one_case(case("c1"), case("c1", recall=(0.9, 0.9, 0.9)))
    assert result.counts["unchanged"] == 1
    assert len(result.warnings) == 3
    assert all("only one side" in w for w in result.warnings)
    assert result.warnings[0] == (
        "case 'c1': metric 'recall.recall_at_k' has a value on only one side — "
        "excluded from classification"
    )


def test_duplicate_case_id_within_one_side_warns_and_keeps_the_last() -> None:
    base = run_doc([case("dup"), case("dup", recall=(0.9, 0.9, 0.9))])
    head = run_doc([case("dup", recall=(0.9, 0.9, 0.9))])
    result = compare(base, head)
    assert result.warnings == ("BASE: duplicate case_id 'dup' — using the last occurrence",)
    assert result.counts["cases_base"] == 1
    assert result.counts["unchanged"] == 1
    assert result.cases["recall.recall_at_k.base"].to_list() == [0.9]


# ------------------------------------------------------------------ §8.7 aggregates


def test_a_ratio_metric_is_read_as_a_ratio_not_misread_as_a_distribution() -> None:
    doc = run_doc(
        statistics={"citations.recall": "ratio"},
        metrics={"citations.recall": {"value": 0.0968, "n": 31, "numerator": 3}},
    )
    result = compare(doc, doc)
    assert result.metrics.to_dicts() == [
        {
            "metric": "citations.recall",
            "statistic": "ratio",
            "base": 0.0968,
            "head": 0.0968,
            "delta": 0.0,
        }
    ]


def test_a_metric_without_a_definitions_entry_warns_and_is_skipped() -> None:
    base = run_doc(metrics={"mystery.metric": {"value": 1.0, "n": 1, "numerator": 1}})
    result = compare(base, run_doc())
    assert result.metrics.height == 0
    assert result.warnings == (
        "BASE: metric 'mystery.metric' has no definitions entry — skipped from the aggregate diff",
    )


def test_an_unknown_statistic_name_warns_and_is_skipped() -> None:
    base = run_doc(statistics={"weird": "histogram"}, metrics={"weird": {"n": 1}})
    result = compare(base, run_doc())
    assert result.metrics.height == 0
    assert result.warnings == (
        "BASE: metric 'weird': definitions names unknown statistic 'histogram'",
    )


def test_aggregate_delta_is_head_minus_base() -> None:
    stats = {"recall.recall_at_k": "distribution"}
    result = compare(
        run_doc(statistics=stats, metrics={"recall.recall_at_k": distribution(0.6, 5)}),
        run_doc(statistics=stats, metrics={"recall.recall_at_k": distribution(0.8, 5)}),
    )
    [entry] = result.metrics.to_dicts()
    assert abs(entry["delta"] - 0.2) <= 1e-9
    assert result.warnings == ()


def test_aggregate_entries_cover_every_metric_and_statistic_prefers_head() -> None:
    base = run_doc(
        statistics={"latency.passage_ms": "distribution", "z.count": "count", "only.base": "ratio"},
        metrics={
            "latency.passage_ms": distribution(12.0),
            "z.count": {"value": 3.0, "n": 3},
            "only.base": ratio(1, 2),
        },
    )
    head = run_doc(
        statistics={"latency.passage_ms": "distribution", "z.count": "count"},
        metrics={"latency.passage_ms": distribution(None), "z.count": {"value": 4.0, "n": 4}},
    )
    rows = compare(base, head).metrics.to_dicts()
    assert rows == [
        {
            "metric": "latency.passage_ms",
            "statistic": "distribution",
            "base": 12.0,
            "head": None,
            "delta": None,
        },
        {"metric": "only.base", "statistic": "ratio", "base": 0.5, "head": None, "delta": None},
        {"metric": "z.count", "statistic": "count", "base": 3.0, "head": 4.0, "delta": 1.0},
    ]


def test_an_aggregate_value_of_the_wrong_shape_warns_and_is_skipped() -> None:
    # §6.6 step 4: a metric payload that does not decode as its declared
    # statistic is a warning naming the metric, never an exit 2.
    stats = {"recall.mrr": "distribution", "rerank.ran": "ratio"}
    base = run_doc(
        statistics=stats,
        metrics={"recall.mrr": {"n": 5.0, "mean": 0.5}, "rerank.ran": [1, 2]},
    )
    result = compare(base, run_doc(statistics=stats))
    assert result.metrics.height == 0
    assert len(result.warnings) == 2
    assert result.warnings[0].startswith("BASE: metric 'recall.mrr': n: ")
    assert result.warnings[1].startswith("BASE: metric 'rerank.ran': ")


def test_a_payload_of_another_shape_that_decodes_is_silently_absent() -> None:
    stats = {"x.m": "distribution"}
    base = run_doc(statistics=stats, metrics={"x.m": ratio(1, 2)})
    result = compare(base, run_doc(statistics=stats, metrics={"x.m": distribution(0.25)}))
    assert result.warnings == ()
    assert result.metrics.to_dicts() == [
        {"metric": "x.m", "statistic": "distribution", "base": None, "head": 0.25, "delta": None}
    ]


# ------------------------------------------------------------------ §8.8 mismatch warnings


@pytest.mark.parametrize(
    ("base_kwargs", "head_kwargs", "expected"),
    [
        (
            {"context": "ctx-a"},
            {"context": "ctx-b"},
            "context differs: BASE 'ctx-a' vs HEAD 'ctx-b'",
        ),
        (
            {"revision": (1, 1, 1)},
            {"revision": (2, 1, 1)},
            "corpus.revision_after differs between BASE and HEAD",
        ),
        ({"stable": False}, {}, "<BASE>: corpus.stable is false — a write landed mid-run"),
        ({}, {"stable": False}, "<HEAD>: corpus.stable is false — a write landed mid-run"),
        (
            {},
            {"thresholds": "abc123"},
            "thresholds file identity differs: BASE none vs HEAD abc123",
        ),
        (
            {"thresholds": DIGEST},
            {"thresholds": ""},
            "thresholds file identity differs: BASE 21913844c872 vs HEAD ",
        ),
        (
            {},
            {"budget": (40, 65536, 4000)},
            "budget differs: BASE none (untruncated baseline) vs HEAD max_items=40 "
            "max_bytes=65536 max_tokens=4000 — not an equal-budget comparison",
        ),
    ],
)
def test_mismatch_warnings(
    base_kwargs: dict[str, Any], head_kwargs: dict[str, Any], expected: str
) -> None:
    result = compare(run_doc(**base_kwargs), run_doc(**head_kwargs))
    assert result.warnings == (expected,)


def test_equal_budgets_never_warn_even_across_modes() -> None:
    base = run_doc(budget=(40, 65536, 4000))
    head = run_doc(budget=(40, 65536, 4000))
    head["inputs"]["mode"] = "baseline"
    assert not any("budget" in w for w in compare(base, head).warnings)


def test_a_stamp_difference_warns_when_views_bypass_the_loader() -> None:
    from taguru_eval.compare.classify import compare_views
    from taguru_eval.compare.load import view_from_document

    base = view_from_document(run_doc(stamp=1), "base.json", check_stamp=False)
    head = view_from_document(run_doc(stamp=2), "head.json", check_stamp=False)
    assert compare_views(base, head).warnings == (
        "taguru_evaluation stamp differs: BASE 1 vs HEAD 2",
    )


def test_baseline_vs_budgeted_run_exits_0_and_warns_budget(in_tmp: Path) -> None:
    write(in_tmp / "base.json", run_doc([case("c1", recall=(1.0, 1.0, 1.0))]))
    write(
        in_tmp / "head.json",
        run_doc([case("c1", recall=(1.0, 1.0, 1.0))], budget=(2, 65536, 4000)),
    )
    code, _out, err = cli(["base.json", "head.json"])
    assert code == 0
    assert "budget differs" in err


def test_warning_order_follows_the_spec() -> None:
    stats = {"a.m": "ratio"}
    base = run_doc(
        [case("b"), case("b"), case("a", recall=(1.0, 1.0, 1.0))],
        context="x",
        metrics={"a.m": ratio(1, 1), "b.m": ratio(1, 1)},
        statistics=stats,
    )
    head = run_doc(
        [case("h"), case("h"), case("a"), case("b", diversity=1)],
        context="y",
        metrics={"b.m": ratio(1, 1)},
        statistics=stats,
    )
    warnings = compare(base, head).warnings
    assert warnings == (
        "context differs: BASE 'x' vs HEAD 'y'",
        "BASE: duplicate case_id 'b' — using the last occurrence",
        "HEAD: duplicate case_id 'h' — using the last occurrence",
        "case 'a': metric 'recall.recall_at_k' has a value on only one side — "
        "excluded from classification",
        "case 'a': metric 'recall.mrr' has a value on only one side — excluded from classification",
        "case 'a': metric 'recall.ndcg' has a value on only one side — "
        "excluded from classification",
        "case 'b': metric 'diversity.sources' has a value on only one side — "
        "excluded from classification",
        "BASE: metric 'b.m' has no definitions entry — skipped from the aggregate diff",
        "HEAD: metric 'b.m' has no definitions entry — skipped from the aggregate diff",
    )


# ------------------------------------------------------------------ §8.9 report and file


def test_a_case_only_in_head_is_added_and_only_in_base_is_removed() -> None:
    result = compare(
        run_doc([case("only-base")]), run_doc([case("only-head", recall=(0.5, 0.5, 0.5))])
    )
    assert (result.counts["added"], result.counts["removed"]) == (1, 1)
    assert [(r["kind"], r["case_id"]) for r in records_of(result)] == [
        ("removed", "only-base"),
        ("added", "only-head"),
    ]
    assert records_of(result)[0]["metrics"] == []


def test_an_added_case_lists_its_available_metrics_as_not_comparable() -> None:
    result = compare(run_doc(), run_doc([case("new-case", recall=(0.7, 0.7, 0.7))]))
    [record] = records_of(result)
    assert (record["kind"], record["case_id"]) == ("added", "new-case")
    assert len(record["metrics"]) == 3
    for entry in record["metrics"]:
        assert entry["direction"] == "not_comparable"
        assert entry["delta"] is None
        assert entry["sides"]["base"] is None
        assert entry["sides"]["head"] == 0.7
    assert result.warnings == ()


def test_records_are_in_case_id_byte_order_with_kinds_interleaved() -> None:
    base = run_doc([case(i, recall=(0.5, 0.5, 0.5)) for i in ("b", "é", "a", "Z")])
    head = run_doc(
        [case("b", recall=(0.1, 0.5, 0.5)), case("a", recall=(0.9, 0.5, 0.5)), case("0")]
    )
    result = compare(base, head)
    assert [(r["case_id"], r["kind"]) for r in records_of(result)] == [
        ("0", "added"),
        ("Z", "removed"),
        ("a", "improved"),
        ("b", "regressed"),
        ("é", "removed"),
    ]


def test_changes_jsonl_lines_are_each_valid_json_header_first(in_tmp: Path) -> None:
    write(in_tmp / "b.json", run_doc([case("c1", recall=(0.5, 0.5, 0.5))]))
    write(in_tmp / "h.json", run_doc([case("c1", recall=(0.9, 0.9, 0.9))]))
    assert cli(["b.json", "h.json"])[0] == 0
    raw = (in_tmp / "changes.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.decode("utf-8").split("\n")[:-1]
    assert len(lines) == 2
    header = json.loads(lines[0])
    assert header["kind"] == "header"
    assert header["taguru_evaluation_changes"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", header["generated_at"])
    assert "warnings" not in header
    assert json.loads(lines[1])["kind"] == "improved"
    for line in lines:
        assert ": " not in line and ", " not in line  # compact


def test_an_unchanged_case_produces_no_per_case_line(in_tmp: Path) -> None:
    doc = run_doc([case("same", recall=(0.5, 0.5, 0.5))])
    write(in_tmp / "b.json", doc)
    write(in_tmp / "h.json", doc)
    assert cli(["b.json", "h.json", "--out", "c.jsonl"])[0] == 0
    lines = (in_tmp / "c.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["counts"]["unchanged"] == 1


def test_changes_jsonl_never_carries_corpus_body_text(in_tmp: Path) -> None:
    base_case = case("c1", recall=(0.5, 0.5, 0.5), citations=(1.0, 1.0))
    base_case["passage"]["hits"] = [
        {"source": "a.md", "paragraph": 0, "score": 1.5, "lanes": {}, "text": "BODY"}
    ]
    base_case["citations"]["checks"] = [
        {
            "source": "a.md",
            "paragraph": 0,
            "served": True,
            "outcome": "resolved",
            "section": {"check": "not_checked"},
            "quote": {"declared": "QUOTE", "matched": True},
            "latency_ms": 1,
        }
    ]
    write(in_tmp / "b.json", run_doc([base_case]))
    write(in_tmp / "h.json", run_doc([case("c1", recall=(0.1, 0.5, 0.5))]))
    assert cli(["b.json", "h.json"])[0] == 0
    text = (in_tmp / "changes.jsonl").read_text(encoding="utf-8")
    for forbidden in ('"text"', '"quote"', '"section"', '"hits"', "BODY", "QUOTE"):
        assert forbidden not in text


def test_non_ascii_is_raw_and_control_characters_escaped() -> None:
    cid = '日本\u0001"\\'
    result = compare(run_doc(), run_doc([case(cid, recall=(0.5, 0.5, 0.5))], context="酒"))
    text = result.changes_jsonl(NOW)
    assert '"case_id":"日本\\u0001\\"\\\\"' in text
    assert '"context":"酒"' in text


def test_a_delta_that_overflows_is_written_as_null() -> None:
    result = _one_case(case("c1", recall=(-1e308, 0.0, 0.0)), case("c1", recall=(1e308, 0.0, 0.0)))
    [record] = records_of(result)
    assert record["metrics"][0]["delta"] is None
    assert record["metrics"][0]["direction"] == "improved"


# ------------------------------------------------------------------ §8.10 loading


def test_a_missing_file_exits_2_with_reading(in_tmp: Path) -> None:
    write(in_tmp / "h.json", run_doc())
    code, out, err = cli(["/does/not/exist/evaluation.json", "h.json"])
    assert code == 2
    assert out == ""
    assert err == (
        f"{PREFIX}BASE reading /does/not/exist/evaluation.json: "
        "No such file or directory (os error 2)\n"
    )
    assert not (in_tmp / "changes.jsonl").exists()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "malformed evaluation.json: "),
        ('{"taguru_evaluation":1,"cases":[{"case_id":"c1"', "malformed evaluation.json: "),
        ('{"taguru_evaluation":1.0}', "malformed evaluation.json: taguru_evaluation: "),
        ('{"taguru_evaluation":1,"cases":null}', "malformed evaluation.json: cases: "),
        ("[1]", "malformed evaluation.json: "),
        ('{"taguru_evaluation":1} x', "malformed evaluation.json: "),
        ('{"taguru_evaluation":1,"x":NaN}', "malformed evaluation.json: "),
        ('\ufeff{"taguru_evaluation":1}', "malformed evaluation.json: "),
        ('{"taguru_evaluation":18446744073709551616}', "taguru_evaluation: "),
        ('{"taguru_evaluation":1,"corpus":{"stable":null}}', "corpus.stable: "),
        (
            '{"taguru_evaluation":1,"inputs":{"budget":{"max_items":1,"max_bytes":2}}}',
            "inputs.budget: ",
        ),
        (
            '{"taguru_evaluation":1,"corpus":{"revision_after":{"graph":-1}}}',
            "corpus.revision_after.graph: ",
        ),
        ('{"taguru_evaluation":1,"thresholds":{"sha256":7}}', "thresholds.sha256: "),
        ('{"taguru_evaluation":1,"definitions":{"a":null}}', "definitions.a: "),
        ('{"taguru_evaluation":1,"metrics":null}', "metrics: "),
        (
            '{"taguru_evaluation":1,"cases":[{"case_id":"c1","recall":{"mrr":"high"}}]}',
            "cases[0].recall.mrr: ",
        ),
        (
            '{"taguru_evaluation":1,"cases":[{"case_id":"c1","recall":{"mrr":1e400}}]}',
            "cases[0].recall.mrr: ",
        ),
        (
            '{"taguru_evaluation":1,"cases":[{"case_id":"c","citations":{"recall":null}}]}',
            "cases[0].citations.recall: ",
        ),
        (
            '{"taguru_evaluation":1,"cases":[{"case_id":"c","diversity_sources":true}]}',
            "cases[0].diversity_sources: ",
        ),
        ('{"taguru_evaluation":1,"cases":[{"case_id":3}]}', "cases[0].case_id: "),
        ('{"taguru_evaluation":1,"deep":' + "[" * 5000 + "]" * 5000 + "}", "recursion limit"),
    ],
)
def test_malformed_input_exits_2_naming_file_and_field(
    text: str, fragment: str, in_tmp: Path
) -> None:
    (in_tmp / "bad.json").write_text(text, encoding="utf-8")
    write(in_tmp / "h.json", run_doc())
    code, out, err = cli(["bad.json", "h.json"])
    assert code == 2
    assert out == ""
    assert err.startswith(f"{PREFIX}BASE bad.json: ")
    assert fragment in err
    assert err.count("\n") == 1
    assert not (in_tmp / "changes.jsonl").exists()


def test_invalid_utf8_is_a_reading_error(in_tmp: Path) -> None:
    (in_tmp / "bad.json").write_bytes(b'{"taguru_evaluation":1,"x":"\xff"}')
    write(in_tmp / "b.json", run_doc())
    code, _out, err = cli(["b.json", "bad.json"])
    assert code == 2
    assert err == f"{PREFIX}HEAD reading bad.json: stream did not contain valid UTF-8\n"


@pytest.mark.parametrize(("stamp", "shown"), [(2, "2"), (0, "0"), (None, "0")])
def test_a_stamp_outside_the_range_exits_2(stamp: int | None, shown: str, in_tmp: Path) -> None:
    doc = run_doc()
    if stamp is None:
        del doc["taguru_evaluation"]
    else:
        doc["taguru_evaluation"] = stamp
    write(in_tmp / "b.json", run_doc())
    write(in_tmp / "h.json", doc)
    code, _out, err = cli(["b.json", "h.json"])
    assert code == 2
    assert err == f"{PREFIX}HEAD h.json: taguru_evaluation must be within 1..=1, got {shown}\n"


def test_base_is_validated_before_head(in_tmp: Path) -> None:
    (in_tmp / "b.json").write_text('{"taguru_evaluation":2}', encoding="utf-8")
    code, _out, err = cli(["b.json", "missing.json"])
    assert code == 2
    assert err.startswith(f"{PREFIX}BASE b.json: taguru_evaluation must be within")


def test_a_well_formed_minimal_report_loads(in_tmp: Path) -> None:
    (in_tmp / "e.json").write_text(
        '{"taguru_evaluation":1,"generated_at":"2026-07-29T00:00:00Z",'
        '"inputs":{"context":"demo"},'
        '"corpus":{"revision_after":{"graph":1,"passages":1,"config":1},"stable":true},'
        '"cases":[]}',
        encoding="utf-8",
    )
    result = compare("e.json", "e.json")
    assert result.base.context == "demo"
    assert result.warnings == ()


def test_library_errors_are_input_errors_naming_the_side() -> None:
    with pytest.raises(InputError) as caught:
        compare(run_doc(stamp=2), run_doc())
    assert caught.value.message == ("BASE <BASE>: taguru_evaluation must be within 1..=1, got 2")
    with pytest.raises(InputError) as caught:
        compare(run_doc(), {"taguru_evaluation": 1, "cases": [{"recall": {"mrr": float("nan")}}]})
    assert caught.value.message.startswith("HEAD <HEAD>: malformed evaluation.json: ")


# ------------------------------------------------------------------ §8.11 value shapes


def test_value_shapes_decode_to_their_scalar() -> None:
    stats = {"d.zero": "distribution", "r.zero": "ratio", "r.third": "ratio", "c.none": "count"}
    doc = run_doc(
        statistics=stats,
        metrics={
            "d.zero": distribution(None),
            "r.zero": ratio(None, 0),
            "r.third": ratio(3, 31),
            "c.none": {"value": None, "n": 0},
        },
    )
    rows = compare(doc, doc).metrics.to_dicts()
    assert rows == [
        {"metric": "r.third", "statistic": "ratio", "base": 3 / 31, "head": 3 / 31, "delta": 0.0}
    ]


# ------------------------------------------------------------------ §7.2 / §8.12 derived

WORKED_BASE = """\
{"taguru_evaluation":1,"generated_at":"2026-07-28T10:00:00Z","inputs":{"context":"sake"},
 "corpus":{"revision_after":{"graph":3,"passages":5,"config":1},"stable":true},"thresholds":null,
 "definitions":{"recall.recall_at_k":{"statistic":"distribution"},"recall.mrr":{"statistic":"distribution"},"passage.failure_rate":{"statistic":"ratio"}},
 "metrics":{"recall.recall_at_k":{"n":2,"min":0.5,"p50":0.5,"p90":1.0,"p99":1.0,"max":1.0,"mean":0.75,"sum":1.5},
            "recall.mrr":{"n":2,"min":0.5,"p50":0.5,"p90":1.0,"p99":1.0,"max":1.0,"mean":0.75,"sum":1.5},
            "passage.failure_rate":{"value":0.0,"n":4,"numerator":0}},
 "cases":[{"case_id":"c1","recall":{"recall_at_k":1.0,"mrr":1.0,"ndcg":1.0},"citations":{"recall":{"value":1.0},"validity":{"value":1.0}},"diversity_sources":2},
          {"case_id":"c2","recall":{"recall_at_k":0.5,"mrr":0.5,"ndcg":0.5},"diversity_sources":1},
          {"case_id":"c3","coverage":{"concepts":{"expected":2,"matched":1,"value":0.5}}},
          {"case_id":"c4","coverage":{"labels":{"expected":1,"matched":1,"value":1.0}}}]}
"""

WORKED_CHANGES = """\
{"kind":"header","taguru_evaluation_changes":1,"generated_at":"2026-07-29T00:00:00Z","base":{"path":"base.json","context":"sake","taguru_evaluation":1,"generated_at":"2026-07-28T10:00:00Z","corpus_revision_after":{"graph":3,"passages":5,"config":1},"corpus_stable":true,"thresholds_sha256":null},"head":{"path":"head.json","context":"sake","taguru_evaluation":1,"generated_at":"2026-07-29T09:30:00Z","corpus_revision_after":{"graph":4,"passages":5,"config":1},"corpus_stable":true,"thresholds_sha256":"21913844c872603177f577ea2b9823dfb12bf84f0c579691447b47d6649d8beb"},"counts":{"improved":1,"regressed":1,"added":1,"removed":1,"unchanged":1,"cases_base":4,"cases_head":4},"metrics":[{"metric":"passage.failure_rate","statistic":"ratio","sides":{"base":0.0,"head":0.25},"delta":0.25},{"metric":"recall.mrr","statistic":"distribution","sides":{"base":0.75,"head":0.75},"delta":0.0},{"metric":"recall.recall_at_k","statistic":"distribution","sides":{"base":0.75,"head":0.875},"delta":0.125}],"warnings":["corpus.revision_after differs between BASE and HEAD","thresholds file identity differs: BASE none vs HEAD 21913844c872","case 'c2': metric 'diversity.sources' has a value on only one side — excluded from classification"]}
{"kind":"regressed","case_id":"c1","metrics":[{"metric":"recall.mrr","sides":{"base":1.0,"head":0.5},"delta":-0.5,"direction":"regressed"},{"metric":"recall.ndcg","sides":{"base":1.0,"head":0.75},"delta":-0.25,"direction":"regressed"},{"metric":"diversity.sources","sides":{"base":2.0,"head":3.0},"delta":1.0,"direction":"improved"}]}
{"kind":"improved","case_id":"c2","metrics":[{"metric":"recall.recall_at_k","sides":{"base":0.5,"head":0.75},"delta":0.25,"direction":"improved"},{"metric":"recall.mrr","sides":{"base":0.5,"head":1.0},"delta":0.5,"direction":"improved"},{"metric":"recall.ndcg","sides":{"base":0.5,"head":0.75},"delta":0.25,"direction":"improved"}]}
{"kind":"removed","case_id":"c4","metrics":[{"metric":"coverage.labels","sides":{"base":1.0,"head":null},"delta":null,"direction":"not_comparable"}]}
{"kind":"added","case_id":"c5","metrics":[{"metric":"citations.recall","sides":{"base":null,"head":0.0},"delta":null,"direction":"not_comparable"},{"metric":"citations.locator_validity","sides":{"base":null,"head":1.0},"delta":null,"direction":"not_comparable"}]}
"""  # noqa: E501

WORKED_STDERR = """\
taguru: evaluate: corpus.revision_after differs between BASE and HEAD
taguru: evaluate: thresholds file identity differs: BASE none vs HEAD 21913844c872
taguru: evaluate: case 'c2': metric 'diversity.sources' has a value on only one side — excluded from classification
"""  # noqa: E501

WORKED_STDOUT = """\
evaluate compare: 4 case(s) in BASE, 4 in HEAD — 1 improved, 1 regressed, 1 added, 1 removed, 1 unchanged
  aggregate:
    passage.failure_rate: 0.000 -> 0.250 (Δ +0.250)
    recall.mrr: 0.750 -> 0.750 (Δ +0.000)
    recall.recall_at_k: 0.750 -> 0.875 (Δ +0.125)
    regressed: c1 (recall.mrr -0.500, recall.ndcg -0.250)
  wrote changes.jsonl
"""  # noqa: E501


def _worked_head() -> dict[str, Any]:
    head: dict[str, Any] = json.loads(WORKED_BASE)
    head["generated_at"] = "2026-07-29T09:30:00Z"
    head["corpus"]["revision_after"] = {"graph": 4, "passages": 5, "config": 1}
    head["thresholds"] = {"sha256": DIGEST, "passed": True, "allow_unstable_corpus": False}
    head["metrics"]["recall.recall_at_k"].update(
        {"min": 0.75, "p50": 0.75, "mean": 0.875, "sum": 1.75}
    )
    head["metrics"]["passage.failure_rate"] = {"value": 0.25, "n": 4, "numerator": 1}
    head["cases"] = [
        {
            "case_id": "c1",
            "recall": {"recall_at_k": 1.0, "mrr": 0.5, "ndcg": 0.75},
            "citations": {"recall": {"value": 1.0}, "validity": {"value": 1.0}},
            "diversity_sources": 3,
        },
        {"case_id": "c2", "recall": {"recall_at_k": 0.75, "mrr": 1.0, "ndcg": 0.75}},
        {"case_id": "c3", "coverage": {"concepts": {"expected": 2, "matched": 1, "value": 0.5}}},
        {"case_id": "c5", "citations": {"recall": {"value": 0.0}, "validity": {"value": 1.0}}},
    ]
    return head


def test_worked_example_7_2_byte_for_byte(in_tmp: Path) -> None:
    (in_tmp / "base.json").write_text(WORKED_BASE, encoding="utf-8")
    write(in_tmp / "head.json", _worked_head())
    code, out, err = cli(["base.json", "head.json"])
    assert code == 0
    assert err == WORKED_STDERR
    assert out == WORKED_STDOUT
    written = (in_tmp / "changes.jsonl").read_bytes().decode("utf-8")
    stamp = re.compile(r'^(\{"kind":"header","taguru_evaluation_changes":1,"generated_at":")[^"]*"')
    assert re.match(
        r'^\{"kind":"header","taguru_evaluation_changes":1,"generated_at":"'
        r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"',
        written,
    )
    assert stamp.sub(rf'\g<1>{NOW}"', written, count=1) == WORKED_CHANGES
    assert sorted(p.name for p in in_tmp.iterdir()) == ["base.json", "changes.jsonl", "head.json"]


def test_worked_example_through_the_library(in_tmp: Path) -> None:
    (in_tmp / "base.json").write_text(WORKED_BASE, encoding="utf-8")
    result = compare("base.json", _worked_head(), head_label="head.json")
    assert result.changes_jsonl(NOW) == WORKED_CHANGES
    assert result.summary("changes.jsonl") == WORKED_STDOUT
    cases = result.cases
    assert cases["case_id"].to_list() == ["c1", "c2", "c3", "c4", "c5"]
    assert cases["kind"].to_list() == ["regressed", "improved", "unchanged", "removed", "added"]
    assert cases["recall.mrr.delta"].to_list()[:2] == [-0.5, 0.5]
    assert cases["recall.mrr.direction"].to_list()[:2] == ["regressed", "improved"]
    assert result.changed()["case_id"].to_list() == ["c1", "c2", "c4", "c5"]
    assert result.metrics.columns == ["metric", "statistic", "base", "head", "delta"]
    out = in_tmp / "lib.jsonl"
    result.write_changes(out)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[1:] == WORKED_CHANGES.splitlines()[1:]


def test_a_base_without_corpus_stable_warns_unstable(in_tmp: Path) -> None:
    write(in_tmp / "old.json", run_doc(stable=None))
    write(in_tmp / "new.json", run_doc())
    code, _out, err = cli(["old.json", "new.json"])
    assert code == 0
    assert err == f"{PREFIX}old.json: corpus.stable is false — a write landed mid-run\n"


def test_the_summary_caps_regressed_lines_and_prints_n_a_sides() -> None:
    stats = {"a.m": "ratio", "b.m": "ratio"}
    base = run_doc(
        [case(f"c{i:02d}", recall=(1.0, 1.0, 1.0)) for i in range(12)],
        statistics=stats,
        metrics={"a.m": ratio(1, 2)},
    )
    head = run_doc(
        [case(f"c{i:02d}", recall=(0.5, 1.0, 1.0)) for i in range(12)],
        statistics=stats,
        metrics={"b.m": ratio(1, 4)},
    )
    lines = compare(base, head).summary("out.jsonl").splitlines()
    assert lines[1:4] == ["  aggregate:", "    a.m: 0.500 -> n/a", "    b.m: n/a -> 0.250"]
    regressed = [line for line in lines if line.startswith("    regressed: ")]
    assert len(regressed) == 10
    assert regressed[0] == "    regressed: c00 (recall.recall_at_k -0.500)"
    assert lines[-2:] == ["    ... and 2 more regressed case(s)", "  wrote out.jsonl"]


def test_regressed_lines_print_without_an_aggregate_block() -> None:
    result = _one_case(case("c1", recall=(1.0, 1.0, 1.0)), case("c1", recall=(1.0, 0.5, 1.0)))
    assert result.summary("x").splitlines()[1:] == [
        "    regressed: c1 (recall.mrr -0.500)",
        "  wrote x",
    ]


# ------------------------------------------------------------------ interoperability


def _taguru_written_base() -> dict[str, Any]:
    """An evaluation.json exactly as taguru's own ``evaluate`` writes it: no
    ``inputs.concurrency``, ``warnings`` omitted, full prose definitions,
    ``corpus.embeddings``/``last_write_epoch_*``, real passage/structural blocks."""
    hit = {
        "source": "corpus/brewery.md",
        "paragraph": 2,
        "score": 0.86304635,
        "lanes": {"bm25": {"rank": 1, "score": 0.86304635}},
    }
    cases = [
        {
            "case_id": "rice-polishing",
            "query": "精米歩合とは",
            "cues": ["精米"],
            "limit": 10,
            "passage": {
                "outcome": "searched",
                "plan": {
                    "context": "sake",
                    "lanes": {
                        "bm25": {"ran": True},
                        "vector": {"ran": False, "reason": "no embedding provider is configured"},
                    },
                },
                "hits": [hit],
                "latency_ms": 3,
            },
            "structural": {
                "cues": [
                    {
                        "cue": "精米",
                        "kind": "concept",
                        "resolved_names": ["精米歩合"],
                        "tier": "exact",
                        "limit": 5,
                        "latency_ms": 1,
                    }
                ],
                "associations": [],
            },
            "recall": {
                "recall_at_k": 1.0,
                "mrr": 1.0,
                "ndcg": 1.0,
                "expected_total": 1,
                "matched": 1,
            },
            "coverage": {"concepts": {"expected": 1, "matched": 1, "value": 1.0}},
            "lane_cross": {"structural_hit": True, "passage_hit": True},
            "missed": [],
            "missed_truncated": 0,
            "diversity_sources": 1,
        },
        {
            "case_id": "failed-lane",
            "query": "koji",
            "limit": 10,
            "passage": {
                "outcome": "failed",
                "message": "POST http://127.0.0.1:7070/contexts/sake/sources/search failed",
                "latency_ms": 35000,
            },
            "missed": [],
            "missed_truncated": 0,
        },
    ]
    metrics: dict[str, Any] = {}
    defs = definitions()
    for name, definition in defs.items():
        metrics[name] = (
            distribution(None) if definition["statistic"] == "distribution" else ratio(None, 0)
        )
    metrics["recall.recall_at_k"] = distribution(1.0, 1)
    metrics["passage.failure_rate"] = ratio(1, 2)
    return {
        "taguru_evaluation": 1,
        "generated_at": "2026-07-28T10:05:12Z",
        "matching": {
            "normalization": "taguru::context::normalize_entry",
            "normalized": ["expected_concepts", "expected_labels"],
            "sources": "exact (source, paragraph) match — no normalization",
        },
        "inputs": {
            "eval": {"path": "eval.jsonl", "name": "sake smoke", "cases": 2},
            "context": "sake",
            "url": "http://127.0.0.1:7070",
            "out": "evaluation.json",
            "default_limit": 10,
            "resolve_limit": 5,
            "mode": "baseline",
        },
        "corpus": {
            "revision_before": {"graph": 3, "passages": 5, "config": 1},
            "revision_after": {"graph": 3, "passages": 5, "config": 1},
            "stable": True,
            "last_write_epoch_before": 1785000000,
            "last_write_epoch_after": 1785000000,
            "embeddings": {"provider_model": None},
            "sources_count": 4,
        },
        "thresholds": None,
        "definitions": defs,
        "cases": cases,
        "metrics": metrics,
    }


def test_a_taguru_written_base_compares_with_a_taguru_eval_head(in_tmp: Path) -> None:
    base = _taguru_written_base()
    (in_tmp / "taguru.json").write_text(json.dumps(base, indent=2, ensure_ascii=False), "utf-8")
    head = json.loads(json.dumps(base))
    head["inputs"]["concurrency"] = 8  # this project's additive field
    head["inputs"]["must_refuse"] = {"path": "refuse.jsonl", "cases": 1}
    head["definitions"]["abstention.refused"] = {
        "unit": "case",
        "statistic": "count",
        "scopes": ["run"],
        "description": "must-refuse cases refused",
        "source": "eval.jsonl",
        "caveat": None,
    }
    head["metrics"]["abstention.refused"] = {"value": 1.0, "n": 1}
    head["cases"][0]["recall"]["mrr"] = 0.5
    head["cases"][0]["future_block"] = {"anything": [1, 2, 3]}
    head["warnings"] = []
    write(in_tmp / "ours.json", head)
    code, out, err = cli(["taguru.json", "ours.json", "--out", "c.jsonl"])
    assert code == 0, err
    assert err == ""
    lines = [json.loads(x) for x in (in_tmp / "c.jsonl").read_text("utf-8").splitlines()]
    assert lines[0]["counts"] == {
        "improved": 0,
        "regressed": 1,
        "added": 0,
        "removed": 0,
        "unchanged": 1,
        "cases_base": 2,
        "cases_head": 2,
    }
    assert lines[1]["case_id"] == "rice-polishing"
    assert [m["metric"] for m in lines[0]["metrics"]] == [
        "abstention.refused",
        "passage.failure_rate",
        "recall.recall_at_k",
    ]
    assert "regressed: rice-polishing (recall.mrr -0.500)" in out


# ------------------------------------------------------------------ output failures


def test_an_unwritable_out_exits_1_and_leaves_nothing_behind(in_tmp: Path) -> None:
    write(in_tmp / "b.json", run_doc([case("c1")], context="a"))
    write(in_tmp / "h.json", run_doc([case("c1")], context="b"))
    before = sorted(p.name for p in in_tmp.iterdir())
    code, out, err = cli(["b.json", "h.json", "--out", "missing-dir/changes.jsonl"])
    assert code == 1
    assert out == ""
    assert err == (
        f"{PREFIX}context differs: BASE 'a' vs HEAD 'b'\n"
        f"{PREFIX}writing missing-dir/changes.jsonl: No such file or directory (os error 2)\n"
    )
    assert sorted(p.name for p in in_tmp.iterdir()) == before


def test_an_out_that_is_a_directory_exits_1_and_leaves_no_temp_file(in_tmp: Path) -> None:
    write(in_tmp / "b.json", run_doc())
    (in_tmp / "taken").mkdir()
    code, _out, err = cli(["b.json", "b.json", "--out", "taken"])
    assert code == 1
    assert err.startswith(f"{PREFIX}writing taken: ")
    assert sorted(p.name for p in in_tmp.iterdir()) == ["b.json", "taken"]
    assert list((in_tmp / "taken").iterdir()) == []


def test_an_existing_out_is_replaced_whole(in_tmp: Path) -> None:
    write(in_tmp / "b.json", run_doc())
    (in_tmp / "changes.jsonl").write_text("old\n" * 1000, encoding="utf-8")
    assert cli(["b.json", "b.json"])[0] == 0
    assert len((in_tmp / "changes.jsonl").read_text("utf-8").splitlines()) == 1


# ------------------------------------------------------------------ sides as directories


def test_a_stored_run_directory_is_accepted(in_tmp: Path) -> None:
    run_dir = in_tmp / "runs" / "context=sake" / "run=20260728T100000Z"
    run_dir.mkdir(parents=True)
    write(run_dir / "evaluation.json", run_doc([case("c1", recall=(1.0, 1.0, 1.0))]))
    write(in_tmp / "h.json", run_doc([case("c1", recall=(0.0, 1.0, 1.0))]))
    arg = "runs/context=sake/run=20260728T100000Z"
    result = compare(arg, "h.json")
    assert result.base.path == arg
    assert result.counts["regressed"] == 1
    empty = in_tmp / "empty-run"
    empty.mkdir()
    code, _out, err = cli(["empty-run", "h.json"])
    assert code == 2
    assert err.startswith(f"{PREFIX}BASE reading empty-run/evaluation.json.zst: ")


def test_the_cases_frame_schema() -> None:
    result = compare(run_doc([case("a", recall=(1.0, 1.0, 1.0))]), run_doc([case("a")]))
    frame = result.cases
    assert frame.columns[:4] == ["case_id", "kind", "in_base", "in_head"]
    assert frame.schema["in_base"] == pl.Boolean
    for metric in COMPARISON_METRICS:
        assert frame.schema[f"{metric}.base"] == pl.Float64
        assert frame.schema[f"{metric}.head"] == pl.Float64
        assert frame.schema[f"{metric}.delta"] == pl.Float64
        assert frame.schema[f"{metric}.direction"] == pl.String
    assert frame.width == 4 + 4 * len(COMPARISON_METRICS)


# ------------------------------------------------------------------ entry points


def test_the_package_exports_compare_as_the_library_api(in_tmp: Path) -> None:
    import taguru_eval

    result = taguru_eval.compare(
        run_doc([case("c1", recall=(1.0, 1.0, 1.0))]), run_doc([case("c1")])
    )
    assert isinstance(result, Comparison)
    assert result.counts["unchanged"] == 1


def test_python_m_taguru_eval_dispatches_compare(in_tmp: Path) -> None:
    import subprocess
    import sys

    write(in_tmp / "b.json", run_doc([case("c1", recall=(1.0, 1.0, 1.0))]))
    write(in_tmp / "h.json", run_doc([case("c1", recall=(0.5, 1.0, 1.0))]))
    root = PROJECT_ROOT
    done = subprocess.run(
        [sys.executable, "-m", "taguru_eval", "compare", "b.json", "h.json", "--out", "o.jsonl"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "regressed: c1 (recall.recall_at_k -0.500)" in done.stdout
    assert (in_tmp / "o.jsonl").read_text("utf-8").count("\n") == 2


def test_a_stored_demo_run_compares_with_a_regressed_copy(in_tmp: Path) -> None:
    """Interoperability with this project's own writer: a real run (the demo
    against the reference server) read through its run-store directory."""
    import subprocess
    import sys

    root = PROJECT_ROOT
    done = subprocess.run(
        [sys.executable, "-m", "taguru_eval", "demo", "--out", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The demo stores its three sake runs (the notebooks' history); the first is any of them.
    run_dir = sorted((in_tmp / "demo" / "runs").glob("context=*/run=*"))[0]
    doc = json.loads(artifact_text(run_dir))
    assert "concurrency" in doc["inputs"]
    target = next(c for c in doc["cases"] if c.get("recall", {}).get("mrr", 0) > 0.5)
    target["recall"]["mrr"] = 0.0
    write(in_tmp / "regressed.json", doc)
    code, out, err = cli([str(run_dir), "regressed.json", "--out", "changes.jsonl"])
    assert code == 0, err
    assert err == ""
    assert f"    regressed: {target['case_id']} (recall.mrr " in out
    lines = (in_tmp / "changes.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["case_id"] == target["case_id"]
    assert json.loads(lines[0])["counts"]["unchanged"] == len(doc["cases"]) - 1
