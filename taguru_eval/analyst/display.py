"""How a :class:`~taguru_eval.api.Run` shows itself in Jupyter: a one-line ``repr``
and a compact HTML summary (context, cases, key metrics, gate verdict).

A run holds every table of a 100,000-case evaluation; its display never
prints them — the frames are one attribute away (``run.cases``,
``run.metrics``, ``run.tables``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import polars as pl

from taguru_eval._base.html import pairs_data, render, table_data
from taguru_eval.analyst.aggregate import arrow_of
from taguru_eval.analyst.drift import DRIFT_METRICS, case_count
from taguru_eval.catalog import scalar_expr
from taguru_eval.compare.display import verdict_text

KEY_METRICS: Final = (*DRIFT_METRICS, "diversity.sources", "passage.failure_rate")
"""The metrics a run's summary shows: the drift view's, plus diversity and failures."""


def gate_verdict(doc: Mapping[str, Any]) -> str:
    """``PASS``, ``FAIL (2 violations)`` or ``report-only`` from the artifact's gate block."""
    gate = doc.get("thresholds")
    if not isinstance(gate, Mapping):
        return verdict_text(None)
    passed = gate.get("passed")
    violations = gate.get("violations") or []
    verdict = verdict_text(passed if isinstance(passed, bool) else None)
    return f"{verdict} ({len(violations)} violation(s))" if passed is False else verdict


def _inputs(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    inputs = doc.get("inputs")
    return inputs if isinstance(inputs, Mapping) else {}


def run_repr(run_id: str, doc: Mapping[str, Any], path: Path | None) -> str:
    """``<Run 2026… sake: 16 cases, baseline, gate PASS, runs/context=sake/run=…>``."""
    inputs = _inputs(doc)
    where = f", {path}" if path is not None else ""
    return (
        f"<Run {run_id} {inputs.get('context', '?')}: {case_count(doc)} cases, "
        f"{inputs.get('mode', '?')}, gate {gate_verdict(doc)}{where}>"
    )


def key_metrics(metrics: pl.DataFrame) -> pl.DataFrame:
    """``metric`` (with its direction arrow), ``value`` (mean or value), ``n`` for
    :data:`KEY_METRICS`, in that order."""
    order = {name: index for index, name in enumerate(KEY_METRICS)}
    rows = metrics.filter(pl.col("metric").is_in(list(KEY_METRICS))).with_columns(scalar_expr())
    return rows.sort(pl.col("metric").replace_strict(order, return_dtype=pl.Int64)).select(
        pl.col("metric").map_elements(
            lambda name: f"{name} {arrow_of(name)}".rstrip(), return_dtype=pl.String
        ),
        pl.col("scalar").alias("value"),
        "n",
    )


def run_html(run_id: str, doc: Mapping[str, Any], metrics: pl.DataFrame) -> str:
    """The compact HTML summary of a run."""
    inputs = _inputs(doc)
    pairs: list[tuple[str, object]] = [
        ("run", run_id),
        ("context", inputs.get("context")),
        ("generated_at", doc.get("generated_at")),
        ("cases", case_count(doc)),
        ("mode", inputs.get("mode")),
        ("gate", gate_verdict(doc)),
    ]
    return render(
        "display_run.html.j2",
        items=pairs_data(pairs),
        metrics=table_data(
            key_metrics(metrics), caption="key metrics (mean or value; ↑ higher is better)"
        ),
    )
