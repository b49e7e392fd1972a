"""A finished run as an MLflow run: params, metrics, tags and artifacts.

:func:`log_run` writes one MLflow run into an experiment (``taguru_eval`` unless
``MLFLOW_EXPERIMENT_NAME`` or ``experiment=`` says otherwise) on the tracking
server MLflow's own settings name (``MLFLOW_TRACKING_URI``, else ``./mlruns``):

* params: what the run was — context, mode, budget, the eval set's name, case
  count and SHA-256, the corpus revisions before and after, and the thresholds'
  SHA-256 when it was gated;
* metrics: every aggregate metric by its catalog name (the scalar the gate and
  compare read: a distribution's mean, a ratio's or count's value), a
  distribution's quantiles as ``<name>.min`` … ``<name>.max``; with a
  comparison, each metric's delta and the count of cases of each kind, and with
  its significance tests each metric's adjusted p-value;
* tags: the gate's verdict, the package version, the run id, the context, and
  with significance tests each metric's verdict;
* artifacts: evaluation.json, and the Markdown summary and HTML report when given.

Only names, numbers, ids and revisions are logged: never a query, a served text,
the server's URL or a token. docs/mlflow.md lists every key. Needs the
``mlflow`` extra (``pip install 'taguru_eval[mlflow]'``, MLflow's tracking client
``mlflow-skinny``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from taguru_eval._base.files import file_sha256
from taguru_eval._base.redact import Redactor
from taguru_eval.api import Run
from taguru_eval.artifact.document import WrittenDocument
from taguru_eval.catalog import scalar_expr
from taguru_eval.compare.report import Comparison
from taguru_eval.compare.significance import Significance
from taguru_eval.contract import VERSION

DEFAULT_EXPERIMENT: Final = "taguru_eval"
EXPERIMENT_ENV: Final = "MLFLOW_EXPERIMENT_NAME"

QUANTILES: Final = ("min", "p50", "p90", "p99", "max")
"""A distribution's fields logged beside its scalar, as ``<metric>.<field>``."""

GATE_PASSED, GATE_FAILED, GATE_REPORT_ONLY = "passed", "failed", "report-only"

_BATCH: Final = {"metrics": 1000, "params": 100, "tags": 100}
"""MLflow's per-call limits of ``log_batch``."""


def log_run(
    run: Run,
    *,
    experiment: str | None = None,
    tracking_uri: str | None = None,
    artifact: str | os.PathLike[str] | None = None,
    summary: str | os.PathLike[str] | None = None,
    report: str | os.PathLike[str] | None = None,
    comparison: Comparison | None = None,
    significance: Significance | None = None,
    eval_sha256: str | None = None,
    run_name: str | None = None,
) -> str:
    """Log ``run`` as one finished MLflow run; returns its MLflow run id.

    ``artifact`` is the evaluation.json to attach (default: the file the run
    wrote, when the run knows it); ``summary`` and ``report`` are a
    ``--summary`` Markdown file and a ``report`` HTML file to attach.
    ``comparison`` (:func:`taguru_eval.compare`, BASE against this run) adds
    compare's deltas and case counts, ``significance``
    (:func:`taguru_eval.significance` of it) each metric's verdict.
    ``eval_sha256`` defaults to the SHA-256 of ``inputs.eval.path`` when that
    file can be read. MLflow's own errors (an unreachable server, a bad URI)
    propagate; the command line's ``--mlflow`` turns them into one warning.
    """
    doc = run.doc
    client = MlflowClient(tracking_uri=tracking_uri)
    name = experiment or os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
    created = client.create_run(experiment_id, run_name=run_name or run.run_id)
    run_id: str = created.info.run_id
    try:
        params = run_params(doc, eval_sha256)
        metrics = run_metrics(run.metrics)
        tags = run_tags(run)
        if comparison is not None:
            metrics |= comparison_metrics(comparison)
        if significance is not None:
            metrics |= significance_metrics(significance)
            tags |= significance_tags(significance)
        _log(client, run_id, params, metrics, tags)
        files = [artifact or _written(doc), summary, report]
        for path in files:
            if path is not None:
                client.log_artifact(run_id, os.fspath(path))
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


# ------------------------------------------------------------------ what is logged


def run_params(doc: Mapping[str, Any], eval_sha256: str | None = None) -> dict[str, str]:
    """The run's params (docs/mlflow.md): what was run, never what it found."""
    inputs = _mapping(doc.get("inputs"))
    eval_block = _mapping(inputs.get("eval"))
    corpus = _mapping(doc.get("corpus"))
    params: dict[str, object] = {
        "context": inputs.get("context"),
        "mode": inputs.get("mode"),
        "eval.name": eval_block.get("name"),
        "eval.cases": eval_block.get("cases"),
        "eval.sha256": eval_sha256 or _eval_sha256(eval_block.get("path")),
        "rerank": inputs.get("rerank"),
        "concurrency": inputs.get("concurrency"),
        "repeat": inputs.get("repeat"),
    }
    for key, value in _mapping(inputs.get("budget")).items():
        params[f"budget.{key}"] = value
    for side in ("revision_before", "revision_after"):
        for key, value in _mapping(corpus.get(side)).items():
            params[f"corpus.{side}.{key}"] = value
    thresholds = doc.get("thresholds")
    if isinstance(thresholds, Mapping):
        params["thresholds.sha256"] = thresholds.get("sha256")
    return {key: str(value) for key, value in params.items() if value is not None}


