"""The reference server's data model: contexts, passages, the association graph.

Plain state with no locking and no HTTP: ``ServerState`` (state.py) owns the
lock and the revision/usage bookkeeping, the ``*_writes`` modules validate
request bodies and apply them to these objects, and the read routes render
them. Limits are taguru's (HTTP.md §6–§7).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

from taguru_eval._base.text import F32
from taguru_refserver.bm25 import PassageIndex
from taguru_refserver.envelope import MAX_LISTED_ISSUES, ApiError, Issue
from taguru_refserver.resolve import EntryIndex
from taguru_refserver.schema import InstalledSchema
from taguru_refserver.vectors import PassageVectors

Namespace = Literal["concepts", "labels"]

MAX_CONTEXT_NAME_BYTES = 64
MAX_DESCRIPTION_BYTES = 4096
MAX_NAME_BYTES = 1024  # source ids, concept/label spellings
MAX_SECTION_BYTES = 512
MAX_QUESTION_BYTES = 512
MAX_QUESTIONS_PER_PARAGRAPH = 8
MAX_LOCATOR_KIND_BYTES = 64
MAX_LOCATOR_VALUE_BYTES = 512
MAX_TAG_BYTES = 128
MAX_TAGS_PER_SOURCE = 32
MAX_PASSAGES_PER_REQUEST = 1000
MAX_ASSOCIATIONS_PER_REQUEST = 10_000
MAX_ALIAS_PAIRS_PER_REQUEST = 10_000
MAX_WEIGHT = 1e6


def byte_len(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass
class Revision:
    """``ContextRevision``: the corpus identity evaluate brackets (HTTP.md §6.3)."""

    graph: int = 0
    passages: int = 0
    config: int = 0

    def to_wire(self) -> dict[str, object]:
        return {"graph": self.graph, "passages": self.passages, "config": self.config}


@dataclass
class Usage:
    """``ContextUsage``: read and write counters with their epochs."""

    reads: int = 0
    empty_reads: int = 0
    writes: int = 0
    last_read_epoch: int = 0
    last_write_epoch: int = 0

    def to_wire(self) -> dict[str, object]:
        return {
            "reads": self.reads,
            "empty_reads": self.empty_reads,
            "writes": self.writes,
            "last_read_epoch": self.last_read_epoch,
            "last_write_epoch": self.last_write_epoch,
        }


@dataclass
class PassageRecord:
    """One stored source: its text split into paragraphs plus its markers and metadata."""

    text: str
    paragraphs: list[str]
    sections: dict[int, str]
    locators: dict[int, dict[str, str]]
    questions: dict[int, list[str]]
    tags: list[str]
    date: int | None
    stored_at: int
    _marker_indices: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._marker_indices = sorted(self.sections)

    def section_for(self, paragraph: int) -> str | None:
        """Label of the marker with the greatest index <= ``paragraph`` (HTTP.md §9.3)."""
        position = bisect.bisect_right(self._marker_indices, paragraph)
        if position == 0:
            return None
        return self.sections[self._marker_indices[position - 1]]

    def locator_for(self, paragraph: int) -> dict[str, str] | None:
        """The locator stored for exactly this paragraph, never inherited."""
        return self.locators.get(paragraph)

    @property
    def filter_time(self) -> int:
        """The time a since/until window tests: the document date, else ``stored_at``."""
        return self.date if self.date is not None else self.stored_at


@dataclass
class Attribution:
    """One source's share of an edge: raw cumulative weight, count, first paragraph."""

    weight_sum: float
    count: int
    paragraph: int | None


@dataclass
class Edge:
    """One (subject, label, object) edge; ``count == 0`` means retracted."""

    subject: str
    label: str
    object: str
    weight_sum: float = 0.0
    count: int = 0
    unsourced_count: int = 0
    unsourced_sum: float = 0.0
    attributions: dict[str, Attribution] = field(default_factory=dict)
    ordinal: int = 0  # creation order; edges are never removed, only retracted to count 0

    @property
    def live(self) -> bool:
        return self.count > 0

    @property
    def weight(self) -> float:
        """Public weight: the average per assertion (0.0 when retracted)."""
        return self.weight_sum / self.count if self.count else 0.0


