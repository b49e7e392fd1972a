"""The pytest entry point, driven by pytester against the reference server.

``pytest --taguru-url URL`` collects a project's eval sets as one item per gate
check, fails the checks the run violates (and only those), and works with ``-k``,
``-x`` and ``--junitxml``; without a URL its items are skipped with the reason, and
a project that neither passes the flag nor configures the table sees no change.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from taguru_eval.cli.pytest_plugin import NO_URL
from taguru_refserver.serve import running_server

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SAKE_EVAL = (DATA / "sake" / "eval.jsonl").read_text(encoding="utf-8")

THRESHOLDS = {
    "taguru_evaluate_thresholds": 1,
    "aggregate": {"recall.recall_at_k": {"min": 0.9}, "recall.mrr": {"min": 0.99}},
    "cases": {"default": {"recall.ndcg": {"min": 0.99}, "recall.mrr": {"min": 0.5}}},
}
"""On the sake set: both aggregate bounds and the per-case MRR bound hold; five cases'
nDCG is below 0.99, so exactly ``cases[recall.ndcg]`` fails."""

ITEMS = [
    "sake.eval.jsonl::aggregate[recall.mrr]",
    "sake.eval.jsonl::aggregate[recall.recall_at_k]",
    "sake.eval.jsonl::corpus[stable]",
    "sake.eval.jsonl::cases[recall.mrr]",
    "sake.eval.jsonl::cases[recall.ndcg]",
]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


def runpytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An in-process pytest run in the pytester project (without pytest-asyncio, which
    this repository installs and the projects under test do not use)."""
    return pytester.runpytest("-p", "no:asyncio", *args)


def project(pytester: pytest.Pytester, thresholds: dict[str, object] | None = THRESHOLDS) -> None:
    pytester.makefile(".eval.jsonl", sake=SAKE_EVAL)
    if thresholds is not None:
        pytester.makefile(".thresholds.json", sake=json.dumps(thresholds))


def test_the_plugin_is_registered_and_imports_nothing_of_the_evaluator() -> None:
    points = metadata.entry_points(group="pytest11")
    assert any(p.value == "taguru_eval.cli.pytest_plugin" for p in points)
    code = (
        "import sys, taguru_eval.cli.pytest_plugin; "
        "print(sorted(m for m in ('polars', 'pyarrow', 'aiohttp', 'httpx', 'taguru_eval.api')"
        " if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_it_collects_one_item_per_check_and_fails_only_the_violated_one(
    pytester: pytest.Pytester, server: str
) -> None:
    project(pytester)
    collected = runpytest(pytester, "--taguru-url", server, "--collect-only", "-q")
    assert [line for line in collected.outlines if "::" in line] == ITEMS

    result = runpytest(pytester, "--taguru-url", server, "-rf")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ cases[[]recall.ndcg[]] _*",
            "recall.ndcg: 5 case(s) violate their bound",
            "  [[]case water-source-004[]] 0.944848 < min 0.990000",
            "  [[]case known-miss-012[]] 0.826235 < min 0.990000",
            "FAILED sake.eval.jsonl::cases[[]recall.ndcg[]]*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_k_x_and_junit_work_on_the_items(pytester: pytest.Pytester, server: str) -> None:
    strict = {**THRESHOLDS, "aggregate": {"recall.ndcg": {"min": 0.99}}}
    project(pytester, strict)
    picked = runpytest(pytester, "--taguru-url", server, "-k", "ndcg and cases")
    picked.assert_outcomes(failed=1, deselected=3)

    stopped = runpytest(pytester, "--taguru-url", server, "-x")
    stopped.assert_outcomes(failed=1)  # aggregate[recall.ndcg] fails first; -x stops there

    report = pytester.path / "junit.xml"
    runpytest(pytester, "--taguru-url", server, f"--junitxml={report}").assert_outcomes(
        passed=2, failed=2
    )
    cases = ET.parse(report).getroot().iter("testcase")
    outcome = {
        case.get("name"): (case.find("failure").get("message") or "")  # type: ignore[union-attr]
        if case.find("failure") is not None
        else "passed"
        for case in cases
    }
    assert outcome["corpus[stable]"] == outcome["cases[recall.mrr]"] == "passed"
    assert outcome["aggregate[recall.ndcg]"].startswith("recall.ndcg: ")
    assert outcome["cases[recall.ndcg]"].startswith("recall.ndcg: 5 case(s) violate")


