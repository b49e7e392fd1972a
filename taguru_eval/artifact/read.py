"""Reading an evaluation.json back (ours or taguru's) into the frames a live run has.

Lane tables are rebuilt through the same builder as a live run; the per-case
frame and the metrics are the values the artifact recorded, never re-scored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, cast

import polars as pl

from taguru_eval import contract
from taguru_eval._base.jsonstrict import JsonShapeError
from taguru_eval.artifact.abstention import refusal_frames_from_block
from taguru_eval.artifact.codec import read_artifact
from taguru_eval.artifact.layout import case_layout, column_paths, get_path
from taguru_eval.catalog import CATALOG, Catalog, catalog_for, repetitions_of
from taguru_eval.contract import DEFAULT_LIMIT
from taguru_eval.errors import InputError
from taguru_eval.score.abstention import offered
from taguru_eval.score.aggregate import Scores
from taguru_eval.tables.flatten import CASE_BLOCK, build_tables, type_problem
from taguru_eval.tables.schemas import (
    RunTables,
    cases_schema,
    conform,
    metrics_frame,
)
from taguru_eval.tables.shapes import CallRecord, EvidenceRow, LaneOutput

_CUE_ENDPOINT = {
    "concept": contract.RESOLVE,
    "label": contract.RESOLVE_LABEL,
}

_POSITION_ENDPOINT = {
    "subject": contract.RESOLVE,
    "label": contract.RESOLVE_LABEL,
    "object": contract.RESOLVE,
}


def calls_from_shapes(output: Mapping[str, Any], *, assembly: bool = False) -> list[CallRecord]:
    """The call records implied by a case's recorded shapes (no HTTP status is known)."""
    calls: list[CallRecord] = []

    def add(
        lane: str,
        endpoint: str,
        item: int | None,
        position: str | None,
        outcome: str,
        latency: int,
        error: str | None,
    ) -> None:
        calls.append(
            {
                "case_index": output["case_index"],
                "case_id": output["case_id"],
                "seq": len(calls),
                "lane": lane,
                "endpoint": endpoint,
                "item_index": item,
                "position": position,
                "outcome": outcome,
                "http_status": None,
                "latency_ms": latency,
                "error": error,
            }
        )

    passage = output["passage"]
    if assembly:
        # The evidence call's outcome is the evidence block's (assembled / failed).
        evidence = output.get("evidence") or passage
        add(
            "evidence",
            contract.EVIDENCE,
            None,
            None,
            evidence["outcome"],
            evidence["latency_ms"],
            evidence.get("message"),
        )
    else:
        add(
            "passage",
            contract.SEARCH,
            None,
            None,
            passage["outcome"],
            passage["latency_ms"],
            passage.get("message"),
        )
    structural = output.get("structural")
    if structural is not None:
        for index, cue in enumerate(structural.get("cues") or []):
            add(
                "coverage",
                _CUE_ENDPOINT.get(cue.get("kind", "concept"), _CUE_ENDPOINT["concept"]),
                index,
                None,
                "errored" if cue.get("error") is not None else "resolved",
                cue["latency_ms"],
                cue.get("error"),
            )
        for index, probe in enumerate(structural.get("associations") or []):
            for position in ("subject", "label", "object"):
                outcome = probe[position]
                add(
                    "association",
                    _POSITION_ENDPOINT[position],
                    index,
                    position,
                    outcome["outcome"],
                    outcome["latency_ms"],
                    outcome.get("message"),
                )
            query = probe.get("query")
            if query is not None:
                add(
                    "association",
                    contract.QUERY,
                    index,
                    "query",
                    query["outcome"],
                    query["latency_ms"],
                    query.get("message"),
                )
    for index, check in enumerate(output.get("checks") or []):
        add(
            "citation",
            contract.CITATIONS,
            index,
            None,
            check["outcome"],
            check["latency_ms"],
            check.get("message"),
        )
    return calls


