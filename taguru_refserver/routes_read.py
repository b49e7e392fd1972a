"""Read routes (HTTP.md §6): health, version, directory entries, sources, search,
resolve, query, citations, aliases and labels.

Retrieval calls (search, resolve, resolve_label, query, citations) move the
context's ``usage.reads``; a call that returns nothing, or a citation refused
with 404, also counts as an empty read. ``GET /contexts/{name}`` and the
listings do not count (HTTP.md §6.3).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import islice

from taguru_eval._base.text import F32
from taguru_refserver.envelope import ApiError
from taguru_refserver.graph_reads import (
    QueryRank,
    association_out,
    declared_types,
    matching_edges,
    query_rank,
    resolve_candidates,
)
from taguru_refserver.graph_reads import citation as citation_of
from taguru_refserver.model import (
    MAX_NAME_BYTES,
    MAX_TAG_BYTES,
    ContextState,
    Namespace,
    PassageRecord,
    byte_len,
    refuse_empty,
    refuse_oversized,
)
from taguru_refserver.passage_search import DEFAULT_SEARCH_LIMIT, search_passages
from taguru_refserver.resolve import GLOSSED_CANDIDATES
from taguru_refserver.routes_bodies import Fields, over_limit, type_error
from taguru_refserver.routes_common import (
    Call,
    RouteSpec,
    query_cursor,
    query_flag,
    query_uint,
)
from taguru_refserver.vectors import DIMENSIONS
from taguru_refserver.vectors import MODEL as VECTOR_MODEL

SERVER_VERSION = "0.9.7"  # the taguru release this server answers as (ERRATA §3)

MAX_MATCH_LIMIT = 1000  # search, resolve and query limits are clamped here
DEFAULT_QUERY_LIMIT = 100
MAX_LIST_ITEMS = 1000
MAX_FILTER_TAGS = 32
GLOSS_FACTS = {"concepts": 4, "labels": 3}
MAX_CUE_BYTES = 1024  # a resolve cue's cap (ERRATA §3 row 23)


# -- bare routes ------------------------------------------------------------


def health(call: Call) -> object:
    return {"status": "ok", "version": SERVER_VERSION}


def version(call: Call) -> object:
    return {
        "batch_formats": [1],
        "communities_formats": [1],
        "http_contract": {"current": 1, "supported": [1]},
        "image_formats": [1, 2, 3, 4, 5, 6],
        "mcp_contract": {"current": 1, "supported": [1]},
        "mcp_protocol": {"supported": ["2024-11-05", "2025-03-26", "2025-06-18"]},
        "schema_formats": [1],
        "server": SERVER_VERSION,
    }


# -- directory --------------------------------------------------------------


def directory_entry(context: ContextState) -> dict[str, object]:
    """``DirectoryEntry`` with live revision and usage counters (HTTP.md §6.3)."""
    meta = context.meta
    return {
        "name": context.name,
        "description": meta.description,
        "pinned": meta.pinned,
        "loaded": True,
        "dice_floor": meta.dice_floor,
        "semantic_floor": None if meta.semantic_floor is None else F32(meta.semantic_floor),
        "stats": context_stats(context),
        "usage": context.usage.to_wire(),
        "revision": context.revision.to_wire(),
        "schema_mode": None if context.schema is None else context.schema.mode,
    }


TOP_CONCEPTS = 10
LABEL_SAMPLE = 50


def context_stats(context: ContextState) -> dict[str, object]:
    """``ContextStats``; ``footprint_bytes`` is this server's own rough accounting.

    ``top_concepts`` ranks every concept by its live degree (a self-loop counts
    as an outgoing and an incoming edge), ties toward the earlier-interned
    concept; ``label_sample`` is the first labels in interning order. Both as
    taguru's ``Context::top_concepts`` and ``Context::labels``.
    """
    live = context.live_edges()
    degree = dict.fromkeys(context.concepts.canonical, 0)  # interning order
    for edge in live:
        degree[edge.subject] += 1
        degree[edge.object] += 1
    # sorted() is stable: equal degrees keep interning order.
    top = sorted(degree.items(), key=lambda item: -item[1])[:TOP_CONCEPTS]
    names = [*context.concepts.canonical, *context.labels.canonical]
    footprint = (
        1024
        + sum(byte_len(name) + 48 for name in names)
        + 96 * len(context.edges)
        + sum(byte_len(record.text) + 64 for record in context.passages.values())
    )
    return {
        "associations": len(context.edges),
        "concepts": len(context.concepts.canonical),
        "labels": len(context.labels.canonical),
        "sources": len(context.graph_sources),
        "footprint_bytes": footprint,
        "dead_edges": len(context.edges) - len(live),
        "dead_attributions": context.dead_attributions,
        "arena_slack": 0,
        "unsourced_edges": sum(1 for edge in live if edge.unsourced_count > 0),
        "unsourced_weight": float(sum(edge.unsourced_sum for edge in live)),
        "top_concepts": [{"label": name, "count": count} for name, count in top],
        "label_sample": list(islice(context.labels.canonical, LABEL_SAMPLE)),
    }


def list_contexts(call: Call) -> object:
    """``GET /contexts``: one keyset page of the name-sorted directory, as taguru pages it.

    ``limit`` omitted means the ceiling (1000) and is only capped from above,
    so ``limit=0`` is an empty page; ``after`` keeps names sorting strictly
    after it. ``total`` counts the whole population the caller may see (a
    scoped key's grant, then ``pinned``), independent of ``after``. The page
    carries no next-cursor field: a client passes the last name it saw, and
    stops on an empty page.
    """
    limit = min(query_uint(call, "limit", MAX_LIST_ITEMS), MAX_LIST_ITEMS)
    after = call.query.get("after")
    pinned = query_flag(call, "pinned") if "pinned" in call.query else None
    grant = None if call.key is None else call.key.contexts
    with call.state.lock:
        population = [
            call.state.contexts[name]
            for name in sorted(call.state.contexts)
            if (grant is None or name in grant)
            and (pinned is None or call.state.contexts[name].meta.pinned == pinned)
        ]
        # str order is code-point order, which is the byte order of UTF-8 names.
        page = [c for c in population if after is None or c.name > after][:limit]
        entries = [directory_entry(context) for context in page]
    return {"total": len(population), "contexts": entries}


def get_context(call: Call) -> object:
    with call.state.lock:
        return directory_entry(call.state.context(call.name))


def embeddings(call: Call) -> object:
    """``GET /contexts/{name}/embeddings``: the toy model only where the vector lane is on."""
    with call.state.lock:
        vectors = call.state.context(call.name).vectors
        if vectors is None:
            return {"provider_model": None}
        return {
            "provider_model": VECTOR_MODEL,
            "passages": {"model": VECTOR_MODEL, "width": DIMENSIONS, "rows": vectors.rows},
        }


# -- source listing -----------------------------------------------------------


def list_sources(call: Call) -> object:
    """``GET /contexts/{name}/sources``: keyset page over stored sources (HTTP.md §6.4)."""
    limit = min(max(query_uint(call, "limit", MAX_LIST_ITEMS), 1), MAX_LIST_ITEMS)
    after = query_cursor(call, "after")
    prefix = query_cursor(call, "prefix") or ""
    with call.state.lock:
        context = call.state.context(call.name)
        population = sorted(s for s in context.passages if s.startswith(prefix))
        page = [s for s in population if after is None or s > after][:limit]
        entries = [_source_entry(s, context.passages[s]) for s in page]
    return {"total": len(population), "sources": page, "entries": entries}


def _source_entry(source: str, record: PassageRecord) -> dict[str, object]:
    entry: dict[str, object] = {"name": source, "stored_at": record.stored_at}
    if record.date is not None:
        entry["date"] = record.date
    if record.tags:
        entry["tags"] = list(record.tags)
    return entry


def list_labels(call: Call) -> object:
    """``GET /contexts/{name}/labels``: keyset page over canonical label names."""
    limit = min(max(query_uint(call, "limit", MAX_LIST_ITEMS), 1), MAX_LIST_ITEMS)
    after = query_cursor(call, "after")
    prefix = query_cursor(call, "prefix") or ""
    with call.state.lock:
        context = call.state.context(call.name)
        population = sorted(n for n in context.labels.canonical if n.startswith(prefix))
    page = [n for n in population if after is None or n > after][:limit]
    return {"total": len(population), "labels": page}


def list_aliases(call: Call) -> object:
    """``GET /contexts/{name}/aliases``: one page over both namespaces, concepts first."""
    limit = min(max(query_uint(call, "limit", MAX_LIST_ITEMS), 1), MAX_LIST_ITEMS)
    after = query_cursor(call, "after")
    prefix = query_cursor(call, "prefix") or ""
    with call.state.lock:
        context = call.state.context(call.name)
        rows = [
            (rank, alias, canonical)
            for rank, space in ((0, context.concepts), (1, context.labels))
            for alias, canonical in sorted(space.aliases.items())
            if alias.startswith(prefix)
        ]
    total = len(rows)  # the whole population: independent of the cursor
    if after is not None:
        kind, colon, alias = after.partition(":")
        if kind not in ("concept", "label") or not colon:
            raise ApiError(
                "invalid_argument",
                f"cursor '{after}' is not 'concept:<alias>' or 'label:<alias>'",
            )
        cursor = (0 if kind == "concept" else 1, alias)
        rows = [row for row in rows if (row[0], row[1]) > cursor]
    concepts: dict[str, str] = {}
    labels: dict[str, str] = {}
    for rank, alias, canonical in rows[:limit]:
        (concepts if rank == 0 else labels)[alias] = canonical
    return {"total": total, "concepts": concepts, "labels": labels}


# -- passage search -------------------------------------------------------------


def search(call: Call) -> object:
    """``POST /contexts/{name}/sources/search`` (HTTP.md §6.5, §9.4)."""
    fields = Fields(call.body, what="struct SearchPassagesRequest")
    query = fields.req_str("query")
    requested_limit = fields.opt_uint("limit", "usize")
    semantic_floor = fields.opt_float("semantic_floor", "f32")
    tags = fields.str_list("tags")
    since = fields.opt_uint("since", "u64")
    until = fields.opt_uint("until", "u64")
    # The filter is judged before the context is looked up, as taguru does.
    wanted_tags = _validate_tags(tags)
    if since is not None and until is not None and since >= until:
        raise ApiError(
            "invalid_argument",
            f"since {since} is not before until {until} — the window is half-open "
            "[since, until) and this one selects nothing",
        )
    with call.state.lock:
        context = call.state.context(call.name)
        limit = min(
            DEFAULT_SEARCH_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT
        )
        filtered = bool(wanted_tags) or since is not None or until is not None

        def eligible(source: str) -> bool:
            record = context.passages[source]
            if wanted_tags and not wanted_tags.intersection(record.tags):
                return False
            if since is not None and record.filter_time < since:
                return False
            return until is None or record.filter_time < until

        found = search_passages(
            context, query, limit, eligible if filtered else None, semantic_floor, call.state.jitter
        )
        plan: dict[str, object] = {"context": context.name, "lanes": found.lanes}
        if filtered:
            plan["filter"] = {
                "eligible_sources": sum(1 for source in context.passages if eligible(source)),
                "total_sources": len(context.passages),
            }
        call.state.count_read(context, empty=not found.hits)
    return {"plan": {"contexts": [plan]}, "hits": found.hits}


def _validate_tags(tags: list[str]) -> set[str]:
    """The distinct filter tags, or taguru's refusal: the list size, then each tag
    (empty, over 128 bytes) in request order, then the distinct count."""
    if len(tags) > MAX_LIST_ITEMS:
        raise over_limit("tags", len(tags), MAX_LIST_ITEMS)
    for tag in tags:
        refuse_empty("a filter tag", tag)
        refuse_oversized("a filter tag", tag, MAX_TAG_BYTES)
    distinct = set(tags)
    if len(distinct) > MAX_FILTER_TAGS:
        raise ApiError(
            "over_limit",
            f"{len(distinct)} distinct filter tags where at most {MAX_FILTER_TAGS} may be named",
        )
    return distinct


# -- resolve ----------------------------------------------------------------------


def resolve_concept(call: Call) -> object:
    return _resolve(call, "concepts")


def resolve_label(call: Call) -> object:
    return _resolve(call, "labels")


def _resolve(call: Call, which: Namespace) -> object:
    """``POST /contexts/{name}/resolve`` and ``/resolve_label`` (HTTP.md §6.6, §9.6,
    ERRATA §3 row 23)."""
    fields = Fields(call.body, what="struct ResolveRequest")
    cue = fields.req_str("cue")
    requested_limit = fields.opt_uint("limit", "usize")
    dice_floor = fields.opt_float("dice_floor")
    fields.opt_float("semantic_floor", "f32")  # semantic tier needs a provider
    # taguru 0.9.6+: after decoding the body, before the context lookup (ERRATA §3
    # row 23); /evidence origins are not capped this way.
    refuse_oversized("the cue", cue, MAX_CUE_BYTES)
    limit = min(MAX_MATCH_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT)
    with call.state.lock:
        context = call.state.context(call.name)
        candidates = resolve_candidates(context, which, cue, limit, dice_floor)
        result: list[dict[str, object]] = []
        for position, candidate in enumerate(candidates):
            if position < GLOSSED_CANDIDATES:
                # The head carries its gloss and, for a concept under a schema, its types.
                types = declared_types(context, candidate.name) if which == "concepts" else []
                glossed = gloss(context, which, candidate.name)
                candidate = replace(candidate, gloss=glossed, types=tuple(types) or None)
            result.append(candidate.to_wire())
        call.state.count_read(context, empty=not result)
    return result


def gloss(context: ContextState, which: Namespace, name: str) -> str:
    """The name plus its heaviest live facts as short sentences (HTTP.md §9.7)."""
    if which == "concepts":
        touching = [e for e in context.adjacency.get(name, ()) if e.live]
    else:
        touching = [e for e in context.edges.values() if e.live and e.label == name]
    # sorted() is stable, so equal |sum| keeps edge insertion order.
    heaviest = sorted(touching, key=lambda e: -abs(e.weight_sum))[: GLOSS_FACTS[which]]
    sentences = [f"{name}。"]
    previous_subject: str | None = None
    for edge in heaviest:
        skip_subject = edge.subject == previous_subject or (
            which == "concepts" and edge.subject == name
        )
        lead = "" if skip_subject else f"{edge.subject}の"
        denial = "ではない" if edge.weight_sum < 0 else ""
        sentences.append(f"{lead}{edge.label}は{edge.object}{denial}。")
        previous_subject = edge.subject
    return "".join(sentences)


# -- query ----------------------------------------------------------------------


_CURSOR_KEYS = ("weight", "subject", "label", "object")


def query(call: Call) -> object:
    """``POST /contexts/{name}/query``: exact-spelling triple lookup (HTTP.md §6.7, §9.8)."""
    fields = Fields(call.body, what="struct QueryRequest")
    positions = {key: fields.str_or_list(key) for key in ("subject", "label", "object")}
    requested_limit = fields.opt_uint("limit", "usize")
    cursor = _decode_cursor(fields)
    for key in ("subject_types", "object_types"):
        fields.str_or_list(key)
    fields.opt_uint("since", "u64")
    fields.opt_uint("until", "u64")
    for key, values in positions.items():
        if len(values) > MAX_LIST_ITEMS:
            raise over_limit(key, len(values), MAX_LIST_ITEMS)
    pinned = {key: [v for v in values if v] for key, values in positions.items()}
    if not any(pinned.values()):
        raise ApiError(
            "invalid_argument", "'subject', 'label', or 'object' must pin at least one value"
        )
    limit = min(
        DEFAULT_QUERY_LIMIT if requested_limit is None else requested_limit, MAX_MATCH_LIMIT
    )
    with call.state.lock:
        context = call.state.context(call.name)
        matches = matching_edges(context, pinned["subject"], pinned["label"], pinned["object"])
        total = len(matches)
        if cursor is not None:
            matches = [edge for edge in matches if query_rank(edge) > cursor]
        page = [association_out(context, edge) for edge in matches[:limit]]
        call.state.count_read(context, empty=not page)
    return {"total": total, "matches": page, "plan": {"contexts": [context.name]}}


def _decode_cursor(fields: Fields) -> QueryRank | None:
    if not fields.present("after"):
        return None
    after = Fields(fields.data["after"], fields.at("after"), "struct QueryCursor")
    for key in after.data:
        if key not in _CURSOR_KEYS:
            expected = ", ".join(f"`{k}`" for k in _CURSOR_KEYS)
            raise ApiError(
                "malformed_request",
                "Failed to deserialize the JSON body into the target type: after: "
                f"unknown field `{key}`, expected one of {expected}",
                status=422,
            )
    weight = after.opt_float("weight")
    if weight is None:
        raise type_error(after.at("weight"), after.data.get("weight"), "f64")
    return (-abs(weight), after.req_str("subject"), after.req_str("label"), after.req_str("object"))


# -- citations --------------------------------------------------------------------


def cite(call: Call) -> object:
    """``POST /contexts/{name}/citations`` (HTTP.md §6.8, §9.9)."""
    fields = Fields(call.body, what="struct CitationRequest")
    source = fields.req_str("source")
    if "paragraph" in fields.data:
        paragraph = fields.req_uint("paragraph", "u32")
    elif "index" in fields.data:  # the legacy name of the same field
        paragraph = fields.req_uint("index", "u32")
    else:
        paragraph = fields.req_uint("paragraph", "u32")
    refuse_empty("source", source)
    refuse_oversized("source", source, MAX_NAME_BYTES)
    with call.state.lock:
        context = call.state.context(call.name)
        record = context.passages.get(source)
        if record is None:
            call.state.count_read(context, empty=True)
            raise ApiError("no_source", f"source '{source}' not found in context '{context.name}'")
        if paragraph >= len(record.paragraphs):
            call.state.count_read(context, empty=True)
            raise ApiError(
                "no_paragraph",
                f"paragraph {paragraph} out of range for source '{source}' in context "
                f"'{context.name}'",
            )
        call.state.count_read(context, empty=False)
        return citation_of(context, source, paragraph)


READ_ROUTES: list[RouteSpec] = [
    RouteSpec("GET", "/health", None, health, enveloped=False),
    RouteSpec("GET", "/version", None, version, enveloped=False),
    RouteSpec("GET", "/contexts", "read", list_contexts),
    RouteSpec("GET", "/contexts/{name}", "read", get_context),
    RouteSpec("GET", "/contexts/{name}/embeddings", "read", embeddings),
    RouteSpec("GET", "/contexts/{name}/sources", "read", list_sources),
    RouteSpec("GET", "/contexts/{name}/labels", "read", list_labels),
    RouteSpec("GET", "/contexts/{name}/aliases", "read", list_aliases),
    RouteSpec("POST", "/contexts/{name}/sources/search", "read", search, body="json"),
    RouteSpec("POST", "/contexts/{name}/resolve", "read", resolve_concept, body="json"),
    RouteSpec("POST", "/contexts/{name}/resolve_label", "read", resolve_label, body="json"),
    RouteSpec("POST", "/contexts/{name}/query", "read", query, body="json"),
    RouteSpec("POST", "/contexts/{name}/citations", "read", cite, body="json"),
]
