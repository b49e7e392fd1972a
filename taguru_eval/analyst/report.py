"""One offline HTML report of a run (and its drift, and a comparison with a base run).

The report is a single self-contained file a CI reviewer can open without a
network: the Vega, Vega-Lite and Vega-Embed JavaScript is inlined (taken from
the ``vl-convert-python`` wheel, which bundles them), every chart spec and its
data is embedded as JSON, and no element loads anything from elsewhere.

Contents: the run summary, the gate verdict, aggregate metrics, per-case
metrics (histograms, the worst cases, a capped table linking the Parquet file
with every row), misses, the lane cross-tab, the must-refuse population
beside the answerable one (a run given --must-refuse), latency, per-tag slices; the
metric drift of the run's context when the run sits in a run store with
earlier runs; and, with a base, the compare view (only what moved, the cases
that improved or regressed with the metrics that drove them, grouped, and
compare --significance's paired tests with their verdicts: regressed,
improved, inconclusive, no significant change).

A run (and its base) is an evaluation.json — ours or taguru's own — or a
stored run directory. A stored run is read from its Parquet tables plus the
head of its evaluation.json (everything before ``cases``), so a
100,000-case run reports in seconds; a bare evaluation.json is rebuilt into
tables from the artifact itself, so any evaluation.json can be reported on.
Every chart is aggregated before it is embedded (:mod:`.aggregate`): the
page's size follows the number of bins, metrics and runs, not of cases. The
worst cases are grouped by failure signature (which checks fail, the lane's
outcome), a dozen rows at any size, and the long tables are capped and made
sortable and filterable by DataTables (inlined from the ``itables`` wheel;
plain tables with one note when it is not installed).

The page is laid out by the Jinja2 templates in ``templates/`` (autoescaped):
each section function here builds plain data — frames as rows
(:func:`taguru_eval._base.html.table_data`), key/value pairs, chart
placeholders — and renders its section's template."""

from __future__ import annotations

import base64
import gzip
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import polars as pl
from markupsafe import Markup

from taguru_eval._base.filebytes import file_bytes
from taguru_eval._base.html import PAGE_ROWS, pairs_data, render, table_data
from taguru_eval.analyst import aggregate, drift, offline, slices
from taguru_eval.analyst.ingest import tables_from_document
from taguru_eval.artifact import codec
from taguru_eval.artifact.layout import get_path
from taguru_eval.catalog import (
    ANSWERS_BLOCK,
    ANSWERS_METRICS,
    CATALOG,
    repetitions_of,
    scalar_expr,
)
from taguru_eval.compare import Comparison, compare
from taguru_eval.compare.classify import budget_text
from taguru_eval.compare.load import decode_view
from taguru_eval.compare.parquet import read_side
from taguru_eval.compare.significance import POWER
from taguru_eval.contract import ARTIFACT_CAP
from taguru_eval.flag_gates import flag_gate_rows
from taguru_eval.inputs.thresholds import Thresholds
from taguru_eval.store import RunOrigin, read_origin, read_table, require_tables
from taguru_eval.store_artifact import stored_artifact
from taguru_eval.tables.schemas import TABLE

if TYPE_CHECKING:
    from taguru_eval.analyst import charts

_RATIO_METRICS_UNIT: Final = "ratio"

_CASE_METRIC_COLUMNS: Final = drift.case_metric_columns()
_CASE_CHART_METRICS: Final = {
    metric: column
    for metric, column in _CASE_METRIC_COLUMNS.items()
    if CATALOG[metric].unit == _RATIO_METRICS_UNIT
}

CASE_ROWS: Final = 200
"""Per-case rows the report lists (worst first); the Parquet file it links has all."""
LISTED_CASES: Final = 50
"""Improved / regressed cases the compare section lists, each with its drivers."""
DRIFT_RUNS: Final = 200
"""Runs the drift section indexes (the newest; the chart shows one point per run)."""
DRIFT_COLUMNS: Final = 3
"""Drift panels per row."""

_REPORT_TABLES: Final = (
    "cases",
    "metrics",
    "case_lanes",
    "resolutions",
    "probes",
    "citation_checks",
    "refusal_lanes",
    "refusal_cases",
)
"""The tables the report reads from a stored run (never ``hits`` or ``calls``)."""


@dataclass
class _Page:
    """The report being assembled: rendered sections plus the chart specs they embed."""

    sections: list[str] = field(default_factory=list)
    specs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def chart(self, name: str, chart: charts.ChartLike) -> dict[str, object]:
        """Register a chart; returns what the ``chart`` macro lays out as the
        placeholder element the embed script fills in."""
        index = len(self.specs)
        self.specs.append((name, offline.embeddable(chart.to_dict())))
        return {"index": index, "name": name}


