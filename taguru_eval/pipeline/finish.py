"""After the network phase: tables -> score -> gate -> artifact -> console -> store.

:func:`finish_run` turns a finished :class:`~taguru_eval.run.runner.NetworkPhase`
into the run's result. The artifact is written atomically at the very end, so
an interrupted or failed run leaves no file behind. The run's tables are staged
for the store while the artifact is built (on a thread: Parquet writing leaves
the GIL), and the run enters the store only after the artifact is written; it
never decides the outcome: a store that cannot be written is a
:class:`~taguru_eval.errors.StoreWriteWarning`, and the exit code stays the
gate's verdict."""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from taguru_eval._base.files import write_bytes_atomic, writes_through
from taguru_eval._base.signals import check
from taguru_eval._base.text import one_line
from taguru_eval.artifact.abstention import VectorFacts, abstention_block, answerability_entries
from taguru_eval.artifact.answers import answers_blocks, merge_case_extras
from taguru_eval.artifact.build import (
    RunContext,
    artifact_chunks,
    artifact_head,
    case_blocks,
    write_artifact,
)
from taguru_eval.artifact.document import WrittenDocument
from taguru_eval.artifact.layout import LaneBlocks
from taguru_eval.errors import (
    EXIT_OK,
    PREFIX,
    RunError,
    StoreWriteWarning,
    os_error_text,
    temporary_write_error,
    warn,
)
from taguru_eval.flag_gates import apply_flag_gates
from taguru_eval.gate import (
    REPORT_ONLY_NOTICE,
    GateReport,
    case_values_from_cases_frame,
    evaluate_gate,
)
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.run.console import Console
from taguru_eval.run.runner import NetworkPhase
from taguru_eval.score.aggregate import Scores, score_run
from taguru_eval.store import RunOrigin, StagedRun, new_run_id
from taguru_eval.summary import (
    must_refuse_lines,
    must_refuse_stderr_lines,
    summary_lines,
    wrote_line,
)
from taguru_eval.tables.flatten import with_repeated_calls
from taguru_eval.tables.schemas import RunTables

REPORT_ONLY_LINE = f"{PREFIX}{REPORT_ONLY_NOTICE}"

NOT_STORED = "the run is not stored (evaluation.json is written and the exit code is the gate's)"


def run_context(
    prepared: PreparedRun,
    phase: NetworkPhase,
    generated_at: datetime,
    gate: GateReport | None = None,
) -> RunContext:
    """The run-level facts of the artifact (§6.3, §6.4)."""
    options = prepared.options
    embeddings = phase.preflight.embeddings
    return RunContext(
        eval_path=options.eval_path,
        eval_name=prepared.eval_set.name,
        context=options.context,
        url=prepared.masked_url,
        out=options.out,
        generated_at=f"{generated_at:%Y-%m-%dT%H:%M:%SZ}",
        revision_before=phase.preflight.before.revision,
        revision_after=phase.after.revision,
        last_write_epoch_before=phase.preflight.before.last_write_epoch,
        last_write_epoch_after=phase.after.last_write_epoch,
        sources_count=len(phase.preflight.sources),
        embeddings_read=embeddings is not None,
        provider_model=None if embeddings is None else embeddings["provider_model"],
        mode=options.mode,
        budget=options.budget.to_json() if options.records_budget else None,
        rerank=options.rerank,
        concurrency=options.concurrency,
        must_refuse=(
            None
            if prepared.must_refuse is None
            else prepared.must_refuse.inputs_block(options.resolved_refusal_rule)
        ),
        answers=(
            None
            if prepared.answers is None
            else prepared.answers.inputs_block(options.resolved_answer_match)
        ),
        thresholds=None if gate is None else gate.block,
        warnings=prepared.warnings,
        resumed=phase.sessions if phase.sessions > 1 else None,
        repeat=phase.repeat,
        selection=prepared.selection,
    )


def vector_facts(phase: NetworkPhase) -> VectorFacts:
    """The embedding identity and passage-vector sidecar the preflight read."""
    embeddings = phase.preflight.embeddings
    return VectorFacts(
        embeddings_read=embeddings is not None,
        provider_model=None if embeddings is None else embeddings["provider_model"],
        passages=phase.preflight.passages,
    )