def test_without_a_url_the_items_skip_with_the_reason(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.makepyprojecttoml(
        '[tool.taguru_eval]\nevals = [{eval = "sake.eval.jsonl", context = "sake"}]\n'
    )
    result = runpytest(pytester, "-rs")
    result.assert_outcomes(skipped=5)
    result.stdout.fnmatch_lines([f"SKIPPED [[]5[]] *{NO_URL}"])


def test_a_project_that_does_not_ask_sees_no_change(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = runpytest(pytester, "-q")
    result.assert_outcomes(passed=1)
    assert "eval.jsonl" not in result.stdout.str()


def test_the_table_names_the_sets_with_their_context_and_files(
    pytester: pytest.Pytester, server: str
) -> None:
    evals = pytester.mkdir("evals")
    (evals / "questions.jsonl").write_text(SAKE_EVAL, encoding="utf-8")
    (evals / "gate.json").write_text(json.dumps(THRESHOLDS), encoding="utf-8")
    pytester.makefile(".eval.jsonl", ignored=SAKE_EVAL)  # not named: not collected
    pytester.makepyprojecttoml(
        "[tool.taguru_eval]\n"
        '[[tool.taguru_eval.evals]]\neval = "evals/questions.jsonl"\ncontext = "sake"\n'
        'thresholds = "evals/gate.json"\n'
    )
    pytester.makeini("[pytest]\ntestpaths = tests\n")  # the sets are found outside testpaths
    pytester.mkdir("tests")
    result = runpytest(pytester, "--taguru-url", server, "-v")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["evals/questions.jsonl::cases[[]recall.ndcg[]] FAILED*"])
    assert "ignored" not in result.stdout.str()


def test_a_bad_table_is_a_usage_error_naming_the_key(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        '[tool.taguru_eval]\nevals = [{eval = "a.eval.jsonl", contxt = "sake"}]\n'
    )
    result = runpytest(
        pytester,
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]tool.taguru_eval[]] evals[[]0[]]: unknown key 'contxt'*"])


def test_a_run_that_cannot_complete_fails_every_item_with_its_error(
    pytester: pytest.Pytester, server: str
) -> None:
    pytester.makefile(".eval.jsonl", nope=SAKE_EVAL)  # context 'nope' is not served
    result = runpytest(pytester, "--taguru-url", server)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["nope.eval.jsonl: the run did not complete (exit 2): *context*nope*", "hint: *"]
    )


def test_the_fixture_hands_the_run_to_hand_written_asserts(
    pytester: pytest.Pytester, server: str
) -> None:
    project(pytester)
    pytester.makepyfile(
        test_hand="""
        import pytest

        @pytest.mark.taguru_eval(eval="sake.eval.jsonl")
        def test_recall(taguru_eval_run):
            assert taguru_eval_run.cases.height == 16
            assert taguru_eval_run.doc["inputs"]["context"] == "sake"
            assert taguru_eval_run.exit_code == 3

        @pytest.mark.taguru_eval(eval="sake.eval.jsonl")
        def test_same_run(taguru_eval_run):
            assert taguru_eval_run.cases.height == 16
        """
    )
    result = runpytest(pytester, "--taguru-url", server, "test_hand.py")
    result.assert_outcomes(passed=2)
    skipped = runpytest(pytester, "test_hand.py", "-rs")
    skipped.assert_outcomes(skipped=2)
    skipped.stdout.fnmatch_lines([f"*{NO_URL}"])