def load_document(source: str | Path) -> dict[str, Any]:
    """An evaluation.json (file or stored run directory), validated by compare's reader."""
    data, shown = codec.read_bytes(source)
    decode_view(data, shown, label=os.fspath(source), stamp_required=True)
    path = Path(source)  # read_artifact's name for it, as before
    named = stored_artifact(path) if path.is_dir() else path
    return codec.parse_artifact(data.decode("utf-8"), str(named))


@dataclass(frozen=True)
class ReportRun:
    """One run as the report reads it.

    ``document`` is the whole evaluation.json, or for a stored run only its
    head (no ``cases``); ``tables`` holds the tables the report shows;
    ``directory`` is the stored run directory whose Parquet files hold every
    row (None for a bare evaluation.json).
    """

    source: str | Path
    label: str
    document: dict[str, Any]
    tables: dict[str, pl.DataFrame]
    directory: Path | None
    origin: RunOrigin | None

    @property
    def context(self) -> str:
        return str((self.document.get("inputs") or {}).get("context") or "")

    def compare_side(self) -> str | Path | dict[str, Any]:
        """What compare reads this run from: its directory (Parquet), else the document."""
        return self.directory if self.directory is not None else self.document


def _stored_tables(directory: Path) -> bool:
    """Whether ``directory`` is a stored run: it holds the tables of one (raises
    naming the first missing table every stored run holds when it holds any)."""
    if not any(directory.glob("*.parquet")):
        return False
    require_tables(directory, _REPORT_TABLES)
    return True


class _RecordedWarnings(msgspec.Struct):
    warnings: list[str] = msgspec.field(default_factory=list)


class _Tail(msgspec.Struct):
    abstention: _RecordedWarnings | None = None


_TAIL_DECODER: Final = msgspec.json.Decoder(_Tail)
"""Reads only the ``abstention`` block's warnings; msgspec skips every other member."""


def _with_abstention_warnings(head: dict[str, Any], artifact: Path) -> dict[str, Any]:
    """A stored run's head with its ``abstention`` block's warnings when the run was
    given --must-refuse: the block follows the cases the head leaves out, and only
    it holds the notes found before the run (a filter ``--assembly`` cannot send)."""
    inputs = head.get("inputs")
    if "abstention" in head or not (
        isinstance(inputs, dict) and isinstance(inputs.get("must_refuse"), dict)
    ):
        return head
    try:
        tail = _TAIL_DECODER.decode(file_bytes(artifact, ARTIFACT_CAP))
    except (OSError, msgspec.DecodeError):
        # The head already read: the section then works the warnings out from the tables.
        return head
    if tail.abstention is None:
        return head
    return {**head, "abstention": {"warnings": tail.abstention.warnings}}


def load_report_run(run: str | Path) -> ReportRun:
    """Read ``run`` for the report: a stored run from its tables and the head of its
    evaluation.json (validated by compare's reader), anything else from the
    whole evaluation.json. Raises :class:`InputError` for an unreadable run."""
    path = Path(run)
    run_dir = path if path.is_dir() else path.parent
    label = run_dir.name.removeprefix("run=") if run_dir.name.startswith("run=") else str(run)
    origin = read_origin(run_dir) if path.is_dir() else None
    if path.is_dir() and _stored_tables(path):
        # compare's validation and messages, but for a missing stamp (§6.2 pins
        # compare's 'got 0'; this is no compare).
        read_side(path, stamp_required=True)
        tables = {
            name: read_table(path / TABLE[name].file_name, TABLE[name])
            for name in _REPORT_TABLES
            if (path / TABLE[name].file_name).is_file()
        }
        head = _with_abstention_warnings(drift.read_run_head(path), stored_artifact(path))
        return ReportRun(run, label, head, tables, path, origin)
    document = load_document(run)
    tables = tables_from_document(document, label, shown=str(run))
    return ReportRun(run, label, document, tables, None, origin)


