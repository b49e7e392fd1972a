"""The demo end to end: the reference server, the sake corpus, one run or a history.

:func:`run_demo` starts the bundled reference server on an ephemeral loopback
port with ``data/`` (the ``sake`` context), evaluates ``data/sake/eval.jsonl``
with its must-refuse file ``data/sake/must_refuse.jsonl`` under
``--refusal-rule any`` against ``data/sake/thresholds.json`` (the must-refuse
gate's verdicts first: some questions abstain, some surface), writes the
artifacts, prints a summary table of the metrics, then shows the must-refuse
verdicts under each rule — ``any``, the default ``semantic`` rule on the
server as shipped (no vector lane: the passage probes are honestly
undetermined), and ``semantic`` on the same corpus served with the opt-in toy
vector lane — and stops the servers; :func:`run_assembly_pair` runs the
same cases in baseline and ``--assembly`` mode at one budget and prints them
side by side; :func:`run_history` makes a history of runs with corpus changes
between them (:mod:`.history`).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import polars as pl

from taguru_eval._base.files import WriteFailed, write_all_atomic
from taguru_eval.api import Run
from taguru_eval.compare import compare
from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
from taguru_eval.demo.history import demo_history
from taguru_eval.errors import (
    EXIT_GATE,
    EXIT_OK,
    EXIT_RUN_FAILED,
    PREFIX,
    RunError,
    os_error_text,
)
from taguru_eval.inputs.golden import GoldenOptions, import_golden
from taguru_eval.inputs.prepare import PreparedRun, prepare_run
from taguru_eval.options import Budget, RunOptions
from taguru_eval.pipeline import execute
from taguru_eval.pipeline.finish import RunResult
from taguru_eval.run.console import Console, case_progress
from taguru_eval.summary import share_text


@contextmanager
def _demo_server(out_dir: Path, console: Console) -> Iterator[tuple[str, Path]]:
    """Create ``out_dir``, serve ``data/`` on loopback; yields (URL, the sake folder)."""
    from taguru_refserver.serve import running_server  # the demo command alone starts it

    data = demo_data_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"demo: cannot create {out_dir}: {os_error_text(exc)}") from None
    with running_server(data) as url:
        console.err(f"taguru_eval demo: reference server with data/{DEMO_CONTEXT} at {url}")
        yield url, data / DEMO_CONTEXT


def _execute_with_progress(prepared: PreparedRun, console: Console) -> RunResult:
    """One run with the command line's progress display on stderr."""
    progress = case_progress(console.stderr)
    try:
        return execute(prepared, console=console, progress=progress)
    finally:
        if progress is not None:
            progress.close()


MUST_REFUSE_FILE: Final = "must_refuse.jsonl"
MODES: Final[tuple[tuple[str, str, bool], ...]] = (
    ("any", "any", False),
    ("semantic", "semantic", False),
    ("semantic + toy vector lane", "semantic", True),
)
"""The must-refuse walk-through: (column title, --refusal-rule, vector lane on). The
first is the demo's opening run: under ``any`` every probe gets a verdict on the
server as shipped, so the gate shows cases abstaining and surfacing at once
(``semantic`` there leaves the passage probes undetermined: no vector lane)."""


def _must_refuse_run(
    url: str,
    context_dir: Path,
    out: Path,
    console: Console,
    *,
    rule: str,
    store: Path | None = None,
) -> RunResult:
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
    return _execute_with_progress(prepared, console)


GOLDEN_CONTEXT: Final = "handbook"
GOLDEN_CSV: Final = "golden.csv"
GOLDEN_THRESHOLDS: Final = "golden_thresholds.json"