def _check_lists(case: Mapping[str, Any], index: int) -> None:
    """Lists the frames explode must really be lists (Polars would null them silently)."""
    nested = (
        ("passage", "hits"),
        ("structural", "cues"),
        ("structural", "associations"),
        ("citations", "checks"),
    )
    for path in nested:
        value = get_path(case, *path)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(item, Mapping) for item in value)
        ):
            raise TypeError(f"cases[{index}].{'.'.join(path)} must be an array of objects")
    if not isinstance(case.get("passage"), Mapping):
        raise TypeError(f"cases[{index}].passage must be an object")


def evidence_rows_from_block(evidence: Mapping[str, Any]) -> list[EvidenceRow]:
    """The ``evidence_items`` rows an artifact's evidence block still holds: its
    admitted items (the artifact keeps neither lane ranks nor omitted candidates)."""
    if evidence.get("outcome") != "assembled":
        return []
    items = evidence.get("items") or []
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise TypeError("evidence.items must be an array of objects")
    return [
        EvidenceRow(
            candidate_id=item["candidate_id"],
            kind=item["kind"],
            admitted=True,
            fused_rank=item["fused_rank"],
            source=item.get("source"),
            paragraph=item.get("paragraph"),
            lane_ranks=None,
            citation_refs=list(item.get("citation_refs") or []),
            omitted_reason=None,
            duplicate_of=None,
        )
        for item in items
    ]


def artifact_to_lane_outputs(doc: Mapping[str, Any]) -> list[LaneOutput]:
    """The lane outputs recorded in an artifact, in case order (calls rebuilt from shapes)."""
    assembly = (doc.get("inputs") or {}).get("mode") == "assembly"
    match = get_path(doc, "inputs", "answers", "match")
    outputs: list[LaneOutput] = []
    for index, case in enumerate(doc.get("cases") or []):
        _check_lists(case, index)
        output: dict[str, Any] = {
            "case_index": index,
            "case_id": case["case_id"],
            "query": case.get("query", ""),
            "cues": list(case.get("cues") or []),
            "limit": case.get("limit", DEFAULT_LIMIT),
            "passage": case["passage"],
            "checks": list((case.get("citations") or {}).get("checks") or []),
        }
        if case.get("structural") is not None:
            output["structural"] = case["structural"]
        if case.get("evidence") is not None:
            output["evidence"] = case["evidence"]
            output["evidence_rows"] = evidence_rows_from_block(case["evidence"])
        if case.get("budget") is not None:
            output["budget"] = case["budget"]
        checks = get_path(case, "answers", "checks")
        if isinstance(checks, list) and checks:
            output["answer_checks"] = [
                {
                    "answer_index": position,
                    "found": get_path(check, "found"),
                    "rank": get_path(check, "rank"),
                    "match": match,
                }
                for position, check in enumerate(checks)
            ]
        output["calls"] = calls_from_shapes(output, assembly=assembly)
        outputs.append(cast(LaneOutput, output))
    return outputs


def cases_from_artifact(
    doc: Mapping[str, Any], run_id: str, catalog: Catalog = CATALOG
) -> pl.DataFrame:
    """The per-case frame exactly as the artifact recorded it (nothing is recomputed).

    Every ``cases`` column is read from the path the case-block layout writes
    it at; a missing or ``null`` link leaves it null.
    """
    cases = list(doc.get("cases") or [])
    columns: dict[str, list[Any]] = {
        "run_id": [run_id] * len(cases),
        "case_index": list(range(len(cases))),
        "case_id": [case.get("case_id") for case in cases],
        "structural_ran": [case.get("structural") is not None for case in cases],
    }
    for column, path in column_paths(case_layout(catalog)).items():
        columns[column] = [get_path(case, *path) for case in cases]
    columns["missed"] = [list(value or []) for value in columns["missed"]]
    columns["missed_truncated"] = [value or 0 for value in columns["missed_truncated"]]
    # The optional per-case ``answerability`` entry (ABSTENTION.md §3.8).
    for column, key in (
        ("answerability_verdict", "verdict"),
        ("answerability_reason", "reason"),
        ("supported", "supported"),
    ):
        columns[column] = [get_path(case, "answerability", key) for case in cases]
    schema = cases_schema(catalog)
    strict = {name: dtype for name, dtype in schema.items() if name in columns}
    frame = pl.DataFrame(columns, schema=strict, strict=False)
    return conform(
        frame.with_columns(offered(pl.col("answerability_verdict")).alias("offered")), schema
    )