def run_thresholds(path: str | Path, loaded: ReportRun) -> Thresholds:
    """A thresholds file read as run mode reads it for ``loaded``'s run.

    The run's cases are its eval.jsonl's cases (run mode has no subset), so
    the file is accepted or refused exactly as the gate of a run over the same
    eval set would take it, with the same message: a ``cases.overrides`` case
    id the run does not have is refused, not silently dropped. Its catalog
    has the abstention metrics only when the run was given ``--must-refuse``,
    the answers metrics only with ``--answers``, the stability metric only with
    ``--repeat``.
    """
    cases = loaded.tables.get("cases")
    case_ids = [] if cases is None else cases.get_column("case_id").to_list()
    inputs = loaded.document.get("inputs")
    given = inputs if isinstance(inputs, Mapping) else {}
    return drift.read_thresholds(
        path,
        case_ids,
        must_refuse=isinstance(given.get("must_refuse"), Mapping),
        answers=isinstance(given.get("answers"), Mapping),
        repeat=repetitions_of(given.get("repeat")) is not None,
    )


def store_of(run: str | Path) -> Path | None:
    """The run store a stored run directory sits in (``<store>/context=…/run=…``)."""
    path = Path(run)
    if path.is_file():
        path = path.parent
    if path.name.startswith("run=") and path.parent.name.startswith("context="):
        return path.parent.parent
    return None


def _revision(value: object) -> str | None:
    return drift.revision_text(value)


def summary_section(
    document: Mapping[str, Any], run_label: str, origin: RunOrigin | None = None
) -> str:
    """Who, what, when: inputs and corpus of the run, and how the store got it."""
    inputs = document.get("inputs") or {}
    corpus = document.get("corpus") or {}
    evalset = inputs.get("eval") or {}
    embeddings = corpus.get("embeddings")
    provider = embeddings.get("provider_model") if isinstance(embeddings, Mapping) else "(not read)"
    pairs: list[tuple[str, object]] = [
        ("run", run_label),
        ("generated_at", document.get("generated_at")),
        ("context", inputs.get("context")),
        ("eval set", f"{evalset.get('name') or ''} ({evalset.get('path')})"),
        ("cases", evalset.get("cases")),
        ("mode", inputs.get("mode")),
        ("budget", budget_text(drift.budget_of(inputs))),
        ("rerank", inputs.get("rerank")),
        ("server", inputs.get("url")),
        ("corpus revision before", _revision(corpus.get("revision_before"))),
        ("corpus revision after", _revision(corpus.get("revision_after"))),
        ("corpus stable", corpus.get("stable")),
        ("sources", corpus.get("sources_count")),
        ("embedding provider", provider),
        ("stored", origin.description if origin is not None else "not in a run store"),
    ]
    return render("sections/summary.html.j2", items=pairs_data(pairs))


_VIOLATION_SCHEMA: Final = {
    "scope": pl.String,
    "case_id": pl.String,
    "metric": pl.String,
    "bound": pl.String,
    "threshold": pl.Float64,
    "actual": pl.Float64,
    "reason": pl.String,
}


def gate_section(document: Mapping[str, Any]) -> str:
    """The thresholds verdict as recorded in the artifact (GATE_AND_COMPARE.md §5.5)."""
    gate = document.get("thresholds")
    rows = flag_gate_rows(document)
    flags = (
        table_data(
            pl.DataFrame(
                {
                    "gate": [f"{row.name} ({row.flag})" for row in rows],
                    "verdict": [row.verdict for row in rows],
                    "judged by": [row.judged_by for row in rows],
                    "counts": [row.counts for row in rows],
                },
                schema=dict.fromkeys(("gate", "verdict", "judged by", "counts"), pl.String),
            ),
            caption="the gates --must-refuse and --answers brought",
        )
        if rows
        else None
    )
    if not isinstance(gate, Mapping):
        return render("sections/gate.html.j2", gate=None, flag_gates=flags)
    violations = [v for v in gate.get("violations") or [] if isinstance(v, Mapping)]
    frame = pl.DataFrame(
        [{key: v.get(key) for key in _VIOLATION_SCHEMA} for v in violations],
        schema=_VIOLATION_SCHEMA,
        strict=False,
    )
    facts = {
        "passed": bool(gate.get("passed")),
        "sha": str(gate.get("sha256") or "")[:12],
        "violation_count": len(gate.get("violations") or []),
        "violations": table_data(frame, caption="violations", interactive=True)
        if frame.height
        else None,
        "skipped": len(gate.get("skipped") or []),
    }
    return render("sections/gate.html.j2", gate=facts, flag_gates=flags)


