"""The loaded eval set: the case types and :class:`EvalSet` (EVALUATE.md §1.6).

The loader decodes case lines straight into these types with msgspec
(:class:`EvalCase`, :class:`CaseOptions` and the entry types are their own
closed-object wire shapes), and the strict reader builds the same types field
by field, so the two cannot drift apart in what a loaded case is. The
``expected`` table built from them lives in :mod:`.expected`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final

import msgspec
import polars as pl

from taguru_eval._base.jsonstrict import U8_MAX, U32_MAX
from taguru_eval.contract import DEFAULT_LIMIT

U8 = Annotated[int, msgspec.Meta(ge=0, le=U8_MAX)]
U32 = Annotated[int, msgspec.Meta(ge=0, le=U32_MAX)]
U64 = Annotated[int, msgspec.Meta(ge=0)]
"""Non-negative; msgspec cannot bound above i64, so the loader checks the u64 ceiling."""
NotOnTheWire = Annotated[int, msgspec.Meta(ge=1, le=0)]
"""A field no JSON value can decode into (no integer is both >= 1 and <= 0): a case line
naming it fails decoding, as the unknown key it is, while the loaders set it themselves."""

Absent = msgspec.UnsetType
"""The type of :data:`ABSENT` (``isinstance(section, Absent)``)."""

ABSENT: Final = msgspec.UNSET
"""An expected citation's ``section`` when the key is absent (do not check).

msgspec's own "field not given" marker, so decoding keeps absent and ``null``
apart."""

SectionExpectation = str | None | Absent
"""``ABSENT`` = not checked; ``None`` = outside every section; ``str`` = exactly this."""


class ExpectedSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One ``expected_sources`` entry; empty ``paragraphs`` = any paragraph."""

    source: str
    paragraphs: tuple[U32, ...] = ()
    relevance: U8 = 1


class ExpectedAssociation(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One ``expected_associations`` entry."""

    subject: str
    label: str
    object: str


class ExpectedCitation(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One ``expected_citations`` entry (``section`` is three-valued)."""

    source: str
    paragraph: U32
    section: SectionExpectation = ABSENT
    quote: str | None = None

    @property
    def section_declared(self) -> bool:
        return self.section is not ABSENT


class CaseOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A case's ``options`` (``limit`` range-checked later by validate_limits).

    As decoded, ``floor`` is still binary64 and the u64 ceilings unchecked:
    the loader finishes both (Step F)."""

    limit: U64 | None = None
    floor: float | None = None
    tags: tuple[str, ...] = ()
    since: U64 | None = None
    until: U64 | None = None

    @property
    def effective_limit(self) -> int:
        """``options.limit`` if present, else the default 10 (§1.5)."""
        return DEFAULT_LIMIT if self.limit is None else self.limit


class EvalCase(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One loaded case (EVALUATE.md §1.6); ``line`` is its 1-based file line.

    The loader decodes a case line straight into it and then sets
    ``line`` (a key of that name in the file fails decoding, see
    :data:`NotOnTheWire`)."""

    case_id: str
    query: str
    line: NotOnTheWire = 0
    cues: tuple[str, ...] = ()
    expected_sources: tuple[ExpectedSource, ...] = ()
    expected_concepts: tuple[str, ...] = ()
    expected_labels: tuple[str, ...] = ()
    expected_associations: tuple[ExpectedAssociation, ...] = ()
    expected_citations: tuple[ExpectedCitation, ...] = ()
    options: CaseOptions = CaseOptions()

    @property
    def declares_source_expectation(self) -> bool:
        """At least one expected source with relevance >= 1."""
        return any(entry.relevance >= 1 for entry in self.expected_sources)

    @property
    def has_expectations(self) -> bool:
        """Any expected_sources or expected_concepts entry (the reference's notion)."""
        return bool(self.expected_sources or self.expected_concepts)

    @property
    def runs_structural_lane(self) -> bool:
        return bool(self.expected_concepts or self.expected_labels or self.expected_associations)

    @property
    def runs_citation_lane(self) -> bool:
        return bool(self.expected_citations)

    @property
    def effective_limit(self) -> int:
        return self.options.effective_limit


@dataclass(frozen=True, eq=False)
class EvalSet:
    """A loaded eval.jsonl: header name, cases in file order, the expected table.

    ``label`` is the ``--eval`` argument as given (``inputs.eval.path``);
    ``name`` the header's name (``inputs.eval.name``). Compared by identity:
    a DataFrame has no boolean equality.
    """

    label: str
    name: str | None
    cases: list[EvalCase]
    expected: pl.DataFrame

    @property
    def case_ids(self) -> list[str]:
        return [case.case_id for case in self.cases]
