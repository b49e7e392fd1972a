"""Answer evidence (``--answers``) end to end over loopback HTTP.

Every paragraph of the corpus carries a canary word that no query, answer or
quote contains: served text is what reaches the client, so a canary in any
output (stdout, stderr, evaluation.json, every stored table, changes.jsonl,
JUnit, the Markdown summary, the HTML report) is served text that leaked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from support.run import run_args, write_eval, write_files

import taguru_eval
from taguru_eval.cli.main import main
from taguru_eval.compare import compare
from taguru_eval.demo.data import demo_data_dir
from taguru_eval.store_artifact import artifact_bytes, stored_artifact
from taguru_refserver.serve import running_server

CANARY = "QUOKKA"

CORPUS = {
    "context.json": json.dumps({"description": "answers"}),
    "docs/leave.md": (
        "# Leave\n\n"
        f"Employees receive twenty days of paid leave per year. {CANARY}1 rests here.\n\n"
        f"Unused leave days expire at the end of March. {CANARY}2 rests here.\n"
    ),
    "docs/remote.md": (
        f"# Remote work\n\nStaff may work remotely two days a week. {CANARY}3 rests here.\n"
    ),
    "docs/sake.md": f"# 蔵\n\n青嶺酒造は1897年に創業した蔵元である。{CANARY}4。\n",
}

CASES = [
    {
        "case_id": "leave-days",
        "query": "how many days of paid leave per year",
        "expected_sources": [{"source": "docs/leave.md", "paragraphs": [1], "relevance": 3}],
    },
    {"case_id": "remote", "query": "work remotely days a week"},
    {"case_id": "sake-founded", "query": "青嶺酒造 創業"},
    {"case_id": "missing", "query": "paid leave"},
    {"case_id": "unlisted", "query": "expire March"},
]

ANSWERS = [
    {"case_id": "leave-days", "answers": ["twenty days", "20 days"]},
    {"case_id": "remote", "answers": ["two days a week"]},
    {"case_id": "sake-founded", "answers": ["創業した蔵元"]},
    {"case_id": "missing", "answers": ["forty days"]},
]


def _write_answers(path: Path, rows: list[dict[str, Any]]) -> Path:
    lines = [json.dumps({"taguru_eval_answers": 1, "name": "answers"})]
    lines += [json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("answers")
    write_files(root / "data" / "ans", CORPUS)
    write_eval(root / "eval.jsonl", CASES, name="answers")
    _write_answers(root / "answers.jsonl", ANSWERS)
    (root / "gate.json").write_text(
        json.dumps(
            {
                "taguru_evaluate_thresholds": 1,
                "aggregate": {"answers.hit_at_k": {"min": 0.9}, "answers.coverage": {"min": 0.5}},
            }
        ),
        encoding="utf-8",
    )
    return root


@pytest.fixture(scope="module")
def server(work: Path) -> Iterator[str]:
    with running_server(work / "data") as url:
        yield url


def _cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = main(["run", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _answers_of(doc: dict[str, Any]) -> dict[str, Any]:
    return {case["case_id"]: case["answers"] for case in doc["cases"] if "answers" in case}


def test_answers_are_judged_on_the_served_window(
    work: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(
        capsys,
        run_args(
            work / "eval.jsonl",
            "ans",
            server,
            "--answers",
            str(work / "answers.jsonl"),
            "--out",
            str(work / "plain.json"),
            "--no-store",
        ),
    )
    assert code == 0
    doc = json.loads((work / "plain.json").read_text(encoding="utf-8"))
    assert doc["inputs"]["answers"] == {
        "path": str(work / "answers.jsonl"),
        "cases": 4,
        "match": "normalized",
    }
    blocks = _answers_of(doc)
    assert set(blocks) == {"leave-days", "remote", "sake-founded", "missing"}
    leave = blocks["leave-days"]
    assert list(leave) == [
        "hit_at_k",
        "mrr",
        "coverage",
        "declared",
        "found",
        "first_rank",
        "checks",
    ]
    assert leave["declared"] == 2 and leave["found"] == 1 and leave["coverage"] == 0.5
    assert [check["answer"] for check in leave["checks"]] == ["twenty days", "20 days"]
    assert [check["found"] for check in leave["checks"]] == [True, False]
    assert leave["checks"][1]["rank"] is None
    assert leave["mrr"] == 1.0 / leave["first_rank"]
    # A Japanese answer in a Japanese corpus, under the normalized rule.
    assert blocks["sake-founded"]["found"] == 1
    assert blocks["missing"] == {
        "hit_at_k": 0.0,
        "mrr": 0.0,
        "coverage": 0.0,
        "declared": 1,
        "found": 0,
        "first_rank": None,
        "checks": [{"answer": "forty days", "found": False, "rank": None}],
    }
    hit = doc["metrics"]["answers.hit_at_k"]
    assert (hit["n"], hit["sum"]) == (4, 3.0)
    assert "answers over 4 of 4 listed case(s), match normalized: hit@k 0.750 (3/4)" in out
    assert doc["definitions"]["answers.hit_at_k"]["statistic"] == "distribution"


def test_the_tokens_rule_and_the_evidence_window(work: Path, server: str) -> None:
    run = taguru_eval.run(
        work / "eval.jsonl",
        "ans",
        url=server,
        out=work / "tokens.json",
        no_store=True,
        env={},
        answers=work / "answers.jsonl",
        answer_match="tokens",
        assembly=True,
    )
    blocks = _answers_of(json.loads((work / "tokens.json").read_text(encoding="utf-8")))
    assert run.doc["inputs"]["answers"]["match"] == "tokens"
    assert blocks["sake-founded"]["found"] == 1  # Han and kana pairs, citenexus's v2 tokens
    assert blocks["remote"]["found"] == 1
    assert blocks["missing"]["found"] == 0
    checks = run.tables.answer_checks
    assert checks.get_column("match").unique().to_list() == ["tokens"]
    assert checks.height == 5  # one row per declared answer of the four listed cases


def _every_output_text(root: Path) -> Iterator[tuple[Path, str]]:
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            frame = pl.read_parquet(path)
            yield path, frame.write_ndjson()
        elif path.name.endswith(".zst"):
            yield path, artifact_bytes(path).decode("utf-8")
        else:
            yield path, path.read_bytes().decode("utf-8", errors="replace")


def test_no_served_text_reaches_any_output(
    work: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = work / "outputs"
    out_dir.mkdir()
    streams = []
    for name, more in (("base", ()), ("head", ("--assembly",))):
        code, out, err = _cli(
            capsys,
            run_args(
                work / "eval.jsonl",
                "ans",
                server,
                "--answers",
                str(work / "answers.jsonl"),
                "--thresholds",
                str(work / "gate.json"),
                "--out",
                str(out_dir / f"{name}.json"),
                "--store",
                str(out_dir / "runs"),
                "--junit",
                str(out_dir / f"{name}.xml"),
                "--summary",
                str(out_dir / f"{name}.md"),
                "--no-step-summary",
                *more,
            ),
        )
        assert code in (0, 3)
        streams.append(out + err)
    assert main(
        ["compare", str(out_dir / "base.json"), str(out_dir / "head.json"), "--out",
         str(out_dir / "changes.jsonl")]
    ) == 0  # fmt: skip
    run_dir = next((out_dir / "runs").glob("context=ans/run=*"))
    assert main(["report", str(run_dir), "--out", str(out_dir / "report.html")]) == 0
    streams.append("".join(capsys.readouterr()))
    assert (run_dir / "answer_checks.parquet").is_file()
    scanned = list(_every_output_text(out_dir))
    assert len(scanned) > 20
    leaked = [str(path) for path, text in scanned if CANARY in text]
    assert leaked == []
    assert all(CANARY not in text for text in streams)
    # The outputs do hold the user's own answers: the scan looks where they are.
    artifact = artifact_bytes(stored_artifact(run_dir)).decode("utf-8")
    assert "twenty days" in artifact and "創業した蔵元" in artifact
    assert "answers.hit_at_k" in (out_dir / "base.xml").read_text(encoding="utf-8")
    assert "answers.hit_at_k" in (out_dir / "base.md").read_text(encoding="utf-8")
    assert 'id="answers"' in (out_dir / "report.html").read_text(encoding="utf-8")
    header = json.loads((out_dir / "changes.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert header["answers"]["classified"] is True


def test_without_answers_nothing_changes(
    work: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = _cli(
        capsys,
        run_args(
            work / "eval.jsonl",
            "ans",
            server,
            "--out",
            str(work / "none.json"),
            "--store",
            str(work / "none-runs"),
        ),
    )
    assert code == 0
    doc = json.loads((work / "none.json").read_text(encoding="utf-8"))
    assert "answers" not in doc["inputs"]
    assert not any("answers" in case for case in doc["cases"])
    assert not [name for name in [*doc["metrics"], *doc["definitions"]] if "answers" in name]
    assert "answers" not in out.replace(str(work), "")
    run_dir = next((work / "none-runs").glob("context=ans/run=*"))
    assert not (run_dir / "answer_checks.parquet").exists()
    assert "answers_" not in ",".join(pl.read_parquet(run_dir / "cases.parquet").columns)


def test_compare_classifies_on_answers_only_when_both_sides_have_them(work: Path) -> None:
    both = compare(work / "plain.json", work / "plain.json")
    assert "answers.hit_at_k" in both.compared
    assert both.answers is not None and both.answers["classified"] is True
    one = compare(work / "none.json", work / "plain.json")
    assert "answers.hit_at_k" not in one.compared
    assert one.answers == {
        "base": None,
        "head": {"match": "normalized", "cases": 4},
        "classified": False,
    }
    neither = compare(work / "none.json", work / "none.json")
    assert neither.answers is None
    assert "answers" not in neither.header(generated_at="t")


def test_bad_inputs_are_refused_before_any_network_call(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = "http://127.0.0.1:9"
    code, _, err = _cli(
        capsys,
        run_args(work / "eval.jsonl", "ans", closed, "--thresholds", str(work / "gate.json")),
    )
    assert code == 2
    assert "metric name 'answers.hit_at_k' is measured only with --answers" in err
    bad = _write_answers(
        tmp_path / "bad.jsonl",
        [{"case_id": "nope", "answers": ["x"]}, {"case_id": "remote", "answers": [" "]}],
    )
    code, _, err = _cli(capsys, run_args(work / "eval.jsonl", "ans", closed, "--answers", str(bad)))
    assert code == 2
    lines = err.strip().splitlines()
    assert lines == [
        f"taguru: evaluate: {bad}:2: case_id: 'nope' is not a case of the eval set",
        f"taguru: evaluate: {bad}:3: answers[0]: must not be empty",
    ]
    code, _, err = _cli(
        capsys, run_args(work / "eval.jsonl", "ans", closed, "--answer-match", "tokens")
    )
    assert (code, err.strip()) == (
        2,
        "taguru: evaluate: --answer-match requires --answers — try 'taguru evaluate --help'\n"
        "  hint: see python -m taguru_eval --help",
    )


def test_a_failed_first_lane_is_no_sample(work: Path, server: str) -> None:
    # The one fault a real server cannot be made to produce on demand: this
    # case's search alone fails; every other request goes to the server.
    forward = httpx.AsyncHTTPTransport()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/sources/search") and b"paid leave per year" in (
            request.content
        ):
            return httpx.Response(500, json={"error": "injected"})
        response = await forward.handle_async_request(request)
        await response.aread()
        return response

    taguru_eval.run(
        work / "eval.jsonl",
        "ans",
        url=server,
        out=work / "failed.json",
        no_store=True,
        env={},
        answers=work / "answers.jsonl",
        transport=httpx.MockTransport(handler),
    )
    doc = json.loads((work / "failed.json").read_text(encoding="utf-8"))
    failed = _answers_of(doc)["leave-days"]
    assert failed == {
        "hit_at_k": None,
        "mrr": None,
        "coverage": None,
        "declared": 2,
        "found": None,
        "first_rank": None,
        "checks": [],
    }
    hit = doc["metrics"]["answers.hit_at_k"]
    assert hit["n"] == 3  # the failed case is left out of the denominator, as recall does


def test_a_gated_run_whose_every_listed_case_failed_fails_with_the_cause(
    work: Path, server: str, tmp_path: Path
) -> None:
    # Only the case whose first lane fails is listed: no listed case is judged, and
    # a thresholds file that bounds no answers.* metric does not make that a pass.
    forward = httpx.AsyncHTTPTransport()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/sources/search") and b"paid leave per year" in (
            request.content
        ):
            return httpx.Response(500, json={"error": "injected"})
        response = await forward.handle_async_request(request)
        await response.aread()
        return response

    listed = _write_answers(tmp_path / "one.jsonl", [{"case_id": "leave-days", "answers": ["25"]}])
    gate = tmp_path / "gate.json"
    gate.write_text(
        '{"taguru_evaluate_thresholds": 1, "aggregate": {"passage.failure_rate": {"max": 1.0}}}',
        encoding="utf-8",
    )
    run = taguru_eval.run(
        work / "eval.jsonl",
        "ans",
        url=server,
        out=tmp_path / "gated.json",
        no_store=True,
        env={},
        answers=listed,
        thresholds=gate,
        transport=httpx.MockTransport(handler),
    )
    assert run.exit_code == 3
    (violation,) = run.doc["thresholds"]["violations"]
    assert (violation["metric"], violation["actual"]) == ("answers.hit_at_k", None)
    assert violation["reason"].startswith(
        "no samples for this metric (n=0) — none of the 1 listed case(s) was judged: the "
        "first lane of every one failed"
    )
    assert run.doc["thresholds"]["flag_gates"] == [
        {"flag": "--answers", "bounds": "implied", "passed": False}
    ]
    assert any(
        line.startswith("  answers gate: FAIL — at least one listed case") for line in run.output
    )


SEED_CSV = (
    "question,expected\n"
    '"How many days per week can employees work remotely?","up to three days per week"\n'
    '"How many weeks of paid Parental Leave do parents receive?","20 weeks"\n'
)


@pytest.fixture(scope="module")
def demo_server() -> Iterator[str]:
    with running_server(demo_data_dir()) as url:
        yield url


def test_the_seed_csv_runs_as_it_is(
    tmp_path: Path, demo_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The second seed's two-row golden CSV, its rows adapted to the handbook:
    # no labels, no hand editing, import-golden then run.
    (tmp_path / "seed.csv").write_text(SEED_CSV, encoding="utf-8")
    assert main(["import-golden", str(tmp_path / "seed.csv")]) == 0
    capsys.readouterr()
    must_refuse = demo_data_dir() / "handbook" / "must_refuse.jsonl"
    code, out, _ = _cli(
        capsys,
        run_args(
            tmp_path / "seed.eval.jsonl",
            "handbook",
            demo_server,
            "--answers",
            str(tmp_path / "seed.answers.jsonl"),
            "--must-refuse",
            str(must_refuse),
            "--refusal-rule",
            "any",
            "--out",
            str(tmp_path / "seed.json"),
            "--no-store",
        ),
    )
    assert code == 0
    assert "  answers over 2 of 2 listed case(s), match normalized: hit@k 1.000 (2/2)" in out
    assert "  must-refuse over 4 case(s), rule any:" in out
    doc = json.loads((tmp_path / "seed.json").read_text(encoding="utf-8"))
    assert doc["metrics"]["answers.hit_at_k"]["n"] == 2


def test_a_japanese_answer_is_found_in_the_sake_corpus(tmp_path: Path, demo_server: str) -> None:
    sake = demo_data_dir() / "sake"
    answers = _write_answers(
        tmp_path / "sake.answers.jsonl",
        [
            {"case_id": "brand-origin-001", "answers": ["1897年に創業"]},
            {"case_id": "rice-variety-003", "answers": ["山田錦と在来種を交配"]},
        ],
    )
    for match, founded in (("normalized", 1), ("tokens", 0)):
        taguru_eval.run(
            sake / "eval.jsonl",
            "sake",
            url=demo_server,
            out=tmp_path / f"{match}.json",
            no_store=True,
            env={},
            answers=answers,
            answer_match=match,
        )
        blocks = _answers_of(json.loads((tmp_path / f"{match}.json").read_text("utf-8")))
        assert blocks["rice-variety-003"]["found"] == 1
        # citenexus's pairs cannot see 1897年 inside は1897年 (digits join the kana
        # run): the normalized rule, the default, can.
        assert blocks["brand-origin-001"]["found"] == founded


def test_an_ingested_run_keeps_its_answers(work: Path, tmp_path: Path) -> None:
    from taguru_eval.analyst.ingest import ingest

    result = ingest(work / "plain.json", tmp_path / "runs")
    cases = pl.read_parquet(result.path / "cases.parquet")
    assert cases.filter(pl.col("case_id") == "leave-days")["answers_coverage"].to_list() == [0.5]
    checks = pl.read_parquet(result.path / "answer_checks.parquet")
    assert checks.height == 5
    assert compare(result.path, work / "plain.json").answers == {
        "base": {"match": "normalized", "cases": 4},
        "head": {"match": "normalized", "cases": 4},
        "classified": True,
    }
