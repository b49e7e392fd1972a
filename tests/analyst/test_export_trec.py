"""``export RUN --trec DIR`` and ``to_ir_measures``: a run for IR tools, round-tripped.

The sake demo run (reference server over loopback, stored in the run store)
is exported; ir_measures reads both files back and computes R@10, RR and
nDCG@10. On every case where the definitions coincide — each judged
expectation names exactly one passage, no two name the same one, at most ten
judged items and ten hits — its values equal ours.

With ``--wildcards taguru`` ir_measures and ranx both read the files back and
agree with taguru's recall@k, MRR and nDCG on every case (uncut, and cut at
each case's limit), but the cases where one hit is the first to satisfy two
expectations — the one shape TREC cannot hold, named by the export — where
nDCG differs; the same holds over 1,500 random cases of every shape.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import ir_measures
import polars as pl
import pytest
import ranx
from ir_measures import RR, R, nDCG
from support.layouts import artifact_text
from support.paths import DATA
from support.trec_cases import (
    differing,
    ir_measures_values,
    limits_of,
    random_run,
    ranx_values,
    taguru_values,
)

import taguru_eval
from taguru_eval.analyst import taguru_frames
from taguru_eval.analyst.export import (
    qrels_frame,
    qrels_mapping,
    qrels_text,
    run_mapping,
    run_text,
    trec_qrels,
    trec_run,
)
from taguru_eval.cli.export import main
from taguru_eval.inputs.dataset import load_eval, load_eval_text
from taguru_eval.tables import RunTables
from taguru_refserver.serve import running_server

EVAL = DATA / "sake" / "eval.jsonl"
PREFIX = "taguru: evaluate: "


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("export")
    with running_server(DATA) as url:
        run = taguru_eval.run(
            EVAL, "sake", url=url, out=work / "e.json", store=work / "runs", env={}
        )
    assert run.path is not None
    out, err = io.StringIO(), io.StringIO()
    code = main(
        [str(run.path), "--trec", str(work / "trec"), "--eval", str(EVAL)], stdout=out, stderr=err
    )
    return {"run": run, "work": work, "code": code, "out": out.getvalue(), "err": err.getvalue()}


def coinciding_cases(run: taguru_eval.Run) -> list[str]:
    """Cases whose recall block means the same as trec_eval's measures."""
    expected = load_eval(EVAL).expected.filter(pl.col("kind") == "source")
    judged = expected.filter(pl.col("relevance") >= 1)
    per_entry = judged.group_by("case_id", "entry_index").agg(
        pl.col("paragraph").count().alias("paragraphs"), pl.col("paragraph").null_count()
    )
    bad_entries = per_entry.filter((pl.col("paragraphs") != 1) | (pl.col("paragraph") > 0))
    duplicated = judged.filter(pl.struct("source", "paragraph").is_duplicated().over("case_id"))
    hits = run.tables.hits.group_by("case_id").agg(
        pl.len().alias("hits"), pl.struct("source", "paragraph").n_unique().alias("distinct")
    )
    too_many = hits.filter((pl.col("hits") > 10) | (pl.col("hits") != pl.col("distinct")))
    items = judged.group_by("case_id").len().filter(pl.col("len") > 10)
    excluded = set(
        pl.concat([frame.select("case_id") for frame in (bad_entries, duplicated, too_many, items)])
        .get_column("case_id")
        .to_list()
    )
    scored = run.cases.filter(pl.col("recall_at_k").is_not_null()).get_column("case_id")
    return [case_id for case_id in scored.to_list() if case_id not in excluded]


def test_export_writes_both_files_and_notes_wildcards(stored: dict[str, Any]) -> None:
    assert stored["code"] == 0, stored["err"]
    trec = stored["work"] / "trec"
    assert sorted(path.name for path in trec.iterdir()) == ["qrels.trec", "run.trec"]
    wildcards = load_eval(EVAL).expected.filter(
        (pl.col("kind") == "source") & pl.col("paragraph").is_null()
    )
    assert stored["err"] == (
        f"{PREFIX}export: {wildcards.height} expected source(s) name no paragraph "
        "('any paragraph of this source'): no qrels line for them, so recall, MRR "
        "and nDCG read from these files differ from taguru's on the cases that expect "
        "one (--wildcards taguru writes them)\n"
    )
    run_lines = (trec / "run.trec").read_text("utf-8").splitlines()
    assert len(run_lines) == stored["run"].tables.hits.height
    assert all(len(line.split()) == 6 and line.split()[1] == "Q0" for line in run_lines)
    assert {line.split()[5] for line in run_lines} == {stored["run"].run_id}