def abstention_extras(
    prepared: PreparedRun, phase: NetworkPhase, tables: RunTables, scores: Scores
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """With ``--must-refuse``: the top-level ``abstention`` block and each
    answerable case's ``answerability`` entry (ABSTENTION.md §3.8)."""
    block = abstention_block(
        prepared.options.resolved_refusal_rule,
        tables,
        scores.refusal_cases,
        vector_facts(phase),
        prepared.must_refuse_warnings,
    )
    return {"abstention": block}, answerability_entries(scores.cases)


@dataclass(repr=False)
class RunResult:
    """A finished run: its artifact, frames, gate verdict and where it was written.

    ``doc`` is the written evaluation.json; only its head (every member but
    ``cases``) is held in memory, and its cases are read back from the file
    when first asked for (:class:`~taguru_eval.artifact.document.WrittenDocument`).
    """

    exit_code: int
    run_id: str
    doc: WrittenDocument
    case_count: int
    tables: RunTables
    scores: Scores
    gate: GateReport | None
    out_path: Path
    store_path: Path | None
    stdout_lines: list[str]

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run formats the repr of the task that returned
        # this (restoring its SIGINT handler), and a dataclass repr would render
        # every case of the artifact first, for as long as a large run takes to write.
        return (
            f"RunResult(run_id={self.run_id!r}, exit_code={self.exit_code}, "
            f"cases={self.case_count}, out_path={str(self.out_path)!r})"
        )

    @property
    def head(self) -> dict[str, Any]:
        """The artifact without its cases (inputs, corpus, metrics, …)."""
        return self.doc.head


def write_document(out: Path, chunks: Iterable[bytes]) -> Path:
    """Streams the artifact to ``out``; returns a file holding what was written: ``out``
    itself, or, when ``out`` is a device or a FIFO (``/dev/null``), a private copy
    (read back, the device would give nothing), removed at exit."""
    if not writes_through(out):
        write_artifact(out, chunks)
        return out
    try:
        handle, name = tempfile.mkstemp(prefix="taguru-eval-", suffix=".json")
    except OSError as exc:
        raise temporary_write_error(tempfile.gettempdir(), exc) from None
    os.close(handle)
    copy = Path(name)
    atexit.register(_remove_quietly, copy)
    write_artifact(copy, chunks)
    try:
        with copy.open("rb") as source:
            write_bytes_atomic(out, iter(lambda: source.read(1 << 20), b""))
    except OSError as exc:
        raise RunError(f"writing {out}: {os_error_text(exc)}") from None
    return copy


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def finish_run(
    prepared: PreparedRun,
    phase: NetworkPhase,
    console: Console,
    lane_blocks: LaneBlocks,
    retire: Callable[[str], None] | None = None,
) -> RunResult:
    """tables -> score -> gate -> artifact -> write -> console -> store (§3.9).

    The gate reads the score frames; evaluation.json is a sink written from
    the same frames, the gate's verdict included, streamed case block by case
    block: ``lane_blocks`` holds each case's lane values, encoded as the case
    finished. ``retire(run_id)`` runs just before the run's rename into the
    store (its checkpoint is marked finished there). A stop signal is raised
    between the stages and at that last step, never after it: once the run is
    stored it stays so.
    """
    options = prepared.options
    check()  # a stop signal is raised between the stages, never inside one
    run_id = new_run_id(phase.finished_at)
    tables = phase.rows.finish(run_id, phase.refusal_outputs)
    # run --repeat: the other repetitions' tables are scored for stability only,
    # one at a time; the run keeps nothing of them but their calls.
    repeated_calls: list[pl.DataFrame] = []

    def repetitions() -> Iterator[RunTables]:
        for rows in phase.take_repeated():
            again = rows.finish(run_id)
            del rows
            repeated_calls.append(again.calls)
            yield again
            del again  # scored: only its calls stay

    must_refuse = prepared.must_refuse is not None
    scores = score_run(
        prepared.eval_set,
        tables,
        rerank_requested=options.rerank is not None,
        refusal_rule=options.resolved_refusal_rule if must_refuse else None,
        # The evidence probe judges passage items only where vectors are ready.
        vectors_ready=vector_facts(phase).passage_vectors == "ready" if options.assembly else None,
        answers_declared=None if prepared.answers is None else prepared.answers.declared,
        repetitions=repetitions() if phase.repeat > 1 else None,
    )
    tables = with_repeated_calls(tables, repeated_calls)
    check()
    report: GateReport | None = None
    if prepared.thresholds is not None:
        report = evaluate_gate(
            prepared.thresholds,
            scores.metrics_frame,
            case_values_from_cases_frame(scores.cases, scores.catalog),
            stable=phase.stable,
            case_ids=prepared.eval_set.case_ids,
            members=scores.membership if must_refuse else None,
        )
        # --must-refuse / --answers bring their own gates (flag_gates.py).
        report = apply_flag_gates(
            report,
            prepared.thresholds,
            scores.metrics,
            refusals=scores.refusal_cases if must_refuse else None,
            members=scores.membership if must_refuse else None,
            rule=options.resolved_refusal_rule if must_refuse else None,
            answers_listed=None if prepared.answers is None else len(prepared.answers.by_case),
        )
    store_dir = options.store_path
    # The store's tables are written on a thread of their own while the artifact
    # is built and written (Parquet leaves the GIL); the run is moved into the
    # store only after evaluation.json exists.
    staged = (
        None
        if store_dir is None
        else StagedRun(
            store_dir,
            options.context,
            run_id,
            {**tables.frames(), **scores.frames()},
            origin=RunOrigin("run"),
            catalog=scores.catalog,
        )
    )
    try:
        context = run_context(prepared, phase, datetime.now(UTC), report)
        top_level, case_extras = (
            abstention_extras(prepared, phase, tables, scores) if must_refuse else ({}, {})
        )
        if prepared.answers is not None:
            case_extras = merge_case_extras(
                case_extras, answers_blocks(prepared.answers, scores.cases, tables.answer_checks)
            )
        head = artifact_head(
            context, phase.cases, scores, catalog=scores.catalog, extra_top_level=top_level
        )
        blocks = case_blocks(scores, lane_blocks, catalog=scores.catalog, case_extras=case_extras)
        written = write_document(Path(options.out), artifact_chunks(head, blocks))
        doc = WrittenDocument(head, written)
        if must_refuse:
            for line in must_refuse_stderr_lines(head["abstention"]):
                console.err(line)
        lines = summary_lines(prepared, doc.head, scores, tables)
        if must_refuse:
            lines.extend(must_refuse_lines(doc.head))
        lines.append(wrote_line(options.out))
        if report is not None:
            lines.extend(report.lines())
        for line in lines:
            # The server's source names (an invalid locator's line), the context
            # and the paths are not ours to send to a terminal raw; a line without
            # a control character keeps its bytes.
            console.out(one_line(line))
    except BaseException:  # the run is not stored: what was staged goes
        if staged is not None:
            staged.abandon()
        raise
    store_path: Path | None = None
    if staged is not None:
        # The stored evaluation.json is a copy of the file just written, not a
        # second encoding.

        def committing() -> None:
            check()
            if retire is not None:
                retire(run_id)

        try:
            store_path = staged.finish(written, committing)
        except RunError as error:
            warn(StoreWriteWarning(f"{error.message}; {NOT_STORED}"))
        else:
            console.err(one_line(f"{PREFIX}run stored in {store_path}"))
    if report is None:
        console.err(REPORT_ONLY_LINE)
        exit_code = EXIT_OK
    else:
        exit_code = report.exit_code
    return RunResult(
        exit_code=exit_code,
        run_id=run_id,
        doc=doc,
        case_count=phase.cases,
        tables=tables,
        scores=scores,
        gate=report,
        out_path=Path(options.out),
        store_path=store_path,
        stdout_lines=lines,
    )
