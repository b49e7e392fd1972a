"""Run mode's command line: taguru's flags (EVALUATE.md §2.2), parsed left to right.

The flags become one :class:`~taguru_eval.options.RunOptions`; every input
is then validated (:func:`~taguru_eval.inputs.prepare.prepare_run`) before
the pipeline touches the network. After the run, the CI reports asked for
(``--junit``, ``--summary``, the GitHub Actions job summary) are written from
the run's frames by the library's renderers.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

from taguru_eval._base.suggest import did_you_mean
from taguru_eval._base.text import parse_decimal
from taguru_eval.cli.flags import write_report
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_OK,
    PREFIX,
    UsageError,
    os_error_text,
)
from taguru_eval.inputs.config import strip_trailing_slashes
from taguru_eval.options import (
    COUNT_MAX,
    DEFAULT_CONCURRENCY,
    DEFAULT_OUT,
    DEFAULT_REPEAT,
    MSG_BAD_SEED,
    MSG_EMPTY_FAILING,
    MSG_EMPTY_FILTER,
    MSG_EMPTY_TAG,
    SEED_MAX,
    AnswerMatch,
    JunitCases,
    RefusalRule,
    RunOptions,
    answer_match_of,
    junit_cases_of,
    not_a_count,
    refusal_rule_of,
)

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


HELP: Final = """\
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
  --eval FILE          eval.jsonl to run (required)
  --context NAME       the one context evaluated (required)
  --url URL            server base URL; default derived from TAGURU_ADDR
                       (127.0.0.1:8248); trailing '/' removed
  --config FILE        env-file (KEY=VALUE lines) applied before the URL and
                       token are resolved; default TAGURU_CONFIG
  --out FILE           artifact path (default evaluation.json)
  --thresholds FILE    gate the run: exit 3 when a bound is violated
  --assembly           use POST /contexts/{name}/evidence as the passage lane:
                       the server assembles budgeted evidence (options.tags/
                       since/until cannot be sent; a warning names each case)
  --max-items N        budget ceiling (default 40, at most 1000); without
                       --assembly the search hits are truncated client-side
                       with the server's byte/token accounting
  --max-bytes N        budget ceiling (default 65536, at most 1048576)
  --max-tokens N       budget ceiling (default 4000)
  --rerank MODEL       ask the server's reranker for MODEL; only with
                       --assembly; a reranker that cannot run is recorded as
                       degraded, never a failure
  --concurrency N      cases in flight at once (default 8; 1 = sequential)
  --must-refuse FILE   must-refuse questions (their own file and stamp), probed
                       after the eval cases; adds the abstention.* and
                       answerability.* metrics, boundable in --thresholds
  --refusal-rule RULE  semantic (default: a probe abstains only when the
                       server's vector lane ran and no served hit carries it)
                       or any (any served hit surfaces); only with --must-refuse
  --answers FILE       answer text per case (its own file and stamp); each is
                       looked for in the text of the hits served within the
                       case's limit; adds answers.hit_at_k, answers.mrr and
                       answers.coverage, boundable in --thresholds
  --answer-match RULE  normalized (default: the folded answer is a substring
                       of the folded paragraph) or tokens (citenexus's content
                       tokens of the answer are a subset); only with --answers
  --store DIR          keep the run's tables under DIR (Parquet run store)
  --no-store           do not keep the run in the run store
  --junit FILE         write the gate as a JUnit XML test report, atomically:
                       a test case per aggregate bound, and per per-case
                       bound as --junit-cases says
  --junit-cases WHICH  failing (default): a per-case bound is a test case only
                       when violated (the others are counted in the suite's
                       properties); all: every per-case bound; only with --junit
  --summary FILE       write a Markdown summary (verdict, key metrics,
                       violations, worst cases), atomically
  --summary-base RUN   add the base value and delta of each key metric to the
                       summary; RUN is an evaluation.json or a stored run
                       directory, read before the run starts
  --no-step-summary    do not append the summary to $GITHUB_STEP_SUMMARY
  --quiet              no progress display
  --resume             continue the newest unfinished run of the context in
                       the store (same eval file, options and URL, else exit
                       2): only the cases it did not finish are sent
  --repeat N           send every eval case N times (1..100, default 1) inside
                       the same corpus bracket; the case's metrics are its
                       first repetition's, and a case whose compared metrics
                       differ across repetitions is marked unstable (a
                       stability block per case, stability.unstable_rate;
                       compare never calls such a case regressed). Not with
                       --resume
  --otlp [ENDPOINT]    after the artifact is written, export the run to an
                       OpenTelemetry collector over OTLP/HTTP: a span per run
                       and per case, a gen_ai.evaluation.result event per
                       per-case metric and aggregate bound ('otel' extra).
                       ENDPOINT is the collector's base URL; without it the
                       OTEL_EXPORTER_OTLP_* variables apply. A collector that
                       cannot be reached is a warning, never another exit code
  --mlflow             after the artifact is written, log the run to MLflow
                       (MLFLOW_TRACKING_URI): params, metrics, tags and the
                       artifact ('mlflow' extra); a failure is a warning

selection flags (quick feedback on part of the set; the run records them as
inputs.selection, and compare calls the cases it did not run not_comparable):
  --filter PATTERN     run the cases whose case_id matches PATTERN, a glob
                       (* any characters, ? one character, the rest literal,
                       case-sensitive); repeatable: any of the patterns
  --tag T              run the cases whose options.tags hold T exactly;
                       repeatable: any of the tags
  --failing RUN        run the cases that failed in RUN (an evaluation.json or
                       a stored run directory: a per-case bound violated or a
                       lane failed) or regressed in it (a compare changes.jsonl)
  --sample N           run N cases drawn at random from those selected (all of
                       them when there are no more), stratified over the
                       cases' options.tags; applied after the flags above
  --seed S             the sample's seed (0..2^64-1, default 0): the same seed
                       and file draw the same cases; only with --sample
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


# Value-taking flags: flag -> message when no value follows.
_VALUE_FLAGS: Final = {
    "--eval": "--eval needs a file path",
    "--context": "--context needs a name",
    "--url": "--url needs a value",
    "--config": "--config needs a file path",
    "--out": "--out needs a file path",
    "--thresholds": "--thresholds needs a file path",
    "--rerank": "--rerank needs a model name",
    "--must-refuse": "--must-refuse needs a file path",
    "--refusal-rule": "--refusal-rule needs a value",
    "--answers": "--answers needs a file path",
    "--answer-match": "--answer-match needs a value",
    "--store": "--store needs a directory",
    "--junit": "--junit needs a file path",
    "--junit-cases": "--junit-cases needs a value",
    "--summary": "--summary needs a file path",
    "--summary-base": "--summary-base needs a file or directory path",
    "--seed": MSG_BAD_SEED,
    "--failing": MSG_EMPTY_FAILING,
}

# Value flags that may be given more than once: flag -> message when no value follows.
_REPEATABLE_FLAGS: Final = {"--filter": MSG_EMPTY_FILTER, "--tag": MSG_EMPTY_TAG}

_COUNT_FLAGS: Final = (
    "--max-items",
    "--max-bytes",
    "--max-tokens",
    "--concurrency",
    "--repeat",
    "--sample",
)

_SWITCHES: Final = (
    "--assembly",
    "--no-store",
    "--no-step-summary",
    "--quiet",
    "--resume",
    "--mlflow",
)

_OPTIONAL_VALUE_FLAGS: Final = ("--otlp",)
"""Flags whose value may be left out: the next word is theirs unless it is a flag
(run mode takes no positional argument, so nothing else can be meant)."""

FLAGS: Final = (
    *_VALUE_FLAGS,
    *_REPEATABLE_FLAGS,
    *_COUNT_FLAGS,
    *_SWITCHES,
    *_OPTIONAL_VALUE_FLAGS,
    "--help",
)
"""Every flag run mode takes (what a mistyped one is compared with)."""

_POSITIVE: Final = re.compile(r"\+?[0-9]+")


def parse_positive(text: str) -> int | None:
    """An unsigned decimal >= 1 (optional ``+``; no space, sign, ``_``, fraction,
    or 64-bit overflow), like Rust's ``usize::from_str``; else ``None``."""
    if not _POSITIVE.fullmatch(text):
        return None
    value = parse_decimal(text.removeprefix("+"), COUNT_MAX)
    return value if value is not None and value >= 1 else None


def parse_run_args(args: Sequence[str]) -> RunOptions | None:
    """Run-mode flags (§2.2), left to right; the first problem raises
    :class:`UsageError`. ``None`` means help was asked for.

    What only a command line can get wrong (a flag twice, a missing value, an
    unknown word) is checked here; the rules a library caller meets too (counts,
    the refusal rule, flags that need or exclude others) are
    :class:`RunOptions`' own, so both report them alike."""
    values: dict[str, str] = {}
    rule: RefusalRule | None = None
    match: AnswerMatch | None = None
    junit_cases: JunitCases | None = None
    counts: dict[str, int] = {}
    switches: set[str] = set()
    optional: dict[str, str | None] = {}
    repeated: dict[str, list[str]] = {flag: [] for flag in _REPEATABLE_FLAGS}
    seed: int | None = None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in _REPEATABLE_FLAGS:
            if index + 1 >= len(args):
                raise UsageError(_REPEATABLE_FLAGS[arg])
            repeated[arg].append(args[index + 1])
            index += 2
        elif arg in _VALUE_FLAGS:
            if index + 1 >= len(args):
                raise UsageError(_VALUE_FLAGS[arg])
            if arg in values:
                raise UsageError(f"{arg} given twice")
            value = args[index + 1]
            if arg == "--refusal-rule":
                rule = refusal_rule_of(value)
            elif arg == "--answer-match":
                match = answer_match_of(value)
            elif arg == "--junit-cases":
                junit_cases = junit_cases_of(value)
            elif arg == "--seed":
                seed = parse_decimal(value, SEED_MAX)
                if seed is None:
                    raise UsageError(MSG_BAD_SEED)
            values[arg] = value
            index += 2
        elif arg in _COUNT_FLAGS:
            if arg in counts:
                raise UsageError(f"{arg} given twice")
            number = parse_positive(args[index + 1]) if index + 1 < len(args) else None
            if number is None:
                raise not_a_count(arg)
            counts[arg] = number
            index += 2
        elif arg in _OPTIONAL_VALUE_FLAGS:
            if arg in optional:
                raise UsageError(f"{arg} given twice")
            following = args[index + 1] if index + 1 < len(args) else None
            taken = following is not None and not following.startswith("-")
            optional[arg] = following if taken else None
            index += 2 if taken else 1
        elif arg in _SWITCHES:
            if arg in switches:
                raise UsageError(f"{arg} given twice")
            switches.add(arg)
            index += 1
        elif arg in ("--help", "-h"):
            return None
        elif arg.startswith("--"):
            raise UsageError(f"unknown flag '{arg}' for evaluate", hint=did_you_mean(arg, FLAGS))
        else:
            raise UsageError("evaluate takes no positional arguments")

    if "--eval" not in values:
        raise UsageError("--eval FILE is required")
    if "--context" not in values:
        raise UsageError("--context NAME is required")

    url = values.get("--url")
    return RunOptions(
        eval_path=values["--eval"],
        context=values["--context"],
        url=None if url is None else strip_trailing_slashes(url),
        config=values.get("--config"),
        out=values.get("--out", DEFAULT_OUT),
        thresholds=values.get("--thresholds"),
        assembly="--assembly" in switches,
        max_items=counts.get("--max-items"),
        max_bytes=counts.get("--max-bytes"),
        max_tokens=counts.get("--max-tokens"),
        rerank=values.get("--rerank"),
        concurrency=counts.get("--concurrency", DEFAULT_CONCURRENCY),
        must_refuse=values.get("--must-refuse"),
        refusal_rule=rule,
        answers=values.get("--answers"),
        answer_match=match,
        store_dir=values.get("--store"),
        no_store="--no-store" in switches,
        junit=values.get("--junit"),
        junit_cases=junit_cases,
        summary=values.get("--summary"),
        summary_base=values.get("--summary-base"),
        step_summary="--no-step-summary" not in switches,
        quiet="--quiet" in switches,
        resume="--resume" in switches,
        repeat=counts.get("--repeat", DEFAULT_REPEAT),
        otlp="--otlp" in optional,
        otlp_endpoint=optional.get("--otlp"),
        mlflow="--mlflow" in switches,
        sample=counts.get("--sample"),
        seed=seed,
        filters=tuple(repeated["--filter"]),
        tags=tuple(repeated["--tag"]),
        failing=values.get("--failing"),
    )


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
