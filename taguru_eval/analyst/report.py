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
page's size follows the number of bins, metrics and runs, not of cases."""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import polars as pl

from taguru_eval._base.html import pairs_html, table_html
from taguru_eval.analyst import aggregate, charts, drift, must_refuse, offline, slices
from taguru_eval.analyst.ingest import tables_from_document
from taguru_eval.artifact.layout import get_path
from taguru_eval.artifact.read import read_artifact
from taguru_eval.catalog import (
    ANSWERS_BLOCK,
    ANSWERS_METRICS,
    CATALOG,
    repetitions_of,
    scalar_expr,
)
from taguru_eval.compare import Comparison, compare, significance
from taguru_eval.compare.classify import budget_text
from taguru_eval.compare.load import Budget, read_view
from taguru_eval.compare.parquet import read_side
from taguru_eval.compare.significance import POWER
from taguru_eval.inputs.thresholds import Thresholds
from taguru_eval.store import RunOrigin, read_origin, read_table, require_tables
from taguru_eval.store_artifact import stored_artifact
from taguru_eval.tables.schemas import TABLE

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
    """The report being assembled: HTML sections plus the chart specs they embed."""

    sections: list[str] = field(default_factory=list)
    specs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def chart(self, name: str, chart: charts.ChartLike) -> str:
        """Register a chart; returns the placeholder element the script fills in."""
        index = len(self.specs)
        self.specs.append((name, offline.embeddable(chart.to_dict())))
        return (
            f'<div class="chart" id="chart-{index}" data-chart="{html.escape(name)}"'
            f' data-marks="pending"></div>'
        )


def load_document(source: str | Path) -> dict[str, Any]:
    """An evaluation.json (file or stored run directory), validated by compare's reader."""
    read_view(source, stamp_required=True)
    path = Path(source)
    return read_artifact(stored_artifact(path) if path.is_dir() else path)


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
        tail = _TAIL_DECODER.decode(artifact.read_bytes())
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
        ("budget", budget_text(_budget_of(inputs))),
        ("rerank", inputs.get("rerank")),
        ("server", inputs.get("url")),
        ("corpus revision before", _revision(corpus.get("revision_before"))),
        ("corpus revision after", _revision(corpus.get("revision_after"))),
        ("corpus stable", corpus.get("stable")),
        ("sources", corpus.get("sources_count")),
        ("embedding provider", provider),
        ("stored", origin.description if origin is not None else "not in a run store"),
    ]
    return f'<section id="summary"><h2>Run summary</h2>{pairs_html(pairs)}</section>'


def _budget_of(inputs: Mapping[str, Any]) -> Budget | None:
    """``inputs.budget`` as compare reads it: the three limits, or None."""
    budget = inputs.get("budget")
    if not isinstance(budget, Mapping):
        return None
    items, size, tokens = (budget.get(key) for key in ("max_items", "max_bytes", "max_tokens"))
    if not (isinstance(items, int) and isinstance(size, int) and isinstance(tokens, int)):
        return None
    return items, size, tokens


