"""The library API: run an evaluation, or load one, and get Polars frames back.

    import taguru_eval
    run = taguru_eval.run("eval.jsonl", "sake", url="http://127.0.0.1:8248")
    run.cases          # one row per case, every per-case metric a column
    run.metrics        # one row per aggregate metric
    run.tables.hits    # any lane table (calls, hits, resolutions, …)
    run.refusal_cases  # with must_refuse=…: one row per must-refuse case and its verdicts
    old = taguru_eval.load_run("runs/context=sake/run=…")   # or any evaluation.json
    everything = taguru_eval.scan_runs("runs", "metrics")    # one lazy scan over all runs

Works inside Jupyter: when an event loop is already running, the run gets
its own loop on a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import os
import sys
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from taguru_eval.analyst import display, slices
from taguru_eval.analyst.export import WILDCARDS_DROP, qrels_mapping, run_mapping, trec_frames
from taguru_eval.artifact.codec import read_artifact
from taguru_eval.artifact.read import load_artifact
from taguru_eval.contract import ARTIFACT_NAME
from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_OUT,
    DEFAULT_REPEAT,
    RunOptions,
)
from taguru_eval.pipeline import execute_async
from taguru_eval.pipeline.finish import RunResult
from taguru_eval.run import loop
from taguru_eval.run.console import CaseProgress, Console, Progress
from taguru_eval.store import read_origin, read_tables, require_tables, scan_runs
from taguru_eval.store_artifact import not_a_run_hint, stored_artifact
from taguru_eval.tables.schemas import TABLE, RunTables, conform

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

__all__ = ["Run", "load_run", "run", "scan_runs", "to_ir_measures"]


@dataclass(frozen=True)
class Run:
    """One run as frames: the lane tables, the per-case frame, the metrics frame.

    ``doc`` is the evaluation.json document (a run's reads its ``cases`` back
    from the written file when first asked for); ``exit_code`` is the code the CLI
    would have returned (None for a loaded run); ``output`` holds the console
    lines a library run did not print. ``refusal_cases`` is one row per
    must-refuse case with its verdicts (empty for a run without one).
    """

    run_id: str
    doc: Mapping[str, Any]
    tables: RunTables
    cases: pl.DataFrame
    metrics: pl.DataFrame
    exit_code: int | None = None
    path: Path | None = None
    output: list[str] = field(default_factory=list)
    refusal_cases: pl.DataFrame = field(default_factory=TABLE["refusal_cases"].empty)

    def __repr__(self) -> str:
        return display.run_repr(self.run_id, self.doc, self.path)

    def _repr_html_(self) -> str:
        return display.run_html(self.run_id, self.doc, self.metrics)

    def tag_slices(self) -> pl.DataFrame | None:
        """The main metrics per ``options.tags`` tag (:func:`.analyst.slices.tag_slices`);
        None when the run did not record tags (read from an evaluation.json)."""
        tags = slices.case_tags(self.tables.case_lanes)
        return None if tags is None else slices.tag_slices(self.cases, tags)

    @property
    def metric_values(self) -> dict[str, Any]:
        """The artifact's ``metrics`` map (name -> Distribution / Ratio)."""
        metrics = self.doc.get("metrics") or {}
        return dict(metrics) if isinstance(metrics, Mapping) else {}

    def table(self, name: str) -> pl.DataFrame:
        """Any table by name: a lane table, ``cases``, ``metrics`` or ``refusal_cases``."""
        frames = {
            **self.tables.frames(),
            "cases": self.cases,
            "metrics": self.metrics,
            "refusal_cases": self.refusal_cases,
        }
        if name not in frames:
            raise KeyError(f"no table '{name}' (have: {', '.join(frames)})")
        return frames[name]


def _run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on a loop of its own (:mod:`taguru_eval.run.loop`), on a worker
    thread when the caller's thread already runs one (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return loop.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(loop.run, coroutine).result()


