"""Spreading activation over a context's live graph (the evidence ``graph_activate`` lane).

HTTP.md §9.10 step 3, as the reference's ``Context::activate`` does it:
anchors start at activation 1.0 and concepts are settled best first
(highest activation, then the lower concept creation ordinal), so a concept
is settled with the activation of its single strongest path. For a settled
concept with activation ``a``, every live edge touching it scores
``a × decay × |sum|`` (``sum`` is the edge's raw cumulative weight, so
corroboration outranks one assertion of the same average) and keeps its best
score; what flows on to the neighbour is that score divided by the concept's
total ``Σ|sum|`` over its live edges, so a hub dilutes everything beyond it.
Flows below 1e-6 stop. Edges rank by score descending, then creation order.

Each activation also carries its ``path``: the concept trail from an anchor
to the settled concept that scored the edge, following the concept each
neighbour's best flow came from (``POST /contexts/{name}/activate`` returns
it; the evidence lane ignores it).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from taguru_refserver.model import ContextState, Edge

ACTIVATION_FLOOR = 1e-6
DEFAULT_DECAY = 0.5


@dataclass(frozen=True, slots=True)
class Activation:
    """One activated edge and the strength it was reached with."""

    edge: Edge
    strength: float
    path: tuple[str, ...] = ()


def activate(
    context: ContextState, anchors: Sequence[str], decay: float, limit: int
) -> list[Activation]:
    """The ``limit`` most strongly activated live edges from ``anchors`` (canonical names)."""
    return activate_page(context, anchors, decay, limit)[1]


def activate_page(
    context: ContextState, anchors: Sequence[str], decay: float, limit: int
) -> tuple[int, list[Activation]]:
    """``activate`` plus the number of edges reached before the ``limit`` cut."""
    decay = 0.0 if math.isnan(decay) else min(max(decay, 0.0), 1.0)
    ordinal = context.concepts.canonical
    best: dict[str, float] = {}
    parents: dict[str, str] = {}
    heap: list[tuple[float, int, str]] = []
    for anchor in anchors:
        if anchor in ordinal and anchor not in best:
            best[anchor] = 1.0
            heapq.heappush(heap, (-1.0, ordinal[anchor], anchor))
    settled: set[str] = set()
    strengths: dict[int, Activation] = {}
    while heap:
        negative, _, concept = heapq.heappop(heap)
        if concept in settled:
            continue
        settled.add(concept)
        activation = -negative
        live = [edge for edge in context.adjacency.get(concept, ()) if edge.live]
        total = sum(abs(edge.weight_sum) for edge in live)
        if total == 0.0:
            continue
        for edge in live:
            score = activation * decay * abs(edge.weight_sum)
            if score <= 0.0:
                continue  # a netted-out fact carries nothing
            kept = strengths.get(edge.ordinal)
            if kept is None or score > kept.strength:
                strengths[edge.ordinal] = Activation(edge, score, (concept,))
            flow = score / total
            if flow < ACTIVATION_FLOOR:
                continue
            for neighbour in (edge.subject, edge.object):
                if neighbour not in settled and flow > best.get(neighbour, 0.0):
                    best[neighbour] = flow
                    parents[neighbour] = concept
                    heapq.heappush(heap, (-flow, ordinal[neighbour], neighbour))
    ranked = sorted(strengths.values(), key=lambda a: (-a.strength, a.edge.ordinal))
    page = [
        Activation(found.edge, found.strength, _trail(parents, found.path[0]))
        for found in ranked[:limit]
    ]
    return len(ranked), page


def _trail(parents: dict[str, str], concept: str) -> tuple[str, ...]:
    """The anchor-first concept trail down to ``concept`` along the parent links."""
    trail = [concept]
    while trail[-1] in parents:
        trail.append(parents[trail[-1]])
    return tuple(reversed(trail))