def gate_section(document: Mapping[str, Any]) -> str:
    """The thresholds verdict as recorded in the artifact (GATE_AND_COMPARE.md §5.5)."""
    gate = document.get("thresholds")
    if not isinstance(gate, Mapping):
        verdict = (
            '<p class="verdict none">report-only: no thresholds file was given for this run</p>'
        )
        return f'<section id="gate"><h2>Gate</h2>{verdict}</section>'
    sha = str(gate.get("sha256") or "")
    violations = gate.get("violations") or []
    skipped = gate.get("skipped") or []
    if gate.get("passed"):
        verdict = f'<p class="verdict pass">PASS (sha256 {html.escape(sha[:12])}…)</p>'
    else:
        verdict = (
            f'<p class="verdict fail">FAIL — {len(violations)} violation(s)'
            f" (sha256 {html.escape(sha[:12])}…)</p>"
        )
    parts = [verdict]
    if violations:
        frame = pl.DataFrame(
            [
                {
                    "scope": v.get("scope"),
                    "case_id": v.get("case_id"),
                    "metric": v.get("metric"),
                    "bound": v.get("bound"),
                    "threshold": v.get("threshold"),
                    "actual": v.get("actual"),
                    "reason": v.get("reason"),
                }
                for v in violations
                if isinstance(v, Mapping)
            ],
            schema={
                "scope": pl.String,
                "case_id": pl.String,
                "metric": pl.String,
                "bound": pl.String,
                "threshold": pl.Float64,
                "actual": pl.Float64,
                "reason": pl.String,
            },
            strict=False,
        )
        parts.append(table_html(frame, caption="violations"))
    if skipped:
        parts.append(
            f'<p class="note">{len(skipped)} case-scoped threshold(s) skipped as not applicable</p>'
        )
    return f'<section id="gate"><h2>Gate</h2>{"".join(parts)}</section>'


def metrics_section(
    page: _Page,
    document: Mapping[str, Any],
    tables: Mapping[str, pl.DataFrame],
    bounds: pl.DataFrame,
) -> str:
    """The aggregate metrics: table of all (with their direction), chart of the ratios."""
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
    table = table_html(
        metrics.join(directions.select("metric", "direction"), on="metric", how="left")
        .select("metric", "direction", "statistic", "n", "scalar", "p50", "p90", "max")
        .sort("metric"),
        caption="scalar = mean (distribution) or value (ratio); direction from the catalog",
    )
    return f'<section id="metrics"><h2>Aggregate metrics</h2>{chart}{table}</section>'


def _parquet_link(run: ReportRun, out: str | Path | None, table: str) -> str:
    """A link to a stored run's Parquet file (relative to the report when its path is
    known), or a note that a bare evaluation.json has no such file."""
    if run.directory is None:
        return (
            "every row is in the run's evaluation.json; "
            "<code>python -m taguru_eval ingest</code> stores it as Parquet"
        )
    target = run.directory / TABLE[table].file_name
    href = str(target.resolve())
    if out is not None:
        href = os.path.relpath(target.resolve(), Path(out).resolve().parent)
    return (
        f'every row is in <a href="{html.escape(Path(href).as_posix())}">'
        f"{html.escape(TABLE[table].file_name)}</a>"
    )


def cases_section(
    page: _Page,
    tables: Mapping[str, pl.DataFrame],
    run: ReportRun | None = None,
    out: str | Path | None = None,
) -> str:
    """Per-case metrics (histograms, the worst cases, a capped table), misses, cross-tab."""
    cases = tables["cases"]
    chart = page.chart("case_metrics", charts.case_metrics_chart(cases, _CASE_CHART_METRICS))
    columns = ["case_id", "passage_outcome", *_CASE_METRIC_COLUMNS.values()]
    scores = aggregate.case_scores(cases, _CASE_CHART_METRICS)
    ordered = (
        cases.join(scores, on="case_id", how="left")
        .sort(["score", "case_index"], nulls_last=True)
        .select(columns)
    )
    link = _parquet_link(run, out, "cases") if run is not None else ""
    more = (
        f"showing the {CASE_ROWS} worst of {cases.height} cases (mean of the per-case ratios); "
        f"{link}"
    )
    table = table_html(ordered, limit=CASE_ROWS, more=more)
    misses = drift.misses(cases)
    missed = (
        table_html(
            misses,
            caption="missed items (at most 3 per case; the rest counted)",
            limit=CASE_ROWS,
            more=f"… and {max(misses.height - CASE_ROWS, 0)} more missed item(s); {link}",
        )
        if misses.height
        else '<p class="note">no case missed anything</p>'
    )
    cross = drift.lane_crosstab(cases)
    cross_html = (
        table_html(cross, caption="lane cross-tab (cases)")
        if cross.height
        else '<p class="note">no case is in the lane cross-tab population</p>'
    )
    return (
        f'<section id="cases"><h2>Cases</h2>{chart}{table}</section>'
        f'<section id="misses"><h2>Misses</h2>{missed}{cross_html}</section>'
    )


