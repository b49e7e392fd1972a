"""Run-mode options: every flag of EVALUATE.md §2.2 as one frozen value.

The CLI builds a :class:`RunOptions` from ``argv``; the library API builds one
from keyword arguments. Either way the value checks itself when it is made:
a count that is not a positive integer, a rule that is neither ``semantic``
nor ``any``, or flags that do not go together is a :class:`UsageError` worded
as §2.2 words it, so a library caller meets the command line's rules, types and
messages. Each field's flag (spelling, kind, help lines) is its metadata
(:class:`Flag`, :data:`RUN_FLAGS`), declared once for the command line, the help,
the library, ``--resume`` and the output checks. Budget resolution (§2.2) lives
here so the artifact, the lanes and the console lines read the same numbers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Final, Literal

from taguru_eval._base.redact import Redactor
from taguru_eval._base.text import parse_decimal
from taguru_eval.contract import ARTIFACT_NAME
from taguru_eval.errors import UsageError

DEFAULT_OUT: Final = ARTIFACT_NAME
DEFAULT_STORE_DIR: Final = "runs"
"""The run store when neither ``--store`` nor ``--no-store`` is given (under the CWD)."""
DEFAULT_CONCURRENCY: Final = 8

DEFAULT_MAX_ITEMS: Final = 40
DEFAULT_MAX_BYTES: Final = 65_536
DEFAULT_MAX_TOKENS: Final = 4_000
CEILING_MAX_ITEMS: Final = 1_000
CEILING_MAX_BYTES: Final = 1_048_576

RefusalRule = Literal["semantic", "any"]
REFUSAL_RULES: Final[tuple[RefusalRule, ...]] = ("semantic", "any")
DEFAULT_REFUSAL_RULE: Final[RefusalRule] = "semantic"

AnswerMatch = Literal["normalized", "tokens"]
ANSWER_MATCHES: Final[tuple[AnswerMatch, ...]] = ("normalized", "tokens")
DEFAULT_ANSWER_MATCH: Final[AnswerMatch] = "normalized"
MSG_BAD_ANSWER_MATCH: Final = "--answer-match must be 'normalized' or 'tokens'"
MSG_MATCH_WITHOUT_ANSWERS: Final = "--answer-match requires --answers"

JunitCases = Literal["failing", "all"]
JUNIT_CASES: Final[tuple[JunitCases, ...]] = ("failing", "all")
DEFAULT_JUNIT_CASES: Final[JunitCases] = "failing"
"""``--junit-cases``: which per-case bounds the JUnit report lists as test cases
(aggregate bounds always are): only the violated ones, or every one."""

COUNT_MAX: Final = 2**64 - 1
"""The largest count a flag takes: taguru parses counts as Rust's ``usize`` (64-bit)."""

MSG_NOT_A_COUNT: Final = "{flag} needs a positive integer"
MSG_BAD_REFUSAL_RULE: Final = "--refusal-rule must be 'semantic' or 'any'"
MSG_RERANK_WITHOUT_ASSEMBLY: Final = "--rerank requires --assembly"
MSG_RULE_WITHOUT_MUST_REFUSE: Final = "--refusal-rule requires --must-refuse"
MSG_STORE_AND_NO_STORE: Final = "--store and --no-store are exclusive"
MSG_RESUME_WITHOUT_STORE: Final = "--resume needs the run store (not --no-store)"
MSG_BAD_JUNIT_CASES: Final = "--junit-cases must be 'failing' or 'all'"
MSG_JUNIT_CASES_WITHOUT_JUNIT: Final = "--junit-cases requires --junit"
MSG_OTLP_ENDPOINT_WITHOUT_OTLP: Final = "an OTLP endpoint requires --otlp"
MSG_OTLP_NOT_A_URL: Final = "--otlp ENDPOINT must be an http:// or https:// URL, got '{endpoint}'"

