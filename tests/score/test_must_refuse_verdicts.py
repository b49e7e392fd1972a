"""Must-refuse verdicts as Polars expressions over the tables (ABSTENTION.md §3.5–§3.7).

The frames are built by hand, one row per situation the verdict table names,
so every branch of the rules is pinned without a server.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from taguru_eval.gate import evaluate_gate
from taguru_eval.inputs.thresholds import Bound, Thresholds
from taguru_eval.options import RefusalRule
from taguru_eval.score.abstention import (
    ProbeRule,
    evidence_rule,
    membership,
    membership_metrics,
    passage_rule,
    refusal_cases,
)
from taguru_eval.tables import RunTables, metrics_frame

# case -> (passage_outcome, plan_context, bm25_ran, vector_ran, eligible, http_status)
LANES: dict[str, tuple[Any, ...]] = {
    "failed-transport": ("failed", None, None, None, None, None),
    "failed-parse": ("failed", None, None, None, None, 200),
    "no-plan": ("searched", None, None, None, None, 200),
    "skipped": ("searched", "c", False, False, None, 200),
    "no-eligible": ("searched", "c", True, True, 0, 200),
    "vector-off": ("searched", "c", True, False, None, 200),
    "bm25-only": ("searched", "c", True, True, 3, 200),
    "vector-hit": ("searched", "c", True, True, None, 200),
    "empty": ("searched", "c", True, True, None, 200),
}
# case -> vector_rank of each served hit (None: BM25 only)
HITS: dict[str, list[int | None]] = {
    "no-plan": [None],
    "vector-off": [None, None],
    "bm25-only": [None, None],
    "vector-hit": [None, 1],
}


def tables(
    kinds: dict[str, str] | None = None, cues: dict[str, list[Any]] | None = None
) -> RunTables:
    """Must-refuse tables: every case of LANES, hits of HITS, cue rows of ``cues``
    (case -> list of (name or None, error or None) per cue)."""
    cases = list(LANES)
    lanes = pl.DataFrame(
        [
            {
                "run_id": "r",
                "case_index": index,
                "case_id": case,
                "kind": (kinds or {}).get(case, "out_of_corpus"),
                "passage_outcome": LANES[case][0],
                "plan_context": LANES[case][1],
                "plan_bm25_ran": LANES[case][2],
                "plan_vector_ran": LANES[case][3],
                "plan_filter_eligible_sources": LANES[case][4],
                "structural_ran": case in (cues or {}),
            }
            for index, case in enumerate(cases)
        ]
    )
    calls = pl.DataFrame(
        [
            {
                "case_index": index,
                "case_id": case,
                "lane": "passage",
                "http_status": LANES[case][5],
                "population": "must_refuse",
            }
            for index, case in enumerate(cases)
        ]
    )
    hits = pl.DataFrame(
        [
            {
                "case_index": cases.index(case),
                "case_id": case,
                "rank": rank,
                "vector_rank": vector,
                "population": "must_refuse",
            }
            for case, ranks in HITS.items()
            for rank, vector in enumerate(ranks)
        ]
    )
    resolutions = pl.DataFrame(
        [
            {
                "case_index": cases.index(case),
                "case_id": case,
                "cue_index": cue_index,
                "name": name,
                "error": error,
                "population": "must_refuse",
            }
            for case, rows in (cues or {}).items()
            for cue_index, (name, error) in enumerate(rows)
        ],
        schema={
            "case_index": pl.Int32,
            "case_id": pl.String,
            "cue_index": pl.Int32,
            "name": pl.String,
            "error": pl.String,
            "population": pl.String,
        },
    )
    return RunTables.from_frames(
        "r", {"refusal_lanes": lanes, "calls": calls, "hits": hits, "resolutions": resolutions}
    )


def verdict_map(
    frame: pl.DataFrame, verdict: str = "verdict", reason: str = "reason"
) -> dict[str, Any]:
    ids = list(LANES)
    return {
        ids[index]: (v, r)
        for index, v, r in frame.select("case_index", verdict, reason).iter_rows()
    }


def test_the_semantic_passage_rule() -> None:
    run = tables()
    frame = passage_rule(run.refusal_lanes, run.hits, run.calls, "semantic")
    assert verdict_map(frame) == {
        "failed-transport": ("failed", "request_failed"),
        "failed-parse": ("failed", "unparseable_response"),
        "no-plan": ("undetermined", "no_plan"),
        "skipped": ("undetermined", "lanes_skipped"),
        "no-eligible": ("undetermined", "no_eligible_sources"),
        "vector-off": ("undetermined", "vector_lane_not_run"),
        "bm25-only": ("abstained", None),
        "vector-hit": ("surfaced", "passage_vector_hit"),
        "empty": ("abstained", None),
    }
    counts = {
        row[0]: row[1:]
        for row in frame.select(
            "case_index", "hits_served", "vector_hits", "bm25_only_hits"
        ).iter_rows()
    }
    assert counts[list(LANES).index("vector-hit")] == (2, 1, 1)
    assert counts[list(LANES).index("bm25-only")] == (2, 0, 2)


def test_the_any_passage_rule() -> None:
    run = tables()
    frame = passage_rule(run.refusal_lanes, run.hits, run.calls, "any")
    assert verdict_map(frame) == {
        "failed-transport": ("failed", "request_failed"),
        "failed-parse": ("failed", "unparseable_response"),
        "no-plan": ("surfaced", "passage_hit"),
        "skipped": ("undetermined", "lanes_skipped"),
        "no-eligible": ("undetermined", "no_eligible_sources"),
        "vector-off": ("surfaced", "passage_hit"),
        "bm25-only": ("surfaced", "passage_hit"),
        "vector-hit": ("surfaced", "passage_hit"),
        "empty": ("abstained", None),
    }


def test_case_verdicts_are_an_and_over_the_probes() -> None:
    cues = {
        # A structural candidate surfaces even where the passage probe abstained.
        "empty": [(None, None), ("Landlord", None)],
        # A failed resolve with nothing surfaced fails the case...
        "bm25-only": [(None, "boom")],
        # ...but an undetermined passage probe and an abstaining cue stay undetermined.
        "vector-off": [(None, None)],
        # A surfacing passage probe wins over a failed cue.
        "vector-hit": [(None, "boom")],
    }
    frame = refusal_cases(tables(cues=cues), ProbeRule("semantic"))
    by_case = {row["case_id"]: row for row in frame.iter_rows(named=True)}
    assert (by_case["empty"]["verdict"], by_case["empty"]["surfaced_by"]) == (
        "surfaced",
        "structural",
    )
    assert by_case["empty"]["reason"] == "structural_candidate"
    assert (by_case["empty"]["cues_surfaced"], by_case["empty"]["cues_failed"]) == (1, 0)
    assert (by_case["bm25-only"]["verdict"], by_case["bm25-only"]["reason"]) == (
        "failed",
        "resolve_failed",
    )
    assert by_case["vector-off"]["verdict"] == "undetermined"
    assert by_case["vector-off"]["structural_verdict"] == "abstained"
    assert (by_case["vector-hit"]["verdict"], by_case["vector-hit"]["surfaced_by"]) == (
        "surfaced",
        "passage",
    )
    assert by_case["skipped"]["structural_verdict"] is None
    assert by_case["failed-transport"]["verdict"] == "failed"


def answerable(rows: list[tuple[str, str | None, bool | None, bool | None]]) -> pl.DataFrame:
    """An eval ``cases`` frame: (case_id, answerability_verdict, offered, supported)."""
    return pl.DataFrame(
        [
            {
                "case_index": index,
                "case_id": case_id,
                "answerability_verdict": verdict,
                "offered": offered,
                "supported": supported,
            }
            for index, (case_id, verdict, offered, supported) in enumerate(rows)
        ],
        schema={
            "case_index": pl.Int32,
            "case_id": pl.String,
            "answerability_verdict": pl.String,
            "offered": pl.Boolean,
            "supported": pl.Boolean,
        },
    )


def test_every_metric_has_its_own_denominator() -> None:
    kinds = {"bm25-only": "adjacent", "vector-hit": "adjacent", "empty": "out_of_corpus"}
    refusals = refusal_cases(tables(kinds=kinds), ProbeRule("semantic"))
    cases = answerable(
        [
            ("a", "surfaced", True, True),
            ("b", "surfaced", True, False),
            ("c", "abstained", False, True),
            ("d", "abstained", False, False),
            ("e", "undetermined", None, True),
            ("outside", None, None, None),
        ]
    )
    metrics = membership_metrics(membership(refusals, cases))
    # M = 9 cases: 2 failed, 4 undetermined, 2 abstained, 1 surfaced.
    assert metrics["abstention.refusal_rate"] == {"value": 2 / 3, "n": 3, "numerator": 2}
    assert metrics["abstention.false_answers"] == {"value": 1.0, "n": 3}
    assert metrics["abstention.undetermined_rate"] == {"value": 4 / 9, "n": 9, "numerator": 4}
    assert metrics["abstention.failure_rate"] == {"value": 2 / 9, "n": 9, "numerator": 2}
    assert metrics["abstention.adjacent.refusal_rate"] == {"value": 0.5, "n": 2, "numerator": 1}
    assert metrics["abstention.out_of_corpus.refusal_rate"] == {
        "value": 1.0,
        "n": 1,
        "numerator": 1,
    }
    assert metrics["abstention.structural.refusal_rate"] == {
        "value": None,
        "n": 0,
        "numerator": None,
    }
    # A = 5 answerable cases, DA = 4 determinate: one population, a full partition.
    parts = ["supported_rate", "unsupported_offer_rate", "false_refusal_rate"]
    shares = [metrics[f"answerability.{part}"] for part in parts]
    assert [share["n"] for share in shares] == [4, 4, 4]
    assert sum(share["numerator"] for share in shares) == 4
    assert metrics["answerability.offered_rate"] == {"value": 0.5, "n": 4, "numerator": 2}
    assert metrics["answerability.supported_when_offered"] == {"value": 0.5, "n": 2, "numerator": 1}
    assert metrics["answerability.refused_with_expected_present"] == {"value": 1.0, "n": 2}
    assert metrics["answerability.undetermined_rate"] == {"value": 0.2, "n": 5, "numerator": 1}


def test_empty_populations_are_null_never_zero() -> None:
    empty = refusal_cases(RunTables.from_frames("r", {}), ProbeRule("semantic"))
    metrics = membership_metrics(membership(empty, answerable([])))
    assert metrics["abstention.false_answers"] == {"value": None, "n": 0}
    assert metrics["abstention.refusal_rate"] == {"value": None, "n": 0, "numerator": None}


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (Bound(min=1.0), " — cases: m00, m01, m02, m03, m04, m05, m06, m07, m08, m09 (and 2 more)"),
        (Bound(max=0.0), " — cases: m12"),
    ],
)
def test_a_violated_bound_names_the_cases_behind_it(bound: Bound, expected: str) -> None:
    # 12 surfaced cases and one abstained: refusal_rate 1/13.
    members = pl.DataFrame(
        {
            "metric": ["abstention.refusal_rate"] * 13,
            "case_index": list(range(13)),
            "case_id": [f"m{index:02d}" for index in range(13)],
            "counted": [False] * 12 + [True],
        }
    )
    metrics = membership_metrics(members)
    thresholds = Thresholds(sha256="s", aggregate={"abstention.refusal_rate": bound})
    report = evaluate_gate(
        thresholds,
        metrics_frame(metrics, "r", {name: "ratio" for name in metrics}),
        pl.DataFrame(schema={"case_id": pl.String, "metric": pl.String, "value": pl.Float64}),
        stable=True,
        members=members,
    )
    (violation,) = report.violations
    operator = "<" if bound.min is not None else ">"
    side = "min" if bound.min is not None else "max"
    threshold = bound.min if bound.min is not None else bound.max
    assert violation.reason == f"{1 / 13:.6f} {operator} {side} {threshold:.6f}{expected}"


# case -> (evidence_outcome, omitted_total, admitted (kind, lanes) items, http_status)
PACKAGES: dict[str, tuple[Any, ...]] = {
    # max_items: 0 — 200, an empty package, every candidate counted as omitted.
    "max-items-zero": ("assembled", 5, [], 200),
    "empty-pool": ("assembled", 0, [], 200),
    "bm25-passage": ("assembled", 0, [("passage", ["passage_bm25"])], 200),
    "vector-passage": ("assembled", 0, [("passage", ["passage_fused"])], 200),
    "association": ("assembled", 0, [("association", ["graph_activate"])], 200),
    "broken": ("failed", None, [], 200),
}


def evidence_inputs() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    cases = list(PACKAGES)
    outcomes = pl.DataFrame(
        {
            "case_index": list(range(len(cases))),
            "evidence_outcome": [PACKAGES[case][0] for case in cases],
            "omitted_total": [PACKAGES[case][1] for case in cases],
        },
        schema={"case_index": pl.Int32, "evidence_outcome": pl.String, "omitted_total": pl.Int64},
    )
    items = pl.DataFrame(
        [
            {
                "case_index": index,
                "kind": kind,
                "admitted": True,
                "lane_ranks": [{"lane": lane, "rank": 1} for lane in lanes],
            }
            for index, case in enumerate(cases)
            for kind, lanes in PACKAGES[case][2]
        ],
        schema={
            "case_index": pl.Int32,
            "kind": pl.String,
            "admitted": pl.Boolean,
            "lane_ranks": pl.List(pl.Struct({"lane": pl.String, "rank": pl.Int64})),
        },
    )
    calls = pl.DataFrame(
        {
            "case_index": list(range(len(cases))),
            "lane": ["evidence"] * len(cases),
            "http_status": [PACKAGES[case][3] for case in cases],
        },
        schema={"case_index": pl.Int32, "lane": pl.String, "http_status": pl.Int32},
    )
    return outcomes, items, calls


@pytest.mark.parametrize(
    ("rule", "ready", "expected"),
    [
        (
            "semantic",
            True,
            {
                "max-items-zero": ("undetermined", "budget_omitted"),
                "empty-pool": ("abstained", None),
                "bm25-passage": ("abstained", None),
                "vector-passage": ("surfaced", "evidence_vector_passage"),
                "association": ("surfaced", "evidence_graph_item"),
                "broken": ("failed", "unparseable_response"),
            },
        ),
        (
            "semantic",
            False,
            {
                "max-items-zero": ("undetermined", "passage_vectors_not_ready"),
                "empty-pool": ("undetermined", "passage_vectors_not_ready"),
                "bm25-passage": ("undetermined", "passage_vectors_not_ready"),
                "vector-passage": ("surfaced", "evidence_vector_passage"),
                "association": ("surfaced", "evidence_graph_item"),
                "broken": ("failed", "unparseable_response"),
            },
        ),
        (
            "any",
            True,
            {
                "max-items-zero": ("surfaced", "budget_hid"),
                "empty-pool": ("abstained", None),
                "bm25-passage": ("surfaced", "evidence_item"),
                "vector-passage": ("surfaced", "evidence_item"),
                "association": ("surfaced", "evidence_item"),
                "broken": ("failed", "unparseable_response"),
            },
        ),
    ],
)
def test_the_evidence_rule_and_max_items_zero(
    rule: RefusalRule, ready: bool, expected: dict[str, tuple[str, str | None]]
) -> None:
    outcomes, items, calls = evidence_inputs()
    frame = evidence_rule(outcomes, items, calls, rule, ready)
    cases = list(PACKAGES)
    got = {
        cases[index]: (v, r)
        for index, v, r in frame.select("case_index", "verdict", "reason").iter_rows()
    }
    assert got == expected