def metrics_section(
    page: _Page,
    document: Mapping[str, Any],
    tables: Mapping[str, pl.DataFrame],
    bounds: pl.DataFrame,
) -> str:
    """The aggregate metrics: table of all (with their direction), chart of the ratios."""
    # Altair (and jsonschema under it) load only once a chart is drawn.
    from taguru_eval.analyst import charts

    metrics = tables["metrics"].with_columns(scalar_expr())
    definitions = document.get("definitions") or {}
    ratio_valued = [
        name
        for name, definition in definitions.items()
        if isinstance(definition, Mapping) and definition.get("unit") == _RATIO_METRICS_UNIT
    ]
    shown = metrics.filter(pl.col("metric").is_in(ratio_valued))
    chart = page.chart("metrics", charts.metrics_chart(shown, bounds))
    directions = aggregate.direction_frame(metrics.get_column("metric").to_list())
    table = table_data(
        metrics.join(directions.select("metric", "direction"), on="metric", how="left")
        .select("metric", "direction", "statistic", "n", "scalar", "p50", "p90", "max")
        .sort("metric"),
        caption="scalar = mean (distribution) or value (ratio); direction from the catalog",
    )
    return render("sections/metrics.html.j2", metrics_chart=chart, metrics=table)


def _parquet_source(run: ReportRun, out: str | Path | None, table: str) -> dict[str, str]:
    """Where every row of ``table`` is: a stored run's Parquet file (its path relative
    to the report when that is known), or the bare evaluation.json (no such file)."""
    if run.directory is None:
        return {"text": "document"}
    target = run.directory / TABLE[table].file_name
    href = str(target.resolve())
    if out is not None:
        href = os.path.relpath(target.resolve(), Path(out).resolve().parent)
    return {"href": Path(href).as_posix(), "name": TABLE[table].file_name}


MOST_MISSED: Final = 100
"""Missed items the misses section counts over the cases (most cases first)."""


def cases_section(
    page: _Page,
    tables: Mapping[str, pl.DataFrame],
    run: ReportRun | None = None,
    out: str | Path | None = None,
) -> str:
    """Per-case metrics (histograms, the worst cases, their failure signatures, a
    capped sortable table), misses (counted per item, then listed), the cross-tab."""
    # Altair (and jsonschema under it) load only once a chart is drawn.
    from taguru_eval.analyst import charts

    cases = tables["cases"]
    chart = page.chart("case_metrics", charts.case_metrics_chart(cases, _CASE_CHART_METRICS))
    scores = aggregate.case_scores(cases, _CASE_CHART_METRICS)
    signatures = aggregate.failure_signatures(cases, tables.get("case_lanes"), scores)
    failing = signatures.get_column("cases").sum()
    ordered = (
        cases.join(scores, on="case_id", how="left")
        .sort(["score", "case_index"], nulls_last=True)
        .select(
            "case_id",
            aggregate.failing_checks(cases.columns).list.join(", ").alias("fails"),
            "passage_outcome",
            *_CASE_METRIC_COLUMNS.values(),
        )
    )
    source = _parquet_source(run, out, "cases") if run is not None else None
    per_case = table_data(
        ordered,
        caption=f"the {min(CASE_ROWS, cases.height)} worst of {cases.height} cases "
        "(lowest mean of the per-case ratios first); sort or filter by any column",
        limit=CASE_ROWS,
        more=f"showing the {CASE_ROWS} worst of {cases.height} cases (mean of the per-case ratios)",
        source=source,
        interactive=True,
    )
    signature_table = (
        table_data(
            signatures,
            caption=f"{failing} of {cases.height} cases fail a check or their lane, in "
            f"{signatures.height} signature(s): the checks that fail and the lane's outcome, "
            "most cases first; examples are the worst cases of each",
            interactive=True,
        )
        if signatures.height
        else None
    )
    misses = drift.misses(cases)
    most_missed = (
        misses.group_by("missed")
        .agg(
            pl.col("case_id").n_unique().alias("cases"),
            pl.col("case_id").unique(maintain_order=True).head(3).alias("examples"),
        )
        .sort(["cases", "missed"], descending=[True, False])
    )
    return render(
        "sections/cases.html.j2",
        cases_chart=chart,
        signatures=signature_table,
        per_case=per_case,
        case_index=case_index(ordered) if ordered.height > CASE_ROWS else None,
        most_missed=table_data(
            most_missed,
            caption=f"the items missed most often ({most_missed.height} distinct over "
            f"{misses.get_column('case_id').n_unique()} case(s))",
            limit=MOST_MISSED,
            more=f"… and {max(most_missed.height - MOST_MISSED, 0)} more missed item(s)",
            interactive=True,
        )
        # Counting per item says something only when an item is missed more than once.
        if most_missed.height < misses.height
        else None,
        misses=table_data(
            misses,
            caption="missed items (at most 3 per case; the rest counted)",
            limit=CASE_ROWS,
            more=f"… and {max(misses.height - CASE_ROWS, 0)} more missed item(s)",
            source=source,
            interactive=True,
        ),
        crosstab=_optional_table(drift.lane_crosstab(cases), "lane cross-tab (cases)"),
    )


