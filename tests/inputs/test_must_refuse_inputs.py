"""The must-refuse file loader (ABSTENTION.md §3.2) and the flag-gated metric names (§3.9)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.must_refuse import load_must_refuse
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions

HEADER = '{"taguru_eval_must_refuse": 1, "name": "mr"}'


def write(tmp_path: Path, *lines: str, name: str = "mr.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_good_file_loads_every_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER,
        "",
        '{"case_id":"a","query":"What is the capital of France?"}',
        '{"case_id":"b","query":"q","cues":["security deposit"],"kind":"adjacent",'
        '"why":"no deposit clause",'
        '"options":{"limit":3,"floor":0.5,"tags":["t"],"since":1,"until":2}}',
    )
    loaded = load_must_refuse(path, ["x"])
    assert loaded.name == "mr" and loaded.label == str(path)
    assert loaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    first, second = loaded.cases
    assert (first.kind, first.cues, first.why, first.effective_limit) == (
        "unspecified",
        (),
        None,
        10,
    )
    assert (first.line, second.line) == (3, 4)
    assert (second.kind, second.cues, second.why) == (
        "adjacent",
        ("security deposit",),
        "no deposit clause",
    )
    assert (second.options.limit, second.options.tags, second.options.since) == (3, ("t",), 1)
    assert second.options.floor == pytest.approx(0.5)
    assert loaded.inputs_block("any") == {
        "path": str(path),
        "name": "mr",
        "cases": 2,
        "sha256": loaded.sha256,
        "refusal_rule": "any",
    }


@pytest.mark.parametrize(
    ("lines", "message", "line", "field"),
    [
        (
            ['{"taguru_eval": 1}', '{"case_id":"a","query":"q"}'],
            "line 1: this is an eval.jsonl header; a must-refuse file starts with "
            '{"taguru_eval_must_refuse": 1}',
            1,
            "taguru_eval",
        ),
        (
            ['{"taguru_eval_must_refuse": 2}', '{"case_id":"a","query":"q"}'],
            "line 1: taguru_eval_must_refuse must be 1, got 2",
            1,
            "taguru_eval_must_refuse",
        ),
        (
            ['{"taguru_eval_must_refuse": 1, "extra": 1}'],
            "line 1: not a valid must-refuse header: unknown field `extra`",
            1,
            None,
        ),
        ([HEADER, "{not json"], "line 2: not JSON", 2, None),
        (
            [HEADER, '{"case_id":"a","query":"q","expected_sources":[]}'],
            "line 2: not a valid must-refuse case: unknown field `expected_sources`",
            2,
            None,
        ),
        (
            [HEADER, '{"case_id":" ","query":"q"}'],
            "line 2: case_id must not be empty",
            2,
            "case_id",
        ),
        ([HEADER, '{"case_id":"a","query":""}'], "case 'a': query must not be empty", 2, "query"),
        ([HEADER, '{"case_id":"a"}'], "missing field `query`", 2, None),
        (
            [HEADER, '{"case_id":"a","query":"q"}', '{"case_id":"a","query":"q"}'],
            "line 3: duplicate case_id 'a'",
            3,
            "case_id",
        ),
        (
            [HEADER, '{"case_id":"e1","query":"q"}'],
            "line 2: case_id 'e1' is also an eval.jsonl case_id (the must-refuse and eval "
            "case_ids must be disjoint)",
            2,
            "case_id",
        ),
        (
            [HEADER, '{"case_id":"a","query":"q","cues":["ok",""]}'],
            "case 'a': cues: entries must not be empty",
            2,
            "cues[1]",
        ),
        (
            [HEADER, '{"case_id":"a","query":"q","kind":"unspecified"}'],
            "case 'a': kind must be 'out_of_corpus' or 'adjacent', got 'unspecified'",
            2,
            "kind",
        ),
        (
            [HEADER, '{"case_id":"a","query":"q","options":{"limit":0}}'],
            "case 'a': options.limit: must be 1..=1000, got 0",
            2,
            "options.limit",
        ),
        (
            [HEADER, '{"case_id":"a","query":"q","options":{"floor":1.5}}'],
            "case 'a': options.floor must be 0.0..=1.0, got 1.5",
            2,
            "options.floor",
        ),
        (
            [HEADER, '{"case_id":"a","query":"q","options":{"rerank":true}}'],
            "unknown field `rerank`",
            2,
            "options",
        ),
        ([HEADER], "no cases: expected at least one must-refuse case line", None, None),
        (["", "  "], "empty file: expected a taguru_eval_must_refuse header line", None, None),
    ],
)
def test_every_problem_names_file_line_and_field(
    tmp_path: Path, lines: list[str], message: str, line: int | None, field: str | None
) -> None:
    path = write(tmp_path, *lines)
    with pytest.raises(InputError) as info:
        load_must_refuse(path, ["e1"])
    error = info.value
    assert error.exit_code == 2
    assert error.message.startswith(f"{path}: ")
    assert message in error.message
    assert (error.path, error.line, error.field) == (str(path), line, field)


def test_the_stamps_keep_the_two_files_apart(tmp_path: Path) -> None:
    must_refuse = write(tmp_path, HEADER, '{"case_id":"a","query":"q"}')
    with pytest.raises(InputError, match="unknown field `taguru_eval_must_refuse`"):
        load_eval(must_refuse)


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"cannot read .*missing\.jsonl: No such file"):
        load_must_refuse(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(HEADER.encode() + b"\n\xff\n")
    with pytest.raises(InputError, match="line 2, byte") as info:
        load_must_refuse(bad)
    assert info.value.line == 2


# ------------------------------------------------------------------ prepare (no network)


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    files = {
        "eval": '{"taguru_eval":1}\n{"case_id":"e1","query":"q"}\n',
        "mr": f'{HEADER}\n{{"case_id":"m1","query":"q"}}\n',
        "gate": json.dumps(
            {
                "taguru_evaluate_thresholds": 1,
                "aggregate": {
                    "abstention.refusal_rate": {"min": 1.0},
                    "answerability.false_refusal_rate": {"max": 0.1},
                    "recall.mrr": {"min": 0.5},
                },
            }
        ),
    }
    paths = {}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        paths[name] = str(tmp_path / name)
    return paths


def test_thresholds_name_abstention_metrics_only_with_the_flag(inputs: dict[str, str]) -> None:
    options = RunOptions(
        eval_path=inputs["eval"], context="c", url="http://h:1", thresholds=inputs["gate"]
    )
    with pytest.raises(InputError) as info:
        prepare_run(options, {}, stderr=lambda _line: None)
    assert info.value.exit_code == 2
    assert info.value.message == (
        f"{inputs['gate']}: aggregate: metric name 'abstention.refusal_rate' is measured only "
        "with --must-refuse; aggregate: metric name 'answerability.false_refusal_rate' is "
        "measured only with --must-refuse"
    )
    flagged = RunOptions(
        eval_path=inputs["eval"],
        context="c",
        url="http://h:1",
        thresholds=inputs["gate"],
        must_refuse=inputs["mr"],
    )
    prepared = prepare_run(flagged, {}, stderr=lambda _line: None)
    assert prepared.thresholds is not None
    assert set(prepared.thresholds.aggregate) == {
        "abstention.refusal_rate",
        "answerability.false_refusal_rate",
        "recall.mrr",
    }
    assert prepared.must_refuse is not None and prepared.must_refuse.case_ids == ["m1"]


def test_a_truly_unknown_name_keeps_taguru_s_message(
    inputs: dict[str, str], tmp_path: Path
) -> None:
    gate = tmp_path / "unknown.json"
    gate.write_text('{"taguru_evaluate_thresholds":1,"aggregate":{"abstention.bogus":{"min":1}}}')
    options = RunOptions(
        eval_path=inputs["eval"],
        context="c",
        url="http://h:1",
        thresholds=str(gate),
        must_refuse=inputs["mr"],
    )
    with pytest.raises(InputError, match=r"aggregate: unknown metric name 'abstention\.bogus'"):
        prepare_run(options, {}, stderr=lambda _line: None)
