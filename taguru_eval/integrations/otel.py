"""A finished run as OpenTelemetry spans and ``gen_ai.evaluation.result`` events (OTLP/HTTP).

One trace per run: a suite span (``test.suite.name``, ``test.suite.run.status``),
one child span per case (``test.case.name``, ``test.case.result.status``), and
log records named ``gen_ai.evaluation.result`` — one per per-case metric a case
computed (parented to its case span) and one per side of every aggregate bound
the gate checked (parented to the suite span). The attribute names are the
OpenTelemetry semantic conventions' (the ``test`` registry and the GenAI
evaluation event, both *development*); what they do not cover sits under
``taguru_eval.``. docs/otel.md lists every attribute.

Only metric names, case ids, numbers, bounds and the run's identity are
exported: never a query, a served text, a URL or a token. The records are built
from the run's Polars frames a slice of cases at a time and sent synchronously
slice by slice, so a 100,000-case run never holds more than one slice of spans
and events, and nothing is dropped by a full queue. The first batch the
collector does not accept stops the export: the caller gets one line saying
why (:attr:`OtlpExport.failure`), and the run's exit code never changes.

Needs the ``otel`` extra (``pip install 'taguru_eval[otel]'``); the exporter
honours the standard ``OTEL_EXPORTER_OTLP_*`` variables (endpoint, headers,
timeout, certificates, compression) and ``OTEL_SERVICE_NAME`` /
``OTEL_RESOURCE_ATTRIBUTES``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import polars as pl
from opentelemetry import trace
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import (
    LoggerProvider,
    LogRecordProcessor,
    ReadableLogRecord,
    ReadWriteLogRecord,
)
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from taguru_eval._base.redact import Redactor
from taguru_eval.analyst.junit import bound_name
from taguru_eval.api import Run
from taguru_eval.catalog import catalog_for, scalar_expr
from taguru_eval.contract import VERSION
from taguru_eval.inputs.thresholds import Thresholds

# ------------------------------------------------------------------ the names

SUITE_NAME: Final = "test.suite.name"
SUITE_STATUS: Final = "test.suite.run.status"
CASE_NAME: Final = "test.case.name"
CASE_STATUS: Final = "test.case.result.status"
"""The ``test`` registry's attributes (semantic-conventions model/test/registry.yaml)."""

SUITE_SUCCESS, SUITE_FAILURE = "success", "failure"
CASE_PASS, CASE_FAIL = "pass", "fail"
"""Members of ``test.suite.run.status`` and ``test.case.result.status`` used here."""

EVALUATION_EVENT: Final = "gen_ai.evaluation.result"
EVALUATION_NAME: Final = "gen_ai.evaluation.name"
SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EXPLANATION: Final = "gen_ai.evaluation.explanation"
"""The GenAI evaluation event and its attributes (model/gen-ai,
``event.gen_ai.evaluation.result``)."""

LABEL_PASS, LABEL_FAIL = "pass", "fail"

RUN_ID: Final = "taguru_eval.run_id"
CONTEXT: Final = "taguru_eval.context"
GATE: Final = "taguru_eval.gate"
CASES: Final = "taguru_eval.cases"
MODE: Final = "taguru_eval.mode"
GENERATED_AT: Final = "taguru_eval.generated_at"
THRESHOLDS_SHA256: Final = "taguru_eval.thresholds.sha256"
CASE_INDEX: Final = "taguru_eval.case.index"
SCOPE: Final = "taguru_eval.scope"
"""What the conventions do not name, under the package's own prefix."""

GATE_PASSED, GATE_FAILED, GATE_REPORT_ONLY = "passed", "failed", "report-only"
SCOPE_CASE, SCOPE_AGGREGATE = "case", "aggregate"

SUITE_SPAN: Final = "taguru_eval run"
CASE_SPAN: Final = "taguru_eval case"
SCOPE_NAME: Final = "taguru_eval"
DEFAULT_SERVICE: Final = "taguru_eval"

