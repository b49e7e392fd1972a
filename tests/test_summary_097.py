"""The console summary's 0.9.7 lines from hand-made lane outputs (ERRATA rows 20, 21, 25).

The live comparison with taguru is ``tests/differential/test_outputs_097.py``;
these cover what a real server will not do on request: an association query
that errors and an evidence call that fails (listed under passage too), and the
must-refuse block of the project's own.
"""

from __future__ import annotations

import math
from typing import Any

from support.scoring import eval_case, run_cases, searched

from taguru_eval.artifact.read import calls_from_shapes
from taguru_eval.score.stats import distribution
from taguru_eval.summary import (
    FAILED_CASES_LISTED,
    failed_case_lines,
    must_refuse_failed_lines,
    wrote_line,
)
from taguru_eval.tables import build_tables
from taguru_eval.tables.shapes import LaneOutput


def _position(name: str) -> dict[str, Any]:
    return {"outcome": "resolved", "name": name, "tier": "exact", "latency_ms": 1}


def _output(index: int, **lanes: Any) -> LaneOutput:
    output: dict[str, Any] = {
        "case_index": index,
        "case_id": f"c{index}",
        "query": "q",
        "cues": [],
        "limit": 10,
        "passage": searched([]),
        "checks": [],
        **lanes,
    }
    output["calls"] = calls_from_shapes(output)
    return output  # type: ignore[return-value]


def _errored_query(message: str) -> dict[str, Any]:
    return {
        "subject_cue": "a",
        "label_cue": "b",
        "object_cue": "c",
        "subject": _position("a"),
        "label": _position("b"),
        "object": _position("c"),
        "query": {"outcome": "errored", "message": message, "latency_ms": 1},
    }


def _unresolved(source: str, paragraph: int, code: str | None) -> dict[str, Any]:
    return {"source": source, "paragraph": paragraph, "served": False, "outcome": "unresolved",
            "code": code, "message": f"{source} gone", "latency_ms": 1}  # fmt: skip


def test_each_lane_in_its_order_capped_at_three() -> None:
    failed = {"outcome": "failed", "message": "package refused", "latency_ms": 1}
    fine = {"cues": [], "associations": []}
    outputs = [
        _output(0, checks=[_unresolved("b.md", 4, None), _unresolved("a.md", 1, "no_source")]),
        _output(
            1,
            structural={
                "cues": [],
                "associations": [_errored_query("first"), _errored_query("second")],
            },
        ),
        _output(2, passage=failed, evidence=failed),
        *[
            _output(3 + n, passage={**failed, "message": f"down {n}"}, structural=fine)
            for n in range(4)
        ],
    ]
    lines = failed_case_lines(build_tables(outputs, "run"))
    assert lines == [
        "    passage failed — case 'c2': package refused",
        "    passage failed — case 'c3': down 0",
        "    passage failed — case 'c4': down 1",
        "    ... and 2 more passage failure(s) (every one is in evaluation.json)",
        "    structural query failed — case 'c1': associations[0]: first",
        "    structural query failed — case 'c1': associations[1]: second",
        "    citation failed — case 'c0': b.md paragraph 4: no code: b.md gone",
        "    citation failed — case 'c0': a.md paragraph 1: no_source: a.md gone",
        "    evidence failed — case 'c2': package refused",
    ]
    assert FAILED_CASES_LISTED == 3


def test_a_run_without_failures_adds_nothing() -> None:
    assert failed_case_lines(build_tables([_output(0), _output(1)], "run")) == []


def test_the_wrote_line_names_where_failures_live() -> None:
    assert wrote_line("out/evaluation.json") == (
        "  wrote out/evaluation.json — per-case failures under cases[].passage.message "
        "(outcome: failed), cases[].structural.associations[].query.message (outcome: "
        "errored), cases[].citations.checks[].message (outcome: unresolved), "
        "cases[].evidence.message (outcome: failed)"
    )


def _refusal(case_id: str, verdict: str, **probe: Any) -> dict[str, Any]:
    return {"case_id": case_id, "verdict": verdict, **probe}


def test_failed_must_refuse_probes_get_their_own_capped_block() -> None:
    block = {
        "cases": [
            _refusal("r0", "abstained", passage={"outcome": "searched"}),
            _refusal(
                "r1",
                "failed",
                reason="request_failed",
                passage={"outcome": "failed", "message": "503 busy"},
            ),
            _refusal(
                "r2",
                "failed",
                reason="resolve_failed",
                passage={"outcome": "searched"},
                structural={"cues": [{"cue": "x"}, {"cue": "y", "error": "cue refused"}]},
            ),
            _refusal(
                "r3",
                "failed",
                reason="unparseable_response",
                evidence={"outcome": "failed", "message": "no package"},
            ),
            _refusal("r4", "failed", reason="request_failed", passage={"message": "timed out"}),
        ]
    }
    assert must_refuse_failed_lines(block) == [
        "    must-refuse failed — case 'r1': request_failed: 503 busy",
        "    must-refuse failed — case 'r2': resolve_failed: cue refused",
        "    must-refuse failed — case 'r3': unparseable_response: no package",
        "    ... and 1 more must-refuse failure(s) (every one is in evaluation.json's "
        "abstention.cases)",
    ]
    assert must_refuse_failed_lines({"cases": block["cases"][:1]}) == []


def _negative(value: float | None) -> bool:
    return value == 0.0 and math.copysign(1.0, value) < 0


def test_an_all_missed_ndcg_is_negative_zero() -> None:
    """Row 25: DCG sums the matched gains from -0.0, and nothing matched."""
    missed = eval_case(case_id="m", expected_sources=[{"source": "a.md", "relevance": 2}])
    found = eval_case(case_id="f", expected_sources=[{"source": "a.md", "relevance": 1}])
    hit = {"source": "a.md", "paragraph": 0, "score": 1.0, "lanes": {}}
    other = {"source": "b.md", "paragraph": 0, "score": 1.0, "lanes": {}}
    blocks, metrics = run_cases(
        [(missed, searched([other]), None, []), (found, searched([other, hit]), None, [])]
    )
    assert _negative(blocks[0]["recall"]["ndcg"])
    assert blocks[1]["recall"]["ndcg"] > 0
    ndcg = metrics["recall.ndcg"]
    assert _negative(ndcg["min"]) and _negative(ndcg["p50"])
    assert ndcg["mean"] > 0 and ndcg["sum"] > 0
    blocks, metrics = run_cases([(missed, searched([other]), None, [])] * 2)
    assert all(_negative(metrics["recall.ndcg"][key]) for key in ("min", "max", "mean", "sum"))
    # recall@k and MRR of a miss stay +0.0, as taguru's literals are.
    assert math.copysign(1.0, blocks[0]["recall"]["mrr"]) > 0


def test_the_distribution_sum_starts_from_negative_zero() -> None:
    assert _negative(distribution([-0.0, -0.0, -0.0])["sum"])
    assert not _negative(distribution([-0.0, 0.0])["sum"])
    assert distribution([-0.0, 0.5])["sum"] == 0.5
    assert distribution([])["sum"] is None
