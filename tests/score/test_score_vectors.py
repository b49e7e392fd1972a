"""Conformance vectors for scoring (EVALUATE.md §3.6, §4, §5.2).

Every vector input goes through the production path: the case is loaded by
the eval.jsonl loader, the lane shapes become a LaneOutput, then
``build_tables`` -> ``score_run`` -> ``artifact.case_block``. Nothing here
re-implements a metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from support.scoring import FAILED_PASSAGE, eval_case, run_cases, score_one, searched
from support.vectors import vector_cases

from taguru_eval.run.lanes.citations import citation_check, quote_matches, section_check, served_set
from taguru_eval.score.aggregate import lane_cross_line


def assert_subset(have: Any, want: Any, where: str = "") -> None:
    """Every key of ``want`` is in ``have`` with an equal value (recursively for objects)."""
    if isinstance(want, Mapping):
        assert isinstance(have, Mapping), f"{where}: expected an object, got {have!r}"
        for key, value in want.items():
            assert key in have, f"{where}.{key} missing in {have!r}"
            assert_subset(have[key], value, f"{where}.{key}")
    else:
        assert have == want and type(have) is type(want), f"{where}: {have!r} != {want!r}"


def assert_block(have: Any, want: Any, tolerance: Mapping[str, float], where: str) -> None:
    """Compare a block with ``*_approx`` / ``*_less_than`` keys; full blocks also by key order."""
    if want is None:
        assert have is None, f"{where}: expected no block, got {have!r}"
        return
    assert isinstance(have, Mapping), f"{where}: expected a block, got {have!r}"
    plain = {k: v for k, v in want.items() if not k.endswith(("_approx", "_less_than"))}
    for key, value in want.items():
        if key.endswith("_approx"):
            field = key[: -len("_approx")]
            assert abs(have[field] - value) <= tolerance.get(key, 1e-9), (where, key, have[field])
        elif key.endswith("_less_than"):
            field = key[: -len("_less_than")]
            assert have[field] < value, (where, key, have[field])
    assert_subset(have, plain, where)
    if len(plain) == len(want) and set(plain) == set(have):
        assert list(have) == list(plain), f"{where}: key order {list(have)} != {list(plain)}"


# --------------------------------------------------------------------------- recall_scoring


def _recall_block(inputs: Mapping[str, Any]) -> Any:
    case = eval_case(expected_sources=inputs["expected_sources"])
    return score_one(case, searched(inputs["hits"]), None, []).get("recall")


_RECALL_CASES = {c.values[0]["name"]: c.values[0] for c in vector_cases("recall_scoring")}


@pytest.mark.parametrize("case", vector_cases("recall_scoring"))
def test_recall_scoring(case: dict[str, Any]) -> None:
    expected = case["expected"]
    unknown = set(expected) - {"recall", "tolerance", "same_block_as_case"}
    assert not unknown, f"unknown expected keys {unknown}"
    block = _recall_block(case["input"])
    if "recall" in expected:
        assert_block(block, expected["recall"], expected.get("tolerance", {}), "recall")
    if "same_block_as_case" in expected:
        other = _RECALL_CASES[expected["same_block_as_case"]]
        assert block == _recall_block(other["input"])
        assert block is not None


# --------------------------------------------------------------------------- coverage


@pytest.mark.parametrize("case", vector_cases("coverage", "coverage_counts"))
def test_coverage_counts(case: dict[str, Any]) -> None:
    expected = case["expected"]
    assert set(expected) <= {"block"}, f"unknown expected keys {set(expected)}"
    resolutions = case["input"]["resolutions"]
    kind = resolutions[0]["kind"] if resolutions else "concept"
    field = {"concept": "expected_concepts", "label": "expected_labels"}[kind]
    structural = {"cues": resolutions, "associations": []}
    block = score_one(eval_case(**{field: case["input"]["expected"]}), searched([]), structural, [])
    sub = (block.get("coverage") or {}).get({"concept": "concepts", "label": "labels"}[kind])
    assert_block(sub, expected["block"], {}, "coverage")


@pytest.mark.parametrize("case", vector_cases("coverage", "association_coverage"))
def test_association_coverage(case: dict[str, Any]) -> None:
    expected = case["expected"]
    assert set(expected) <= {"block"}, f"unknown expected keys {set(expected)}"
    probes = case["input"]["probes"]
    declared = [
        {"subject": p["subject_cue"], "label": p["label_cue"], "object": p["object_cue"]}
        for p in probes
    ]
    structural = {"cues": [], "associations": probes}
    block = score_one(eval_case(expected_associations=declared), searched([]), structural, [])
    sub = (block.get("coverage") or {}).get("associations")
    assert_block(sub, expected["block"], {}, "coverage.associations")


# --------------------------------------------------------------------------- citations


def _citations_block(checks: list[Any]) -> dict[str, Any]:
    declared = [{"source": c["source"], "paragraph": c["paragraph"]} for c in checks]
    block = score_one(eval_case(expected_citations=declared), searched([]), None, checks)
    citations: dict[str, Any] = block["citations"]
    return citations


@pytest.mark.parametrize("case", vector_cases("citations", "section"))
def test_citation_section(case: dict[str, Any]) -> None:
    inputs, expected = case["input"], case["expected"]
    got = section_check(
        "expected_section" in inputs, inputs.get("expected_section"), inputs.get("actual")
    )
    unknown = set(expected) - {"section", "section_check"}
    assert not unknown, f"unknown expected keys {unknown}"
    if "section" in expected:
        assert got == expected["section"] and list(got) == list(expected["section"])
    if "section_check" in expected:
        assert got["check"] == expected["section_check"]


@pytest.mark.parametrize("case", vector_cases("citations", "quote"))
def test_citation_quote(case: dict[str, Any]) -> None:
    assert set(case["expected"]) <= {"matched"}
    assert (
        quote_matches(case["input"]["quote"], case["input"]["text"]) is case["expected"]["matched"]
    )


@pytest.mark.parametrize("case", vector_cases("citations", "valid"))
def test_citation_valid(case: dict[str, Any]) -> None:
    assert set(case["expected"]) <= {"valid"}
    block = _citations_block([case["input"]["check"]])
    assert block["validity"]["valid"] == (1 if case["expected"]["valid"] else 0)


@pytest.mark.parametrize("case", vector_cases("citations", "recall"))
def test_citation_recall(case: dict[str, Any]) -> None:
    assert set(case["expected"]) <= {"block"}
    got = _citations_block(case["input"]["checks"])["recall"]
    assert_block(got, case["expected"]["block"], {}, "citations.recall")


@pytest.mark.parametrize("case", vector_cases("citations", "validity"))
def test_citation_validity(case: dict[str, Any]) -> None:
    assert set(case["expected"]) <= {"block"}
    got = _citations_block(case["input"]["checks"])["validity"]
    assert_block(got, case["expected"]["block"], {}, "citations.validity")


@pytest.mark.parametrize("case", vector_cases("citations", "served"))
def test_served_set(case: dict[str, Any]) -> None:
    expected = case["expected"]
    unknown = set(expected) - {"served", "contains"}
    assert not unknown, f"unknown expected keys {unknown}"
    got = sorted(
        [
            list(pair)
            for pair in served_set(case["input"]["passage"], case["input"].get("structural"))
        ]
    )
    if "served" in expected:
        assert got == expected["served"]
    for member in expected.get("contains", []):
        assert member in got


@pytest.mark.parametrize("case", vector_cases("citations", "score_case_citations"))
def test_score_case_citations(case: dict[str, Any]) -> None:
    inputs, expected = case["input"], case["expected"]
    assert set(expected) <= {"citations"}, f"unknown expected keys {set(expected)}"
    block = score_one(inputs["case"], inputs["passage"], inputs["structural"], inputs["checks"])
    if expected["citations"] is None:
        assert "citations" not in block
    else:
        assert_subset(block["citations"], expected["citations"], "citations")
        if not case.get("derived"):
            return
        assert block["citations"] == expected["citations"]
        assert list(block["citations"]) == list(expected["citations"])


@pytest.mark.parametrize("case", vector_cases("citations", "citation_check"))
def test_citation_check(case: dict[str, Any]) -> None:
    inputs, expected = case["input"], case["expected"]
    assert set(expected) <= {"check"}, f"unknown expected keys {set(expected)}"
    cited = inputs["expected_citation"]
    served = {(source, paragraph) for source, paragraph in inputs["served"]}
    got = citation_check(
        source=cited["source"],
        paragraph=cited["paragraph"],
        section_expected_present="section" in cited,
        section_expected=cited.get("section"),
        quote=cited.get("quote"),
        served=(cited["source"], cited["paragraph"]) in served,
        response=inputs["response"],
        latency_ms=7,
    )
    assert "text" not in got
    assert got["latency_ms"] == 7
    without_latency = {k: v for k, v in got.items() if k != "latency_ms"}
    assert_subset(without_latency, expected["check"], "check")
    if case.get("derived"):
        assert without_latency == expected["check"]
        assert list(without_latency) == list(expected["check"])


# --------------------------------------------------------------------------- missed


@pytest.mark.parametrize("case", vector_cases("missed"))
def test_missed(case: dict[str, Any]) -> None:
    inputs, expected = case["input"], case["expected"]
    unknown = set(expected) - {
        "missed",
        "len",
        "contains",
        "any_contains",
        "entries_differ",
        "missed_truncated",
    }
    assert not unknown, f"unknown expected keys {unknown}"
    passage = FAILED_PASSAGE if inputs["hits"] is None else searched(inputs["hits"])
    structural = inputs["structural"]
    resolutions = inputs["concept_resolutions"] + inputs["label_resolutions"]
    if structural is None and resolutions:
        structural = {"cues": resolutions, "associations": []}
    block = score_one(inputs["case"], passage, structural, inputs["checks"])
    missed = block["missed"]
    if "missed" in expected:
        assert missed == expected["missed"]
    if "len" in expected:
        assert len(missed) == expected["len"]
    for index, fragment in expected.get("contains", []):
        assert fragment in missed[index]
    if "any_contains" in expected:
        assert any(expected["any_contains"] in entry for entry in missed)
    if "entries_differ" in expected:
        first, second = expected["entries_differ"]
        assert missed[first] != missed[second]
    if "missed_truncated" in expected:
        assert block["missed_truncated"] == expected["missed_truncated"]


# --------------------------------------------------------------------------- lane_cross


@pytest.mark.parametrize("case", vector_cases("lane_cross", "score_case"))
def test_lane_cross_score_case(case: dict[str, Any]) -> None:
    inputs, expected = case["input"], case["expected"]
    unknown = set(expected) - {
        "lane_cross",
        "recall_present",
        "coverage_present",
        "recall",
        "coverage",
        "missed",
    }
    assert not unknown, f"unknown expected keys {unknown}"
    block = score_one(inputs["case"], inputs["passage"], inputs["structural"], inputs["checks"])
    if "lane_cross" in expected:
        assert block.get("lane_cross") == expected["lane_cross"]
    if "recall_present" in expected:
        assert ("recall" in block) is expected["recall_present"]
    if "coverage_present" in expected:
        assert ("coverage" in block) is expected["coverage_present"]
    if "recall" in expected:
        assert_block(block.get("recall"), expected["recall"], {}, "recall")
    if "coverage" in expected:
        if expected["coverage"] is None:
            assert "coverage" not in block
        else:
            assert_subset(block["coverage"], expected["coverage"], "coverage")
    if "missed" in expected:
        assert block["missed"] == expected["missed"]


def _case_with_lane_cross(cross: Mapping[str, bool] | None) -> tuple[Any, Any, Any, list[Any]]:
    """A real case whose scoring yields the given lane_cross block (None: undeclared)."""
    if cross is None:
        return eval_case(), searched([]), None, []
    case = eval_case(
        expected_sources=[{"source": "a.md", "paragraphs": [], "relevance": 1}],
        expected_concepts=["x"],
    )
    hits = [{"source": "a.md", "paragraph": 0, "score": 0.5, "lanes": {}}]
    names = ["x"] if cross["structural_hit"] else ["y"]
    structural = {
        "cues": [
            {
                "cue": "q",
                "kind": "concept",
                "resolved_names": names,
                "tier": "lexical",
                "limit": 5,
                "latency_ms": 1,
            }
        ],
        "associations": [],
    }
    return case, searched(hits if cross["passage_hit"] else []), structural, []


@pytest.mark.parametrize("case", vector_cases("lane_cross", "tab"))
def test_lane_cross_tab(case: dict[str, Any]) -> None:
    expected = case["expected"]
    unknown = set(expected) - {"counts", "line", "line_contains", "ratios"}
    assert not unknown, f"unknown expected keys {unknown}"
    entries = [_case_with_lane_cross(cross) for cross in case["input"]["cases"]]
    blocks, metrics = run_cases(entries)
    assert [b.get("lane_cross") for b in blocks] == case["input"]["cases"]
    if "counts" in expected:
        counts = {
            "n": metrics["lanes.both"]["n"],
            **{
                name: metrics[f"lanes.{name}"]["numerator"] or 0
                for name in ("structural_hit", "passage_hit", "both", "neither")
            },
        }
        assert counts == expected["counts"]
    line = lane_cross_line(metrics)
    if "line" in expected:
        assert line == expected["line"]
    for fragment in expected.get("line_contains", []):
        assert line is not None and fragment in line
    for name, want in expected.get("ratios", {}).items():
        assert_subset(metrics[name], want, name)
