"""CI reports of a run: ``--junit`` (JUnit XML), ``--summary`` (Markdown) and the
GitHub Actions job summary.

The JUnit document is validated against the JUnit schema vendored beside this
file (``junit_schema.xsd``, its source noted inside) and parsed back; its
failures and skips must be exactly the gate's violations and skips. The
Markdown summary is pinned by a snapshot. The end-to-end runs go through the
command line against the reference server over loopback.
"""

from __future__ import annotations

import contextlib
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import xmlschema
from support.documents import evaluation_document
from support.paths import DATA, TEST_DATA
from support.run import run_args

from taguru_eval.analyst.aggregate import golden_questions, shorten
from taguru_eval.analyst.junit import junit_xml
from taguru_eval.analyst.step_summary import summary_markdown
from taguru_eval.artifact import LoadedRun, tables_from_artifact
from taguru_eval.catalog import ANSWERS_BLOCK
from taguru_eval.cli.main import main
from taguru_eval.compare import compare
from taguru_eval.gate import GateReport, case_values_from_cases_frame, evaluate_gate
from taguru_eval.inputs.thresholds import Thresholds, parse_thresholds
from taguru_refserver.serve import running_server

SCHEMA = xmlschema.XMLSchema(TEST_DATA / "junit_schema.xsd")
EVAL = DATA / "sake" / "eval.jsonl"
TOKEN = "ci-secret-token-4f1e"
PREFIX = "taguru: evaluate: "
USAGE_SUFFIX = " — try 'taguru evaluate --help'\n  hint: see python -m taguru_eval --help"

FAILING_THRESHOLDS = {
    "taguru_evaluate_thresholds": 1,
    "aggregate": {
        "recall.mrr": {"min": 0.5, "max": 0.99},
        "recall.recall_at_k": {"min": 0.99},
        "latency.passage_ms": {"max": 100000},
        "coverage.labels": {"min": 0.5},
    },
    "cases": {
        "default": {"recall.recall_at_k": {"min": 1.0}, "citations.recall": {"min": 1.0}},
        "overrides": {"known-miss-012": {"recall.mrr": {"min": 0.5, "max": 2.0}}},
    },
}


