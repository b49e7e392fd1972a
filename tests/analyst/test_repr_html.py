"""Jupyter displays: a short repr and a compact _repr_html_ for Run and Comparison."""

from __future__ import annotations

import re
from pathlib import Path

from support.documents import evaluation_document, history_documents, write_document

import taguru_eval
from taguru_eval.analyst import ingest
from taguru_eval.compare import compare


def _cells(page: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[dh][^>]*>.*?</t[dh]>", page)]


def test_run_repr_is_short_and_its_html_a_summary_table(tmp_path: Path) -> None:
    gate = {
        "sha256": "ab" * 32,
        "passed": False,
        "allow_unstable_corpus": False,
        "violations": [
            {
                "scope": "aggregate",
                "case_id": None,
                "metric": "recall.mrr",
                "bound": "min",
                "threshold": 0.99,
                "actual": 0.5,
                "reason": "0.500000 < min 0.990000",
            }
        ],
    }
    path = write_document(tmp_path / "evaluation.json", evaluation_document(thresholds=gate))
    stored = ingest.ingest(path, tmp_path / "runs").path
    run = taguru_eval.load_run(stored)
    text = repr(run)
    assert text.startswith(f"<Run {run.run_id} demo: 4 cases, baseline, gate FAIL")
    assert len(text) < 300
    page = run._repr_html_()
    cells = _cells(page)
    for key, value in [("context", "demo"), ("cases", "4"), ("gate", "FAIL (1 violation(s))")]:
        assert cells[cells.index(key) + 1] == value
    mrr = run.metrics.filter(run.metrics["metric"] == "recall.mrr")["mean"][0]
    assert cells[cells.index("recall.mrr ↑") + 1] == f"{mrr:.4f}"
    assert "passage.failure_rate ↓" in cells
    # A summary, not the frames: no case id appears.
    assert "alpha-001" not in page
    assert len(page) < 6000


def test_comparison_repr_and_html_summarise_what_moved() -> None:
    base, head = history_documents(2)
    comparison = compare(base, head)
    text = repr(comparison)
    assert text == (
        "<Comparison demo: <BASE> -> <HEAD>, 4 -> 4 cases: "
        f"{comparison.counts['improved']} improved, {comparison.counts['regressed']} regressed, "
        f"0 added, 0 removed, {comparison.counts['unchanged']} unchanged>"
    )
    page = comparison._repr_html_()
    cells = _cells(page)
    assert cells[cells.index("context") + 1] == "demo"
    assert cells[cells.index("cases") + 1] == "4 → 4"
    assert cells[cells.index("gate (head)") + 1] == "report-only"
    moved = comparison.moved_metrics()
    assert f"aggregate metrics that moved ({moved.height})" in page
    assert moved.get_column("metric")[0] in cells
    assert len(page) < 10_000


def test_the_comparison_display_carries_the_verdicts_of_compare_significance() -> None:
    base, head = history_documents(2)
    comparison = compare(base, head)
    page = comparison._repr_html_()
    cells = _cells(page)
    # The command line's default tests: one Holm family of the whole run's metrics.
    tested = taguru_eval.significance(comparison)
    assert comparison.tests.frame.equals(tested.frame)
    tally = cells[cells.index("significance") + 1]
    assert tally.endswith(f"(paired, holm over {tested.family_size} test(s))")
    assert "verdict" in cells
    moved = comparison.moved_metrics()
    verdicts = dict(
        tested.frame.filter(tested.frame["tag"].is_null()).select("metric", "verdict").iter_rows()
    )
    for metric, verdict in moved.select("metric", "verdict").iter_rows():
        assert verdict == verdicts.get(metric, "not tested"), metric
    # A move no test covers (latency) is described, never called a regression.
    latency = moved.filter(moved["metric"].str.starts_with("latency."))
    assert latency.select("metric", "delta", "direction", "verdict").rows() == [
        ("latency.passage_ms", 1.0, "worse", "not tested")
    ]
    assert moved.get_column("metric")[-1] == "latency.passage_ms"  # after every tested move
    assert not set(moved.get_column("direction").to_list()) & {"regressed", "improved"}
