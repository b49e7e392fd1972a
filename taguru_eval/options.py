"""Run-mode options: every flag of EVALUATE.md §2.2 as one frozen value.

The CLI builds a :class:`RunOptions` from ``argv``; the library API builds one
from keyword arguments. Budget resolution (§2.2) lives here so the artifact,
the lanes and the console lines read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from taguru_eval.contract import ARTIFACT_NAME

DEFAULT_OUT: Final = ARTIFACT_NAME
DEFAULT_CONCURRENCY: Final = 8

DEFAULT_MAX_ITEMS: Final = 40
DEFAULT_MAX_BYTES: Final = 65_536
DEFAULT_MAX_TOKENS: Final = 4_000
CEILING_MAX_ITEMS: Final = 1_000
CEILING_MAX_BYTES: Final = 1_048_576

RefusalRule = Literal["semantic", "any"]
REFUSAL_RULES: Final[tuple[RefusalRule, ...]] = ("semantic", "any")


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
    ``store_dir`` / ``no_store`` are the project's run-store flags
    (``--store DIR`` / ``--no-store``); ``None`` + ``False`` means "the
    default store", which the runner decides. ``junit`` / ``summary`` /
    ``summary_base`` / ``step_summary`` (``--no-step-summary`` clears it) say
    which CI reports the command line writes after the run; ``quiet``
    silences the progress display.
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
    refusal_rule: RefusalRule = "semantic"
    store_dir: str | None = None
    no_store: bool = False
    junit: str | None = None
    summary: str | None = None
    summary_base: str | None = None
    step_summary: bool = True
    quiet: bool = False

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
    def records_budget(self) -> bool:
        """Whether ``inputs.budget`` is written: with ``--assembly`` or budget-given."""
        return self.assembly or self.budget_given
