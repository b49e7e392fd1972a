"""Evidence candidates and their reciprocal-rank fusion (HTTP.md §9.10 step 6).

Every lane's result becomes an :class:`EvidenceCandidate` carrying the wire
payload it will be served with (``AssociationOut`` or ``PassageHit``), its
lane and 1-based lane rank, its primary source and its citation locators.
:func:`fuse` groups candidates by ``candidate_id`` (the exact-key dedup),
keeps each lane's best rank, and orders the groups by Σ 1/(60 + rank)
descending, then ``kind``, then canonical key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

RRF_K = 60.0
KIND_ASSOCIATION = "association"
KIND_PASSAGE = "passage"
Locator = tuple[str, int]  # (source, paragraph)


@dataclass
class EvidenceCandidate:
    """One lane's appearance of one piece of evidence."""

    kind: str
    canonical_key: str
    lane: str
    lane_rank: int
    payload: dict[str, object]
    source: str | None  # primary source; None for an unsourced fact
    locators: set[Locator] = field(default_factory=set)

    @property
    def candidate_id(self) -> str:
        return f"{self.kind}\0{self.canonical_key}"

    @property
    def subject_label(self) -> tuple[str, str] | None:
        """(subject, label) of an association: the contradiction-group key."""
        if self.kind != KIND_ASSOCIATION:
            return None
        return (str(self.payload["subject"]), str(self.payload["label"]))

    @property
    def text(self) -> str:
        """What a reranker reads: passage text, or ``subject label object``."""
        if self.kind == KIND_ASSOCIATION:
            p = self.payload
            return f"{p['subject']} {p['label']} {p['object']}"
        return str(self.payload["text"])


def association_candidate(
    association: Mapping[str, object], lane: str, lane_rank: int
) -> EvidenceCandidate:
    """A ``graph_query``/``graph_activate`` candidate from an ``AssociationOut``."""
    attributions = association["attributions"]
    assert isinstance(attributions, list)
    key = f"{association['subject']}\0{association['label']}\0{association['object']}"
    return EvidenceCandidate(
        kind=KIND_ASSOCIATION,
        canonical_key=key,
        lane=lane,
        lane_rank=lane_rank,
        payload=dict(association),
        source=_primary_source(attributions),
        locators={
            (a["source"], a["paragraph"]) for a in attributions if a["paragraph"] is not None
        },
    )


def _primary_source(attributions: Sequence[dict[str, object]]) -> str | None:
    """The attribution with the greatest ``|weight|``; ties: smallest source, a located one."""
    if not attributions:
        return None

    def preference(a: dict[str, object]) -> tuple[float, str, bool, int]:
        paragraph = a["paragraph"]
        weight = a["weight"]
        assert isinstance(weight, float)
        if isinstance(paragraph, int):
            return (-abs(weight), str(a["source"]), False, paragraph)
        return (-abs(weight), str(a["source"]), True, 0)

    return str(min(attributions, key=preference)["source"])


def passage_candidate(context: str, hit: Mapping[str, object], lane_rank: int) -> EvidenceCandidate:
    """A passage candidate; its lane says which search lanes ranked the hit."""
    lanes = hit["lanes"]
    assert isinstance(lanes, dict)
    if "bm25" in lanes and "vector" in lanes:
        lane = "passage_fused"
    elif "vector" in lanes:
        lane = "passage_vector"
    else:
        lane = "passage_bm25"
    return EvidenceCandidate(
        kind=KIND_PASSAGE,
        canonical_key=f"{context}\0{hit['source']}\0{hit['paragraph']}",
        lane=lane,
        lane_rank=lane_rank,
        payload=dict(hit),
        source=str(hit["source"]),
    )


@dataclass
class FusedCandidate:
    """A fused group: its representative, each lane's best rank, and its fused rank."""

    candidate: EvidenceCandidate
    lane_ranks: dict[str, int]
    fused_rank: int = 0


def fuse(pool: Sequence[EvidenceCandidate]) -> tuple[list[FusedCandidate], int]:
    """Fused candidates best first, and how many pool entries folded into another.

    The representative of a group is its best-ranked appearance (ties: lane
    name); the group's locators are the union of every appearance's.
    """
    groups: dict[str, FusedCandidate] = {}
    for candidate in pool:
        group = groups.get(candidate.candidate_id)
        if group is None:
            own = replace(candidate, locators=set(candidate.locators))
            groups[candidate.candidate_id] = FusedCandidate(
                own, {candidate.lane: candidate.lane_rank}
            )
            continue
        best = group.lane_ranks.get(candidate.lane, candidate.lane_rank)
        group.lane_ranks[candidate.lane] = min(best, candidate.lane_rank)
        kept = group.candidate
        if (candidate.lane_rank, candidate.lane) < (kept.lane_rank, kept.lane):
            group.candidate = replace(candidate, locators=kept.locators | candidate.locators)
        else:
            kept.locators |= candidate.locators

    def score(group: FusedCandidate) -> float:
        return sum(1.0 / (RRF_K + group.lane_ranks[lane]) for lane in sorted(group.lane_ranks))

    fused = sorted(
        groups.values(),
        key=lambda g: (-score(g), g.candidate.kind, g.candidate.canonical_key),
    )
    for position, group in enumerate(fused, start=1):
        group.fused_rank = position
    return fused, len(pool) - len(groups)