def run_golden(url: str, out_dir: Path, console: Console) -> int:
    """A citenexus golden CSV (``data/handbook/golden.csv``) as a user brings it:
    imported as ``import-golden`` imports it (its eval set, answers and
    must-refuse files under ``out_dir``), then one run with ``--answers`` and
    ``--must-refuse`` gated by ``golden_thresholds.json``; the run's summary shows
    the answers figures beside recall and the must-refuse verdicts. Returns the
    run's exit code."""
    data = demo_data_dir() / GOLDEN_CONTEXT
    options = GoldenOptions(id_column="id", sources_column="doc", source_template="{}.md")
    imported = import_golden(data / GOLDEN_CSV, options)
    files = {
        "eval": (out_dir / "golden.eval.jsonl", imported.eval_text),
        "answers": (out_dir / "golden.answers.jsonl", imported.answers_text),
        "must_refuse": (out_dir / "golden.must_refuse.jsonl", imported.must_refuse_text),
    }
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_all_atomic([(path, text.encode()) for path, text in files.values() if text])
    except (OSError, WriteFailed) as exc:
        raise RunError(f"demo: cannot write the golden CSV's files in {out_dir}: {exc}") from None
    counts = imported.counts
    console.out(
        f"  import-golden: {counts['eval']} eval case(s), {counts['answers']} with answer "
        f"text, {counts['must_refuse']} must-refuse case(s) → {out_dir}"
    )
    run = RunOptions(
        eval_path=str(files["eval"][0]),
        context=GOLDEN_CONTEXT,
        url=url,
        out=str(out_dir / "evaluation.json"),
        thresholds=str(data / GOLDEN_THRESHOLDS),
        must_refuse=str(files["must_refuse"][0]),
        answers=str(files["answers"][0]),
        no_store=True,
    )
    prepared = prepare_run(run, {}, stderr=console.err)
    return _execute_with_progress(prepared, console).exit_code


def run_demo(out_dir: Path) -> int:
    """Serve ``data/``, evaluate the sake context with its must-refuse file under
    ``--refusal-rule any`` (the gate abstains and surfaces on the server as
    shipped), print the metrics table, then the verdicts under each rule, and
    take the handbook's golden CSV from ``import-golden`` to the gate.

    The three sake runs are stored (the notebooks' history: ``compare.ipynb``
    compares the two newest). Returns 0 once every run completed — a gate's
    FAIL is what the demo shows, not a failure of the demo — else the first
    other exit code."""
    from taguru_refserver.serve import running_server

    console = Console()
    store = out_dir / "runs"
    with (
        _demo_server(out_dir, console) as (url, context_dir),
        running_server(demo_data_dir(), vector_lane=True) as vector_url,
    ):
        result = _must_refuse_run(
            url, context_dir, out_dir / "evaluation.json", console, rule="any", store=store
        )
        console.err(
            "taguru_eval demo: under --refusal-rule any a must-refuse question fails the gate "
            "as soon as a hit is served for it; the same file under each rule follows"
        )
        console.out("")
        console.out(f"metrics of {result.case_count} case(s):")
        console.out(metrics_table(result.head["metrics"], result.scores.catalog.statistics()))
        console.out("")
        # The walk-through runs' own summaries would repeat the first one's.
        quiet = Console(stdout=io.StringIO(), stderr=io.StringIO())
        walk = [result]
        for title, rule, vector in MODES[1:]:
            console.err(f"taguru_eval demo: the same must-refuse file — {title}")
            name = f"must-refuse-{title.replace(' + ', '-').replace(' ', '-')}.json"
            target = vector_url if vector else url
            walk.append(
                _must_refuse_run(target, context_dir, out_dir / name, quiet, rule=rule, store=store)
            )
        docs = [run.doc for run in walk]
        console.out(f"must-refuse verdicts (data/{DEMO_CONTEXT}/{MUST_REFUSE_FILE}):")
        console.out(verdict_table(docs))
        console.out("")
        console.out(trade_off_table(docs))
        console.out("")
        console.err(
            f"taguru_eval demo: a citenexus golden CSV (data/{GOLDEN_CONTEXT}/{GOLDEN_CSV}) "
            "through import-golden, then run --answers --must-refuse (toy vector lane)"
        )
        console.out(f"golden CSV (data/{GOLDEN_CONTEXT}/{GOLDEN_CSV}):")
        golden = run_golden(vector_url, out_dir / "golden", console)
    console.out("")
    console.out(f"artifacts: {result.out_path}  and  {result.store_path}")
    console.out(f"  (the other modes: {', '.join(str(run.out_path) for run in walk[1:])})")
    console.out(f"  (the golden CSV walk-through: {out_dir / 'golden'})")
    console.out(
        f"  ({len(walk)} sake runs stored in {store}: the notebooks read them, "
        "compare.ipynb the two newest)"
    )
    codes = [run.exit_code for run in walk] + [golden]
    return next((code for code in codes if code not in (EXIT_OK, EXIT_GATE)), EXIT_OK)


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
    return _fixed_width(header, rows, left=len(header))


