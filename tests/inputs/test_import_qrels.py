"""``import-qrels``: TREC qrels and topics, and BEIR folders, in as eval sets.

Against the reference server over loopback: a run exported with ``export
--trec`` comes back through ``import-qrels`` as an eval set that scores every
case TREC can express exactly as the original did; a BEIR folder built here is
imported, served (its corpus folder by ``serve``, and by ``load`` into an empty
server or the real taguru) and evaluated end to end. Every malformed input is
one stderr line naming the file, line and field, with a hint, exit 2.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.paths import DATA

import taguru_eval
from taguru_eval.cli.export import main as export_main
from taguru_eval.cli.import_qrels import main
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.qrels import QrelsOptions, import_trec
from taguru_refserver.serve import running_server

PREFIX = "taguru: evaluate: "
METRICS = ("recall_at_k", "mrr", "ndcg")


def run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


# ---------------------------------------------------------------- TREC round trip


def expressible_sake(path: Path) -> Path:
    """The sake eval set as TREC can state it: each case's query and expected
    sources (wildcards, paragraph lists, repeated entries and grades 0-3 kept),
    without the options, cues and other lanes' expectations a topic cannot carry."""
    rows = lines_of(DATA / "sake" / "eval.jsonl")
    cases = [
        {
            "case_id": row["case_id"],
            "query": row["query"],
            "expected_sources": row["expected_sources"],
        }
        for row in rows[1:]
        if row.get("expected_sources")
    ]
    return write_lines(path, [{"taguru_eval": 1, "name": "sake as TREC"}, *cases])


def topics_of(eval_path: Path, path: Path) -> Path:
    cases = lines_of(eval_path)[1:]
    path.write_text("".join(f"{c['case_id']}\t{c['query']}\n" for c in cases), "utf-8")
    return path


def per_case(run: taguru_eval.Run) -> pl.DataFrame:
    return run.cases.select("case_id", *METRICS).sort("case_id")


def passage_form(case: dict[str, Any]) -> bool:
    """The default export states a case exactly: each judged entry names one
    paragraph, no passage is named twice, and no entry is a wildcard."""
    entries = case["expected_sources"]
    named = [(e["source"], p) for e in entries for p in e.get("paragraphs", [])]
    return all(len(e.get("paragraphs", [])) == 1 for e in entries) and len(named) == len(set(named))


@pytest.mark.parametrize("wildcards", ["drop", "taguru"])
def test_an_exported_run_comes_back_with_the_same_scores(tmp_path: Path, wildcards: str) -> None:
    eval_path = expressible_sake(tmp_path / "sake.eval.jsonl")
    with running_server(DATA) as url:
        first = taguru_eval.run(
            eval_path, "sake", url=url, out=tmp_path / "first.json", store=tmp_path / "runs", env={}
        )
        assert first.path is not None
        trec = tmp_path / "trec"
        out, err = io.StringIO(), io.StringIO()
        args = [str(first.path), "--trec", str(trec), "--eval", str(eval_path)]
        assert export_main([*args, "--wildcards", wildcards], stdout=out, stderr=err) == 0
        topics = topics_of(eval_path, tmp_path / "topics.tsv")
        imported = tmp_path / "imported.eval.jsonl"
        code, stdout, stderr = run(
            [str(trec / "qrels.trec"), "--topics", str(topics), "--eval-out", str(imported)]
        )
        assert (code, stderr) == (0, ""), stderr
        second = taguru_eval.run(
            imported, "sake", url=url, out=tmp_path / "second.json", no_store=True, env={}
        )
    original = {c["case_id"]: c for c in lines_of(eval_path)[1:]}
    judged = {
        cid
        for cid, c in original.items()
        if any(e["relevance"] >= 1 for e in c["expected_sources"])
    }
    expressible = (
        judged if wildcards == "taguru" else {c for c in judged if passage_form(original[c])}
    )
    assert (
        len(expressible) >= 5
    )  # the comparison covers real cases, wildcards included in taguru form
    before = per_case(first).filter(pl.col("case_id").is_in(sorted(expressible)))
    after = per_case(second).filter(pl.col("case_id").is_in(sorted(expressible)))
    assert after.height == len(expressible)
    assert before.equals(after), (before, after)
    assert before.select(pl.col("ndcg").n_unique()).item() > 1  # values that could differ
    assert f"{len(list(imported.read_text().splitlines())) - 1} case(s) to eval.jsonl" in stdout
    if wildcards == "taguru":  # entries come back with their paragraph lists and wildcards
        back = {c["case_id"]: c for c in lines_of(imported)[1:]}
        for case_id in expressible:
            want = sorted(
                (e["source"], sorted(set(e.get("paragraphs", []))), e["relevance"])
                for e in original[case_id]["expected_sources"]
                if e["relevance"] >= 1
            )
            got = sorted(
                (e["source"], e.get("paragraphs", []), e["relevance"])
                for e in back[case_id]["expected_sources"]
            )
            assert got == want