def test_ir_measures_reproduces_our_recall_mrr_and_ndcg(stored: dict[str, Any]) -> None:
    trec = stored["work"] / "trec"
    qrels = list(ir_measures.read_trec_qrels(str(trec / "qrels.trec")))
    runs = list(ir_measures.read_trec_run(str(trec / "run.trec")))
    theirs: dict[tuple[str, str], float] = {}
    for metric in ir_measures.iter_calc([R @ 10, RR, nDCG @ 10], qrels, runs):
        theirs[(metric.query_id, str(metric.measure))] = metric.value
    run = stored["run"]
    cases = coinciding_cases(run)
    assert len(cases) >= 5, cases
    ours = run.cases.filter(pl.col("case_id").is_in(cases))
    for row in ours.iter_rows(named=True):
        case_id = row["case_id"]
        assert theirs[(case_id, "R@10")] == pytest.approx(row["recall_at_k"], abs=1e-12)
        assert theirs[(case_id, "RR")] == pytest.approx(row["mrr"], abs=1e-12)
        assert theirs[(case_id, "nDCG@10")] == pytest.approx(row["ndcg"], abs=1e-9)


def test_to_ir_measures_gives_the_same_data_as_the_files(stored: dict[str, Any]) -> None:
    qrels, run = taguru_eval.to_ir_measures(stored["run"], EVAL)
    trec = stored["work"] / "trec"
    from_files = ir_measures.calc_aggregate(
        [R @ 10, RR, nDCG @ 10],
        list(ir_measures.read_trec_qrels(str(trec / "qrels.trec"))),
        list(ir_measures.read_trec_run(str(trec / "run.trec"))),
    )
    from_dicts = ir_measures.calc_aggregate([R @ 10, RR, nDCG @ 10], qrels, run)
    assert from_dicts == from_files
    assert not any(math.isnan(value) for value in from_dicts.values())