CASE_INDEX_DECIMALS: Final = 4


def case_index(ordered: pl.DataFrame) -> dict[str, Any]:
    """Every case of the run for the page's "Find any case" box: the per-case
    table's columns (worst first), floats at :data:`CASE_INDEX_DECIMALS`, as one
    columnar JSON document, gzip-compressed and base64-encoded (what
    ``case_search.js`` decodes in the browser, only when a search is typed). About
    0.7 MB at 100,000 cases: the capped table's 200 rows stay the page's body."""
    columns = ordered.select(
        pl.col(name).round(CASE_INDEX_DECIMALS) if dtype.is_float() else pl.col(name)
        for name, dtype in ordered.schema.items()
    )
    document = columns.select(pl.all().implode()).write_json().encode("utf-8")
    packed = base64.b64encode(gzip.compress(document, compresslevel=6, mtime=0)).decode("ascii")
    return {
        "cases": ordered.height,
        "columns": ordered.columns,
        "columns_json": json.dumps(ordered.columns),
        "blob": Markup(json.dumps(packed)),
        "kilobytes": round(len(packed) / 1024),
    }


def _optional_table(frame: pl.DataFrame, caption: str, **options: Any) -> dict[str, Any] | None:
    """:func:`table_data` of ``frame``, or None when it has no row (the template says so)."""
    return table_data(frame, caption=caption, **options) if frame.height else None


def latency_section(page: _Page, tables: Mapping[str, pl.DataFrame]) -> str:
    """Latency per lane (summary chart) plus the numbers."""
    # Altair (and jsonschema under it) load only once a chart is drawn.
    from taguru_eval.analyst import charts

    samples = drift.latency_samples(tables)
    if not samples.height:
        return render("sections/latency.html.j2", latency=None)
    chart = page.chart("latency", charts.latency_chart(samples))
    numbers = table_data(aggregate.latency_summary(samples))
    return render("sections/latency.html.j2", latency_chart=chart, latency=numbers)


def slices_section(tables: Mapping[str, pl.DataFrame]) -> str:
    """The main metrics per ``options.tags`` tag."""
    tags = slices.case_tags(tables["case_lanes"]) if "case_lanes" in tables else None
    frame = (
        table_data(
            slices.tag_slices(tables["cases"], tags),
            caption="mean per tag over the cases that computed the metric",
        )
        if tags is not None
        else None
    )
    return render("sections/slices.html.j2", slices=frame)


def drift_section(page: _Page, store: Path, context: str, run_id: str, bounds: pl.DataFrame) -> str:
    """The context's metric drift over the stored runs up to (and including) this one,
    each change of eval set, mode, budget, thresholds file, server, embedding provider
    or evaluator version between runs marked."""
    # Altair (and jsonschema under it) load only once a chart is drawn.
    from taguru_eval.analyst import charts

    every_run = drift.run_index(store, context)
    runs = every_run
    if run_id in runs.get_column("run").to_list():
        position = runs.get_column("run").to_list().index(run_id)
        runs = runs.head(position + 1)
    runs = runs.tail(DRIFT_RUNS)
    if runs.height < 2:
        return ""
    # The oldest run shown is compared with no one: a change into it is off the chart.
    runs = runs.with_columns(
        pl.when(pl.int_range(pl.len()) > 0)
        .then(pl.col("setup_changed"))
        .otherwise(pl.lit([], dtype=pl.List(pl.String)))
        .alias("setup_changed")
    )
    history = drift.metric_history(store, context, every_run).filter(
        pl.col("run").is_in(runs.get_column("run").implode())
    )
    # Three panels a row fill the 1,248 px column (two left a third of it empty).
    chart = page.chart(
        "drift", charts.drift_chart(history, runs=runs, bounds=bounds, columns=DRIFT_COLUMNS)
    )
    index = runs.select(
        # The label (time to the minute, short id) names the run as the chart does;
        # the full run id is its tooltip.
        "label",
        "run",
        pl.col("setup_changed").list.join(", ").replace("", None).alias("changed"),
        "eval_set",
        "mode",
        "budget",
        pl.col("sha256").str.head(12).alias("thresholds"),
        "server",
        pl.col("provider_model").alias("embedding provider"),
        pl.col("writer").alias("evaluator"),
        "revision",
        "stable",
        "thresholds_passed",
        "violations",
    ).reverse()
    return render(
        "sections/drift.html.j2",
        runs=runs.height,
        setup_changes=int((runs.get_column("setup_changed").list.len() > 0).sum()),
        drift_chart=chart,
        index=table_data(
            index,
            caption="newest first (a label's tooltip is the run id); changed: what differs "
            "from the run before (eval set, mode, budget, thresholds sha256, server, "
            "embedding provider, evaluator version)",
            limit=50,
            interactive=True,
            tooltips={"label": "run"},
        ),
    )


