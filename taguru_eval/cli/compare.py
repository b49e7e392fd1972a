"""``python -m taguru_eval compare BASE HEAD [--out FILE]`` (GATE_AND_COMPARE.md §6.11).

Plus the project's opt-in significance flags: ``--significance`` adds the paired
tests of :mod:`taguru_eval.compare.significance` after taguru's summary lines and
as a ``significance`` header member of changes.jsonl (``--by-tag`` adds every tag
slice of HEAD, ``--correction`` adjusts the family's p-values, ``--tolerance`` /
``--tolerances`` set the regression size that does not matter);
``--fail-on-regression`` and ``--fail-on-inconclusive`` (which imply it) exit 3
when a test regressed significantly or was inconclusive. Without them, stdout,
changes.jsonl and the exit code are exactly taguru's.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TextIO

from taguru_eval._base.files import write_bytes_atomic
from taguru_eval._base.text import one_line, parse_decimal
from taguru_eval.catalog import catalog_for
from taguru_eval.cli.flags import scan_flags, write_report
from taguru_eval.compare import Comparison, compare
from taguru_eval.compare.multiplicity import CORRECTIONS, DEFAULT_CORRECTION, Correction
from taguru_eval.compare.significance import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    FAIL_ON,
    MAX_RESAMPLES,
    MAX_SEED,
    FailOn,
    Significance,
    significance,
)
from taguru_eval.compare.tags import stored_case_tags
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_RUN_FAILED,
    PREFIX,
    USAGE_SUFFIX,
    InputError,
    RunError,
    UsageError,
    error_lines,
    os_error_text,
    usage_lines,
)
from taguru_eval.inputs.outputs import refuse_overlaps
from taguru_eval.inputs.tolerances import load_tolerances, tolerance_problem

DEFAULT_OUT: Final = "changes.jsonl"
COMPARE_HELP_COMMAND: Final = "python -m taguru_eval compare --help"

HELP: Final = """\
usage: python -m taguru_eval compare BASE.json HEAD.json [--out FILE]
           [--significance] [--fail-on-regression] [--fail-on-inconclusive]
           [--alpha A] [--correction holm|bh|none] [--by-tag]
           [--tolerance METRIC=DELTA ...] [--tolerances FILE]
           [--junit FILE] [--summary FILE] [--resamples N] [--seed N]

Compare two evaluation runs case by case (a full join on case_id) and write
changes.jsonl: one header line (counts, both runs' identities, aggregate metric
sides and deltas, warnings), then one line per improved, regressed, added or
removed case. Unchanged cases get no line. A case is compared on nine
per-case metrics (recall.recall_at_k, recall.mrr, recall.ndcg,
coverage.concepts, coverage.labels, coverage.associations, citations.recall,
citations.locator_validity, diversity.sources; latency is excluded): a change
beyond 1e-9 either way counts, and any regressed metric makes the case
regressed. Mismatched context, corpus revision, thresholds identity, stamp or
budget are warned about on stderr and in the header, never refused. A case a
side run with 'run --repeat N' found unstable (its metrics differed between
repetitions) gets an 'unstable' line instead, never regressed or improved, and
the header a "stability" block.