@dataclass(frozen=True)
class LoadedRun:
    """A run read back from an evaluation.json: the same frames a live run has."""

    doc: dict[str, Any]
    lane_outputs: list[LaneOutput]
    tables: RunTables
    scores: Scores


_MALFORMED: Final = (KeyError, TypeError, ValueError, AttributeError, pl.exceptions.PolarsError)
"""What a wrongly shaped artifact makes the readers below raise."""


def _detail(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc}"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _case_block_problem(doc: Mapping[str, Any]) -> JsonShapeError | None:
    """The first wrongly typed member of a case block, found once building the
    tables failed (a walk of every case is no cost worth paying on success)."""
    cases = doc.get("cases")
    for index, case in enumerate(cases if isinstance(cases, list) else []):
        problem = type_problem(case, CASE_BLOCK, ("cases", index))
        if problem is not None:
            return problem
    return None


def artifact_catalog(doc: Mapping[str, Any]) -> Catalog:
    """The catalog an artifact was measured with: the 31, plus the must-refuse
    metrics when it has an ``abstention`` block, the answers metrics when
    ``inputs.answers`` says it was given ``--answers`` and the stability metric
    when ``inputs.repeat`` says its cases were sent more than once."""
    return catalog_for(
        must_refuse="abstention" in doc,
        answers=isinstance(get_path(doc, "inputs", "answers"), Mapping),
        stability=repetitions_of(get_path(doc, "inputs", "repeat")) is not None,
    )


def tables_from_artifact(
    doc: Mapping[str, Any], run_id: str | None = None, *, label: str = "evaluation.json"
) -> LoadedRun:
    """Rebuild the run's frames from an artifact (ours or taguru's).

    Lane tables go through the same :func:`build_tables` as a live run; the
    per-case frame and the metrics are the values the artifact recorded. A
    case block missing a required field or holding a wrongly typed value is
    an :class:`InputError` naming ``label``.
    """
    rid = run_id if run_id is not None else str(doc.get("generated_at", "imported"))
    try:
        outputs = artifact_to_lane_outputs(doc)
        refusal_lanes, refusal_cases = refusal_frames_from_block(doc.get("abstention"), rid)
        tables = replace(build_tables(outputs, rid), refusal_lanes=refusal_lanes)
        catalog = artifact_catalog(doc)
        cases = cases_from_artifact(doc, rid, catalog)
    except _MALFORMED as exc:
        problem = _case_block_problem(doc)
        detail = _detail(exc) if problem is None else problem.detail
        raise InputError(
            f"{label}: malformed case block: {detail}",
            path=label,
            field=None if problem is None else problem.field,
        ) from None
    recorded, definitions = doc.get("metrics") or {}, doc.get("definitions") or {}
    if not isinstance(recorded, Mapping) or not isinstance(definitions, Mapping):
        raise InputError(
            f"{label}: malformed evaluation.json: 'metrics' and 'definitions' must be objects",
            path=label,
        )
    metrics = {
        name: dict(value) for name, value in sorted(recorded.items()) if isinstance(value, Mapping)
    }
    statistics = {
        name: str(definition.get("statistic"))
        for name, definition in definitions.items()
        if isinstance(definition, Mapping)
    }
    try:
        frame = metrics_frame(metrics, rid, statistics)
    except _MALFORMED as exc:
        raise InputError(f"{label}: malformed metrics: {_detail(exc)}", path=label) from None
    scores = Scores(
        cases=cases,
        metrics=metrics,
        metrics_frame=frame,
        refusal_cases=refusal_cases,
        catalog=catalog,
    )
    return LoadedRun(doc=dict(doc), lane_outputs=outputs, tables=tables, scores=scores)


def load_artifact(path: str | Path, run_id: str | None = None) -> LoadedRun:
    """:func:`read_artifact` then :func:`tables_from_artifact`."""
    return tables_from_artifact(read_artifact(path), run_id, label=str(path))
