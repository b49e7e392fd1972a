"""The report and the three notebooks on a 20,000-case, 10-run history.

The history comes from :mod:`taguru_eval.demo.synthetic` (template cases
scored by the real pipeline stages, repeated under new ids), so every number
the report and the notebooks show can be checked against the store and
compare. Nothing shown may reach off the machine; no chart may embed more
rows than it draws.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.notebooks import chart_outputs, execute_notebook, external_urls, notebook_env

from taguru_eval.analyst import aggregate, drift, offline, slices
from taguru_eval.catalog import scalar_expr
from taguru_eval.cli import report as report_cli
from taguru_eval.compare import compare
from taguru_eval.demo import synthetic
from taguru_eval.store import read_tables

CASES = 20_000
RUNS = 10
CONTEXT = synthetic.SYNTHETIC_CONTEXT
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("scale") / "runs"
    synthetic.synthetic_history(store, cases=CASES, runs=RUNS)
    return store


@pytest.fixture(scope="module")
def scale_report(history: Path) -> Path:
    out = history.parent / "report" / "report.html"
    out.parent.mkdir()
    head, base = synthetic.stored_run(history, RUNS - 1), synthetic.stored_run(history, RUNS - 2)
    argv = [str(head), "--base", str(base), "-o", str(out)]
    assert report_cli.main(argv, stdout=io.StringIO()) == 0
    return out


def _specs(page: str) -> list[dict[str, Any]]:
    match = re.search(r'<script type="application/json" id="taguru-specs">(.*?)</script>', page)
    assert match, "the embedded specs are missing"
    specs: list[dict[str, Any]] = json.loads(match.group(1))
    return specs


def _rows(specs: list[dict[str, Any]]) -> dict[str, int]:
    return {
        entry["name"]: sum(len(rows) for rows in entry["spec"].get("datasets", {}).values())
        for entry in specs
    }


def test_report_at_scale_is_small_offline_and_says_what_it_computed(
    history: Path, scale_report: Path
) -> None:
    page = scale_report.read_text(encoding="utf-8")
    bundle = offline.javascript_bundle()
    datatables = offline.datatables_bundle()
    assert datatables is not None, "the report extra ships itables"
    # Both vendored libraries are set aside: their licence comments name their homes.
    own = page.replace(datatables.source, "").replace(datatables.css, "")
    assert external_urls(own, bundle) == []
    specs = _specs(page)
    rows = _rows(specs)
    assert list(rows) == ["metrics", "case_metrics", "latency", "drift", "compare"]
    # Bins, worst cases, metrics and runs — not cases — decide what is embedded.
    assert all(count < aggregate.ROW_LIMIT for count in rows.values())
    assert rows["case_metrics"] <= 8 * aggregate.BINS + 8 * aggregate.WORST_CASES
    assert rows["drift"] <= RUNS * len(drift.DRIFT_METRICS) + 2 * RUNS
    assert len(own.encode("utf-8")) - len(bundle.encode("utf-8")) < 1_500_000
    head, base = synthetic.stored_run(history, RUNS - 1), synthetic.stored_run(history, RUNS - 2)
    # The worst cases are grouped by failure signature: a dozen rows, not 200.
    tables = read_tables(head)
    signatures = aggregate.failure_signatures(tables["cases"], tables["case_lanes"])
    assert 0 < signatures.height <= 40
    failing = int(signatures.get_column("cases").sum())
    assert f"{failing} of {CASES} cases fail a check or their lane, in {signatures.height}" in page
    # The per-case table is capped, sortable, and links the Parquet file with every row.
    assert f"showing the 200 worst of {CASES} cases" in page
    assert page.count('class="datatable" data-datatable="on"') >= 2  # per-case, misses
    link = re.search(r'<a href="([^"]+)">cases\.parquet</a>', page)
    assert link is not None
    assert (scale_report.parent / link.group(1)).resolve() == (head / "cases.parquet").resolve()
    assert f"Drift over {RUNS} stored runs" in page
    # The compare section: counts from compare itself, only the metrics that moved.
    comparison = compare(base, head)
    compare_spec = specs[4]["spec"]
    tally = next(rows for rows in compare_spec["datasets"].values() if rows and "kind" in rows[0])
    assert {row["kind"]: row["cases"] for row in tally} == {
        kind: comparison.counts[kind]
        for kind in ("improved", "regressed", "unchanged", "added", "removed")
    }
    moved = comparison.moved_metrics()
    assert (
        f"the {moved.height} aggregate metric(s) that moved (of {comparison.metrics.height})"
        in page
    )
    regressed = comparison.counts["regressed"]
    assert f"{regressed} regressed case(s), case_id order" in page
    assert f"… and {regressed - 50} more regressed case(s)" in page
    # Slices: one row per tag, the all-cases row equal to the run's own aggregate.
    tags = slices.case_tags(tables["case_lanes"])
    assert tags is not None
    frame = slices.tag_slices(tables["cases"], tags)
    assert set(frame.get_column("tag")) == {"(all cases)", "(no tag)", *synthetic.TAGS}
    recall = (
        tables["metrics"]
        .with_columns(scalar_expr())
        .filter(pl.col("metric") == "recall.recall_at_k")
        .get_column("scalar")
        .item()
    )
    assert frame.row(0, named=True)["recall.recall_at_k"] == pytest.approx(recall, rel=1e-12)
    assert '<section id="slices"><h2>Slices by tag</h2>' in page


@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium is not installed")
def test_report_at_scale_draws_every_chart_offline(scale_report: Path, tmp_path: Path) -> None:
    page_file = tmp_path / "report.html"
    shutil.copyfile(scale_report, page_file)
    dom = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            # No network at all: every request fails, so only inlined code can run.
            "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=30000",
            "--dump-dom",
            page_file.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    assert 'data-charts="done"' in dom
    drawn = dict(re.findall(r'data-chart="([a-z_]+)" data-marks="([^"]*)"', dom))
    assert set(drawn) == {"metrics", "case_metrics", "latency", "drift", "compare"}
    for name, marks in drawn.items():
        assert marks.isdigit() and int(marks) > 0, f"chart {name} drew no marks ({marks})"
    # DataTables, imported from the page itself with every request refused, paged them.
    assert 'data-tables="done"' in dom
    assert "Showing 1 to 10 of 200 entries" in dom


def _offline(name: str, notebook: Any) -> None:
    from support.notebooks import output_texts

    bundle = offline.javascript_bundle()
    charts = chart_outputs(notebook)
    assert charts, f"{name} showed no chart"
    assert all(bundle in chart for chart in charts)
    for text in output_texts(notebook):
        assert external_urls(text, bundle) == [], name
        # Chart outputs are bounded too: a few megabytes of library, a little data.
        assert len(text) - len(bundle) * text.count(bundle) < 500_000


def test_run_report_notebook_at_scale(history: Path) -> None:
    probe = (
        '{"run": RUN, "cases": per_case.height, "missed": missed.height,'
        ' "lanes": latency_by_lane.get_column("lane").to_list(),'
        ' "mrr": metrics.filter(pl.col("metric") == "recall.mrr").get_column("scalar")[0],'
        ' "tags": tag_slices.get_column("tag").to_list(),'
        ' "tag_cases": tag_slices.get_column("cases").to_list()}'
    )
    seen, notebook = execute_notebook("run_report", probe, notebook_env(history))
    _offline("run_report", notebook)
    newest = synthetic.stored_run(history, RUNS - 1)
    assert seen["run"] == newest.name.removeprefix("run=")
    tables = read_tables(newest)
    assert seen["cases"] == CASES
    assert seen["missed"] == drift.misses(tables["cases"]).height
    assert seen["lanes"] == ["citation", "passage", "query", "resolve"]
    mrr = tables["metrics"].filter(pl.col("metric") == "recall.mrr").get_column("mean").item()
    assert seen["mrr"] == mrr
    assert seen["tags"][0] == "(all cases)" and seen["tag_cases"][0] == CASES
    assert set(seen["tags"]) == {"(all cases)", "(no tag)", *synthetic.TAGS}


def test_drift_notebook_at_scale(history: Path) -> None:
    probe = (
        '{"runs": drift_table.height,'
        ' "recall": drift_table.get_column("recall.recall_at_k").to_list(),'
        ' "labels": drift_table.get_column("label").to_list(),'
        ' "heat_cells": recall_cells.height}'
    )
    seen, notebook = execute_notebook("drift", probe, notebook_env(history))
    _offline("drift", notebook)
    assert seen["runs"] == RUNS
    runs = drift.run_index(history, CONTEXT)
    assert seen["labels"] == runs.get_column("label").to_list()
    assert seen["labels"][0] == "2026-07-01 09:00 · " + runs.get_column("run")[0][-6:]
    stored = (
        drift.metric_history(history, CONTEXT)
        .filter(pl.col("metric") == "recall.recall_at_k")
        .get_column("scalar")
        .to_list()
    )
    assert seen["recall"] == stored
    assert len(set(stored)) == RUNS  # the quality drifts run to run
    assert seen["heat_cells"] == CASES * RUNS


def test_compare_notebook_at_scale(history: Path) -> None:
    probe = (
        '{"counts": counts, "moved": moved.get_column("metric").to_list(),'
        ' "group_cases": int(groups.get_column("cases").sum()),'
        ' "drivers": drivers.height, "slices": slice_changes.height}'
    )
    seen, notebook = execute_notebook("compare", probe, notebook_env(history))
    _offline("compare", notebook)
    base, head = synthetic.stored_run(history, RUNS - 2), synthetic.stored_run(history, RUNS - 1)
    expected = compare(base, head)
    assert seen["counts"] == dict(expected.counts)
    assert seen["moved"] == expected.moved_metrics().get_column("metric").to_list()
    changed = expected.counts["improved"] + expected.counts["regressed"]
    assert seen["group_cases"] == seen["drivers"] == changed
    assert seen["slices"] > 0


NODE = shutil.which("node")

_SEARCH = """
const fs = require("fs");
eval(fs.readFileSync(process.argv[2], "utf8"));
(async () => {
  const index = await taguruCaseIndex(JSON.parse(fs.readFileSync(process.argv[3], "utf8")));
  const found = taguruCaseSearch(index, process.argv[4], 5);
  const row = (r) => Object.fromEntries(Object.keys(index).map((k) => [k, index[k][r]]));
  const rows = found.rows.map(row);
  console.log(JSON.stringify({ cases: index.case_id.length, total: found.total, rows }));
})();
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed (it runs the page's search code)")
def test_the_report_s_search_finds_every_case(
    history: Path, scale_report: Path, tmp_path: Path
) -> None:
    page = scale_report.read_text(encoding="utf-8")
    match = re.search(
        r'<script type="application/json" id="taguru-case-index"[^>]*>(.*?)</script>', page
    )
    assert match is not None
    # Compact: the whole run's index costs a few bytes a case (≤ 4 MB pages at 100,000).
    assert len(match.group(1)) < 12 * CASES
    blob = tmp_path / "index.json"
    blob.write_text(match.group(1), encoding="utf-8")
    script = tmp_path / "search.js"
    script.write_text(_SEARCH, encoding="utf-8")
    code = Path(report_cli.__file__).parents[1] / "analyst" / "templates" / "case_search.js"
    head = read_tables(synthetic.stored_run(history, RUNS - 1))["cases"]
    # A case far outside the 200 rows the page lists, found with its own metrics.
    listed = set(re.findall(r'title="([^"]+)">\1</span>', page))
    wanted = next(
        case for case in reversed(head.get_column("case_id").to_list()) if case not in listed
    )
    done = subprocess.run(
        [str(NODE), str(script), str(code), str(blob), wanted],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["cases"], found["total"]) == (CASES, 1)
    (row,) = found["rows"]
    stored = head.filter(pl.col("case_id") == wanted).row(0, named=True)
    assert row["case_id"] == wanted
    for column in ("recall_at_k", "mrr", "ndcg", "passage_latency_ms"):
        expected = stored[column]
        assert row[column] == (None if expected is None else pytest.approx(expected, abs=1e-4))