def test_percent_encoded_ids_and_passage_docnos_are_read_back(tmp_path: Path) -> None:
    qrels = tmp_path / "q.trec"
    qrels.write_text(
        "case%20one 0 notes/a%25b.md#3 2\n"
        "case%20one 0 notes/c.md#* 1\n"
        "case%20one 0 notes/c.md#*~2 3\n"
        "case%20one 0 notes/d.md#1+4 1\n"
        "case%20one 0 plain-doc 1\n"
        "case%20one 0 plain-doc 3\n"
        "other 0 x 0\n",
        "utf-8",
    )
    topics = tmp_path / "t.tsv"
    topics.write_text("case one\tthe query\nother\tnothing relevant\n", "utf-8")
    imported = import_trec(qrels, topics, QrelsOptions(source_template="docs/{}.md"))
    case = lines_of_text(imported.eval_text)[1]
    assert case["case_id"] == "case one"
    assert case["expected_sources"] == [
        {"source": "docs/notes/a%b.md.md", "paragraphs": [3], "relevance": 2},
        {"source": "docs/notes/c.md.md", "paragraphs": [], "relevance": 1},
        {"source": "docs/notes/c.md.md", "paragraphs": [], "relevance": 3},
        {"source": "docs/notes/d.md.md", "paragraphs": [1, 4], "relevance": 1},
        {"source": "docs/plain-doc.md", "relevance": 3},
    ]
    report = imported.report
    assert report["counts"]["repeated_judgments"] == 1
    assert report["queries_dropped"] == [
        {"qid": "other", "why": "no judgment left to carry (all were dropped, see judgments)"}
    ]
    (graded_zero,) = report["judgments_dropped"]
    assert graded_zero["count"] == 1 and graded_zero["first"] == [
        {"line": 7, "qid": "other", "docno": "x"}
    ]


def lines_of_text(text: str | None) -> list[dict[str, Any]]:
    assert text is not None
    return [json.loads(line) for line in text.splitlines()]


SGML = """\
<top>
<num> Number: 301
<title> Topic: International Organized Crime
<desc> Description:
Identify organizations that
participate in international criminal activity.
<narr> Narrative:
A relevant document must name the organization.
</top>

<top>
<num> Number: 302 </num>
<title> Poliomyelitis and Post-Polio </title>
<desc> Description: Is the disease under control? </desc>
</top>
"""

XML = """<?xml version="1.0" encoding="UTF-8"?>
<topics task="x">
  <topic number="1">
    <query>coronavirus origin</query>
    <question>what is the origin of COVID-19</question>
  </topic>
  <topic number="2">
    <query>coronavirus &amp; weather</query>
    <question>how does the weather affect it</question>
  </topic>
</topics>
"""


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        (
            SGML,
            None,
            {"301": "International Organized Crime", "302": "Poliomyelitis and Post-Polio"},
        ),
        (
            SGML,
            "desc",
            {
                "301": "Identify organizations that participate in international criminal "
                "activity.",
                "302": "Is the disease under control?",
            },
        ),
        (XML, None, {"1": "coronavirus origin", "2": "coronavirus & weather"}),
        (
            XML,
            "question",
            {"1": "what is the origin of COVID-19", "2": "how does the weather affect it"},
        ),
    ],
)
def test_trec_topic_files(
    tmp_path: Path, text: str, field: str | None, expected: dict[str, str]
) -> None:
    topics = tmp_path / "topics.txt"
    topics.write_text(text, "utf-8")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{qid} 0 doc-{qid} 1\n" for qid in expected), "utf-8")
    args = [str(qrels), "--topics", str(topics)] + (["--topic-field", field] if field else [])
    code, _out, err = run(args)
    assert (code, err) == (0, "")
    cases = lines_of(tmp_path / "qrels.eval.jsonl")
    assert cases[0] == {"taguru_eval": 1, "name": "qrels"}
    assert {c["case_id"]: c["query"] for c in cases[1:]} == expected
    report = json.loads((tmp_path / "qrels.import-report.json").read_text("utf-8"))
    assert report["written"] == {"eval": str(tmp_path / "qrels.eval.jsonl"), "corpus": None}