def run_metrics(metrics: pl.DataFrame) -> dict[str, float]:
    """Every aggregate metric's scalar by catalog name, and a distribution's quantiles."""
    frame = metrics.select(
        "metric", "statistic", scalar_expr().alias("scalar"), *(pl.col(q) for q in QUANTILES)
    ).unique("metric", keep="last", maintain_order=True)
    out: dict[str, float] = {}
    for row in frame.iter_rows(named=True):
        _put(out, row["metric"], row["scalar"])
        if row["statistic"] == "distribution":
            for field in QUANTILES:
                _put(out, f"{row['metric']}.{field}", row[field])
    return out


def comparison_metrics(comparison: Comparison) -> dict[str, float]:
    """``compare.<metric>.delta`` (HEAD - BASE) and ``compare.cases.<kind>`` counts."""
    out: dict[str, float] = {}
    for metric, delta in comparison.metrics.select("metric", "delta").iter_rows():
        _put(out, f"compare.{metric}.delta", delta)
    for kind, count in comparison.counts.items():
        _put(out, f"compare.cases.{kind}", count)
    return out


def _whole_run(significance: Significance) -> pl.DataFrame:
    frame = significance.frame
    return frame.filter(pl.col("tag").is_null()) if "tag" in frame.columns else frame


def significance_metrics(significance: Significance) -> dict[str, float]:
    """``compare.<metric>.p_adjusted`` of the whole run's paired test."""
    out: dict[str, float] = {}
    for metric, p_adjusted in _whole_run(significance).select("metric", "p_adjusted").iter_rows():
        _put(out, f"compare.{metric}.p_adjusted", p_adjusted)
    return out


def significance_tags(significance: Significance) -> dict[str, str]:
    """``compare.<metric>.verdict``: regressed, improved, no significant change, …"""
    return {
        f"compare.{metric}.verdict": str(verdict)
        for metric, verdict in _whole_run(significance).select("metric", "verdict").iter_rows()
        if verdict is not None
    }


def run_tags(run: Run) -> dict[str, str]:
    """The gate's verdict, the package version, the run's id and context."""
    block = run.doc.get("thresholds")
    verdict = GATE_REPORT_ONLY
    if isinstance(block, Mapping):
        verdict = GATE_PASSED if block.get("passed") is True else GATE_FAILED
    context = _mapping(run.doc.get("inputs")).get("context")
    return {
        "taguru_eval.gate": verdict,
        "taguru_eval.version": VERSION,
        "taguru_eval.run_id": run.run_id,
        "taguru_eval.context": str(context or ""),
    }


# ------------------------------------------------------------------ helpers


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _put(out: dict[str, float], key: str, value: object) -> None:
    """A finite number only: MLflow has no null, and NaN would read as a value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    if math.isfinite(value):
        out[key] = float(value)


def _eval_sha256(path: object) -> str | None:
    if not isinstance(path, str) or not Path(path).is_file():
        return None
    try:
        return file_sha256(path)
    except OSError:
        return None


def _written(doc: Mapping[str, Any]) -> Path | None:
    return doc.path if isinstance(doc, WrittenDocument) and doc.path.is_file() else None


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    return (items[start : start + size] for start in range(0, len(items), size))


def _log(
    client: MlflowClient,
    run_id: str,
    params: Mapping[str, str],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
) -> None:
    """Everything in as few ``log_batch`` calls as MLflow's limits allow."""
    stamp = _now_ms()
    metric_rows = [Metric(key, value, stamp, 0) for key, value in metrics.items()]
    param_rows = [Param(key, value) for key, value in params.items()]
    tag_rows = [RunTag(key, value) for key, value in tags.items()]
    for metric_chunk in _chunks(metric_rows, _BATCH["metrics"]):
        client.log_batch(run_id, metrics=list(metric_chunk))
    for param_chunk in _chunks(param_rows, _BATCH["params"]):
        client.log_batch(run_id, params=list(param_chunk))
    for tag_chunk in _chunks(tag_rows, _BATCH["tags"]):
        client.log_batch(run_id, tags=list(tag_chunk))


def _now_ms() -> int:
    return int(time.time() * 1000)


_REASON_CHARS: Final = 300


def tracking_failure(error: BaseException) -> str:
    """The one warning line of a run that could not be logged: where, and MLflow's
    first line on why, with any credential in either redacted."""
    import mlflow

    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 1] + "…"
    where = Redactor().message(mlflow.get_tracking_uri())
    return (
        f"MLflow logging to {where} failed: {Redactor().message(reason)}; "
        "the run's exit code is unchanged"
    )
