"""compare and ``run --repeat``: a case unstable on either side is ``unstable``,
never regressed or improved; sides without stability verdicts compare as before.

The sides are evaluation.json documents built in memory (``support.documents``);
``with_stability`` adds what a repeated run writes. The stored-run reader is held
to the same result through ``ingest``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from support.documents import evaluation_document, with_stability, write_document

from taguru_eval.analyst import ingest
from taguru_eval.cli.compare import main
from taguru_eval.compare import compare

NOW = "2026-07-29T00:00:00Z"
TAGURU_KINDS = {"improved", "regressed", "added", "removed"}
DIFFERS = ["recall.recall_at_k", "recall.mrr"]


def lines(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header, *records = (json.loads(line) for line in text.splitlines())
    return header, records


def kinds(records: list[dict[str, Any]]) -> dict[str, str]:
    return {record["case_id"]: record["kind"] for record in records}


@pytest.fixture
def plain() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two runs whose cases move (every case of step 1 differs from step 0)."""
    return evaluation_document(step=0), evaluation_document(step=1)


def test_a_case_unstable_on_either_side_is_never_regressed_or_improved(
    plain: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    base_doc, head_doc = plain
    before = compare(base_doc, head_doc)
    moved = {cid: kind for cid, kind in kinds(before.records()).items()}
    assert set(moved.values()) <= TAGURU_KINDS and len(moved) >= 2
    noisy_base, noisy_head = sorted(moved)[:2]
    base = with_stability(base_doc, {noisy_base: DIFFERS})
    head = with_stability(head_doc, {noisy_head: ["diversity.sources"]})
    comparison = compare(base, head)
    header, records = lines(comparison.changes_jsonl(NOW))
    found = kinds(records)
    assert found[noisy_base] == found[noisy_head] == "unstable"
    # Every other case keeps its verdict.
    assert {cid: kind for cid, kind in found.items() if kind != "unstable"} == {
        cid: kind for cid, kind in moved.items() if cid not in (noisy_base, noisy_head)
    }
    record = next(r for r in records if r["case_id"] == noisy_base)
    assert list(record) == ["kind", "case_id", "metrics", "stability"]
    assert record["stability"] == {
        "base": {"repeats": 3, "unstable": True, "differs": DIFFERS},
        "head": {"repeats": 3, "unstable": False, "differs": []},
    }
    # The metric entries say what the first repetitions' values did, as §6.4 writes them.
    assert (
        record["metrics"]
        == next(r for r in before.records() if r["case_id"] == noisy_base)["metrics"]
    )
    # §6.9's counts keep their keys; the unstable cases are counted in their own block.
    assert list(header["counts"]) == [
        "improved",
        "regressed",
        "added",
        "removed",
        "unchanged",
        "cases_base",
        "cases_head",
    ]
    assert header["stability"] == {
        "unstable": 2,
        "base": {"repeats": 3, "unstable": 1},
        "head": {"repeats": 3, "unstable": 1},
    }
    counts = header["counts"]
    matched = 4
    assert counts["improved"] + counts["regressed"] + counts["unchanged"] + 2 == matched
    assert list(header).index("stability") == list(header).index("metrics") + 1
    summary = comparison.summary("changes.jsonl")
    assert (
        "  stability: 2 case(s) unstable on either side, not classified "
        "(BASE: 1 unstable over 3 repetition(s); HEAD: 1 unstable over 3 repetition(s))\n"
    ) in summary
    assert f"    unstable: {noisy_base} (BASE differs: recall.recall_at_k, recall.mrr; " in summary
    assert f"regressed: {noisy_base}" not in summary
    assert "1 unstable" not in repr(comparison) and "2 unstable" in repr(comparison)


def test_stable_sides_with_verdicts_classify_as_plain_ones(
    plain: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    base_doc, head_doc = plain
    before = compare(base_doc, head_doc)
    after = compare(with_stability(base_doc, {}), with_stability(head_doc, {}))
    assert after.records() == before.records()
    header, _ = lines(after.changes_jsonl(NOW))
    assert header["stability"] == {
        "unstable": 0,
        "base": {"repeats": 3, "unstable": 0},
        "head": {"repeats": 3, "unstable": 0},
    }


def test_sides_without_verdicts_compare_exactly_as_before(
    plain: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    base_doc, head_doc = plain
    comparison = compare(base_doc, head_doc)
    assert comparison.stability is None
    assert "unstable" not in comparison.counts
    header, records = lines(comparison.changes_jsonl(NOW))
    assert "stability" not in header
    assert all("stability" not in record for record in records)
    assert "stability" not in comparison.summary("changes.jsonl")


def test_one_repeated_side_is_enough_and_one_sided_cases_stay_added_or_removed(
    plain: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    base_doc, head_doc = plain
    head_doc = evaluation_document(step=1, case_ids=("alpha-001", "beta-002", "omega-009"))
    base = with_stability(base_doc, {"alpha-001": DIFFERS, "delta-004": DIFFERS})
    comparison = compare(base, head_doc)
    header, records = lines(comparison.changes_jsonl(NOW))
    found = kinds(records)
    assert found["alpha-001"] == "unstable"
    assert found["delta-004"] == "removed"  # unstable, but not on both sides: not comparable
    assert found["omega-009"] == "added"
    assert header["stability"] == {
        "unstable": 1,
        "base": {"repeats": 3, "unstable": 2},
        "head": None,
    }
    record = next(r for r in records if r["case_id"] == "alpha-001")
    assert record["stability"]["head"] is None
    assert "HEAD: no verdicts (not run with --repeat)" in comparison.summary("out")


def test_a_foreign_stability_member_is_read_leniently(
    plain: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    base_doc, head_doc = plain
    before = compare(base_doc, head_doc)
    odd = json.loads(json.dumps(base_doc))
    odd["cases"][0]["stability"] = "not ours"
    odd["cases"][1]["stability"] = {"unstable": 1, "differs": "recall.mrr"}
    comparison = compare(odd, head_doc)
    # An object is a verdict, but only "unstable": true makes a case unstable.
    assert comparison.records() == before.records()
    assert comparison.stability is not None and comparison.stability.unstable == 0
    odd["cases"][1]["stability"] = "still not ours"
    assert compare(odd, head_doc).stability is None


def test_a_stored_run_gives_the_same_changes_as_its_file(
    tmp_path: Path, plain: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    base_doc, head_doc = plain
    base = write_document(tmp_path / "base.json", with_stability(base_doc, {"beta-002": DIFFERS}))
    head = write_document(
        tmp_path / "head.json", with_stability(head_doc, {"gamma-003": ["coverage.concepts"]})
    )
    stored = [ingest.ingest(path, tmp_path / "runs").path for path in (base, head)]
    from_files = compare(base, head).changes_jsonl(NOW)
    from_store = compare(*stored, base_label=str(base), head_label=str(head)).changes_jsonl(NOW)
    assert from_store == from_files
    assert '"kind":"unstable","case_id":"beta-002"' in from_files
    assert '"kind":"unstable","case_id":"gamma-003"' in from_files


def test_the_command_line_writes_and_shows_the_unstable_cases(
    tmp_path: Path, plain: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    base_doc, head_doc = plain
    base = write_document(tmp_path / "base.json", with_stability(base_doc, {"beta-002": DIFFERS}))
    head = write_document(tmp_path / "head.json", with_stability(head_doc, {}))
    out, err = io.StringIO(), io.StringIO()
    code = main([str(base), str(head), "--out", str(tmp_path / "c.jsonl")], stdout=out, stderr=err)
    assert code == 0 and err.getvalue() == ""
    _, records = lines((tmp_path / "c.jsonl").read_text(encoding="utf-8"))
    assert kinds(records)["beta-002"] == "unstable"
    assert "    unstable: beta-002 (BASE differs: recall.recall_at_k, recall.mrr; HEAD" in (
        out.getvalue()
    )
