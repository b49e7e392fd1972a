"""Analyst frames over the run store: run index, metric history, per-case history.

The chart builders (:mod:`taguru_eval.charts`) never fetch data; this module is
where notebooks and the HTML report get the frames they hand to them. Table
data comes from one lazy hive-partitioned scan per table
(:func:`taguru_eval.store.scan_runs`); what only the artifact records (when a
run was made, the corpus revisions, the gate verdict) comes from the head of
each run's evaluation.json — everything before its ``cases`` array, a few
kilobytes whatever the number of cases, so a 100-run history of
10,000-case runs is indexed without decoding a gigabyte of case blocks.

A damaged run (an unreadable evaluation.json, a damaged table file) is left
out of every frame with a :class:`~taguru_eval.errors.DamagedRunWarning`
naming the file, so one bad run never hides the history of the others.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import polars as pl

from taguru_eval.artifact.codec import parse_artifact, read_artifact
from taguru_eval.catalog import CATALOG, Catalog, scalar_expr
from taguru_eval.compare.classify import budget_text
from taguru_eval.compare.load import Budget
from taguru_eval.compare.parquet import read_head
from taguru_eval.errors import InputError
from taguru_eval.inputs.thresholds import AGGREGATE_BOUNDS_SCHEMA, Thresholds, load_run_thresholds
from taguru_eval.store import (
    check_run,
    collect_runs,
    context_dir,
    list_runs,
    read_origin,
    require_store,
    run_dir,
    warn_damaged,
)
from taguru_eval.store_artifact import stored_artifact, stored_runs
from taguru_eval.tables.schemas import POPULATION_EVAL

DRIFT_METRICS: Final[tuple[str, ...]] = (
    "recall.recall_at_k",
    "recall.mrr",
    "recall.ndcg",
    "citations.recall",
    "citations.locator_validity",
    "coverage.concepts",
    "coverage.labels",
    "coverage.associations",
)
"""The metrics the drift view shows by default (the issue's list)."""


RUN_INDEX_SCHEMA: Final = pl.Schema(
    {
        "context": pl.String(),
        "run": pl.String(),
        "label": pl.String(),
        "generated_at": pl.String(),
        "mode": pl.String(),
        "cases": pl.Int64(),
        "eval_set": pl.String(),
        "eval_sha256": pl.String(),
        "budget": pl.String(),
        "revision": pl.String(),
        "revision_after": pl.String(),
        "stable": pl.Boolean(),
        "revision_changed": pl.Boolean(),
        "thresholds_passed": pl.Boolean(),
        "violations": pl.Int64(),
        "sha256": pl.String(),
        "server": pl.String(),
        "provider_model": pl.String(),
        "writer": pl.String(),
        "setup_changed": pl.List(pl.String()),
    }
)
"""``sha256`` is the thresholds file's (the gate block's); ``eval_set`` names the eval
set (``name (N cases)``) and ``eval_sha256`` is its digest where the run recorded one;
``server`` is the server the run read (its recorded URL's host and path, without
the port: a CI job's ``serve --port 0`` is the same server on another port each
time), ``provider_model`` the server's embedding model (null: none, or not read),
``writer`` the evaluator that stored the run (``run.json``: ``taguru_eval 0.1.0``);
``setup_changed`` lists what differs from the previous run (:data:`SETUP_FIELDS`)."""

SETUP_FIELDS: Final[tuple[tuple[str, pl.Expr], ...]] = (
    # A digest identifies an eval set when the run recorded one; else its name and size.
    ("eval set", pl.coalesce("eval_sha256", "eval_set")),
    ("mode", pl.col("mode")),
    ("budget", pl.col("budget")),
    ("thresholds", pl.col("sha256")),
    ("server", pl.col("server")),
    ("embedding provider", pl.col("provider_model")),
    ("evaluator version", pl.col("writer")),
)
"""What makes two runs' metrics comparable: a change of any between consecutive runs
is marked in the drift view (a no-thresholds run after a gated one is a change too)."""

_REVISION_KEYS: Final = ("graph", "passages", "config")

STORE_ENV: Final = "TAGURU_EVAL_STORE"
STORE_CANDIDATES: Final = ("../runs", "../demo-out/runs", "runs", "demo-out/runs")
"""Where a notebook looks for the run store when ``TAGURU_EVAL_STORE`` is unset:
the project's ``runs/`` and the demo's ``demo-out/runs`` (``python -m
taguru_eval demo``), seen from ``notebooks/`` and from the project root."""


def default_store(env: Mapping[str, str] | None = None) -> Path:
    """``$TAGURU_EVAL_STORE``, else the first existing of :data:`STORE_CANDIDATES`."""
    environment = os.environ if env is None else env
    given = environment.get(STORE_ENV)
    if given:
        return Path(given)
    for candidate in STORE_CANDIDATES:
        if Path(candidate).is_dir():
            return Path(candidate)
    return Path(STORE_CANDIDATES[0])


def revision_text(revision: object) -> str | None:
    """``graph/passages/config`` of a revision object, e.g. ``12/7/0``; None if absent."""
    if not isinstance(revision, Mapping):
        return None
    return "/".join(str(revision.get(key, "?")) for key in _REVISION_KEYS)


def pick_context(store_dir: str | Path, env: Mapping[str, str] | None = None) -> str:
    """``$TAGURU_EVAL_CONTEXT``, else the first context with a run in the store.

    An empty store is an :class:`InputError` that says how to make a history.
    """
    environment = os.environ if env is None else env
    given = environment.get("TAGURU_EVAL_CONTEXT")
    if given:
        return given
    contexts = list_runs(store_dir).get_column("context").to_list()
    if not contexts:
        raise InputError(
            f"no run in the run store {store_dir}; make a history first, e.g. "
            "'python -m taguru_eval demo --runs 5', or set TAGURU_EVAL_STORE",
            path=str(store_dir),
        )
    return str(contexts[0])


def pick_pair(
    runs: pl.DataFrame, context: str, env: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """BASE and HEAD of a comparison: ``$TAGURU_EVAL_BASE`` / ``$TAGURU_EVAL_HEAD``,
    else the two newest of ``runs`` (:func:`run_index`). Fewer than two runs is an
    :class:`InputError` saying what to run."""
    environment = os.environ if env is None else env
    ids = runs.get_column("run").to_list()
    base, head = environment.get("TAGURU_EVAL_BASE"), environment.get("TAGURU_EVAL_HEAD")
    if (base is None or head is None) and len(ids) < 2:
        raise InputError(
            f"a comparison needs two stored runs of context '{context}' and the store has "
            f"{len(ids)}: run 'python -m taguru_eval demo' (it stores three) or evaluate "
            "the context once more",
        )
    return base or ids[-2], head or ids[-1]


def run_summary(
    context: str, run: str, document: Mapping[str, Any], *, writer: str | None = None
) -> dict[str, object]:
    """One run-index row from a run's evaluation.json (every field defaulted);
    ``writer`` is its ``run.json``'s, when the store recorded one."""
    inputs = document.get("inputs")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    corpus = document.get("corpus")
    corpus = corpus if isinstance(corpus, Mapping) else {}
    gate = document.get("thresholds")
    gate = gate if isinstance(gate, Mapping) else None
    violations = gate.get("violations") if gate is not None else None
    stable = corpus.get("stable")
    generated_at = str(document.get("generated_at", "")) or None
    evalset = inputs.get("eval")
    evalset = evalset if isinstance(evalset, Mapping) else {}
    digest = evalset.get("sha256")
    cases = case_count(document)
    return {
        "context": context,
        "run": run,
        "label": run_label(run, generated_at),
        "generated_at": generated_at,
        "mode": inputs.get("mode") if isinstance(inputs.get("mode"), str) else None,
        "cases": cases,
        "eval_set": f"{evalset.get('name') or evalset.get('path') or '?'} ({cases} cases)",
        "eval_sha256": digest if isinstance(digest, str) else None,
        "budget": budget_text(budget_of(inputs)),
        "revision": revision_text(corpus.get("revision_before")),
        "revision_after": revision_text(corpus.get("revision_after")),
        "stable": stable if isinstance(stable, bool) else None,
        "thresholds_passed": gate.get("passed") if gate is not None else None,
        "violations": len(violations) if isinstance(violations, list) else 0,
        "sha256": gate.get("sha256") if gate is not None else None,
        "server": server_of(inputs.get("url")),
        "provider_model": _provider_model(corpus),
        "writer": writer,
    }


def server_of(url: object) -> str | None:
    """The server a recorded (masked) URL names: its host and path, without the
    scheme or the port (``http://127.0.0.1:41231/api`` is ``127.0.0.1/api``), so a
    run index printed in a notebook holds no link to follow."""
    if not isinstance(url, str) or not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    return (f"[{host}]" if ":" in host else host) + parts.path.rstrip("/")


def _provider_model(corpus: Mapping[str, Any]) -> str | None:
    embeddings = corpus.get("embeddings")
    model = embeddings.get("provider_model") if isinstance(embeddings, Mapping) else None
    return model if isinstance(model, str) else None


def budget_of(inputs: Mapping[str, Any]) -> Budget | None:
    """``inputs.budget`` as compare reads it: the three limits, or None."""
    budget = inputs.get("budget")
    if not isinstance(budget, Mapping):
        return None
    items, size, tokens = (budget.get(key) for key in ("max_items", "max_bytes", "max_tokens"))
    if not (isinstance(items, int) and isinstance(size, int) and isinstance(tokens, int)):
        return None
    return items, size, tokens


def case_count(document: Mapping[str, Any]) -> int | None:
    """The run's number of cases: ``inputs.eval.cases``, else the length of its
    ``cases`` array (read second: a run's document reads its cases from disk)."""
    inputs = document.get("inputs")
    evalset = inputs.get("eval") if isinstance(inputs, Mapping) else None
    count = evalset.get("cases") if isinstance(evalset, Mapping) else None
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    cases = document.get("cases")
    return len(cases) if isinstance(cases, list) else None


def run_label(run: str, generated_at: str | None) -> str:
    """A run as a reader names it: ``2026-07-28 10:00 · 3f9a1c`` (time, short id).

    The short id is the first six characters after the run id's last ``-``
    (the random or digest suffix of :func:`taguru_eval.store.new_run_id` and
    ingest's ids); a run without a timestamp shows its id alone.
    """
    _, dash, suffix = run.rpartition("-")
    short = suffix[:6] if dash and suffix else run[:12]
    if not generated_at or len(generated_at) < 16:
        return run
    return f"{generated_at[:10]} {generated_at[11:16]} · {short}"


def read_run_head(directory: str | Path) -> dict[str, Any]:
    """A stored run's evaluation.json without its ``cases`` (the whole file when
    its head cannot be cut safely, see :func:`taguru_eval.compare.parquet.head_of`)."""
    artifact = stored_artifact(directory)
    head = read_head(artifact, str(artifact))
    if head is None:
        return read_artifact(artifact)
    return parse_artifact(head.decode("utf-8"), str(artifact))


def _unique_labels(frame: pl.DataFrame) -> pl.DataFrame:
    """Two runs with the same minute and short id (rare) fall back to their full ids."""
    clash = pl.col("label").is_duplicated()
    return frame.with_columns(
        pl.when(clash).then(pl.col("run")).otherwise(pl.col("label")).alias("label")
    )


def run_index(store_dir: str | Path, context: str) -> pl.DataFrame:
    """One row per stored run of ``context``, oldest first (RUN_INDEX_SCHEMA).

    ``revision`` is the corpus revision the run started from;
    ``revision_changed`` is true when it differs from the previous run's (the
    corpus was written between the two runs) — the first run is never a change;
    ``setup_changed`` likewise names what of :data:`SETUP_FIELDS` differs.
    A damaged run — its evaluation.json, its ``run.json`` or the footer of its
    ``cases`` or ``metrics`` table cannot be read — is left out with a
    :class:`~taguru_eval.errors.DamagedRunWarning` naming the file, and so out
    of every frame joined to the index; a store that does not exist is an
    :class:`InputError`.
    """
    rows: list[dict[str, object]] = []
    require_store(store_dir)
    for directory in stored_runs(context_dir(store_dir, context), "run=*"):
        run = directory.name.removeprefix("run=")
        try:
            head = read_run_head(directory)
            check_run(directory)
            origin = read_origin(directory)
        except InputError as error:
            warn_damaged(error)
            continue
        rows.append(
            run_summary(context, run, head, writer=None if origin is None else origin.writer)
        )
    derived = {"revision_changed", "setup_changed"}
    columns = [name for name in RUN_INDEX_SCHEMA.names() if name not in derived]
    frame = pl.DataFrame(
        rows, schema={name: RUN_INDEX_SCHEMA[name] for name in columns}, orient="row"
    )
    return (
        _unique_labels(order_runs(frame))
        .with_columns(
            (pl.col("revision") != pl.col("revision").shift(1))
            .fill_null(False)
            .alias("revision_changed"),
            setup_changes(),
        )
        .select(RUN_INDEX_SCHEMA.names())
    )


def setup_changes() -> pl.Expr:
    """``setup_changed``: the names of :data:`SETUP_FIELDS` whose value differs from the
    previous row's (null against a value differs; the first row changes nothing)."""
    later = pl.int_range(pl.len()) > 0
    return (
        pl.concat_list(
            pl.when(later & value.ne_missing(value.shift(1))).then(pl.lit(name))
            for name, value in SETUP_FIELDS
        )
        .list.drop_nulls()
        .alias("setup_changed")
    )


def order_runs(frame: pl.DataFrame) -> pl.DataFrame:
    """Runs in time order: by ``generated_at``, then corpus revision, then run id.

    ``generated_at`` has whole seconds, so quick successive runs tie; a
    context's revision counters only grow, so their sum orders such runs the
    way they happened (the run id's suffix is random and cannot).
    """
    total = (
        pl.col("revision")
        .str.split("/")
        .list.eval(pl.element().cast(pl.Int64, strict=False))
        .list.sum()
        .alias("_revision_total")
    )
    ordered = frame.with_columns(total).sort(
        ["generated_at", "_revision_total", "run"], nulls_last=False
    )
    return ordered.drop("_revision_total")


def metric_history(
    store_dir: str | Path, context: str, runs: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Every stored run's aggregate metrics as one long frame, oldest run first.

    Columns: ``run``, ``generated_at``, ``revision``, ``metric``, ``statistic``,
    ``n``, ``scalar`` (mean or value) plus the distribution's ``p50``/``p90``.
    ``runs`` is the context's :func:`run_index` when the caller has it already.
    """
    runs = run_index(store_dir, context) if runs is None else runs
    metrics = collect_runs(
        store_dir,
        "metrics",
        lambda scan: scan.select("run", "metric", "statistic", "n", scalar_expr(), "p50", "p90"),
        run_dirs=run_dirs(store_dir, context, runs),
    )
    return attach_runs(metrics, runs)


def case_history(
    store_dir: str | Path,
    context: str,
    columns: Sequence[str] | None = None,
    runs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Every stored run's per-case metrics (the ``cases`` table), oldest run first.

    ``columns`` (``cases`` column names) reads only those besides ``run`` and
    ``case_id``: a 100-run history of 10,000-case runs is a million rows, and
    the ``missed`` lists alone would take most of the memory. ``runs`` is the
    context's :func:`run_index` when the caller has it already.
    """
    runs = run_index(store_dir, context) if runs is None else runs

    def query(scan: pl.LazyFrame) -> pl.LazyFrame:
        return scan if columns is None else scan.select("run", "case_index", "case_id", *columns)

    cases = collect_runs(store_dir, "cases", query, run_dirs=run_dirs(store_dir, context, runs))
    return attach_runs(cases, runs)


def run_dirs(store_dir: str | Path, context: str, runs: pl.DataFrame) -> list[Path]:
    """The stored run directories of a run index's rows, in its order."""
    return [run_dir(store_dir, context, run) for run in runs.get_column("run").to_list()]


def attach_runs(frame: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Join a per-run table with the run index and add ``run_order`` (0 = oldest)."""
    ordered = runs.select("run", "label", "generated_at", "revision").with_row_index("run_order")
    joined = frame.join(ordered, on="run", how="inner")
    return joined.sort(["run_order"], maintain_order=True)


def case_metric_columns(catalog: Catalog = CATALOG) -> dict[str, str]:
    """Case-scoped metric -> its ``cases`` column, in the catalog's order."""
    return {metric: catalog.per_case[metric].column for metric in catalog.case_scoped}


def case_metric_long(cases: pl.DataFrame, metric: str, catalog: Catalog = CATALOG) -> pl.DataFrame:
    """``run``, ``label``, ``run_order``, ``case_id``, ``value`` for one per-case metric."""
    case_field = catalog.per_case.get(metric)
    if case_field is None:
        known = ", ".join(catalog.per_case)
        raise ValueError(f"'{metric}' is not a per-case metric (one of: {known})")
    labels = ["label"] if "label" in cases.columns else []
    return cases.select(
        "run",
        *labels,
        "run_order",
        "case_id",
        pl.col(case_field.column).cast(pl.Float64).alias("value"),
    )


def bounds_frame(thresholds: Thresholds | None) -> pl.DataFrame:
    """``metric``, ``bound`` (min/max), ``threshold`` from a thresholds file's ``aggregate``.

    The gate compares the aggregate scalar (mean / value) with these bounds, so
    they are drawn on the same axis as the drift lines.
    """
    if thresholds is None:
        return pl.DataFrame(schema=AGGREGATE_BOUNDS_SCHEMA)
    return thresholds.aggregate_bounds


def read_thresholds(
    path: str | Path,
    case_ids: Collection[str] | None = None,
    *,
    must_refuse: bool = False,
    answers: bool = False,
    repeat: bool = False,
) -> Thresholds:
    """A thresholds file, for :func:`bounds_frame`, read and checked as run mode does.

    Bounds drawn from a file the gate would refuse would be a picture of no
    gate, so the file goes through run mode's loader (same checks, same
    messages, :class:`InputError` exit 2). ``case_ids`` are the run's eval
    cases, against which ``cases.overrides`` is checked; ``None`` (a context's
    history, no one eval set) leaves the overrides' case ids unchecked.
    ``must_refuse``: the run was given ``--must-refuse``, so the abstention
    metrics may be bounded; ``answers``: it was given ``--answers`` (``answers.*``);
    ``repeat``: it was given ``--repeat`` N > 1 (``stability.*``).
    """
    return load_run_thresholds(
        path, case_ids, must_refuse=must_refuse, answers=answers, repeat=repeat
    )


def latency_samples(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """``lane``, ``latency_ms`` for every call of one run, from its lane tables.

    Built from the tables the artifact carries (not ``calls``), so runs
    imported from a taguru evaluation.json chart the same way.
    """
    parts: list[pl.DataFrame] = []
    schema = {"lane": pl.String, "latency_ms": pl.Int64}

    def add(frame: pl.DataFrame | None, lane: str, column: str) -> None:
        if frame is None or column not in frame.columns:
            return
        parts.append(
            frame.filter(pl.col(column).is_not_null()).select(
                pl.lit(lane).alias("lane"), pl.col(column).cast(pl.Int64).alias("latency_ms")
            )
        )

    add(tables.get("case_lanes"), "passage", "passage_latency_ms")
    resolutions = tables.get("resolutions")
    if resolutions is not None and "population" in resolutions.columns:
        # The latency.* metrics are the eval cases'; must-refuse cue probes share the table.
        resolutions = resolutions.filter(
            pl.col("population").fill_null(POPULATION_EVAL) == POPULATION_EVAL
        )
    if resolutions is not None and resolutions.height:
        # One row per resolved name: keep one latency per cue.
        add(resolutions.unique(["case_index", "cue_index"], keep="first"), "resolve", "latency_ms")
    probes = tables.get("probes")
    for position in ("subject", "label", "object"):
        add(probes, "resolve", f"{position}_latency_ms")
    add(probes, "query", "query_latency_ms")
    add(tables.get("citation_checks"), "citation", "latency_ms")
    add(tables.get("case_lanes"), "evidence", "evidence_latency_ms")
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).cast(schema)  # type: ignore[arg-type]


def misses(cases: pl.DataFrame) -> pl.DataFrame:
    """``case_id``, ``missed`` (one row per missed item), ``missed_truncated``."""
    return (
        cases.filter(pl.col("missed").list.len() > 0)
        .select("case_index", "case_id", "missed", "missed_truncated")
        .explode("missed")
        .sort("case_index", maintain_order=True)
        .drop("case_index")
    )


def lane_crosstab(cases: pl.DataFrame) -> pl.DataFrame:
    """Cases counted by (structural_hit, passage_hit) — the lane cross-tab (§4.8)."""
    return (
        cases.filter(
            pl.col("lane_cross_structural_hit").is_not_null()
            | pl.col("lane_cross_passage_hit").is_not_null()
        )
        .group_by("lane_cross_structural_hit", "lane_cross_passage_hit")
        .len("cases")
        .sort("lane_cross_structural_hit", "lane_cross_passage_hit")
    )
