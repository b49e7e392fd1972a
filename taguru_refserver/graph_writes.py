"""Decoding and applying graph writes: associations, aliases, retractions (HTTP.md §7.3–§7.5, §9.5).

Each ``decode_*`` validates a whole request body before anything is applied
(422 for wrong JSON types, 400 for bad values); each ``apply``-style function
changes one ``ContextState`` and leaves the lock and the revision/usage
bookkeeping to ``ServerState``.
"""

from __future__ import annotations

from dataclasses import dataclass

from taguru_eval._base.text import json_f64
from taguru_refserver.envelope import ApiError, Issue
from taguru_refserver.model import (
    MAX_ALIAS_PAIRS_PER_REQUEST,
    MAX_ASSOCIATIONS_PER_REQUEST,
    MAX_NAME_BYTES,
    MAX_WEIGHT,
    Attribution,
    ContextState,
    Edge,
    NameSpace,
    Namespace,
    check_name,
    issue,
    refusal,
    refuse_empty,
    refuse_oversized,
)
from taguru_refserver.routes_bodies import Fields, as_float, as_list, over_limit

AliasBinding = tuple[Namespace, str, str]  # namespace, alias spelling, canonical spelling
AliasRemoval = tuple[Namespace, str]


@dataclass(frozen=True)
class AssociationInput:
    """One validated item of ``POST …/associations``."""

    subject: str
    label: str
    object: str
    weight: float
    source: str | None
    paragraph: int | None


def decode_associations(body: object) -> list[AssociationInput]:
    """The items of an associations body (a JSON array), or its refusal."""
    raw_items = as_list(body, "")
    if len(raw_items) > MAX_ASSOCIATIONS_PER_REQUEST:
        raise over_limit("associations", len(raw_items), MAX_ASSOCIATIONS_PER_REQUEST)
    decoded: list[AssociationInput] = []
    issues: list[Issue] = []
    for index, raw in enumerate(raw_items):
        fields = Fields(raw, f"[{index}]", "struct AssociationInput")
        item = AssociationInput(
            subject=fields.req_str("subject"),
            label=fields.req_str("label"),
            object=fields.req_str("object"),
            weight=as_float(fields.required("weight"), fields.at("weight")),
            source=fields.opt_str("source"),
            paragraph=fields.opt_uint("paragraph", "u32"),
        )
        where = f"associations[{index}]"
        for key in ("subject", "label", "object"):
            check_name(issues, f"{where}.{key}", getattr(item, key), MAX_NAME_BYTES)
        if abs(item.weight) > MAX_WEIGHT:
            expected = f"a finite number with |weight| <= {MAX_WEIGHT:.0f}"
            actual = _number(fields.data["weight"])
            issues.append(issue(f"{where}.weight", "range", expected, actual))
        if item.source is not None:
            check_name(issues, f"{where}.source", item.source, MAX_NAME_BYTES)
        decoded.append(item)
    if issues:
        raise refusal("associations batch", issues)
    return decoded


def _number(value: object) -> str:
    """A JSON number as taguru names it in an issue: ``number 2000000`` for an
    integer, ``number 2000000.0`` for a float (serde_json's spelling)."""
    spelled = json_f64(value) if isinstance(value, float) else str(value)
    return f"number {spelled}"


def assert_association(context: ContextState, item: AssociationInput) -> None:
    """Add one assertion: edge ``sum``/``count``, and the source's attribution (§9.5)."""
    key = (
        context.concepts.intern(item.subject),
        context.labels.intern(item.label),
        context.concepts.intern(item.object),
    )
    edge = context.edges.get(key)
    if edge is None:
        edge = context.edges[key] = Edge(*key, ordinal=len(context.edges))
        for concept in dict.fromkeys((key[0], key[2])):
            context.adjacency.setdefault(concept, []).append(edge)
    edge.weight_sum += item.weight
    edge.count += 1
    if item.source is None:
        edge.unsourced_count += 1
        edge.unsourced_sum += item.weight
        return
    context.graph_sources.add(item.source)
    paragraph = item.paragraph
    stored = context.passages.get(item.source)
    if paragraph is not None and stored is not None and paragraph >= len(stored.paragraphs):
        paragraph = None  # out of range for an already-stored passage: dropped silently (§7)
    attribution = edge.attributions.get(item.source)
    if attribution is None:
        edge.attributions[item.source] = Attribution(item.weight, 1, paragraph)
    else:  # the first paragraph recorded for this source on this edge is kept
        attribution.weight_sum += item.weight
        attribution.count += 1


