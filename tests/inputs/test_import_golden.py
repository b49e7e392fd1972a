"""``import-golden``: a citenexus golden CSV in, and an honest report of what did not map (§4)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taguru_eval.cli.import_golden import main
from taguru_eval.cli.main import main as cli_main
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.must_refuse import load_must_refuse
from taguru_eval.refserver.serve import running_server

# The shape of citenexus's law-authority example (columns and routing), with
# this test's own fictional rows.
LAW = (
    "question,expected,expect_decision,probe,expected_authority,correct_docs,trap_docs,note\n"
    "How many days notice ends a yearly lease?,60,answer,authority,HIGH,"
    "01-notice|02-appeal,04-blog,Controlling statute says 60.\n"
    'Who serves the notice?,"the owner, in person",answer,,HIGH,01-notice,,\n'
    "Is a fee allowed for the notice?,charge,answer,,HIGH,,,No document id recorded.\n"
    "What is the largest deposit allowed?,,abstain,,NONE,,,No deposit statute; must refuse.\n"
    "What notice ends a lease in Texas?,,abstain,jurisdiction,NONE,,,Texas is absent.\n"
    "Anything else?,,maybe,,,,,\n"
)

BARE = (
    "question,expected\n"
    "Can the employee disclose confidential information?,shall not disclose\n"
    "What is the capital of France?,\n"
    ",\n"
    "What notice does termination require?,thirty days\n"
)


def run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def report_of(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def law(tmp_path: Path) -> Path:
    path = tmp_path / "golden.csv"
    path.write_text(LAW, encoding="utf-8")
    return path


def test_the_law_shape_imports_with_every_row_accounted_for(law: Path, tmp_path: Path) -> None:
    code, out, err = run(
        [str(law), "--sources-column", "correct_docs", "--source-template", "corpus/{}.md"]
    )
    assert code == 0, err
    eval_path = tmp_path / "golden.eval.jsonl"
    refuse_path = tmp_path / "golden.must_refuse.jsonl"
    report = report_of(tmp_path / "golden.import-report.json")
    assert report["counts"] == {"eval": 2, "must_refuse": 2, "needs_labels": 1, "skipped": 1}
    assert report["written"] == {"eval": str(eval_path), "must_refuse": str(refuse_path)}
    # What maps loads as what it claims to be.
    eval_set = load_eval(eval_path)
    assert eval_set.name == "golden"
    assert [case.case_id for case in eval_set.cases] == ["golden-001", "golden-002"]
    first = eval_set.cases[0]
    assert [(s.source, s.paragraphs, s.relevance) for s in first.expected_sources] == [
        ("corpus/01-notice.md", (), 1),
        ("corpus/02-appeal.md", (), 1),
    ]
    refusals = load_must_refuse(refuse_path, eval_set.case_ids)
    assert [(case.case_id, case.kind, case.why) for case in refusals.cases] == [
        ("golden-004", "unspecified", "No deposit statute; must refuse."),
        ("golden-005", "unspecified", "Texas is absent."),
    ]
    detail = {entry["row"]: entry for entry in report["rows_detail"]}
    assert detail[3]["went"] == "needs_labels"
    assert "its 'correct_docs' cell is empty" in detail[3]["why"]
    assert (detail[6]["went"], detail[6]["why"]) == (
        "skipped",
        "expect_decision is 'maybe', neither 'answer' nor 'abstain'",
    )
    assert report["needs_labels"] == [
        {
            "row": 3,
            "case_id": "golden-003",
            "question": "Is a fee allowed for the notice?",
            "expected": "charge",
        }
    ]
    dropped = {entry["column"]: entry["why"] for entry in report["columns"]["dropped"]}
    assert set(dropped) == {"expected", "probe", "expected_authority", "trap_docs"}
    assert dropped["expected"].startswith("answer text has no eval.jsonl counterpart")
    assert "request filter (options.tags)" in dropped["trap_docs"]
    assert "golden-003 — answerable, but it has no location label" in out
    assert "  column 'trap_docs' not carried: " in out
    assert "import-golden: 6 row(s)" in out.splitlines()[0]
    assert "2 to eval.jsonl, 2 to the must-refuse file, 1 need location labels, 1 skipped" in out
    assert "breaks compare's continuity" in err
    assert "must-refuse kinds are left unspecified" in err


def test_without_a_sources_column_nothing_scores_and_the_report_says_so(
    law: Path, tmp_path: Path
) -> None:
    code, out, _err = run([str(law), "--id-prefix", "law"])
    assert code == 0
    report = report_of(tmp_path / "golden.import-report.json")
    assert report["counts"] == {"eval": 0, "must_refuse": 2, "needs_labels": 3, "skipped": 1}
    assert not (tmp_path / "golden.eval.jsonl").exists()
    assert report["written"]["eval"] is None
    assert f"  no eval case: {tmp_path / 'golden.eval.jsonl'} not written" in out
    dropped = {entry["column"]: entry["why"] for entry in report["columns"]["dropped"]}
    assert "pass --sources-column correct_docs" in dropped["correct_docs"]
    assert [case["case_id"] for case in report["needs_labels"]] == ["law-001", "law-002", "law-003"]


def test_a_bare_question_expected_csv_needs_a_decision_about_blank_rows(tmp_path: Path) -> None:
    path = tmp_path / "bare.csv"
    path.write_text(BARE, encoding="utf-8")
    code, _out, err = run([str(path)])
    assert code == 2
    assert err == (
        f"taguru: evaluate: {path}: 1 row(s) have a blank 'expected' and the file has no "
        "'expect_decision' column (rows 2); in citenexus a blank expected means 'any answer "
        "counts', not 'refuse' — pass --blank-expected must-refuse or --blank-expected skip\n"
    )
    assert not list(tmp_path.glob("bare.*.json*"))

    code, _out, _err = run([str(path), "--blank-expected", "must-refuse"])
    assert code == 0
    report = report_of(tmp_path / "bare.import-report.json")
    # A bare CSV imports as a must-refuse file plus questions still needing labels.
    assert report["counts"] == {"eval": 0, "must_refuse": 1, "needs_labels": 2, "skipped": 0}
    assert report["rows"] == 3  # the all-blank line is no row
    refusals = load_must_refuse(tmp_path / "bare.must_refuse.jsonl")
    assert [case.query for case in refusals.cases] == ["What is the capital of France?"]
    assert [entry["expected"] for entry in report["needs_labels"]] == [
        "shall not disclose",
        "thirty days",
    ]
    assert not (tmp_path / "bare.eval.jsonl").exists()

    code, _out, _err = run(
        [str(path), "--blank-expected", "skip", "--report-out", str(tmp_path / "r.json")]
    )
    assert code == 0
    assert report_of(tmp_path / "r.json")["counts"]["skipped"] == 1


def test_a_csv_without_an_expected_column_says_so_when_asking_for_a_decision(
    tmp_path: Path,
) -> None:
    path = tmp_path / "questions.csv"
    path.write_text("question\nWhat year?\nWho brews?\n", encoding="utf-8")
    code, out, err = run([str(path)])
    assert (code, out) == (2, "")
    assert err == (
        f"taguru: evaluate: {path}: the file has neither an 'expected' nor an "
        "'expect_decision' column, so all 2 row(s) read as blank-expected; in citenexus a "
        "blank expected means 'any answer counts', not 'refuse' — pass --blank-expected "
        "must-refuse or --blank-expected skip\n"
    )


def test_what_citenexus_would_misread_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "padded.csv"
    path.write_bytes(
        "\ufeffquestion, expected,expected_support,id\nWhat is due?,rent,rent,r1\n".encode()
    )
    code, _out, err = run([str(path), "--id-column", "id", "--blank-expected", "skip"])
    assert code == 0
    report = report_of(tmp_path / "padded.import-report.json")
    warnings = report["warnings"]
    assert any(w.startswith("header ' expected' was read as 'expected'") for w in warnings)
    assert any("'expected_support' is ignored by citenexus" in w for w in warnings)
    assert any("byte order mark" in w for w in warnings)
    assert not any("compare's continuity" in w for w in warnings)  # an id column was given
    assert report["needs_labels"][0]["case_id"] == "r1"
    assert err.count("taguru: evaluate: import-golden: ") == len(warnings)


@pytest.mark.parametrize(
    ("csv", "args", "message"),
    [
        ("a,b\n1,2\n", [], "no 'question' or 'query' column (header: a, b)"),
        ("", [], "empty file: expected a CSV header row"),
        ("question,expected\nq,1,extra\n", [], "line 2: 3 cells but the header has 2 columns"),
        ("question,expected\nq,1\n", ["--id-column", "nope"], "--id-column 'nope' is not a column"),
        (
            "question,id,expected\nq,a,1\nr,a,2\n",
            ["--id-column", "id"],
            "case_id 'a' repeats row 1",
        ),
        ("question,question\nq,q\n", [], "repeated header column(s): question"),
        (
            'question,expected\n"What is x?,1\nWhat is y?,2\n',
            [],
            "line 3: not valid CSV: unexpected end of data",
        ),
    ],
)
def test_malformed_input_is_exit_2(tmp_path: Path, csv: str, args: list[str], message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(csv, encoding="utf-8")
    code, _out, err = run([str(path), *args])
    assert code == 2
    assert message in err


def test_a_wide_header_is_read_in_linear_time(tmp_path: Path) -> None:
    """100,000 columns (the header was once scanned per column: 312 s); every one
    not carried is still reported, and a repeat among them is still found."""
    columns = [f"c{i}" for i in range(100_000)]
    path = tmp_path / "wide.csv"
    cells = ",".join("x" * len(columns))
    path.write_text(
        ",".join(["question", "expected", *columns]) + f"\nq,thirty days,{cells}\n",
        encoding="utf-8",
    )
    code, _out, err = run([str(path)])
    assert code == 0, err
    report = report_of(tmp_path / "wide.import-report.json")
    dropped = [entry["column"] for entry in report["columns"]["dropped"]]
    assert dropped == ["expected", *columns]
    repeated = tmp_path / "repeated.csv"
    repeated.write_text(",".join(["question", *columns, "c99999"]) + "\nq\n", encoding="utf-8")
    code, _out, err = run([str(repeated)])
    assert code == 2 and "repeated header column(s): c99999" in err


def test_usage_errors() -> None:
    code, _out, err = run([])
    assert code == 2 and "import-golden takes one CSV file (got 0)" in err
    code, _out, err = run(["a.csv", "--blank-expected", "maybe"])
    assert code == 2 and "--blank-expected must be 'must-refuse' or 'skip'" in err
    code, _out, err = run(["a.csv", "--source-template", "x/{}"])
    assert code == 2 and "--source-template requires --sources-column" in err
    for no_file in (".", "", "/"):
        code, _out, err = run([no_file])
        assert code == 2 and f"import-golden takes a CSV file, not '{no_file}'" in err
    code, out, _err = run(["--help"])
    assert code == 0 and out.startswith("usage: python -m taguru_eval import-golden")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("golden-data")
    for name in ("01-notice", "02-appeal"):
        target = root / "law" / "corpus" / f"{name}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{name} text.\n", encoding="utf-8")
    with running_server(root) as url:
        yield url


def test_context_checks_the_mapped_sources(law: Path, tmp_path: Path, server: str) -> None:
    base = [str(law), "--sources-column", "correct_docs", "--context", "law", "--url", server]
    code, _out, err = run([*base, "--source-template", "corpus/{}.md"])
    assert code == 0, err
    code, _out, err = run(
        [*base, "--source-template", "docs/{}.txt", "--eval-out", str(tmp_path / "x.jsonl")]
    )
    assert code == 2
    assert (
        "2 mapped source(s) are not in context 'law': docs/01-notice.txt, docs/02-appeal.txt" in err
    )
    assert not (tmp_path / "x.jsonl").exists()


def test_the_subcommand_is_registered(law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["import-golden", str(law), "--blank-expected", "skip"]) == 0
    assert "import-golden: 6 row(s)" in capsys.readouterr().out


def test_no_output_may_be_the_csv_or_another_output(law: Path, tmp_path: Path) -> None:
    before = law.read_bytes()
    same_csv = str(tmp_path / "sub" / ".." / "golden.csv")
    (tmp_path / "sub").mkdir()
    code, _out, err = run([str(law), "--blank-expected", "skip", "--eval-out", same_csv])
    assert code == 2
    assert f"--eval-out '{same_csv}' is the same file as the CSV" in err
    shared = str(tmp_path / "out.json")
    code, _out, err = run(
        [str(law), "--blank-expected", "skip", "--must-refuse-out", shared, "--report-out", shared]
    )
    assert code == 2
    assert f"--report-out '{shared}' is the same file as --must-refuse-out" in err
    assert law.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["golden.csv", "sub"]


def test_the_outputs_are_written_all_or_none(law: Path, tmp_path: Path) -> None:
    eval_out, report_out = tmp_path / "golden.eval.jsonl", tmp_path / "golden.import-report.json"
    eval_out.write_text("old eval\n", encoding="utf-8")
    report_out.write_text("old report\n", encoding="utf-8")
    unwritable = tmp_path / "missing-dir" / "refuse.jsonl"
    code, out, err = run(
        [
            str(law),
            "--sources-column",
            "correct_docs",
            "--must-refuse-out",
            str(unwritable),
        ]
    )
    assert code == 1
    assert err.startswith(f"taguru: evaluate: writing {unwritable}: "), err
    assert out == ""
    # The eval.jsonl (staged first) and the report are as they were: no half-new set.
    assert eval_out.read_text(encoding="utf-8") == "old eval\n"
    assert report_out.read_text(encoding="utf-8") == "old report\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "golden.csv",
        "golden.eval.jsonl",
        "golden.import-report.json",
    ]


def test_the_csv_s_text_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    path = tmp_path / "ids.csv"
    path.write_text(
        'id,question,expected,expect_decision\n"\x1b[31mred\nFAKE: ok",Q?,x,answer\n',
        encoding="utf-8",
    )
    code, out, err = run([str(path), "--id-column", "id"])
    assert code == 0, err
    assert "\x1b" not in out + err
    assert "  needs labels: \\u{1b}[31mred\\nFAKE: ok — " in out
    assert not any(line.startswith("FAKE") for line in out.splitlines())