def latency_section(page: _Page, tables: Mapping[str, pl.DataFrame]) -> str:
    """Latency per lane (summary chart) plus the numbers."""
    samples = drift.latency_samples(tables)
    if not samples.height:
        return '<section id="latency"><h2>Latency</h2><p class="note">no latencies</p></section>'
    chart = page.chart("latency", charts.latency_chart(samples))
    numbers = aggregate.latency_summary(samples)
    return f'<section id="latency"><h2>Latency</h2>{chart}{table_html(numbers)}</section>'


_NO_TAGS: Final = (
    '<p class="note">this run did not record its cases\' tags (an evaluation.json '
    "does not carry <code>options.tags</code>; a run made by taguru_eval keeps them in "
    "<code>case_lanes.tags</code>)</p>"
)


def slices_section(tables: Mapping[str, pl.DataFrame]) -> str:
    """The main metrics per ``options.tags`` tag."""
    tags = slices.case_tags(tables["case_lanes"]) if "case_lanes" in tables else None
    if tags is None:
        body = _NO_TAGS
    else:
        frame = slices.tag_slices(tables["cases"], tags)
        body = table_html(frame, caption="mean per tag over the cases that computed the metric")
    return f'<section id="slices"><h2>Slices by tag</h2>{body}</section>'


def drift_section(page: _Page, store: Path, context: str, run_id: str, bounds: pl.DataFrame) -> str:
    """The context's metric drift over the stored runs up to (and including) this one."""
    every_run = drift.run_index(store, context)
    runs = every_run
    if run_id in runs.get_column("run").to_list():
        position = runs.get_column("run").to_list().index(run_id)
        runs = runs.head(position + 1)
    runs = runs.tail(DRIFT_RUNS)
    if runs.height < 2:
        return ""
    history = drift.metric_history(store, context, every_run).filter(
        pl.col("run").is_in(runs.get_column("run").implode())
    )
    chart = page.chart("drift", charts.drift_chart(history, runs=runs, bounds=bounds))
    index = table_html(
        runs.select(
            "label", "run", "generated_at", "revision", "stable", "thresholds_passed", "violations"
        ).reverse(),
        caption="newest first",
        limit=50,
    )
    note = (
        '<p class="note">one point per run; dashed orange rule: the run started from a new '
        "corpus revision; purple rule: a thresholds bound; ↑/↓: higher/lower is better; a "
        "ratio is drawn on [0, 1]</p>"
    )
    return (
        f'<section id="drift"><h2>Drift over {runs.height} stored runs</h2>'
        f"{note}{chart}{index}</section>"
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
    facts = must_refuse.run_facts(document, tables)
    if facts is None:
        return ""
    trade_off = must_refuse.trade_off_frame(tables["metrics"])
    chart = page.chart("must_refuse", must_refuse.trade_off_chart(trade_off))
    refusals = tables["refusal_cases"]
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in facts.warnings)
    warning_html = f'<ul class="warnings">{warnings}</ul>' if warnings else ""
    return (
        '<section id="must-refuse"><h2>Must-refuse questions</h2>'
        f"{pairs_html(facts.pairs())}{warning_html}{chart}"
        f"{table_html(trade_off, caption='the trade-off pair: never pooled')}"
        f"{table_html(must_refuse.verdict_counts(refusals), caption='verdicts by kind')}"
        f"{table_html(must_refuse.verdict_rows(refusals), caption='must-refuse cases')}"
        "</section>"
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
    return (
        '<section id="answers"><h2>Answer evidence</h2>'
        f"{pairs_html(pairs)}"
        f"{table_html(figures, caption='answers.* over the judged cases')}"
        f"{table_html(depth, caption='rank of the first answer-bearing hit (null: none)')}"
        + table_html(
            misses,
            caption="listed cases with no answer in their window",
            limit=ANSWER_MISSES_SHOWN,
            more="more cases: the cases table's answers_found column",
        )
        + "</section>"
    )


def _case_lines(drivers: pl.DataFrame, kind: str) -> str:
    """The first :data:`LISTED_CASES` cases of ``kind`` with their drivers, and the count."""
    rows = drivers.filter(pl.col("kind") == kind)
    if rows.height == 0:
        return f'<p class="note">no {kind} case</p>'
    shown = rows.select(
        "case_id",
        pl.col("drivers").list.join(", ").alias("driven by"),
        pl.col("driver_deltas").alias("Δ"),
        pl.col("against").list.join(", ").alias("moved the other way"),
    )
    return table_html(
        shown,
        caption=f"{rows.height} {kind} case(s), case_id order",
        limit=LISTED_CASES,
        more=f"… and {rows.height - LISTED_CASES} more {kind} case(s)",
    )


def compare_section(
    page: _Page,
    base: str | Path,
    head: str | Path | Mapping[str, Any],
    head_tags: pl.DataFrame | None = None,
) -> str:
    """BASE vs this run: counts, warnings, what moved, and which metrics drove each case."""
    comparison = compare(base, head, base_label=str(base), head_label="RUN", stamp_required=True)
    counts = dict(comparison.counts)
    long = charts.compare_long(comparison.cases)
    chart = page.chart("compare", charts.compare_chart(long, counts))
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in comparison.warnings)
    warning_html = f'<ul class="warnings">{warnings}</ul>' if warnings else ""
    pairs = [(kind, counts.get(kind, 0)) for kind in charts.COMPARE_KINDS]
    sides = pl.DataFrame(
        {
            "side": ["BASE", "RUN"],
            "mode": [comparison.base.mode, comparison.head.mode],
            "budget": [budget_text(comparison.base.budget), budget_text(comparison.head.budget)],
        }
    )
    return (
        f'<section id="compare"><h2>Compare with {html.escape(str(base))}</h2>'
        f"{table_html(sides, caption='mode and budget of each side')}"
        f"{pairs_html(pairs)}{warning_html}{chart}"
        f"{_reader_view(comparison, head_tags)}</section>"
    )