arguments:
  BASE.json      the earlier run: an evaluation.json (written by taguru_eval or
                 by taguru's own evaluate) or a stored run directory
                 (runs/context=<ctx>/run=<id>/, read through its Parquet tables)
  HEAD.json      the later run, same forms
  --out FILE     where to write changes.jsonl (default: changes.jsonl); the
                 file is replaced atomically, its directory must exist
  --significance paired tests per compared metric over the cases matched on
                 both sides: mean difference, bootstrap confidence interval
                 (1 - alpha), sign-flip p-value, the p-value adjusted over
                 every test of the compare, and the minimum detectable effect
                 (MDE, 80% power); verdict regressed, improved, inconclusive
                 (not significant, and the interval reaches further than the
                 tolerance in the worse direction) or no significant change;
                 printed after the summary and added to the changes.jsonl
                 header as "significance"
  --fail-on-regression
                 implies --significance; exit 3 when a test regressed
                 significantly (adjusted p < alpha in its worse direction)
  --fail-on-inconclusive
                 implies --significance; exit 3 when a test is inconclusive
  --alpha A      significance level, 0 < A < 1 (default 0.05)
  --correction C holm (default: family-wise error <= alpha), bh
                 (Benjamini-Hochberg: false discovery rate <= alpha) or none
  --by-tag       also test every tag slice of HEAD's cases (HEAD must be a
                 stored run directory that recorded options.tags); the slices
                 join the whole run's tests in one corrected family
  --tolerance METRIC=DELTA
                 the regression size of METRIC that does not matter (default
                 0.01 for every metric); repeatable, one metric each; wins over
                 --tolerances
  --tolerances FILE
                 tolerances from a file: {"taguru_eval_tolerances": 1,
                 "tolerance": {"recall.recall_at_k": 0.02, ...}}
  --junit FILE   implies --significance; the tests as a JUnit report: a
                 regressed test fails, an inconclusive one is skipped with its
                 reason, the others pass; written atomically
  --summary FILE implies --significance; the tests as a Markdown summary (for
                 a CI job summary); written atomically
  --resamples N  bootstrap and sign-flip resamples, 1..1000000 (default 10000)
  --seed N       random seed, 0..2^64-1; the same seed gives the same result
                 (default 0)
  -h, --help     show this help and exit

exit codes:
  0  comparison completed and changes.jsonl written, whatever it found
     (regressions do not change the exit code; gate with --thresholds, or
     with --fail-on-regression)
  1  changes.jsonl could not be serialized or written, or --junit or
     --summary could not be written
  2  usage error, unreadable input, malformed evaluation.json, or a
     taguru_evaluation stamp outside the supported range
  3  --fail-on-regression and a test regressed significantly, or
     --fail-on-inconclusive and a test is inconclusive (changes.jsonl is
     written)