def must_refuse_section(
    page: _Page, document: Mapping[str, Any], tables: Mapping[str, pl.DataFrame]
) -> str:
    """ABSTENTION.md §3.11: the must-refuse population beside the answerable one
    (each rate with its own n), the verdicts by kind and case, and what limits the
    claim; empty for a run without --must-refuse. Read from the tables and the
    artifact's head (with a stored run's recorded warnings added, see
    :func:`_with_abstention_warnings`), so a stored run and its evaluation.json
    show the same."""
    # Altair (and jsonschema under it) load only once a chart is drawn.
    from taguru_eval.analyst import must_refuse

    facts = must_refuse.run_facts(document, tables)
    if facts is None:
        return ""
    trade_off = must_refuse.trade_off_frame(tables["metrics"])
    chart = page.chart("must_refuse", must_refuse.trade_off_chart(trade_off))
    refusals = tables["refusal_cases"]
    return render(
        "sections/must_refuse.html.j2",
        facts=pairs_data(facts.pairs()),
        notes=list(facts.warnings),
        trade_off_chart=chart,
        trade_off=table_data(trade_off, caption="the trade-off pair: never pooled"),
        verdicts=table_data(must_refuse.verdict_counts(refusals), caption="verdicts by kind"),
        refusals=table_data(
            must_refuse.verdict_rows(refusals), caption="must-refuse cases", interactive=True
        ),
    )


ANSWER_MISSES_SHOWN: Final = 50


def answers_section(document: Mapping[str, Any], tables: Mapping[str, pl.DataFrame]) -> str:
    """A run given ``--answers``: the answers figures with their denominators, how
    deep in the window the first answer sat, and the listed cases where no answer
    was found (the user's own answer text only); empty without ``--answers``."""
    declared = get_path(document, "inputs", "answers")
    cases = tables.get("cases")
    if not isinstance(declared, Mapping) or cases is None or ANSWERS_BLOCK not in cases.columns:
        return ""
    metrics = tables["metrics"].with_columns(scalar_expr())
    figures = metrics.filter(pl.col("metric").is_in(list(ANSWERS_METRICS))).select(
        "metric", "n", "scalar", "p50", "min"
    )
    listed = cases.filter(pl.col(ANSWERS_BLOCK).is_not_null())
    judged = listed.filter(pl.col("answers_found").is_not_null())
    depth = (
        judged.group_by(pl.col("answers_first_rank").alias("first answer at rank"))
        .len("cases")
        .sort("first answer at rank", nulls_last=True)
    )
    misses = judged.filter(pl.col("answers_found") == 0).select(
        "case_id", pl.col(ANSWERS_BLOCK).alias("declared"), "recall_at_k"
    )
    pairs = [
        ("answers file", declared.get("path")),
        ("match rule", declared.get("match")),
        ("listed cases", declared.get("cases")),
        ("judged (first lane completed)", judged.height),
        ("not judged (first lane failed)", listed.height - judged.height),
    ]
    return render(
        "sections/answers.html.j2",
        facts=pairs_data(pairs),
        figures=table_data(figures, caption="answers.* over the judged cases"),
        depth=table_data(depth, caption="rank of the first answer-bearing hit (null: none)"),
        misses=table_data(
            misses,
            caption="listed cases with no answer in their window",
            limit=ANSWER_MISSES_SHOWN,
            more="more cases: the cases table's answers_found column",
            interactive=True,
        ),
    )


def _case_lines(drivers: pl.DataFrame, kind: str) -> dict[str, Any] | None:
    """The first :data:`LISTED_CASES` cases of ``kind`` with their drivers, and the count."""
    rows = drivers.filter(pl.col("kind") == kind)
    if rows.height == 0:
        return None
    shown = rows.select(
        "case_id",
        pl.col("drivers").list.join(", ").alias("driven by"),
        pl.col("driver_deltas").alias("Δ"),
        pl.col("against").list.join(", ").alias("moved the other way"),
    )
    return table_data(
        shown,
        caption=f"{rows.height} {kind} case(s), case_id order",
        limit=LISTED_CASES,
        more=f"… and {rows.height - LISTED_CASES} more {kind} case(s)",
        interactive=True,
    )