def _reader_view(comparison: Comparison, head_tags: pl.DataFrame | None) -> str:
    moved = comparison.moved_metrics()
    moved_html = (
        table_html(
            moved.select("metric", "base", "head", "delta", "direction"),
            caption=f"the {moved.height} aggregate metric(s) that moved "
            f"(of {comparison.metrics.height})",
        )
        if moved.height
        else '<p class="note">no aggregate metric moved</p>'
    )
    drivers = comparison.case_drivers()
    groups = comparison.driver_groups()
    groups_html = (
        table_html(
            groups.select("kind", "drivers", "cases", "improved_elsewhere", "against", "examples"),
            caption="changed cases grouped by the metric(s) that drove them",
            limit=LISTED_CASES,
        )
        if groups.height
        else ""
    )
    parts = [
        moved_html,
        groups_html,
        "<h3>Regressed cases</h3>",
        _case_lines(drivers, "regressed"),
        "<h3>Improved cases</h3>",
        _case_lines(drivers, "improved"),
    ]
    parts.append(significance_html(comparison, head_tags))
    if head_tags is not None:
        changes = slices.tag_slice_changes(comparison.cases, head_tags)
        parts.append("<h3>Slices by tag</h3>")
        parts.append(
            table_html(changes, caption="per-tag means that moved, regressions first", limit=60)
            if changes.height
            else '<p class="note">no tag slice moved</p>'
        )
    return "".join(parts)


