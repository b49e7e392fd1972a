"""The demo end to end: the reference server, the sake corpus, one run or a history.

:func:`run_demo` starts the bundled reference server on an ephemeral loopback
port with ``data/`` (the ``sake`` context), evaluates ``data/sake/eval.jsonl``
against ``data/sake/thresholds.json``, writes the artifacts, prints a summary
table of the metrics and stops the server; :func:`run_history` makes a
history of runs with corpus changes between them (:mod:`.history`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from taguru_eval.api import Run
from taguru_eval.catalog import statistics
from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
from taguru_eval.demo.history import demo_history
from taguru_eval.errors import EXIT_OK, EXIT_RUN_FAILED, RunError, os_error_text
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_eval.pipeline import execute
from taguru_eval.refserver.serve import running_server
from taguru_eval.run.console import Console, case_progress


def run_demo(out_dir: Path) -> int:
    """Serve ``data/``, evaluate the sake context once, print the metrics table."""
    data = demo_data_dir()
    context_dir = data / DEMO_CONTEXT
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"demo: cannot create {out_dir}: {os_error_text(exc)}") from None
    console = Console()
    with running_server(data) as url:
        console.err(f"taguru_eval demo: reference server with data/{DEMO_CONTEXT} at {url}")
        options = RunOptions(
            eval_path=str(context_dir / "eval.jsonl"),
            context=DEMO_CONTEXT,
            url=url,
            out=str(out_dir / "evaluation.json"),
            thresholds=str(context_dir / "thresholds.json"),
            store_dir=str(out_dir / "runs"),
        )
        # An empty environment: a user's TAGURU_* settings must not reach the demo.
        prepared = prepare_run(options, {}, stderr=console.err)
        progress = case_progress(console.stderr)
        try:
            result = execute(prepared, console=console, progress=progress)
        finally:
            if progress is not None:
                progress.close()
    console.out("")
    console.out(f"metrics of {len(result.lane_outputs)} case(s):")
    console.out(metrics_table(result.doc["metrics"], statistics()))
    console.out("")
    console.out(f"artifacts: {result.out_path}  and  {result.store_path}")
    return result.exit_code


def _format_value(value: object, integer: bool = False) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or integer:
        return f"{value}"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def metrics_table(metrics: Mapping[str, Mapping[str, Any]], statistics: Mapping[str, str]) -> str:
    """A readable fixed-width table of every aggregate metric."""
    header = ("metric", "kind", "n", "value/mean", "p50", "p90", "min", "max")
    rows: list[tuple[str, ...]] = []
    for name in sorted(metrics):
        metric = metrics[name]
        kind = statistics.get(name, "?")
        if kind == "distribution":
            main = metric.get("mean")
            rest = [metric.get(key) for key in ("p50", "p90", "min", "max")]
        else:
            main = metric.get("value")
            rest = [None, None, None, None]
        rows.append(
            (
                name,
                kind,
                _format_value(metric.get("n")),
                _format_value(main),
                *[_format_value(value) for value in rest],
            )
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        kind = cells[1].ljust(widths[1])
        numbers = "  ".join(
            cell.rjust(width) for cell, width in zip(cells[2:], widths[2:], strict=True)
        )
        return f"  {first}  {kind}  {numbers}".rstrip()

    rule = "  " + "-" * (sum(widths) + 2 * (len(widths) - 1))
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def run_history(out_dir: Path, runs: int) -> int:
    """N runs with corpus changes between them; prints one line per run."""
    console = Console()
    completed: list[Run] = []

    def report(index: int, run: Run) -> None:
        completed.append(run)
        corpus = run.doc["corpus"]
        revision = corpus["revision_after"]
        recall = _format_value(run.doc["metrics"]["recall.recall_at_k"]["mean"])
        citations = _format_value(run.doc["metrics"]["citations.recall"]["mean"])
        verdict = {0: "pass", 3: "FAIL"}.get(run.exit_code or 0, f"exit {run.exit_code}")
        console.out(
            f"  run {index}/{runs}  {run.run_id}  revision g{revision['graph']}"
            f"/p{revision['passages']}  recall@k {recall}  citations.recall {citations}"
            f"  gate {verdict}"
        )

    store = demo_history(out_dir, runs, on_run=report)
    console.out("")
    console.out(f"{len(completed)} run(s) stored in {store}")
    console.out("open notebooks/drift.ipynb (TAGURU_EVAL_STORE points at the store) to chart them")
    return EXIT_OK if all(run.exit_code in (0, 3) for run in completed) else EXIT_RUN_FAILED
