"""A large run history made fast: template cases scored once, repeated under new ids.

The analyst surface has to be tried at the scale users run (20,000 to
100,000 cases, histories of a hundred runs), and making such a history
through the network phase would take hours. This module makes one in
seconds without faking a number:

1. :func:`template_eval_set` declares a few dozen template cases (expected
   sources, concepts, labels, associations, citations and ``options.tags``,
   in the mix the demo corpus has) and :func:`template_outputs` gives each
   template a handful of lane outcomes — a clean hit, a partial one, a hit
   with little source diversity, a miss, a failed passage call. Those few
   hundred template runs go through the real table builder, scorer and
   artifact writer once.
2. A run of N cases assigns every case a template and an outcome (a hash of
   the case and the run step, against a quality level that drifts from run
   to run), and repeats the template's rows of every table under the case's
   own id and index — one join per table, so 100,000 cases cost a second.
3. The run's aggregate metrics are computed from those tables by the real
   aggregation (:func:`taguru_eval.score.aggregate.aggregate`), the gate is
   the real gate, and evaluation.json is the real writer's text: the head
   from :func:`~taguru_eval.artifact.build.build_artifact`, each case block the
   template's block as the writer printed it, with the case's own id.

So the stored tables, the artifact and its metrics agree exactly, as for a
real run; only the queries are templates, repeated. Used by the analyst
tests (a 20,000-case, 10-run history) and ``benchmarks/analyst_scale.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import polars as pl

from taguru_eval.artifact.build import RunContext, build_artifact, dumps
from taguru_eval.artifact.read import calls_from_shapes
from taguru_eval.contract import VERSION
from taguru_eval.gate import case_values_from_cases_frame, evaluate_gate
from taguru_eval.inputs.dataset import (
    ABSENT,
    CaseOptions,
    EvalCase,
    EvalSet,
    ExpectedAssociation,
    ExpectedCitation,
    ExpectedSource,
    expected_frame,
)
from taguru_eval.inputs.thresholds import parse_thresholds
from taguru_eval.score.aggregate import Scores, aggregate, score_run
from taguru_eval.store import RunOrigin, run_dir, write_run
from taguru_eval.tables.flatten import build_tables
from taguru_eval.tables.schemas import RunTables, metrics_frame
from taguru_eval.tables.shapes import LaneOutput

SYNTHETIC_CONTEXT: Final = "synthetic"
TAGS: Final = ("brewing", "rice", "history", "regions", "law")
"""The tag vocabulary of the template cases (``options.tags``)."""

TEMPLATES: Final = 40
SOURCES: Final = 60
OUTCOMES: Final = ("clean", "narrow", "partial", "miss", "failed")
"""A template's lane outcomes: ``narrow`` finds what ``clean`` finds from fewer sources."""

THRESHOLDS: Final = {
    "taguru_evaluate_thresholds": 1,
    "aggregate": {
        "recall.recall_at_k": {"min": 0.8},
        "citations.locator_validity": {"min": 0.5},
        "passage.failure_rate": {"max": 0.05},
    },
}
"""The gate every synthetic run is checked against (some runs pass, some fail)."""

_START: Final = datetime(2026, 7, 1, 9, 0, tzinfo=UTC)
_PLAN: Final = {
    "context": SYNTHETIC_CONTEXT,
    "lanes": {
        "bm25": {"ran": True},
        "vector": {"ran": False, "reason": "no embedding provider is configured"},
    },
}


def _source(index: int) -> str:
    return f"corpus/doc{index % SOURCES:03d}.md"


def _tags(template: int) -> tuple[str, ...]:
    if template % 11 == 0:
        return ()
    first = TAGS[template % len(TAGS)]
    if template % 4 == 1:
        return (first, TAGS[(template + 2) % len(TAGS)])
    return (first,)


def template_case(template: int, case_id: str, line: int) -> EvalCase:
    """Template ``template``'s expectations under ``case_id``."""
    sources = [ExpectedSource(_source(template), (template % 9,), 3)]
    if template % 2 == 0:
        sources.append(ExpectedSource(_source(template + 17), (2,), 1))
    concepts = (f"Concept {template}", f"Concept {template + 1}") if template % 3 == 0 else ()
    labels = (f"label {template % 4}",) if template % 6 == 0 else ()
    associations = (
        (ExpectedAssociation(f"Concept {template}", "relates to", f"Concept {template + 1}"),)
        if template % 5 == 0
        else ()
    )
    citations = (
        (
            ExpectedCitation(
                _source(template),
                template % 9,
                section="Intro" if template % 8 == 0 else ABSENT,
            ),
        )
        if template % 4 == 0
        else ()
    )
    structural = bool(concepts or labels or associations)
    return EvalCase(
        case_id=case_id,
        query=f"template question {template}",
        line=line,
        cues=(f"cue {template}",) if structural else (),
        expected_sources=tuple(sources),
        expected_concepts=concepts,
        expected_labels=labels,
        expected_associations=associations,
        expected_citations=citations,
        options=CaseOptions(tags=_tags(template)),
    )


