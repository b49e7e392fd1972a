"""taguru's response types that more than one lane reads, declared once as msgspec Structs.

The structs hold strings, numbers and lists of structs only, so they can never
be part of a reference cycle: ``gc=False`` keeps them out of the collector's way.
"""

from __future__ import annotations

import msgspec

from taguru_eval._base.wire import F32, U32, U64


class LaneScore(msgspec.Struct, frozen=True, gc=False):
    """One lane's evidence for a passage hit."""

    rank: U64
    score: F32


class HitLanes(msgspec.Struct, frozen=True, gc=False):
    """A passage hit's ``lanes``: each lane may be absent or null."""

    bm25: LaneScore | None = None
    vector: LaneScore | None = None


class PassageHit(msgspec.Struct, frozen=True, gc=False):
    """One passage with its text and lane evidence (a search hit, an evidence item's payload)."""

    source: str
    paragraph: U32
    score: F32
    # `text` must be there for the typed shape (§3.4); only a budget measures it.
    text: str
    # Required and an object (taguru's PassageHit has no serde default there):
    # one search hit without it sends the whole page to the fallback (§3.4).
    lanes: HitLanes


class LanePlan(msgspec.Struct, frozen=True, gc=False):
    """Whether a retrieval lane ran, and why not (a search plan's or a package's)."""

    ran: bool
    reason: str | None = None
    floor: F32 | None = None


class Citation(msgspec.Struct, frozen=True, gc=False):
    """A resolved citation: the paragraph's text, its source and section."""

    text: str
    source: str
    section: str | None = None


class Attribution(msgspec.Struct, frozen=True, gc=False):
    """Where an association was learned: a source, and its paragraph when known."""

    source: str
    weight: float
    count: U64
    paragraph: U32 | None = None
    section: str | None = None


class AssociationMatch(msgspec.Struct, frozen=True, gc=False):
    """One association of a ``MatchPage`` or an evidence item."""

    subject: str
    label: str
    object: str
    weight: float
    count: U64
    attributions: list[Attribution]
