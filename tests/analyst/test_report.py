"""report: one self-contained offline HTML file, checked as text and in headless Chromium."""

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
from support.documents import evaluation_document, history_documents, write_document
from support.layouts import to_old_layout
from support.paths import PROJECT_ROOT

import taguru_eval
from taguru_eval.analyst import aggregate, ingest, report
from taguru_eval.cli import report as report_cli

CHROMIUM = Path("/usr/bin/chromium")


def _specs(page: str) -> list[dict[str, Any]]:
    match = re.search(
        r'<script type="application/json" id="taguru-specs">(.*?)</script>', page, re.S
    )
    assert match, "the embedded specs are missing"
    specs: list[dict[str, Any]] = json.loads(match.group(1))
    return specs


@pytest.fixture(scope="module")
def stored_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Four ingested runs of one context whose metrics and revision move."""
    root = tmp_path_factory.mktemp("history")
    runs = root / "runs"
    directories = []
    for index, document in enumerate(history_documents(4)):
        path = write_document(root / f"evaluation-{index}.json", document)
        directories.append(ingest.ingest(path, runs).path)
    return runs, directories


@pytest.fixture(scope="module")
def full_report(
    stored_history: tuple[Path, list[Path]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The report of the newest stored run against the first, with bounds."""
    _, directories = stored_history
    out = tmp_path_factory.mktemp("report") / "report.html"
    thresholds = out.parent / "thresholds.json"
    thresholds.write_text(
        json.dumps({"taguru_evaluate_thresholds": 1, "aggregate": {"recall.mrr": {"min": 0.7}}}),
        encoding="utf-8",
    )
    code = report_cli.main(
        [
            str(directories[-1]),
            "--base",
            str(directories[0]),
            "-o",
            str(out),
            "--thresholds",
            str(thresholds),
        ],
        stdout=io.StringIO(),
    )
    assert code == 0
    return out


def test_report_is_self_contained(full_report: Path) -> None:
    page = full_report.read_text(encoding="utf-8")
    # Nothing is loaded from elsewhere: no external script, stylesheet, image or frame.
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert not re.search(r"<link[^>]*\bhref=", page)
    assert not re.search(r"<(img|iframe)[^>]*\bsrc=[\"']?https?:", page)
    assert "window.vegaEmbed=" in page  # the inlined bundle defines the embedder itself
    # Vega's bundle, specs, embed options, embed call; DataTables' source, options, loader.
    assert page.count("<script") == 7


def test_report_embeds_every_chart_spec_with_its_data(full_report: Path) -> None:
    page = full_report.read_text(encoding="utf-8")
    specs = _specs(page)
    names = [entry["name"] for entry in specs]
    assert names == ["metrics", "case_metrics", "latency", "drift", "compare"]
    for index, name in enumerate(names):
        assert f'id="chart-{index}" data-chart="{name}"' in page
    drift = specs[names.index("drift")]["spec"]
    assert [panel["title"] for panel in drift["concat"]][:2] == [
        "recall.recall_at_k ↑",
        "recall.mrr ↑",
    ]
    assert len(drift["datasets"]) >= 3
    compare_spec = specs[names.index("compare")]["spec"]
    tally = next(
        rows
        for rows in compare_spec["datasets"].values()
        if rows and set(rows[0]) == {"kind", "cases"}
    )
    assert sum(row["cases"] for row in tally) == 4


def test_report_sections_show_summary_gate_and_misses(full_report: Path) -> None:
    page = full_report.read_text(encoding="utf-8")
    assert "<h2>Run summary</h2>" in page
    # The store recorded how it got the run (run.json), and the report says so.
    assert f"imported by taguru_eval {taguru_eval.__version__} from " in page
    assert "evaluation-3.json" in page
    assert "report-only" in page
    assert "expected_associations: (Entity, knows, Other)" in page
    assert "Drift over 4 stored runs" in page
    assert "<h2>Compare with" in page


