"""The metric catalog: every metric a run writes, as data, in one place.

EVALUATE.md §5.3 fixes the 31 keys, their unit, statistic, scopes and exact
``source`` strings; the descriptions and caveats are this project's prose (a
caveat exists exactly where the spec marks one). GATE_AND_COMPARE.md §3 fixes
the ten case-scoped names (the only ones a thresholds file may bound per case)
and the nine comparison names (the same list minus ``latency.passage_ms``).

A metric measured once per case also says where that value lives (its
:class:`CaseField`: the ``cases`` column and the path inside an evaluation.json
case block), whether a thresholds file may bound it per case, whether compare
classifies cases by it, and which way is better. Everything else derives from
these entries: the scorer's per-case samples, the artifact writer and reader,
the gate, both compare readers and the drift frames iterate a
:class:`Catalog` (default :data:`CATALOG`) instead of listing metrics again,
and a metric's shape is always its ``statistic``, never guessed from a value's
keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import polars as pl

from taguru_eval import contract

Statistic = Literal["distribution", "ratio", "count"]

DISTRIBUTION: Final = "distribution"
RATIO: Final = "ratio"
COUNT: Final = "count"

_CASE_SCOPE: Final = ("case",)
_RUN_SCOPE: Final = ("run",)

_SEARCH = contract.SEARCH
_RESOLVE = contract.RESOLVE
_RESOLVE_LABEL = contract.RESOLVE_LABEL
_QUERY = contract.QUERY
_CITATIONS = contract.CITATIONS
_EVIDENCE = contract.EVIDENCE
_LANE_CROSS = "derived from coverage.* and recall.recall_at_k"
_BUDGET = "crate::api::evidence::budget"


SCALAR_FIELD: Final[Mapping[str, str]] = {
    "distribution": "mean",
    "ratio": "value",
    "count": "value",
}
"""The field of a metric value that the gate and compare read (GATE_AND_COMPARE.md §2.3)."""


@dataclass(frozen=True)
class CaseField:
    """Where a metric's per-case value lives: a ``cases`` column and a case-block path.

    ``block`` names the ``cases`` column whose non-null value means the
    artifact writes the block holding the value (default: the value's own
    column). ``lane`` marks a value the artifact copies from the lane output
    (the passage, evidence and budget blocks) rather than from the cases row.
    """

    column: str
    path: tuple[str, ...]
    dtype: pl.DataType = field(default_factory=pl.Float64)
    block: str | None = None
    lane: bool = False

    @property
    def written_when(self) -> str:
        """The column whose non-null value means the value's block exists."""
        return self.block or self.column


@dataclass(frozen=True)
class MetricDefinition:
    """One ``definitions`` entry of evaluation.json (EVALUATE.md §5.3), plus how it is used.

    ``per_case`` is set for a metric with one value per case; ``bounded_per_case``
    lets a thresholds file bound it per case (GATE_AND_COMPARE.md §3);
    ``compared`` makes compare classify cases by it; ``higher_is_better`` is
    its direction (None: neither, e.g. budget spent).
    """

    unit: str
    statistic: Statistic
    scopes: tuple[str, ...]
    description: str
    source: str
    caveat: str | None
    per_case: CaseField | None = None
    bounded_per_case: bool = False
    compared: bool = False
    higher_is_better: bool | None = None

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


def _dist(
    unit: str,
    source: str,
    description: str,
    caveat: str | None,
    *,
    per_case: CaseField | None = None,
    bounded: bool = False,
    compared: bool = False,
    higher_is_better: bool | None = None,
) -> MetricDefinition:
    # Every distribution among the 31 is measured per case (EVALUATE.md §5.3).
    return MetricDefinition(
        unit,
        "distribution",
        _CASE_SCOPE,
        description,
        source,
        caveat,
        per_case=per_case,
        bounded_per_case=bounded,
        compared=compared,
        higher_is_better=higher_is_better,
    )