# -- aliases ---------------------------------------------------------------------


def decode_alias_registration(body: object) -> list[AliasBinding]:
    """Bindings in application order: concepts then labels, each in sorted alias order."""
    fields = Fields(body, what="struct RegisterAliasesRequest")
    plan: list[AliasBinding] = []
    for which in ("concepts", "labels"):
        pairs = fields.str_map(which)
        plan.extend((which, alias, canonical) for alias, canonical in sorted(pairs.items()))
    if len(plan) > MAX_ALIAS_PAIRS_PER_REQUEST:
        raise over_limit("aliases", len(plan), MAX_ALIAS_PAIRS_PER_REQUEST)
    for which, alias, canonical in plan:
        for role, spelling in (("alias", alias), ("canonical", canonical)):
            refuse_empty(f"a {which} {role}", spelling)
            refuse_oversized(f"a {which} {role}", spelling, MAX_NAME_BYTES)
    return plan


def bind_alias(space: NameSpace, which: str, alias: str, canonical: str) -> ApiError | None:
    """Bind one alias; the 409 it deserves instead, without changing anything.

    Re-registering the same binding succeeds (and counts as applied).
    """
    singular = "concept" if which == "concepts" else "label"
    target = space.lookup(canonical)
    if target is None:
        return ApiError(
            "conflict", f"{singular} '{canonical}' is unknown; an alias needs an existing name"
        )
    if alias in space.canonical:
        if alias == target:
            return None  # binding a name to itself changes nothing but still applies
        return ApiError(
            "conflict", f"'{alias}' is already a canonical {singular} name, not an alias"
        )
    bound = space.aliases.get(alias)
    if bound is not None and bound != target:
        return ApiError("conflict", f"alias '{alias}' is already bound to {singular} '{bound}'")
    if bound is None:
        space.aliases[alias] = target
        space.index.add_alias(alias, target)
    return None


def decode_alias_removal(body: object) -> list[AliasRemoval]:
    """The aliases a removal names, concepts first; an empty request is a 400."""
    fields = Fields(body, what="struct RemoveAliasesRequest")
    plan: list[AliasRemoval] = [("concepts", alias) for alias in fields.str_list("concepts")]
    plan.extend(("labels", alias) for alias in fields.str_list("labels"))
    if not plan:
        raise ApiError("invalid_argument", "name at least one alias under 'concepts' or 'labels'")
    if len(plan) > MAX_ALIAS_PAIRS_PER_REQUEST:
        raise over_limit("aliases", len(plan), MAX_ALIAS_PAIRS_PER_REQUEST)
    return plan


def remove_aliases(context: ContextState, plan: list[AliasRemoval]) -> int:
    """Unbind every named alias, or none: a canonical or unknown spelling is a 409."""
    for which, alias in plan:
        space = context.namespace(which)
        singular = "concept" if which == "concepts" else "label"
        if alias in space.canonical:
            raise ApiError("conflict", f"'{alias}' is a canonical {singular} name, not an alias")
        if alias not in space.aliases:
            raise ApiError("conflict", f"'{alias}' is not a registered {singular} alias")
    removed = 0
    for which, alias in dict.fromkeys(plan):
        space = context.namespace(which)
        del space.aliases[alias]
        space.index.remove_alias(alias)
        removed += 1
    return removed


# -- retraction --------------------------------------------------------------------


def live_edges_of_source(context: ContextState, source: str) -> list[Edge]:
    return [edge for edge in context.edges.values() if edge.live and source in edge.attributions]


def withdraw_source(context: ContextState, source: str) -> None:
    """Take every attribution of ``source`` out of its edge (the edge dies at count 0)."""
    for edge in context.edges.values():
        attribution = edge.attributions.pop(source, None)
        if attribution is None:
            continue
        edge.weight_sum -= attribution.weight_sum
        edge.count -= attribution.count
        context.dead_attributions += 1


def retract_edge(context: ContextState, edge: Edge) -> int:
    """Retract one live edge entirely; returns the attributions removed."""
    removed = len(edge.attributions)
    context.dead_attributions += removed
    edge.attributions.clear()
    edge.weight_sum = 0.0
    edge.count = 0
    edge.unsourced_count = 0
    edge.unsourced_sum = 0.0
    return removed