def run_cli(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        for name in ("GITHUB_STEP_SUMMARY", "TAGURU_API_TOKEN", "TAGURU_API_TOKENS"):
            patch.delenv(name, raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


@pytest.fixture(scope="module")
def failing_run(served: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One gated run that fails, with every report asked for."""
    work = tmp_path_factory.mktemp("ci-reports")
    thresholds = work / "thresholds.json"
    thresholds.write_text(json.dumps(FAILING_THRESHOLDS), "utf-8")
    step = work / "step-summary.md"
    step.write_text("earlier step\n", "utf-8")
    argv = [*run_args(EVAL, "sake", served)]
    argv += ["--out", str(work / "evaluation.json"), "--store", str(work / "runs")]
    argv += ["--thresholds", str(thresholds), "--junit", str(work / "junit.xml")]
    argv += ["--summary", str(work / "summary.md")]
    code, out, err = run_cli(argv, {"GITHUB_STEP_SUMMARY": str(step), "TAGURU_API_TOKEN": TOKEN})
    doc = json.loads((work / "evaluation.json").read_text("utf-8"))
    return {"code": code, "out": out, "err": err, "work": work, "doc": doc, "url": served}


@pytest.fixture(scope="module")
def all_cases_run(served: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same gated run with ``--junit-cases all``: every per-case bound listed."""
    work = tmp_path_factory.mktemp("ci-reports-all")
    thresholds = work / "thresholds.json"
    thresholds.write_text(json.dumps(FAILING_THRESHOLDS), "utf-8")
    argv = [*run_args(EVAL, "sake", served), "--no-store", "--quiet"]
    argv += ["--out", str(work / "evaluation.json"), "--thresholds", str(thresholds)]
    argv += ["--junit", str(work / "junit.xml"), "--junit-cases", "all"]
    code, out, err = run_cli(argv, {})
    doc = json.loads((work / "evaluation.json").read_text("utf-8"))
    return {"code": code, "out": out, "err": err, "work": work, "doc": doc}


def case_elements(root: ET.Element) -> list[ET.Element]:
    return list(root.iter("testcase"))


def run_properties(root: ET.Element) -> dict[str | None, str | None]:
    return {p.get("name"): p.get("value") for p in root.iter("property")}


# Every case gets the two default bounds; known-miss-012 adds two mrr sides.
AGGREGATE_SIDES = sum(len(bound) for bound in FAILING_THRESHOLDS["aggregate"].values())


def case_sides(doc: dict[str, Any]) -> int:
    return 2 * len(doc["cases"]) + 2


def test_a_failing_gate_exits_3_and_writes_every_report(failing_run: dict[str, Any]) -> None:
    assert failing_run["code"] == 3, failing_run["err"]
    work = failing_run["work"]
    for name in ("junit.xml", "summary.md", "step-summary.md"):
        assert (work / name).is_file()


def test_junit_is_valid_against_the_schema(
    failing_run: dict[str, Any], all_cases_run: dict[str, Any]
) -> None:
    SCHEMA.validate(str(failing_run["work"] / "junit.xml"))
    SCHEMA.validate(str(all_cases_run["work"] / "junit.xml"))


def test_junit_cases_all_has_one_test_case_per_bound_and_the_gate_s_outcomes(
    all_cases_run: dict[str, Any],
) -> None:
    assert all_cases_run["code"] == 3, all_cases_run["err"]
    root = ET.parse(all_cases_run["work"] / "junit.xml").getroot()
    doc = all_cases_run["doc"]
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert {name: len(case_elements(s)) for name, s in suites.items()} == {
        "taguru_eval.aggregate": AGGREGATE_SIDES,
        "taguru_eval.cases": case_sides(doc),
        "taguru_eval.corpus": 1,
    }
    total = AGGREGATE_SIDES + case_sides(doc) + 1
    assert root.get("tests") == str(total)
    failures = [(case.get("name"), case.find("failure")) for case in case_elements(root)]
    failed = {name: element for name, element in failures if element is not None}
    violations = doc["thresholds"]["violations"]
    assert len(failed) == len(violations) == int(root.get("failures", "-1"))
    assert sorted(element.get("message") for element in failed.values()) == sorted(
        violation["reason"] for violation in violations
    )
    for violation in violations:
        operator = ">=" if violation["bound"] == "min" else "<="
        prefix = f"{violation['case_id']}: " if violation["scope"] == "case" else ""
        name = f"{prefix}{violation['metric']} {operator} {violation['threshold']}"
        assert failed[name].get("message") == violation["reason"]
        assert failed[name].get("type") == "threshold"
    skipped = [case.find("skipped") for case in case_elements(root)]
    skip_messages = sorted(element.get("message") for element in skipped if element is not None)
    assert skip_messages == sorted(doc["thresholds"]["skipped"])
    assert root.get("skipped") == str(len(skip_messages))
    properties = run_properties(root)
    assert properties["thresholds_sha256"] == doc["thresholds"]["sha256"]
    assert properties["context"] == "sake"
    assert properties["taguru_eval.junit_cases"] == "all"
    assert properties["taguru_eval.checks"] == str(total)
    assert properties["taguru_eval.elided_passing_case_checks"] == "0"
    assert properties["taguru_eval.elided_skipped_case_checks"] == "0"
    assert suites["taguru_eval.cases"].find("system-out") is None


def test_junit_lists_only_the_violated_per_case_bounds_by_default(
    failing_run: dict[str, Any],
) -> None:
    root = ET.parse(failing_run["work"] / "junit.xml").getroot()
    doc = failing_run["doc"]
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    violations = doc["thresholds"]["violations"]
    case_violations = [v for v in violations if v["scope"] == "case"]
    assert case_violations  # the fixture's gate breaks per-case bounds
    listed = case_elements(suites["taguru_eval.cases"])
    # Aggregate bounds are always test cases; a per-case bound only when violated.
    assert len(case_elements(suites["taguru_eval.aggregate"])) == AGGREGATE_SIDES
    assert len(case_elements(suites["taguru_eval.corpus"])) == 1
    assert len(listed) == len(case_violations)
    assert all(case.find("failure") is not None for case in listed)
    assert sorted(case.get("name") for case in listed) == sorted(
        f"{v['case_id']}: {v['metric']} {'>=' if v['bound'] == 'min' else '<='} {v['threshold']}"
        for v in case_violations
    )
    # The headers count what is written; the properties count what is not.
    written = len(case_elements(root))
    assert root.get("tests") == str(written) == str(AGGREGATE_SIDES + len(case_violations) + 1)
    assert root.get("failures") == str(len(violations))
    assert root.get("skipped") == "0"
    assert suites["taguru_eval.cases"].get("tests") == str(len(case_violations))
    properties = run_properties(root)
    checks = AGGREGATE_SIDES + case_sides(doc) + 1
    elided_skipped = len(doc["thresholds"]["skipped"])
    elided_passing = case_sides(doc) - len(case_violations) - elided_skipped
    assert properties["taguru_eval.junit_cases"] == "failing"
    assert properties["taguru_eval.checks"] == str(checks)
    assert properties["taguru_eval.elided_passing_case_checks"] == str(elided_passing)
    assert properties["taguru_eval.elided_skipped_case_checks"] == str(elided_skipped)
    assert written + elided_passing + elided_skipped == checks
    note = suites["taguru_eval.cases"].find("system-out")
    assert note is not None
    assert note.text == (
        f"{elided_passing} passing and {elided_skipped} skipped per-case checks are not listed "
        "(--junit-cases failing lists the violated ones; --junit-cases all lists every one)"
    )


def test_junit_at_scale_stays_small_by_default() -> None:
    # A 20,000-case run, four per-case sides each (80,010 checks with the
    # aggregate sides and the corpus): only the violated checks are written.
    from taguru_eval.demo.synthetic import assignment, build_templates, repeat_tables
    from taguru_eval.score.aggregate import aggregate
    from taguru_eval.tables import RunTables, metrics_frame

    assigned = assignment(20_000, 9)
    frames = repeat_tables(build_templates(), assigned, "scale")
    metrics = metrics_frame(
        aggregate(frames["cases"], RunTables.from_frames("scale", frames)), "scale"
    )
    raw = {
        "taguru_evaluate_thresholds": 1,
        "aggregate": {"recall.recall_at_k": {"min": 0.8, "max": 1.0}},
        "cases": {
            "default": {
                "recall.recall_at_k": {"min": 0.5},
                "diversity.sources": {"min": 2},
                "latency.passage_ms": {"min": 1, "max": 95},
            }
        },
    }
    thresholds = parse_thresholds(json.dumps(raw).encode(), "thresholds.json")
    report = evaluate_gate(
        thresholds,
        metrics,
        case_values_from_cases_frame(frames["cases"]),
        stable=True,
        case_ids=assigned.get_column("case_id").to_list(),
    )
    documents = {
        listed: junit_xml(
            thresholds,
            report,
            metrics,
            frames["cases"],
            run_id="scale",
            context="synthetic",
            generated_at="2026-12-04T09:00:00Z",
            junit_cases=listed,
        )
        for listed in ("failing", "all")
    }
    roots = {listed: ET.fromstring(text) for listed, text in documents.items()}
    counts = {listed: len(case_elements(root)) for listed, root in roots.items()}
    violated = sum(1 for v in report.violations if v.scope == "case")
    assert counts == {"failing": 2 + 1 + violated, "all": 80_003}
    assert counts["failing"] <= 2_000
    assert len(documents["failing"]) * 10 < len(documents["all"])
    SCHEMA.validate(io.StringIO(documents["failing"]))
    properties = run_properties(roots["failing"])
    elided = sum(
        int(properties[f"taguru_eval.elided_{kind}_case_checks"] or "")
        for kind in ("passing", "skipped")
    )
    assert counts["failing"] + elided == int(properties["taguru_eval.checks"] or "") == 80_003


def test_reports_carry_no_token_url_or_corpus_text(failing_run: dict[str, Any]) -> None:
    queries = [json.loads(line).get("query") for line in EVAL.read_text("utf-8").splitlines()[1:]]
    for name in ("junit.xml", "summary.md", "step-summary.md"):
        text = (failing_run["work"] / name).read_text("utf-8")
        assert TOKEN not in text
        assert failing_run["url"] not in text
        assert not [query for query in queries if query and query in text]


def test_the_job_summary_is_appended_and_equals_the_summary_file(
    failing_run: dict[str, Any],
) -> None:
    work = failing_run["work"]
    summary = (work / "summary.md").read_text("utf-8")
    assert (work / "step-summary.md").read_text("utf-8") == "earlier step\n" + summary
    assert summary.startswith("## taguru_eval: context `sake` — ❌ FAIL (")
    assert "### Violations (" in summary
    assert "| `known-miss-012` |" in summary


def test_no_step_summary_opts_out_and_report_only_junit_is_empty(
    served: str, tmp_path: Path
) -> None:
    step = tmp_path / "step.md"
    argv = [*run_args(EVAL, "sake", served), "--no-store"]
    argv += ["--out", str(tmp_path / "e.json"), "--junit", str(tmp_path / "j.xml")]
    argv += ["--no-step-summary", "--quiet"]
    code, _out, err = run_cli(argv, {"GITHUB_STEP_SUMMARY": str(step)})
    assert code == 0, err
    assert not step.exists()
    SCHEMA.validate(str(tmp_path / "j.xml"))
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert (root.get("tests"), case_elements(root)) == ("0", [])
    assert [suite.get("name") for suite in root.iter("testsuite")] == ["taguru_eval.report-only"]


def test_summary_base_adds_deltas(failing_run: dict[str, Any], tmp_path: Path) -> None:
    base_dir = next((failing_run["work"] / "runs").glob("context=sake/run=*"))
    argv = run_args(EVAL, "sake", failing_run["url"])
    argv += ["--no-store", "--out", str(tmp_path / "e.json")]
    argv += ["--summary", str(tmp_path / "s.md"), "--summary-base", str(base_dir)]
    code, _out, err = run_cli(argv, {})
    assert code == 0, err
    text = (tmp_path / "s.md").read_text("utf-8")
    assert "| metric | unit | value | n | base | Δ |" in text
    assert "| recall.mrr | ratio | 1.0000 | 16 | 1.0000 | +0.0000 |" in text


def test_a_bad_summary_base_is_an_input_error_before_the_run(served: str, tmp_path: Path) -> None:
    argv = [*run_args(EVAL, "sake", served), "--no-store"]
    argv += ["--out", str(tmp_path / "e.json"), "--summary-base", str(tmp_path / "nope.json")]
    code, _out, err = run_cli(argv, {})
    assert code == 2
    assert err.splitlines()[-1].startswith(f"{PREFIX}BASE ")
    assert not (tmp_path / "e.json").exists()


def test_a_summary_base_without_a_stamp_is_said_to_miss_it(served: str, tmp_path: Path) -> None:
    # compare's 'got 0' is pinned to compare (GATE_AND_COMPARE.md §6.2); here the
    # base is read for a summary, and the message says what is wrong.
    base = tmp_path / "base.json"
    base.write_text('{"generated_at": "2026-07-28T10:00:00Z", "cases": []}', encoding="utf-8")
    argv = [*run_args(EVAL, "sake", served), "--no-store"]
    argv += ["--out", str(tmp_path / "e.json"), "--summary-base", str(base)]
    code, _out, err = run_cli(argv, {})
    assert code == 2
    assert err.splitlines()[-1] == (
        f"{PREFIX}BASE {base}: not an evaluation.json: missing integer 'taguru_evaluation'"
    )
    assert not (tmp_path / "e.json").exists()


def test_an_unwritable_junit_path_exits_1_naming_it(served: str, tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "junit.xml"
    argv = [*run_args(EVAL, "sake", served), "--no-store"]
    argv += ["--out", str(tmp_path / "e.json"), "--junit", str(target)]
    code, _out, err = run_cli(argv, {})
    assert code == 1
    assert err.splitlines()[-1] == (
        f"{PREFIX}writing {target}: No such file or directory (os error 2)"
    )
    assert not (tmp_path / "e.json").exists()  # found before the run, not after it


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--junit"], "--junit needs a file path"),
        (["--junit", "a.xml", "--junit", "b.xml"], "--junit given twice"),
        (["--summary"], "--summary needs a file path"),
        (["--summary-base"], "--summary-base needs a file or directory path"),
        (["--quiet", "--quiet"], "--quiet given twice"),
        (["--junit", "a.xml", "--junit-cases", "some"], "--junit-cases must be 'failing' or 'all'"),
        (["--junit", "a.xml", "--junit-cases"], "--junit-cases needs a value"),
        (["--junit-cases", "all"], "--junit-cases requires --junit"),
        (
            ["--junit", "a.xml", "--junit-cases", "all", "--junit-cases", "all"],
            "--junit-cases given twice",
        ),
        (["--no-step-summary", "--no-step-summary"], "--no-step-summary given twice"),
    ],
)
def test_report_flag_errors(extra: list[str], message: str) -> None:
    argv = ["--eval", "e.jsonl", "--context", "c", *extra]
    assert run_cli(argv, {}) == (2, "", f"{PREFIX}{message}{USAGE_SUFFIX}\n")


def test_version_prints_the_package_version() -> None:
    from taguru_eval import __version__

    assert run_cli(["--version"], {}) == (0, f"taguru_eval {__version__}\n", "")


# ------------------------------------------------------------------ library renderers


def synthetic(
    case_ids: tuple[str, ...] = ("alpha-001", "beta-002", "gamma-003", "delta-004"),
) -> tuple[dict[str, Any], dict[str, Any], LoadedRun, Thresholds, GateReport]:
    base = evaluation_document(step=0, case_ids=case_ids)
    head = evaluation_document(step=1, case_ids=case_ids, generated_at="2026-07-28T11:00:00Z")
    loaded = tables_from_artifact(head, "run-2")
    raw = json.dumps(
        {
            "taguru_evaluate_thresholds": 1,
            "aggregate": {"recall.mrr": {"min": 0.9}, "latency.passage_ms": {"max": 1000}},
            "cases": {"default": {"recall.recall_at_k": {"min": 1.0}}},
        }
    ).encode()
    thresholds = parse_thresholds(raw, "thresholds.json")
    report = evaluate_gate(
        thresholds,
        loaded.scores.metrics_frame,
        case_values_from_cases_frame(loaded.scores.cases),
        stable=True,
    )
    return base, head, loaded, thresholds, report


SNAPSHOT = """\
## taguru_eval: context `demo` — ❌ FAIL (2 violation(s))

4 case(s) · generated 2026-07-28T11:00:00Z · run `run-2` · corpus stable

| metric | unit | value | n | base | Δ |
|---|---|---:|---:|---:|---:|
| recall.recall_at_k | ratio | 0.8750 | 4 | 0.7500 | +0.1250 |
| recall.mrr | ratio | 0.5833 | 4 | 0.7083 | -0.1250 |
| recall.ndcg | ratio | 0.7250 | 4 | 0.6750 | +0.0500 |
| coverage.concepts | ratio | 1.0000 | 4 | 1.0000 | +0.0000 |
| coverage.associations | ratio | 0.0000 | 4 | 0.0000 | +0.0000 |
| citations.recall | ratio | 1.0000 | 2 | 1.0000 | +0.0000 |
| citations.locator_validity | ratio | 0.0000 | 2 | 1.0000 | -1.0000 |
| diversity.sources | source | 3.00 | 4 | 3.00 | +0.00 |
| latency.passage_ms | ms | 15.5 | 4 | 14.5 | +1.0 |
| passage.failure_rate | ratio | 0.0000 | 4 | 0.0000 | +0.0000 |

### Violations (2)

- [aggregate] recall.mrr: 0.583333 &lt; min 0.900000
- [case `gamma-003`] recall.recall_at_k: 0.500000 &lt; min 1.000000

### Worst cases by failure signature (4 of 4 case(s) fail a check or their lane, 3 signature(s))

| fails | lane | cases | share | worst |
|---|---|---:|---:|---|
| mrr&lt;1, coverage&lt;1 | passage: searched | 2 | 50.0% | `beta-002`, `delta-004` |
| mrr&lt;1, citations&lt;1, coverage&lt;1 | passage: searched | 1 | 25.0% | `alpha-001` |
| recall@k&lt;1, citations&lt;1, coverage&lt;1 | passage: searched | 1 | 25.0% | `gamma-003` |
"""


def test_markdown_summary_snapshot() -> None:
    base, head, loaded, _thresholds, report = synthetic()
    text = summary_markdown(
        head,
        loaded.scores.metrics_frame,
        loaded.scores.cases,
        report,
        run_id="run-2",
        comparison=compare(base, head),
    )
    assert text == SNAPSHOT


def test_markdown_without_base_or_gate() -> None:
    _base, head, loaded, _thresholds, _report = synthetic()
    text = summary_markdown(head, loaded.scores.metrics_frame, loaded.scores.cases, None)
    assert text.startswith("## taguru_eval: context `demo` — report-only (no thresholds)\n")
    assert "| metric | unit | value | n |\n|---|---|---:|---:|\n" in text
    assert "Violations" not in text


def test_markdown_and_junit_escape_hostile_case_ids() -> None:
    hostile = ('a|b`c<d>&"e', "line\u0001feed", "plain-003", "x]]>y")
    _base, head, loaded, thresholds, report = synthetic(hostile)
    xml = junit_xml(
        thresholds,
        report,
        loaded.scores.metrics_frame,
        loaded.scores.cases,
        run_id="run-2",
        context="demo",
        generated_at="2026-07-28T11:00:00Z",
        junit_cases="all",  # every case's name, passing or not, goes through the escaping
    )
    SCHEMA.validate(io.StringIO(xml))
    names = [case.get("name") for case in ET.fromstring(xml).iter("testcase")]
    assert 'a|b`c<d>&"e: recall.recall_at_k >= 1.0' in names
    assert "line\ufffdfeed: recall.recall_at_k >= 1.0" in names
    assert "x]]>y: recall.recall_at_k >= 1.0" in names
    markdown = summary_markdown(head, loaded.scores.metrics_frame, loaded.scores.cases, report)
    assert '| `a\\|bʼc<d>&"e` |' in markdown
    assert "`line\ufffdfeed`" in markdown
    # Every worst-case row keeps its column count: no unescaped pipe inside a cell.
    worst = markdown.split("### Worst cases by failure signature")[1].splitlines()[2:]
    widths = {line.replace("\\|", "").count("|") for line in worst if line.startswith("|")}
    assert widths == {6}


def test_the_worst_cases_are_grouped_by_failure_signature_at_scale() -> None:
    _base, head, loaded, _thresholds, report = synthetic()
    cases = loaded.scores.cases
    gamma = cases.filter(pl.col("case_id") == "gamma-003")
    copies = pl.concat(
        [
            gamma.with_columns(
                pl.lit(f"known-miss-012-r{index:04d}").alias("case_id"),
                pl.lit(100 + index, dtype=cases.schema["case_index"]).alias("case_index"),
            )
            for index in range(1000)
        ]
    )
    markdown = summary_markdown(
        head, loaded.scores.metrics_frame, pl.concat([cases, copies]), report
    )
    worst = markdown.split("### Worst cases by failure signature")[1]
    rows = [line for line in worst.splitlines() if line.startswith("| recall@k")]
    # 1,001 cases failing alike are one row with three examples, not ten copies.
    assert rows == [
        "| recall@k&lt;1, citations&lt;1, coverage&lt;1 | passage: searched | 1001 | 99.7% | "
        "`gamma-003`, `known-miss-012-r0000`, `known-miss-012-r0001` |"
    ]
    assert worst.startswith(" (1004 of 1004 case(s) fail a check or their lane, 3 signature(s))")


def test_a_golden_csv_case_is_shown_with_its_question() -> None:
    _base, head, loaded, thresholds, report = synthetic()
    cases = loaded.scores.cases.with_columns(
        pl.when(pl.col("case_id") == "gamma-003").then(1).alias(ANSWERS_BLOCK)
    )
    lanes = pl.DataFrame(
        {"case_id": ["gamma-003", "beta-002"], "query": ["How many  days\na week?", "x" * 200]}
    )
    questions = golden_questions(cases, lanes)
    # Only the case the answers file lists (a golden CSV's), on one line.
    assert questions == {"gamma-003": "How many days a week?"}
    assert golden_questions(loaded.scores.cases, lanes) == {}  # no --answers: nothing changes
    markdown = summary_markdown(
        head, loaded.scores.metrics_frame, cases, report, questions=questions
    )
    assert "| `gamma-003` (How many days a week?) |" in markdown
    xml = junit_xml(
        thresholds,
        report,
        loaded.scores.metrics_frame,
        cases,
        run_id="run-2",
        context="demo",
        generated_at="2026-07-28T11:00:00Z",
        questions=questions,
    )
    SCHEMA.validate(io.StringIO(xml))
    names = [case.get("name") for case in ET.fromstring(xml).iter("testcase")]
    assert "gamma-003 (How many days a week?): recall.recall_at_k >= 1.0" in names
    assert shorten("x" * 200) == "x" * 79 + "…"