# ---------------------------------------------------------------- BEIR end to end

CORPUS = [
    {
        "_id": "koji",
        "title": "Koji mold",
        "text": "Koji mold turns rice starch into sugar.\n\nIt grows warm.",
        "metadata": {},
    },
    {"_id": "yeast", "title": "", "text": "Yeast ferments the sugar into alcohol over weeks."},
    {"_id": "water/hard", "title": "Hard water", "text": "Mineral water speeds up fermentation."},
    {
        "_id": "polish",
        "title": "Rice polishing",
        "text": "Polishing removes the outer layers of the grain.",
    },
    {"_id": "blank", "title": " ", "text": ""},
]
QUERIES = [
    {"_id": "q-koji", "text": "koji mold"},
    {"_id": "q-yeast", "text": "yeast ferments alcohol"},
    {"_id": "q-water", "text": "mineral water fermentation"},
    {"_id": "q-polish", "text": "polishing the grain"},
    {"_id": "q-unjudged", "text": "no judgments here"},
]
QRELS = (
    "query-id\tcorpus-id\tscore\n"
    "q-koji\tkoji\t2\n"
    "q-koji\tyeast\t0\n"
    "q-yeast\tyeast\t1\n"
    "q-water\twater/hard\t1\n"
    "q-water\tpolish\t1\n"
    "q-polish\tblank\t1\n"
    "q-polish\tmissing-doc\t2\n"
    "q-gone\tkoji\t1\n"
)


def beir_folder(root: Path) -> Path:
    folder = root / "minibeir"
    write_lines(folder / "corpus.jsonl", CORPUS)
    write_lines(folder / "queries.jsonl", QUERIES)
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(QRELS, "utf-8")
    return folder


def test_a_beir_folder_is_imported_served_and_evaluated(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path)
    code, out, err = run([str(folder)])
    assert (code, err) == (0, "")
    eval_path = tmp_path / "minibeir.eval.jsonl"
    corpus = tmp_path / "minibeir.contexts" / "minibeir"
    assert lines_of(eval_path) == [
        {"taguru_eval": 1, "name": "minibeir"},
        {
            "case_id": "q-koji",
            "query": "koji mold",
            "expected_sources": [{"source": "docs/koji.md", "relevance": 2}],
        },
        {
            "case_id": "q-yeast",
            "query": "yeast ferments alcohol",
            "expected_sources": [{"source": "docs/yeast.md", "relevance": 1}],
        },
        {
            "case_id": "q-water",
            "query": "mineral water fermentation",
            "expected_sources": [
                {"source": "docs/water%2Fhard.md", "relevance": 1},
                {"source": "docs/polish.md", "relevance": 1},
            ],
        },
    ]
    # One source per written document, the title its first paragraph.
    assert sorted(p.name for p in (corpus / "docs").iterdir()) == [
        "koji.md",
        "polish.md",
        "water%2Fhard.md",
        "yeast.md",
    ]
    assert (corpus / "docs" / "koji.md").read_text("utf-8") == (
        "Koji mold\n\nKoji mold turns rice starch into sugar.\n\nIt grows warm.\n"
    )
    assert json.loads((corpus / "context.json").read_text("utf-8")) == {
        "description": "imported from the BEIR folder minibeir"
    }
    assert "  1 query(ies) not imported: no judgment in the qrels" in out
    assert "  1 query(ies) not imported: no judgment left to carry" in out
    assert "  1 query(ies) not imported: no query text" in out
    assert "  1 judgment(s) not carried: graded 0 or below" in out
    assert f"python -m taguru_eval serve {corpus.parent}" in out
    report = json.loads((tmp_path / "minibeir.import-report.json").read_text("utf-8"))
    assert report["documents_not_written"] == [
        {"id": "blank", "why": "the document's title and text are both empty (a source needs text)"}
    ]
    assert {d["why"][:30]: d["first"][0]["docno"] for d in report["judgments_dropped"]} == {
        "graded 0 or below: not relevan": "yeast",
        "the document's title and text ": "blank",
        "the document is not in corpus.": "missing-doc",
    }
    with running_server(corpus.parent) as url:
        served = taguru_eval.run(
            eval_path, "minibeir", url=url, out=tmp_path / "e.json", no_store=True, env={}
        )
    with running_server(None) as url:  # load puts the same folder into an empty server
        taguru_eval.load(corpus, url=url, env={})
        loaded = taguru_eval.run(
            eval_path, "minibeir", url=url, out=tmp_path / "l.json", no_store=True, env={}
        )
    assert served.exit_code == 0
    scores = per_case(served)
    assert scores.get_column("case_id").to_list() == ["q-koji", "q-water", "q-yeast"]
    assert scores.filter(pl.col("case_id") == "q-koji").row(0)[1:] == (1.0, 1.0, 1.0)
    # The polishing document shares no term with the query: BM25 never serves it.
    assert scores.filter(pl.col("case_id") == "q-water").row(0)[1:3] == (0.5, 1.0)
    assert per_case(loaded).equals(scores)
    hits = served.tables.hits.filter(pl.col("case_id") == "q-koji").sort("rank")
    assert hits.row(0, named=True)["source"] == "docs/koji.md"