def _template_id(template: int, outcome: int) -> str:
    return f"t{template:03d}-{OUTCOMES[outcome]}"


def template_eval_set() -> EvalSet:
    """One eval case per (template, outcome), indexed ``template * len(OUTCOMES) + outcome``."""
    cases = [
        template_case(template, _template_id(template, outcome), len(OUTCOMES) * template + outcome)
        for template in range(TEMPLATES)
        for outcome in range(len(OUTCOMES))
    ]
    return EvalSet("synthetic.jsonl", "synthetic templates", cases, expected_frame(cases))


def _hits(case: EvalCase, template: int, outcome: str) -> list[dict[str, Any]]:
    expected = [(entry.source, entry.paragraphs[0]) for entry in case.expected_sources]
    if outcome == "clean":
        others = [(_source(template + 30 + k), k) for k in range(5)]
        served = [*expected, *others][:5]
    elif outcome == "narrow":
        # The same expected hits, the rest from the first expected source only.
        first, paragraph = expected[0]
        others = [(first, paragraph + 10 + k) for k in range(5)]
        served = [*expected, *others][:5]
    elif outcome == "partial":
        served = [(_source(template + 40), 1), (_source(template + 40), 2), expected[0]]
        served += [(_source(template + 41), 3), (_source(template + 41), 4)]
    else:
        served = [(_source(template + 30 + k), k) for k in range(5)]
    return [
        {
            "source": source,
            "paragraph": paragraph,
            "score": 9.0 - rank,
            "lanes": {"bm25": {"rank": rank + 1, "score": 9.0 - rank}},
        }
        for rank, (source, paragraph) in enumerate(served)
    ]


