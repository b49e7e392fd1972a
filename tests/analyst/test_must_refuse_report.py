"""The HTML report's must-refuse section: the two populations side by side (ABSTENTION.md §3.11)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import markupsafe
import polars as pl
import pytest
from support.layouts import to_old_layout
from support.paths import DATA

import taguru_eval
from taguru_eval.analyst import must_refuse, report
from taguru_refserver.serve import running_server

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> taguru_eval.Run:
    work = tmp_path_factory.mktemp("mr-report")
    with running_server(DATA, vector_lane=True) as url:
        return taguru_eval.run(
            DATA / "sake" / "eval.jsonl",
            "sake",
            url=url,
            out=work / "evaluation.json",
            store=work / "runs",
            env={},
            must_refuse=DATA / "sake" / "must_refuse.jsonl",
        )


@pytest.fixture(scope="module")
def page(stored: taguru_eval.Run) -> str:
    assert stored.path is not None
    return report.build_report(stored.path)


def _specs(page: str) -> dict[str, dict[str, Any]]:
    match = re.search(
        r'<script type="application/json" id="taguru-specs">(.*?)</script>', page, re.S
    )
    assert match
    return {entry["name"]: entry["spec"] for entry in json.loads(match.group(1))}


def test_the_trade_off_frame_keeps_each_population_s_own_denominator(
    stored: taguru_eval.Run,
) -> None:
    frame = must_refuse.trade_off_frame(stored.metrics)
    rows = {row["metric"]: row for row in frame.iter_rows(named=True)}
    metrics = stored.doc["metrics"]
    for metric, row in rows.items():
        assert (row["numerator"], row["n"]) == (metrics[metric]["numerator"], metrics[metric]["n"])
    populations = dict(frame.select("metric", "population").iter_rows())
    assert populations["abstention.passage.refusal_rate"] == must_refuse.MUST_REFUSE_POPULATION
    assert populations["answerability.false_refusal_rate"] == must_refuse.ANSWERABLE_POPULATION
    # The answerable partition adds up over its one denominator.
    parts = frame.filter(
        pl.col("metric").is_in(
            [
                "answerability.supported_rate",
                "answerability.unsupported_offer_rate",
                "answerability.false_refusal_rate",
            ]
        )
    )
    assert parts.get_column("numerator").sum() == parts.get_column("n")[0] == 16
    # A run without the flag has no such rows.
    plain = pl.DataFrame({"metric": ["recall.mrr"], "value": [1.0], "numerator": [None], "n": [3]})
    assert must_refuse.trade_off_frame(plain).is_empty()


def test_the_report_shows_the_must_refuse_section(page: str, stored: taguru_eval.Run) -> None:
    assert '<section id="must-refuse"><h2>Must-refuse questions</h2>' in page
    assert "the trade-off pair: never pooled" in page
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>.*?</td>", page)]
    for case_id in ("mr-france-en", "mr-price", "mr-tour"):
        # An id cell: one line, cut with an ellipsis, the whole id in its tooltip.
        assert case_id in cells
        assert f'<span class="id" title="{case_id}">{case_id}</span>' in page
    specs = _specs(page)
    spec = specs["must_refuse"]
    data = next(rows for rows in spec["datasets"].values() if rows and "population" in rows[0])
    assert {row["metric"] for row in data} == {metric for _p, metric, _c in must_refuse.TRADE_OFF}
    false_refusal = next(row for row in data if row["metric"] == "answerability.false_refusal_rate")
    assert false_refusal["label"] == "2 / 16"


def test_the_report_shows_the_warnings_the_artifact_recorded(stored: taguru_eval.Run) -> None:
    tables = {
        **stored.tables.frames(),
        "metrics": stored.metrics,
        "refusal_cases": stored.refusal_cases,
    }
    head = {key: value for key, value in stored.doc.items() if key != "abstention"}
    recomputed = must_refuse.run_facts(head, tables)
    assert recomputed is not None
    assert recomputed.warnings == stored.doc["abstention"]["warnings"]
    # A note found before the run (an --assembly filter) lives only in the block.
    note = "must-refuse case 'mr-tour': options.tags/since/until are not sent under --assembly"
    block = {**stored.doc["abstention"], "warnings": [note, *recomputed.warnings]}
    facts = must_refuse.run_facts({**stored.doc, "abstention": block}, tables)
    assert facts is not None
    assert facts.warnings == [note, *recomputed.warnings]


def test_a_stored_run_s_report_shows_the_warnings_its_artifact_recorded(
    stored: taguru_eval.Run, tmp_path: Path
) -> None:
    assert stored.path is not None
    copy = tmp_path / "runs" / stored.path.parent.name / stored.path.name
    shutil.copytree(stored.path, copy)
    artifact = to_old_layout(copy)  # edited as text
    document = json.loads(artifact.read_text("utf-8"))
    note = "must-refuse case 'mr-tour': options.tags/since/until are not sent under --assembly"
    document["abstention"]["warnings"].insert(0, note)
    artifact.write_text(json.dumps(document, ensure_ascii=False, indent=2), "utf-8")
    loaded = report.load_report_run(copy)
    assert loaded.directory == copy  # read from its tables and the head of its artifact
    assert loaded.document["abstention"] == {"warnings": document["abstention"]["warnings"]}
    # The report's templates escape it (markupsafe spells a quote &#39;).
    assert str(markupsafe.escape(note)) in report.build_report(copy)


def test_a_plain_run_has_no_must_refuse_section(tmp_path: Path) -> None:
    with running_server(DATA) as url:
        run = taguru_eval.run(
            DATA / "sake" / "eval.jsonl",
            "sake",
            url=url,
            out=tmp_path / "e.json",
            no_store=True,
            env={},
        )
    page = report.build_report(tmp_path / "e.json")
    assert 'id="must-refuse"' not in page
    assert "must_refuse" not in _specs(page)
    assert run.refusal_cases.is_empty()


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium (/usr/bin/chromium, Debian package 'chromium') is not installed",
)
def test_the_trade_off_chart_draws_in_headless_chromium(page: str, tmp_path: Path) -> None:
    page_file = tmp_path / "report.html"
    page_file.write_text(page, encoding="utf-8")
    dom = subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=20000",
            "--dump-dom", page_file.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout  # fmt: skip
    assert 'data-charts="done"' in dom
    drawn = dict(re.findall(r'data-chart="([a-z_]+)" data-marks="([^"]*)"', dom))
    assert drawn["must_refuse"].isdigit() and int(drawn["must_refuse"]) > 0


def test_a_must_refuse_run_s_report_draws_abstention_bounds(
    stored: taguru_eval.Run, tmp_path: Path
) -> None:
    # The run was given --must-refuse, so its catalog has the abstention
    # metrics: the thresholds file bounding one is taken, as run mode takes it.
    assert stored.path is not None
    thresholds = tmp_path / "t.json"
    thresholds.write_text(
        '{"taguru_evaluate_thresholds":1,'
        '"aggregate":{"abstention.passage.refusal_rate":{"min":0.125}},'
        '"cases":{"overrides":{"brand-origin-001":{"recall.mrr":{"min":0.5}}}}}',
        encoding="utf-8",
    )
    page = report.build_report(stored.path, thresholds=thresholds)
    assert '"threshold": 0.125' in json.dumps(_specs(page))