def test_a_beir_folder_on_the_real_taguru(tmp_path: Path, real_taguru: Any) -> None:
    from support.taguru import populate

    folder = beir_folder(tmp_path)
    assert run([str(folder)])[0] == 0
    corpus = tmp_path / "minibeir.contexts" / "minibeir"
    eval_path = tmp_path / "minibeir.eval.jsonl"
    server = real_taguru()
    populate(server.url, corpus)
    theirs = taguru_eval.run(
        eval_path, "minibeir", url=server.url, out=tmp_path / "t.json", no_store=True, env={}
    )
    with running_server(corpus.parent) as url:
        ours = taguru_eval.run(
            eval_path, "minibeir", url=url, out=tmp_path / "o.json", no_store=True, env={}
        )
    assert per_case(theirs).equals(per_case(ours))


# ---------------------------------------------------------------- errors


def beir_with(root: Path, name: str, text: str) -> Path:
    folder = beir_folder(root)
    (folder / name).write_text(text, "utf-8")
    return folder


@pytest.mark.parametrize(
    ("qrels", "line", "field", "words"),
    [
        ("1 0 d 1\n2 0 d\n", 2, "qrels", "3 field(s), expected 4"),
        ("1 0 d 1\n\n2 0 d high\n", 3, "grade", "'high' is not an integer grade"),
        ("1 0 d 4\n", 1, "grade", "grade 4 is above 3"),
    ],
)
def test_a_malformed_qrels_line_is_named(
    tmp_path: Path, qrels: str, line: int, field: str, words: str
) -> None:
    (tmp_path / "q.trec").write_text(qrels, "utf-8")
    (tmp_path / "t.tsv").write_text("1\tone\n2\ttwo\n", "utf-8")
    code, out, err = run([str(tmp_path / "q.trec"), "--topics", str(tmp_path / "t.tsv")])
    assert (code, out) == (2, "")
    first, hint = err.splitlines()
    assert first.startswith(f"{PREFIX}{tmp_path / 'q.trec'}: line {line}: {field}: {words}")
    assert hint.startswith("  hint: ")
    assert not list(tmp_path.glob("q.eval.jsonl"))


