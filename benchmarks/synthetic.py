"""Synthetic data for the loader and artifact benchmarks, shaped like the demo.

``write_eval`` repeats the cases of ``data/sake/eval.jsonl`` (every key the
demo uses: cues, graded sources with and without paragraphs, concepts,
labels, associations, citations with and without section and quote, options)
under fresh case ids, one case per line, UTF-8 as a user writes it.

``artifact_document`` runs the demo once against the reference server (real
lane outputs), then repeats those lane outputs under fresh case ids with
fresh binary32 hit and lane scores, and builds the evaluation.json document
with the pipeline's own table builder, scorer and artifact builder — so the
document has exactly the shapes and value types a run writes.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEMO_EVAL = ROOT / "data" / "sake" / "eval.jsonl"


def demo_cases() -> tuple[str, list[dict[str, Any]]]:
    """The demo's header line and its case objects."""
    lines = [line for line in DEMO_EVAL.read_text("utf-8").splitlines() if line.strip()]
    return lines[0], [json.loads(line) for line in lines[1:]]


def write_eval(path: Path, cases: int, dropped: tuple[str, ...] = ()) -> Path:
    """``cases`` demo-shaped cases (ids ``<demo id>-<n>``) after the demo's header,
    without the keys ``dropped``."""
    header, templates = demo_cases()
    with path.open("w", encoding="utf-8") as out:
        out.write(header + "\n")
        for index in range(cases):
            template = templates[index % len(templates)]
            case = {key: value for key, value in template.items() if key not in dropped}
            case["case_id"] = f"{case['case_id']}-{index:07d}"
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    return path


def _demo_run() -> Any:
    """One real run of the demo (reference server on loopback): its lane outputs in
    case order, its artifact's head and the prepared run."""
    from taguru_eval.artifact.layout import LaneBlocks
    from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
    from taguru_eval.inputs.prepare import prepare_run
    from taguru_eval.options import RunOptions
    from taguru_eval.pipeline.finish import finish_run
    from taguru_eval.run.console import Console
    from taguru_eval.run.runner import network_phase
    from taguru_refserver.serve import running_server

    with tempfile.TemporaryDirectory() as work, running_server(demo_data_dir()) as url:
        options = RunOptions(
            eval_path=str(DEMO_EVAL),
            context=DEMO_CONTEXT,
            url=url,
            out=str(Path(work) / "evaluation.json"),
            thresholds=str(DEMO_EVAL.parent / "thresholds.json"),
            store_dir=None,
            no_store=True,
        )
        console = Console(stdout=io.StringIO(), stderr=io.StringIO())
        prepared = prepare_run(options, {}, stderr=console.err)
        outputs: list[Any] = []
        blocks = LaneBlocks()

        def finished(output: Any) -> None:
            outputs.append(output)
            blocks.add(output)

        phase = asyncio.run(network_phase(prepared, console=console, on_finished=finished))
        result = finish_run(prepared, phase, console, blocks)
        blocks.close()
        ordered = sorted(outputs, key=lambda output: output["case_index"])
        return ordered, result.head, prepared


def _rescored(output: Mapping[str, Any], rnd: random.Random) -> dict[str, Any]:
    """A lane output's copy whose hits carry fresh scores (everything else shared)."""
    from taguru_eval._base.text import to_f32

    passage = dict(output["passage"])
    hits = []
    for hit in passage.get("hits") or []:
        lanes = {
            lane: {"rank": value["rank"], "score": to_f32(rnd.random() * 12)}
            for lane, value in (hit.get("lanes") or {}).items()
        }
        hits.append({**hit, "score": to_f32(rnd.random()), "lanes": lanes})
    if "hits" in passage:
        passage["hits"] = hits
    return {**output, "passage": passage}


def artifact_document(cases: int, seed: int = 15) -> dict[str, Any]:
    """A ``cases``-case evaluation.json document built the way a run builds it."""
    from taguru_eval.artifact.build import build_artifact
    from taguru_eval.gate import case_values_from_cases_frame, evaluate_gate
    from taguru_eval.inputs.dataset import load_eval
    from taguru_eval.score.aggregate import score_run
    from taguru_eval.tables.flatten import build_tables

    templates, head, prepared = _demo_run()
    rnd = random.Random(seed)
    outputs = []
    for index in range(cases):
        template = templates[index % len(templates)]
        case_id = f"{template['case_id']}-{index:07d}"
        copy = _rescored(template, rnd)
        copy["case_index"] = index
        copy["case_id"] = case_id
        copy["calls"] = [
            {**call, "case_index": index, "case_id": case_id} for call in copy["calls"]
        ]
        outputs.append(copy)
    with tempfile.TemporaryDirectory() as work:
        eval_set = load_eval(write_eval(Path(work) / "eval.jsonl", cases))
    tables = build_tables(outputs, "bench")
    scores = score_run(eval_set, tables)
    doc = build_artifact(_run_context(head, eval_set.name), outputs, scores)
    if prepared.thresholds is not None:
        report = evaluate_gate(
            prepared.thresholds,
            scores.metrics_frame,
            case_values_from_cases_frame(scores.cases),
            stable=bool(doc["corpus"]["stable"]),
            case_ids=eval_set.case_ids,
        )
        doc["thresholds"] = report.block
    return doc


def _run_context(demo: Mapping[str, Any], eval_name: str | None) -> Any:
    """The demo run's own run-level facts (inputs, corpus) for the synthetic document."""
    from taguru_eval.artifact.build import RunContext

    inputs, corpus = demo["inputs"], demo["corpus"]
    return RunContext(
        eval_path="eval.jsonl",
        eval_name=eval_name,
        context=inputs["context"],
        url=inputs["url"],
        out="evaluation.json",
        generated_at=demo["generated_at"],
        revision_before=corpus["revision_before"],
        revision_after=corpus["revision_after"],
        last_write_epoch_before=corpus["last_write_epoch_before"],
        last_write_epoch_after=corpus["last_write_epoch_after"],
        sources_count=corpus["sources_count"],
        provider_model=corpus["embeddings"]["provider_model"],
        concurrency=inputs["concurrency"],
    )