SLICE_CASES: Final = 1024
"""Cases turned into spans and events, and sent, at a time (the memory bound)."""

DEFAULT_BASE: Final = "http://localhost:4318"
_SIGNAL_PATHS: Final = {"traces": "v1/traces", "logs": "v1/logs"}
_EXPORTER_LOGGER: Final = "opentelemetry.exporter.otlp.proto.http"
_OPERATOR: Final = {"min": ">=", "max": "<="}


@dataclass(frozen=True)
class OtlpExport:
    """What one export sent: spans and events accepted by the collector, and
    ``failure``, the one line saying why it stopped (``None`` when it did not)."""

    endpoint: str
    spans: int
    events: int
    failure: str | None = None


# ------------------------------------------------------------------ public entry


def export_run(
    run: Run,
    thresholds: Thresholds | None = None,
    *,
    endpoint: str | None = None,
    slice_cases: int = SLICE_CASES,
) -> OtlpExport:
    """Send ``run`` to an OpenTelemetry collector over OTLP/HTTP (protobuf).

    ``thresholds`` is the file the run was gated with (its aggregate bounds
    become events; the verdicts are read from the artifact's ``thresholds``
    block, never judged again); ``None`` for a report-only run. ``endpoint`` is
    the collector's base URL (``/v1/traces`` and ``/v1/logs`` are added), else
    the ``OTEL_EXPORTER_OTLP_*`` variables decide. Never raises for the
    collector's sake: a batch it did not take ends the export with
    :attr:`OtlpExport.failure` set.
    """
    if slice_cases < 1:
        raise ValueError("slice_cases must be at least 1")
    shown = Redactor().message(_shown_endpoint(endpoint))
    head = _RunHead.of(run, thresholds)
    spans = _SpanBuffer()
    records = _RecordBuffer()
    resource = _resource()
    # Providers of this export only: never the global ones, nothing left at exit.
    tracer = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer.add_span_processor(spans)
    logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
    logs.add_log_record_processor(records)
    span_exporter = OTLPSpanExporter(endpoint=_signal(endpoint, "traces"))
    log_exporter = OTLPLogExporter(endpoint=_signal(endpoint, "logs"))
    sent = _Sent()
    with _captured_exporter_logs() as captured:
        try:
            _emit(
                run, head, tracer.get_tracer(SCOPE_NAME, VERSION),
                logs.get_logger(SCOPE_NAME, VERSION), spans, records,
                span_exporter, log_exporter, sent, slice_cases,
            )  # fmt: skip
            failure = None
        except _ExportStopped as stopped:
            failure = _failure_line(shown, stopped.signal, captured)
        except Exception as exc:  # a misconfigured exporter must not cost the run its exit code
            failure = _failure_line(shown, "export", [f"{type(exc).__name__}: {exc}"])
        finally:
            tracer.shutdown()
            logs.shutdown()
            span_exporter.shutdown()  # type: ignore[no-untyped-call]
            log_exporter.shutdown()  # type: ignore[no-untyped-call]
    return OtlpExport(endpoint=shown, spans=sent.spans, events=sent.events, failure=failure)


# ------------------------------------------------------------------ the run's facts