@pytest.mark.parametrize(
    ("name", "text", "shown", "words"),
    [
        (
            "qrels/test.tsv",
            "q-koji\tkoji\t1\n",
            "qrels/test.tsv: line 1: header:",
            "the first line is a judgment",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq-koji koji 1\n",
            "qrels/test.tsv: line 2: qrels:",
            "1 tab-separated field(s)",
        ),
        (
            "queries.jsonl",
            '{"_id": "a", "text": "x"}\n{"_id": 7, "text": "y"}\n',
            "queries.jsonl: line 2: _id:",
            "a int, not a string",
        ),
        (
            "queries.jsonl",
            '{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n',
            "queries.jsonl: line 2: _id:",
            "query 'a' repeats line 1",
        ),
        (
            "corpus.jsonl",
            '{"_id": "a", "text": "x"}\n[1]\n',
            "corpus.jsonl: line 2: line:",
            "not a JSON object",
        ),
        (
            "corpus.jsonl",
            '{"_id": "a", "text": "x"}\n{"_id": "b", "text": ',
            "corpus.jsonl: line 2: not JSON",
            "",
        ),
    ],
)
def test_a_malformed_beir_file_is_named(
    tmp_path: Path, name: str, text: str, shown: str, words: str
) -> None:
    folder = beir_with(tmp_path, name, text)
    code, out, err = run([str(folder)])
    assert (code, out) == (2, "")
    assert err.startswith(f"{PREFIX}{folder}/{shown}") and words in err.splitlines()[0]
    assert not (tmp_path / "minibeir.contexts").exists()
    assert not (tmp_path / "minibeir.eval.jsonl").exists()


@pytest.mark.parametrize(
    ("topics", "words"),
    [
        ("1 one\n", "line 1: query: no tab"),
        ("1\tone\n1\tagain\n", "line 2: topic '1' repeats"),
        ("<top>\n<title> no number\n</top>\n", "line 1: num: a <top> without a <num>"),
        (
            "<top>\n<num> 1\n<desc> only a description\n</top>\n",
            "line 1: topic '1' has no title or query field",
        ),
        (
            "<topics><topic number='1'><query>x</query></topics>",
            "line 1: topics: not well-formed XML",
        ),
    ],
)
def test_a_malformed_topics_file_is_named(tmp_path: Path, topics: str, words: str) -> None:
    (tmp_path / "q.trec").write_text("1 0 d 1\n", "utf-8")
    (tmp_path / "t.txt").write_text(topics, "utf-8")
    code, _out, err = run([str(tmp_path / "q.trec"), "--topics", str(tmp_path / "t.txt")])
    assert code == 2
    assert err.startswith(f"{PREFIX}{tmp_path / 't.txt'}: {words}"), err
    assert err.splitlines()[1].startswith("  hint: ")


def test_usage_errors(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path)
    (tmp_path / "q.trec").write_text("1 0 d 1\n", "utf-8")
    cases = [
        ([str(tmp_path / "q.trec")], "is a qrels file: --topics FILE is required"),
        ([str(folder), "--topics", "t.tsv"], "--topics does not apply to a BEIR folder"),
        (
            [str(tmp_path / "q.trec"), "--topics", "t", "--split", "dev"],
            "--split does not apply to a TREC qrels file",
        ),
        ([], "takes one QRELS file or BEIR folder (got 0)"),
        (
            [str(tmp_path / "q.trec"), "--topics", "t", "--eval-out", str(tmp_path / "q.trec")],
            "is the same file as QRELS",
        ),
        ([str(folder), "--bier"], "unknown flag '--bier' for import-qrels"),
    ]
    for args, words in cases:
        code, out, err = run(args)
        assert (code, out) == (2, "")
        assert words in err and "try 'python -m taguru_eval import-qrels --help'" in err, err
    taken = tmp_path / "taken"
    (taken / "x").mkdir(parents=True)
    code, _out, err = run([str(folder), "--corpus-out", str(taken)])
    assert code == 2 and "already exists and is not an empty folder" in err
    assert "hint: remove it, or name a new folder with --corpus-out" in err
    code, _out, err = run([str(folder), "--split", "dev"])
    assert code == 2 and "no qrels/dev.tsv (qrels/ holds: test.tsv)" in err


def test_nothing_to_import_is_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "q.trec").write_text("1 0 d 0\n2 0 d 1\n", "utf-8")
    (tmp_path / "t.tsv").write_text("1\tone\n", "utf-8")
    code, out, err = run([str(tmp_path / "q.trec"), "--topics", str(tmp_path / "t.tsv")])
    assert (code, out) == (2, "")
    assert "no query became a case (1 no judgment left to carry" in err
    assert "1 no query text" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.trec", "t.tsv"]