LISTED_WARNINGS: Final = 10
"""Compare warnings listed one by one; past this many they are counted per message."""


def warning_groups(warnings: Sequence[str]) -> pl.DataFrame:
    """``warning`` (the case id taken out), ``cases``, ``examples``: compare's warnings
    counted per message, most first. Two 100,000-case runs can disagree on which
    metrics thousands of cases computed, one warning per case and metric."""
    frame = pl.DataFrame({"text": list(warnings)}, schema={"text": pl.String})
    parts = frame.with_columns(
        pl.col("text").str.extract(r"^case '([^']*)': ", 1).alias("case_id"),
        pl.col("text").str.replace(r"^case '[^']*': ", "case …: ").alias("warning"),
    )
    return (
        parts.group_by("warning")
        .agg(
            pl.len().alias("warnings"),
            pl.col("case_id").drop_nulls().unique(maintain_order=True).head(3).alias("examples"),
        )
        .sort(["warnings", "warning"], descending=[True, False])
    )


def compare_section(
    page: _Page,
    base: str | Path,
    head: str | Path | Mapping[str, Any],
    head_tags: pl.DataFrame | None = None,
) -> str:
    """BASE vs this run: counts, warnings, what moved, and which metrics drove each case."""
    # Altair (and jsonschema under it) load only once a chart is drawn.
    from taguru_eval.analyst import charts

    comparison = compare(base, head, base_label=str(base), head_label="RUN", stamp_required=True)
    counts = dict(comparison.counts)
    long = charts.compare_long(comparison.cases)
    chart = page.chart("compare", charts.compare_chart(long, counts))
    sides = pl.DataFrame(
        {
            "side": ["BASE", "RUN"],
            "mode": [comparison.base.mode, comparison.head.mode],
            "budget": [budget_text(comparison.base.budget), budget_text(comparison.head.budget)],
        }
    )
    moved = comparison.moved_metrics()
    groups = comparison.driver_groups()
    drivers = comparison.case_drivers()
    slice_changes = (
        slices.tag_slice_changes(comparison.cases, head_tags) if head_tags is not None else None
    )
    return render(
        "sections/compare.html.j2",
        base=str(base),
        sides=table_data(sides, caption="mode and budget of each side"),
        counts=pairs_data([(kind, counts.get(kind, 0)) for kind in charts.COMPARE_KINDS]),
        notes=list(comparison.warnings) if len(comparison.warnings) <= LISTED_WARNINGS else [],
        warning_groups=None
        if len(comparison.warnings) <= LISTED_WARNINGS
        else table_data(
            warning_groups(comparison.warnings),
            caption=f"{len(comparison.warnings)} warnings, counted per message "
            "(the case id taken out; examples are its first cases)",
            interactive=True,
        ),
        compare_chart=chart,
        moved=_optional_table(
            moved.select("metric", "base", "head", "delta", "direction", "verdict"),
            f"the {moved.height} aggregate metric(s) that moved (of "
            f"{comparison.metrics.height}); the verdict is the paired test below (latency "
            "and other run-level metrics are not tested)",
        ),
        groups=_optional_table(
            groups.select("kind", "drivers", "cases", "improved_elsewhere", "against", "examples"),
            "changed cases grouped by the metric(s) that drove them",
            limit=LISTED_CASES,
            interactive=True,
        ),
        kinds=[
            {
                "name": kind,
                "title": f"{kind.capitalize()} cases",
                "table": _case_lines(drivers, kind),
            }
            for kind in ("regressed", "improved")
        ],
        tests=significance_data(comparison),
        slices=None
        if slice_changes is None
        else _optional_table(
            slice_changes,
            "per-tag means that moved, the worse first (descriptive: the slices are not "
            "tested, and join no significance family)",
            limit=60,
            interactive=True,
        ),
    )


