"""Judging association writes against a context's installed schema (``warn`` / ``strict``).

A write is judged against the live type assertions plus the batch's own (so
line order inside a batch never matters); ``warn`` reports the violations
beside the result, ``strict`` refuses the batch, ``off`` judges nothing. Type
assertions themselves are never judged.
"""

from __future__ import annotations

from collections.abc import Iterable

from taguru_refserver.envelope import Issue
from taguru_refserver.graph_writes import AssociationInput
from taguru_refserver.model import ContextState
from taguru_refserver.schema import (
    MAX_ISSUE_TYPE_NAMES,
    SCHEMA_TYPE_LABEL,
    InstalledSchema,
)


def judge_associations(
    context: ContextState, schema: InstalledSchema, items: list[AssociationInput]
) -> list[Issue]:
    """The domain/range (and ``closed_labels``) violations of a batch; none in ``off`` mode."""
    if schema.mode == "off":
        return []

    def label_of(spelling: str) -> str:
        return context.labels.lookup(spelling) or spelling

    def concept_of(spelling: str) -> str:
        return context.concepts.lookup(spelling) or spelling

    fact_items = [
        (i, item) for i, item in enumerate(items) if label_of(item.label) != SCHEMA_TYPE_LABEL
    ]
    asserted: dict[str, set[str]] = {}
    for item in items:
        if label_of(item.label) == SCHEMA_TYPE_LABEL:
            asserted.setdefault(concept_of(item.subject), set()).add(concept_of(item.object))
    fact_concepts = {concept_of(n) for _, item in fact_items for n in (item.subject, item.object)}
    for concept in fact_concepts:
        for edge in context.adjacency.get(concept, ()):
            if edge.live and edge.subject == concept and edge.label == SCHEMA_TYPE_LABEL:
                asserted.setdefault(concept, set()).add(edge.object)

    def violates(declared: frozenset[str], spelling: str) -> bool:
        types = asserted.get(concept_of(spelling))
        if not declared or not types:
            return False
        expanded = set().union(*(schema.closure_of(t) for t in types))
        return declared.isdisjoint(expanded)

    issues: list[Issue] = []
    for index, item in fact_items:
        label = label_of(item.label)
        relation = schema.relations.get(label)
        where = f"associations[{index}]"
        if relation is None:
            if schema.closed_labels:
                issues.append(
                    Issue(
                        f"{where}.label",
                        "unknown_reference",
                        "a label declared in this context's schema (closed_labels)",
                        f"'{label}' is not declared",
                    )
                )
            continue
        for side, kind, declared, spelling in (
            ("subject", "domain", relation.domain, item.subject),
            ("object", "range", relation.range, item.object),
        ):
            if violates(declared, spelling):
                issues.append(
                    Issue(
                        f"{where}.{side}",
                        kind,
                        f"'{spelling}' typed as one of [{_capped(declared)}] (or a subtype), "
                        f"for relation '{label}'",
                        f"typed as [{_capped(asserted[concept_of(spelling)])}]",
                    )
                )
    return issues


def _capped(names: Iterable[str]) -> str:
    ordered = sorted(names)
    if len(ordered) <= MAX_ISSUE_TYPE_NAMES:
        return ", ".join(ordered)
    shown = ", ".join(ordered[:MAX_ISSUE_TYPE_NAMES])
    return f"{shown}, … (+{len(ordered) - MAX_ISSUE_TYPE_NAMES} more)"
