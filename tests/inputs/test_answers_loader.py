"""The answers file loader: every problem one ``file:line: field:`` line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from taguru_eval.errors import EXIT_INPUT, LinesError, UsageError
from taguru_eval.inputs.answers import load_answers
from taguru_eval.options import answer_match_of

IDS = ("leave-days", "remote-work", "no-such-policy")
HEADER = '{"taguru_eval_answers": 1, "name": "handbook"}\n'


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_valid_file_loads_each_case_as_written(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        HEADER
        + '{"case_id": "leave-days", "answers": ["twenty days", " 20 days "]}\n\n'
        + '{"case_id": "remote-work", "answers": ["two days a week"]}\n',
    )
    loaded = load_answers(path, IDS, label="answers.jsonl")
    assert loaded.name == "handbook"
    assert loaded.by_case == {
        "leave-days": ("twenty days", " 20 days "),
        "remote-work": ("two days a week",),
    }
    assert loaded.inputs_block("normalized") == {
        "path": "answers.jsonl",
        "cases": 2,
        "match": "normalized",
    }
    assert len(loaded.sha256) == 64


def test_every_problem_of_the_file_is_one_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        HEADER
        + '{"case_id": "leave-days", "answers": ["x"]}\n'
        + '{"case_id": "leave-days", "answers": ["y"]}\n'
        + '{"case_id": "unknown", "answers": ["y"]}\n'
        + '{"case_id": "remote-work", "answers": []}\n'
        + '{"case_id": "no-such-policy", "answers": ["ok", "  "]}\n'
        + '{"case_id": "no-such-policy", "answers": ["x"], "extra": 1}\n'
        + "{not json\n",
    )
    with pytest.raises(LinesError) as caught:
        load_answers(path, IDS, label="a.jsonl")
    lines = caught.value.lines
    assert caught.value.exit_code == EXIT_INPUT
    assert [line.split(": ")[2] for line in lines] == [
        "a.jsonl:3",
        "a.jsonl:4",
        "a.jsonl:5",
        "a.jsonl:6",
        "a.jsonl:7",
        "a.jsonl:8",
    ]
    assert "appears again (first on line 2)" in lines[0]
    assert "'unknown' is not a case of the eval set" in lines[1]
    assert ": answers: must list at least one answer" in lines[2]
    assert ": answers[1]: must not be empty" in lines[3]
    assert "extra" in lines[4]
    assert "not JSON" in lines[5]
    assert all(line.startswith("taguru: evaluate: ") for line in lines)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "a.jsonl:1: taguru_eval_answers: empty file"),
        (
            '{"taguru_eval_answers": 2}\n{"case_id": "leave-days", "answers": ["x"]}\n',
            "a.jsonl:1: taguru_eval_answers: must be 1, got 2",
        ),
        (
            '{"taguru_eval_answers": 1, "nme": "x"}\n',
            "a.jsonl:1: taguru_eval_answers: not an answers header: unknown field `nme`",
        ),
        (HEADER, "a.jsonl:1: (file): no cases after the header"),
    ],
)
def test_header_problems(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(LinesError) as caught:
        load_answers(_write(tmp_path, text), IDS, label="a.jsonl")
    assert expected in caught.value.lines[0]


def test_a_terminal_never_sees_a_raw_control_character(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + '{"case_id": "\\u001b[31mred", "answers": ["x"]}\n')
    with pytest.raises(LinesError) as caught:
        load_answers(path, IDS, label="a.jsonl")
    assert "\x1b" not in caught.value.message


def test_many_problems_are_capped_with_a_count(tmp_path: Path) -> None:
    body = "".join('{"case_id": "nope", "answers": ["x"]}\n' for _ in range(80))
    with pytest.raises(LinesError) as caught:
        load_answers(_write(tmp_path, HEADER + body), IDS, label="a.jsonl")
    assert len(caught.value.lines) == 51
    assert caught.value.lines[-1].endswith("… and 30 more problems")


def test_the_match_rule_is_one_of_two() -> None:
    assert answer_match_of("tokens") == "tokens"
    with pytest.raises(UsageError, match="'normalized' or 'tokens'"):
        answer_match_of("fuzzy")