def significance_data(comparison: Comparison) -> dict[str, Any] | None:
    """``compare --significance`` at its defaults — one Holm family of the whole
    run's metrics, the same tests and adjusted p-values as the command line and
    the notebook (:attr:`Comparison.tests`); the per-tag slices above are
    descriptive and join no family: every test with its verdict, the ones that
    need a look first; ``None`` when no metric has a matched pair to test."""
    tested = comparison.tests
    frame = tested.frame.filter(pl.col("n") > 0)
    if frame.height == 0:
        return None
    rank = pl.col("verdict").replace_strict(
        {"regressed": 0, "inconclusive": 1, "improved": 2}, default=3, return_dtype=pl.Int8
    )
    shown = frame.sort(rank, maintain_order=True).select(
        pl.col("tag").fill_null(slices.ALL_CASES),
        "metric",
        "verdict",
        "n",
        pl.col("mean_delta").alias("Δ"),
        "ci_low",
        "ci_high",
        "p_value",
        "p_adjusted",
        "mde",
        "tolerance",
    )
    counts = frame.get_column("verdict").value_counts(sort=True)
    tally = ", ".join(f"{count} {verdict}" for verdict, count in counts.iter_rows())
    caption = (
        f"paired tests ({tested.resamples} resamples, seed {tested.seed}, alpha "
        f"{tested.alpha:g}, {tested.correction} over {tested.family_size} tests of one family, "
        f"{tested.family}, as compare --significance; "
        f"MDE at {POWER:.0%} power): {tally}; inconclusive = not significant, but a "
        "regression beyond the tolerance is not ruled out"
    )
    return table_data(shown, caption=caption, limit=60, interactive=True)


TABLE_OPTIONS: Final = {
    # Our row order (worst first, newest first) until a header is clicked.
    "order": [],
    "pageLength": PAGE_ROWS,
    "lengthMenu": [10, 25, 50, 100, 200, 500],
    "autoWidth": False,
}
"""DataTables' options for every interactive table: sort, search and pages of 10."""


def render_page(title: str, page: _Page, toc: Sequence[tuple[str, str]] = ()) -> str:
    """The whole HTML document: ``page``'s sections, its charts' specs, the inlined
    Vega bundle and (when installed) DataTables. ``toc``: (anchor, title) links."""
    specs = [{"name": name, "spec": spec} for name, spec in page.specs]
    bundle = offline.datatables_bundle()
    datatables = (
        None if bundle is None else {"source": Markup(bundle.source), "css": Markup(bundle.css)}
    )
    return render(
        "report.html.j2",
        title=title,
        toc=[{"id": anchor, "title": name} for anchor, name in toc],
        sections=[Markup(section) for section in page.sections],
        # Each is inert inside its element: no "<" (json_for_script), "</script" escaped.
        vega_bundle=Markup(offline.javascript_bundle()),
        specs=Markup(offline.json_for_script(specs)),
        embed_options=Markup(offline.json_for_script(offline.EMBED_OPTIONS)),
        datatables=datatables,
        table_options=Markup(offline.json_for_script(TABLE_OPTIONS)),
    )


def build_report(
    run: str | Path,
    *,
    base: str | Path | None = None,
    thresholds: str | Path | None = None,
    store: str | Path | None = None,
    out: str | Path | None = None,
) -> str:
    """The report's HTML text for ``run`` (see the module docstring).

    ``out`` is where the report will be written: links to the run's Parquet
    files are made relative to it (absolute paths otherwise).
    """
    loaded = load_report_run(run)
    document, tables = loaded.document, loaded.tables
    bounds = drift.bounds_frame(run_thresholds(thresholds, loaded) if thresholds else None)
    context = loaded.context
    page = _Page()
    toc: list[tuple[str, str]] = []

    def add(section: str, *entries: tuple[str, str]) -> None:
        if section:
            page.sections.append(section)
            toc.extend(entries)

    add(summary_section(document, loaded.label, loaded.origin), ("summary", "Summary"))
    add(gate_section(document), ("gate", "Gate"))
    add(metrics_section(page, document, tables, bounds), ("metrics", "Metrics"))
    add(cases_section(page, tables, loaded, out), ("cases", "Cases"), ("misses", "Misses"))
    add(must_refuse_section(page, document, tables), ("must-refuse", "Must-refuse"))
    add(answers_section(document, tables), ("answers", "Answers"))
    add(latency_section(page, tables), ("latency", "Latency"))
    add(slices_section(tables), ("slices", "Slices"))
    history_store = Path(store) if store is not None else store_of(run)
    if history_store is not None and context:
        add(drift_section(page, history_store, context, loaded.label, bounds), ("drift", "Drift"))
    if base is not None:
        head_tags = slices.case_tags(tables["case_lanes"]) if "case_lanes" in tables else None
        add(compare_section(page, base, loaded.compare_side(), head_tags), ("compare", "Compare"))
    return render_page(f"taguru_eval report — {context} — {loaded.label}", page, toc)