def test_recorded_eval_path_is_the_default_and_a_missing_one_is_an_input_error(
    stored: dict[str, Any], tmp_path: Path
) -> None:
    run_dir = str(stored["run"].path)
    doc = json.loads(artifact_text(Path(run_dir)))
    assert doc["inputs"]["eval"]["path"] == str(EVAL)
    out, err = io.StringIO(), io.StringIO()
    assert main([run_dir, "--trec", str(tmp_path / "t")], stdout=out, stderr=err) == 0
    assert f"from {EVAL})" in out.getvalue()
    assert (tmp_path / "t" / "qrels.trec").read_bytes() == (
        stored["work"] / "trec" / "qrels.trec"
    ).read_bytes()
    doc["inputs"]["eval"]["path"] = str(tmp_path / "gone.jsonl")
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc), "utf-8")
    err = io.StringIO()
    assert main([str(moved), "--trec", str(tmp_path / "u")], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == (
        f"{PREFIX}no eval set for the qrels: pass --eval FILE (the run recorded "
        f"inputs.eval.path '{tmp_path / 'gone.jsonl'}', which is not a readable file here)\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "export takes exactly one RUN (got 0)"),
        (["r"], "--trec DIR is required"),
        (["r", "--trec"], "--trec needs a directory"),
        (["r", "--trec", "a", "--trec", "b"], "--trec given twice"),
        (["r", "--trec", "a", "--bogus"], "unknown flag '--bogus' for export"),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    err = io.StringIO()
    assert main(argv, stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == (f"{PREFIX}{message} — try 'python -m taguru_eval export --help'\n")


def test_identifiers_stay_one_field_and_grades_keep_the_highest() -> None:
    eval_set = load_eval_text(
        '{"taguru_eval": 1}\n'
        '{"case_id": "a b%c", "query": "q", "expected_sources": ['
        '{"source": "dir/my doc.md", "paragraphs": [3, 4], "relevance": 1},'
        '{"source": "dir/my doc.md", "paragraphs": [4], "relevance": 3},'
        '{"source": "other.md", "paragraphs": [0], "relevance": 0},'
        '{"source": "any.md"}]}\n',
        "eval.jsonl",
    )
    assert qrels_frame(eval_set.expected).rows() == [
        ("a b%c", "dir/my doc.md#3", 1),
        ("a b%c", "dir/my doc.md#4", 3),
        ("a b%c", "other.md#0", 0),
    ]
    assert trec_qrels(eval_set.expected) == (
        "a%20b%25c 0 dir/my%20doc.md#3 1\n"
        "a%20b%25c 0 dir/my%20doc.md#4 3\n"
        "a%20b%25c 0 other.md#0 0\n"
    )
    hits = pl.DataFrame(
        {
            "case_index": [0, 0, 0],
            "case_id": ["a b%c"] * 3,
            "rank": [0, 1, 2],
            "source": ["dir/my doc.md", "other.md", "dir/my doc.md"],
            "paragraph": [4, 0, 4],
        }
    )
    # The repeated passage keeps its best rank; scores follow the served order.
    assert trec_run(hits, "tag x") == (
        "a%20b%25c Q0 dir/my%20doc.md#4 1 3 tag%20x\na%20b%25c Q0 other.md#0 2 2 tag%20x\n"
    )


@pytest.mark.parametrize(
    ("raw", "written"),
    [
        ("nul\x00id", "nul%00id"),
        ("esc\x1b[31mred", "esc%1B[31mred"),
        ("del\x7f", "del%7F"),
        ("c1\x9bx", "c1%C2%9Bx"),
        ("bell\x07tab\tcr\r", "bell%07tab%09cr%0D"),
        ("pct%1B", "pct%251B"),
    ],
)
def test_control_characters_in_ids_are_percent_encoded(raw: str, written: str) -> None:
    hits = pl.DataFrame(
        {"case_index": [0], "case_id": [raw], "rank": [0], "source": [raw], "paragraph": [1]}
    )
    assert trec_run(hits, "t") == f"{written} Q0 {written}#1 1 1 t\n"
    eval_set = load_eval_text(
        '{"taguru_eval": 1}\n'
        + json.dumps(
            {
                "case_id": raw,
                "query": "q",
                "expected_sources": [{"source": raw, "paragraphs": [1], "relevance": 1}],
            }
        )
        + "\n",
        "eval.jsonl",
    )
    assert trec_qrels(eval_set.expected) == f"{written} 0 {written}#1 1\n"


def test_a_stored_run_that_lost_its_hits_is_an_error_not_an_empty_run_file(
    stored: dict[str, Any], tmp_path: Path
) -> None:
    run_dir = tmp_path / Path(stored["run"].path).name
    shutil.copytree(stored["run"].path, run_dir)
    (run_dir / "hits.parquet").unlink()
    out, err = io.StringIO(), io.StringIO()
    argv = [str(run_dir), "--trec", str(tmp_path / "t"), "--eval", str(EVAL)]
    assert main(argv, stdout=out, stderr=err) == 2
    assert err.getvalue() == (
        f"{PREFIX}{run_dir / 'hits.parquet'}: malformed run-store table: "
        "the file is missing (every stored run holds this table)\n"
    )
    assert not (tmp_path / "t").exists()


def test_trec_naming_a_file_is_a_usage_error_and_the_file_stays(
    stored: dict[str, Any], tmp_path: Path
) -> None:
    target = tmp_path / "results.trec"
    target.write_text("mine\n", encoding="utf-8")
    err = io.StringIO()
    argv = [str(stored["run"].path), "--trec", str(target), "--eval", str(EVAL)]
    assert main(argv, stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == (
        f"{PREFIX}--trec {target} is a file; it names the directory to write into"
        " — try 'python -m taguru_eval export --help'\n"
    )
    assert target.read_text(encoding="utf-8") == "mine\n"


# ------------------------------------------------------------------ --wildcards taguru

SHARED = ["toji-lineage-002", "rice-variety-003"]
"""The demo's cases where one hit (people.md#2, rice.md#3) is the first to satisfy
both an entry naming its paragraph and the source's "any paragraph" entry."""


def export_to(run: taguru_eval.Run, directory: Path, *flags: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [str(run.path), "--trec", str(directory), "--eval", str(EVAL), *flags]
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def read_back(directory: Path, limits: dict[str, int] | None = None) -> dict[str, Any]:
    """Both tools' values from the two files, as each reads TREC files."""
    qrels, run = str(directory / "qrels.trec"), str(directory / "run.trec")
    return {
        "ir_measures": ir_measures_values(
            ir_measures.read_trec_qrels(qrels), ir_measures.read_trec_run(run), limits
        ),
        "ranx": None
        if limits is not None
        else ranx_values(
            ranx.Qrels.from_file(qrels, kind="trec"), ranx.Run.from_file(run, kind="trec")
        ),
    }


def test_wildcards_taguru_read_back_by_ir_measures_and_ranx_is_taguru(
    stored: dict[str, Any],
) -> None:
    run = stored["run"]
    directory = stored["work"] / "trec-taguru"
    code, out, err = export_to(run, directory, "--wildcards", "taguru")
    assert code == 0, err
    assert err == (
        f"{PREFIX}export: 2 case(s) have a hit that is the first to satisfy two or more "
        f"expected sources (e.g. '{SHARED[0]}'): TREC holds one document per rank, so the "
        "further ones are written on the next lines; there nDCG is not taguru's "
        "(recall and MRR are)\n"
    )
    hits = run.tables.hits.height
    assert out == (
        f"  wrote {directory / 'run.trec'} ({hits} hit(s) and 2 line(s) for the further "
        f"expected sources)\n  wrote {directory / 'qrels.trec'} (27 judged expectation(s) "
        f"from {EVAL})\n"
    )
    scored = run.cases.filter(pl.col("recall_at_k").is_not_null())
    assert scored.height == 16
    for tool, values in read_back(directory).items():
        assert differing(run.cases, values) == {"recall": [], "mrr": [], "ndcg": SHARED}, tool
    # k = each case's limit: every case holds at most its limit of hits and no more
    # judged entries than that, so R@k, RR@k and nDCG@k are the uncut values.
    limits = limits_of(run.tables, scored.get_column("case_id"))
    assert sorted(set(limits.values())) == [3, 5, 8, 10]
    values = read_back(directory, limits)["ir_measures"]
    assert differing(run.cases, values) == {"recall": [], "mrr": [], "ndcg": SHARED}


def test_the_default_export_differs_on_ndcg_where_a_source_has_wildcards_or_lists(
    stored: dict[str, Any],
) -> None:
    # The before: passages judged, "any paragraph" dropped, a list judged per passage.
    for tool, values in read_back(stored["work"] / "trec").items():
        assert differing(stored["run"].cases, values) == {
            "recall": [],
            "mrr": [],
            "ndcg": ["toji-lineage-002", "water-source-004", "events-section-008"],
        }, tool


def test_to_ir_measures_with_taguru_wildcards_is_the_files(stored: dict[str, Any]) -> None:
    directory = stored["work"] / "trec-taguru-dicts"
    assert export_to(stored["run"], directory, "--wildcards", "taguru")[0] == 0
    qrels, run = taguru_eval.to_ir_measures(stored["run"], EVAL, wildcards="taguru")
    measures = [ir_measures.SetR, RR, nDCG, ir_measures.AP, ir_measures.P @ 5]
    from_files = ir_measures.calc_aggregate(
        measures,
        list(ir_measures.read_trec_qrels(str(directory / "qrels.trec"))),
        list(ir_measures.read_trec_run(str(directory / "run.trec"))),
    )
    assert ir_measures.calc_aggregate(measures, qrels, run) == from_files


def test_taguru_wildcards_documents_one_line_per_expectation_and_hit() -> None:
    eval_set = load_eval_text(
        '{"taguru_eval": 1}\n'
        '{"case_id": "c 1", "query": "q", "expected_sources": ['
        '{"source": "a.md", "paragraphs": [2], "relevance": 1},'
        '{"source": "a.md", "relevance": 3},'
        '{"source": "b.md", "paragraphs": [5, 4, 4], "relevance": 2},'
        '{"source": "a.md", "paragraphs": [2], "relevance": 2},'
        '{"source": "c.md", "paragraphs": [0], "relevance": 0}]}\n'
        '{"case_id": "failed", "query": "q", "expected_sources": [{"source": "a.md"}]}\n'
        '{"case_id": "none", "query": "q", "expected_sources": [{"source": "a.md"}]}\n',
        "eval.jsonl",
    )
    served = [("a.md", 2), ("b.md", 1), ("a.md", 2), ("b.md", 4), ("a.md", 7), ("b.md", 1)]
    tables = RunTables.from_frames(
        "r",
        {
            "case_lanes": pl.DataFrame(
                {
                    "case_index": [0, 1, 2],
                    "case_id": ["c 1", "failed", "none"],
                    "passage_outcome": ["searched", "failed", "searched"],
                }
            ),
            "hits": pl.DataFrame(
                {
                    "case_index": [0] * len(served),
                    "case_id": ["c 1"] * len(served),
                    "rank": list(range(len(served))),
                    "source": [source for source, _ in served],
                    "paragraph": [paragraph for _, paragraph in served],
                }
            ),
        },
    )
    frames = taguru_frames(eval_set.expected, tables)
    # Not judged: relevance 0; no qrels: a failed passage lane. A searched case
    # served nothing is judged and has no line (the tools score it 0).
    assert qrels_text(frames.qrels) == (
        "c%201 0 a.md#2 1\n"
        "c%201 0 a.md#* 3\n"
        "c%201 0 b.md#4+5 2\n"
        "c%201 0 a.md#2~2 2\n"
        "none 0 a.md#* 1\n"
    )
    # a.md#2 is first for three entries: highest grade first, the others on the
    # next lines; a.md#2 again and b.md#1 again are taken ids, renamed by rank.
    assert run_text(frames.run, "t") == (
        "c%201 Q0 a.md#* 1 8 t\n"
        "c%201 Q0 a.md#2~2 2 7 t\n"
        "c%201 Q0 a.md#2 3 6 t\n"
        "c%201 Q0 b.md#1 4 5 t\n"
        "c%201 Q0 a.md#2@3 5 4 t\n"
        "c%201 Q0 b.md#4+5 6 3 t\n"
        "c%201 Q0 a.md#7 7 2 t\n"
        "c%201 Q0 b.md#1@6 8 1 t\n"
    )
    assert (frames.shared_cases, frames.shared_lines) == (("c 1",), 2)
    values = ir_measures_values(qrels_mapping(frames.qrels), run_mapping(frames.run))
    assert values["recall"] == {"c 1": 1.0, "none": 0.0}
    assert values["mrr"] == {"c 1": 1.0, "none": 0.0}


def test_random_cases_of_every_shape_agree_but_where_a_hit_is_shared() -> None:
    eval_set, tables = random_run(1500)
    ours = taguru_values(eval_set, tables)
    frames = taguru_frames(eval_set.expected, tables)
    qrels, run = qrels_mapping(frames.qrels), run_mapping(frames.run)
    scored = ours.filter(pl.col("recall_at_k").is_not_null()).height
    assert scored > 1000
    assert 0 < len(frames.shared_cases) < scored // 10
    shared = set(frames.shared_cases)
    for tool, values in {
        "ir_measures": ir_measures_values(qrels, run),
        "ranx": ranx_values(ranx.Qrels(qrels), ranx.Run(run)),
    }.items():
        found = differing(ours, values)
        assert found["recall"] == found["mrr"] == [], tool
        assert found["ndcg"] and set(found["ndcg"]) <= shared, tool


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["r", "--trec", "d", "--wildcards"], "--wildcards needs drop or taguru"),
        (
            ["r", "--trec", "d", "--wildcards", "all"],
            "--wildcards must be drop or taguru, got 'all'",
        ),
    ],
)
def test_wildcards_usage_errors(argv: list[str], message: str) -> None:
    err = io.StringIO()
    assert main(argv, stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == f"{PREFIX}{message} — try 'python -m taguru_eval export --help'\n"