@dataclass(frozen=True)
class _RunHead:
    """What the suite span and the events need from the artifact's head."""

    attributes: dict[str, Any]
    violations: pl.DataFrame
    thresholds: Thresholds | None

    @classmethod
    def of(cls, run: Run, thresholds: Thresholds | None) -> _RunHead:
        doc = run.doc
        inputs = _mapping(doc.get("inputs"))
        eval_block = _mapping(inputs.get("eval"))
        name = eval_block.get("name")
        suite = name if isinstance(name, str) and name else str(eval_block.get("path", ""))
        gated = isinstance(doc.get("thresholds"), Mapping)
        block = _mapping(doc.get("thresholds"))
        passed = gated and block.get("passed") is True
        verdict = GATE_REPORT_ONLY if not gated else GATE_PASSED if passed else GATE_FAILED
        attributes: dict[str, Any] = {
            SUITE_NAME: suite,
            SUITE_STATUS: SUITE_FAILURE if verdict == GATE_FAILED else SUITE_SUCCESS,
            RUN_ID: run.run_id,
            CONTEXT: str(inputs.get("context", "")),
            GATE: verdict,
            CASES: run.cases.height,
            MODE: str(inputs.get("mode", "")),
            GENERATED_AT: str(doc.get("generated_at", "")),
        }
        if gated and isinstance(block.get("sha256"), str):
            attributes[THRESHOLDS_SHA256] = block["sha256"]
        if gated and thresholds is None:
            raise ValueError("the run was gated: pass its Thresholds to export its bounds")
        violations = _violations(block.get("violations") if gated else None)
        return cls(attributes, violations, thresholds if gated else None)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


_VIOLATIONS: Final = {
    "scope": pl.String,
    "case_id": pl.String,
    "metric": pl.String,
    "violated": pl.String,
}


def _violations(entries: object) -> pl.DataFrame:
    """The artifact's ``thresholds.violations`` as a frame (``violated``: the side)."""
    rows = [
        (entry.get("scope"), entry.get("case_id"), entry.get("metric"), entry.get("bound"))
        for entry in entries or ()
        if isinstance(entry, Mapping)
    ] if isinstance(entries, Sequence) else []  # fmt: skip
    return pl.DataFrame(rows, schema=_VIOLATIONS, orient="row")


# ------------------------------------------------------------------ frames to records


def _case_metrics(cases: pl.DataFrame) -> dict[str, str]:
    """Per-case metric name -> its ``cases`` column, for the columns this run has."""
    catalog = catalog_for(must_refuse=True, answers=True, stability=True)
    return {
        metric: field.column
        for metric, field in catalog.per_case.items()
        if field.column in cases.columns
    }


