"""``import-golden``: a citenexus golden CSV in, and an honest report of what did not map (§4)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import DATA

from taguru_eval.cli.import_golden import main
from taguru_eval.cli.main import main as cli_main
from taguru_eval.inputs.answers import load_answers
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.must_refuse import load_must_refuse
from taguru_refserver.serve import running_server

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
    "When does the notice period start?,,answer,,HIGH,02-appeal,,\n"
    "Who pays the filing fee?,,answer,,HIGH,,,Nothing recorded yet.\n"
    "Can the notice be sent by e-mail?,no,abstain,,NONE,,,Silent on e-mail.\n"
)

BARE = (
    "question,expected\n"
    "Can the employee disclose confidential information?,shall not disclose\n"
    "What is the capital of France?,\n"
    ",\n"
    "What notice does termination require?, thirty days \n"
)

# The seed's two-row `question,expected` CSV (citenexus "Evaluate a corpus", step 1),
# its questions adapted to the handbook corpus: each answer is the handbook's own words.
SEED = (
    "question,expected\n"
    '"How many days per week can employees work remotely?","up to three days per week"\n'
    '"How many weeks of paid Parental Leave do parents receive?","20 weeks"\n'
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
    answers_path = tmp_path / "golden.answers.jsonl"
    refuse_path = tmp_path / "golden.must_refuse.jsonl"
    report = report_of(tmp_path / "golden.import-report.json")
    assert report["counts"] == {
        "eval": 4,
        "answers": 3,
        "must_refuse": 3,
        "needs_labels": 1,
        "skipped": 1,
    }
    assert report["written"] == {
        "eval": str(eval_path),
        "answers": str(answers_path),
        "must_refuse": str(refuse_path),
    }
    # What maps loads as what it claims to be.
    eval_set = load_eval(eval_path)
    assert eval_set.name == "golden"
    assert [case.case_id for case in eval_set.cases] == [
        "golden-001",
        "golden-002",
        "golden-003",
        "golden-007",
    ]
    sources = {
        case.case_id: [(s.source, s.paragraphs, s.relevance) for s in case.expected_sources]
        for case in eval_set.cases
    }
    assert sources == {
        "golden-001": [("corpus/01-notice.md", (), 1), ("corpus/02-appeal.md", (), 1)],
        "golden-002": [("corpus/01-notice.md", (), 1)],
        "golden-003": [],  # answer text only: the answers file scores it
        "golden-007": [("corpus/02-appeal.md", (), 1)],  # a location only
    }
    answers = load_answers(answers_path, eval_set.case_ids)
    assert answers.name == "golden"
    assert answers.by_case == {
        "golden-001": ("60",),
        "golden-002": ("the owner, in person",),
        "golden-003": ("charge",),
    }
    refusals = load_must_refuse(refuse_path, eval_set.case_ids)
    assert [(case.case_id, case.kind, case.why) for case in refusals.cases] == [
        ("golden-004", "unspecified", "No deposit statute; must refuse."),
        ("golden-005", "unspecified", "Texas is absent."),
        ("golden-009", "unspecified", "Silent on e-mail."),
    ]
    detail = {entry["row"]: entry for entry in report["rows_detail"]}
    assert detail[3]["why"] == (
        "answer text from 'expected' to the answers file; no expected_sources, as its "
        "'correct_docs' cell is empty"
    )
    assert detail[7]["why"] == "answerable; expected_sources from 'correct_docs'"
    assert detail[8]["went"] == "needs_labels"
    assert detail[8]["why"] == (
        "answerable, but it has neither answer text ('expected' is blank) nor a location "
        "label (its 'correct_docs' cell is empty); a case without either would measure nothing"
    )
    assert detail[9]["why"] == (
        "expect_decision=abstain; its 'expected' text is not carried (a must-refuse case has "
        "no answers)"
    )
    assert (detail[6]["went"], detail[6]["why"]) == (
        "skipped",
        "expect_decision is 'maybe', neither 'answer' nor 'abstain'",
    )
    assert report["needs_labels"] == [
        {"row": 8, "case_id": "golden-008", "question": "Who pays the filing fee?"}
    ]
    assert report["columns"]["mapped"]["expected"].startswith("answers file")
    dropped = {entry["column"]: entry["why"] for entry in report["columns"]["dropped"]}
    assert set(dropped) == {"probe", "expected_authority", "trap_docs"}
    assert "request filter (options.tags)" in dropped["trap_docs"]
    lines = out.splitlines()
    assert lines[:8] == [
        f"import-golden: 9 row(s) from {law} — 4 to eval.jsonl, 3 to the answers file, "
        "3 to the must-refuse file, 1 need labels, 1 skipped",
        "  2 to eval.jsonl: answer text from 'expected' to the answers file; expected_sources "
        "from 'correct_docs'",
        "  1 to eval.jsonl: answer text from 'expected' to the answers file; no "
        "expected_sources, as its 'correct_docs' cell is empty",
        "  2 to the must-refuse file: expect_decision=abstain",
        "  1 to eval.jsonl: answerable; expected_sources from 'correct_docs'",
        "  1 to the must-refuse file: expect_decision=abstain; its 'expected' text is not "
        "carried (a must-refuse case has no answers)",
        f"  wrote {eval_path}",
        f"  wrote {answers_path}",
    ]
    assert "  needs labels: golden-008 — answerable, but it has neither answer text" in out
    assert "  column 'trap_docs' not carried: " in out
    assert "column 'expected'" not in out
    assert "breaks compare's continuity" in err
    assert "1 eval case(s) carry answer text but no location label" in err
    assert "must-refuse kinds are left unspecified" in err


def test_the_seed_s_two_rows_import_as_eval_cases_and_answers(tmp_path: Path) -> None:
    path = tmp_path / "seed.csv"
    path.write_text(SEED, encoding="utf-8")
    code, out, err = run([str(path)])
    assert code == 0, err
    eval_set = load_eval(tmp_path / "seed.eval.jsonl")
    assert [(case.case_id, case.query, case.expected_sources) for case in eval_set.cases] == [
        ("golden-001", "How many days per week can employees work remotely?", ()),
        ("golden-002", "How many weeks of paid Parental Leave do parents receive?", ()),
    ]
    answers_path = tmp_path / "seed.answers.jsonl"
    assert answers_path.read_text(encoding="utf-8") == (
        '{"taguru_eval_answers": 1, "name": "seed"}\n'
        '{"case_id": "golden-001", "answers": ["up to three days per week"]}\n'
        '{"case_id": "golden-002", "answers": ["20 weeks"]}\n'
    )
    answers = load_answers(answers_path, eval_set.case_ids)
    assert answers.by_case == {
        "golden-001": ("up to three days per week",),
        "golden-002": ("20 weeks",),
    }
    # Each answer is literally in the handbook, so an answer check can pass on it.
    assert "up to three days per week" in (DATA / "handbook/policies/remote-work.md").read_text()
    assert "20 weeks" in (DATA / "handbook/policies/leave.md").read_text()
    assert not (tmp_path / "seed.must_refuse.jsonl").exists()
    report = report_of(tmp_path / "seed.import-report.json")
    assert report["counts"] == {
        "eval": 2,
        "answers": 2,
        "must_refuse": 0,
        "needs_labels": 0,
        "skipped": 0,
    }
    assert report["columns"]["dropped"] == []
    assert out == (
        f"import-golden: 2 row(s) from {path} — 2 to eval.jsonl, 2 to the answers file, "
        "0 to the must-refuse file, 0 need labels, 0 skipped\n"
        "  2 to eval.jsonl: answer text from 'expected' to the answers file; no "
        "expected_sources, as no document-id column was mapped (--sources-column)\n"
        f"  wrote {tmp_path / 'seed.eval.jsonl'}\n"
        f"  wrote {answers_path}\n"
        f"  no must-refuse case: {tmp_path / 'seed.must_refuse.jsonl'} not written\n"
        f"  report: {tmp_path / 'seed.import-report.json'}\n"
    )
    assert err.splitlines() == [
        "taguru: evaluate: import-golden: case_ids are 'golden-<row number>': reordering the "
        "CSV renumbers them and breaks compare's continuity — an id column (--id-column) is "
        "the fix",
        "taguru: evaluate: import-golden: 2 eval case(s) carry answer text but no location "
        "label: their expected_sources are empty, so only the answers file scores them",
    ]


def test_without_a_sources_column_only_answer_text_carries_and_the_report_says_so(
    law: Path, tmp_path: Path
) -> None:
    code, out, _err = run([str(law), "--id-prefix", "law"])
    assert code == 0
    report = report_of(tmp_path / "golden.import-report.json")
    assert report["counts"] == {
        "eval": 3,
        "answers": 3,
        "must_refuse": 3,
        "needs_labels": 2,
        "skipped": 1,
    }
    eval_set = load_eval(tmp_path / "golden.eval.jsonl")
    assert all(not case.expected_sources for case in eval_set.cases)
    answers = load_answers(tmp_path / "golden.answers.jsonl", eval_set.case_ids)
    assert list(answers.by_case) == ["law-001", "law-002", "law-003"]
    dropped = {entry["column"]: entry["why"] for entry in report["columns"]["dropped"]}
    assert "pass --sources-column correct_docs" in dropped["correct_docs"]
    # Only rows with neither answer text nor a location still need labels.
    assert [case["case_id"] for case in report["needs_labels"]] == ["law-007", "law-008"]
    assert "  needs labels: law-007 — answerable, but it has neither answer text" in out


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

    code, out, _err = run([str(path), "--blank-expected", "must-refuse"])
    assert code == 0
    report = report_of(tmp_path / "bare.import-report.json")
    # A bare CSV imports as eval cases with answers, and its blank rows as before.
    assert report["counts"] == {
        "eval": 2,
        "answers": 2,
        "must_refuse": 1,
        "needs_labels": 0,
        "skipped": 0,
    }
    assert report["rows"] == 3  # the all-blank line is no row
    eval_set = load_eval(tmp_path / "bare.eval.jsonl")
    refusals = load_must_refuse(tmp_path / "bare.must_refuse.jsonl", eval_set.case_ids)
    assert [case.query for case in refusals.cases] == ["What is the capital of France?"]
    answers = load_answers(tmp_path / "bare.answers.jsonl", eval_set.case_ids)
    assert answers.by_case == {
        "golden-001": ("shall not disclose",),
        "golden-003": ("thirty days",),  # trimmed
    }
    assert report["needs_labels"] == []
    assert (
        "  1 to the must-refuse file: blank expected, imported as must-refuse (--blank-expected)"
        in out.splitlines()
    )

    code, out, _err = run(
        [str(path), "--blank-expected", "skip", "--report-out", str(tmp_path / "r.json")]
    )
    assert code == 0
    report = report_of(tmp_path / "r.json")
    assert (report["counts"]["skipped"], report["counts"]["eval"]) == (1, 2)
    assert "  skipped: row 2 — blank expected, skipped (--blank-expected skip)" in out


def test_no_answer_text_writes_no_answers_file_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "blank.csv"
    path.write_text(
        "question,expected,docs\nWhat is due?,,rent\nWhat is late?,  ,\n", encoding="utf-8"
    )
    code, out, err = run([str(path), "--blank-expected", "skip", "--sources-column", "docs"])
    assert code == 0, err
    report = report_of(tmp_path / "blank.import-report.json")
    assert report["counts"] == {
        "eval": 0,
        "answers": 0,
        "must_refuse": 0,
        "needs_labels": 0,
        "skipped": 2,
    }
    assert report["written"] == {"eval": None, "answers": None, "must_refuse": None}
    assert f"  no row has answer text: {tmp_path / 'blank.answers.jsonl'} not written" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.csv", "blank.import-report.json"]


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
    assert report["columns"]["mapped"][" expected"].startswith("answers file")
    assert load_answers(tmp_path / "padded.answers.jsonl", ["r1"]).by_case == {"r1": ("rent",)}
    assert err.count("taguru: evaluate: import-golden: ") == len(warnings)


def test_expected_column_names_the_answer_column(tmp_path: Path) -> None:
    path = tmp_path / "named.csv"
    path.write_text(
        "question,expected,answer_text\nWhich office observes Sechseläuten?,x,Zürich\n",
        encoding="utf-8",
    )
    code, out, err = run([str(path), "--expected-column", "answer_text"])
    assert code == 0, err
    # Non-ASCII is written raw (ensure_ascii=False), as in the other outputs.
    assert (tmp_path / "named.answers.jsonl").read_text(encoding="utf-8").splitlines()[1] == (
        '{"case_id": "golden-001", "answers": ["Zürich"]}'
    )
    report = report_of(tmp_path / "named.import-report.json")
    assert list(report["columns"]["mapped"]) == ["question", "answer_text"]
    assert report["columns"]["dropped"] == [
        {
            "column": "expected",
            "why": "not the answer column: --expected-column names 'answer_text'",
        }
    ]
    assert "answer text from 'answer_text' to the answers file" in out
    assert "answer text was read from 'answer_text' (--expected-column); citenexus" in err

    for flag_value, message in (
        ("nope", "--expected-column 'nope' is not a column (header: question, expected, "),
        ("question", "--expected-column 'question' is already read as the question"),
    ):
        code, out, err = run([str(path), "--expected-column", flag_value, "--name", "x"])
        assert (code, out) == (2, "")
        assert err.startswith(f"taguru: evaluate: {path}: {message}"), err
        assert err.count("\n") == 1 and "Traceback" not in err


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
    assert dropped == columns
    repeated = tmp_path / "repeated.csv"
    repeated.write_text(",".join(["question", *columns, "c99999"]) + "\nq\n", encoding="utf-8")
    code, _out, err = run([str(repeated)])
    assert code == 2 and "repeated header column(s): c99999" in err


def test_many_rows_are_read_whole(tmp_path: Path) -> None:
    """100,000 rows, each an eval case and an answers entry, the last one too (at a
    user's scale; how long it takes is no test's business: it was once asserted
    here and failed on a busy machine)."""
    path = tmp_path / "tall.csv"
    path.write_text(
        "question,expected\n" + "".join(f"q{i}?,a{i}\n" for i in range(100_000)),
        encoding="utf-8",
    )
    code, out, err = run([str(path), "--id-prefix", "t"])
    assert code == 0, err
    assert out.startswith(f"import-golden: 100000 row(s) from {path} — 100000 to eval.jsonl, ")
    answers = (tmp_path / "tall.answers.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(answers) == 100_001
    assert answers[-1] == '{"case_id": "t-100000", "answers": ["a99999"]}'


def test_usage_errors() -> None:
    code, _out, err = run([])
    assert code == 2 and "import-golden takes one CSV file (got 0)" in err
    code, _out, err = run(["a.csv", "--blank-expected", "maybe"])
    assert code == 2 and "--blank-expected must be 'must-refuse' or 'skip'" in err
    code, _out, err = run(["a.csv", "--source-template", "x/{}"])
    assert code == 2 and "--source-template requires --sources-column" in err
    code, _out, err = run(["a.csv", "--expected-column"])
    assert code == 2 and "--expected-column needs a value" in err
    code, _out, err = run(["a.csv", "--answers-out", "a.eval.jsonl"])
    assert code == 2 and "--answers-out 'a.eval.jsonl' is the same file as --eval-out" in err
    code, _out, err = run(["a.csv", "--answers-out", ""])
    assert code == 2 and "--answers-out needs a file path, not an empty one" in err
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
    assert "import-golden: 9 row(s)" in capsys.readouterr().out


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
    # The eval.jsonl and answers file (staged first) and the report are as they were:
    # no half-new set.
    assert eval_out.read_text(encoding="utf-8") == "old eval\n"
    assert report_out.read_text(encoding="utf-8") == "old report\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "golden.csv",
        "golden.eval.jsonl",
        "golden.import-report.json",
    ]


def test_an_unwritable_answers_file_leaves_the_previous_set_whole(
    law: Path, tmp_path: Path
) -> None:
    old = {
        tmp_path / "golden.eval.jsonl": "old eval\n",
        tmp_path / "golden.must_refuse.jsonl": "old refusals\n",
        tmp_path / "golden.import-report.json": "old report\n",
    }
    for path, text in old.items():
        path.write_text(text, encoding="utf-8")
    unwritable = tmp_path / "missing-dir" / "golden.answers.jsonl"
    code, out, err = run([str(law), "--answers-out", str(unwritable)])
    assert code == 1
    assert out == ""
    assert err == (
        f"taguru: evaluate: writing {unwritable}: No such file or directory (os error 2)\n"
    )
    # The eval.jsonl was staged before the answers file failed; neither it, the
    # must-refuse file nor the report changed, and no staged file is left behind.
    assert {path: path.read_text(encoding="utf-8") for path in old} == old
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["golden.csv", *(path.name for path in old)]
    )


def test_the_csv_s_text_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    path = tmp_path / "ids.csv"
    path.write_text(
        'id,question,expected,expect_decision\n"\x1b[31mred\nFAKE: ok",Q?,,answer\n',
        encoding="utf-8",
    )
    code, out, err = run([str(path), "--id-column", "id"])
    assert code == 0, err
    assert "\x1b" not in out + err
    assert "  needs labels: \\u{1b}[31mred\\nFAKE: ok — " in out
    assert not any(line.startswith("FAKE") for line in out.splitlines())
