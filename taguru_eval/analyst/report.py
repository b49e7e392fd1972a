"""One offline HTML report of a run (and its drift, and a comparison with a base run).

The report is a single self-contained file a CI reviewer can open without a
network: the Vega, Vega-Lite and Vega-Embed JavaScript is inlined (taken from
the ``vl-convert-python`` wheel, which bundles them), every chart spec and its
data is embedded as JSON, and no element loads anything from elsewhere.

Contents: the run summary, the gate verdict, aggregate metrics, per-case
metrics, misses, the lane cross-tab, the must-refuse population beside the
answerable one (a run given --must-refuse) and latency; the metric drift of the
run's context when the run sits in a run store with earlier runs; and, with a
base, the compare view. A run (and its base) is an evaluation.json — ours or
taguru's own — or a stored run directory; the tables are rebuilt from the
artifact itself, so any evaluation.json can be reported on."""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl

from taguru_eval._base.extras import MissingExtra, load_extra
from taguru_eval.analyst import charts, drift, must_refuse
from taguru_eval.analyst.ingest import tables_from_document
from taguru_eval.artifact.read import read_artifact
from taguru_eval.catalog import CATALOG, scalar_expr
from taguru_eval.compare import compare
from taguru_eval.compare.load import read_view
from taguru_eval.contract import ARTIFACT_NAME
from taguru_eval.errors import RunError
from taguru_eval.store import RunOrigin, read_origin

_RATIO_METRICS_UNIT: Final = "ratio"

_CASE_METRIC_COLUMNS: Final = drift.case_metric_columns()
_CASE_CHART_METRICS: Final = {
    metric: column
    for metric, column in _CASE_METRIC_COLUMNS.items()
    if CATALOG[metric].unit == _RATIO_METRICS_UNIT
}


@dataclass
class _Page:
    """The report being assembled: HTML sections plus the chart specs they embed."""

    sections: list[str] = field(default_factory=list)
    specs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def chart(self, name: str, chart: charts.ChartLike) -> str:
        """Register a chart; returns the placeholder element the script fills in."""
        index = len(self.specs)
        self.specs.append((name, chart.to_dict()))
        return (
            f'<div class="chart" id="chart-{index}" data-chart="{html.escape(name)}"'
            f' data-marks="pending"></div>'
        )


def load_document(source: str | Path) -> dict[str, Any]:
    """An evaluation.json (file or stored run directory), validated by compare's reader."""
    read_view(source)
    path = Path(source)
    return read_artifact(path / ARTIFACT_NAME if path.is_dir() else path)


def store_of(run: str | Path) -> Path | None:
    """The run store a stored run directory sits in (``<store>/context=…/run=…``)."""
    path = Path(run)
    if path.is_file():
        path = path.parent
    if path.name.startswith("run=") and path.parent.name.startswith("context="):
        return path.parent.parent
    return None


def _cell(value: object) -> str:
    if value is None:
        return '<td class="null">—</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float):
        return f'<td class="num">{value:.4f}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    if isinstance(value, list):
        return f"<td>{html.escape(', '.join(str(item) for item in value))}</td>"
    return f"<td>{html.escape(str(value))}</td>"


def table_html(frame: pl.DataFrame, *, caption: str | None = None, limit: int = 500) -> str:
    """A frame as an HTML table (at most ``limit`` rows; the rest are counted)."""
    head = "".join(f"<th>{html.escape(name)}</th>" for name in frame.columns)
    body = "".join(
        "<tr>" + "".join(_cell(value) for value in row) + "</tr>"
        for row in frame.head(limit).iter_rows()
    )
    more = (
        f'<p class="note">… and {frame.height - limit} more row(s)</p>'
        if frame.height > limit
        else ""
    )
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _pairs_html(pairs: Sequence[tuple[str, object]]) -> str:
    rows = "".join(f"<tr><th>{html.escape(key)}</th>{_cell(value)}</tr>" for key, value in pairs)
    return f'<table class="pairs"><tbody>{rows}</tbody></table>'


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
        ("server", inputs.get("url")),
        ("corpus revision before", _revision(corpus.get("revision_before"))),
        ("corpus revision after", _revision(corpus.get("revision_after"))),
        ("corpus stable", corpus.get("stable")),
        ("sources", corpus.get("sources_count")),
        ("embedding provider", provider),
        ("stored", origin.description if origin is not None else "not in a run store"),
    ]
    return f'<section id="summary"><h2>Run summary</h2>{_pairs_html(pairs)}</section>'


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
    """The aggregate metrics: table of all, chart of the ratio-valued ones."""
    metrics = tables["metrics"].with_columns(scalar_expr())
    definitions = document.get("definitions") or {}
    ratio_valued = [
        name
        for name, definition in definitions.items()
        if isinstance(definition, Mapping) and definition.get("unit") == _RATIO_METRICS_UNIT
    ]
    shown = metrics.filter(pl.col("metric").is_in(ratio_valued))
    chart = page.chart("metrics", charts.metrics_chart(shown, bounds))
    table = table_html(
        metrics.select("metric", "statistic", "n", "scalar", "p50", "p90", "max").sort("metric"),
        caption="scalar = mean (distribution) or value (ratio)",
    )
    return f'<section id="metrics"><h2>Aggregate metrics</h2>{chart}{table}</section>'


