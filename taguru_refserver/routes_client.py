"""Routes taguru's own clients call beyond what ``taguru evaluate`` needs.

taguru's Python SDK and langchain-taguru's retriever reach these: the graph
walks (``activate``, ``explore``, ``describe``, ``unreachable_from``,
``recall``), the cross-context ``/recall`` and ``/query``, the whole-passage
lookup, context delete and rename, ``/flush`` and ``/metrics``. Each follows
taguru's handler of the same route (request fields, defaults, caps, refusals
and result shape). Where this server models less than taguru (assertion-time
windows, the explore and cross-context cursors, groups) a request asking for
it is refused with a 400 naming what is missing, rather than answered as if
the option had been honoured.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from starlette.responses import PlainTextResponse

from taguru_refserver.activate import DEFAULT_DECAY, activate_page
from taguru_refserver.auth import require_grant
from taguru_refserver.envelope import ApiError
from taguru_refserver.graph_reads import (
    association_out,
    declared_types,
    matching_edges,
    query_rank,
)
from taguru_refserver.model import (
    MAX_CONTEXT_NAME_BYTES,
    MAX_NAME_BYTES,
    ContextState,
    Edge,
    byte_len,
    refuse_empty,
    refuse_oversized,
)
from taguru_refserver.routes_bodies import Fields, over_limit
from taguru_refserver.routes_common import Call, RouteSpec
from taguru_refserver.routes_read import (
    DEFAULT_QUERY_LIMIT,
    MAX_LIST_ITEMS,
    MAX_MATCH_LIMIT,
    _decode_cursor,
)

DEFAULT_ACTIVATE_LIMIT = 20
DEFAULT_EXPLORE_LIMIT = 100
MAX_EXPLORE_DEPTH = 10  # taguru's hop ceiling, applied even when max_depth is omitted


def _origins(fields: Fields) -> list[str]:
    """The required ``origins`` list, capped like every list-shaped request field."""
    fields.required("origins")
    origins = fields.str_list("origins")
    if len(origins) > MAX_LIST_ITEMS:
        raise over_limit("origins", len(origins), MAX_LIST_ITEMS)
    return origins


def _refuse_window(fields: Fields) -> None:
    """``since``/``until`` re-derive the graph from dated sources (taguru's ADR 0011).

    This server keeps no per-assertion dates, so a windowed read would come
    back unwindowed; saying so beats an answer that looks filtered.
    """
    since = fields.opt_uint("since", "u64")
    until = fields.opt_uint("until", "u64")
    if since is not None or until is not None:
        raise ApiError(
            "invalid_argument",
            "the reference server does not model assertion-time windows; omit 'since' and 'until'",
        )


def _anchors(context: ContextState, origins: list[str]) -> list[str]:
    """Canonical concepts the origins name (alias spellings resolve, unknown ones drop)."""
    anchors: list[str] = []
    for origin in origins:
        canonical = context.concepts.lookup(origin)
        if canonical is not None and canonical not in anchors:
            anchors.append(canonical)
    return anchors


# -- graph walks -------------------------------------------------------------


def activate(call: Call) -> object:
    """``POST /contexts/{name}/activate``: spreading activation, strongest first."""
    fields = Fields(call.body, what="struct ActivateRequest")
    origins = _origins(fields)
    decay = fields.opt_float("decay")
    requested_limit = fields.opt_uint("limit", "usize")
    _refuse_window(fields)
    limit = min(
        DEFAULT_ACTIVATE_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT
    )
    with call.state.lock:
        context = call.state.context(call.name)
        total, found = activate_page(
            context,
            _anchors(context, origins),
            DEFAULT_DECAY if decay is None else decay,
            limit,
        )
        matches = [
            {
                "strength": activation.strength,
                "path": list(activation.path),
                "association": association_out(context, activation.edge),
            }
            for activation in found
        ]
        call.state.count_read(context, empty=total == 0)
    return {"total": total, "matches": matches}


def explore(call: Call) -> object:
    """``POST /contexts/{name}/explore``: breadth-first walk, nearest first.

    Every live edge reachable within ``max_depth`` hops (capped at 10), with
    the hop it was first reached at and the concept trail leading there;
    ordered by distance, then (subject, label, object), the key taguru pages
    explore by. Labels never connect.
    """
    fields = Fields(call.body, what="struct ExploreRequest")
    origins = _origins(fields)
    max_depth = fields.opt_uint("max_depth", "usize")
    requested_limit = fields.opt_uint("limit", "usize")
    if fields.present("after"):
        raise ApiError(
            "invalid_argument",
            "the reference server does not page explore; omit 'after' and raise 'limit'",
        )
    _refuse_window(fields)
    depth = MAX_EXPLORE_DEPTH if max_depth is None else min(max_depth, MAX_EXPLORE_DEPTH)
    limit = min(
        DEFAULT_EXPLORE_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT
    )
    with call.state.lock:
        context = call.state.context(call.name)
        reached = _walk(context, _anchors(context, origins), depth)
        matches = [
            {
                "distance": distance,
                "path": path,
                "association": association_out(context, edge),
            }
            for distance, edge, path in reached[:limit]
        ]
        call.state.count_read(context, empty=not reached)
    return {"total": len(reached), "matches": matches}


def _walk(
    context: ContextState, anchors: list[str], max_depth: int
) -> list[tuple[int, Edge, list[str]]]:
    distances = {anchor: 0 for anchor in anchors}
    parents: dict[str, str] = {}
    frontier = deque(anchors)
    first_seen: dict[int, tuple[int, Edge, str]] = {}
    while frontier:
        concept = frontier.popleft()
        hop = distances[concept] + 1
        if hop > max_depth:
            continue
        for edge in _touching(context, concept):
            first_seen.setdefault(edge.ordinal, (hop, edge, concept))
            for neighbour in (edge.subject, edge.object):
                if neighbour not in distances:
                    distances[neighbour] = hop
                    parents[neighbour] = concept
                    frontier.append(neighbour)
    ordered = sorted(
        first_seen.values(),
        key=lambda seen: (seen[0], seen[1].subject, seen[1].label, seen[1].object),
    )
    return [(hop, edge, _trail(parents, via)) for hop, edge, via in ordered]


def _touching(context: ContextState, concept: str) -> list[Edge]:
    """Live edges on ``concept``: as subject first, then as object (a self-loop once)."""
    live = [edge for edge in context.adjacency.get(concept, ()) if edge.live]
    outgoing = [edge for edge in live if edge.subject == concept]
    return outgoing + [edge for edge in live if edge.subject != concept]


def _trail(parents: dict[str, str], concept: str) -> list[str]:
    trail = [concept]
    while trail[-1] in parents:
        trail.append(parents[trail[-1]])
    return trail[::-1]


def describe(call: Call) -> object:
    """``POST /contexts/{name}/describe``: label counts per role; null for an unknown concept.

    Most used label first, ties in label creation order; ``types`` lists the
    concept's live ``schema:type`` objects, name-ordered, once a schema is
    installed.
    """
    fields = Fields(call.body, what="struct DescribeRequest")
    concept = fields.req_str("concept")
    with call.state.lock:
        context = call.state.context(call.name)
        canonical = context.concepts.lookup(concept)
        if canonical is None:
            call.state.count_read(context, empty=True)
            return None
        live = [edge for edge in context.adjacency.get(canonical, ()) if edge.live]
        described: dict[str, object] = {
            "concept": canonical,
            "as_subject": _tally(context, [e for e in live if e.subject == canonical]),
            "as_object": _tally(context, [e for e in live if e.object == canonical]),
        }
        types = declared_types(context, canonical)
        if types:
            described["types"] = types
        call.state.count_read(context, empty=False)
    return described


def _tally(context: ContextState, edges: list[Edge]) -> list[dict[str, object]]:
    counts: dict[str, int] = {}
    for edge in edges:
        counts[edge.label] = counts.get(edge.label, 0) + 1
    order = context.labels.canonical
    ranked = sorted(counts.items(), key=lambda item: (-item[1], order.get(item[0], 0)))
    return [{"label": label, "count": count} for label, count in ranked]


def unreachable_from(call: Call) -> object:
    """``POST /contexts/{name}/unreachable_from``: live edges no walk from the origins reaches.

    The coverage audit: paged like ``/query`` (|weight| descending, the same
    ``after`` cursor, default 100, cap 1000), ``total`` the whole count, and
    no ``plan`` (an audit, not a search).
    """
    fields = Fields(call.body, what="struct UnreachableRequest")
    origins = _origins(fields)
    requested_limit = fields.opt_uint("limit", "usize")
    cursor = _decode_cursor(fields)
    limit = min(
        DEFAULT_QUERY_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT
    )
    with call.state.lock:
        context = call.state.context(call.name)
        visited = set(_anchors(context, origins))
        frontier = deque(visited)
        while frontier:
            for edge in _touching(context, frontier.popleft()):
                for neighbour in (edge.subject, edge.object):
                    if neighbour not in visited:
                        visited.add(neighbour)
                        frontier.append(neighbour)
        unreached = sorted(
            (e for e in context.edges.values() if e.live and e.subject not in visited),
            key=query_rank,
        )
        total = len(unreached)
        if cursor is not None:
            unreached = [edge for edge in unreached if query_rank(edge) > cursor]
        matches = [association_out(context, edge) for edge in unreached[:limit]]
    return {"total": total, "matches": matches}


def recall(call: Call) -> object:
    """``POST /contexts/{name}/recall``: live edges the cue names as subject, label or object.

    Exact spelling (an alias spelling resolves); paged like ``/query``:
    |weight| descending, the same ``after`` cursor, default 100, cap 1000.
    """
    fields = Fields(call.body, what="struct RecallRequest")
    cue = fields.req_str("cue")
    requested_limit = fields.opt_uint("limit", "usize")
    cursor = _decode_cursor(fields)
    _refuse_window(fields)
    limit = min(
        DEFAULT_QUERY_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT
    )
    with call.state.lock:
        context = call.state.context(call.name)
        matches = _recalled(context, cue)
        total = len(matches)
        if cursor is not None:
            matches = [edge for edge in matches if query_rank(edge) > cursor]
        page = [association_out(context, edge) for edge in matches[:limit]]
        call.state.count_read(context, empty=not page)
    return {"total": total, "matches": page, "plan": {"contexts": [context.name]}}


def _recalled(context: ContextState, cue: str) -> list[Edge]:
    found: dict[int, Edge] = {}
    positions: tuple[tuple[list[str], list[str], list[str]], ...] = (
        ([cue], [], []),
        ([], [cue], []),
        ([], [], [cue]),
    )
    for subjects, labels, objects in positions:
        for edge in matching_edges(context, subjects, labels, objects):
            found[edge.ordinal] = edge
    return sorted(found.values(), key=query_rank)


# -- cross-context reads ---------------------------------------------------------


def cross_recall(call: Call) -> object:
    """``POST /recall``: ``/contexts/{name}/recall`` over several contexts, matches tagged."""
    fields = Fields(call.body, what="struct CrossRecallRequest")
    targets = _cross_targets(call, fields)
    cue = fields.req_str("cue")
    return _cross_page(call, fields, targets, lambda context: _recalled(context, cue))


def cross_query(call: Call) -> object:
    """``POST /query``: ``/contexts/{name}/query`` over several contexts, matches tagged.

    Weights share one scale across contexts, so the merged order is the
    per-context order (|weight| descending, then names), ties in target order.
    """
    fields = Fields(call.body, what="struct CrossQueryRequest")
    targets = _cross_targets(call, fields)
    positions = {key: fields.str_or_list(key) for key in ("subject", "label", "object")}
    if fields.str_or_list("subject_types") or fields.str_or_list("object_types"):
        raise ApiError(
            "invalid_argument", "the reference server does not filter cross queries by type"
        )
    for key, values in positions.items():
        if len(values) > MAX_LIST_ITEMS:
            raise over_limit(key, len(values), MAX_LIST_ITEMS)
    pinned = {key: [v for v in values if v] for key, values in positions.items()}
    if not any(pinned.values()):
        raise ApiError(
            "invalid_argument", "'subject', 'label', or 'object' must pin at least one value"
        )
    return _cross_page(
        call,
        fields,
        targets,
        lambda context: matching_edges(
            context, pinned["subject"], pinned["label"], pinned["object"]
        ),
    )


def _cross_targets(call: Call, fields: Fields) -> list[str]:
    """The named contexts, deduplicated in order; every one must exist and be granted."""
    if fields.str_list("groups"):
        raise ApiError("invalid_argument", "the reference server does not model groups")
    targets: list[str] = []
    for name in fields.str_list("contexts"):
        if name not in targets:
            targets.append(name)
    if not targets:
        raise ApiError("invalid_argument", "'contexts' or 'groups' must name at least one target")
    if fields.present("after"):
        raise ApiError(
            "invalid_argument",
            "the reference server does not page cross-context reads; omit 'after'",
        )
    for name in targets:
        require_grant(call.key, name)
    return targets


def _cross_page(
    call: Call,
    fields: Fields,
    targets: list[str],
    edges_of: Callable[[ContextState], list[Edge]],
) -> dict[str, object]:
    requested_limit = fields.opt_uint("limit", "usize")
    limit = min(
        DEFAULT_QUERY_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT
    )
    with call.state.lock:
        # The whole request is refused when one target is gone, as taguru refuses it.
        contexts = [call.state.context(name) for name in targets]
        ranked = sorted(
            (
                (query_rank(edge), position, context, edge)
                for position, context in enumerate(contexts)
                for edge in edges_of(context)
            ),
            key=lambda row: (row[0], row[1]),
        )
        matches = [
            {"context": context.name, **association_out(context, edge)}
            for _, _, context, edge in ranked[:limit]
        ]
        for context in contexts:
            call.state.count_read(context, empty=not any(row[2] is context for row in ranked))
    return {"total": len(ranked), "matches": matches, "plan": {"contexts": targets}}


# -- passages ------------------------------------------------------------------


def lookup_passages(call: Call) -> object:
    """``POST /contexts/{name}/sources/lookup``: whole stored passages by source id.

    ``passages`` maps each stored source to its full text (sorted by id);
    ``missing`` lists, in request order, the ids with no stored passage.
    """
    fields = Fields(call.body, what="struct LookupPassagesRequest")
    fields.required("sources")
    sources = fields.str_list("sources")
    # The response grows with the list, so the list is what gets bounded.
    if len(sources) > MAX_LIST_ITEMS:
        raise over_limit("sources", len(sources), MAX_LIST_ITEMS)
    for source in sources:
        refuse_empty("source", source)
        refuse_oversized("source", source, MAX_NAME_BYTES)
    with call.state.lock:
        context = call.state.context(call.name)
        passages = {
            source: context.passages[source].text
            for source in sorted(set(sources))
            if source in context.passages
        }
        missing = [source for source in sources if source not in context.passages]
        call.state.count_read(context, empty=not passages)
    return {"passages": passages, "missing": missing}


# -- directory administration ----------------------------------------------------


def delete_context(call: Call) -> object:
    """``DELETE /contexts/{name}`` (admin): gone whole; a re-create starts from zero."""
    with call.state.lock:
        call.state.context(call.name)  # 404 no_context
        del call.state.contexts[call.name]
    return True


def rename_context(call: Call) -> object:
    """``POST /contexts/{name}/rename`` (admin): the context moves to ``to`` whole.

    A scoped key needs a grant on the destination too (the path check only
    covers the source). There are no groups here to rewrite.
    """
    fields = Fields(call.body, what="struct RenameRequest")
    to = fields.req_str("to")
    if byte_len(to) > MAX_CONTEXT_NAME_BYTES:
        raise ApiError(
            "invalid_argument",
            f"the destination name is {byte_len(to)} bytes, over the "
            f"{MAX_CONTEXT_NAME_BYTES}-byte cap; nothing was applied",
        )
    require_grant(call.key, to)
    with call.state.lock:
        context = call.state.context(call.name)
        if not to:
            raise ApiError("invalid_argument", "the destination name must not be empty")
        if to in call.state.contexts:
            raise ApiError("already_exists", f"context '{to}' already exists")
        del call.state.contexts[call.name]
        context.name = to
        call.state.contexts[to] = context
    return True


def flush(call: Call) -> object:
    """``POST /flush`` (admin): the contexts persisted now — none, as nothing here persists.

    Server-wide, so a context-scoped key is refused as taguru refuses it.
    """
    if call.key is not None and call.key.contexts is not None:
        raise ApiError(
            "forbidden",
            "flush is server-wide (it names every flushed context); a context-scoped "
            "key cannot call it",
        )
    return []


def metrics(call: Call) -> object:
    """``GET /metrics`` (no token): a small Prometheus exposition of the directory.

    taguru exports far more series; clients read this as opaque text, so a
    valid exposition with the context count and per-context usage is enough.
    """
    lines = [
        "# HELP taguru_contexts Contexts in the directory.",
        "# TYPE taguru_contexts gauge",
    ]
    with call.state.lock:
        contexts = [call.state.contexts[name] for name in sorted(call.state.contexts)]
        lines.append(f"taguru_contexts {len(contexts)}")
        lines += ["# HELP taguru_reads_total Retrieval calls.", "# TYPE taguru_reads_total counter"]
        lines += [
            f'taguru_reads_total{{context="{_label_value(c.name)}"}} {c.usage.reads}'
            for c in contexts
        ]
    return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")


def _label_value(text: str) -> str:
    """Prometheus label escaping: backslash, quote and newline."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


CLIENT_ROUTES: list[RouteSpec] = [
    RouteSpec("GET", "/metrics", None, metrics, enveloped=False),
    RouteSpec("POST", "/flush", "admin", flush),
    RouteSpec("DELETE", "/contexts/{name}", "admin", delete_context),
    RouteSpec("POST", "/contexts/{name}/rename", "admin", rename_context, body="json"),
    RouteSpec("POST", "/contexts/{name}/activate", "read", activate, body="json"),
    RouteSpec("POST", "/contexts/{name}/explore", "read", explore, body="json"),
    RouteSpec("POST", "/contexts/{name}/describe", "read", describe, body="json"),
    RouteSpec("POST", "/contexts/{name}/unreachable_from", "read", unreachable_from, body="json"),
    RouteSpec("POST", "/contexts/{name}/sources/lookup", "read", lookup_passages, body="json"),
    RouteSpec("POST", "/contexts/{name}/recall", "read", recall, body="json"),
    RouteSpec("POST", "/recall", "read", cross_recall, body="json"),
    RouteSpec("POST", "/query", "read", cross_query, body="json"),
]
