"""Run mode's network phase and orchestration (EVALUATE.md §2.6, §3, §8).

``prepare`` (A) has validated every input; this module prints the target
line, probes the server version, runs the preflight in the documented order,
brackets the cases with two context reads, runs the cases concurrently under
``--concurrency`` (results always in case order), then hands the lane outputs
to the one-way pipeline tables -> score -> artifact -> gate -> store and
prints the console summary. The artifact is written atomically at the very
end, so an interrupted or failed run leaves no file behind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from taguru_eval import jsonstrict as js
from taguru_eval.artifact import RunContext, build_artifact, dumps, write_json_atomic
from taguru_eval.client import CallFailure, TaguruClient, probe_version
from taguru_eval.console import Console, Progress, summary_lines, terminal_progress
from taguru_eval.dataset import EvalCase, EvalSet
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_RUN_FAILED,
    InputError,
    RunError,
    TaguruEvalError,
)
from taguru_eval.gate import (
    REPORT_ONLY_NOTICE,
    GateReport,
    case_metric_frame,
    evaluate_gate,
)
from taguru_eval.lanes import run_case
from taguru_eval.options import Budget
from taguru_eval.prepare import PreparedRun
from taguru_eval.score import Scores, score_run
from taguru_eval.store import DEFAULT_STORE_DIR, new_run_id, write_run
from taguru_eval.tables import LaneOutput, RunTables, build_tables

PREFIX = "taguru: evaluate: "
ASSEMBLY_UNAVAILABLE = (
    "--assembly is not available in this build yet: run without it for the baseline "
    "passage lane (POST /contexts/{name}/sources/search)"
)
SOURCES_PAGE_LIMIT = 1000
REPORT_ONLY_LINE = f"{PREFIX}{REPORT_ONLY_NOTICE}"

# --------------------------------------------------------------------------- preflight


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """What evaluate reads from a ``DirectoryEntry``: the revision and last write."""

    revision: dict[str, int]
    last_write_epoch: int


@dataclass(frozen=True, slots=True)
class Preflight:
    """Results of §3.1: the first context read, the embedding identity, the sources."""

    before: ContextEntry
    embeddings: dict[str, str | None] | None  # None: the embeddings GET failed (key omitted)
    sources: frozenset[str]


def read_context_entry(payload: object) -> ContextEntry:
    """Decode a ``DirectoryEntry`` the way the reference does; raises JsonShapeError."""
    entry = js.read_object(payload, ())
    for key, reader in (
        ("name", js.read_str),
        ("description", js.read_str),
        ("pinned", js.read_bool),
        ("loaded", js.read_bool),
        ("stats", js.read_object),
    ):
        if key not in entry:
            raise js.JsonShapeError((), f"missing field `{key}`")
        reader(entry[key], (key,))
    if "usage" not in entry:
        raise js.JsonShapeError((), "missing field `usage`")
    usage = js.read_object(entry["usage"], ("usage",))
    counters = ("reads", "empty_reads", "writes", "last_read_epoch", "last_write_epoch")
    values = {
        key: js.read_u64(usage[key], ("usage", key)) if key in usage else 0 for key in counters
    }
    revision = {"graph": 0, "passages": 0, "config": 0}
    raw_revision = entry.get("revision")
    if raw_revision is not None:  # absent or null: all zeros (serde default)
        obj = js.read_object(raw_revision, ("revision",))
        for key in revision:
            if key in obj:
                revision[key] = js.read_u64(obj[key], ("revision", key))
    return ContextEntry(revision=revision, last_write_epoch=values["last_write_epoch"])


async def check_health(client: TaguruClient, masked_url: str) -> None:
    """§3.1.1: ``GET /health`` must answer 200, else exit 1."""
    try:
        await client.get_bare(["health"])
    except CallFailure as failure:
        raise RunError(f"server at {masked_url} is not reachable: {failure.message}") from None


async def read_context(client: TaguruClient, context: str) -> ContextEntry:
    """§3.1.2: the first context read (404 → exit 2, other failures → exit 1)."""
    try:
        reply = await client.get(["contexts", context])
    except CallFailure as failure:
        code = EXIT_INPUT if failure.status == 404 else EXIT_RUN_FAILED
        raise TaguruEvalError(failure.message, exit_code=code) from None
    try:
        return read_context_entry(reply.payload)
    except js.JsonShapeError as exc:
        raise RunError(f"{context}: unreadable context entry: {exc.detail}") from None


async def read_context_after(client: TaguruClient, context: str) -> ContextEntry:
    """§3.2: the second context read; any failure (404 included) → exit 1."""
    try:
        reply = await client.get(["contexts", context])
    except CallFailure as failure:
        raise RunError(
            f"{context}: could not re-read the context after the run: {failure.message}"
        ) from None
    try:
        return read_context_entry(reply.payload)
    except js.JsonShapeError as exc:
        raise RunError(f"{context}: unreadable context entry after the run: {exc.detail}") from None


async def read_embeddings(
    client: TaguruClient, context: str, stderr: Callable[[str], None]
) -> dict[str, str | None] | None:
    """§3.1.3: ``{provider_model}``, or None (stderr note) when the GET fails."""
    try:
        reply = await client.get(["contexts", context, "embeddings"])
    except CallFailure as failure:
        stderr(
            f"{PREFIX}{context}: could not read embedding status (recording none): "
            f"{failure.message}"
        )
        return None
    payload = reply.payload
    model = payload.get("provider_model") if isinstance(payload, dict) else None
    return {"provider_model": model if isinstance(model, str) else None}


async def walk_sources(client: TaguruClient, context: str) -> frozenset[str]:
    """§3.1.4: keyset-walk ``GET …/sources`` until an empty page; failures → exit 1."""
    names: set[str] = set()
    cursor: str | None = None
    while True:
        query = [("limit", str(SOURCES_PAGE_LIMIT))]
        if cursor is not None:
            query.append(("after", cursor))
        try:
            reply = await client.get(["contexts", context, "sources"], query)
        except CallFailure as failure:
            raise RunError(failure.message) from None
        payload = reply.payload
        page = payload.get("sources") if isinstance(payload, dict) else None
        if not isinstance(page, list):
            raise RunError(f"{context}: not a taguru sources page")
        if not all(isinstance(name, str) for name in page):
            raise RunError(f"{context}: a sources entry is not a string")
        if not page:
            return frozenset(names)
        if cursor is not None and page[0] <= cursor:
            raise RunError(f"{context}: the server's sources page did not advance past '{cursor}'")
        names.update(page)
        cursor = page[-1]


def check_expected_sources(eval_set: EvalSet, context: str, sources: frozenset[str]) -> None:
    """§3.1.5: every expected source must be carried by the context, else exit 2."""
    lines = [
        f"{PREFIX}case '{case.case_id}': expected_sources names '{entry.source}', "
        f"which '{context}' does not carry"
        for case in eval_set.cases
        for entry in case.expected_sources
        if entry.source not in sources
    ]
    if lines:
        # The CLI prints a message that already starts with "taguru: " verbatim,
        # so every offending entry keeps its own prefixed line.
        raise InputError("\n".join(lines))


async def preflight(
    client: TaguruClient, prepared: PreparedRun, stderr: Callable[[str], None]
) -> Preflight:
    """§3.1 in order: health, context entry, embeddings, source walk, expected sources."""
    context = prepared.options.context
    await check_health(client, prepared.masked_url)
    before = await read_context(client, context)
    embeddings = await read_embeddings(client, context, stderr)
    sources = await walk_sources(client, context)
    check_expected_sources(prepared.eval_set, context, sources)
    return Preflight(before=before, embeddings=embeddings, sources=sources)


# --------------------------------------------------------------------------- cases


async def run_cases(
    client: TaguruClient,
    context: str,
    cases: Sequence[EvalCase],
    concurrency: int,
    progress: Progress | None = None,
    budget: Budget | None = None,
) -> list[LaneOutput]:
    """Every case's lanes, at most ``concurrency`` cases in flight, in case order.

    The slot is taken before a case's first call, so waiting for it is never
    part of any latency (the client times the exchange alone).
    """
    slots = asyncio.Semaphore(max(1, concurrency))
    done = 0

    async def one(index: int, case: EvalCase) -> LaneOutput:
        nonlocal done
        async with slots:
            output = await run_case(client, context, index, case, budget)
        done += 1
        if progress is not None:
            progress(done, len(cases))
        return output

    tasks = [asyncio.ensure_future(one(index, case)) for index, case in enumerate(cases)]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# --------------------------------------------------------------------------- the run


@dataclass
class NetworkPhase:
    """Everything the network phase produced, before any scoring."""

    preflight: Preflight
    after: ContextEntry
    outputs: list[LaneOutput]
    started_at: datetime
    finished_at: datetime
    cases_elapsed_s: float  # wall time of the cases alone (monotonic clock)

    @property
    def stable(self) -> bool:
        return self.preflight.before.revision == self.after.revision


async def network_phase(
    prepared: PreparedRun,
    *,
    console: Console,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> NetworkPhase:
    """§2.3 steps 7–9 and §3.1–§3.2: target line, probe, preflight, cases, re-read."""
    options = prepared.options
    console.err(f"evaluate → {prepared.masked_url}")
    async with TaguruClient(
        prepared.base_url,
        prepared.token,
        transport=transport,
        max_connections=max(1, options.concurrency),
    ) as client:
        warning = await probe_version(client)
        if warning is not None:
            console.err(warning)
        checked = await preflight(client, prepared, console.err)
        started = datetime.now(UTC)
        clock = time.monotonic()
        outputs = await run_cases(
            client,
            options.context,
            prepared.eval_set.cases,
            options.concurrency,
            progress,
            options.budget if options.budget_given else None,
        )
        cases_elapsed = time.monotonic() - clock
        after = await read_context_after(client, options.context)
        finished = datetime.now(UTC)
    return NetworkPhase(
        preflight=checked,
        after=after,
        outputs=outputs,
        started_at=started,
        finished_at=finished,
        cases_elapsed_s=cases_elapsed,
    )


def run_context(prepared: PreparedRun, phase: NetworkPhase, generated_at: datetime) -> RunContext:
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
        warnings=prepared.warnings,
    )


@dataclass
class RunResult:
    """A finished run: its artifact, frames, gate verdict and where it was written."""

    exit_code: int
    run_id: str
    doc: dict[str, Any]
    lane_outputs: list[LaneOutput]
    tables: RunTables
    scores: Scores
    gate: GateReport | None
    out_path: Path
    store_path: Path | None
    stdout_lines: list[str]


def resolve_store_dir(prepared: PreparedRun) -> Path | None:
    """``--store DIR``, ``--no-store``, or the default ``runs/`` under the CWD."""
    options = prepared.options
    if options.no_store:
        return None
    return Path(options.store_dir or DEFAULT_STORE_DIR)


async def execute_async(
    prepared: PreparedRun,
    *,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """One whole run; raises a project error for exit 1/2 outcomes (nothing written)."""
    console = console or Console()
    if prepared.options.assembly:
        # Refused before any network call (exit 2) rather than silently running baseline.
        raise InputError(ASSEMBLY_UNAVAILABLE)
    phase = await network_phase(prepared, console=console, transport=transport, progress=progress)
    return finish_run(prepared, phase, console)


def finish_run(prepared: PreparedRun, phase: NetworkPhase, console: Console) -> RunResult:
    """tables -> score -> artifact -> gate -> write -> console -> store (§3.9)."""
    options = prepared.options
    run_id = new_run_id(phase.finished_at)
    tables = build_tables(phase.outputs, run_id)
    scores = score_run(prepared.eval_set, tables, rerank_requested=options.rerank is not None)
    doc = build_artifact(run_context(prepared, phase, datetime.now(UTC)), phase.outputs, scores)
    report: GateReport | None = None
    if prepared.thresholds is not None:
        report = evaluate_gate(
            prepared.thresholds,
            doc["metrics"],
            case_metric_frame(doc["cases"]),
            stable=bool(doc["corpus"]["stable"]),
            case_ids=prepared.eval_set.case_ids,
        )
        doc["thresholds"] = report.block
    write_json_atomic(options.out, doc)
    lines = summary_lines(prepared, doc, scores, tables)
    lines.append(f"  wrote {options.out}")
    if report is not None:
        lines.extend(report.lines())
    for line in lines:
        console.out(line)
    store_path: Path | None = None
    store_dir = resolve_store_dir(prepared)
    if store_dir is not None:
        frames = {**tables.frames(), "cases": scores.cases, "metrics": scores.metrics_frame}
        store_path = write_run(store_dir, options.context, run_id, frames, dumps(doc))
        console.err(f"{PREFIX}run stored in {store_path}")
    if report is None:
        console.err(REPORT_ONLY_LINE)
        exit_code = EXIT_OK
    else:
        exit_code = report.exit_code
    return RunResult(
        exit_code=exit_code,
        run_id=run_id,
        doc=doc,
        lane_outputs=phase.outputs,
        tables=tables,
        scores=scores,
        gate=report,
        out_path=Path(options.out),
        store_path=store_path,
        stdout_lines=lines,
    )


def execute(
    prepared: PreparedRun,
    *,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Synchronous :func:`execute_async` (its own event loop)."""
    return asyncio.run(
        execute_async(prepared, console=console, transport=transport, progress=progress)
    )


def run_prepared(prepared: PreparedRun) -> int:
    """The CLI's run mode after ``prepare``: returns the exit code.

    Project errors (exit 1/2) propagate to the CLI, which prints them as one
    ``taguru: evaluate: …`` line.
    """
    console = Console()
    result = execute(prepared, console=console, progress=terminal_progress(console.stderr))
    return result.exit_code