def run(
    eval_path: str | os.PathLike[str],
    context: str,
    *,
    url: str | None = None,
    config: str | None = None,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    thresholds: str | os.PathLike[str] | None = None,
    assembly: bool = False,
    max_items: int | None = None,
    max_bytes: int | None = None,
    max_tokens: int | None = None,
    rerank: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    store: str | os.PathLike[str] | None = None,
    no_store: bool = False,
    env: Mapping[str, str] | None = None,
    verbose: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
    progress: bool | Progress = False,
    must_refuse: str | os.PathLike[str] | None = None,
    refusal_rule: str | None = None,
    resume: bool = False,
    answers: str | os.PathLike[str] | None = None,
    answer_match: str | None = None,
    repeat: int = DEFAULT_REPEAT,
    sample: int | None = None,
    seed: int | None = None,
    filters: str | Sequence[str] = (),
    tags: str | Sequence[str] = (),
    failing: str | os.PathLike[str] | None = None,
) -> Run:
    """Evaluate ``context`` with ``eval_path`` exactly as the CLI run mode does.

    Writes ``out`` (default ``evaluation.json`` in the working directory) and,
    unless ``no_store``, the run into the Parquet store (``store``, default
    ``runs/`` in the working directory); a store that cannot be written is a
    ``StoreWriteWarning`` and ``Run.path`` is ``None``. ``must_refuse`` is the
    ``--must-refuse`` file and ``refusal_rule`` its ``--refusal-rule``
    (``"semantic"``, the default, or ``"any"``; only with a must-refuse file).
    Arguments the command line would refuse (a count below 1, ``rerank``
    without ``assembly``, a rule without a must-refuse file, ``store`` with
    ``no_store``) raise the ``UsageError`` it reports, which names the flag;
    a bad input file raises ``InputError``; an incomplete run raises
    ``RunError``. ``verbose`` prints the console lines; otherwise they are in
    ``Run.output``. ``progress`` is off by default (a notebook stays quiet):
    ``True`` shows the CLI's display on stderr (a bar on a terminal, a line
    every few seconds elsewhere), or pass any ``(done, total)`` callable.
    ``assembly``, ``max_*`` and ``rerank`` are ``--assembly``, ``--max-*`` and
    ``--rerank``; ``resume`` is ``--resume`` (continue the newest unfinished run
    of ``context`` in the store; one that differs raises ``InputError``).
    ``answers`` is the ``--answers`` file and ``answer_match`` its
    ``--answer-match`` (``"normalized"``, the default, or ``"tokens"``).
    ``repeat`` is ``--repeat``: every eval case is sent that many times, its
    metrics are its first repetition's, and ``Run.cases`` gains the
    ``stability_*`` columns (a case whose compared metrics differ across its
    repetitions is ``stability_unstable``); ``Run.tables.calls`` holds every
    repetition's calls (its ``repeat`` column). ``sample``, ``seed``,
    ``filters``, ``tags`` and ``failing`` are ``--sample``, ``--seed``, each
    ``--filter``, each ``--tag`` and ``--failing`` (docs/subsets.md): only the
    selected eval cases run, and ``Run.doc["inputs"]["selection"]`` says which.
    """
    # Every keyword that names a RunOptions field (``store`` is ``--store``'s) is read
    # as its flag reads it (:data:`~taguru_eval.options.RUN_FLAGS`).
    options = RunOptions.from_keywords(locals())
    captured = io.StringIO()
    console = Console() if verbose else Console(stdout=captured, stderr=captured)
    prepared = prepare_run(options, env, stderr=console.err)
    display: Progress | None = CaseProgress(sys.stderr) if progress is True else progress or None
    try:
        result = _run_coroutine(
            execute_async(prepared, console=console, transport=transport, progress=display)
        )
    finally:
        if isinstance(display, CaseProgress):
            display.close()
    return from_result(result, captured.getvalue().splitlines())


