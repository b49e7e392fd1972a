"""Run mode's command line: taguru's flags (EVALUATE.md §2.2), parsed left to right.

The flags become one :class:`~taguru_eval.options.RunOptions`; every input
is then validated (:func:`~taguru_eval.inputs.prepare.prepare_run`) before
the pipeline touches the network. After the run, the CI reports asked for
(``--junit``, ``--summary``, the GitHub Actions job summary) are written from
the run's frames by the library's renderers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from taguru_eval.cli.flags import scan, write_report
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_OK,
    PREFIX,
    UsageError,
    os_error_text,
)
from taguru_eval.options import REQUIRED, RUN_FLAGS, RunOptions

if TYPE_CHECKING:
    from taguru_eval.compare import RunView
    from taguru_eval.inputs.prepare import PreparedRun
    from taguru_eval.pipeline.finish import RunResult
    from taguru_eval.run.console import Console

MLFLOW_TRACKING_ENV: Final = "MLFLOW_TRACKING_URI"
"""Where ``--mlflow`` logs; required with it (the tracking client's own default, a
local SQLite store, is not one the ``mlflow`` extra's client can write)."""

STEP_SUMMARY_ENV: Final = "GITHUB_STEP_SUMMARY"
"""The file GitHub Actions renders as the job summary; run mode appends its summary there."""


def run_prepared(prepared: PreparedRun) -> int:
    """The CLI's run mode after ``prepare``: returns the exit code.

    Project errors (exit 1/2) propagate to the CLI, which prints them as one
    ``taguru: evaluate: …`` line.
    """
    # Imported here, not at the top: --help and every usage error of run mode
    # come from this module and must not pay for Polars, pyarrow and httpx.
    from taguru_eval.pipeline import execute
    from taguru_eval.run.console import Console, case_progress

    options = prepared.options
    # The summary's base is read first: a bad one is an input error (exit 2)
    # before any case runs. compare's modules are loaded only for it.
    base: RunView | None = None
    if options.summary_base is not None:
        from taguru_eval.compare import load_side

        base = load_side(options.summary_base, "BASE", stamp_required=True)
    console = Console()
    progress = case_progress(console.stderr, quiet=options.quiet)
    try:
        result = execute(prepared, console=console, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    write_reports(prepared, result, os.environ, base, console)
    export_run_outputs(prepared, result, base, console)
    return result.exit_code


def export_run_outputs(
    prepared: PreparedRun, result: RunResult, summary_base: RunView | None, console: Console
) -> None:
    """``--otlp`` and ``--mlflow``, after the artifact and the reports are written.

    Neither changes the exit code: a collector or tracking server that cannot
    take the run is one warning line on stderr (docs/otel.md, docs/mlflow.md).
    Their modules (and OpenTelemetry's, MLflow's) are imported only when asked for.
    """
    options = prepared.options
    if not (options.otlp or options.mlflow):
        return
    from taguru_eval.api import from_result

    run = from_result(result)
    if options.otlp:
        from taguru_eval.integrations.otel import export_run

        exported = export_run(run, prepared.thresholds, endpoint=options.otlp_endpoint)
        if exported.failure is not None:
            console.err(f"{PREFIX}warning: {exported.failure}")
    if options.mlflow:
        from taguru_eval.integrations.mlflow import log_run, tracking_failure

        comparison = None
        if summary_base is not None:
            from taguru_eval.compare import load_side
            from taguru_eval.compare.classify import compare_views

            comparison = compare_views(
                summary_base, load_side(result.doc, "HEAD", label=options.out)
            )
        try:
            log_run(run, summary=options.summary, comparison=comparison)
        except Exception as exc:  # an output: a tracking server's failure never costs the exit code
            console.err(f"{PREFIX}warning: {tracking_failure(exc)}")


def write_reports(
    prepared: PreparedRun,
    result: RunResult,
    env: Mapping[str, str],
    summary_base: RunView | None,
    console: Console,
) -> None:
    """``--junit``, ``--summary`` and the job summary of a finished run.

    The two files are written atomically (exit 1 when one cannot be); the
    job summary is appended to ``$GITHUB_STEP_SUMMARY`` unless
    ``--no-step-summary``, and a failure there is only a warning.
    """
    # Each report's modules are loaded only when it is asked for: a plain run
    # imports neither the JUnit writer nor compare (docs/architecture.md).
    options = prepared.options
    if options.junit is not None:
        from taguru_eval.analyst.aggregate import golden_questions
        from taguru_eval.analyst.junit import junit_xml
        from taguru_eval.flag_gates import flag_gate_rows

        report = junit_xml(
            prepared.thresholds,
            result.gate,
            result.scores.metrics_frame,
            result.scores.cases,
            run_id=result.run_id,
            context=options.context,
            generated_at=str(result.doc.get("generated_at", "")),
            catalog=result.scores.catalog,
            junit_cases=options.resolved_junit_cases,
            flag_gates=flag_gate_rows(result.head),
            questions=golden_questions(result.scores.cases, result.tables.case_lanes),
        )
        write_report(options.junit, report)
    step_summary = env.get(STEP_SUMMARY_ENV) if options.step_summary else None
    if options.summary is None and not step_summary:
        return
    from taguru_eval.analyst.aggregate import golden_questions
    from taguru_eval.analyst.step_summary import summary_markdown

    comparison = None
    if summary_base is not None:
        from taguru_eval.compare import load_side
        from taguru_eval.compare.classify import compare_views

        head = load_side(result.doc, "HEAD", label=options.out)
        comparison = compare_views(summary_base, head)
    markdown = summary_markdown(
        result.doc,
        result.scores.metrics_frame,
        result.scores.cases,
        result.gate,
        run_id=result.run_id,
        comparison=comparison,
        catalog=result.scores.catalog,
        questions=golden_questions(result.scores.cases, result.tables.case_lanes),
    )
    if options.summary is not None:
        write_report(options.summary, markdown)
    if step_summary:
        try:
            with open(step_summary, "a", encoding="utf-8") as handle:
                handle.write(markdown)
        except OSError as exc:
            console.err(
                f"{PREFIX}warning: appending the job summary to {STEP_SUMMARY_ENV} "
                f"({step_summary}): {os_error_text(exc)}"
            )


_HELP_HEAD: Final = """\
usage: python -m taguru_eval --eval FILE --context NAME [--url URL]
                        [--config FILE] [--out FILE] [--thresholds FILE]
                        [--assembly] [--max-items N] [--max-bytes N]
                        [--max-tokens N] [--rerank MODEL] [--concurrency N]
                        [--must-refuse FILE] [--refusal-rule semantic|any]
                        [--answers FILE] [--answer-match normalized|tokens]
                        [--store DIR | --no-store] [--junit FILE]
                        [--junit-cases failing|all]
                        [--summary FILE] [--summary-base RUN]
                        [--no-step-summary] [--quiet] [--resume]
                        [--repeat N] [--sample N [--seed S]]
                        [--filter PATTERN]... [--tag T]... [--failing RUN]
                        [--otlp [ENDPOINT]] [--mlflow]
       python -m taguru_eval run --eval FILE --context NAME [...]
       python -m taguru_eval compare BASE.json HEAD.json [--out FILE]
                        [--significance] [--fail-on-regression] [--alpha A]
       python -m taguru_eval export RUN --trec DIR [--eval FILE]
                        [--wildcards drop|taguru]
       python -m taguru_eval measures RUN MEASURE... [--eval FILE]
                        [--wildcards taguru|drop] [--per-case FILE]
       python -m taguru_eval serve|wait|load|demo|report|ingest ...
       python -m taguru_eval import-golden|import-qrels|refusal-bands ...
       python -m taguru_eval --version

Evaluate one taguru context against a labeled question set (eval.jsonl) and
write evaluation.json; the same command line as 'taguru evaluate'.

run-mode flags:
"""

_SELECTION_HEAD: Final = """
selection flags (quick feedback on part of the set; the run records them as
inputs.selection, and compare calls the cases it did not run not_comparable):
"""

_HELP_TAIL: Final = """\
  (the selection flags combine: a case runs when it passes every flag given;
  nothing selected is exit 2. Not with --resume)

  -h, --help           print this help and exit
  --version            print the version and exit (first argument only)

subcommands:
  run                  run mode under its own name (same flags as above)
  compare              compare two evaluation.json files into changes.jsonl
  export               export a run for IR tools (TREC run file and qrels)
  measures             compute ir_measures measures (AP, P@5, nDCG@10, ...) over
                       a run ('ir' extra)
  serve                serve a corpus folder with the reference server
  wait                 wait until a server answers /health (URL or the ready
                       file of 'serve --ready-file'), for CI scripts
  load                 put a context folder (serve's layout) into a taguru server
                       over its write routes, then read it back
  demo                 run the bundled demo end to end
  report               render charts and an HTML report from the run store
  ingest               import an existing evaluation.json into the run store
  import-golden        turn a citenexus golden CSV into eval.jsonl, answers and
                       must-refuse files, reporting what it cannot carry
  import-qrels         turn TREC qrels and topics, or a BEIR folder, into
                       eval.jsonl (and a BEIR corpus into a context folder)
  refusal-bands        report where the passage vector floor could separate
                       answerable from must-refuse questions (never gates)

environment:
  TAGURU_ADDR          server host:port used when --url is absent (not a URL)
  TAGURU_CONFIG        env-file used when --config is absent
  TAGURU_API_TOKEN     bearer token (else the first name:token entry of
  TAGURU_API_TOKENS    TAGURU_API_TOKENS); never written anywhere
  GITHUB_STEP_SUMMARY  when set, the Markdown summary is appended to this
                       file (GitHub Actions' job summary)
  HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY (or lower case)
                       proxies, as taguru's own client reads them
  OTEL_EXPORTER_OTLP_* where --otlp exports without ENDPOINT (endpoint,
                       headers, timeout, certificates), OTEL_SERVICE_NAME
  MLFLOW_TRACKING_URI  where --mlflow logs (default ./mlruns)

exit codes:
  0  run completed (and every threshold passed); also --help
  1  the run could not complete (server unreachable, corpus read failed,
     artifact not writable); a run store that cannot be written is only a
     warning and keeps the gate's code
  2  usage or input error (bad flags, bad eval.jsonl / thresholds / config,
     bad URL, unknown context or source) -- nothing is written
  3  run completed but the thresholds gate did not pass
  130  interrupted (Ctrl-C); 143  terminated (SIGTERM) -- nothing partial is
       left behind but the finished cases under <store>/.partial, which
       --resume continues
"""


_KINDS: Final = {"value": 0, "repeatable": 1, "count": 2, "switch": 3, "negated": 3, "optional": 4}
# Grouped by kind: tied suggestions for a mistyped flag are listed in this order.
_TABLE: Final = {
    spec.name: spec for spec in sorted(RUN_FLAGS.values(), key=lambda spec: _KINDS[spec.kind])
}
FLAGS: Final = (*_TABLE, "--help")
"""Every flag run mode takes (what a mistyped one is compared with)."""


def _entries(selection: bool) -> str:
    """The help's entries of the run-mode (or the selection) flags, from the table."""
    lines = []
    for spec in RUN_FLAGS.values():
        if spec.selection == selection:
            first, *rest = spec.help
            lines.append(f"  {spec.name} {spec.metavar}".rstrip().ljust(22) + f" {first}")
            lines.extend(" " * 23 + line for line in rest)
    return "".join(f"{line}\n" for line in lines)


HELP: Final = _HELP_HEAD + _entries(False) + _SELECTION_HEAD + _entries(True) + _HELP_TAIL


def parse_run_args(args: Sequence[str]) -> RunOptions | None:
    """Run-mode flags (§2.2, :data:`~taguru_eval.options.RUN_FLAGS`), left to
    right; the first problem raises :class:`UsageError`. ``None`` means help was
    asked for.

    What only a command line can get wrong (a flag twice, a missing value, an
    unknown word) is checked here; the rules a library caller meets too (counts,
    the refusal rule, flags that need or exclude others) are
    :class:`RunOptions`' own, so both report them alike."""
    found = scan(args, _TABLE, "evaluate", positional="evaluate takes no positional arguments")
    if found is None:
        return None
    for name in REQUIRED:
        spec = RUN_FLAGS[name]
        if spec.name not in found.values:
            raise UsageError(f"{spec.name} {spec.metavar} is required")
    given: dict[str, Any] = {}
    for name, spec in RUN_FLAGS.items():
        if spec.kind == "repeatable":
            given[name] = tuple(found.repeated.get(spec.name, ()))
        elif spec.kind in ("switch", "negated", "optional"):
            given[name] = (spec.name in found.switches) != (spec.kind == "negated")
        elif spec.name in found.values:
            given[name] = found.parsed.get(spec.name, found.values[spec.name])
        if spec.value_field is not None:
            given[spec.value_field] = found.values.get(spec.name)
    return RunOptions(**given)


def missing_integration(options: RunOptions) -> str | None:
    """The line for an ``--otlp``/``--mlflow`` whose extra is not installed (said
    before any input is read or case runs); ``None`` when nothing is missing."""
    asked = [(flag, extra) for flag, extra, on in (
        ("--otlp", "otel", options.otlp), ("--mlflow", "mlflow", options.mlflow)
    ) if on]  # fmt: skip
    if not asked:
        return None
    from taguru_eval._base.extras import MissingExtra, load_extra

    for flag, extra in asked:
        try:
            load_extra(extra)
        except MissingExtra as missing:
            return f"{flag} {missing}"
    return None


def run_mode(args: Sequence[str]) -> int:
    """Parse, validate every input, then hand over to the runner."""
    options = parse_run_args(args)
    if options is None:
        sys.stdout.write(HELP)
        return EXIT_OK
    missing = missing_integration(options)
    if missing is not None:
        sys.stderr.write(f"{PREFIX}{missing}\n")
        return EXIT_INPUT
    if options.mlflow and not os.environ.get(MLFLOW_TRACKING_ENV):
        raise UsageError(
            f"--mlflow needs {MLFLOW_TRACKING_ENV}",
            hint=f"set {MLFLOW_TRACKING_ENV} to your MLflow server (http://host:5000) or a "
            "file: store (file:./mlruns, with MLFLOW_ALLOW_FILE_STORE=true); docs/mlflow.md",
        )
    from taguru_eval.inputs.prepare import prepare_run

    return run_prepared(prepare_run(options, os.environ))
