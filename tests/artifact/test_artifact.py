"""evaluation.json: key order, omitted vs null, number spelling, atomic write, read-back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.vectors import vector_cases

from taguru_eval._base import files
from taguru_eval._base.text import F32, json_f32, to_f32
from taguru_eval.artifact import (
    RunContext,
    build_artifact,
    load_artifact,
    read_artifact,
    tables_from_artifact,
)
from taguru_eval.artifact.blocks import citation_check_block
from taguru_eval.artifact.build import dumps, write_json_atomic
from taguru_eval.artifact.codec import parse_artifact
from taguru_eval.errors import InputError, RunError
from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.score.aggregate import score_run
from taguru_eval.tables import build_tables
from taguru_eval.tables.shapes import LaneOutput

SECRET = "SECRET-PARAGRAPH-TEXT-青嶺は青嶺酒造が造る銘柄です"

EVAL_TEXT = "\n".join(
    json.dumps(line, ensure_ascii=False)
    for line in [
        {"taguru_eval": 1, "name": "golden"},
        {
            "case_id": "full",
            "query": "青嶺",
            "cues": ["青嶺"],
            "expected_sources": [{"source": "corpus/brewery.md", "relevance": 3}],
            "expected_concepts": ["青嶺酒造"],
            "expected_associations": [{"subject": "青嶺酒造", "label": "醸造元", "object": "蔵元"}],
            "expected_citations": [
                {"source": "corpus/brewery.md", "paragraph": 0, "quote": "青嶺酒造"},
                {"source": "corpus/brewery.md", "paragraph": 9, "section": None},
            ],
            "options": {"limit": 5},
        },
        {"case_id": "failed", "query": "x"},
    ]
)


def full_case_output() -> dict[str, Any]:
    return {
        "case_index": 0,
        "case_id": "full",
        "query": "青嶺",
        "cues": ["青嶺"],
        "limit": 5,
        "passage": {
            "latency_ms": 12,
            "hits": [
                {
                    "text": SECRET,
                    "lanes": {"bm25": {"score": 0.8630463480949402, "rank": 1}},
                    "score": 0.8630463480949402,
                    "paragraph": 0,
                    "source": "corpus/brewery.md",
                }
            ],
            "plan": {
                "lanes": {
                    "vector": {"reason": "no embedding provider is configured", "ran": False},
                    "bm25": {"ran": True},
                },
                "context": "sake",
                "filter": {"total_sources": 5, "eligible_sources": 1},
            },
            "outcome": "searched",
        },
        "structural": {
            "associations": [
                {
                    "query": {
                        "latency_ms": 4,
                        "attributions": [
                            {"paragraph": 0, "source": "corpus/brewery.md"},
                            {"source": "corpus/other.md", "paragraph": None},
                        ],
                        "matches": 1,
                        "total": 1,
                        "outcome": "queried",
                    },
                    "object": {"latency_ms": 3, "outcome": "not_found"},
                    "label": {
                        "latency_ms": 3,
                        "candidates": ["a", "b"],
                        "tier": "semantic",
                        "outcome": "ambiguous",
                    },
                    "subject": {
                        "latency_ms": 3,
                        "tier": "lexical",
                        "name": "青嶺酒造",
                        "outcome": "resolved",
                    },
                    "object_cue": "蔵元",
                    "label_cue": "醸造元",
                    "subject_cue": "青嶺酒造",
                }
            ],
            "cues": [
                {
                    "latency_ms": 2,
                    "limit": 5,
                    "tier": "lexical",
                    "resolved_names": ["青嶺酒造"],
                    "kind": "concept",
                    "cue": "青嶺",
                }
            ],
        },
        "checks": [
            {
                "latency_ms": 5,
                "quote": {"matched": True, "declared": "青嶺酒造"},
                "section": {"check": "not_checked"},
                "outcome": "resolved",
                "served": True,
                "paragraph": 0,
                "source": "corpus/brewery.md",
                "text": SECRET,
            },
            {
                "latency_ms": 6,
                "message": "http://h/contexts/sake/citations answered 404: no paragraph",
                "code": "no_paragraph",
                "outcome": "unresolved",
                "served": False,
                "paragraph": 9,
                "source": "corpus/brewery.md",
            },
        ],
        "calls": [],
    }


def failed_case_output() -> dict[str, Any]:
    return {
        "case_index": 1,
        "case_id": "failed",
        "query": "x",
        "cues": [],
        "limit": 10,
        "passage": {"outcome": "failed", "message": "boom", "latency_ms": 7},
        "checks": [],
        "calls": [],
    }


def context(**overrides: Any) -> RunContext:
    fields: dict[str, Any] = {
        "eval_path": "eval.jsonl",
        "eval_name": "golden",
        "context": "sake",
        "url": "http://127.0.0.1:8080",
        "out": "evaluation.json",
        "generated_at": "2026-07-28T10:05:12Z",
        "revision_before": {"config": 1, "passages": 3, "graph": 2},
        "revision_after": {"graph": 2, "passages": 3, "config": 1},
        "last_write_epoch_before": 1700000000,
        "last_write_epoch_after": 1700000000,
        "sources_count": 5,
        "provider_model": None,
    }
    fields.update(overrides)
    return RunContext(**fields)


def build(**overrides: Any) -> tuple[dict[str, Any], list[LaneOutput]]:
    eval_set = load_eval_text(EVAL_TEXT, "eval.jsonl")
    outputs: list[LaneOutput] = [full_case_output(), failed_case_output()]  # type: ignore[list-item]
    tables = build_tables(outputs, "run-1")
    scores = score_run(eval_set, tables)
    return build_artifact(context(**overrides), outputs, scores), outputs


def test_top_level_key_order() -> None:
    doc, _ = build()
    assert list(doc) == [
        "taguru_evaluation",
        "generated_at",
        "matching",
        "inputs",
        "corpus",
        "thresholds",
        "definitions",
        "cases",
        "metrics",
    ]
    assert doc["taguru_evaluation"] == 1 and doc["thresholds"] is None
    assert list(doc["matching"]) == ["normalization", "normalized", "sources"]
    assert doc["matching"]["normalized"] == ["expected_concepts", "expected_labels"]
    assert list(doc["inputs"]) == [
        "eval",
        "context",
        "url",
        "out",
        "default_limit",
        "resolve_limit",
        "mode",
        "concurrency",
    ]
    assert doc["inputs"]["eval"] == {"path": "eval.jsonl", "name": "golden", "cases": 2}
    assert list(doc["corpus"]) == [
        "revision_before",
        "revision_after",
        "stable",
        "last_write_epoch_before",
        "last_write_epoch_after",
        "embeddings",
        "sources_count",
    ]
    assert list(doc["corpus"]["revision_before"]) == ["graph", "passages", "config"]
    assert doc["corpus"]["stable"] is True
    assert doc["corpus"]["embeddings"] == {"provider_model": None}
    assert list(doc["definitions"]) == sorted(doc["definitions"])
    assert list(doc["metrics"]) == sorted(doc["metrics"])
    assert set(doc["metrics"]) == set(doc["definitions"])
    assert len(doc["metrics"]) == 31


def test_full_case_block_golden() -> None:
    doc, _ = build()
    block = doc["cases"][0]
    assert list(block) == [
        "case_id",
        "query",
        "cues",
        "limit",
        "passage",
        "structural",
        "recall",
        "coverage",
        "lane_cross",
        "citations",
        "missed",
        "missed_truncated",
        "diversity_sources",
    ]
    passage = block["passage"]
    assert list(passage) == ["outcome", "plan", "hits", "latency_ms"]
    assert list(passage["plan"]) == ["context", "lanes", "filter"]
    assert list(passage["plan"]["lanes"]) == ["bm25", "vector"]
    assert passage["plan"]["lanes"]["vector"] == {
        "ran": False,
        "reason": "no embedding provider is configured",
    }
    assert list(passage["plan"]["filter"]) == ["eligible_sources", "total_sources"]
    assert list(passage["hits"][0]) == ["source", "paragraph", "score", "lanes"]
    assert list(passage["hits"][0]["lanes"]["bm25"]) == ["rank", "score"]
    cue = block["structural"]["cues"][0]
    assert list(cue) == ["cue", "kind", "resolved_names", "tier", "limit", "latency_ms"]
    probe = block["structural"]["associations"][0]
    assert list(probe) == [
        "subject_cue",
        "label_cue",
        "object_cue",
        "subject",
        "label",
        "object",
        "query",
    ]
    assert list(probe["subject"]) == ["outcome", "name", "tier", "latency_ms"]
    assert list(probe["label"]) == ["outcome", "tier", "candidates", "latency_ms"]
    assert list(probe["object"]) == ["outcome", "latency_ms"]
    assert list(probe["query"]) == ["outcome", "total", "matches", "attributions", "latency_ms"]
    assert probe["query"]["attributions"][1] == {"source": "corpus/other.md", "paragraph": None}
    assert list(block["recall"]) == ["recall_at_k", "mrr", "ndcg", "expected_total", "matched"]
    assert block["coverage"] == {
        "concepts": {"expected": 1, "matched": 1, "value": 1.0},
        "associations": {"expected": 1, "matched": 1, "value": 1.0},
    }
    assert block["lane_cross"] == {"structural_hit": True, "passage_hit": True}
    citations = block["citations"]
    assert list(citations) == ["recall", "validity", "checks"]
    assert citations["recall"] == {"expected_total": 2, "matched": 1, "value": 0.5}
    assert citations["validity"] == {"expected_total": 2, "valid": 1, "value": 0.5}
    resolved, unresolved = citations["checks"]
    assert list(resolved) == [
        "source",
        "paragraph",
        "served",
        "outcome",
        "section",
        "quote",
        "latency_ms",
    ]
    assert list(resolved["quote"]) == ["declared", "matched"]
    assert list(unresolved) == [
        "source",
        "paragraph",
        "served",
        "outcome",
        "code",
        "message",
        "latency_ms",
    ]
    assert block["missed"] == [
        "expected_citations: (corpus/brewery.md, 9) not found among served results",
        "expected_citations: (corpus/brewery.md, 9) failed locator validity",
    ]
    assert block["missed_truncated"] == 0
    assert block["diversity_sources"] == 1


def test_failed_case_omits_optional_blocks() -> None:
    doc, _ = build()
    block = doc["cases"][1]
    assert block == {
        "case_id": "failed",
        "query": "x",
        "limit": 10,
        "passage": {"outcome": "failed", "message": "boom", "latency_ms": 7},
        "missed": [],
        "missed_truncated": 0,
    }


def test_omitted_versus_null_rules() -> None:
    doc, _ = build(
        embeddings_read=False,
        warnings=["w1"],
        budget={"max_tokens": 200, "max_items": 3, "max_bytes": 4096},
        rerank="m",
        concurrency=4,
        thresholds={"sha256": "ab", "passed": True, "allow_unstable_corpus": False},
    )
    assert "embeddings" not in doc["corpus"]
    assert list(doc)[7] == "warnings" and doc["warnings"] == ["w1"]
    assert list(doc["inputs"])[-3:] == ["budget", "rerank", "concurrency"]
    assert list(doc["inputs"]["budget"]) == ["max_items", "max_bytes", "max_tokens"]
    assert doc["inputs"]["concurrency"] == 4
    assert doc["thresholds"]["passed"] is True
    unstable, _ = build(revision_after={"graph": 3, "passages": 3, "config": 1})
    assert unstable["corpus"]["stable"] is False
    text = dumps(doc)
    assert '"thresholds": {' in text
    plain, _ = build()
    assert '"thresholds": null' in dumps(plain)
    assert '"code": "no_paragraph"' in dumps(plain)


def test_section_expectation_null_is_kept() -> None:
    check = citation_check_block(
        {
            "source": "a.md",
            "paragraph": 0,
            "served": True,
            "outcome": "resolved",
            "section": {"check": "matched", "expected": None},
            "latency_ms": 1,
        }
    )
    assert check["section"] == {"check": "matched", "expected": None}
    unresolved = citation_check_block(
        {
            "source": "a.md",
            "paragraph": 0,
            "served": False,
            "outcome": "unresolved",
            "code": None,
            "message": "m",
            "latency_ms": 1,
        }
    )
    assert "code" in unresolved and unresolved["code"] is None


def test_no_hit_or_citation_text_in_the_artifact(tmp_path: Path) -> None:
    doc, _ = build()
    out = tmp_path / "evaluation.json"
    write_json_atomic(out, doc)
    text = out.read_text(encoding="utf-8")
    assert SECRET not in text
    assert '"text"' not in text


def test_f32_scores_are_printed_from_binary32() -> None:
    doc, _ = build()
    text = dumps(doc)
    assert '"score": 0.86304635' in text
    assert "0.8630463480949402" not in text
    assert dumps({"a": F32(0.1), "b": 0.1, "c": 1.0, "d": 3}) == (
        '{\n  "a": 0.1,\n  "b": 0.1,\n  "c": 1.0,\n  "d": 3\n}'
    )
    assert dumps({"floor": F32(1e-7)}) == '{\n  "floor": 1e-7\n}'


@pytest.mark.parametrize("case", vector_cases("budget_accounting", "f32_format"))
def test_f32_format_vectors(case: dict[str, Any]) -> None:
    assert set(case["expected"]) <= {"text"}
    assert json_f32(case["input"]["value"]) == case["expected"]["text"]


def test_dumps_layout() -> None:
    doc = {"k": ["あ", {}, []], "n": None, "t": True}
    assert (
        dumps(doc) == '{\n  "k": [\n    "あ",\n    {},\n    []\n  ],\n  "n": null,\n  "t": true\n}'
    )
    assert json.loads(dumps(doc)) == doc


def test_atomic_write_leaves_nothing_when_serialisation_fails(tmp_path: Path) -> None:
    out = tmp_path / "evaluation.json"
    doc = {"cases": [{"ok": 1}, {"bad": object()}], "metrics": {}}
    with pytest.raises(RunError, match="writing"):
        write_json_atomic(out, doc)
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_the_old_file_when_the_rename_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "evaluation.json"
    out.write_text("old", encoding="utf-8")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", refuse)
    with pytest.raises(RunError, match="No space left on device"):
        write_json_atomic(out, {"a": 1})
    assert out.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evaluation.json"]


def test_atomic_write_interrupted_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "evaluation.json"

    def interrupt(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(out, {"a": 1})
    assert list(tmp_path.iterdir()) == []


def test_write_into_missing_directory_is_a_run_error(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="writing"):
        write_json_atomic(tmp_path / "missing" / "evaluation.json", {"a": 1})


def test_written_file_has_no_trailing_newline(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    write_json_atomic(out, {"a": "é"})
    assert out.read_bytes() == '{\n  "a": "é"\n}'.encode()
    assert not [p for p in tmp_path.iterdir() if p.name != "e.json"]
    assert os.stat(out).st_size > 0


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"taguru_evaluation": 1,', "line 1 column 25: not valid JSON"),
        ('{"taguru_evaluation": NaN}', "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ("{}", "taguru_evaluation"),
        ('{"taguru_evaluation": true}', "taguru_evaluation"),
        ('{"taguru_evaluation": 2}', "taguru_evaluation must be within 1..=1, got 2"),
        ('{"taguru_evaluation": 1, "cases": {}}', "'cases' must be an array"),
    ],
)
def test_read_artifact_rejects_malformed_input(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_artifact(path)
    assert str(path) in str(info.value)
    assert fragment in str(info.value)
    assert info.value.exit_code == 2


def test_read_artifact_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_artifact(tmp_path / "nope.json")


def test_round_trip_gives_the_same_frames(tmp_path: Path) -> None:
    doc, outputs = build()
    out = tmp_path / "evaluation.json"
    write_json_atomic(out, doc)
    loaded = tables_from_artifact(read_artifact(out), run_id="run-1")
    eval_set = load_eval_text(EVAL_TEXT, "eval.jsonl")
    live_tables = build_tables(outputs, "run-1")
    live = score_run(eval_set, live_tables)
    assert loaded.scores.cases.equals(live.cases)
    assert loaded.scores.metrics == live.metrics
    assert loaded.scores.metrics_frame.equals(live.metrics_frame)
    for name, frame in live_tables.frames().items():
        if name == "calls":
            continue
        assert loaded.tables.frames()[name].equals(frame), name
    # Rescoring the read-back lane outputs reproduces the artifact exactly.
    rescored = score_run(eval_set, loaded.tables)
    again = build_artifact(context(), loaded.lane_outputs, rescored)
    assert dumps(again) == dumps(doc)
    calls = loaded.tables.calls
    assert calls.height == 1 + 1 + 4 + 2 + 1
    assert calls["lane"].to_list()[:2] == ["passage", "coverage"]


def test_parse_artifact_of_a_taguru_written_file_without_concurrency() -> None:
    doc, _ = build()
    del doc["inputs"]["concurrency"]
    loaded = tables_from_artifact(parse_artifact(dumps(doc), "taguru.json"))
    assert loaded.scores.cases.height == 2
    assert loaded.tables.hits["score"].to_list() == [pytest.approx(0.86304635, rel=1e-7)]


def test_additive_blocks_go_after_the_spec_keys() -> None:
    eval_set = load_eval_text(EVAL_TEXT, "eval.jsonl")
    outputs: list[LaneOutput] = [full_case_output(), failed_case_output()]  # type: ignore[list-item]
    scores = score_run(eval_set, build_tables(outputs, "r"))
    doc = build_artifact(
        context(),
        outputs,
        scores,
        case_extras={"failed": {"answerability": {"verdict": "x", "supported": False}}},
        extra_top_level={"abstention": {"rule": "semantic"}},
    )
    assert list(doc)[-2:] == ["metrics", "abstention"]
    assert list(doc["cases"][1])[-1] == "answerability"
    assert "answerability" not in doc["cases"][0]


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_f32_spelling_round_trips_as_binary32(value: float) -> None:
    text = json_f32(value)
    assert to_f32(float(text)) == value
    assert "+" not in text and "e-0" not in text


@pytest.mark.parametrize(
    "case",
    [
        {"query": "q"},
        {"case_id": "c", "passage": {"outcome": "searched", "hits": "nope", "latency_ms": 1}},
        {"case_id": "c", "passage": {"outcome": "failed", "message": "m"}},
    ],
)
def test_malformed_case_blocks_are_input_errors(tmp_path: Path, case: dict[str, Any]) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"taguru_evaluation": 1, "cases": [case]}), encoding="utf-8")
    with pytest.raises(InputError, match="malformed case block") as info:
        load_artifact(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("where", "value", "detail"),
    [
        (("passage", "hits", 1, "score"), "x", 'invalid type: string "x", expected a number'),
        (("passage", "hits", 1, "paragraph"), "0", 'invalid type: string "0", expected an integer'),
        (("passage", "hits", 1, "source"), 1, "invalid type: integer `1`, expected a string"),
        (("passage", "latency_ms"), "x", 'invalid type: string "x", expected an integer'),
        (("passage", "hits", 1, "lanes"), [], "invalid type: sequence, expected an object"),
        (
            ("structural", "cues", 0, "latency_ms"),
            True,
            "invalid type: boolean `true`, expected an integer",
        ),
        (
            ("citations", "checks", 0, "latency_ms"),
            "x",
            'invalid type: string "x", expected an integer',
        ),
    ],
)
def test_a_wrongly_typed_case_block_member_is_named_by_its_path(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: tuple[str | int, ...],
    value: object,
    detail: str,
) -> None:
    # Polars' own words named a dtype and quoted a valid value from another
    # case ("… type String; found value of type Float64: 9.6"), never the field.
    from support.documents import evaluation_document, write_document

    from taguru_eval.cli.main import main

    document = evaluation_document()
    target: Any = document["cases"][2]
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    path = write_document(tmp_path / "run.json", document)
    field = "cases[2]." + ".".join(
        f"[{key}]" if isinstance(key, int) else key for key in where
    ).replace(".[", "[")
    with pytest.raises(InputError) as info:
        load_artifact(path)
    assert info.value.message == f"{path}: malformed case block: {field}: {detail}"
    assert info.value.field == field
    for argv in (
        ["report", str(path), "-o", str(tmp_path / "r.html")],
        ["export", str(path), "--trec", str(tmp_path / "trec")],
        ["ingest", str(path), "--store", str(tmp_path / "runs")],
    ):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"taguru: evaluate: {info.value.message}\n"


def test_a_truncated_artifact_s_reason_does_not_end_in_a_bare_at(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('{"taguru_evaluation": 1, "x": "abc', encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_artifact(path)
    assert info.value.message == (
        f"{path}: line 1 column 31: not valid JSON: Unterminated string starting"
    )


def test_lane_blocks_keep_each_case_s_lane_values_encoded_and_read_them_back() -> None:
    """``LaneBlocks`` encodes each case's lane values in batches into a temporary
    file; read back, a case's values are the layout's renderings encoded, ``None``
    where the case has none, for cases added in any order and across batches."""
    import msgspec

    from taguru_eval._base.text import encode_json
    from taguru_eval.artifact.layout import CASE_LAYOUT, FromLane, LaneBlocks

    def output(index: int) -> dict[str, Any]:
        return {
            "case_index": index,
            "case_id": f"c{index}",
            "query": "q é \u2028",
            "cues": ["x"] if index % 2 else [],
            "limit": 5,
            "passage": {"outcome": "failed", "message": f"down {index}", "latency_ms": 3},
        }

    order = [*range(LaneBlocks.BATCH + 7)][::-1]  # finished out of order, more than a batch
    blocks = LaneBlocks()
    for index in order:
        blocks.add(output(index))
    assert len(blocks) == len(order)
    lanes = [slot for slot in CASE_LAYOUT if isinstance(slot, FromLane)]
    for index in (0, 1, LaneBlocks.BATCH + 6):
        values = blocks.values(index)
        assert values is not None
        for slot in lanes:
            expected = slot.render(output(index))
            got = values[slot.path]
            if expected is None:
                assert got is None
            else:
                assert isinstance(got, msgspec.Raw) and bytes(got) == encode_json(expected)
    assert blocks.values(len(order)) is None
    # Read together (as the artifact reads a batch of cases): each case's values are
    # what reading it alone gives, whether the cases lie in one stretch of the file
    # (neighbours) or far apart among other cases' values (every 40th), and a case
    # never added is None among them.
    for indexes in ([*range(10, 30)], [*range(0, len(order), 40)], [3, len(order), 4]):
        together = blocks.values_of(indexes)
        assert together == [blocks.values(index) for index in indexes]
        assert (len(order) in indexes) == (None in together)
    blocks.close()
