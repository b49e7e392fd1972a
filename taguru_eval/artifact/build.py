"""evaluation.json (EVALUATE.md §6): build the document, serialise it, write it atomically.

The artifact only serialises: per-case metrics come from the scorer's
``cases`` frame, aggregates from its metrics map, and the lane blocks are
copied from the lane outputs (:mod:`.blocks`), each value placed by the case
block's layout (:mod:`.layout`). Floats use serde_json's spelling
(:func:`taguru_eval._base.text.dumps_json`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from taguru_eval._base.files import write_bytes_atomic
from taguru_eval._base.text import dumps_json, encode_json, encode_json_each
from taguru_eval.artifact.layout import LaneBlocks, build_case_block, case_layout, case_steps
from taguru_eval.catalog import CATALOG, Catalog, MetricDefinition
from taguru_eval.contract import ARTIFACT_STAMP, DEFAULT_LIMIT, RESOLVE_LIMIT
from taguru_eval.errors import RunError, os_error_text
from taguru_eval.score.aggregate import Scores
from taguru_eval.tables.shapes import LaneOutput

MATCHING: dict[str, Any] = {
    "normalization": "taguru::context::normalize_entry",
    "normalized": ["expected_concepts", "expected_labels"],
    "sources": "exact (source, paragraph) match — no normalization",
}


def dumps(doc: Any) -> str:
    """evaluation.json's text: serde_json's pretty layout with 2-space indent."""
    return dumps_json(doc, indent=2)


def write_json_atomic(path: str | Path, doc: Any) -> bytes:
    """Serialise ``doc`` fully, then write it via a temp file + rename (EVALUATE.md §3.9);
    returns the bytes written.

    Serialisation happens before any file is created, and a failed write
    removes its temp file, so a failure (or Ctrl-C) never leaves a partial
    file behind. Failure -> :class:`RunError` ``writing {path}: {error}``.
    The bytes are :func:`dumps`'s text in UTF-8, encoded without the text.
    """
    target = Path(path)
    try:
        payload = encode_json(doc, indent=2)
    except (TypeError, ValueError) as exc:
        raise RunError(f"writing {path}: {exc}") from None
    try:
        write_bytes_atomic(target, payload)
    except OSError as exc:
        raise RunError(f"writing {path}: {os_error_text(exc)}") from None
    return payload


@dataclass(frozen=True)
class RunContext:
    """The run-level facts the artifact records besides cases and metrics (§6.3, §6.4).

    ``url`` must already be masked (scheme://host:port). ``embeddings_read``
    False omits ``corpus.embeddings`` (the GET failed); True writes
    ``{provider_model}`` (null = the server has no provider). ``resumed``: the
    number of sessions of a run continued with ``--resume`` (``inputs.resumed``);
    ``repeat``: how many times every case was sent (``inputs.repeat``, written
    only when more than once).
    """

    eval_path: str
    eval_name: str | None
    context: str
    url: str
    out: str
    generated_at: str
    revision_before: Mapping[str, int]
    revision_after: Mapping[str, int]
    last_write_epoch_before: int
    last_write_epoch_after: int
    sources_count: int
    embeddings_read: bool = True
    provider_model: str | None = None
    mode: str = "baseline"
    budget: Mapping[str, int] | None = None
    rerank: str | None = None
    concurrency: int = 8
    must_refuse: Mapping[str, Any] | None = None
    answers: Mapping[str, Any] | None = None  # inputs.answers (--answers)
    thresholds: Mapping[str, Any] | None = None
    warnings: Sequence[str] = field(default_factory=tuple)
    resumed: int | None = None  # sessions of a resumed run (None: one session)
    repeat: int = 1  # run --repeat N
    selection: Mapping[str, Any] | None = None  # inputs.selection (--sample, --filter, …)


def _revision(revision: Mapping[str, int]) -> dict[str, int]:
    return {key: revision[key] for key in ("graph", "passages", "config")}


def inputs_block(context: RunContext, case_count: int) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "eval": {"path": context.eval_path, "name": context.eval_name, "cases": case_count},
        "context": context.context,
        "url": context.url,
        "out": context.out,
        "default_limit": DEFAULT_LIMIT,
        "resolve_limit": RESOLVE_LIMIT,
        "mode": context.mode,
    }
    if context.budget is not None:
        inputs["budget"] = {
            key: context.budget[key] for key in ("max_items", "max_bytes", "max_tokens")
        }
    if context.rerank is not None:
        inputs["rerank"] = context.rerank
    inputs["concurrency"] = context.concurrency
    if context.must_refuse is not None:
        inputs["must_refuse"] = dict(context.must_refuse)
    if context.answers is not None:
        inputs["answers"] = dict(context.answers)
    # Additive, and only with --repeat N > 1: --repeat 1 is a plain run, byte for byte.
    if context.repeat > 1:
        inputs["repeat"] = context.repeat
    # Additive, and only with a selection flag: a run of the whole file keeps every byte.
    if context.selection is not None:
        inputs["selection"] = dict(context.selection)
    # Additive and last, so a run in one session keeps every byte it had.
    if context.resumed is not None:
        inputs["resumed"] = context.resumed
    return inputs


def corpus_block(context: RunContext) -> dict[str, Any]:
    before = _revision(context.revision_before)
    after = _revision(context.revision_after)
    corpus: dict[str, Any] = {
        "revision_before": before,
        "revision_after": after,
        "stable": before == after,
        "last_write_epoch_before": context.last_write_epoch_before,
        "last_write_epoch_after": context.last_write_epoch_after,
    }
    if context.embeddings_read:
        corpus["embeddings"] = {"provider_model": context.provider_model}
    corpus["sources_count"] = context.sources_count
    return corpus


def artifact_head(
    context: RunContext,
    case_count: int,
    scores: Scores,
    *,
    catalog: Catalog = CATALOG,
    extra_definitions: Mapping[str, MetricDefinition] | None = None,
    extra_metrics: Mapping[str, Mapping[str, Any]] | None = None,
    extra_top_level: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The document without its cases, keys in §6.1 order: ``cases`` holds its place
    (an empty list) until :func:`build_artifact` fills it or :func:`write_artifact`
    streams it."""
    metrics = dict(scores.metrics)
    metrics.update({name: dict(value) for name, value in (extra_metrics or {}).items()})
    doc: dict[str, Any] = {
        "taguru_evaluation": ARTIFACT_STAMP,
        "generated_at": context.generated_at,
        "matching": {
            "normalization": MATCHING["normalization"],
            "normalized": list(MATCHING["normalized"]),
            "sources": MATCHING["sources"],
        },
        "inputs": inputs_block(context, case_count),
        "corpus": corpus_block(context),
        "thresholds": None if context.thresholds is None else dict(context.thresholds),
        "definitions": (
            catalog.with_metrics(extra_definitions) if extra_definitions else catalog
        ).definitions(),
    }
    if context.warnings:
        doc["warnings"] = list(context.warnings)
    doc["cases"] = []
    doc["metrics"] = {name: metrics[name] for name in sorted(metrics)}
    doc.update(extra_top_level or {})
    return doc


def build_artifact(
    context: RunContext,
    lane_outputs: Sequence[LaneOutput],
    scores: Scores,
    *,
    catalog: Catalog = CATALOG,
    extra_definitions: Mapping[str, MetricDefinition] | None = None,
    extra_metrics: Mapping[str, Mapping[str, Any]] | None = None,
    case_extras: Mapping[str, Mapping[str, Any]] | None = None,
    extra_top_level: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole evaluation.json document in memory, keys in §6.1 order (a run
    streams it instead: :func:`write_artifact` writes the same bytes).

    ``catalog`` declares the metrics and where each per-case value goes. The
    ``extra_*``/``case_extras`` hooks carry additive blocks (e.g.
    ABSTENTION.md §3.8 with ``--must-refuse``): extra definitions/metrics are
    merged into the sorted maps, ``case_extras[case_id]`` keys are appended to
    that case's block, and ``extra_top_level`` keys come after ``metrics``.
    """
    ordered = sorted(lane_outputs, key=lambda output: output["case_index"])
    rows = scores.cases.sort("case_index").to_dicts()
    if len(rows) != len(ordered):
        raise ValueError("the cases frame and the lane outputs disagree on the case count")
    doc = artifact_head(
        context,
        len(ordered),
        scores,
        catalog=catalog,
        extra_definitions=extra_definitions,
        extra_metrics=extra_metrics,
        extra_top_level=extra_top_level,
    )
    steps = case_steps(case_layout(catalog))
    cases = [
        build_case_block(steps, output, row) for output, row in zip(ordered, rows, strict=True)
    ]
    for block in cases:
        block.update((case_extras or {}).get(block["case_id"], {}))
    doc["cases"] = cases
    return doc


CASES_PER_BATCH: Final = 1_000
"""Case blocks built and encoded together while the artifact is streamed: the
memory a batch holds, against one binary32 spelling pass per batch."""


def case_blocks(
    scores: Scores,
    lane_blocks: LaneBlocks,
    *,
    catalog: Catalog = CATALOG,
    case_extras: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[bytes]:
    """Each ``cases[]`` entry's pretty JSON in case order, built batch by batch from
    the ``cases`` frame and the lane values encoded as the cases finished."""
    if len(lane_blocks) != scores.cases.height:
        raise ValueError("the cases frame and the lane outputs disagree on the case count")
    steps = case_steps(case_layout(catalog))
    extras = case_extras or {}
    no_lane_output: dict[str, Any] = {}  # every lane value is in lane_blocks
    for batch in scores.cases.sort("case_index").iter_slices(CASES_PER_BATCH):
        blocks = []
        rows = batch.to_dicts()
        read = lane_blocks.values_of([row["case_index"] for row in rows])
        for row, values in zip(rows, read, strict=True):
            if values is None:
                raise ValueError(f"case {row['case_index']} has no lane values")
            block = build_case_block(steps, no_lane_output, row, values)
            block.update(extras.get(row["case_id"], {}))
            blocks.append(block)
        yield from encode_json_each(blocks, indent=2)


def artifact_chunks(head: Mapping[str, Any], cases: Iterable[bytes]) -> Iterator[bytes]:
    """evaluation.json's bytes piece by piece: ``head``'s members as :func:`dumps`
    lays them out, ``cases`` (each block's own pretty JSON) in its place.

    Every member is laid out alone and the pieces are indented to their depth
    (JSON text holds no raw newline inside a string, so indenting after each
    newline is exact); a test holds the result to :func:`dumps` of the whole.
    """
    yield b"{\n"
    for position, (key, value) in enumerate(head.items()):
        if position:
            yield b",\n"
        if key != "cases":
            yield encode_json({key: value}, indent=2)[2:-2]  # without "{\n" and "\n}"
            continue
        yield b'  "cases": ['
        written = 0
        for block in cases:
            yield b"\n    " if not written else b",\n    "
            yield block.replace(b"\n", b"\n    ")
            written += 1
        yield b"\n  ]" if written else b"]"
    yield b"\n}"


def write_artifact(path: str | Path, chunks: Iterable[bytes]) -> None:
    """Streams ``chunks`` to ``path`` through a temp file and a rename (§3.9): a
    failure (or Ctrl-C) leaves no partial file. Failure -> :class:`RunError`
    ``writing {path}: {error}``."""
    try:
        write_bytes_atomic(Path(path), chunks)
    except (TypeError, ValueError) as exc:
        raise RunError(f"writing {path}: {exc}") from None
    except OSError as exc:
        raise RunError(f"writing {path}: {os_error_text(exc)}") from None