DEFAULT_REPEAT: Final = 1
REPEAT_MAX: Final = 100
"""The most times ``--repeat`` sends a case: enough to tell a noisy case from a
stable one many times over, while a typo (``--repeat 30000``) is refused rather
than run for days."""
MSG_BAD_REPEAT: Final = f"--repeat needs a positive integer of at most {REPEAT_MAX}"
MSG_RESUME_WITH_REPEAT: Final = (
    "--resume cannot continue a run with --repeat: a repeated run keeps no checkpoint, "
    "run it again without --resume"
)


DEFAULT_SAMPLE_SEED: Final = 0
"""``--seed`` when ``--sample`` is given without it: a fixed seed, so the same
command draws the same cases every time and two sampled runs compare on the same
cases (docs/subsets.md)."""
SEED_MAX: Final = COUNT_MAX
MSG_BAD_SAMPLE: Final = "--sample needs a positive integer"
MSG_BAD_SEED: Final = f"--seed needs a non-negative integer of at most {SEED_MAX}"
MSG_SEED_WITHOUT_SAMPLE: Final = "--seed requires --sample"
MSG_EMPTY_FILTER: Final = "--filter needs a non-empty pattern"
MSG_EMPTY_TAG: Final = "--tag needs a non-empty tag"
MSG_EMPTY_FAILING: Final = "--failing needs a file or directory path"
MSG_RESUME_WITH_SELECTION: Final = (
    "--resume cannot continue a run of a selection (--sample, --filter, --tag, --failing): "
    "a selected run keeps no checkpoint, run it again without --resume"
)


def answer_match_of(value: object) -> AnswerMatch:
    """``value`` as an answer match rule; a :class:`UsageError` names the two."""
    for rule in ANSWER_MATCHES:
        if value == rule:
            return rule
    raise UsageError(MSG_BAD_ANSWER_MATCH)


def not_a_count(flag: str) -> UsageError:
    """The usage error for a count flag (``--max-*``, ``--concurrency``) whose
    value is not an integer in ``1..=COUNT_MAX``."""
    return UsageError(MSG_NOT_A_COUNT.format(flag=flag))


def refusal_rule_of(value: object) -> RefusalRule:
    """``value`` as a refusal rule (``semantic`` or ``any``); anything else is
    the usage error."""
    for rule in REFUSAL_RULES:
        if value == rule:
            return rule
    raise UsageError(MSG_BAD_REFUSAL_RULE)


def junit_cases_of(value: object) -> JunitCases:
    """``value`` as a ``--junit-cases`` choice (``failing`` or ``all``); anything
    else is the usage error."""
    for choice in JUNIT_CASES:
        if value == choice:
            return choice
    raise UsageError(MSG_BAD_JUNIT_CASES)


_POSITIVE: Final = re.compile(r"\+?[0-9]+")


def parse_positive(text: str) -> int | None:
    """An unsigned decimal >= 1 (optional ``+``; no space, sign, ``_``, fraction,
    or 64-bit overflow), like Rust's ``usize::from_str``; else ``None``."""
    if not _POSITIVE.fullmatch(text):
        return None
    value = parse_decimal(text.removeprefix("+"), COUNT_MAX)
    return value if value is not None and value >= 1 else None


def seed_of(text: str) -> int | None:
    """``--seed``'s text as a seed (``0..=SEED_MAX``), else ``None``."""
    return parse_decimal(text, SEED_MAX)


def strip_trailing_slashes(url: str) -> str:
    """What ``--url`` keeps: every trailing ``/`` removed (``http://h:1/`` -> ``http://h:1``)."""
    return url.rstrip("/")


