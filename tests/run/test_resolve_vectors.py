"""resolve.json: the server-side checks ``resolve`` and ``entry_index`` (HTTP.md §6.6, §9.6).

The file's other checks, ``top_tier`` and ``classify_position``, are evaluate's
client-side reading of a response (EVALUATE.md §3.5); they belong to the lane
code, not to the reference server, and are exercised by the lane tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.vectors import vector_cases, vector_doc

from taguru_refserver.resolve import (
    DEFAULT_DICE_FLOOR,
    MAX_RESOLVE_LIMIT,
    AliasConflict,
    Candidate,
    EntryIndex,
    SpellingIndex,
    UnknownName,
)

SERVER_CHECKS = {"resolve", "entry_index"}
CLIENT_CHECKS = {"top_tier", "classify_position"}
RESOLVE_KEYS = {
    "candidates",
    "prefix",
    "tolerance",
    "names",
    "len",
    "empty",
    "contains_names",
    "excludes_names",
}
ENTRY_INDEX_KEYS = {"len", "targets", "all_targets"}


def test_every_check_is_accounted_for() -> None:
    checks = {case["check"] for case in vector_doc("resolve")["cases"]}
    assert checks == SERVER_CHECKS | CLIENT_CHECKS


def _namespace(given: dict[str, Any]) -> EntryIndex:
    index = EntryIndex()
    if given["namespace"] == "concept":
        names, aliases = given["concepts"], given.get("concept_aliases", {})
    else:
        names, aliases = given["labels"], given.get("label_aliases", {})
    for name in names:
        index.add(name)
    for alias, canonical in aliases.items():
        index.add_alias(alias, canonical)
    return index


def _check_candidate(want: dict[str, Any], have: Candidate, tolerance: float) -> None:
    for key, value in want.items():
        if key == "score_approx":
            assert abs(have.score - value) < tolerance
        elif key == "score_between":
            low, high = value
            assert low < have.score < high
        elif key in ("name", "score", "kind"):
            assert getattr(have, key) == value
        else:
            pytest.fail(f"unhandled prefix key {key!r}")


@pytest.mark.parametrize("case", vector_cases("resolve", "resolve"))
def test_resolve_vector(case: dict[str, Any]) -> None:
    given, expected = case["input"], case["expected"]
    unknown = set(expected) - RESOLVE_KEYS
    assert not unknown, f"unhandled expected keys {unknown}"
    floor = given.get("dice_floor", DEFAULT_DICE_FLOOR)
    got = _namespace(given).resolve(given["cue"], MAX_RESOLVE_LIMIT, floor)
    names = [candidate.name for candidate in got]
    assert all(candidate.tier == "lexical" for candidate in got)
    if "candidates" in expected:
        assert [{"name": c.name, "score": c.score, "kind": c.kind} for c in got] == expected[
            "candidates"
        ]
    if "prefix" in expected:
        assert len(got) >= len(expected["prefix"])
        for want, have in zip(expected["prefix"], got, strict=False):
            _check_candidate(want, have, expected.get("tolerance", 1e-9))
    if "names" in expected:
        assert names == expected["names"]
    if "len" in expected:
        assert len(got) == expected["len"]
    if "empty" in expected:
        assert (got == []) is expected["empty"]
    for name in expected.get("contains_names", []):
        assert name in names
    for name in expected.get("excludes_names", []):
        assert name not in names


@pytest.mark.parametrize("case", vector_cases("resolve", "entry_index"))
def test_entry_index_vector(case: dict[str, Any]) -> None:
    given, expected = case["input"], case["expected"]
    unknown = set(expected) - ENTRY_INDEX_KEYS
    assert not unknown, f"unhandled expected keys {unknown}"
    index = SpellingIndex()
    for spelling, target in given["spellings"]:
        index.add(spelling, target)
    got = {
        str(target): {"score": found.score, "kind": found.kind}
        for target, found in index.match(given["cue"], given["dice_floor"]).items()
    }
    if "len" in expected:
        assert len(got) == expected["len"]
    for target, want in expected.get("targets", {}).items():
        assert got[target] == want
    if "all_targets" in expected:
        assert got == expected["all_targets"]


def _sample() -> EntryIndex:
    index = EntryIndex()
    for name in ["京都", "東京都", "青嶺酒造"]:
        index.add(name)
    return index


def test_limit_cuts_after_sorting() -> None:
    index = _sample()
    assert [c.name for c in index.resolve("京都", 1)] == ["京都"]
    assert index.resolve("京都", 0) == []


def test_alias_binding_rules() -> None:
    index = _sample()
    index.add_alias("Kyoto", "京都")
    index.add_alias("Kyoto", "京都")  # the same binding again is fine
    index.add_alias("KYOTO-city", "Kyoto")  # resolves through an alias
    assert index.lookup("KYOTO-city") == "京都"
    assert index.aliases() == {"KYOTO-city": "京都", "Kyoto": "京都"}
    with pytest.raises(AliasConflict):
        index.add_alias("Kyoto", "東京都")
    with pytest.raises(AliasConflict):
        index.add_alias("東京都", "京都")
    with pytest.raises(UnknownName):
        index.add_alias("Osaka", "大阪")
    with pytest.raises(AliasConflict):
        index.remove_alias("京都")  # a canonical name is not an alias
    index.remove_alias("Kyoto")
    # Only the longer alias still holds "kyoto": a containment, no longer an alias hit.
    assert [(c.name, c.kind) for c in index.resolve("Kyoto", 5)] == [("京都", "containment")]
    index.remove_alias("KYOTO-city")
    assert index.resolve("Kyoto", 5) == []
    with pytest.raises(AliasConflict):
        index.remove_alias("Kyoto")


def test_candidate_wire_shape_in_key_order() -> None:
    candidate = Candidate(name="京都", score=1.0, kind="alias")
    assert list(candidate.to_wire().items()) == [
        ("name", "京都"),
        ("score", 1.0),
        ("tier", "lexical"),
        ("kind", "alias"),
    ]
    glossed = Candidate(name="京都", score=1.0, kind="exact", gloss="京都。位置は関西。")
    assert glossed.to_wire()["gloss"] == "京都。位置は関西。"
