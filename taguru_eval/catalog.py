"""The metric catalog: every metric a run writes, as data, in one place.

EVALUATE.md §5.3 fixes the 31 keys, their unit, statistic, scopes and exact
``source`` strings; the descriptions and caveats are this project's prose (a
caveat exists exactly where the spec marks one). GATE_AND_COMPARE.md §3 fixes
the ten case-scoped names (the only ones a thresholds file may bound per case)
and the nine comparison names (the same list minus ``latency.passage_ms``).

Everything that needs a metric's shape — the scorer writing ``metrics``, the
gate reading an aggregate scalar, compare decoding a foreign file — asks this
module instead of guessing from a value's keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

Statistic = Literal["distribution", "ratio", "count"]

DISTRIBUTION: Final = "distribution"
RATIO: Final = "ratio"
COUNT: Final = "count"

_CASE_SCOPE: Final = ("case",)
_RUN_SCOPE: Final = ("run",)

_SEARCH = "POST /contexts/{name}/sources/search"
_RESOLVE = "POST /contexts/{name}/resolve"
_RESOLVE_LABEL = "POST /contexts/{name}/resolve_label"
_QUERY = "POST /contexts/{name}/query"
_CITATIONS = "POST /contexts/{name}/citations"
_EVIDENCE = "POST /contexts/{name}/evidence"
_LANE_CROSS = "derived from coverage.* and recall.recall_at_k"
_BUDGET = "crate::api::evidence::budget"


@dataclass(frozen=True)
class MetricDefinition:
    """One ``definitions`` entry of evaluation.json (EVALUATE.md §5.3)."""

    unit: str
    statistic: Statistic
    scopes: tuple[str, ...]
    description: str
    source: str
    caveat: str | None

    def to_json(self) -> dict[str, object]:
        """The entry as written to evaluation.json, keys in the spec's order."""
        return {
            "unit": self.unit,
            "statistic": self.statistic,
            "scopes": list(self.scopes),
            "description": self.description,
            "source": self.source,
            "caveat": self.caveat,
        }


def _dist(unit: str, source: str, description: str, caveat: str | None) -> MetricDefinition:
    # Every distribution among the 31 is measured per case (EVALUATE.md §5.3).
    return MetricDefinition(unit, "distribution", _CASE_SCOPE, description, source, caveat)


def _ratio(source: str, description: str, caveat: str | None) -> MetricDefinition:
    # Every ratio among the 31 is a run-level share.
    return MetricDefinition("ratio", "ratio", _RUN_SCOPE, description, source, caveat)


_SAME_AS_RECALL = (
    "No sample for a case that declares no expected source with relevance >= 1, "
    "or whose passage lane failed."
)