def test_a_failed_write_leaves_no_corpus_folder(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path)
    code, _out, err = run([str(folder), "--eval-out", str(tmp_path / "missing" / "e.jsonl")])
    assert code == 1
    assert err.startswith(f"{PREFIX}writing {tmp_path / 'missing' / 'e.jsonl'}:")
    assert not (tmp_path / "minibeir.contexts" / "minibeir").exists()
    assert not (tmp_path / "minibeir.import-report.json").exists()


def test_a_document_that_reads_as_front_matter_keeps_its_text(tmp_path: Path) -> None:
    folder = beir_folder(tmp_path)
    write_lines(
        folder / "corpus.jsonl", [{"_id": ".hidden", "title": "---", "text": "after\n---\nend"}]
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq-koji\t.hidden\t1\n")
    assert run([str(folder)])[0] == 0
    (case,) = lines_of(tmp_path / "minibeir.eval.jsonl")[1:]
    assert case["expected_sources"] == [{"source": "docs/%2Ehidden.md", "relevance": 1}]
    from taguru_eval.corpus.folder import read_context_folder

    read = read_context_folder(tmp_path / "minibeir.contexts" / "minibeir")
    (source,) = read.sources
    assert (source.source, source.text) == ("docs/%2Ehidden.md", "---\n\nafter\n---\nend\n")
    assert len(load_eval(tmp_path / "minibeir.eval.jsonl").cases) == 1


# ---------------------------------------------------------------- irds: ids


def local_irds(root: Path, *, docs: bool = True) -> str:
    """An ir_datasets dataset registered from files written here: nothing is downloaded."""
    import ir_datasets

    files = root / "irds"
    files.mkdir()
    (files / "docs.tsv").write_text(
        "".join(
            f"{d['_id']}\t{d['title']} {d['text']}".replace("\n", " ") + "\n" for d in CORPUS[:4]
        ),
        "utf-8",
    )
    (files / "queries.tsv").write_text(
        "".join(f"{q['_id']}\t{q['text']}\n" for q in QUERIES), "utf-8"
    )
    (files / "qrels.txt").write_text(
        "q-koji 0 koji 2\nq-koji 0 yeast 0\nq-water 0 water/hard 1\nq-water 0 gone 1\n", "utf-8"
    )
    name = f"taguru-eval-test/{root.name}/{'docs' if docs else 'nodocs'}"
    ir_datasets.registry.register(
        name,
        ir_datasets.create_dataset(
            docs_tsv=str(files / "docs.tsv") if docs else None,
            queries_tsv=str(files / "queries.tsv"),
            qrels_trec=str(files / "qrels.txt"),
        ),
    )
    return name


def test_an_irds_dataset_is_imported_served_and_evaluated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    monkeypatch.chdir(tmp_path)
    name = local_irds(tmp_path)
    code, out, err = run([f"irds:{name}"])
    assert (code, err) == (0, ""), err
    flat = name.replace("/", "-")
    eval_path = tmp_path / f"{flat}.eval.jsonl"
    corpus = tmp_path / f"{flat}.contexts" / flat
    assert lines_of(eval_path)[1:] == [
        {
            "case_id": "q-koji",
            "query": "koji mold",
            "expected_sources": [{"source": "docs/koji.md", "relevance": 2}],
        },
        {
            "case_id": "q-water",
            "query": "mineral water fermentation",
            "expected_sources": [{"source": "docs/water%2Fhard.md", "relevance": 1}],
        },
    ]
    assert "  1 judgment(s) not carried: the document is not in the dataset's documents" in out
    assert "  3 query(ies) not imported: no judgment in the qrels" in out
    assert json.loads((corpus / "context.json").read_text("utf-8")) == {
        "description": f"imported from the ir_datasets dataset {name}"
    }
    report = json.loads((tmp_path / f"{flat}.import-report.json").read_text("utf-8"))
    assert (report["format"], report["dataset"], report["documents"]) == (
        "ir_datasets",
        name,
        {"read": 4, "written": 4},
    )
    with running_server(corpus.parent) as url:
        served = taguru_eval.run(
            eval_path, flat, url=url, out=tmp_path / "e.json", no_store=True, env={}
        )
    assert per_case(served).row(0)[1:] == (1.0, 1.0, 1.0)


def test_an_irds_dataset_without_documents_uses_the_source_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    name = local_irds(tmp_path, docs=False)
    out_path = tmp_path / "x.eval.jsonl"
    args = [f"irds:{name}", "--source-template", "corpus/{}.md", "--eval-out", str(out_path)]
    code, out, err = run([*args, "--report-out", str(tmp_path / "r.json"), "--topic-field", "text"])
    assert (code, err) == (0, "")
    cases = lines_of(out_path)[1:]
    assert [e["source"] for c in cases for e in c["expected_sources"]] == [
        "corpus/koji.md",
        "corpus/water/hard.md",
        "corpus/gone.md",
    ]
    assert "wrote" in out and ".contexts" not in out


def test_irds_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    code, _out, err = run(["irds:taguru-eval-test/no-such-dataset"])
    assert code == 2
    assert err.startswith(
        f"{PREFIX}irds:taguru-eval-test/no-such-dataset: ir_datasets knows no dataset"
    )
    name = local_irds(tmp_path)
    code, _out, err = run([f"irds:{name}", "--topic-field", "title"])
    assert code == 2 and "query 1: no field 'title' (it has: query_id, text)" in err
    code, _out, err = run([f"irds:{name}", "--split", "dev"])
    assert code == 2 and "--split does not apply to an irds: id" in err
    code, _out, err = run(["irds:"])
    assert code == 2 and "irds: needs a dataset id" in err


def test_a_missing_ir_extra_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from taguru_eval._base import extras
    from taguru_eval.cli.main import main as cli_main

    real_import = extras.import_module

    def without_ir_datasets(name: str) -> Any:
        if name == "ir_datasets":
            raise ModuleNotFoundError("No module named 'ir_datasets'", name="ir_datasets")
        return real_import(name)

    monkeypatch.setattr(extras, "import_module", without_ir_datasets)
    assert cli_main(["import-qrels", "irds:beir/scifact/test"]) == 2
    assert capsys.readouterr().err == (
        "taguru: import-qrels: needs the 'ir' extra, which is not installed (no module "
        "'ir_datasets'): pip install 'taguru_eval[ir]'\n"
    )


def test_a_byte_order_mark_is_not_part_of_the_first_id(tmp_path: Path) -> None:
    (tmp_path / "q.trec").write_text("\ufeff1 0 d 1\n", "utf-8")
    (tmp_path / "t.tsv").write_text("\ufeff1\tone\n", "utf-8")
    imported = import_trec(tmp_path / "q.trec", tmp_path / "t.tsv")
    assert [case["case_id"] for case in lines_of_text(imported.eval_text)[1:]] == ["1"]


class _Record:
    """One query or document as ir_datasets yields it (a namedtuple's fields)."""

    _fields = ("query_id", "text")

    def __init__(self, **fields: str) -> None:
        self.__dict__.update(fields)

    def default_text(self) -> str:
        return str(self.__dict__["text"])


class _SurrogateDataset:
    """A dataset whose text was decoded with surrogateescape: a local file cannot
    hold a lone surrogate, so ir_datasets' own loader cannot stand in here."""

    def __init__(self, in_query: bool) -> None:
        self.in_query = in_query

    def has_queries(self) -> bool:
        return True

    def has_qrels(self) -> bool:
        return True

    def has_docs(self) -> bool:
        return True

    def queries_iter(self) -> Iterator[_Record]:
        yield _Record(query_id="q1", text="koji\udcff" if self.in_query else "koji")

    def qrels_iter(self) -> Iterator[Any]:
        yield type("Qrel", (), {"query_id": "q1", "doc_id": "d1", "relevance": 1})()

    def docs_iter(self) -> Iterator[_Record]:
        yield _Record(doc_id="d1", title="Koji", text="mold \udcff" if not self.in_query else "m")


@pytest.mark.parametrize(
    ("in_query", "where"),
    [(True, "query 1: text"), (False, "document 'd1': text")],
)
def test_a_lone_surrogate_in_an_irds_text_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_query: bool, where: str
) -> None:
    import ir_datasets

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ir_datasets, "load", lambda dataset_id: _SurrogateDataset(in_query))
    code, _out, err = run(["irds:fake/set"])
    assert code == 2
    assert err.splitlines()[0] == (
        f"{PREFIX}irds:fake/set: {where} holds a lone surrogate at character "
        f"{4 if in_query else 5}, which UTF-8 cannot write"
    )
    assert not list(tmp_path.iterdir())  # nothing written
