"""Reads over one context that more than one route serves: resolve, query, citations.

The ``/resolve``, ``/query`` and ``/citations`` routes and the evidence lanes
(HTTP.md §9.10 steps 1, 2 and 5) all go through these functions, so an
anchor, a query-lane match or an evidence citation is exactly what the
single-purpose route would have answered. Callers hold the state lock and do
their own usage counting.
"""

from __future__ import annotations

from collections.abc import Sequence

from taguru_refserver.model import ContextState, Edge, Namespace
from taguru_refserver.resolve import DEFAULT_DICE_FLOOR, Candidate
from taguru_refserver.routes_bodies import clamp_unit
from taguru_refserver.schema import SCHEMA_TYPE_LABEL

QueryRank = tuple[float, str, str, str]


def resolve_candidates(
    context: ContextState,
    which: Namespace,
    cue: str,
    limit: int,
    dice_floor: float | None,
) -> list[Candidate]:
    """Lexical candidates for ``cue``; the fuzzy floor is request > context > 0.3."""
    if dice_floor is not None:
        floor = clamp_unit(dice_floor)
    elif context.meta.dice_floor is not None:
        floor = context.meta.dice_floor
    else:
        floor = DEFAULT_DICE_FLOOR
    return context.namespace(which).index.resolve(cue, limit, floor) if limit else []


def declared_types(context: ContextState, concept: str) -> list[str]:
    """The concept's live ``schema:type`` objects, name-ordered, once a schema is
    installed (none without one): the ``types`` resolve and describe report."""
    if context.schema is None:
        return []
    touching = context.adjacency.get(concept, ())
    typed = (e for e in touching if e.live and e.subject == concept)
    return sorted({e.object for e in typed if e.label == SCHEMA_TYPE_LABEL})


def query_rank(edge: Edge) -> QueryRank:
    """``|weight|`` descending, then subject, label, object ascending (HTTP.md §9.8)."""
    return (-abs(edge.weight), edge.subject, edge.label, edge.object)


def matching_edges(
    context: ContextState,
    subjects: Sequence[str],
    labels: Sequence[str],
    objects: Sequence[str],
) -> list[Edge]:
    """Live edges whose pinned positions name them exactly (canonical or alias spelling).

    An empty position is unpinned. The result is in query rank order.
    """
    wanted: list[set[str] | None] = []
    for space, values in (
        (context.concepts, subjects),
        (context.labels, labels),
        (context.concepts, objects),
    ):
        known = (space.lookup(v) for v in values)
        wanted.append({name for name in known if name is not None} if values else None)
    want_subject, want_label, want_object = wanted
    matches = [
        edge
        for edge in _pinned_candidates(context, want_subject, want_object)
        if edge.live
        and (want_subject is None or edge.subject in want_subject)
        and (want_label is None or edge.label in want_label)
        and (want_object is None or edge.object in want_object)
    ]
    matches.sort(key=query_rank)
    return matches


def _pinned_candidates(
    context: ContextState, subjects: set[str] | None, objects: set[str] | None
) -> list[Edge]:
    """The edges worth testing: those touching a pinned concept, else every edge."""
    pinned = subjects if subjects is not None else objects
    if pinned is None:
        return list(context.edges.values())
    seen: dict[int, Edge] = {}
    for concept in pinned:
        for edge in context.adjacency.get(concept, ()):
            seen[edge.ordinal] = edge
    return list(seen.values())


def association_out(context: ContextState, edge: Edge) -> dict[str, object]:
    """``AssociationOut`` with attributions resolved against the passage store."""
    attributions: list[dict[str, object]] = []
    for source, share in edge.attributions.items():
        record = context.passages.get(source)
        section: str | None = None
        locator: dict[str, str] | None = None
        if record is not None and share.paragraph is not None:
            section = record.section_for(share.paragraph)
            locator = record.locator_for(share.paragraph)
        attributions.append(
            {
                "source": source,
                "weight": float(share.weight_sum),
                "count": share.count,
                "paragraph": share.paragraph,
                "section": section,
                "locator": None if locator is None else dict(locator),
            }
        )
    return {
        "subject": edge.subject,
        "label": edge.label,
        "object": edge.object,
        "weight": float(edge.weight),
        "count": edge.count,
        "attributions": attributions,
    }


def citation(context: ContextState, source: str, paragraph: int) -> dict[str, object] | None:
    """The ``Citation`` of one stored paragraph (HTTP.md §9.9); None when it is not stored."""
    record = context.passages.get(source)
    if record is None or paragraph >= len(record.paragraphs):
        return None
    locator = record.locator_for(paragraph)
    return {
        "text": record.paragraphs[paragraph],
        "source": source,
        "section": record.section_for(paragraph),
        "locator": None if locator is None else dict(locator),
    }
