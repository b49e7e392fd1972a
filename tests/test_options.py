"""RunOptions checks itself: the command line and the library meet the same rules,
the same error type and the same words (EVALUATE.md §2.2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import taguru_eval
from taguru_eval.cli.run import parse_run_args
from taguru_eval.errors import EXIT_INPUT, UsageError
from taguru_eval.options import COUNT_MAX, RUN_FLAGS, RunOptions

MIN = ["--eval", "eval.jsonl", "--context", "sake"]

# (argv after MIN, RunOptions / taguru_eval.run keywords, the §2.2 message)
RULES: list[tuple[list[str], dict[str, Any], str]] = [
    (["--rerank", "m"], {"rerank": "m"}, "--rerank requires --assembly"),
    (
        ["--refusal-rule", "semantic"],
        {"refusal_rule": "semantic"},
        "--refusal-rule requires --must-refuse",
    ),
    (
        ["--store", "d", "--no-store"],
        {"store_dir": "d", "no_store": True},
        "--store and --no-store are exclusive",
    ),
    (
        ["--must-refuse", "m", "--refusal-rule", "strict"],
        {"must_refuse": "m", "refusal_rule": "strict"},
        "--refusal-rule must be 'semantic' or 'any'",
    ),
    (["--max-items", "0"], {"max_items": 0}, "--max-items needs a positive integer"),
    (["--max-bytes", "0"], {"max_bytes": 0}, "--max-bytes needs a positive integer"),
    (["--max-tokens", "0"], {"max_tokens": 0}, "--max-tokens needs a positive integer"),
    (["--concurrency", "0"], {"concurrency": 0}, "--concurrency needs a positive integer"),
]


def _usage(call: Any, *args: Any, **kwargs: Any) -> UsageError:
    with pytest.raises(UsageError) as info:
        call(*args, **kwargs)
    assert info.value.exit_code == EXIT_INPUT
    return info.value


@pytest.mark.parametrize(("argv", "fields", "message"), RULES)
def test_the_command_line_and_the_options_refuse_alike(
    argv: list[str], fields: dict[str, Any], message: str
) -> None:
    assert _usage(parse_run_args, [*MIN, *argv]).message == message
    assert _usage(RunOptions, "eval.jsonl", "sake", **fields).message == message


@pytest.mark.parametrize(("argv", "fields", "message"), RULES)
def test_the_library_refuses_before_reading_anything(
    argv: list[str], fields: dict[str, Any], message: str, tmp_path: Path
) -> None:
    keywords = dict(fields)
    if "store_dir" in keywords:
        keywords["store"] = keywords.pop("store_dir")
    # Neither file exists: the options are refused before any file is read.
    error = _usage(taguru_eval.run, tmp_path / "missing.jsonl", "sake", **keywords)
    assert error.message == message


def test_a_copy_is_checked_as_a_new_value_is() -> None:
    options = RunOptions("e.jsonl", "sake", assembly=True, rerank="m")
    assert _usage(dataclasses.replace, options, assembly=False).message == (
        "--rerank requires --assembly"
    )


@pytest.mark.parametrize("value", [-1, COUNT_MAX + 1, True, 2.0, "8", None])
def test_a_count_is_an_integer_from_one_to_the_largest_usize(value: object) -> None:
    error = _usage(RunOptions, "e.jsonl", "sake", concurrency=value)
    assert error.message == "--concurrency needs a positive integer"


def test_the_widest_counts_are_kept() -> None:
    options = RunOptions("e.jsonl", "sake", concurrency=COUNT_MAX, max_tokens=COUNT_MAX)
    assert (options.concurrency, options.budget.max_tokens) == (COUNT_MAX, COUNT_MAX)


def test_the_refusal_rule_is_none_until_given() -> None:
    assert RunOptions("e.jsonl", "sake").refusal_rule is None
    assert RunOptions("e.jsonl", "sake").resolved_refusal_rule == "semantic"
    given = RunOptions("e.jsonl", "sake", must_refuse="m", refusal_rule="any")
    assert given.resolved_refusal_rule == "any"


def test_counts_and_the_rule_come_before_the_combinations() -> None:
    # As the command line reads them: a bad value while reading, then the pairs.
    error = _usage(
        RunOptions, "e.jsonl", "sake", rerank="m", max_items=0, store_dir="d", no_store=True
    )
    assert error.message == "--max-items needs a positive integer"
    error = _usage(RunOptions, "e.jsonl", "sake", rerank="m", refusal_rule="x")
    assert error.message == "--refusal-rule must be 'semantic' or 'any'"
    error = _usage(RunOptions, "e.jsonl", "sake", rerank="m", refusal_rule="any")
    assert error.message == "--rerank requires --assembly"


@pytest.mark.parametrize(
    ("argv", "fields", "message"),
    [
        (["--junit-cases", "all"], {"junit_cases": "all"}, "--junit-cases requires --junit"),
        (
            ["--junit", "j.xml", "--junit-cases", "none"],
            {"junit": "j.xml", "junit_cases": "none"},
            "--junit-cases must be 'failing' or 'all'",
        ),
    ],
)
def test_junit_cases_is_refused_alike(
    argv: list[str], fields: dict[str, Any], message: str
) -> None:
    # --junit is the command line's own report (the library writes none), so
    # the rule is checked on the command line and on RunOptions.
    assert _usage(parse_run_args, [*MIN, *argv]).message == message
    assert _usage(RunOptions, "eval.jsonl", "sake", **fields).message == message


def test_junit_cases_defaults_to_failing() -> None:
    assert RunOptions("e.jsonl", "sake").resolved_junit_cases == "failing"
    given = parse_run_args([*MIN, "--junit", "j.xml", "--junit-cases", "all"])
    assert given is not None
    assert (given.junit_cases, given.resolved_junit_cases) == ("all", "all")


def test_every_library_keyword_is_read_through_the_flag_table() -> None:
    """``taguru_eval.run`` hands its keywords to :meth:`RunOptions.from_keywords`,
    which reads only those the flag table knows: a new keyword that is not there
    would be dropped without a word."""
    import inspect

    not_options = {"env", "verbose", "transport", "progress"}
    keywords = {spec.keyword or name for name, spec in RUN_FLAGS.items()}
    given = set(inspect.signature(taguru_eval.run).parameters) - not_options
    assert given <= keywords, given - keywords


def test_every_fingerprint_field_says_what_differs() -> None:
    """``--resume``'s refusal names the flag (from the table) or the file of each field."""
    from taguru_eval.resume import _FILES, _FLAGS, Fingerprint

    assert set(Fingerprint.__struct_fields__) == set(_FLAGS) | set(_FILES)
    assert _FLAGS["mode"] == "--assembly"
    assert _FLAGS["max_items"] == "--max-items"


def test_a_path_keyword_is_kept_as_text() -> None:
    options = RunOptions.from_keywords(
        {"eval_path": Path("e.jsonl"), "context": "c", "config": Path("c.env"), "tags": "t"}
    )
    assert (options.eval_path, options.config, options.tags) == ("e.jsonl", "c.env", ("t",))
