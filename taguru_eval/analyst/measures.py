"""Any ir_measures measure over a run, computed by ir_measures itself.

``measures(run, "AP", "P@5", "nDCG@10")`` exports the run as
:mod:`taguru_eval.analyst.export` does (``wildcards="taguru"`` by default, so
``SetR``, ``RR`` and ``nDCG`` are taguru's own recall@k, MRR and nDCG), hands the
mappings to ``ir_measures.iter_calc`` and returns one row per case × measure.
A case ir_measures is given qrels for but no hit (a searched case served
nothing) gets the measure's own default from ir_measures (0 for most), as
trec_eval's ``-c`` does; a case with no judged expectation is no query.

ir_measures is imported here, inside the functions, through the ``ir`` extra
(:func:`taguru_eval._base.extras.load_extra`): no other command pays for it,
and a missing install is one line naming the extra.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

import polars as pl

from taguru_eval._base.extras import load_extra
from taguru_eval.analyst.export import (
    WILDCARDS_TAGURU,
    eval_source,
    qrels_mapping,
    run_mapping,
    trec_frames,
)
from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.tables.schemas import RunTables

PER_CASE_SCHEMA: Final = {"case_id": pl.String, "measure": pl.String, "value": pl.Float64}
"""The per-case frame: one row per case × measure."""

AGGREGATE_SCHEMA: Final = {"measure": pl.String, "mean": pl.Float64, "n": pl.Int64}
"""The aggregate frame: one row per measure."""


def _ir_measures() -> Any:
    return load_extra("ir", "ir_measures")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def parse_measures(names: Sequence[str]) -> list[Any]:
    """ir_measures' measure objects for ``names`` (``AP``, ``P@5``, ``nDCG(dcg='log2')@10``).

    A name ir_measures cannot parse, with a parameter it rejects or that no
    installed provider computes is an :class:`InputError` naming it.
    """
    ir_measures = _ir_measures()
    parsed: list[Any] = []
    for name in names:
        try:
            measure = ir_measures.parse_measure(name)
        except (ValueError, NameError, KeyError, TypeError, SyntaxError) as exc:
            raise InputError(
                f"measure '{name}': ir_measures cannot parse it ({_first_line(exc)})"
            ) from None
        missing = [
            param
            for param, info in measure.SUPPORTED_PARAMS.items()
            if info.required and param not in measure.params
        ]
        if missing:
            hint = f" (write {name}@k)" if missing == [measure.AT_PARAM] else ""
            raise InputError(f"measure '{name}' needs its {', '.join(missing)} parameter{hint}")
        try:
            measure.validate_params()
        except AssertionError as exc:
            raise InputError(f"measure '{name}': {exc}") from None
        if not ir_measures.DefaultPipeline.supports(measure):
            raise InputError(f"measure '{name}': {_unsupported(ir_measures, measure)}")
        parsed.append(measure)
    return parsed


def _unsupported(ir_measures: Any, measure: Any) -> str:
    """Why no provider computes ``measure``, naming the ones that would once installed."""
    would = [
        f"{provider.NAME} ({provider.install_instructions()})"
        if provider.install_instructions()
        else provider.NAME
        for provider in ir_measures.DefaultPipeline.providers
        if provider.supports(measure) and not provider.is_available()
    ]
    if would:
        return f"no installed ir_measures provider computes it; {', '.join(would)} would"
    return "no ir_measures provider computes it"


def measures(
    doc: Mapping[str, Any],
    tables: RunTables,
    *names: str,
    eval_path: str | os.PathLike[str] | None = None,
    wildcards: str = WILDCARDS_TAGURU,
) -> pl.DataFrame:
    """``case_id, measure, value``: each of ``names`` for every judged case, by ir_measures.

    ``doc`` and ``tables`` are a loaded run's artifact and lane tables
    (:func:`taguru_eval.measures` takes a run or its path); the qrels come from
    ``eval_path``, else the eval.jsonl the run recorded. ``measure`` is
    ir_measures' own spelling of the measure. Rows are in case order (the eval
    set's), then in the order ``names`` gives. Raises :class:`InputError` for a
    measure ir_measures cannot take or fails on.
    """
    if not names:
        raise InputError("no measure given: name at least one (AP, P@5, nDCG@10, …)")
    parsed = parse_measures(names)
    expected = load_eval(eval_source(doc, eval_path)).expected
    frames = trec_frames(expected, tables, wildcards)
    qrels, ranked = qrels_mapping(frames.qrels), run_mapping(frames.run)
    ir_measures = _ir_measures()
    try:
        metrics = list(ir_measures.iter_calc(parsed, qrels, ranked))
    except Exception as exc:  # a provider's own failure, of any type
        raise InputError(_calc_failure(ir_measures, parsed, qrels, ranked, exc)) from None
    order = {case_id: position for position, case_id in enumerate(qrels)}
    rank = {str(measure): position for position, measure in enumerate(parsed)}
    frame = pl.DataFrame(
        {
            "case_id": [metric.query_id for metric in metrics],
            "measure": [str(metric.measure) for metric in metrics],
            "value": [float(metric.value) for metric in metrics],
        },
        schema=PER_CASE_SCHEMA,
    )
    return (
        frame.with_columns(
            pl.col("case_id").replace_strict(order, default=len(order)).alias("__case"),
            pl.col("measure").replace_strict(rank, default=len(rank)).alias("__measure"),
        )
        .sort("__case", "__measure", maintain_order=True)
        .drop("__case", "__measure")
    )


def _calc_failure(
    ir_measures: Any,
    parsed: Sequence[Any],
    qrels: dict[str, dict[str, int]],
    ranked: dict[str, dict[str, float]],
    exc: Exception,
) -> str:
    """The line naming the measure a provider failed on (each is retried alone to find it)."""
    for measure in parsed:
        try:
            list(ir_measures.iter_calc([measure], qrels, ranked))
        except Exception as alone:
            return f"measure '{measure}': ir_measures failed on it ({_first_line(alone)})"
    return f"ir_measures failed ({_first_line(exc)})"


def aggregate(per_case: pl.DataFrame) -> pl.DataFrame:
    """``measure, mean, n``: the mean of each measure over its cases (first-seen order).

    The mean of the per-case values, for every measure alike (ir_measures'
    own aggregate sums ``NumQ``, ``NumRel`` and ``NumRet`` instead).
    """
    return per_case.group_by("measure", maintain_order=True).agg(
        pl.col("value").mean().alias("mean"), pl.len().cast(pl.Int64).alias("n")
    )
