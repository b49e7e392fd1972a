"""The structural lane (EVALUATE.md §3.5): coverage cues, then association probes.

Coverage resolves every cue (or the query) against concepts and/or labels;
an association probe resolves its subject, label and object and, when all
three resolve to exactly one name, queries the association. A resolve or
query answer that does not fit taguru's type fails that call with
``{route} response did not parse: {detail}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import msgspec

from taguru_eval import contract
from taguru_eval._base.wire import U64
from taguru_eval.contract import RESOLVE_LIMIT
from taguru_eval.inputs.dataset import EvalCase
from taguru_eval.run.http import CallFailure, Reply, TaguruClient
from taguru_eval.run.lanes.record import CallRecorder
from taguru_eval.run.lanes.wire import AssociationMatch
from taguru_eval.tables.shapes import (
    AssociationProbe,
    AssociationQuery,
    Attribution,
    CueResolution,
    PositionOutcome,
    Structural,
)

ResolveRoute = Literal["resolve", "resolve_label"]


class _Candidate(msgspec.Struct, frozen=True, gc=False):
    name: str
    score: float
    tier: str
    kind: str | None = None


_Candidates = list[_Candidate]


class _MatchPage(msgspec.Struct, frozen=True, gc=False):
    total: U64
    matches: list[AssociationMatch]


class Resolved(Protocol):
    """One resolved name: its tier and, when the server says, its match kind."""

    @property
    def name(self) -> str: ...

    @property
    def tier(self) -> str: ...

    @property
    def kind(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """A :class:`Resolved` name built by hand (the resolve vectors)."""

    name: str
    tier: str
    kind: str | None = None


def top_tier(candidates: Sequence[Resolved]) -> tuple[str | None, list[str]]:
    """The lexical group if any candidate is lexical, else the semantic group."""
    for tier in ("lexical", "semantic"):
        names = [c.name for c in candidates if c.tier == tier]
        if names:
            return tier, names
    return None, []


def classify_position(tier: str | None, names: Sequence[str], latency_ms: int) -> PositionOutcome:
    """An association position's outcome from its top tier (EVALUATE.md §3.5).

    No candidate is ``not_found``, exactly one is ``resolved`` (the only case
    whose name may be queried), two or more are ``ambiguous`` — never guessed.
    """
    if not names:
        return PositionOutcome(outcome="not_found", latency_ms=latency_ms)
    if len(names) == 1:
        return {
            "outcome": "resolved",
            "name": names[0],
            "tier": tier or "",
            "latency_ms": latency_ms,
        }
    return {
        "outcome": "ambiguous",
        "tier": tier or "",
        "candidates": list(names),
        "latency_ms": latency_ms,
    }


async def resolve_call(
    client: TaguruClient, context: str, route: ResolveRoute, cue: str
) -> tuple[Reply, Sequence[Resolved]] | CallFailure:
    """One ``{cue, limit: 5}`` resolve call: the reply and every candidate, or the
    failure — a response that does not parse is a failure naming the route."""
    try:
        reply = await client.post(
            ["contexts", context, route], {"cue": cue, "limit": RESOLVE_LIMIT}, into=_Candidates
        )
    except CallFailure as failure:
        return failure
    try:
        decoded = client.payload_as(reply, _Candidates, route)
    except CallFailure as failure:
        return failure
    return reply, decoded


def _endpoint(route: ResolveRoute) -> str:
    return contract.RESOLVE if route == "resolve" else contract.RESOLVE_LABEL


async def structural_lane(
    client: TaguruClient, context: str, case: EvalCase, recorder: CallRecorder
) -> Structural:
    """Coverage cues (concepts, then labels), then association probes (§3.5)."""
    cue_list = list(case.cues) if case.cues else [case.query]
    routes: list[tuple[Literal["concept", "label"], ResolveRoute]] = []
    if case.expected_concepts:
        routes.append(("concept", "resolve"))
    if case.expected_labels:
        routes.append(("label", "resolve_label"))
    resolutions: list[CueResolution] = []
    for kind, route in routes:
        for cue in cue_list:
            resolutions.append(
                await _cover(client, context, kind, route, cue, len(resolutions), recorder)
            )
    probes: list[AssociationProbe] = []
    for index, expected in enumerate(case.expected_associations):
        positions: dict[str, PositionOutcome] = {}
        for position, route, cue in (
            ("subject", "resolve", expected.subject),
            ("label", "resolve_label", expected.label),
            ("object", "resolve", expected.object),
        ):
            positions[position] = await _probe_position(
                client, context, route, cue, index, position, recorder
            )
        probe = AssociationProbe(
            subject_cue=expected.subject,
            label_cue=expected.label,
            object_cue=expected.object,
            subject=positions["subject"],
            label=positions["label"],
            object=positions["object"],
        )
        if all(p["outcome"] == "resolved" for p in positions.values()):
            probe["query"] = await _query(
                client,
                context,
                positions["subject"]["name"],
                positions["label"]["name"],
                positions["object"]["name"],
                index,
                recorder,
            )
        probes.append(probe)
    return Structural(cues=resolutions, associations=probes)


async def _cover(
    client: TaguruClient,
    context: str,
    kind: Literal["concept", "label"],
    route: ResolveRoute,
    cue: str,
    cue_index: int,
    recorder: CallRecorder,
) -> CueResolution:
    """One coverage cue's resolution (its top tier, every name in it)."""
    resolved = await resolve_call(client, context, route, cue)
    if isinstance(resolved, CallFailure):
        message = recorder.failed(resolved, "coverage", _endpoint(route), cue_index)
        return CueResolution(
            cue=cue,
            kind=kind,
            resolved_names=[],
            limit=RESOLVE_LIMIT,
            latency_ms=resolved.latency_ms,
            error=message,
        )
    result, candidates = resolved
    tier, names = top_tier(candidates)
    recorder.add(
        lane="coverage",
        endpoint=_endpoint(route),
        item_index=cue_index,
        outcome="resolved" if names else "not_found",
        latency_ms=result.latency_ms,
        http_status=result.status,
    )
    if tier is None:
        return {
            "cue": cue,
            "kind": kind,
            "resolved_names": names,
            "limit": RESOLVE_LIMIT,
            "latency_ms": result.latency_ms,
        }
    return {
        "cue": cue,
        "kind": kind,
        "resolved_names": names,
        "tier": tier,
        "limit": RESOLVE_LIMIT,
        "latency_ms": result.latency_ms,
    }