def _strings(given: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """One pattern or tag, or several: a lone string is one, not its characters."""
    return (given,) if isinstance(given, str) else tuple(given)


FlagKind = Literal["value", "count", "switch", "negated", "repeatable", "optional"]
"""How a flag is read: a value; a positive count; a switch (``True`` when given) or
a negated one (``False`` when given); a value that may be given again; or a switch
whose value may be left out."""

FLAG: Final = "flag"
"""The field-metadata key of a :class:`RunOptions` field's :class:`Flag`."""


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line flag: how it is spelt, read and helped. Declared once, as the
    metadata of its :class:`RunOptions` field (:data:`RUN_FLAGS`), it is what the
    command line's scan and help, the library's ``run()``, the resume fingerprint's
    wording and the output-overlap check read; the other subcommands declare theirs
    the same way (:func:`taguru_eval.cli.flags.scan`)."""

    name: str
    metavar: str = ""
    missing: str = ""
    """The usage error when the value is missing (or does not read, see ``scan``)."""
    kind: FlagKind = "value"
    help: tuple[str, ...] = ()
    """The help entry's lines, right of the flag column."""
    scan: Callable[[str], object] | None = None
    """Reads the command line's text: ``None`` back is the ``missing`` error; a rule
    raises its own. Without it, ``read`` reads the text too."""
    read: Callable[[Any], object] | None = None
    """Normalises a given value (a path to ``str``, a rule checked, a lone tag a tuple)."""
    keyword: str | None = None
    """The library's keyword when it is not the field's name."""
    value_field: str | None = None
    """For an ``optional`` flag: the field its value goes to."""
    selection: bool = False
    """A selection flag (listed in the help's own section)."""


def flag(name: str, metavar: str = "", missing: str = "", **spec: Any) -> dict[str, Flag]:
    """A field's metadata: its :class:`Flag`."""
    return {FLAG: Flag(name, metavar, missing, **spec)}


def count(name: str, **spec: Any) -> dict[str, Flag]:
    """A count flag's metadata (``N``: a positive integer, :func:`parse_positive`)."""
    missing = MSG_NOT_A_COUNT.format(flag=name)
    return flag(name, "N", missing, kind="count", scan=parse_positive, **spec)


def _is_seed(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= SEED_MAX


def _is_count(value: object) -> bool:
    # A bool is an int to Python, but ``concurrency=True`` is a mistake, not 1.
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= COUNT_MAX


@dataclass(frozen=True, slots=True)
class Budget:
    """Resolved budget ceilings: ``{max_items, max_bytes, max_tokens}``."""

    max_items: int
    max_bytes: int
    max_tokens: int

    def to_json(self) -> dict[str, int]:
        """The ``inputs.budget`` object (key order as written by taguru)."""
        return {
            "max_items": self.max_items,
            "max_bytes": self.max_bytes,
            "max_tokens": self.max_tokens,
        }


def resolve_budget(max_items: int | None, max_bytes: int | None, max_tokens: int | None) -> Budget:
    """§2.2: defaults {40, 65536, 4000}; items capped at 1000 and bytes at
    1 MiB silently; tokens have no ceiling."""
    return Budget(
        max_items=min(DEFAULT_MAX_ITEMS if max_items is None else max_items, CEILING_MAX_ITEMS),
        max_bytes=min(DEFAULT_MAX_BYTES if max_bytes is None else max_bytes, CEILING_MAX_BYTES),
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
    )


@dataclass(frozen=True, slots=True)
class RunOptions:
    """One run's settings, exactly as given on the command line.

    Paths are kept as given (``eval_path`` is also the label that prefixes
    every eval.jsonl message, and ``out`` is recorded verbatim as
    ``inputs.out``). ``url`` already has its trailing ``/`` removed.
    ``refusal_rule`` is ``None`` when ``--refusal-rule`` was not given
    (:attr:`resolved_refusal_rule` is the rule the run uses).
    ``store_dir`` / ``no_store`` are the project's run-store flags
    (``--store DIR`` / ``--no-store``); ``None`` + ``False`` means "the
    default store", which the runner decides. ``junit`` / ``summary`` /
    ``summary_base`` / ``step_summary`` (``--no-step-summary`` clears it) say
    which CI reports the command line writes after the run, ``junit_cases``
    (``None`` when ``--junit-cases`` was not given; see
    :attr:`resolved_junit_cases`) which per-case bounds ``--junit`` lists; ``quiet``
    silences the progress display; ``resume`` continues the newest unfinished
    run of the context in the store (:mod:`taguru_eval.resume`). ``repeat`` is
    ``--repeat``: how many times every eval case is sent (1, the default, is a
    plain run). ``sample`` / ``seed`` / ``filters`` / ``tags`` / ``failing`` are
    the selection flags (``--sample N``, ``--seed S``, each ``--filter PATTERN``,
    each ``--tag T``, ``--failing RUN``; :mod:`taguru_eval.inputs.selection`):
    only the eval cases they select are run. ``answers`` is
    the ``--answers`` file; ``answer_match`` its ``--answer-match`` (``None``
    when not given; :attr:`resolved_answer_match` is the rule used). ``otlp``
    (``--otlp [ENDPOINT]``) exports the finished run to an OpenTelemetry
    collector, at ``otlp_endpoint`` when one was given, else where the
    ``OTEL_EXPORTER_OTLP_*`` variables say (docs/otel.md); ``mlflow``
    (``--mlflow``) logs it to the MLflow tracking server of
    ``MLFLOW_TRACKING_URI`` (docs/mlflow.md). Both are outputs, written after
    the artifact, and neither changes the exit code.

    Made with a bad count, rule or combination of flags, it raises the
    :class:`UsageError` the command line reports for them, checked in the
    order §2.2 reports them.
    """

    # The flag table, laid out as the help reads (ruff would give each argument a line).
    # fmt: off
    eval_path: str = field(
        metadata=flag("--eval", "FILE", "--eval needs a file path", read=os.fspath,
                      help=("eval.jsonl to run (required)",))
    )
    context: str = field(
        metadata=flag("--context", "NAME", "--context needs a name",
                      help=("the one context evaluated (required)",))
    )
    url: str | None = field(default=None, metadata=flag(
        "--url", "URL", "--url needs a value", read=strip_trailing_slashes, help=(
            "server base URL; default derived from TAGURU_ADDR",
            "(127.0.0.1:8248); trailing '/' removed",
        )))
    config: str | None = field(default=None, metadata=flag(
        "--config", "FILE", "--config needs a file path", read=os.fspath, help=(
            "env-file (KEY=VALUE lines) applied before the URL and",
            "token are resolved; default TAGURU_CONFIG",
        )))
    out: str = field(default=DEFAULT_OUT, metadata=flag(
        "--out", "FILE", "--out needs a file path", read=os.fspath,
        help=("artifact path (default evaluation.json)",)))
    thresholds: str | None = field(default=None, metadata=flag(
        "--thresholds", "FILE", "--thresholds needs a file path", read=os.fspath,
        help=("gate the run: exit 3 when a bound is violated",)))
    assembly: bool = field(default=False, metadata=flag("--assembly", kind="switch", help=(
        "use POST /contexts/{name}/evidence as the passage lane:",
        "the server assembles budgeted evidence (options.tags/",
        "since/until cannot be sent; a warning names each case)",
    )))
    max_items: int | None = field(default=None, metadata=count("--max-items", help=(
        "budget ceiling (default 40, at most 1000); without",
        "--assembly the search hits are truncated client-side",
        "with the server's byte/token accounting",
    )))
    max_bytes: int | None = field(default=None, metadata=count(
        "--max-bytes", help=("budget ceiling (default 65536, at most 1048576)",)))
    max_tokens: int | None = field(default=None, metadata=count(
        "--max-tokens", help=("budget ceiling (default 4000)",)))
    rerank: str | None = field(default=None, metadata=flag(
        "--rerank", "MODEL", "--rerank needs a model name", help=(
            "ask the server's reranker for MODEL; only with",
            "--assembly; a reranker that cannot run is recorded as",
            "degraded, never a failure",
        )))
    concurrency: int = field(default=DEFAULT_CONCURRENCY, metadata=count(
        "--concurrency", help=("cases in flight at once (default 8; 1 = sequential)",)))
    must_refuse: str | None = field(default=None, metadata=flag(
        "--must-refuse", "FILE", "--must-refuse needs a file path", read=os.fspath, help=(
            "must-refuse questions (their own file and stamp), probed",
            "after the eval cases; adds the abstention.* and",
            "answerability.* metrics, boundable in --thresholds",
        )))
    refusal_rule: RefusalRule | None = field(default=None, metadata=flag(
        "--refusal-rule", "RULE", "--refusal-rule needs a value", read=refusal_rule_of, help=(
            "semantic (default: a probe abstains only when the",
            "server's vector lane ran and no served hit carries it)",
            "or any (any served hit surfaces); only with --must-refuse",
        )))
    answers: str | None = field(default=None, metadata=flag(
        "--answers", "FILE", "--answers needs a file path", read=os.fspath, help=(
            "answer text per case (its own file and stamp); each is",
            "looked for in the text of the hits served within the",
            "case's limit; adds answers.hit_at_k, answers.mrr and",
            "answers.coverage, boundable in --thresholds",
        )))
    answer_match: AnswerMatch | None = field(default=None, metadata=flag(
        "--answer-match", "RULE", "--answer-match needs a value", read=answer_match_of, help=(
            "normalized (default: the folded answer is a substring",
            "of the folded paragraph) or tokens (citenexus's content",
            "tokens of the answer are a subset); only with --answers",
        )))
    store_dir: str | None = field(default=None, metadata=flag(
        "--store", "DIR", "--store needs a directory", read=os.fspath, keyword="store",
        help=("keep the run's tables under DIR (Parquet run store)",)))
    no_store: bool = field(default=False, metadata=flag(
        "--no-store", kind="switch", help=("do not keep the run in the run store",)))
    junit: str | None = field(default=None, metadata=flag(
        "--junit", "FILE", "--junit needs a file path", read=os.fspath, help=(
            "write the gate as a JUnit XML test report, atomically:",
            "a test case per aggregate bound, and per per-case",
            "bound as --junit-cases says",
        )))
    junit_cases: JunitCases | None = field(default=None, metadata=flag(
        "--junit-cases", "WHICH", "--junit-cases needs a value", read=junit_cases_of, help=(
            "failing (default): a per-case bound is a test case only",
            "when violated (the others are counted in the suite's",
            "properties); all: every per-case bound; only with --junit",
        )))
    summary: str | None = field(default=None, metadata=flag(
        "--summary", "FILE", "--summary needs a file path", read=os.fspath, help=(
            "write a Markdown summary (verdict, key metrics,",
            "violations, worst cases), atomically",
        )))
    summary_base: str | None = field(default=None, metadata=flag(
        "--summary-base", "RUN", "--summary-base needs a file or directory path", read=os.fspath,
        help=(
            "add the base value and delta of each key metric to the",
            "summary; RUN is an evaluation.json or a stored run",
            "directory, read before the run starts",
        )))
    step_summary: bool = field(default=True, metadata=flag(
        "--no-step-summary", kind="negated",
        help=("do not append the summary to $GITHUB_STEP_SUMMARY",)))
    quiet: bool = field(default=False, metadata=flag(
        "--quiet", kind="switch", help=("no progress display",)))
    resume: bool = field(default=False, metadata=flag("--resume", kind="switch", help=(
        "continue the newest unfinished run of the context in",
        "the store (same eval file, options and URL, else exit",
        "2): only the cases it did not finish are sent",
    )))
    repeat: int = field(default=DEFAULT_REPEAT, metadata=count("--repeat", help=(
        "send every eval case N times (1..100, default 1) inside",
        "the same corpus bracket; the case's metrics are its",
        "first repetition's, and a case whose compared metrics",
        "differ across repetitions is marked unstable (a",
        "stability block per case, stability.unstable_rate;",
        "compare never calls such a case regressed). Not with",
        "--resume",
    )))
    otlp: bool = field(default=False, metadata=flag(
        "--otlp", "[ENDPOINT]", kind="optional", value_field="otlp_endpoint", help=(
            "after the artifact is written, export the run to an",
            "OpenTelemetry collector over OTLP/HTTP: a span per run",
            "and per case, a gen_ai.evaluation.result event per",
            "per-case metric and aggregate bound ('otel' extra).",
            "ENDPOINT is the collector's base URL; without it the",
            "OTEL_EXPORTER_OTLP_* variables apply. A collector that",
            "cannot be reached is a warning, never another exit code",
        )))
    otlp_endpoint: str | None = None
    mlflow: bool = field(default=False, metadata=flag("--mlflow", kind="switch", help=(
        "after the artifact is written, log the run to MLflow",
        "(MLFLOW_TRACKING_URI): params, metrics, tags and the",
        "artifact ('mlflow' extra); a failure is a warning",
    )))
    # The selection flags (docs/subsets.md), in the order the help lists them.
    filters: tuple[str, ...] = field(default=(), metadata=flag(
        "--filter", "PATTERN", MSG_EMPTY_FILTER, kind="repeatable", read=_strings,
        selection=True, help=(
            "run the cases whose case_id matches PATTERN, a glob",
            "(* any characters, ? one character, the rest literal,",
            "case-sensitive); repeatable: any of the patterns",
        )))
    tags: tuple[str, ...] = field(default=(), metadata=flag(
        "--tag", "T", MSG_EMPTY_TAG, kind="repeatable", read=_strings, selection=True, help=(
            "run the cases whose options.tags hold T exactly;",
            "repeatable: any of the tags",
        )))
    failing: str | None = field(default=None, metadata=flag(
        "--failing", "RUN", MSG_EMPTY_FAILING, read=os.fspath, selection=True, help=(
            "run the cases that failed in RUN (an evaluation.json or",
            "a stored run directory: a per-case bound violated or a",
            "lane failed) or regressed in it (a compare changes.jsonl)",
        )))
    sample: int | None = field(default=None, metadata=count("--sample", selection=True, help=(
        "run N cases drawn at random from those selected (all of",
        "them when there are no more), stratified over the",
        "cases' options.tags; applied after the flags above",
    )))
    seed: int | None = field(default=None, metadata=flag(
        "--seed", "S", MSG_BAD_SEED, scan=seed_of, selection=True, help=(
            "the sample's seed (0..2^64-1, default 0): the same seed",
            "and file draw the same cases; only with --sample",
        )))
    # fmt: on

    def __post_init__(self) -> None:
        # The command line rejects a bad count or rule while it reads the flags,
        # before any of the combinations below, and so does this.
        for value, flag in (
            (self.max_items, "--max-items"),
            (self.max_bytes, "--max-bytes"),
            (self.max_tokens, "--max-tokens"),
        ):
            if value is not None and not _is_count(value):
                raise not_a_count(flag)
        if not _is_count(self.concurrency):
            raise not_a_count("--concurrency")
        if not _is_count(self.repeat) or self.repeat > REPEAT_MAX:
            raise UsageError(MSG_BAD_REPEAT)
        if self.sample is not None and not _is_count(self.sample):
            raise UsageError(MSG_BAD_SAMPLE)
        if self.seed is not None and not _is_seed(self.seed):
            raise UsageError(MSG_BAD_SEED)
        if any(not isinstance(p, str) or not p for p in self.filters):
            raise UsageError(MSG_EMPTY_FILTER)
        if any(not isinstance(t, str) or not t for t in self.tags):
            raise UsageError(MSG_EMPTY_TAG)
        if self.failing is not None and not self.failing:
            raise UsageError(MSG_EMPTY_FAILING)
        if self.refusal_rule is not None:
            refusal_rule_of(self.refusal_rule)
        if self.answer_match is not None:
            answer_match_of(self.answer_match)
        if self.rerank is not None and not self.assembly:
            raise UsageError(MSG_RERANK_WITHOUT_ASSEMBLY)
        if self.refusal_rule is not None and self.must_refuse is None:
            raise UsageError(MSG_RULE_WITHOUT_MUST_REFUSE)
        if self.answer_match is not None and self.answers is None:
            raise UsageError(MSG_MATCH_WITHOUT_ANSWERS)
        if self.store_dir is not None and self.no_store:
            raise UsageError(MSG_STORE_AND_NO_STORE)
        if self.resume and self.no_store:
            raise UsageError(MSG_RESUME_WITHOUT_STORE)
        if self.resume and self.repeat > 1:
            raise UsageError(MSG_RESUME_WITH_REPEAT)
        if self.seed is not None and self.sample is None:
            raise UsageError(MSG_SEED_WITHOUT_SAMPLE)
        if self.resume and self.selects:
            raise UsageError(MSG_RESUME_WITH_SELECTION)
        if self.junit_cases is not None:
            junit_cases_of(self.junit_cases)
            if self.junit is None:
                raise UsageError(MSG_JUNIT_CASES_WITHOUT_JUNIT)
        if self.otlp_endpoint is not None:
            if not self.otlp:
                raise UsageError(MSG_OTLP_ENDPOINT_WITHOUT_OTLP)
            if not self.otlp_endpoint.startswith(("http://", "https://")):
                raise UsageError(
                    MSG_OTLP_NOT_A_URL.format(endpoint=Redactor().message(self.otlp_endpoint)),
                    hint="give the collector's OTLP/HTTP base URL, e.g. "
                    "--otlp http://127.0.0.1:4318 (/v1/traces and /v1/logs are added)",
                )

    @classmethod
    def from_keywords(cls, given: Mapping[str, object]) -> RunOptions:
        """The options of a library call: each field's keyword (:attr:`Flag.keyword`,
        else its name) read as its flag reads it; a keyword not given keeps the default."""
        values: dict[str, Any] = {}
        for name, spec in RUN_FLAGS.items():
            value = given.get(spec.keyword or name, MISSING)
            if value is not MISSING:
                values[name] = value if value is None or spec.read is None else spec.read(value)
        return cls(**values)

    @property
    def selects(self) -> bool:
        """A selection flag was given: only some of the eval cases run."""
        return (
            self.sample is not None
            or bool(self.filters)
            or bool(self.tags)
            or self.failing is not None
        )

    @property
    def resolved_seed(self) -> int:
        """The seed ``--sample`` draws with: ``--seed``, else :data:`DEFAULT_SAMPLE_SEED`."""
        return DEFAULT_SAMPLE_SEED if self.seed is None else self.seed

    @property
    def resolved_refusal_rule(self) -> RefusalRule:
        """The refusal rule the run uses: ``--refusal-rule``, else ``semantic``."""
        return DEFAULT_REFUSAL_RULE if self.refusal_rule is None else self.refusal_rule

    @property
    def resolved_answer_match(self) -> AnswerMatch:
        """The answer match rule the run uses: ``--answer-match``, else ``normalized``."""
        return DEFAULT_ANSWER_MATCH if self.answer_match is None else self.answer_match

    @property
    def resolved_junit_cases(self) -> JunitCases:
        """Which per-case bounds ``--junit`` lists: ``--junit-cases``, else ``failing``."""
        return DEFAULT_JUNIT_CASES if self.junit_cases is None else self.junit_cases

    @property
    def budget_given(self) -> bool:
        """At least one ``--max-*`` flag was given."""
        return any(v is not None for v in (self.max_items, self.max_bytes, self.max_tokens))

    @property
    def budget(self) -> Budget:
        """The resolved ceilings (defaults apply even when no flag was given)."""
        return resolve_budget(self.max_items, self.max_bytes, self.max_tokens)

    @property
    def mode(self) -> Literal["baseline", "assembly"]:
        """``inputs.mode``."""
        return "assembly" if self.assembly else "baseline"

    @property
    def store_path(self) -> Path | None:
        """``--store DIR``, ``None`` for ``--no-store``, else the default ``runs/``."""
        if self.no_store:
            return None
        return Path(self.store_dir or DEFAULT_STORE_DIR)

    @property
    def records_budget(self) -> bool:
        """Whether ``inputs.budget`` is written: with ``--assembly`` or budget-given."""
        return self.assembly or self.budget_given


RUN_FLAGS: Final[dict[str, Flag]] = {
    option.name: option.metadata[FLAG] for option in fields(RunOptions) if FLAG in option.metadata
}
"""Each flag of run mode by its :class:`RunOptions` field, in the help's order."""

REQUIRED: Final = tuple(option.name for option in fields(RunOptions) if option.default is MISSING)
"""The fields the command line must give (``--eval``, ``--context``)."""


def flag_values(options: RunOptions, *names: str) -> dict[str, str | None]:
    """``{flag: value}`` of the named path fields, in that order (an error names the flag)."""
    return {RUN_FLAGS[name].name: getattr(options, name) for name in names}
