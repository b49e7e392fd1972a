"""The demo end to end: the reference server, the sake corpus, one run or a history.

:func:`run_demo` starts the bundled reference server on an ephemeral loopback
port with ``data/`` (the ``sake`` context), evaluates ``data/sake/eval.jsonl``
against ``data/sake/thresholds.json``, writes the artifacts, prints a summary
table of the metrics and stops the server; :func:`run_history` makes a
history of runs with corpus changes between them (:mod:`.history`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from taguru_eval.api import Run
from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
from taguru_eval.demo.history import demo_history
from taguru_eval.errors import EXIT_OK, EXIT_RUN_FAILED, RunError, os_error_text
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_eval.pipeline import RunResult, execute
from taguru_eval.refserver.serve import running_server
from taguru_eval.run.console import Console, case_progress
from taguru_eval.summary import share_text

MUST_REFUSE_FILE = "must_refuse.jsonl"
MODES: tuple[tuple[str, str, bool], ...] = (
    ("semantic", "semantic", False),
    ("any", "any", False),
    ("semantic + toy vector lane", "semantic", True),
)
"""The must-refuse walk-through: (column title, --refusal-rule, vector lane on)."""


def _evaluate(
    url: str, out: Path, console: Console, *, rule: str = "semantic", store: Path | None = None
) -> RunResult:
    context_dir = demo_data_dir() / DEMO_CONTEXT
    options = RunOptions(
        eval_path=str(context_dir / "eval.jsonl"),
        context=DEMO_CONTEXT,
        url=url,
        out=str(out),
        thresholds=str(context_dir / "thresholds.json"),
        must_refuse=str(context_dir / MUST_REFUSE_FILE),
        refusal_rule="any" if rule == "any" else "semantic",
        store_dir=None if store is None else str(store),
        no_store=store is None,
    )
    # An empty environment: a user's TAGURU_* settings must not reach the demo.
    prepared = prepare_run(options, {}, stderr=console.err)
    progress = case_progress(console.stderr)
    try:
        return execute(prepared, console=console, progress=progress)
    finally:
        if progress is not None:
            progress.close()


def run_demo(out_dir: Path) -> int:
    """Serve ``data/``, evaluate the sake context with its must-refuse file,
    print the metrics table and the must-refuse verdicts under each rule."""
    data = demo_data_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"demo: cannot create {out_dir}: {os_error_text(exc)}") from None
    console = Console()
    with running_server(data) as url, running_server(data, vector_lane=True) as vector_url:
        console.err(f"taguru_eval demo: reference server with data/{DEMO_CONTEXT} at {url}")
        result = _evaluate(url, out_dir / "evaluation.json", console, store=out_dir / "runs")
        console.out("")
        console.out(f"metrics of {len(result.lane_outputs)} case(s):")
        console.out(metrics_table(result.doc["metrics"], result.scores.catalog.statistics()))
        console.out("")
        # The walk-through runs' own summaries would repeat the first one's.
        quiet = Console(stdout=io.StringIO(), stderr=io.StringIO())
        walk = [result]
        for title, rule, vector in MODES[1:]:
            console.err(f"taguru_eval demo: the same must-refuse file — {title}")
            name = f"must-refuse-{title.replace(' + ', '-').replace(' ', '-')}.json"
            walk.append(_evaluate(vector_url if vector else url, out_dir / name, quiet, rule=rule))
    docs = [run.doc for run in walk]
    console.out(f"must-refuse verdicts (data/{DEMO_CONTEXT}/{MUST_REFUSE_FILE}):")
    console.out(verdict_table(docs))
    console.out("")
    console.out(trade_off_lines(docs))
    console.out("")
    console.out(f"artifacts: {result.out_path}  and  {result.store_path}")
    console.out(f"  (the other modes: {', '.join(str(run.out_path) for run in walk[1:])})")
    return result.exit_code


def _rows_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  " + "  ".join(
            cell.ljust(width) for cell, width in zip(cells, widths, strict=True)
        )

    rule = "  " + "-" * (sum(widths) + 2 * (len(widths) - 1))
    return "\n".join([line(header).rstrip(), rule, *(line(row).rstrip() for row in rows)])


def verdict_table(docs: Sequence[Mapping[str, Any]]) -> str:
    """One row per must-refuse case, one verdict column per walk-through mode."""
    columns = [{case["case_id"]: case for case in doc["abstention"]["cases"]} for doc in docs]
    rows = []
    for case in docs[0]["abstention"]["cases"]:
        cells = [case["case_id"], case["kind"]]
        for by_id in columns:
            verdict = by_id[case["case_id"]]
            reason = verdict.get("reason")
            cells.append(verdict["verdict"] + (f" ({reason})" if reason else ""))
        rows.append(cells)
    header = ["case", "kind", *(title for title, _rule, _vector in MODES)]
    return _rows_table(header, rows)


def trade_off_lines(docs: Sequence[Mapping[str, Any]]) -> str:
    """ABSTENTION.md §3.11's trade-off pair per mode: what the rule refuses among
    must-refuse questions beside what it throws away among answerable ones."""
    header = ["mode", "passage refusal (must-refuse)", "false refusal (answerable)", "supported"]

    rows = [
        [
            title,
            share_text(doc["metrics"]["abstention.passage.refusal_rate"]),
            share_text(doc["metrics"]["answerability.false_refusal_rate"]),
            share_text(doc["metrics"]["answerability.supported_rate"]),
        ]
        for (title, _rule, _vector), doc in zip(MODES, docs, strict=True)
    ]
    return _rows_table(header, rows)


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
