"""Run-mode options: every flag of EVALUATE.md §2.2 as one frozen value.

The CLI builds a :class:`RunOptions` from ``argv``; the library API builds one
from keyword arguments. Either way the value checks itself when it is made:
a count that is not a positive integer, a rule that is neither ``semantic``
nor ``any``, or flags that do not go together is a :class:`UsageError` worded
as §2.2 words it, so a library caller meets the command line's rules, types and
messages. Budget resolution (§2.2) lives here so the artifact, the lanes and
the console lines read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from taguru_eval._base.redact import Redactor
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
    return UsageError(f"{flag} needs a positive integer")


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

    eval_path: str
    context: str
    url: str | None = None
    config: str | None = None
    out: str = DEFAULT_OUT
    thresholds: str | None = None
    assembly: bool = False
    max_items: int | None = None
    max_bytes: int | None = None
    max_tokens: int | None = None
    rerank: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    must_refuse: str | None = None
    refusal_rule: RefusalRule | None = None
    answers: str | None = None
    answer_match: AnswerMatch | None = None
    store_dir: str | None = None
    no_store: bool = False
    junit: str | None = None
    junit_cases: JunitCases | None = None
    summary: str | None = None
    summary_base: str | None = None
    step_summary: bool = True
    quiet: bool = False
    resume: bool = False
    repeat: int = DEFAULT_REPEAT
    otlp: bool = False
    otlp_endpoint: str | None = None
    mlflow: bool = False
    sample: int | None = None
    seed: int | None = None
    filters: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    failing: str | None = None

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