def test_gate_failure_lists_violations(tmp_path: Path) -> None:
    gate = {
        "sha256": "ab" * 32,
        "passed": False,
        "allow_unstable_corpus": False,
        "violations": [
            {
                "scope": "case",
                "case_id": "beta-002",
                "metric": "recall.mrr",
                "bound": "min",
                "threshold": 0.5,
                "actual": 0.25,
                "reason": "0.250000 < min 0.500000",
            }
        ],
        "skipped": ["case 'x': 'coverage.labels' not applicable"],
    }
    path = write_document(tmp_path / "evaluation.json", evaluation_document(thresholds=gate))
    page = report.build_report(path)
    assert "FAIL — 1 violation(s) (sha256 abababababab…)" in page
    assert "0.250000 &lt; min 0.500000" in page
    assert "1 case-scoped threshold(s) skipped as not applicable" in page
    # A bare evaluation.json (not in a store) has no drift section.
    assert [entry["name"] for entry in _specs(page)] == ["metrics", "case_metrics", "latency"]


def test_report_is_written_atomically_and_errors_are_one_line(tmp_path: Path) -> None:
    path = write_document(tmp_path / "evaluation.json", evaluation_document())
    out = tmp_path / "r.html"
    out.write_text("old", encoding="utf-8")
    assert report_cli.main([str(path), "-o", str(out)], stdout=io.StringIO()) == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report-")] == []

    err = io.StringIO()
    missing = tmp_path / "nope" / "r.html"
    assert report_cli.main([str(path), "-o", str(missing)], stderr=err) == 1
    assert err.getvalue().startswith(f"taguru: evaluate: writing {missing}")
    err = io.StringIO()
    assert report_cli.main([str(tmp_path / "absent.json")], stderr=err) == 2
    assert "Traceback" not in err.getvalue()
    err = io.StringIO()
    assert report_cli.main([], stderr=err) == 2
    assert "exactly one RUN" in err.getvalue()


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium (/usr/bin/chromium, Debian package 'chromium') is not installed",
)
def test_every_chart_draws_marks_in_headless_chromium(full_report: Path, tmp_path: Path) -> None:
    # A copy away from the store: the rendered page must need nothing but itself.
    page_file = tmp_path / "report.html"
    shutil.copyfile(full_report, page_file)
    base = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=20000",
    ]
    dom = subprocess.run(
        [*base, "--dump-dom", page_file.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert 'data-charts="done"' in dom, "the embed script did not finish"
    drawn = dict(re.findall(r'data-chart="([a-z_]+)" data-marks="([^"]*)"', dom))
    assert set(drawn) == {"metrics", "case_metrics", "latency", "drift", "compare"}
    for name, marks in drawn.items():
        assert marks.isdigit() and int(marks) > 0, f"chart {name} drew no marks ({marks})"
    # DataTables was imported from the page itself and took over the marked tables.
    assert 'data-tables="done"' in dom
    assert dom.count('class="datatable dataTable') == page_file.read_text("utf-8").count(
        'class="datatable" data-datatable="on"'
    )
    screenshot = tmp_path / "report.png"
    subprocess.run(
        [*base, "--window-size=1280,4000", f"--screenshot={screenshot}", page_file.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000


def test_the_report_subcommand_is_wired_into_the_cli(tmp_path: Path) -> None:
    import sys

    path = write_document(tmp_path / "evaluation.json", evaluation_document())
    out = tmp_path / "cli.html"
    done = subprocess.run(
        [sys.executable, "-m", "taguru_eval", "report", str(path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"  wrote {out}\n"
    assert [entry["name"] for entry in _specs(out.read_text(encoding="utf-8"))] == [
        "metrics",
        "case_metrics",
        "latency",
    ]


_BAD_THRESHOLDS = {
    "nan": '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"min":NaN}}}',
    "infinity": '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"max":Infinity}}}',
    "overflow": '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"min":1e400}}}',
    "deep": '{"taguru_evaluate_thresholds":1,"x":' + "[" * 100_000 + "]" * 100_000 + "}",
    "stamp": '{"taguru_evaluate_thresholds":2}',
    "no stamp": '{"aggregate":{}}',
    "unknown metric": '{"taguru_evaluate_thresholds":1,"aggregate":{"nope":{"min":1}}}',
    "min over max": '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"min":1,"max":0}}}',
    "unknown case": (
        '{"taguru_evaluate_thresholds":1,"cases":{"overrides":{"zz":{"recall.mrr":{"min":1}}}}}'
    ),
    "unknown key": '{"taguru_evaluate_thresholds":1,"bogus":1}',
    "abstention without --must-refuse": (
        '{"taguru_evaluate_thresholds":1,"aggregate":{"abstention.refusal_rate":{"min":1}}}'
    ),
    "truncated": '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"min":"',
}


@pytest.mark.parametrize("name", sorted(_BAD_THRESHOLDS))
def test_report_refuses_a_thresholds_file_as_run_mode_does(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.documents import CASE_IDS

    from taguru_eval.cli.main import main

    path = write_document(tmp_path / "evaluation.json", evaluation_document())
    thresholds = tmp_path / "t.json"
    thresholds.write_text(_BAD_THRESHOLDS[name], encoding="utf-8")
    eval_file = tmp_path / "eval.jsonl"
    eval_file.write_text(
        '{"taguru_eval":1}\n'
        + "".join(f'{{"case_id":"{case_id}","query":"q"}}\n' for case_id in CASE_IDS),
        encoding="utf-8",
    )
    # The run's thresholds are read before any network call: port 9 is never dialled.
    run_args = ["--eval", str(eval_file), "--context", "demo", "--url", "http://127.0.0.1:9"]
    run_code = main(
        [
            *run_args,
            "--thresholds",
            str(thresholds),
            "--out",
            str(tmp_path / "x.json"),
            "--no-store",
        ]
    )
    run_err = capsys.readouterr().err
    out = tmp_path / "r.html"
    code = main(["report", str(path), "--thresholds", str(thresholds), "-o", str(out)])
    err = capsys.readouterr().err
    assert (run_code, code) == (2, 2)
    assert err == run_err
    assert err.startswith(f"taguru: evaluate: {thresholds}: ") and err.count("\n") == 1
    assert not out.exists()


def test_report_draws_a_thresholds_file_run_mode_takes(tmp_path: Path) -> None:
    path = write_document(tmp_path / "evaluation.json", evaluation_document())
    thresholds = tmp_path / "t.json"
    thresholds.write_text(
        '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"min":0.25}},'
        '"cases":{"overrides":{"beta-002":{"recall.mrr":{"min":0.5}}}}}',
        encoding="utf-8",
    )
    page = report.build_report(path, thresholds=thresholds)
    metrics = next(entry for entry in _specs(page) if entry["name"] == "metrics")
    assert '"threshold": 0.25' in json.dumps(metrics)


@pytest.mark.parametrize("how", ["report", "report --base", "report stored", "ingest"])
def test_a_missing_stamp_is_said_to_be_missing(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only compare is pinned to 'must be within 1..=1, got 0' (GATE_AND_COMPARE.md
    # §6.2); the other readers say what is wrong, in export's words.
    from taguru_eval.cli.main import main

    good = write_document(tmp_path / "good.json", evaluation_document())
    document = evaluation_document()
    del document["taguru_evaluation"]
    bad = write_document(tmp_path / "bad.json", document)
    if how == "report stored":
        stored = ingest.ingest(good, tmp_path / "runs").path
        artifact = to_old_layout(stored)  # edited as text
        text = artifact.read_text("utf-8")
        artifact.write_text(text.replace('"taguru_evaluation": 1,', "", 1), "utf-8")
        argv, shown = ["report", str(stored)], f"{artifact}"
    else:
        argv = {
            "report": ["report", str(bad)],
            "report --base": ["report", str(good), "--base", str(bad)],
            "ingest": ["ingest", str(bad), "--store", str(tmp_path / "runs")],
        }[how]
        shown = f"BASE {bad}" if how == "report --base" else str(bad)
    assert main([*argv, *(["-o", str(tmp_path / "r.html")] if how != "ingest" else [])]) == 2
    assert capsys.readouterr().err == (
        f"taguru: evaluate: {shown}: not an evaluation.json: missing integer 'taguru_evaluation'\n"
    )


def _cells(page: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>.*?</td>", page, re.S)]


def test_worst_cases_are_grouped_by_failure_signature(tmp_path: Path) -> None:
    cases = pl.DataFrame(
        {
            "case_index": [0, 1, 2, 3, 4, 5],
            "case_id": ["a", "b", "c", "d", "e", "f"],
            "passage_outcome": ["searched", "searched", "searched", "failed", "searched", None],
            "recall_at_k": [0.5, 0.0, 1.0, None, 1.0, None],
            "mrr": [0.5, 0.0, 1.0, None, 1.0, None],
            "citations_recall": [None, None, 0.5, None, 1.0, None],
            "coverage_concepts": [1.0, 1.0, None, 0.0, None, None],
        },
        schema_overrides={"passage_outcome": pl.String},
    )
    groups = aggregate.failure_signatures(cases)
    assert groups.select("fails", "lane", "cases", "examples").rows() == [
        ("recall@k<1, mrr<1", "passage: searched", 2, ["a", "b"]),
        ("citations<1", "passage: searched", 1, ["c"]),
        ("coverage<1", "passage: failed", 1, ["d"]),
        ("—", "passage: none", 1, ["f"]),
    ]
    assert groups.get_column("cases").sum() == 5  # "e" fails nothing on a lane that ran
    # The worst case of a group is its first example.
    scores = pl.DataFrame({"case_id": ["a", "b"], "score": [0.5, 0.0]})
    assert aggregate.failure_signatures(cases, scores=scores).row(0, named=True)["examples"] == [
        "b",
        "a",
    ]
    # The evidence lane's outcome, where a case ran one, is the lane of the signature.
    lanes = cases.select("case_index", pl.lit("failed").alias("evidence_outcome"))
    assert set(aggregate.failure_signatures(cases, lanes).get_column("lane")) == {
        "evidence: failed"
    }


def test_the_report_lists_signatures_and_a_sortable_capped_case_table(tmp_path: Path) -> None:
    path = write_document(tmp_path / "evaluation.json", evaluation_document())
    page = report.build_report(path)
    assert "<h3>Failure signatures</h3>" in page
    assert re.search(r"\d+ of 4 cases fail a check or their lane, in \d+ signature\(s\)", page)
    cells = _cells(page)
    assert "alpha-001" in cells and "1.0000" in cells
    # A numeric cell carries the number DataTables sorts by; a null sorts first.
    assert re.search(r'<td class="num" data-order="[0-9.]+">[0-9.]+</td>', page)
    assert '<td class="null" data-order="">—</td>' in page
    # Long ids stay on one line (cut with an ellipsis) with the whole id as the tooltip.
    assert '<span class="id" title="alpha-001">alpha-001</span>' in page
    assert "case_<wbr>id" in page  # headers may wrap after "_"
    # Nothing from a case can end a script element or open a comment in one.
    for script in re.findall(r"<script[^>]*>(.*?)</script>", page, re.S)[1:]:
        assert "<!--" not in script and "<script" not in script.lower()


def test_a_report_without_itables_keeps_plain_tables_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taguru_eval.analyst import offline

    monkeypatch.setattr(offline, "datatables_bundle", lambda: None)
    path = write_document(tmp_path / "evaluation.json", evaluation_document())
    page = report.build_report(path)
    assert page.count("sorting and filtering them needs the itables package") == 1
    assert "taguru-datatables-source" not in page
    assert page.count("<script") == 4  # Vega's bundle, specs, embed options, embed call
    assert "<h3>Per-case metrics, worst first</h3>" in page and "alpha-001" in page


def test_the_templates_scripts_cannot_derail_their_element() -> None:
    templates = Path(report.__file__).parent / "templates"
    for script in templates.glob("*.js"):
        text = script.read_text(encoding="utf-8").lower()
        assert "<!--" not in text and "<script" not in text and "</script" not in text, script


def test_drift_marks_each_change_of_eval_set_mode_budget_or_thresholds(tmp_path: Path) -> None:
    documents = history_documents(3)
    documents[1]["inputs"]["eval"]["cases"] = 5
    documents[2]["inputs"]["eval"]["cases"] = 5
    documents[2]["inputs"]["budget"] = {"max_items": 4, "max_bytes": 4096, "max_tokens": 100}
    runs = tmp_path / "runs"
    stored = [
        ingest.ingest(write_document(tmp_path / f"e{i}.json", d), runs).path
        for i, d in enumerate(documents)
    ]
    page = report.build_report(stored[-1])
    assert "<strong>2 setup change(s)</strong>" in page
    cells = _cells(page)
    assert "budget" in cells and "eval set" in cells
    spec = next(entry["spec"] for entry in _specs(page) if entry["name"] == "drift")
    rules = [
        rows
        for rows in spec["datasets"].values()
        if rows and "changed" in rows[0] and "revision" not in rows[0]
    ]
    assert rules and sorted(row["changed"] for row in rules[0]) == ["budget", "eval set"]
