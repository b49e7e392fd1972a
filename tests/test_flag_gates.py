"""The gates --must-refuse and --answers bring to a gated run, and their CI rows.

A must-refuse list is an assertion: gated, every case must abstain unless the
thresholds file bounds ``abstention.*`` itself; an undetermined case has not
passed. The same for --answers: a gated run needs one judged case. Against the
reference server over loopback (data/sake, data/handbook), and the row readers
on artifacts alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from support.paths import DATA, TEST_DATA
from support.run import run_args

from taguru_eval.cli.main import main
from taguru_eval.flag_gates import FAIL, NOT_GATED, PASS, apply_flag_gates, flag_gate_rows
from taguru_eval.gate import NO_SAMPLES_REASON, GateReport, Violation
from taguru_eval.inputs.thresholds import parse_thresholds
from taguru_refserver.serve import running_server

SAKE = DATA / "sake"
SCHEMA = xmlschema.XMLSchema(TEST_DATA / "junit_schema.xsd")
SURFACED_UNDER_ANY = ["mr-shochu", "mr-beer", "mr-price", "mr-tour"]
"""data/sake's must-refuse cases a served hit surfaces under --refusal-rule any
(the demo's verdict table): the two English questions share no term with it."""


@pytest.fixture(scope="module")
def url() -> Any:
    with running_server(DATA) as served:
        yield served


def _run(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *more: str
) -> tuple[int, str, str, dict[str, Any]]:
    capsys.readouterr()
    out = tmp_path / "evaluation.json"
    code = main(
        [*run_args(SAKE / "eval.jsonl", "sake", url), "--out", str(out), "--no-store", *more]
    )
    captured = capsys.readouterr()
    doc = json.loads(out.read_text("utf-8")) if out.is_file() else {}
    return code, captured.out, captured.err, doc


def _thresholds(tmp_path: Path, **extra: dict[str, float]) -> str:
    document = json.loads((SAKE / "thresholds.json").read_text("utf-8"))
    document["aggregate"].update(extra)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_rule_any_on_the_demo_corpus_gives_the_true_verdicts(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err, doc = _run(
        url,
        tmp_path,
        capsys,
        "--must-refuse", str(SAKE / "must_refuse.jsonl"), "--refusal-rule", "any",
        "--thresholds", str(SAKE / "thresholds.json"),
    )  # fmt: skip
    assert code == 3
    verdicts = {case["case_id"]: case["verdict"] for case in doc["abstention"]["cases"]}
    assert [case for case, verdict in verdicts.items() if verdict == "surfaced"] == (
        SURFACED_UNDER_ANY
    )
    assert {verdicts["mr-france-en"], verdicts["mr-wine-en"]} == {"abstained"}
    # The eval gate passed on its own: the one violation is the implied must-refuse one.
    (violation,) = doc["thresholds"]["violations"]
    assert violation["metric"] == "abstention.false_answers"
    assert (violation["bound"], violation["threshold"], violation["actual"]) == ("max", 0.0, 4.0)
    assert f"cases: {', '.join(SURFACED_UNDER_ANY)} —" in violation["reason"]
    assert doc["thresholds"]["flag_gates"] == [
        {"flag": "--must-refuse", "bounds": "implied", "passed": False}
    ]
    assert "  thresholds: FAIL — 1 violation(s)" in out
    assert (
        "  must-refuse gate: FAIL — every must-refuse case must abstain (implied by "
        "--must-refuse; abstention.* bounds in the thresholds file replace this check): "
        "2 abstained, 4 surfaced, 0 undetermined, 0 failed"
    ) in out.splitlines()


def test_undetermined_cases_fail_the_implied_gate_with_the_fix(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default rule on a server with no vector lane judges no passage probe.
    code, out, err, doc = _run(
        url,
        tmp_path,
        capsys,
        "--must-refuse", str(SAKE / "must_refuse.jsonl"),
        "--thresholds", str(SAKE / "thresholds.json"),
    )  # fmt: skip
    assert code == 3
    # The stderr explanation gives the cause and the ways out, gated or not.
    assert (
        "6 passage probe(s) cannot judge and are undetermined, never counted as abstained; "
        "to judge them: --refusal-rule any, or a server whose vector lane runs"
    ) in err
    by_metric = {v["metric"]: v for v in doc["thresholds"]["violations"]}
    assert sorted(by_metric) == ["abstention.false_answers", "abstention.undetermined_rate"]
    undetermined = by_metric["abstention.undetermined_rate"]["reason"]
    assert undetermined.startswith("0.833333 > max 0.000000 — cases: mr-france-en, mr-shochu, ")
    assert "rule 'semantic' could not judge them (5 vector_lane_not_run)" in undetermined
    assert "--refusal-rule any, a server whose vector lane runs, or explicit abstention.*" in (
        undetermined
    )
    assert "cases: mr-tour —" in by_metric["abstention.false_answers"]["reason"]
    assert "1 surfaced, 5 undetermined" in out


def test_explicit_abstention_bounds_replace_the_implied_check(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = _thresholds(tmp_path, **{"abstention.undetermined_rate": {"max": 1.0}})
    code, out, _err, doc = _run(
        url, tmp_path, capsys,
        "--must-refuse", str(SAKE / "must_refuse.jsonl"), "--thresholds", thresholds,
    )  # fmt: skip
    # The file's one abstention bound holds, and nothing else judges the list.
    assert code == 0
    assert doc["thresholds"]["passed"] is True
    assert doc["thresholds"]["flag_gates"] == [
        {"flag": "--must-refuse", "bounds": "explicit", "passed": True}
    ]
    assert (
        "  must-refuse gate: PASS — the thresholds file's abstention.* bounds (they replace "
        "the implied check: every must-refuse case must abstain): "
        "0 abstained, 1 surfaced, 5 undetermined, 0 failed"
    ) in out.splitlines()


def test_a_list_that_abstains_passes_and_every_ci_output_says_so(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refusals = tmp_path / "refuse.jsonl"
    lines = (SAKE / "must_refuse.jsonl").read_text("utf-8").splitlines()
    kept = [line for line in lines[1:] if '"mr-france-en"' in line or '"mr-wine-en"' in line]
    refusals.write_text("\n".join([lines[0], *kept]) + "\n", encoding="utf-8")
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    code, out, _err, doc = _run(
        url, tmp_path, capsys,
        "--must-refuse", str(refusals), "--refusal-rule", "any",
        "--thresholds", str(SAKE / "thresholds.json"),
        "--junit", str(junit), "--summary", str(summary), "--no-step-summary",
    )  # fmt: skip
    assert code == 0
    assert "  thresholds: PASS" in out
    assert "  must-refuse gate: PASS" in out
    markdown = summary.read_text("utf-8")
    assert (
        "| must-refuse (`--must-refuse`) | ✅ PASS | every must-refuse case must abstain "
        "(implied by --must-refuse) | 2 case(s), rule any: 2 abstained, 0 surfaced, "
        "0 undetermined, 0 failed |"
    ) in markdown
    xml = junit.read_text("utf-8")
    SCHEMA.validate(xml)
    assert '<testsuite name="taguru_eval.flag_gates" tests="1" failures="0"' in xml
    (row,) = flag_gate_rows(doc)
    assert (row.verdict, row.undetermined, row.reasons) == (PASS, 0, ())


def test_a_failed_gate_is_a_failed_junit_case_and_a_summary_row(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    code, _out, _err, _doc = _run(
        url, tmp_path, capsys,
        "--must-refuse", str(SAKE / "must_refuse.jsonl"),
        "--thresholds", str(SAKE / "thresholds.json"),
        "--junit", str(junit), "--summary", str(summary), "--no-step-summary",
    )  # fmt: skip
    assert code == 3
    xml = junit.read_text("utf-8")
    SCHEMA.validate(xml)
    suite = xml[xml.index('<testsuite name="taguru_eval.flag_gates"') :]
    assert suite.startswith('<testsuite name="taguru_eval.flag_gates" tests="1" failures="1"')
    assert "--refusal-rule any" in suite  # the failure's message names the fix
    # The document's own totals count it: the implied violations fail no bound of the file.
    assert re.search(r'<testsuites name="taguru_eval" tests="\d+" failures="1"', xml)
    markdown = summary.read_text("utf-8")
    assert markdown.startswith("## taguru_eval: context `sake` — ❌ FAIL (2 violation(s))")
    assert "| must-refuse (`--must-refuse`) | ❌ FAIL |" in markdown
    assert "1 surfaced, 5 undetermined, 0 failed |" in markdown


def test_a_report_only_run_carries_the_rows_not_gated(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        '{"taguru_eval_answers": 1}\n{"case_id": "brand-origin-001", "answers": ["1897"]}\n',
        encoding="utf-8",
    )
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    code, out, _err, doc = _run(
        url, tmp_path, capsys,
        "--must-refuse", str(SAKE / "must_refuse.jsonl"), "--answers", str(answers),
        "--junit", str(junit), "--summary", str(summary), "--no-step-summary",
    )  # fmt: skip
    assert code == 0
    assert "gate:" not in out  # nothing was gated: no verdict line
    rows = flag_gate_rows(doc)
    assert [(row.name, row.verdict) for row in rows] == [
        ("must-refuse", NOT_GATED),
        ("answers", NOT_GATED),
    ]
    assert rows[1].counts == "1 of 1 listed case(s) judged, hit@k 1/1"
    xml = junit.read_text("utf-8")
    SCHEMA.validate(xml)
    assert '<testsuite name="taguru_eval.flag_gates" tests="2" failures="0" errors="0" ' in xml
    assert xml.count('<skipped message="no --thresholds: report only"/>') == 2
    markdown = summary.read_text("utf-8")
    assert "| answers (`--answers`) | not gated | no --thresholds: report only |" in markdown


def test_a_run_without_the_flags_gets_no_byte_more(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err, doc = _run(
        url, tmp_path, capsys, "--thresholds", str(SAKE / "thresholds.json")
    )
    assert code == 0
    assert "flag_gates" not in doc["thresholds"]
    assert not [line for line in out.splitlines() if " gate: " in line]
    assert flag_gate_rows(doc) == []


# --------------------------------------------------------------- answers, on frames

ANSWERS_ONLY = parse_thresholds(
    b'{"taguru_evaluate_thresholds": 1, "aggregate": {"recall.mrr": {"min": 0.5}}}', "t.json"
)
WITH_ANSWERS = parse_thresholds(
    b'{"taguru_evaluate_thresholds": 1, "aggregate": {"answers.mrr": {"min": 0.5}}}', "t.json"
)


def _report(*violations: Violation) -> GateReport:
    return GateReport("ab" * 32, False, violations, ())


def test_no_judged_answer_fails_a_gated_run_with_the_cause() -> None:
    metrics = {"answers.hit_at_k": {"n": 0}}
    report = apply_flag_gates(_report(), ANSWERS_ONLY, metrics, answers_listed=4)
    (violation,) = report.violations
    assert (violation.metric, violation.actual) == ("answers.hit_at_k", None)
    assert violation.reason.startswith(f"{NO_SAMPLES_REASON} — none of the 4 listed case(s)")
    assert "the first lane of every one failed" in violation.reason
    (gate,) = report.flag_gates
    assert (gate.flag, gate.bounds, gate.passed) == ("--answers", "implied", False)
    assert not report.passed
    judged = apply_flag_gates(
        _report(), ANSWERS_ONLY, {"answers.hit_at_k": {"n": 1}}, answers_listed=4
    )
    assert judged.passed and judged.flag_gates[0].passed


def test_an_explicit_answers_bound_without_samples_says_why() -> None:
    empty = Violation(
        scope="aggregate", metric="answers.mrr", actual=None, reason=NO_SAMPLES_REASON
    )
    report = apply_flag_gates(
        _report(empty), WITH_ANSWERS, {"answers.hit_at_k": {"n": 0}}, answers_listed=2
    )
    (violation,) = report.violations  # no implied one beside the file's own
    assert violation.reason == (
        f"{NO_SAMPLES_REASON} — none of the 2 listed case(s) was judged: the first lane of "
        "every one failed (its message is in the case block)"
    )
    assert report.flag_gates[0].bounds == "explicit"
    assert not report.flag_gates[0].passed


def test_rows_of_an_artifact_written_before_the_flag_gates() -> None:
    doc = {
        "thresholds": {
            "sha256": "x",
            "passed": False,
            "violations": [
                {"scope": "aggregate", "metric": "abstention.refusal_rate", "reason": "r"}
            ],
        },
        "abstention": {"rule": "semantic", "counts": {"abstained": 1, "surfaced": 1}},
    }
    (row,) = flag_gate_rows(doc)
    assert (row.verdict, row.reasons) == (FAIL, ("r",))
    assert row.judged_by == "the thresholds file's abstention.* bounds, if any"
    assert (
        row.counts == "2 case(s), rule semantic: 1 abstained, 1 surfaced, 0 undetermined, 0 failed"
    )


def test_the_report_shows_the_rows(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(
        url, tmp_path, capsys,
        "--must-refuse", str(SAKE / "must_refuse.jsonl"), "--refusal-rule", "any",
        "--thresholds", str(SAKE / "thresholds.json"),
    )  # fmt: skip
    page = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "evaluation.json"), "-o", str(page)]) == 0
    text = re.sub(r"<[^>]+>", " ", page.read_text("utf-8"))
    gate = text[text.index(" Gate ") :]
    assert re.search(
        r"must-refuse \(--must-refuse\)\s+FAIL\s+every must-refuse case must abstain", gate
    )
    assert "6 case(s), rule any: 2 abstained, 4 surfaced, 0 undetermined, 0 failed" in gate