"""


@dataclass(frozen=True)
class CompareArgs:
    """The parsed command line."""

    base: str
    head: str
    out: str = DEFAULT_OUT
    significance: bool = False
    fail_on_regression: bool = False
    alpha: float = DEFAULT_ALPHA
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    fail_on_inconclusive: bool = False
    correction: Correction = DEFAULT_CORRECTION
    by_tag: bool = False
    tolerances: Mapping[str, float] = field(default_factory=dict)
    """``--tolerance`` values by metric (they win over the file's)."""
    tolerances_file: str | None = None
    junit: str | None = None
    summary: str | None = None

    @property
    def tests(self) -> bool:
        """Whether the significance tests run (asked for, or implied)."""
        return (
            self.significance
            or self.fail_on_regression
            or self.fail_on_inconclusive
            or self.junit is not None
            or self.summary is not None
        )

    @property
    def fail_on(self) -> tuple[FailOn, ...]:
        """What exits 3 (``--fail-on-regression``, ``--fail-on-inconclusive``)."""
        flags = (self.fail_on_regression, self.fail_on_inconclusive)
        return tuple(condition for condition, on in zip(FAIL_ON, flags, strict=True) if on)


# Value-taking flags: flag -> message when no value follows.
_VALUE_FLAGS: Final = {
    "--out": "--out needs a file path",
    "--alpha": "--alpha needs a number between 0 and 1",
    "--resamples": "--resamples needs a positive integer",
    "--seed": "--seed needs a non-negative integer",
    "--correction": f"--correction needs {', '.join(CORRECTIONS[:-1])} or {CORRECTIONS[-1]}",
    "--tolerances": "--tolerances needs a file path",
    "--junit": "--junit needs a file path",
    "--summary": "--summary needs a file path",
}

_TOLERANCE_FLAG: Final = "--tolerance"
_TOLERANCE_NEEDS: Final = f"{_TOLERANCE_FLAG} needs METRIC=DELTA, e.g. recall.mrr=0.02"
_REPEATABLE: Final = {_TOLERANCE_FLAG: _TOLERANCE_NEEDS}

_ENABLING: Final = ("--significance", "--fail-on-regression", "--fail-on-inconclusive")
_REPORTS: Final = ("--junit", "--summary")
"""Reports of the tests: each implies --significance."""
_SWITCHES: Final = (*_ENABLING, "--by-tag")

_TEST_SETTINGS: Final = (
    "--alpha",
    "--resamples",
    "--seed",
    "--correction",
    "--by-tag",
    _TOLERANCE_FLAG,
    "--tolerances",
)

TOLERATED: Final = catalog_for(must_refuse=False, answers=True).compared
"""The metrics a tolerance may name: the nine, and answers.* (tested when both runs
were given --answers)."""

_DELTA: Final = re.compile(r"\+?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A tolerance as written on the command line: a plain non-negative decimal."""


def parse_args(argv: Sequence[str]) -> CompareArgs | None:
    """Parse compare's arguments left to right (§6.1); ``None`` means help.

    Raises :class:`UsageError` with the message body (no prefix or suffix).
    """
    found = scan_flags(argv, _VALUE_FLAGS, _SWITCHES, "evaluate compare", repeatable=_REPEATABLE)
    if found is None:
        return None
    positionals, values, switches = found.positionals, found.values, found.switches
    if len(positionals) != 2:
        raise UsageError(
            "evaluate compare takes exactly two positional arguments, BASE.json and "
            f"HEAD.json (got {len(positionals)})"
        )
    refuse_overlaps(
        {
            "BASE": positionals[0],
            "HEAD": positionals[1],
            "--tolerances": values.get("--tolerances"),
        },
        {"--out": values.get("--out", DEFAULT_OUT)},
    )
    given = set(values) | set(found.repeated) | switches
    settings = [flag for flag in _TEST_SETTINGS if flag in given]
    reports = [flag for flag in _REPORTS if flag in values]
    if settings and not (switches.intersection(_ENABLING) or reports):
        raise UsageError(f"{settings[0]} requires --significance or --fail-on-regression")
    refuse_overlaps(
        {"BASE": positionals[0], "HEAD": positionals[1]},
        {"--out": values.get("--out", DEFAULT_OUT), **{flag: values.get(flag) for flag in reports}},
    )
    return CompareArgs(
        positionals[0],
        positionals[1],
        values.get("--out", DEFAULT_OUT),
        significance="--significance" in switches,
        fail_on_regression="--fail-on-regression" in switches,
        alpha=parse_alpha(values.get("--alpha")),
        resamples=_count(
            "--resamples", values.get("--resamples"), DEFAULT_RESAMPLES, 1, MAX_RESAMPLES
        ),
        seed=_count("--seed", values.get("--seed"), DEFAULT_SEED, 0, MAX_SEED),
        fail_on_inconclusive="--fail-on-inconclusive" in switches,
        correction=parse_correction(values.get("--correction")),
        by_tag="--by-tag" in switches,
        tolerances=_tolerances(found.repeated.get(_TOLERANCE_FLAG, [])),
        tolerances_file=values.get("--tolerances"),
        junit=values.get("--junit"),
        summary=values.get("--summary"),
    )


def parse_correction(text: str | None) -> Correction:
    if text is None:
        return DEFAULT_CORRECTION
    for correction in CORRECTIONS:
        if text == correction:
            return correction
    raise UsageError(f"{_VALUE_FLAGS['--correction']} (got '{text}')")


def _tolerances(texts: Sequence[str]) -> dict[str, float]:
    """``--tolerance METRIC=DELTA`` values by metric; each metric once."""
    compared = TOLERATED
    tolerances: dict[str, float] = {}
    for text in texts:
        metric, equals, delta = text.partition("=")
        if not equals:
            raise UsageError(f"{_TOLERANCE_NEEDS} (got '{text}')")
        if metric not in compared:
            raise UsageError(
                f"{_TOLERANCE_FLAG}: unknown metric '{metric}' "
                f"(compare tests {', '.join(compared)})"
            )
        if metric in tolerances:
            raise UsageError(f"{_TOLERANCE_FLAG} {metric} given twice")
        value = float(delta) if _DELTA.fullmatch(delta) else math.nan
        if tolerance_problem(value) is not None:
            raise UsageError(
                f"{_TOLERANCE_FLAG} {text}: the delta must be a finite number >= 0 "
                "(a regression's size, e.g. 0.02)"
            )
        tolerances[metric] = value
    return tolerances


def parse_alpha(text: str | None) -> float:
    if text is None:
        return DEFAULT_ALPHA
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:  # NaN fails too
        raise UsageError(_VALUE_FLAGS["--alpha"])
    return value


def _count(flag: str, text: str | None, default: int, minimum: int, maximum: int) -> int:
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()):
        raise UsageError(_VALUE_FLAGS[flag])
    value = parse_decimal(text, maximum)
    if value is None:
        raise UsageError(f"{_VALUE_FLAGS[flag]} of at most {maximum}")
    if value < minimum:
        raise UsageError(_VALUE_FLAGS[flag])
    return value


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``python -m taguru_eval compare …``: returns the exit code (§6.11)."""
    out_stream = sys.stdout if stdout is None else stdout
    err_stream = sys.stderr if stderr is None else stderr
    try:
        args = parse_args(argv)
    except UsageError as exc:
        err_stream.write(usage_lines(exc, USAGE_SUFFIX, COMPARE_HELP_COMMAND))
        return EXIT_INPUT
    if args is None:
        out_stream.write(HELP)
        return EXIT_OK
    return compare_and_report(args, out_stream, err_stream)[0]


def compare_and_report(
    args: CompareArgs, out_stream: TextIO, err_stream: TextIO
) -> tuple[int, Significance | None]:
    """Everything ``compare`` does once its command line is parsed: the exit code,
    and the significance tests when they ran (the GitHub Action reads their
    verdicts for its ``fail-on``)."""
    try:
        tolerances = _all_tolerances(args)
        comparison = compare(args.base, args.head)
        tags = stored_case_tags(args.head, "HEAD") if args.by_tag else None
    except InputError as exc:
        err_stream.write(error_lines(exc))
        return EXIT_INPUT, None
    # Warnings go out before the write, so they show even if writing fails.
    for warning in comparison.warnings:
        err_stream.write(f"{PREFIX}{one_line(warning)}\n")
    if comparison.abstention is not None:
        for warning in comparison.abstention.warnings:
            err_stream.write(f"{PREFIX}{one_line(f'abstention: {warning}')}\n")
    err_stream.flush()
    tested: Significance | None = None
    if args.tests:
        tested = significance(
            comparison,
            resamples=args.resamples,
            seed=args.seed,
            alpha=args.alpha,
            correction=args.correction,
            # Checked against the catalog's compared metrics; a comparison classifies
            # by exactly those, so nothing is dropped here in practice.
            tolerances={m: t for m, t in tolerances.items() if m in comparison.compared},
            tags=tags,
        )
    extra = None if tested is None else {"significance": tested.header_block()}
    try:
        text = comparison.changes_jsonl(extra=extra)
    except (TypeError, ValueError) as exc:
        err_stream.write(f"{PREFIX}serializing changes.jsonl: {exc}\n")
        return EXIT_RUN_FAILED, None
    try:
        write_bytes_atomic(args.out, text.encode("utf-8"))
    except OSError as exc:
        err_stream.write(f"{PREFIX}writing {args.out}: {os_error_text(exc)}\n")
        return EXIT_RUN_FAILED, None
    out_stream.write(comparison.summary(args.out))
    if tested is None:
        return EXIT_OK, None
    out_stream.write("".join(f"{one_line(line)}\n" for line in tested.lines()))
    try:
        _write_reports(args, tested, comparison)
    except RunError as exc:
        err_stream.write(error_lines(exc))
        return EXIT_RUN_FAILED, tested
    # Exit 3 when a --fail-on-… flag's condition holds, saying which tests met it.
    verdict = tested.verdict(fail_on=args.fail_on)
    err_stream.write("".join(one_line(f"{PREFIX}{reason}") + "\n" for reason in verdict.reasons))
    return verdict.exit_code, tested


def _write_reports(args: CompareArgs, tested: Significance, comparison: Comparison) -> None:
    """``--junit`` and ``--summary``: the tests as CI pages read them."""
    if args.junit is not None:
        from taguru_eval.analyst.junit import significance_junit

        generated = str(comparison.head.generated_at or "")
        text = significance_junit(tested, base=args.base, head=args.head, generated_at=generated)
        write_report(args.junit, text)
    if args.summary is not None:
        from taguru_eval.analyst.step_summary import significance_markdown

        write_report(args.summary, significance_markdown(tested, base=args.base, head=args.head))


def _all_tolerances(args: CompareArgs) -> dict[str, float]:
    """The file's tolerances, then the flags' over them (a flag names one metric
    on purpose; the file is the team's standing choice)."""
    from_file = (
        {} if args.tolerances_file is None else load_tolerances(args.tolerances_file, TOLERATED)
    )
    return {**from_file, **args.tolerances}