def _ratio(
    source: str, description: str, caveat: str | None, *, higher_is_better: bool | None = True
) -> MetricDefinition:
    # Every ratio among the 31 is a run-level share.
    return MetricDefinition(
        "ratio", "ratio", _RUN_SCOPE, description, source, caveat, higher_is_better=higher_is_better
    )


_RECALL_BLOCK: Final = "recall_expected_total"
_CITATIONS_BLOCK: Final = "citations_expected_total"


def _coverage(name: str) -> CaseField:
    return CaseField(
        f"coverage_{name}", ("coverage", name, "value"), block=f"coverage_{name}_expected"
    )


def _budget(name: str) -> CaseField:
    return CaseField(f"budget_{name}", ("budget", name), pl.Int64(), lane=True)


_SAME_AS_RECALL = (
    "No sample for a case that declares no expected source with relevance >= 1, "
    "or whose passage lane failed."
)

# Spec table order (EVALUATE.md §5.3); ``definitions()`` sorts for the artifact.
_METRICS: Final[Mapping[str, MetricDefinition]] = {
    "latency.passage_ms": _dist(
        "ms",
        _SEARCH,
        "Round-trip time of each case's passage-lane call, in milliseconds.",
        None,
        per_case=CaseField("passage_latency_ms", ("passage", "latency_ms"), pl.Int64(), lane=True),
        bounded=True,
        higher_is_better=False,
    ),
    "latency.resolve_ms": _dist(
        "ms",
        f"{_RESOLVE}, {_RESOLVE_LABEL}",
        "Round-trip time of every resolve and resolve_label call, for cues and "
        "for association positions alike.",
        None,
        higher_is_better=False,
    ),
    "latency.query_ms": _dist(
        "ms",
        _QUERY,
        "Round-trip time of each association query call.",
        "Empty when no case declares an association, or when none had every "
        "position pinned to a resolved name.",
        higher_is_better=False,
    ),
    "passage.failure_rate": _ratio(
        _SEARCH,
        "Share of cases whose passage-lane call did not complete.",
        None,
        higher_is_better=False,
    ),
    "structural.case_rate": _ratio(
        "eval.jsonl case fields",
        "Share of cases that ran the structural lane (declared concepts, labels or associations).",
        None,
        higher_is_better=None,
    ),
    "recall.recall_at_k": _dist(
        "ratio",
        f"eval.jsonl expected_sources, {_SEARCH}",
        "Fraction of a case's judged sources found among its hits.",
        _SAME_AS_RECALL,
        per_case=CaseField("recall_at_k", ("recall", "recall_at_k"), block=_RECALL_BLOCK),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "recall.mrr": _dist(
        "ratio",
        f"eval.jsonl expected_sources, {_SEARCH}",
        "Reciprocal rank of the first hit that satisfies an expected source.",
        _SAME_AS_RECALL,
        per_case=CaseField("mrr", ("recall", "mrr"), block=_RECALL_BLOCK),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "recall.ndcg": _dist(
        "ratio",
        f"eval.jsonl expected_sources.relevance, {_SEARCH}",
        "Graded nDCG over the hits; each expectation earns credit once, at its "
        "first satisfying rank.",
        _SAME_AS_RECALL,
        per_case=CaseField("ndcg", ("recall", "ndcg"), block=_RECALL_BLOCK),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "coverage.concepts": _dist(
        "ratio",
        f"eval.jsonl expected_concepts, {_RESOLVE}",
        "Fraction of expected concepts found among the names the concept cues "
        "resolved to, compared after normalize_entry folding.",
        "Empty when no case declares expected concepts.",
        per_case=_coverage("concepts"),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "coverage.labels": _dist(
        "ratio",
        f"eval.jsonl expected_labels, {_RESOLVE_LABEL}",
        "Fraction of expected labels found among the names the label cues "
        "resolved to, compared after normalize_entry folding.",
        "Empty when no case declares expected labels.",
        per_case=_coverage("labels"),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "coverage.associations": _dist(
        "ratio",
        f"eval.jsonl expected_associations, {_QUERY}",
        "Fraction of expected associations whose pinned query returned at least one result.",
        "Empty when no case declares associations; a position that did not "
        "resolve counts as uncovered.",
        per_case=_coverage("associations"),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "citations.recall": _dist(
        "ratio",
        f"eval.jsonl expected_citations, {_SEARCH}, {_QUERY}",
        "Fraction of expected citations served by the passage hits or by the "
        "structural attributions.",
        "Empty when no case declares expected citations.",
        per_case=CaseField(
            "citations_recall", ("citations", "recall", "value"), block=_CITATIONS_BLOCK
        ),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "citations.locator_validity": _dist(
        "ratio",
        _CITATIONS,
        "Fraction of expected citations whose locator resolved and whose "
        "declared section and quote matched.",
        "Empty when no case declares expected citations.",
        per_case=CaseField(
            "citations_locator_validity",
            ("citations", "validity", "value"),
            block=_CITATIONS_BLOCK,
        ),
        bounded=True,
        compared=True,
        higher_is_better=True,
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
        higher_is_better=False,
    ),
    "citations.no_paragraph": _ratio(
        _CITATIONS,
        "Share of citation checks that failed with code no_paragraph.",
        None,
        higher_is_better=False,
    ),
    "citations.other": _ratio(
        _CITATIONS,
        "Share of citation checks that failed any other way; with resolved, "
        "no_source and no_paragraph the four shares add up to 1.",
        None,
        higher_is_better=False,
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
        higher_is_better=False,
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
        higher_is_better=False,
    ),
    "diversity.sources": _dist(
        "source",
        f"{_SEARCH}, {_EVIDENCE}",
        "Number of distinct sources among a case's scored hits.",
        "No sample for a case whose passage or evidence lane failed.",
        per_case=CaseField("diversity_sources", ("diversity_sources",), pl.Int64()),
        bounded=True,
        compared=True,
        higher_is_better=True,
    ),
    "latency.evidence_ms": _dist(
        "ms",
        _EVIDENCE,
        "Round-trip time of each case's evidence call, in milliseconds.",
        "Empty in baseline mode, which makes no evidence call.",
        per_case=CaseField(
            "evidence_latency_ms", ("evidence", "latency_ms"), pl.Int64(), lane=True
        ),
        higher_is_better=False,
    ),
    "budget.items_used": _dist(
        "item",
        _BUDGET,
        "Items a case's budget admitted.",
        "Only cases with a budget block contribute: every assembly case, and "
        "baseline cases when a budget flag was given.",
        per_case=_budget("items_used"),
    ),
    "budget.bytes_used": _dist(
        "byte",
        _BUDGET,
        "Bytes a case's budget consumed, by the budget accounting rules.",
        "Only cases with a budget block contribute: every assembly case, and "
        "baseline cases when a budget flag was given.",
        per_case=_budget("bytes_used"),
    ),
    "budget.tokens_used": _dist(
        "token",
        _BUDGET,
        "Estimated tokens a case's budget consumed (0.25 per ASCII scalar, 1.0 per other scalar).",
        "An estimate, not a tokenizer count; only cases with a budget block contribute.",
        per_case=_budget("tokens_used"),
    ),
    "budget.omitted_rate": _ratio(
        f"{_BUDGET}, {_EVIDENCE}",
        "Share of considered candidates that a budget ceiling dropped.",
        "Duplicate-passage omissions are not counted as budget drops.",
        higher_is_better=False,
    ),
    "rerank.ran": _ratio(
        f"{_EVIDENCE} plan.reranker",
        "Share of rerank-attempted assembled cases whose reranker actually reordered.",
        "Empty without --rerank; cases with an empty candidate pool are left out.",
        higher_is_better=None,
    ),
}

# GATE_AND_COMPARE.md §3 order for the ten case-scoped metrics (compare lists
# per-case entries in it), then the per-case values only aggregates use.
_CASE_ORDER: Final = (
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
    "latency.evidence_ms",
    "budget.items_used",
    "budget.bytes_used",
    "budget.tokens_used",
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


class Catalog(Mapping[str, MetricDefinition]):
    """A set of metric definitions (name -> :class:`MetricDefinition`) with the
    order in which per-case metrics are listed.

    :data:`CATALOG` is the 31 metrics of EVALUATE.md §5.3; a run with more
    metrics (ABSTENTION.md §3.7) uses :meth:`with_metrics`. Readers and
    writers take a ``Catalog`` argument defaulting to :data:`CATALOG`, so a
    metric declared here reaches all of them.
    """

    def __init__(self, metrics: Mapping[str, MetricDefinition], case_order: Sequence[str]) -> None:
        unordered = sorted(
            name for name, metric in metrics.items() if metric.per_case and name not in case_order
        )
        missing = sorted(set(case_order) - set(metrics))
        if unordered or missing:
            raise ValueError(f"per-case order and metrics disagree: {unordered or missing}")
        self._metrics = dict(metrics)
        self._case_order = tuple(case_order)

    def __getitem__(self, name: str) -> MetricDefinition:
        return self._metrics[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._metrics)

    def __len__(self) -> int:
        return len(self._metrics)

    def with_metrics(self, extra: Mapping[str, MetricDefinition]) -> Catalog:
        """This catalog plus ``extra``, which may not redefine a metric; per-case
        ones are listed after this catalog's."""
        clash = sorted(set(self._metrics).intersection(extra))
        if clash:
            raise ValueError(f"extra metric definitions redefine catalog metrics: {clash}")
        added = tuple(name for name, metric in extra.items() if metric.per_case)
        return Catalog({**self._metrics, **extra}, (*self._case_order, *added))

    @property
    def names(self) -> frozenset[str]:
        """Every metric name."""
        return frozenset(self._metrics)

    @property
    def per_case(self) -> Mapping[str, CaseField]:
        """Metric -> where its per-case value lives, in per-case order."""
        fields = {}
        for name in self._case_order:
            case_field = self._metrics[name].per_case
            assert case_field is not None
            fields[name] = case_field
        return fields

    @property
    def case_scoped(self) -> tuple[str, ...]:
        """The metrics a thresholds file may bound per case (GATE_AND_COMPARE.md §3)."""
        return tuple(name for name in self._case_order if self._metrics[name].bounded_per_case)

    @property
    def compared(self) -> tuple[str, ...]:
        """The metrics compare classifies a case by, in §3 order."""
        return tuple(name for name in self._case_order if self._metrics[name].compared)

    def statistics(self) -> dict[str, Statistic]:
        """Metric name -> statistic."""
        return {name: metric.statistic for name, metric in self._metrics.items()}

    def definitions(self) -> dict[str, dict[str, object]]:
        """The ``definitions`` map of evaluation.json, keys ascending (byte order)."""
        return {name: self._metrics[name].to_json() for name in sorted(self._metrics)}


CATALOG: Final = Catalog(_METRICS, _CASE_ORDER)
"""The 31 metrics every run writes (EVALUATE.md §5.3)."""

# ---------------------------------------------------------------- must-refuse (ABSTENTION.md §3.7)

_MUST_REFUSE = f"must-refuse file, {_SEARCH}, {_RESOLVE}, {_EVIDENCE}"
_ANSWERABLE = f"eval.jsonl expected_sources, {_SEARCH}, {_EVIDENCE}"
_RULE_CAVEAT = (
    "The verdict follows the run's --refusal-rule: under 'semantic' a passage probe abstains "
    "only when the server's vector lane ran and no served hit carries lanes.vector (the bar "
    "is the effective semantic floor the server reports, never a score read here); a probe "
    "that cannot be judged is undetermined and left out of the denominator."
)
_ANSWERABLE_CAVEAT = (
    "Over eval.jsonl cases that declare a relevant source and whose passage lane completed, "
    "with the passage-probe rule and floor of the must-refuse probes applied to each case's "
    "own served hits; undetermined cases are left out of the denominator."
)


def _share(
    source: str, description: str, caveat: str, *, higher_is_better: bool | None
) -> MetricDefinition:
    return MetricDefinition(
        "ratio",
        RATIO,
        _RUN_SCOPE,
        description,
        source,
        caveat,
        higher_is_better=higher_is_better,
    )


def _count(
    unit: str, source: str, description: str, caveat: str, *, higher_is_better: bool | None
) -> MetricDefinition:
    return MetricDefinition(
        unit, COUNT, _RUN_SCOPE, description, source, caveat, higher_is_better=higher_is_better
    )


ABSTENTION_METRICS: Final[Mapping[str, MetricDefinition]] = {
    "abstention.refusal_rate": _share(
        _MUST_REFUSE,
        "Share of must-refuse cases with a determinate verdict where every probe abstained.",
        _RULE_CAVEAT,
        higher_is_better=True,
    ),
    "abstention.false_answers": _count(
        "case",
        _MUST_REFUSE,
        "Must-refuse cases for which some probe surfaced evidence; n is the determinate cases.",
        f"{_RULE_CAVEAT} The value is null when no case was determinate.",
        higher_is_better=False,
    ),
    "abstention.passage.refusal_rate": _share(
        f"must-refuse file, {_SEARCH}, {_EVIDENCE}",
        "Share of must-refuse cases whose passage (or, under --assembly, evidence) probe "
        "abstained, over those whose probe was determinate.",
        f"{_RULE_CAVEAT} The verdict covers the served window (limit) only.",
        higher_is_better=True,
    ),
    "abstention.structural.refusal_rate": _share(
        f"must-refuse file cues, {_RESOLVE}",
        "Share of must-refuse cases with cues whose every cue resolved to no name, over "
        "those whose structural probe was determinate.",
        "Containment matching is never floored: a cue that shares a spelling with any stored "
        "name surfaces it. Write the missing entity as the cue, not the question.",
        higher_is_better=True,
    ),
    "abstention.out_of_corpus.refusal_rate": _share(
        _MUST_REFUSE,
        "Share of determinate must-refuse cases of kind out_of_corpus where every probe abstained.",
        _RULE_CAVEAT,
        higher_is_better=True,
    ),
    "abstention.adjacent.refusal_rate": _share(
        _MUST_REFUSE,
        "Share of determinate must-refuse cases of kind adjacent where every probe abstained.",
        f"{_RULE_CAVEAT} Adjacent questions usually surface related text on a correct "
        "retriever; watch this as a trend rather than gating it strictly.",
        higher_is_better=True,
    ),
    "abstention.undetermined_rate": _share(
        _MUST_REFUSE,
        "Share of must-refuse cases no probe could judge (e.g. the vector lane did not run).",
        "Undetermined is never counted as abstained.",
        higher_is_better=False,
    ),
    "abstention.failure_rate": _share(
        _MUST_REFUSE,
        "Share of must-refuse cases whose probe calls failed without any probe surfacing.",
        "A failed call is neither abstained nor surfaced.",
        higher_is_better=False,
    ),
    "answerability.offered_rate": _share(
        _ANSWERABLE,
        "Share of determinate answerable cases for which retrieval offered evidence (did not "
        "abstain) under the must-refuse rule — an answer-rate analogue; never gate on it alone.",
        _ANSWERABLE_CAVEAT,
        higher_is_better=None,
    ),
    "answerability.supported_rate": _share(
        _ANSWERABLE,
        "Share of determinate answerable cases that were offered and whose served hits "
        "included an expected source.",
        _ANSWERABLE_CAVEAT,
        higher_is_better=True,
    ),
    "answerability.unsupported_offer_rate": _share(
        _ANSWERABLE,
        "Share of determinate answerable cases that were offered but whose served hits "
        "included no expected source.",
        f"{_ANSWERABLE_CAVEAT} With supported_rate and false_refusal_rate it partitions "
        "one population.",
        higher_is_better=False,
    ),
    "answerability.false_refusal_rate": _share(
        _ANSWERABLE,
        "Share of determinate answerable cases on which the must-refuse rule abstained.",
        f"{_ANSWERABLE_CAVEAT} The trade-off partner of abstention.passage.refusal_rate.",
        higher_is_better=False,
    ),
    "answerability.supported_when_offered": _share(
        _ANSWERABLE,
        "Share of offered answerable cases whose served hits included an expected source.",
        f"{_ANSWERABLE_CAVEAT} Its denominator is the offered cases only: read it beside "
        "supported_rate, never alone.",
        higher_is_better=True,
    ),
    "answerability.refused_with_expected_present": _count(
        "case",
        _ANSWERABLE,
        "Answerable cases the rule abstained on although their served hits included an "
        "expected source (the rule discarded right evidence); n is the abstained cases.",
        f"{_ANSWERABLE_CAVEAT} The value is null when no case abstained.",
        higher_is_better=False,
    ),
    "answerability.undetermined_rate": _share(
        _ANSWERABLE,
        "Share of answerable cases the must-refuse rule could not judge.",
        "Undetermined is never counted as offered or abstained.",
        higher_is_better=False,
    ),
}
"""The metrics a run with --must-refuse adds (ABSTENTION.md §3.7); all run scope."""

MUST_REFUSE_CATALOG: Final = CATALOG.with_metrics(ABSTENTION_METRICS)
"""The catalog of a run given --must-refuse: the 31 plus :data:`ABSTENTION_METRICS`."""

ABSTENTION_PREFIXES: Final = ("abstention.", "answerability.")
"""Metric-name prefixes that only exist with --must-refuse."""

# ---------------------------------------------------------------- answer evidence (--answers)

_ANSWERS_SOURCE = f"answers file, {_SEARCH}, {_EVIDENCE}"
_ANSWERS_CAVEAT = (
    "Over the cases the answers file lists whose passage (or, under --assembly, evidence) "
    "lane completed; the window is the hits served up to the case's limit, and only an "
    "admitted passage item's text is checked under --assembly. The match rule is "
    "inputs.answers.match."
)
ANSWERS_BLOCK: Final = "answers_declared"
"""The ``cases`` column whose non-null value means a case block has ``answers``."""


def _answers(column: str, key: str, description: str) -> MetricDefinition:
    return MetricDefinition(
        "ratio",
        DISTRIBUTION,
        _CASE_SCOPE,
        description,
        _ANSWERS_SOURCE,
        _ANSWERS_CAVEAT,
        per_case=CaseField(column, ("answers", key), block=ANSWERS_BLOCK),
        compared=True,
        higher_is_better=True,
    )


ANSWERS_METRICS: Final[Mapping[str, MetricDefinition]] = {
    "answers.hit_at_k": _answers(
        "answers_hit_at_k",
        "hit_at_k",
        "1 when some declared answer is found in a hit's text within the case's limit, else 0 "
        "(top-k retrieval accuracy).",
    ),
    "answers.mrr": _answers(
        "answers_mrr",
        "mrr",
        "Reciprocal rank of the first hit whose text holds a declared answer; 0 when none does.",
    ),
    "answers.coverage": _answers(
        "answers_coverage",
        "coverage",
        "Fraction of a case's declared answers found in some hit's text within its limit.",
    ),
}
"""The metrics a run with --answers adds: per-case distributions, bounded in aggregate only."""

ANSWERS_PREFIX: Final = "answers."
"""The metric-name prefix that only exists with --answers."""


# ---------------------------------------------------------------- stability (--repeat)

CASE_VALUE_EPSILON: Final = 1e-9
"""Two values of one per-case metric within this (absolute) are the same value:
compare's "unchanged" (GATE_AND_COMPARE.md §6.4) and, across a case's
repetitions, what makes it stable."""

STABILITY_BLOCK: Final = "stability_repeats"
"""The ``cases`` column whose non-null value means a case block has ``stability``
(a run given ``--repeat N`` with N > 1): the case's number of repetitions."""
STABILITY_UNSTABLE: Final = "stability_unstable"
"""The ``cases`` column saying a compared metric differed between repetitions."""
STABILITY_DIFFERS: Final = "stability_differs"
"""The ``cases`` column listing the compared metrics that differed (compare's order)."""
STABILITY_COLUMNS: Final = (STABILITY_BLOCK, STABILITY_UNSTABLE, STABILITY_DIFFERS)

UNSTABLE_RATE: Final = "stability.unstable_rate"

STABILITY_METRICS: Final[Mapping[str, MetricDefinition]] = {
    UNSTABLE_RATE: MetricDefinition(
        "ratio",
        RATIO,
        _RUN_SCOPE,
        "Share of eval cases whose compared per-case metrics did not all take the same "
        "value in every repetition (run --repeat N): the server answered the same query "
        "differently within one corpus revision.",
        "every lane call of an eval case, sent --repeat times",
        "A case counts as stable when its N repetitions agreed; a larger N finds more "
        "unstable cases. The case's own metrics and every other aggregate are its first "
        "repetition's.",
        higher_is_better=False,
    ),
}
"""The metric a run with --repeat N (N > 1) adds: one run-scope share."""


def repetitions_of(value: object) -> int | None:
    """``inputs.repeat`` as an artifact records it: the number of times its cases
    were sent when above 1 (the run measured :data:`STABILITY_METRICS`), else None
    (absent, 1, or not an integer)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 1:
        return value
    return None


def catalog_for(*, must_refuse: bool, answers: bool, stability: bool = False) -> Catalog:
    """The catalog of a run: the 31, plus the must-refuse, answers and stability
    metrics it measures."""
    catalog = MUST_REFUSE_CATALOG if must_refuse else CATALOG
    if answers:
        catalog = catalog.with_metrics(ANSWERS_METRICS)
    return catalog.with_metrics(STABILITY_METRICS) if stability else catalog


CATALOG_KEYS: Final[frozenset[str]] = CATALOG.names
CASE_SCOPED_METRICS: Final[tuple[str, ...]] = CATALOG.case_scoped
# Latency is noise-dominated, so compare never classifies a case by it (§3).
COMPARISON_METRICS: Final[tuple[str, ...]] = CATALOG.compared


def definitions(
    extra: Mapping[str, MetricDefinition] | None = None,
) -> dict[str, dict[str, object]]:
    """The ``definitions`` map of evaluation.json, keys ascending (byte order).

    ``extra`` adds a run's additional metrics (ABSTENTION.md §3.7 with
    ``--must-refuse``); it may not redefine one of the 31.
    """
    return (CATALOG.with_metrics(extra) if extra else CATALOG).definitions()


def statistic_of(name: str, extra: Mapping[str, MetricDefinition] | None = None) -> Statistic:
    """The statistic (value shape) of a metric; ``KeyError`` for an unknown name."""
    return (CATALOG.with_metrics(extra) if extra else CATALOG)[name].statistic


def statistics(extra: Mapping[str, MetricDefinition] | None = None) -> dict[str, Statistic]:
    """Metric name -> statistic for the whole catalog (plus ``extra``)."""
    return (CATALOG.with_metrics(extra) if extra else CATALOG).statistics()


def scalar_of(value: object, statistic: str | None) -> float | None:
    """The one number a metric value is gated and compared by (§2.3), or ``None``.

    Distribution -> ``mean``; Ratio and Count -> ``value``. ``None`` when the
    field is ``null`` or missing (``n == 0``), when the value is not an object,
    or when the statistic is unknown — absent is never coerced to 0.
    """
    field_name = SCALAR_FIELD.get(statistic or "")
    if not isinstance(value, Mapping) or field_name is None:
        return None
    scalar = value.get(field_name)
    if isinstance(scalar, bool) or not isinstance(scalar, int | float):
        return None
    return float(scalar)


def scalar_expr(statistic: str = "statistic") -> pl.Expr:
    """The same scalar over a ``metrics`` table row (its ``statistic`` column
    picks the field), as a Float64 column named ``scalar``."""
    return (
        pl.coalesce(
            [
                pl.when(pl.col(statistic) == name).then(pl.col(column))
                for name, column in SCALAR_FIELD.items()
            ]
        )
        .cast(pl.Float64)
        .alias("scalar")
    )