def significance_html(comparison: Comparison, head_tags: pl.DataFrame | None) -> str:
    """``compare --significance`` at its defaults (``--by-tag`` when the run recorded
    tags): every test with its verdict, the ones that need a look first."""
    tested = significance(comparison, tags=head_tags)
    frame = tested.frame.filter(pl.col("n") > 0)
    if frame.height == 0:
        return '<h3>Is the move more than noise?</h3><p class="note">no matched pair to test</p>'
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
        f"{tested.alpha:g}, {tested.correction} over {tested.family_size} tests, "
        f"MDE at {POWER:.0%} power): {tally}; inconclusive = not significant, but a "
        "regression beyond the tolerance is not ruled out"
    )
    return f"<h3>Is the move more than noise?</h3>{table_html(shown, caption=caption, limit=60)}"


_STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 1200px; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1rem; margin-top: 1.2rem; }
table { border-collapse: collapse; margin: .75rem 0; font-size: .85rem; }
th, td { border: 1px solid #ddd; padding: .2rem .5rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } td.null { color: #999; }
caption { text-align: left; font-style: italic; color: #555; }
.scroll { overflow-x: auto; max-width: 100%; }
.verdict { font-weight: bold; font-size: 1.1rem; } .pass { color: #2e7d32; }
.fail { color: #c62828; } .none { color: #555; } .note { color: #555; font-size: .85rem; }
.chart { margin: 1rem 0; overflow-x: auto; }
"""


# Runs after the inlined bundle defined window.vegaEmbed; records how many
# marks each chart drew so a headless browser (and a reader) can check it.
_EMBED_SCRIPT: Final = """
(function () {
  var specs = JSON.parse(document.getElementById("taguru-specs").textContent);
  var options = JSON.parse(document.getElementById("taguru-embed-options").textContent);
  var done = 0;
  specs.forEach(function (entry, index) {
    var element = document.getElementById("chart-" + index);
    vegaEmbed(element, entry.spec, options).then(function () {
      var marks = element.querySelectorAll("g.role-mark > path, g.role-mark > rect, " +
        "g.role-mark > line, g.role-mark > g > path, g.role-mark > g > rect, " +
        "g.role-mark > g > line").length;
      element.setAttribute("data-marks", String(marks));
    }).catch(function (error) {
      element.setAttribute("data-marks", "error");
      element.textContent = "chart failed: " + error;
    }).finally(function () {
      done += 1;
      if (done === specs.length) { document.body.setAttribute("data-charts", "done"); }
    });
  });
  if (specs.length === 0) { document.body.setAttribute("data-charts", "done"); }
})();
"""


def render_page(title: str, page: _Page) -> str:
    """The whole HTML document."""
    specs = [{"name": name, "spec": spec} for name, spec in page.specs]
    json_for_script = offline.json_for_script
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n"
        f"<script>{offline.javascript_bundle()}</script>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        + "\n".join(page.sections)
        + f'\n<script type="application/json" id="taguru-specs">{json_for_script(specs)}</script>'
        + '\n<script type="application/json" id="taguru-embed-options">'
        + f"{json_for_script(offline.EMBED_OPTIONS)}</script>"
        + f"\n<script>{_EMBED_SCRIPT}</script>\n</body>\n</html>\n"
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
    page.sections.append(summary_section(document, loaded.label, loaded.origin))
    page.sections.append(gate_section(document))
    page.sections.append(metrics_section(page, document, tables, bounds))
    page.sections.append(cases_section(page, tables, loaded, out))
    for section in (must_refuse_section(page, document, tables), answers_section(document, tables)):
        if section:
            page.sections.append(section)
    page.sections.append(latency_section(page, tables))
    page.sections.append(slices_section(tables))
    history_store = Path(store) if store is not None else store_of(run)
    if history_store is not None and context:
        section = drift_section(page, history_store, context, loaded.label, bounds)
        if section:
            page.sections.append(section)
    if base is not None:
        head_tags = slices.case_tags(tables["case_lanes"]) if "case_lanes" in tables else None
        page.sections.append(compare_section(page, base, loaded.compare_side(), head_tags))
    return render_page(f"taguru_eval report — {context} — {loaded.label}", page)