async def _probe_position(
    client: TaguruClient,
    context: str,
    route: ResolveRoute,
    cue: str,
    index: int,
    position: str,
    recorder: CallRecorder,
) -> PositionOutcome:
    resolved = await resolve_call(client, context, route, cue)
    if isinstance(resolved, CallFailure):
        message = recorder.failed(resolved, "association", _endpoint(route), index, position)
        return PositionOutcome(outcome="errored", message=message, latency_ms=resolved.latency_ms)
    result, candidates = resolved
    outcome = classify_position(*top_tier(candidates), result.latency_ms)
    recorder.add(
        lane="association",
        endpoint=_endpoint(route),
        item_index=index,
        position=position,
        outcome=outcome["outcome"],
        latency_ms=result.latency_ms,
        http_status=result.status,
    )
    return outcome


async def _query(
    client: TaguruClient,
    context: str,
    subject: str,
    label: str,
    obj: str,
    index: int,
    recorder: CallRecorder,
) -> AssociationQuery:
    body: dict[str, object] = {"label": label, "limit": 1, "object": obj, "subject": subject}
    try:
        reply = await client.post(["contexts", context, "query"], body, into=_MatchPage)
    except CallFailure as failure:
        return _query_failed(recorder, failure, index)
    try:
        page = client.payload_as(reply, _MatchPage, "query")
    except CallFailure as failure:
        return _query_failed(recorder, failure, index)
    recorder.add(
        lane="association",
        endpoint=contract.QUERY,
        item_index=index,
        position="query",
        outcome="queried",
        latency_ms=reply.latency_ms,
        http_status=reply.status,
    )
    attributions = [
        Attribution(source=attribution.source, paragraph=attribution.paragraph)
        for match in page.matches
        for attribution in match.attributions
    ]
    if not attributions:
        return {
            "outcome": "queried",
            "total": page.total,
            "matches": len(page.matches),
            "latency_ms": reply.latency_ms,
        }
    return {
        "outcome": "queried",
        "total": page.total,
        "matches": len(page.matches),
        "attributions": attributions,
        "latency_ms": reply.latency_ms,
    }


def _query_failed(recorder: CallRecorder, failure: CallFailure, index: int) -> AssociationQuery:
    message = recorder.failed(failure, "association", contract.QUERY, index, "query")
    return AssociationQuery(outcome="errored", message=message, latency_ms=failure.latency_ms)
