"""Reading a TREC export back with ir_measures and ranx, and cases of every shape to read.

:func:`tool_values` scores a qrels/run pair with both tools — uncut set recall,
reciprocal rank and nDCG (ir_measures ``SetR``, ``RR``, ``nDCG``; ranx
``recall``, ``mrr``, ``ndcg``) or cut at each case's limit — and
:func:`differing` lists, per metric, the cases where a tool's value is not
taguru's. :func:`random_run` makes a run of shapes the demo does not have
(used by the scale test and ``benchmarks/trec_agreement.py``).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

import polars as pl

from taguru_eval.inputs.dataset import EvalSet, load_eval_text
from taguru_eval.score.cases import score_cases
from taguru_eval.tables import RunTables

METRICS = ("recall", "mrr", "ndcg")
OURS = {"recall": "recall_at_k", "mrr": "mrr", "ndcg": "ndcg"}
IR_MEASURES_UNCUT = {"recall": "SetR", "mrr": "RR", "ndcg": "nDCG"}
RANX = {"recall": "recall", "mrr": "mrr", "ndcg": "ndcg"}
TOLERANCE = 1e-9

Values = dict[str, dict[str, float]]
"""tool metric -> case_id -> value."""


def ir_measures_values(qrels: Any, run: Any, limits: Mapping[str, int] | None = None) -> Values:
    """ir_measures' per-case values; ``limits`` (case_id -> k) cuts each case at its k."""
    import ir_measures

    out: Values = {metric: {} for metric in METRICS}
    if limits is None:
        wanted = {ir_measures.parse_measure(name): m for m, name in IR_MEASURES_UNCUT.items()}
        for metric in ir_measures.iter_calc(list(wanted), qrels, run):
            out[wanted[metric.measure]][metric.query_id] = metric.value
        return out
    qrels, run = list(qrels), list(run)
    for k in sorted(set(limits.values())):
        cases = {case_id for case_id, limit in limits.items() if limit == k}
        wanted = {
            ir_measures.parse_measure(name): m
            for m, name in {"recall": f"R@{k}", "mrr": f"RR@{k}", "ndcg": f"nDCG@{k}"}.items()
        }
        for metric in ir_measures.iter_calc(
            list(wanted),
            [qrel for qrel in qrels if qrel.query_id in cases],
            [doc for doc in run if doc.query_id in cases],
        ):
            out[wanted[metric.measure]][metric.query_id] = metric.value
    return out


def ranx_values(qrels: Any, run: Any) -> Values:
    """ranx's per-case values (uncut); a case in the qrels with no line scores 0."""
    import ranx

    ranx.evaluate(qrels, run, list(RANX.values()), make_comparable=True)
    return {metric: dict(run.scores[name]) for metric, name in RANX.items()}


def differing(cases: pl.DataFrame, theirs: Values) -> dict[str, list[str]]:
    """Per metric, the case_ids (in order) whose tool value is missing or off by more
    than :data:`TOLERANCE`; ``cases`` is taguru's per-case frame (scored cases only).
    A query id read from a file is percent-decoded first (the export encodes them)."""
    scored = cases.filter(pl.col("recall_at_k").is_not_null())
    decoded = {
        metric: {unquote(q): v for q, v in values.items()} for metric, values in theirs.items()
    }
    out: dict[str, list[str]] = {metric: [] for metric in METRICS}
    for row in scored.iter_rows(named=True):
        for metric in METRICS:
            value = decoded[metric].get(row["case_id"])
            if value is None or not math.isclose(
                float(value), row[OURS[metric]], rel_tol=0.0, abs_tol=TOLERANCE
            ):
                out[metric].append(row["case_id"])
    return out


# --------------------------------------------------------------------- random shapes

SOURCES = tuple(f"doc {n}.md" for n in range(5))
"""Few sources (one with a space in its name), so entries and hits meet often."""


def _entry(rnd: random.Random) -> dict[str, Any]:
    shape = rnd.random()
    paragraphs: list[int] = []
    if shape < 0.45:
        paragraphs = [rnd.randrange(6)]
    elif shape < 0.7:
        paragraphs = [rnd.randrange(6) for _ in range(rnd.randint(2, 3))]
    entry: dict[str, Any] = {"source": rnd.choice((*SOURCES, "absent.md"))}
    if paragraphs:
        entry["paragraphs"] = paragraphs
    entry["relevance"] = rnd.choice((0, 1, 1, 2, 3, 3))
    return entry


def random_run(cases: int, seed: int = 7) -> tuple[EvalSet, RunTables]:
    """``cases`` cases of mixed shapes (:func:`random_inputs`), loaded, and their run tables."""
    text, tables = random_inputs(cases, seed)
    return load_eval_text(text, "eval.jsonl"), tables


def random_inputs(cases: int, seed: int = 7) -> tuple[str, RunTables]:
    """An eval.jsonl text of ``cases`` cases of mixed shapes and their run tables.

    Entries: one paragraph, a list (duplicates allowed), any paragraph,
    relevance 0–3, the same entry twice, sources never served; hits: limits 1
    to 20 (more judged entries than the limit happens), a passage served twice,
    no hit at all, and a failed passage lane now and then.
    """
    rnd = random.Random(seed)
    lines = [json.dumps({"taguru_eval": 1})]
    lanes: list[dict[str, Any]] = []
    hits: list[dict[str, Any]] = []
    for index in range(cases):
        case_id = f"case {index:05d}"
        entries = [_entry(rnd) for _ in range(rnd.randint(0, 5))]
        if entries and rnd.random() < 0.1:
            entries.append(dict(rnd.choice(entries)))
        limit = rnd.choice((1, 3, 5, 10, 10, 20))
        lines.append(
            json.dumps(
                {
                    "case_id": case_id,
                    "query": "q",
                    "expected_sources": entries,
                    "options": {"limit": limit},
                }
            )
        )
        failed = rnd.random() < 0.03
        served = 0 if failed or rnd.random() < 0.04 else rnd.randint(1, limit)
        passages: list[tuple[str, int]] = []
        for _ in range(served):
            if passages and rnd.random() < 0.08:
                passages.append(rnd.choice(passages))
            else:
                passages.append((rnd.choice(SOURCES), rnd.randrange(6)))
        lanes.append(
            {
                "case_index": index,
                "case_id": case_id,
                "limit": limit,
                "passage_outcome": "failed" if failed else "searched",
                "hit_count": None if failed else served,
            }
        )
        hits.extend(
            {
                "case_index": index,
                "case_id": case_id,
                "rank": rank,
                "source": source,
                "paragraph": paragraph,
                "score": 1.0 / (rank + 1),
                "population": "eval",
            }
            for rank, (source, paragraph) in enumerate(passages)
        )
    tables = RunTables.from_frames(
        "random",
        {
            "case_lanes": pl.DataFrame(lanes).with_columns(pl.lit("random").alias("run_id")),
            "hits": pl.DataFrame(hits).with_columns(pl.lit("random").alias("run_id")),
        },
    )
    return "\n".join(lines) + "\n", tables


def taguru_values(eval_set: EvalSet, tables: RunTables) -> pl.DataFrame:
    """taguru's own per-case frame for the run (the scorer the pipeline runs)."""
    return score_cases(eval_set, tables)


def limits_of(tables: RunTables, case_ids: Iterable[str]) -> dict[str, int]:
    """case_id -> the case's limit, for the cases named."""
    wanted = set(case_ids)
    return {
        case_id: int(limit)
        for case_id, limit in tables.case_lanes.select("case_id", "limit").iter_rows()
        if case_id in wanted
    }
