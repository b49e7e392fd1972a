"""``python -m taguru_eval demo``: the reference server, the sake corpus, one run.

Starts the bundled reference server on an ephemeral loopback port with
``data/`` (the ``sake`` context), evaluates ``data/sake/eval.jsonl`` against
``data/sake/thresholds.json``, writes the artifacts, prints a summary table of
the metrics and stops the server.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from taguru_eval.console import Console, terminal_progress
from taguru_eval.errors import EXIT_OK, EXIT_RUN_FAILED, RunError, UsageError
from taguru_eval.runner import execute

DEMO_CONTEXT = "sake"
DEMO_HELP = """\
usage: python -m taguru_eval demo [--out DIR] [--runs N]

Starts the bundled reference server on an ephemeral loopback port with the
demo corpus (data/sake), evaluates its eval.jsonl against its thresholds.json,
writes DIR/evaluation.json and the run into DIR/runs/ (Parquet), prints a
summary table of the metrics, and stops the server. DIR defaults to ./demo-out.

--runs N performs N runs and, between runs, changes the server's corpus through
its write API (adds, edits, removes paragraphs and associations), so the run
store holds a history whose revisions and metrics really move. Each run's
artifact is DIR/evaluation-<i>.json; the last one is also DIR/evaluation.json.
The exit code is 0 when every run completed (gate verdicts are printed), 1 if
one could not complete.
"""


def demo_data_dir() -> Path:
    """``data/`` beside the package (a source checkout or an editable install)."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "data", Path.cwd() / "data"):
        if (candidate / DEMO_CONTEXT / "eval.jsonl").is_file():
            return candidate
    raise RunError(
        f"the demo data was not found (looked for data/{DEMO_CONTEXT}/eval.jsonl beside the "
        f"taguru_eval package at {here.parent} and under {Path.cwd()}); run the demo from a "
        "source checkout (pip install -e .)"
    )


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


def _parse_runs(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise UsageError("demo: --runs needs a positive integer")
    return int(value)


def demo_main(argv: Sequence[str]) -> int:
    """``python -m taguru_eval demo [--out DIR] [--runs N]``: serve data/sake, evaluate it."""
    out_dir = Path("demo-out")
    runs = 1
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("--help", "-h"):
            sys.stdout.write(DEMO_HELP)
            return EXIT_OK
        if arg in ("--out", "--runs") and not args:
            raise UsageError(
                "demo: --out needs a directory" if arg == "--out" else "demo: --runs needs a value"
            )
        if arg == "--out":
            out_dir = Path(args.pop(0))
            continue
        if arg == "--runs":
            runs = _parse_runs(args.pop(0))
            continue
        raise UsageError(f"demo: unexpected argument '{arg}'")
    if runs > 1:
        return _demo_history(out_dir, runs)
    from taguru_eval.catalog import statistics
    from taguru_eval.options import RunOptions
    from taguru_eval.prepare import prepare_run
    from taguru_eval.refserver.serve import running_server

    data = demo_data_dir()
    context_dir = data / DEMO_CONTEXT
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"demo: cannot create {out_dir}: {exc.strerror or exc}") from None
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
        result = execute(prepared, console=console, progress=terminal_progress(console.stderr))
    console.out("")
    console.out(f"metrics of {len(result.lane_outputs)} case(s):")
    console.out(metrics_table(result.doc["metrics"], statistics()))
    console.out("")
    console.out(f"artifacts: {result.out_path}  and  {result.store_path}")
    return result.exit_code


def _demo_history(out_dir: Path, runs: int) -> int:
    """N runs with corpus changes between them; prints one line per run."""
    from taguru_eval.api import Run
    from taguru_eval.history import demo_history

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