def trade_off_table(docs: Sequence[Mapping[str, Any]]) -> str:
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
    return _fixed_width(header, rows, left=len(header))


PAIR_BUDGET: Final = Budget(max_items=40, max_bytes=65_536, max_tokens=1_000)
"""The demo pair's default budget: tight enough that both modes leave evidence out."""


def run_assembly_pair(out_dir: Path, budget: Budget = PAIR_BUDGET) -> int:
    """Serve ``data/``, evaluate the sake context in baseline and ``--assembly``
    mode at one budget, compare them and print the side-by-side.

    Writes ``evaluation-baseline.json``, ``evaluation-assembly.json``,
    ``changes.jsonl`` and both runs under ``runs/`` in ``out_dir``. Returns 0
    when both runs completed (neither is gated).
    """
    console = Console()
    artifacts: dict[str, str] = {}
    docs: dict[str, Mapping[str, Any]] = {}
    with _demo_server(out_dir, console) as (url, context_dir):
        for mode in ("baseline", "assembly"):
            artifacts[mode] = str(out_dir / f"evaluation-{mode}.json")
            options = RunOptions(
                eval_path=str(context_dir / "eval.jsonl"),
                context=DEMO_CONTEXT,
                url=url,
                out=artifacts[mode],
                assembly=mode == "assembly",
                max_items=budget.max_items,
                max_bytes=budget.max_bytes,
                max_tokens=budget.max_tokens,
                store_dir=str(out_dir / "runs"),
            )
            console.out(f"== {mode}")
            prepared = prepare_run(options, {}, stderr=console.err)
            result = _execute_with_progress(prepared, console)
            docs[mode] = result.doc
    changes = out_dir / "changes.jsonl"
    comparison = compare(
        docs["baseline"],
        docs["assembly"],
        base_label=artifacts["baseline"],
        head_label=artifacts["assembly"],
    )
    for warning in comparison.warnings:
        console.err(f"{PREFIX}{warning}")
    try:
        comparison.write_changes(changes)
    except OSError as exc:
        raise RunError(f"writing {changes}: {exc.strerror or exc}") from None
    limits = ", ".join(f"{key} {value}" for key, value in budget.to_json().items())
    console.out("")
    console.out(f"baseline vs --assembly at one budget ({limits}):")
    console.out(side_by_side(comparison.metrics))
    counts = comparison.counts
    console.out("")
    console.out(
        f"cases under --assembly: {counts['improved']} improved, {counts['regressed']} "
        f"regressed, {counts['unchanged']} unchanged (per case: {changes})"
    )
    console.out(
        f"the same comparison again: python -m taguru_eval compare {artifacts['baseline']} "
        f"{artifacts['assembly']} --out {changes}"
    )
    return EXIT_OK


def side_by_side(metrics: pl.DataFrame) -> str:
    """compare's aggregate entries as a table: metric, baseline, assembly, delta."""
    rows = [
        (name, _format_value(base), _format_value(head), _format_delta(delta))
        for name, base, head, delta in metrics.select("metric", "base", "head", "delta").iter_rows()
    ]
    return _fixed_width(("metric", "baseline", "assembly", "delta"), rows, left=1)


def _format_delta(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


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
    return _fixed_width(header, rows, left=2)


def _fixed_width(header: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> str:
    """Rows under a header and a rule; the first ``left`` columns left-aligned, the rest right."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        text = "  ".join(
            cell.ljust(width) if index < left else cell.rjust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        return f"  {text}".rstrip()

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
