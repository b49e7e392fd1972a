"""The selection flags on a loaded eval set: which cases each keeps, the sample's
draws and strata, the ``--failing`` reader on damaged input, and every error path."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from taguru_eval.cli.run import parse_run_args
from taguru_eval.errors import EXIT_INPUT, InputError, UsageError
from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.inputs.evalcase import EvalSet
from taguru_eval.inputs.selection import (
    glob_regex,
    read_failing,
    sample_draws,
    select_cases,
)
from taguru_eval.options import DEFAULT_SAMPLE_SEED, RunOptions


def eval_set(cases: list[dict[str, Any]]) -> EvalSet:
    lines = [json.dumps({"taguru_eval": 1, "name": "selection"})]
    lines += [json.dumps(case, ensure_ascii=False) for case in cases]
    return load_eval_text("\n".join(lines) + "\n", "sel.eval.jsonl")


def case(case_id: str, *tags: str, source: str = "a.md") -> dict[str, Any]:
    body: dict[str, Any] = {
        "case_id": case_id,
        "query": f"q {case_id}",
        "expected_sources": [{"source": source, "paragraphs": [1, 2]}],
        "expected_concepts": [case_id],
    }
    if tags:
        body["options"] = {"tags": list(tags)}
    return body


def options(**given: Any) -> RunOptions:
    return RunOptions(eval_path="sel.eval.jsonl", context="c", **given)


def selected_ids(loaded: EvalSet, **given: Any) -> list[str]:
    return select_cases(loaded, options(**given)).eval_set.case_ids


# ------------------------------------------------------------------ --filter


@pytest.mark.parametrize(
    ("pattern", "ids", "matched"),
    [
        ("a.b", ["a.b", "axb", "a.b.c", "A.b"], ["a.b"]),
        ("brand-*", ["brand-1", "brand-", "xbrand-1", "brand"], ["brand-1", "brand-"]),
        ("q?", ["q1", "q12", "q", "Q1"], ["q1"]),
        ("*[1]*", ["x[1]y", "x1y", "[1]"], ["x[1]y", "[1]"]),
        ("(a|b)+\\", ["(a|b)+\\", "a", "ab"], ["(a|b)+\\"]),
        ("青*", ["青嶺", "嶺青"], ["青嶺"]),
        ("*", ["line\nbreak", ""], ["line\nbreak", ""]),
    ],
)
def test_a_filter_is_a_glob_over_the_whole_id_with_every_other_character_literal(
    pattern: str, ids: list[str], matched: list[str]
) -> None:
    found = pl.Series(ids).str.contains(glob_regex(pattern))
    assert [i for i, hit in zip(ids, found, strict=True) if hit] == matched


def test_filters_are_any_of_and_tags_are_any_of_and_flags_narrow_each_other() -> None:
    loaded = eval_set(
        [case("a-1", "x"), case("a-2", "y"), case("b-1", "x"), case("b-2"), case("c-1", "y", "x")]
    )
    assert selected_ids(loaded, filters=("a-*", "c-*")) == ["a-1", "a-2", "c-1"]
    assert selected_ids(loaded, tags=("y", "nothing")) == ["a-2", "c-1"]
    assert selected_ids(loaded, filters=("a-*", "b-*"), tags=("x",)) == ["a-1", "b-1"]


def test_the_selected_set_is_reindexed_with_its_own_expected_rows() -> None:
    loaded = eval_set([case(f"c{i}", source=f"s{i}.md") for i in range(6)])
    chosen = select_cases(loaded, options(filters=("c1", "c4", "c5"))).eval_set
    assert chosen.case_ids == ["c1", "c4", "c5"]
    rows = chosen.expected.filter(pl.col("kind") == "source")
    assert rows.get_column("case_index").to_list() == [0, 0, 1, 1, 2, 2]
    assert rows.get_column("source").to_list() == ["s1.md"] * 2 + ["s4.md"] * 2 + ["s5.md"] * 2
    assert chosen.expected.columns == loaded.expected.columns
    assert chosen.expected.schema == loaded.expected.schema


# ------------------------------------------------------------------ --sample


def test_a_sample_is_exact_in_size_in_file_order_and_the_same_for_a_seed() -> None:
    loaded = eval_set([case(f"c{i:04d}") for i in range(1000)])
    first = selected_ids(loaded, sample=37)
    assert len(first) == 37 == len(set(first))
    assert first == sorted(first)  # file order
    assert selected_ids(loaded, sample=37, seed=DEFAULT_SAMPLE_SEED) == first
    other = selected_ids(loaded, sample=37, seed=1)
    assert other != first and len(other) == 37
    assert selected_ids(loaded, sample=5000) == loaded.case_ids


def test_a_case_draw_depends_on_the_seed_and_its_id_only() -> None:
    # Pinned: a sample drawn today is drawn the same by every later version.
    assert sample_draws(["brand-origin-001"], 0) == [sample_draws(["brand-origin-001"], 0)[0]]
    assert sample_draws(["a", "b"], 7)[1] == sample_draws(["b"], 7)[0]
    assert sample_draws(["brand-origin-001"], 0) == [PINNED_DRAW]
    assert sample_draws(["brand-origin-001"], 1) != [PINNED_DRAW]
    # Adding cases to the file keeps every other case's draw, so a sample of the
    # larger file takes the smaller file's sample where the strata agree.
    small = eval_set([case(f"c{i:04d}") for i in range(400)])
    large = eval_set([case(f"c{i:04d}") for i in range(800)])
    in_small = set(selected_ids(small, sample=10))
    in_large = set(selected_ids(large, sample=20))
    assert len(in_small & in_large) >= 5


PINNED_DRAW = 1656554812044630763


def test_a_sample_is_stratified_over_the_tag_sets_by_largest_remainder() -> None:
    cases = (
        [case(f"a{i:03d}", "a") for i in range(600)]
        + [case(f"b{i:03d}", "b") for i in range(300)]
        + [case(f"n{i:03d}") for i in range(95)]
        + [case(f"ab{i:03d}", "b", "a") for i in range(5)]
    )
    loaded = eval_set(cases)
    result = select_cases(loaded, options(sample=20))
    strata = Counter(",".join(sorted(c.options.tags)) or "(none)" for c in result.eval_set.cases)
    # Shares of 20: a 12.0, b 6.0, untagged 1.9, a+b 0.1 -> 12, 6, 1 and the one
    # left to the largest remainder (untagged, 0.9).
    assert strata == {"a": 12, "b": 6, "(none)": 2}
    assert result.block["sample"] == {"size": 20, "seed": 0, "strata": 4}
    # One case per stratum of three: the leftover goes to the first in file order.
    three = eval_set([case("x", "p"), case("y", "q"), case("z", "r")])
    assert selected_ids(three, sample=2) == ["x", "y"]


def test_the_block_records_what_was_given_in_order() -> None:
    loaded = eval_set([case("a-1", "x"), case("a-2", "x"), case("b-1")])
    block = select_cases(
        loaded, options(filters=("a-*", "a-*"), tags=("x",), sample=1, seed=9)
    ).block
    assert list(block) == ["cases", "eval_cases", "filter", "tag", "sample"]
    assert block["cases"] == 1 and block["eval_cases"] == 3
    assert block["filter"] == ["a-*"]  # a repeated pattern counts once


# ------------------------------------------------------------------ empty selections


def test_an_empty_selection_is_an_input_error_naming_the_flag_and_the_fix() -> None:
    loaded = eval_set([case("brand-1", "製法"), case("brand-2")])
    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(filters=("brand",)))
    error = caught.value
    assert error.exit_code == EXIT_INPUT
    assert str(error) == (
        "--filter 'brand' matched no case of sel.eval.jsonl (2 case(s)): nothing would run"
    )
    assert error.hint is not None and "'brand*'" in error.hint and "'brand-1'" in error.hint

    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(filters=("brand-2",), tags=("製法",)))
    assert "among the 1 case(s) the flags before it selected" in str(caught.value)
    assert caught.value.hint == "no case there has options.tags; select with --filter instead"

    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(tags=("製",)))
    assert caught.value.hint is not None and "'製法'" in caught.value.hint


# ------------------------------------------------------------------ --failing


def artifact(cases: list[dict[str, Any]], violations: list[dict[str, Any]] | None) -> str:
    thresholds = (
        None
        if violations is None
        else {"sha256": "0" * 64, "passed": not violations, "violations": violations}
    )
    return json.dumps({"taguru_evaluation": 1, "thresholds": thresholds, "cases": cases})


FAILING_CASES = [
    {"case_id": "ok", "passage": {"outcome": "searched", "hits": []}},
    {"case_id": "passage", "passage": {"outcome": "failed", "message": "m"}},
    {"case_id": "evidence", "passage": {"outcome": "searched"}, "evidence": {"outcome": "failed"}},
    {
        "case_id": "query",
        "passage": {"outcome": "searched"},
        "structural": {"cues": [], "associations": [{"query": {"outcome": "errored"}}]},
    },
    {
        "case_id": "citation",
        "passage": {"outcome": "searched"},
        "citations": {"checks": [{"outcome": "resolved"}, {"outcome": "unresolved"}]},
    },
    {"case_id": "bound", "passage": {"outcome": "searched"}},
]


def test_failing_reads_failed_lanes_and_violated_case_bounds(tmp_path: Path) -> None:
    path = tmp_path / "evaluation.json"
    violations = [
        {"scope": "aggregate", "metric": "recall.mrr", "actual": 0.1, "reason": "r"},
        {"scope": "case", "case_id": "bound", "metric": "recall.mrr", "actual": 0, "reason": "r"},
        {"scope": "corpus", "metric": "corpus.stable", "actual": None, "reason": "r"},
    ]
    path.write_text(artifact(FAILING_CASES, violations), encoding="utf-8")
    found = read_failing(str(path))
    assert found.kind == "failed"
    assert found.case_ids == {"passage", "evidence", "query", "citation", "bound"}
    path.write_text(artifact(FAILING_CASES[:1], None), encoding="utf-8")
    assert read_failing(str(path)).case_ids == frozenset()


def test_failing_reads_the_regressed_cases_of_a_changes_file(tmp_path: Path) -> None:
    path = tmp_path / "changes.jsonl"
    lines = [
        {"kind": "header", "taguru_evaluation_changes": 1, "counts": {}},
        {"kind": "improved", "case_id": "up", "metrics": []},
        {"kind": "regressed", "case_id": "down", "metrics": []},
        {"kind": "removed", "case_id": "gone", "metrics": []},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    found = read_failing(str(path))
    assert (found.kind, found.case_ids) == ("regressed", {"down"})


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b'{"taguru_evaluation": 1, "cases": [', "truncated"),
        (b"\x00\x01garbage", "malformed"),
        (b'{"taguru_evaluation": 7, "cases": []}', "taguru_evaluation must be within 1..=1"),
        (b'{"taguru_evaluation": 1}', "missing required field `cases`"),
        (
            b'{"taguru_evaluation": 1, "cases": [{"case_id": 5}]}',
            "cases[0].case_id: expected `str`, got `int`",
        ),
        (b'{"kind":"header","taguru_evaluation_changes":1}\n{"kind":"regressed"}\n', "line 2"),
        (b'{"kind":"nope","taguru_evaluation_changes":1}\n', "line 1"),
    ],
)
def test_a_damaged_run_is_one_line_naming_it_exit_2(
    tmp_path: Path, content: bytes, detail: str
) -> None:
    path = tmp_path / "damaged.json"
    path.write_bytes(content)
    loaded = eval_set([case("a")])
    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(failing=str(path)))
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_INPUT
    assert message.startswith(f"--failing {path}: ")
    assert detail in message
    assert "\n" not in message


def test_a_missing_or_empty_run_directory_is_named(tmp_path: Path) -> None:
    loaded = eval_set([case("a")])
    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(failing=str(tmp_path / "nowhere.json")))
    assert str(caught.value) == (
        f"--failing {tmp_path / 'nowhere.json'}: No such file or directory (os error 2)"
    )
    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(failing=str(tmp_path)))
    assert str(caught.value).startswith(f"--failing {tmp_path / 'evaluation.json.zst'}: No such")


def test_failing_with_nothing_failed_or_none_of_it_here_is_an_error(tmp_path: Path) -> None:
    loaded = eval_set([case("a"), case("b")])
    clean = tmp_path / "clean.json"
    clean.write_text(artifact(FAILING_CASES[:1], []), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(failing=str(clean)))
    assert str(caught.value) == f"--failing {clean}: no case failed there: nothing to run again"
    assert caught.value.hint == "drop --failing to run the whole set"
    other = tmp_path / "other.json"
    other.write_text(artifact(FAILING_CASES, None), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        select_cases(loaded, options(failing=str(other)))
    assert str(caught.value).startswith(f"--failing {other} (4 failed case(s)) matched no case")
    assert caught.value.hint is not None and "another eval set" in caught.value.hint


# ------------------------------------------------------------------ flags and options


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sample", "0"], "--sample needs a positive integer"),
        (["--sample", "-1"], "--sample needs a positive integer"),
        (["--sample"], "--sample needs a positive integer"),
        (["--sample", "3", "--sample", "4"], "--sample given twice"),
        (["--sample", "3", "--seed", "x"], "--seed needs a non-negative integer of at most"),
        (["--sample", "3", "--seed", str(2**64)], "--seed needs a non-negative integer of at"),
        (["--sample", "3", "--seed", "1", "--seed", "2"], "--seed given twice"),
        (["--seed", "1"], "--seed requires --sample"),
        (["--filter"], "--filter needs a non-empty pattern"),
        (["--filter", ""], "--filter needs a non-empty pattern"),
        (["--tag"], "--tag needs a non-empty tag"),
        (["--tag", ""], "--tag needs a non-empty tag"),
        (["--failing"], "--failing needs a file or directory path"),
        (["--failing", ""], "--failing needs a file or directory path"),
        (["--failing", "a", "--failing", "b"], "--failing given twice"),
        (["--filter", "x", "--resume"], "--resume cannot continue a run of a selection"),
    ],
)
def test_each_flag_error_is_a_usage_error(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_run_args(["--eval", "e.jsonl", "--context", "c", *argv])
    assert str(caught.value).startswith(message)
    assert caught.value.exit_code == EXIT_INPUT


def test_the_flags_parse_into_the_options_and_repeat() -> None:
    parsed = parse_run_args(
        [
            "--eval", "e.jsonl", "--context", "c", "--filter", "a*", "--tag", "t1",
            "--filter", "--b", "--tag", "t2", "--sample", "+5", "--seed", "00042",
            "--failing", "runs/x",
        ]
    )  # fmt: skip
    assert parsed is not None
    assert parsed.filters == ("a*", "--b") and parsed.tags == ("t1", "t2")
    assert (parsed.sample, parsed.seed, parsed.failing) == (5, 42, "runs/x")
    assert parsed.selects and parsed.resolved_seed == 42
    plain = parse_run_args(["--eval", "e.jsonl", "--context", "c"])
    assert plain is not None and not plain.selects
    assert plain.resolved_seed == DEFAULT_SAMPLE_SEED == 0


@pytest.mark.parametrize(
    "given",
    [
        {"sample": 0},
        {"sample": True},
        {"seed": -1, "sample": 1},
        {"seed": 2**64, "sample": 1},
        {"filters": ("",)},
        {"tags": ("",)},
        {"failing": ""},
        {"seed": 3},
    ],
)
def test_the_library_meets_the_same_rules(given: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        options(**given)