def from_result(result: RunResult, output: list[str] | None = None) -> Run:
    """The :class:`Run` of a finished pipeline run (what the command line hands
    to the integrations of :mod:`taguru_eval.integrations`)."""
    return Run(
        run_id=result.run_id,
        doc=result.doc,
        tables=result.tables,
        cases=result.scores.cases,
        metrics=result.scores.metrics_frame,
        exit_code=result.exit_code,
        path=result.store_path,
        output=output or [],
        refusal_cases=result.scores.refusal_cases,
    )


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read a stored run directory, or any evaluation.json (ours or taguru's).

    A store directory's Parquet files are read as written; a bare
    evaluation.json is rebuilt into the same frames through the artifact reader.
    A damaged file — truncated, garbage, a column or field of the wrong type —
    is an :class:`InputError` naming it (``error.path``).
    """
    target = Path(path)
    if target.is_dir():
        return _load_stored(target)
    loaded = load_artifact(target)
    return Run(
        run_id=loaded.tables.run_id,
        doc=loaded.doc,
        tables=loaded.tables,
        cases=loaded.scores.cases,
        metrics=loaded.scores.metrics_frame,
        path=target,
        refusal_cases=loaded.scores.refusal_cases,
    )


def _load_stored(directory: Path) -> Run:
    artifact = stored_artifact(directory)
    if not artifact.is_file():
        raise InputError(
            f"{directory}: not a stored run (no {ARTIFACT_NAME})",
            path=str(directory),
            hint=not_a_run_hint(directory),
        )
    doc = read_artifact(artifact)
    read_origin(directory)  # a damaged run.json is an error here, as any damaged file is
    require_tables(directory)  # a lost hits.parquet must not read as a run that served nothing
    frames = read_tables(directory)
    run_id = directory.name.removeprefix("run=")

    def scored(name: str) -> pl.DataFrame:
        spec = TABLE[name]
        return conform(frames[name], spec.polars) if name in frames else spec.empty()

    return Run(
        run_id=run_id,
        doc=doc,
        tables=RunTables.from_frames(run_id, frames),
        cases=scored("cases"),
        metrics=scored("metrics"),
        path=directory,
        refusal_cases=scored("refusal_cases"),
    )


def measures(
    run: Run | str | os.PathLike[str],
    *names: str,
    eval_path: str | os.PathLike[str] | None = None,
    wildcards: str = "taguru",
) -> pl.DataFrame:
    """``case_id, measure, value``: ir_measures' ``names`` (``AP``, ``P@5``, ``nDCG@5``, …)
    for every judged case of ``run`` (a :class:`Run`, a stored run directory or an
    evaluation.json), computed by ir_measures itself on the files ``export --trec``
    writes (:func:`taguru_eval.analyst.measures.measures`; the ``ir`` extra).
    ``analyst.measures.aggregate`` of it is ``measures``' printed table."""
    from taguru_eval.analyst.measures import measures as measures_of

    loaded = run if isinstance(run, Run) else load_run(run)
    return measures_of(loaded.doc, loaded.tables, *names, eval_path=eval_path, wildcards=wildcards)


def to_ir_measures(
    run: Run, eval_path: str | os.PathLike[str], *, wildcards: str = WILDCARDS_DROP
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """``(qrels, run)`` as ``{case_id: {docno: value}}`` mappings.

    The same data as ``python -m taguru_eval export --trec`` writes
    (:mod:`taguru_eval.analyst.export`): the qrels from ``eval_path``'s
    expected sources (graded relevance; an entry without paragraphs has
    none), the run from ``run``'s hits with the rank order as the score;
    ``wildcards="taguru"`` gives ``--wildcards taguru``'s expectation documents
    instead. Both ir_measures (``ir_measures.calc_aggregate(measures, qrels,
    run)``) and ranx (``ranx.Qrels(qrels)``, ``ranx.Run(run)``) take these mappings.
    """
    frames = trec_frames(load_eval(os.fspath(eval_path)).expected, run.tables, wildcards)
    return qrels_mapping(frames.qrels), run_mapping(frames.run)
