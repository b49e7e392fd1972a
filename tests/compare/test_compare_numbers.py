"""compare reads each number as taguru reads it (ERRATA row 24).

The files here are written by hand so each value is spelt as chosen; the
live check against taguru's own compare is
``tests/differential/test_numbers_097.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taguru_eval.compare import compare
from taguru_eval.errors import InputError

TWO_ROUNDINGS = "0.9134015924715543"
"""Read by taguru as 0.9134015924715544 (the nearest double ends in 543)."""


def _file(path: Path, cases: list[str], metrics: str = "{}", definitions: str = "{}") -> Path:
    path.write_text(
        '{"taguru_evaluation": 1, "definitions": ' + definitions + ', "metrics": ' + metrics
        + ', "cases": [' + ", ".join(cases) + "]}",
        encoding="utf-8",
    )  # fmt: skip
    return path


def _recall(case_id: str, ndcg: str, block: str | None = None) -> str:
    recall = block or f'{{"recall_at_k": 1.0, "mrr": 1.0, "ndcg": {ndcg}}}'
    return f'{{"case_id": "{case_id}", "recall": {recall}}}'


def test_a_case_value_is_read_from_its_text(tmp_path: Path) -> None:
    result = compare(
        _file(tmp_path / "b.json", [_recall("c", TWO_ROUNDINGS)]),
        _file(tmp_path / "h.json", [_recall("c", "0.5")]),
    )
    out = tmp_path / "changes.jsonl"
    result.write_changes(out)
    record = json.loads(out.read_text(encoding="utf-8").splitlines()[1])
    [ndcg] = record["metrics"]
    assert ndcg["sides"] == {"base": 0.9134015924715544, "head": 0.5}
    assert ndcg["delta"] == 0.5 - 0.9134015924715544


def test_a_block_written_as_null_reads_as_absent(tmp_path: Path) -> None:
    base = [_recall("a", "0.5"), _recall("b", "0.5", block="null")]
    head = [_recall("a", "0.25"), _recall("b", "0.5")]
    result = compare(_file(tmp_path / "b.json", base), _file(tmp_path / "h.json", head))
    assert result.counts["regressed"] == 1
    assert any("case 'b': metric 'recall.ndcg' has a value on only one side" in warning
               for warning in result.warnings)  # fmt: skip


def test_a_number_taguru_cannot_read_is_refused(tmp_path: Path) -> None:
    """msgspec reads 17976931348623158e292 as the largest double; taguru's two
    roundings overflow, and serde refuses the file."""
    base = _file(tmp_path / "b.json", [_recall("a", "0.5"), _recall("c", "17976931348623158e292")])
    with pytest.raises(InputError) as caught:
        compare(base, base)
    assert caught.value.message == (
        f"BASE {base}: malformed evaluation.json: cases[1].recall.ndcg: number out of range"
    )
    assert caught.value.exit_code == 2


def test_a_value_that_is_no_number_keeps_its_message(tmp_path: Path) -> None:
    base = _file(tmp_path / "b.json", [_recall("a", '"0.5"')])
    with pytest.raises(InputError, match=r"cases\[0\]\.recall\.ndcg: expected `float \| null`"):
        compare(base, base)


def test_an_aggregate_is_read_from_its_text(tmp_path: Path) -> None:
    definitions = '{"recall.ndcg": {"statistic": "distribution"}}'
    base = _file(
        tmp_path / "b.json",
        [],
        metrics=f'{{"recall.ndcg": {{"n": 1, "mean": {TWO_ROUNDINGS}}}}}',
        definitions=definitions,
    )
    head = _file(
        tmp_path / "h.json",
        [],
        metrics='{"recall.ndcg": {"n": 1, "mean": 0.5}}',
        definitions=definitions,
    )
    [entry] = compare(base, head).metrics.to_dicts()
    assert (entry["base"], entry["head"]) == (0.9134015924715544, 0.5)