def _explained(bounds: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """One row per ``keys``: the bound's sides as one text (``m >= 0.5 and m <= 1.0``)."""
    return bounds.group_by(keys, maintain_order=True).agg(
        bound_name().str.join(" and ").alias("explanation")
    )


def _case_events(
    part: pl.DataFrame,
    metrics: Mapping[str, str],
    thresholds: Thresholds | None,
    violations: pl.DataFrame,
) -> pl.DataFrame:
    """``case_id, metric, value, label, explanation`` for one slice of cases: every
    per-case metric the case computed; a bounded one is labelled pass/fail and
    explained by its bound, an unbounded one carries neither."""
    values = (
        part.select(
            pl.col("case_id").cast(pl.String),
            *(
                pl.col(column).cast(pl.Float64, strict=False).alias(m)
                for m, column in metrics.items()
            ),
        )
        .unpivot(index="case_id", variable_name="metric", value_name="value")
        .filter(pl.col("value").is_not_null())
    )
    case_ids = part.get_column("case_id").cast(pl.String).to_list()
    bounds = thresholds.case_bounds(case_ids) if thresholds is not None else None
    if bounds is None or bounds.is_empty():
        return values.with_columns(
            pl.lit(None, pl.String).alias("label"), pl.lit(None, pl.String).alias("explanation")
        )
    explained = _explained(bounds, ["case_id", "metric"])
    failed = (
        violations.filter(pl.col("scope") == SCOPE_CASE)
        .select("case_id", "metric", pl.lit(True).alias("failed"))
        .unique()
    )
    return (
        values.join(explained, on=["case_id", "metric"], how="left")
        .join(failed, on=["case_id", "metric"], how="left")
        .with_columns(
            pl.when(pl.col("explanation").is_null())
            .then(pl.lit(None, pl.String))
            .when(pl.col("failed").fill_null(False))
            .then(pl.lit(LABEL_FAIL))
            .otherwise(pl.lit(LABEL_PASS))
            .alias("label")
        )
        .select("case_id", "metric", "value", "label", "explanation")
    )


def _aggregate_events(
    run: Run, thresholds: Thresholds | None, violations: pl.DataFrame
) -> pl.DataFrame:
    """One row per side of each aggregate bound: its metric's scalar, pass/fail, the bound.

    A bound the gate reported without a side (a metric with no samples) failed
    every side, as the gate's JUnit report reads it."""
    if thresholds is None:
        return pl.DataFrame(
            schema={
                "metric": pl.String, "value": pl.Float64,
                "label": pl.String, "explanation": pl.String,
            }
        )  # fmt: skip
    actual = run.metrics.select("metric", scalar_expr().alias("value")).unique(
        "metric", keep="last"
    )
    reported = violations.filter(pl.col("scope") == SCOPE_AGGREGATE).select("metric", "violated")
    checked = (
        thresholds.aggregate_bounds.with_row_index("order")
        .join(actual, on="metric", how="left")
        .join(reported.with_columns(pl.lit(True).alias("reported")), on="metric", how="left")
    )
    failed = pl.col("reported").fill_null(False) & (
        pl.col("violated").is_null() | (pl.col("violated") == pl.col("bound"))
    )
    return (
        checked.group_by("order", maintain_order=True)
        .agg(
            pl.col("metric").first(),
            pl.col("value").first(),
            failed.any().alias("failed"),
            bound_name().first().alias("explanation"),
        )
        .sort("order")
        .select(
            "metric",
            "value",
            pl.when("failed").then(pl.lit(LABEL_FAIL)).otherwise(pl.lit(LABEL_PASS)).alias("label"),
            "explanation",
        )
    )


# ------------------------------------------------------------------ spans, events, export


class _SpanBuffer(SpanProcessor):
    """Keeps the ended spans of one slice until they are sent (no queue, no thread)."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class _RecordBuffer(LogRecordProcessor):
    """Keeps the emitted records of one slice until they are sent, read-only and
    without the context they were emitted in (the exporter reads its ids)."""

    def __init__(self) -> None:
        self.emitted: list[ReadableLogRecord] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.emitted.append(
            ReadableLogRecord(
                log_record=log_record.log_record,
                resource=log_record.resource or Resource.create({}),
                instrumentation_scope=log_record.instrumentation_scope,
                limits=log_record.limits,
            )
        )

    def shutdown(self) -> None:
        self.emitted.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass
class _Sent:
    spans: int = 0
    events: int = 0


class _ExportStopped(Exception):
    def __init__(self, signal: str) -> None:
        super().__init__(signal)
        self.signal = signal


def _emit(
    run: Run,
    head: _RunHead,
    tracer: trace.Tracer,
    logger: Any,
    spans: _SpanBuffer,
    records: _RecordBuffer,
    span_exporter: OTLPSpanExporter,
    log_exporter: OTLPLogExporter,
    sent: _Sent,
    slice_cases: int,
) -> None:
    """Build and send the records a slice of cases at a time; the suite span last."""
    now = time.time_ns()
    suite = tracer.start_span(SUITE_SPAN, attributes=head.attributes, start_time=now)
    in_suite = trace.set_span_in_context(suite)
    thresholds = head.thresholds
    metrics = _case_metrics(run.cases)
    failed_cases = set(
        head.violations.filter(pl.col("scope") == SCOPE_CASE).get_column("case_id").to_list()
    )

    def flush() -> None:
        if spans.ended:
            if span_exporter.export(spans.ended) is not SpanExportResult.SUCCESS:
                raise _ExportStopped("traces")
            sent.spans += len(spans.ended)
            spans.ended.clear()
        if records.emitted:
            if log_exporter.export(records.emitted) is not LogRecordExportResult.SUCCESS:
                raise _ExportStopped("logs")
            sent.events += len(records.emitted)
            records.emitted.clear()

    ordered = run.cases.sort("case_index") if "case_index" in run.cases.columns else run.cases
    for start in range(0, ordered.height, slice_cases):
        part = ordered.slice(start, slice_cases)
        events = _case_events(part, metrics, thresholds, head.violations)
        # One pass over the slice's events (a case's rows in catalog order), not a
        # frame operation per case.
        by_case: dict[str, list[tuple[Any, ...]]] = {}
        for case_id, *row in events.select(
            "case_id", "metric", "value", "label", "explanation"
        ).iter_rows():
            by_case.setdefault(case_id, []).append(tuple(row))
        indexes = (
            part.get_column("case_index").to_list()
            if "case_index" in part.columns
            else list(range(start, start + part.height))
        )
        for case_id, index in zip(part.get_column("case_id").to_list(), indexes, strict=True):
            span = tracer.start_span(
                CASE_SPAN,
                context=in_suite,
                attributes={
                    CASE_NAME: case_id,
                    CASE_STATUS: CASE_FAIL if case_id in failed_cases else CASE_PASS,
                    CASE_INDEX: int(index),
                },
                start_time=now,
            )
            in_case = trace.set_span_in_context(span)
            extra = {SCOPE: SCOPE_CASE, CASE_NAME: case_id}
            for metric, value, label, explanation in by_case.get(case_id, ()):
                _event(logger, in_case, now, metric, value, label, explanation, extra)
            span.end(end_time=now)
        flush()
    for metric, value, label, explanation in _aggregate_events(
        run, thresholds, head.violations
    ).iter_rows():
        _event(logger, in_suite, now, metric, value, label, explanation, {SCOPE: SCOPE_AGGREGATE})
    suite.end(end_time=time.time_ns())
    flush()


def _event(
    logger: Any,
    context: Any,
    now: int,
    metric: str,
    value: float | None,
    label: str | None,
    explanation: str | None,
    extra: Mapping[str, Any],
) -> None:
    attributes: dict[str, Any] = {EVALUATION_NAME: metric}
    if value is not None:
        attributes[SCORE_VALUE] = value
    if label is not None:
        attributes[SCORE_LABEL] = label
    if explanation is not None:
        attributes[EXPLANATION] = explanation
    attributes.update(extra)
    logger.emit(
        LogRecord(
            timestamp=now,
            observed_timestamp=now,
            context=context,
            event_name=EVALUATION_EVENT,
            attributes=attributes,
        )
    )


# ------------------------------------------------------------------ endpoint, resource, failure


def _signal(base: str | None, signal: str) -> str | None:
    """``base`` + the signal's path; ``None`` lets the exporter read the variables."""
    if base is None:
        return None
    return f"{base.rstrip('/')}/{_SIGNAL_PATHS[signal]}"


def _shown_endpoint(base: str | None) -> str:
    """Where the export goes, as the warning line names it (the traces URL the
    exporter resolves from the same variables when no endpoint was given)."""
    if base is not None:
        return base
    signal = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if signal:
        return signal
    return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_BASE


def _resource() -> Resource:
    """The SDK's resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), named
    ``taguru_eval`` when neither names the service."""
    resource = Resource.create()
    named = str(resource.attributes.get(SERVICE_NAME, ""))
    if named and not named.startswith("unknown_service"):
        return resource
    return resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))


class _Capture(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _captured_exporter_logs() -> Iterator[list[str]]:
    """The exporter's own log lines, kept for the one warning instead of printed."""
    logger = logging.getLogger(_EXPORTER_LOGGER)
    lines: list[str] = []
    handler = _Capture(lines)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


_REASON_CHARS: Final = 300


def _failure_line(shown: str, signal: str, said: Sequence[str]) -> str:
    """The warning: where, which signal, and the exporter's first word on why (its
    later ones only say that it gave up), redacted, on one line."""
    reason = said[0] if said else "the collector did not accept the batch"
    text = " ".join(Redactor().message(reason).split())
    if len(text) > _REASON_CHARS:
        text = text[: _REASON_CHARS - 1] + "…"
    return (
        f"OpenTelemetry export to {shown} stopped ({signal}): {text}; "
        "the run's exit code is unchanged"
    )