# Spec table order (EVALUATE.md §5.3); ``definitions()`` sorts for the artifact.
CATALOG: Final[Mapping[str, MetricDefinition]] = {
    "latency.passage_ms": _dist(
        "ms",
        _SEARCH,
        "Round-trip time of each case's passage-lane call, in milliseconds.",
        None,
    ),
    "latency.resolve_ms": _dist(
        "ms",
        f"{_RESOLVE}, {_RESOLVE_LABEL}",
        "Round-trip time of every resolve and resolve_label call, for cues and "
        "for association positions alike.",
        None,
    ),
    "latency.query_ms": _dist(
        "ms",
        _QUERY,
        "Round-trip time of each association query call.",
        "Empty when no case declares an association, or when none had every "
        "position pinned to a resolved name.",
    ),
    "passage.failure_rate": _ratio(
        _SEARCH,
        "Share of cases whose passage-lane call did not complete.",
        None,
    ),
    "structural.case_rate": _ratio(
        "eval.jsonl case fields",
        "Share of cases that ran the structural lane (declared concepts, labels or associations).",
        None,
    ),
    "recall.recall_at_k": _dist(
        "ratio",
        f"eval.jsonl expected_sources, {_SEARCH}",
        "Fraction of a case's judged sources found among its hits.",
        _SAME_AS_RECALL,
    ),
    "recall.mrr": _dist(
        "ratio",
        f"eval.jsonl expected_sources, {_SEARCH}",
        "Reciprocal rank of the first hit that satisfies an expected source.",
        _SAME_AS_RECALL,
    ),
    "recall.ndcg": _dist(
        "ratio",
        f"eval.jsonl expected_sources.relevance, {_SEARCH}",
        "Graded nDCG over the hits; each expectation earns credit once, at its "
        "first satisfying rank.",
        _SAME_AS_RECALL,
    ),
    "coverage.concepts": _dist(
        "ratio",
        f"eval.jsonl expected_concepts, {_RESOLVE}",
        "Fraction of expected concepts found among the names the concept cues "
        "resolved to, compared after normalize_entry folding.",
        "Empty when no case declares expected concepts.",
    ),
    "coverage.labels": _dist(
        "ratio",
        f"eval.jsonl expected_labels, {_RESOLVE_LABEL}",
        "Fraction of expected labels found among the names the label cues "
        "resolved to, compared after normalize_entry folding.",
        "Empty when no case declares expected labels.",
    ),
    "coverage.associations": _dist(
        "ratio",
        f"eval.jsonl expected_associations, {_QUERY}",
        "Fraction of expected associations whose pinned query returned at least one result.",
        "Empty when no case declares associations; a position that did not "
        "resolve counts as uncovered.",
    ),
    "citations.recall": _dist(
        "ratio",
        f"eval.jsonl expected_citations, {_SEARCH}, {_QUERY}",
        "Fraction of expected citations served by the passage hits or by the "
        "structural attributions.",
        "Empty when no case declares expected citations.",
    ),
    "citations.locator_validity": _dist(
        "ratio",
        _CITATIONS,
        "Fraction of expected citations whose locator resolved and whose "
        "declared section and quote matched.",
        "Empty when no case declares expected citations.",
    ),
    "citations.resolved": _ratio(
        _CITATIONS,
        "Share of citation checks that resolved.",
        None,
    ),
    "citations.no_source": _ratio(
        _CITATIONS,
        "Share of citation checks that failed with code no_source.",
        None,
    ),
    "citations.no_paragraph": _ratio(
        _CITATIONS,
        "Share of citation checks that failed with code no_paragraph.",
        None,
    ),
    "citations.other": _ratio(
        _CITATIONS,
        "Share of citation checks that failed any other way; with resolved, "
        "no_source and no_paragraph the four shares add up to 1.",
        None,
    ),
    "citations.section_match": _ratio(
        f"eval.jsonl expected_citations.section, {_CITATIONS}",
        "Share of resolved, section-declaring citation checks whose section matched.",
        "n is 0 when no expected citation declares a section.",
    ),
    "citations.quote_match": _ratio(
        f"eval.jsonl expected_citations.quote, {_CITATIONS}",
        "Share of resolved, quote-declaring citation checks whose quote matched.",
        "n is 0 when no expected citation declares a quote.",
    ),
    "latency.citation_ms": _dist(
        "ms",
        _CITATIONS,
        "Round-trip time of each citation check call, in milliseconds.",
        "Empty when no case declares expected citations.",
    ),
    "lanes.structural_hit": _ratio(
        _LANE_CROSS,
        "Share of cross-tabulated cases where the structural lane hit.",
        "Counts only cases that ran the structural lane, declared a relevant "
        "source, and whose passage lane searched.",
    ),
    "lanes.passage_hit": _ratio(
        _LANE_CROSS,
        "Share of cross-tabulated cases where the passage lane hit.",
        "Counts only cases that ran the structural lane, declared a relevant "
        "source, and whose passage lane searched.",
    ),
    "lanes.both": _ratio(
        _LANE_CROSS,
        "Share of cross-tabulated cases where both lanes hit.",
        None,
    ),
    "lanes.neither": _ratio(
        _LANE_CROSS,
        "Share of cross-tabulated cases where neither lane hit.",
        None,
    ),
    "diversity.sources": _dist(
        "source",
        f"{_SEARCH}, {_EVIDENCE}",
        "Number of distinct sources among a case's scored hits.",
        "No sample for a case whose passage or evidence lane failed.",
    ),
    "latency.evidence_ms": _dist(
        "ms",
        _EVIDENCE,
        "Round-trip time of each case's evidence call, in milliseconds.",
        "Empty in baseline mode, which makes no evidence call.",
    ),
    "budget.items_used": _dist(
        "item",
        _BUDGET,
        "Items a case's budget admitted.",
        "Only cases with a budget block contribute: every assembly case, and "
        "baseline cases when a budget flag was given.",
    ),
    "budget.bytes_used": _dist(
        "byte",
        _BUDGET,
        "Bytes a case's budget consumed, by the budget accounting rules.",
        "Only cases with a budget block contribute: every assembly case, and "
        "baseline cases when a budget flag was given.",
    ),
    "budget.tokens_used": _dist(
        "token",
        _BUDGET,
        "Estimated tokens a case's budget consumed (0.25 per ASCII scalar, 1.0 per other scalar).",
        "An estimate, not a tokenizer count; only cases with a budget block contribute.",
    ),
    "budget.omitted_rate": _ratio(
        f"{_BUDGET}, {_EVIDENCE}",
        "Share of considered candidates that a budget ceiling dropped.",
        "Duplicate-passage omissions are not counted as budget drops.",
    ),
    "rerank.ran": _ratio(
        f"{_EVIDENCE} plan.reranker",
        "Share of rerank-attempted assembled cases whose reranker actually reordered.",
        "Empty without --rerank; cases with an empty candidate pool are left out.",
    ),
}