def cases_section(page: _Page, tables: Mapping[str, pl.DataFrame]) -> str:
    """Per-case metrics (heat map + table), misses and the lane cross-tab."""
    cases = tables["cases"]
    chart = page.chart("case_metrics", charts.case_metrics_chart(cases, _CASE_CHART_METRICS))
    columns = ["case_id", "passage_outcome", *_CASE_METRIC_COLUMNS.values()]
    table = table_html(cases.select(columns))
    misses = drift.misses(cases)
    missed = (
        table_html(misses, caption="missed items (at most 3 per case; the rest counted)")
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
    """Latency distribution per lane (box plots) plus the numbers."""
    samples = drift.latency_samples(tables)
    if not samples.height:
        return '<section id="latency"><h2>Latency</h2><p class="note">no latencies</p></section>'
    chart = page.chart("latency", charts.latency_chart(samples))
    numbers = (
        samples.group_by("lane")
        .agg(
            pl.len().alias("calls"),
            pl.col("latency_ms").min().alias("min"),
            pl.col("latency_ms").max().alias("max"),
            pl.col("latency_ms").mean().alias("mean"),
        )
        .sort("lane")
    )
    return f'<section id="latency"><h2>Latency</h2>{chart}{table_html(numbers)}</section>'


def drift_section(page: _Page, store: Path, context: str, run_id: str, bounds: pl.DataFrame) -> str:
    """The context's metric drift over the stored runs up to (and including) this one."""
    runs = drift.run_index(store, context)
    if run_id in runs.get_column("run").to_list():
        position = runs.get_column("run").to_list().index(run_id)
        runs = runs.head(position + 1)
    if runs.height < 2:
        return ""
    history = drift.metric_history(store, context).filter(
        pl.col("run").is_in(runs.get_column("run").implode())
    )
    chart = page.chart("drift", charts.drift_chart(history, runs=runs, bounds=bounds))
    index = table_html(
        runs.select("run", "generated_at", "revision", "stable", "thresholds_passed", "violations")
    )
    note = (
        '<p class="note">dashed orange rule: the run started from a new corpus revision; '
        "purple rule: a thresholds bound</p>"
    )
    return (
        f'<section id="drift"><h2>Drift over {runs.height} stored runs</h2>'
        f"{note}{chart}{index}</section>"
    )


def must_refuse_section(
    page: _Page, document: Mapping[str, Any], tables: Mapping[str, pl.DataFrame]
) -> str:
    """ABSTENTION.md §3.11: the must-refuse population beside the answerable one
    (each rate with its own n), the verdicts by kind and case, and the block's
    warnings; empty for a run without --must-refuse."""
    block = document.get("abstention")
    if not isinstance(block, Mapping):
        return ""
    trade_off = must_refuse.trade_off_frame(tables["metrics"])
    chart = page.chart("must_refuse", must_refuse.trade_off_chart(trade_off))
    refusals = tables["refusal_cases"]
    vector = block.get("vector") or {}
    pairs: list[tuple[str, object]] = [
        ("refusal rule", block.get("rule")),
        ("claim", block.get("claim")),
        ("provider model", vector.get("provider_model")),
        ("passage vectors", vector.get("passage_vectors")),
        ("effective floors", vector.get("effective_floors")),
        ("floors coherent", vector.get("floors_coherent")),
    ]
    warnings = "".join(f"<li>{html.escape(str(w))}</li>" for w in block.get("warnings") or [])
    warning_html = f'<ul class="warnings">{warnings}</ul>' if warnings else ""
    return (
        '<section id="must-refuse"><h2>Must-refuse questions</h2>'
        f"{_pairs_html(pairs)}{warning_html}{chart}"
        f"{table_html(trade_off, caption='the trade-off pair: never pooled')}"
        f"{table_html(must_refuse.verdict_counts(refusals), caption='verdicts by kind')}"
        f"{table_html(must_refuse.verdict_rows(refusals), caption='must-refuse cases')}"
        "</section>"
    )


def compare_section(page: _Page, base: str | Path, head_document: Mapping[str, Any]) -> str:
    """BASE vs this run: counts, warnings, per-case deltas."""
    comparison = compare(base, head_document, base_label=str(base), head_label="RUN")
    counts = dict(comparison.counts)
    long = charts.compare_long(comparison.cases)
    chart = page.chart("compare", charts.compare_chart(long, counts))
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in comparison.warnings)
    warning_html = f'<ul class="warnings">{warnings}</ul>' if warnings else ""
    changed = long.filter(pl.col("direction").is_in(["improved", "regressed", "added", "removed"]))
    aggregate = comparison.metrics
    pairs = [(kind, counts.get(kind, 0)) for kind in charts.COMPARE_KINDS]
    return (
        f'<section id="compare"><h2>Compare with {html.escape(str(base))}</h2>'
        f"{_pairs_html(pairs)}{warning_html}{chart}"
        f"{table_html(changed, caption='per-case changes')}"
        f"{table_html(aggregate, caption='aggregate metrics (scalar sides)')}</section>"
    )


_STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 1200px; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .75rem 0; font-size: .85rem; }
th, td { border: 1px solid #ddd; padding: .2rem .5rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } td.null { color: #999; }
caption { text-align: left; font-style: italic; color: #555; }
.verdict { font-weight: bold; font-size: 1.1rem; } .pass { color: #2e7d32; }
.fail { color: #c62828; } .none { color: #555; } .note { color: #555; font-size: .85rem; }
.chart { margin: 1rem 0; }
"""


# Runs after the inlined bundle defined window.vegaEmbed; records how many
# marks each chart drew so a headless browser (and a reader) can check it.
_EMBED_SCRIPT: Final = """
(function () {
  var specs = JSON.parse(document.getElementById("taguru-specs").textContent);
  var done = 0;
  specs.forEach(function (entry, index) {
    var element = document.getElementById("chart-" + index);
    vegaEmbed(element, entry.spec, {renderer: "svg", actions: false}).then(function () {
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

_BUNDLE_SNIPPET: Final = "window.vegaEmbed=vegaEmbed; window.vegaLite=vegaLite; window.vega=vega;"


@functools.cache
def javascript_bundle() -> str:
    """Vega + Vega-Lite + Vega-Embed as one script (from the vl-convert-python wheel)."""
    try:
        vl_convert = load_extra("report")
    except MissingExtra:
        raise RunError(
            "the HTML report needs the vl-convert-python package "
            "(pip install 'taguru_eval[report]'), which ships the chart libraries"
        ) from None
    import altair as alt

    # The bundled Vega-Lite must be the one Altair writes specs for.
    major_minor = ".".join(alt.VEGALITE_VERSION.split(".")[:2])
    version = major_minor if major_minor in vl_convert.get_vegalite_versions() else None
    bundle: str = vl_convert.javascript_bundle(
        _BUNDLE_SNIPPET, vl_version=f"v{version}" if version else None
    )
    # A literal "</script" inside the bundle would end the inline element early.
    return bundle.replace("</script", "<\\/script")


def _json_for_script(value: object) -> str:
    # "</" cannot appear inside an inline script; "<\/" is the same JSON string.
    return json.dumps(value, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")


def render_page(title: str, page: _Page) -> str:
    """The whole HTML document."""
    specs = [{"name": name, "spec": spec} for name, spec in page.specs]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n"
        f"<script>{javascript_bundle()}</script>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        + "\n".join(page.sections)
        + f'\n<script type="application/json" id="taguru-specs">{_json_for_script(specs)}</script>'
        + f"\n<script>{_EMBED_SCRIPT}</script>\n</body>\n</html>\n"
    )


def build_report(
    run: str | Path,
    *,
    base: str | Path | None = None,
    thresholds: str | Path | None = None,
    store: str | Path | None = None,
) -> str:
    """The report's HTML text for ``run`` (see the module docstring)."""
    document = load_document(run)
    run_path = Path(run)
    run_dir = run_path if run_path.is_dir() else run_path.parent
    run_label = run_dir.name.removeprefix("run=") if run_dir.name.startswith("run=") else str(run)
    tables = tables_from_document(document, run_label, shown=str(run))
    bounds = drift.bounds_frame(drift.read_thresholds(thresholds) if thresholds else None)
    context = str((document.get("inputs") or {}).get("context") or "")
    page = _Page()
    origin = read_origin(run_dir) if run_path.is_dir() else None
    page.sections.append(summary_section(document, run_label, origin))
    page.sections.append(gate_section(document))
    page.sections.append(metrics_section(page, document, tables, bounds))
    page.sections.append(cases_section(page, tables))
    section = must_refuse_section(page, document, tables)
    if section:
        page.sections.append(section)
    page.sections.append(latency_section(page, tables))
    history_store = Path(store) if store is not None else store_of(run)
    if history_store is not None and context:
        section = drift_section(page, history_store, context, run_label, bounds)
        if section:
            page.sections.append(section)
    if base is not None:
        page.sections.append(compare_section(page, base, document))
    return render_page(f"taguru_eval report — {context} — {run_label}", page)