class NameSpace:
    """Canonical names plus alias spellings of one namespace, and its resolve index."""

    def __init__(self) -> None:
        # canonical name -> creation ordinal (the reference's record id, which
        # breaks ties in spreading activation)
        self.canonical: dict[str, int] = {}
        self.aliases: dict[str, str] = {}
        self.index = EntryIndex()

    def lookup(self, spelling: str) -> str | None:
        """The canonical record an exact spelling names (canonical or alias), if any."""
        if spelling in self.canonical:
            return spelling
        return self.aliases.get(spelling)

    def intern(self, spelling: str) -> str:
        """The canonical name for ``spelling``, creating a record when it is new."""
        known = self.lookup(spelling)
        if known is not None:
            return known
        self.canonical[spelling] = len(self.canonical)
        self.index.add(spelling)
        return spelling


@dataclass
class ContextMeta:
    description: str = ""
    pinned: bool = False
    dice_floor: float | None = None
    semantic_floor: float | None = None

    def to_wire(self) -> dict[str, object]:
        return {
            "description": self.description,
            "pinned": self.pinned,
            "dice_floor": self.dice_floor,
            "semantic_floor": None if self.semantic_floor is None else F32(self.semantic_floor),
        }


class ContextState:
    """Everything one context holds."""

    def __init__(self, name: str, meta: ContextMeta) -> None:
        self.name = name
        self.meta = meta
        self.revision = Revision()
        self.usage = Usage()
        self.passages: dict[str, PassageRecord] = {}
        self.passage_index = PassageIndex()
        self.concepts = NameSpace()
        self.labels = NameSpace()
        self.edges: dict[tuple[str, str, str], Edge] = {}
        # concept -> every edge naming it (a self-loop once), in creation order
        self.adjacency: dict[str, list[Edge]] = {}
        self.schema: InstalledSchema | None = None
        self.vectors: PassageVectors | None = None  # the opt-in toy vector lane
        self.graph_sources: set[str] = set()  # every source ever named by an association
        self.dead_attributions = 0

    def namespace(self, which: Namespace) -> NameSpace:
        return self.concepts if which == "concepts" else self.labels

    def live_edges(self) -> list[Edge]:
        return [edge for edge in self.edges.values() if edge.live]


def issue(path: str, kind: str, expected: str, actual: str) -> Issue:
    """One ``issues[]`` entry of a refused write."""
    return Issue(path=path, kind=kind, expected=expected, actual=actual)


def check_name(issues: list[Issue], path: str, value: str, limit: int) -> None:
    """Collect an ``empty`` or ``too_long`` issue for a name field."""
    if not value:
        issues.append(issue(path, "empty", "a non-empty string", "an empty string"))
    elif byte_len(value) > limit:
        issues.append(issue(path, "too_long", f"at most {limit} bytes", f"{byte_len(value)} bytes"))


def refusal(what: str, issues: list[Issue]) -> ApiError:
    """The collect-all 400 of a write that applied nothing (HTTP.md §7.2, §7.3).

    The text is taguru 0.9.7's: ``the {what} refused {n} issue(s):`` and one
    ``- {path}: expected …, got …`` line per issue, the first 20 of them, then
    ``… and {rest} more issue(s)``, then ``; nothing was applied``.
    """
    lines = [
        f"- {item.path}: expected {item.expected}, got {item.actual}"
        for item in issues[:MAX_LISTED_ISSUES]
    ]
    if len(issues) > MAX_LISTED_ISSUES:
        lines.append(f"… and {len(issues) - MAX_LISTED_ISSUES} more issue(s)")
    listed = "\n".join(lines)
    return ApiError(
        "invalid_argument",
        f"the {what} refused {len(issues)} issue(s):\n{listed}; nothing was applied",
        issues=issues,
        integrity="nothing_written",
        retryable_after_correction=True,
    )


def refuse_empty(what: str, value: str) -> None:
    """taguru's refusal of an empty name-shaped field (``source``, ``a filter tag``…)."""
    if not value:
        raise ApiError("invalid_argument", f"{what} must not be empty; nothing was applied")


def refuse_oversized(what: str, value: str, cap: int) -> None:
    """taguru's refusal of a string field over its byte cap (``the cue``, ``after``…)."""
    size = byte_len(value)
    if size > cap:
        raise ApiError(
            "invalid_argument",
            f"{what} is {size} bytes, over the {cap}-byte cap; nothing was applied",
        )