CATALOG_KEYS: Final[frozenset[str]] = frozenset(CATALOG)

# GATE_AND_COMPARE.md §3: order matters (compare lists per-case entries in it).
CASE_SCOPED_METRICS: Final[tuple[str, ...]] = (
    "recall.recall_at_k",
    "recall.mrr",
    "recall.ndcg",
    "coverage.concepts",
    "coverage.labels",
    "coverage.associations",
    "citations.recall",
    "citations.locator_validity",
    "latency.passage_ms",
    "diversity.sources",
)

# Where each case-scoped value sits in an evaluation.json case block (§3).
# Note ``citations.locator_validity`` reads the key ``validity``.
CASE_METRIC_PATHS: Final[Mapping[str, tuple[str, ...]]] = {
    "recall.recall_at_k": ("recall", "recall_at_k"),
    "recall.mrr": ("recall", "mrr"),
    "recall.ndcg": ("recall", "ndcg"),
    "coverage.concepts": ("coverage", "concepts", "value"),
    "coverage.labels": ("coverage", "labels", "value"),
    "coverage.associations": ("coverage", "associations", "value"),
    "citations.recall": ("citations", "recall", "value"),
    "citations.locator_validity": ("citations", "validity", "value"),
    "latency.passage_ms": ("passage", "latency_ms"),
    "diversity.sources": ("diversity_sources",),
}

# Latency is noise-dominated, so compare never classifies a case by it (§3).
COMPARISON_METRICS: Final[tuple[str, ...]] = tuple(
    name for name in CASE_SCOPED_METRICS if name != "latency.passage_ms"
)

# A definition may never use these words (EVALUATE.md §5.3; a test scans them).
BANNED_WORDS: Final[tuple[str, ...]] = (
    "fused",
    "combined",
    "unified",
    "composite",
    "blended",
    "normalized_score",
)


def definitions(
    extra: Mapping[str, MetricDefinition] | None = None,
) -> dict[str, dict[str, object]]:
    """The ``definitions`` map of evaluation.json, keys ascending (byte order).

    ``extra`` adds a run's additional metrics (ABSTENTION.md §3.7 with
    ``--must-refuse``); it may not redefine one of the 31.
    """
    merged = _merged(extra)
    return {name: merged[name].to_json() for name in sorted(merged)}


def statistic_of(name: str, extra: Mapping[str, MetricDefinition] | None = None) -> Statistic:
    """The statistic (value shape) of a metric; ``KeyError`` for an unknown name."""
    return _merged(extra)[name].statistic


def statistics(extra: Mapping[str, MetricDefinition] | None = None) -> dict[str, Statistic]:
    """Metric name -> statistic for the whole catalog (plus ``extra``)."""
    return {name: definition.statistic for name, definition in _merged(extra).items()}


def _merged(extra: Mapping[str, MetricDefinition] | None) -> Mapping[str, MetricDefinition]:
    if not extra:
        return CATALOG
    clash = sorted(CATALOG_KEYS.intersection(extra))
    if clash:
        raise ValueError(f"extra metric definitions redefine catalog metrics: {clash}")
    return {**CATALOG, **extra}