def _structural(case: EvalCase, outcome: str, latency: int) -> dict[str, Any]:
    found = {"clean": 2, "narrow": 2, "partial": 1}.get(outcome, 0)
    cues: list[dict[str, Any]] = []
    for kind, names in (("concept", case.expected_concepts), ("label", case.expected_labels)):
        if not names:
            continue
        resolved = list(names[:found])
        cue: dict[str, Any] = {"cue": case.cues[0], "kind": kind, "resolved_names": resolved}
        if resolved:
            cue["tier"] = "exact"
        cues.append(cue | {"limit": 5, "latency_ms": latency // 4 + 1})
    probes: list[dict[str, Any]] = []
    for association in case.expected_associations:
        pinned = found > 0

        def position(name: str, pinned: bool = pinned) -> dict[str, Any]:
            if not pinned:
                return {"outcome": "not_found", "latency_ms": 2}
            return {"outcome": "resolved", "name": name, "tier": "exact", "latency_ms": 2}

        probe: dict[str, Any] = {
            "subject_cue": association.subject,
            "label_cue": association.label,
            "object_cue": association.object,
            "subject": position(association.subject),
            "label": position(association.label),
            "object": position(association.object),
        }
        if pinned:
            matches = 1 if found == 2 else 0
            attributions = [{"source": case.expected_sources[0].source, "paragraph": 0}]
            probe["query"] = {
                "outcome": "queried",
                "total": matches,
                "matches": matches,
                "attributions": attributions[:matches],
                "latency_ms": latency // 3 + 1,
            }
        probes.append(probe)
    return {"cues": cues, "associations": probes}


def _checks(case: EvalCase, outcome: str, served: set[tuple[str, int]]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for citation in case.expected_citations:
        check: dict[str, Any] = {
            "source": citation.source,
            "paragraph": citation.paragraph,
            "served": (citation.source, citation.paragraph) in served,
        }
        if outcome in ("clean", "narrow", "partial"):
            declared = citation.section is not ABSENT
            section: dict[str, Any] = {"check": "not_checked"}
            if declared:
                matched = outcome != "partial"
                section = {"check": "matched" if matched else "mismatched", "expected": "Intro"}
            check |= {"outcome": "resolved", "section": section}
        else:
            code = "no_paragraph" if outcome == "miss" else "no_source"
            check |= {"outcome": "unresolved", "code": code, "message": f"{code} (synthetic)"}
        checks.append(check | {"latency_ms": 3})
    return checks


def template_outputs(eval_set: EvalSet) -> list[LaneOutput]:
    """Every template case's lane outputs (the shapes a live run records)."""
    outputs: list[LaneOutput] = []
    for index, case in enumerate(eval_set.cases):
        template, outcome_index = divmod(index, len(OUTCOMES))
        outcome = OUTCOMES[outcome_index]
        latency = 8 + (template * 7 + outcome_index * 13) % 90
        passage: dict[str, Any]
        if outcome == "failed":
            passage = {"outcome": "failed", "message": "HTTP 503 (synthetic)", "latency_ms": 35}
        else:
            passage = {
                "outcome": "searched",
                "plan": _PLAN,
                "hits": _hits(case, template, outcome),
                "latency_ms": latency,
            }
        hits = passage.get("hits", [])
        served = {(hit["source"], hit["paragraph"]) for hit in hits}
        output: dict[str, Any] = {
            "case_index": index,
            "case_id": case.case_id,
            "query": case.query,
            "cues": list(case.cues),
            "limit": case.effective_limit,
            "tags": list(case.options.tags),
            "passage": passage,
            "checks": _checks(case, outcome, served),
        }
        if case.runs_structural_lane:
            output["structural"] = _structural(case, outcome, latency)
        output["calls"] = calls_from_shapes(output)
        outputs.append(output)  # type: ignore[arg-type]
    return outputs


def _revision(step: int) -> dict[str, int]:
    # The corpus is written before every third run (and never in between).
    return {"graph": 40 + step // 3, "passages": 100 + step // 3, "config": 1}


def _context(step: int, cases: int, gate: dict[str, Any] | None) -> RunContext:
    return RunContext(
        eval_path="synthetic.jsonl",
        eval_name=f"synthetic history ({cases} cases)",
        context=SYNTHETIC_CONTEXT,
        url="http://127.0.0.1:8248",
        out="evaluation.json",
        generated_at=f"{_START + timedelta(hours=6 * step):%Y-%m-%dT%H:%M:%SZ}",
        revision_before=_revision(step),
        revision_after=_revision(step),
        last_write_epoch_before=1_780_000_000 + step // 3,
        last_write_epoch_after=1_780_000_000 + step // 3,
        sources_count=SOURCES,
        thresholds=gate,
    )


@dataclass(frozen=True)
class Templates:
    """The scored template runs every synthetic run repeats."""

    tables: dict[str, pl.DataFrame]
    blocks: list[tuple[str, str]]
    """Per template case: its evaluation.json case block as the writer prints it
    inside ``cases``, split around the case id's JSON string."""


def build_templates() -> Templates:
    """Score every (template, outcome) once through the real pipeline stages."""
    eval_set = template_eval_set()
    outputs = template_outputs(eval_set)
    tables = build_tables(outputs, "template")
    scores = score_run(eval_set, tables)
    document = build_artifact(_context(0, len(outputs), None), outputs, scores)
    blocks: list[tuple[str, str]] = []
    for block in document["cases"]:
        text = "\n".join("    " + line for line in dumps(block).split("\n"))
        quoted = json.dumps(block["case_id"])
        before, _, after = text.partition(f'"case_id": {quoted}')
        blocks.append((before + '"case_id": ', after))
    frames = {**tables.frames(), "cases": scores.cases}
    return Templates(tables=frames, blocks=blocks)


def quality(step: int) -> float:
    """The share of clean outcomes in run ``step``: rises, dips at step 6, recovers."""
    return [0.52, 0.56, 0.6, 0.62, 0.64, 0.66, 0.5, 0.6, 0.68, 0.7][step % 10]


def assignment(cases: int, step: int) -> pl.DataFrame:
    """``case_index``, ``case_id``, ``template_index``: which template row each case repeats.

    The outcome is a hash of the case and the step against :func:`quality`:
    a case keeps its template across runs, its outcome moves with the step.
    """
    frame = pl.DataFrame({"case_index": pl.int_range(0, cases, dtype=pl.Int32, eager=True)})
    draw = (pl.col("case_index").hash(seed=step + 1) % 10_000).cast(pl.Float64) / 10_000
    clean = quality(step)
    outcome = (
        pl.when(pl.col("case_index") % 997 == 0)
        .then(pl.lit(4))
        .when(draw < clean)
        .then(pl.lit(0))
        .when(draw < clean + 0.08)
        .then(pl.lit(1))
        .when(draw < clean + 0.25)
        .then(pl.lit(2))
        .when(draw < 0.985)
        .then(pl.lit(3))
        .otherwise(pl.lit(4))
    )
    return frame.select(
        "case_index",
        pl.format("case-{}", pl.col("case_index").cast(pl.String).str.zfill(6)).alias("case_id"),
        ((pl.col("case_index") % TEMPLATES) * len(OUTCOMES) + outcome)
        .cast(pl.Int32)
        .alias("template_index"),
    )


def repeat_tables(
    templates: Templates, assigned: pl.DataFrame, run_id: str
) -> dict[str, pl.DataFrame]:
    """Every table of the run: each case gets its template's rows under its own keys."""
    out: dict[str, pl.DataFrame] = {}
    for name, frame in templates.tables.items():
        columns = frame.columns
        rows = assigned.join(
            frame.drop("case_id", "run_id"),
            left_on="template_index",
            right_on="case_index",
            how="inner",
            maintain_order="left_right",
        )
        out[name] = rows.with_columns(pl.lit(run_id).alias("run_id")).select(columns)
    return out


def _run_id(step: int, seed: int) -> str:
    moment = _START + timedelta(hours=6 * step)
    suffix = hashlib.sha256(f"{seed}:{step}".encode()).hexdigest()[:6]
    return f"{moment:%Y%m%dT%H%M%S.%fZ}-{suffix}"


def synthetic_run(
    store: str | Path, templates: Templates, cases: int, step: int, *, seed: int = 0
) -> Path:
    """Write run ``step`` (0 = oldest) of ``cases`` cases into ``store``; returns its directory."""
    run_id = _run_id(step, seed)
    assigned = assignment(cases, step)
    frames = repeat_tables(templates, assigned, run_id)
    tables = RunTables.from_frames(run_id, frames)
    metrics = aggregate(frames["cases"], tables)
    metrics_table = metrics_frame(metrics, run_id)
    thresholds = parse_thresholds(json.dumps(THRESHOLDS).encode(), "thresholds.json")
    gate = evaluate_gate(
        thresholds,
        metrics_table,
        case_values_from_cases_frame(frames["cases"]),
        stable=True,
        case_ids=assigned.get_column("case_id").to_list(),
    )
    empty = Scores(cases=frames["cases"].clear(), metrics=metrics, metrics_frame=metrics_table)
    head = build_artifact(_context(step, cases, dict(gate.block)), [], empty)
    head["inputs"]["eval"]["cases"] = cases
    text = _artifact_text(head, templates, assigned)
    frames["metrics"] = metrics_table
    origin = RunOrigin("run", writer=f"taguru_eval {VERSION} (synthetic history)")
    return write_run(store, SYNTHETIC_CONTEXT, run_id, frames, text, origin=origin)


def _artifact_text(head: dict[str, Any], templates: Templates, assigned: pl.DataFrame) -> str:
    """evaluation.json's text: the writer's own head and metrics, the template blocks."""
    text = dumps(head)
    marker = '\n  "cases": [],'
    if text.count(marker) != 1:
        raise ValueError("unexpected artifact layout: no empty cases array to fill")
    blocks = templates.blocks
    rendered = ",\n".join(
        f"{blocks[template][0]}{json.dumps(case_id, ensure_ascii=False)}{blocks[template][1]}"
        for case_id, template in assigned.select("case_id", "template_index").iter_rows()
    )
    before, _, after = text.partition(marker)
    return "".join((before, '\n  "cases": [\n', rendered, "\n  ],", after))


def synthetic_history(
    store: str | Path,
    *,
    cases: int = 20_000,
    runs: int = 10,
    seed: int = 0,
    templates: Templates | None = None,
) -> list[Path]:
    """``runs`` stored runs of ``cases`` cases each (oldest first) in ``store``."""
    built = templates or build_templates()
    return [synthetic_run(store, built, cases, step, seed=seed) for step in range(runs)]


def stored_run(store: str | Path, step: int, *, seed: int = 0) -> Path:
    """Where :func:`synthetic_run` puts run ``step`` of ``seed``."""
    return run_dir(store, SYNTHETIC_CONTEXT, _run_id(step, seed))


def case_ids(cases: int) -> Sequence[str]:
    """The case ids of a synthetic run of ``cases`` cases, in order."""
    return assignment(cases, 0).get_column("case_id").to_list()
