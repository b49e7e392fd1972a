"""The citation lane (EVALUATE.md §3.6): one ``POST …/citations`` per expected citation.

The checks run inside the lane, because the served text is never kept: the
lane checks a quote against the text it just received and records only the
outcome. The scorer reads the recorded checks; it never sees text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from taguru_eval import contract
from taguru_eval._base import jsonstrict as js
from taguru_eval._base.normalize import normalize_entry
from taguru_eval._base.text import trim, truncate_utf8
from taguru_eval._base.wire import convert
from taguru_eval.inputs.dataset import Absent, ExpectedCitation
from taguru_eval.run.http import CallFailure, TaguruClient
from taguru_eval.run.lanes.record import CallRecorder
from taguru_eval.run.lanes.wire import Citation
from taguru_eval.tables.shapes import CitationCheck, PassageOutcome, SectionCheck, Structural

NOT_FOUND_STATUS = 404


def section_check(expected_present: bool, expected: str | None, actual: str | None) -> SectionCheck:
    """The recorded section check: ``not_checked`` or ``matched``/``mismatched`` + declared value.

    ``expected_present`` keeps "key absent" (do not check) apart from a
    declared ``null`` (assert the paragraph lies outside every section). The
    server's own section value is never recorded.
    """
    if not expected_present:
        return {"check": "not_checked"}
    return {"check": "matched" if expected == actual else "mismatched", "expected": expected}


def quote_matches(quote: str, text: str) -> bool:
    """True when the folded quote is a code-point substring of the folded text (§3.6, §4.6)."""
    return normalize_entry(trim(quote)) in normalize_entry(trim(text))


def served_set(passage: PassageOutcome, structural: Structural | None) -> set[tuple[str, int]]:
    """Every searched hit locator plus every queried attribution that names a paragraph."""
    served: set[tuple[str, int]] = set()
    if passage.get("outcome") == "searched":
        served.update((hit["source"], hit["paragraph"]) for hit in passage.get("hits", []))
    if structural is not None:
        for probe in structural.get("associations", []):
            query = probe.get("query")
            if query is None or query.get("outcome") != "queried":
                continue
            for attribution in query.get("attributions", []):
                paragraph = attribution.get("paragraph")
                if paragraph is not None:
                    served.add((attribution["source"], paragraph))
    return served


def read_citation(payload: object) -> tuple[str, str | None]:
    """(text, section) of a ``POST /citations`` payload; an absent section reads as null.

    Raises :class:`taguru_eval.jsonstrict.JsonShapeError` naming the field when
    the payload is not a Citation.
    """
    citation = payload if isinstance(payload, Citation) else convert(payload, Citation)
    return citation.text, citation.section


def citation_check(
    *,
    source: str,
    paragraph: int,
    section_expected_present: bool,
    section_expected: str | None,
    quote: str | None,
    served: bool,
    response: Mapping[str, Any],
    latency_ms: int,
) -> CitationCheck:
    """The CitationCheck of one ``POST /citations`` exchange.

    ``response`` is ``{"status": 200, "body": PAYLOAD}`` for a 200 envelope, or
    ``{"status": STATUS_OR_None, "code": CODE_OR_None, "message": TEXT}`` for a
    failure (status ``None`` = transport failure; ``message`` is the client's
    full failure text, truncated here). A 404's code is kept; any other
    failure's code is dropped. The run's client hands its reply as a
    :class:`Citation` (a parse failure is a failure, redacted there); a payload
    given as parsed JSON (a conformance vector's) is read here.
    """
    status = response.get("status")
    if status == 200 and "body" in response:
        try:
            text, section = read_citation(response["body"])
        except js.JsonShapeError as exc:
            message, code = f"citation response did not parse: {exc.detail}", None
        else:
            checked = section_check(section_expected_present, section_expected, section)
            if quote is None:
                return {
                    "source": source,
                    "paragraph": paragraph,
                    "served": served,
                    "outcome": "resolved",
                    "section": checked,
                    "latency_ms": latency_ms,
                }
            return {
                "source": source,
                "paragraph": paragraph,
                "served": served,
                "outcome": "resolved",
                "section": checked,
                "quote": {"declared": quote, "matched": quote_matches(quote, text)},
                "latency_ms": latency_ms,
            }
    else:
        message = str(response.get("message", ""))
        code = response.get("code") if status == NOT_FOUND_STATUS else None
    unresolved: CitationCheck = {
        "source": source,
        "paragraph": paragraph,
        "served": served,
        "outcome": "unresolved",
        "code": code if isinstance(code, str) else None,
        "message": truncate_utf8(message),
        "latency_ms": latency_ms,
    }
    return unresolved


async def citation_lane(
    client: TaguruClient,
    context: str,
    citations: Sequence[ExpectedCitation],
    served: set[tuple[str, int]],
    recorder: CallRecorder,
) -> list[CitationCheck]:
    """One ``POST …/citations`` per expected citation, in order (§3.6)."""
    checks: list[CitationCheck] = []
    for index, expected in enumerate(citations):
        checks.append(await _check_citation(client, context, index, expected, served, recorder))
    return checks


async def _check_citation(
    client: TaguruClient,
    context: str,
    index: int,
    expected: ExpectedCitation,
    served: set[tuple[str, int]],
    recorder: CallRecorder,
) -> CitationCheck:
    body: dict[str, object] = {"paragraph": expected.paragraph, "source": expected.source}
    response: dict[str, object]
    try:
        reply = await client.post(["contexts", context, "citations"], body, into=Citation)
        citation = client.payload_as(reply, Citation, "citation")
    except CallFailure as failure:
        status, latency = failure.status, failure.latency_ms
        response = {"status": status, "code": failure.code, "message": failure.message}
    else:
        status, latency = reply.status, reply.latency_ms
        response = {"status": 200, "body": citation}
    check = citation_check(
        source=expected.source,
        paragraph=expected.paragraph,
        section_expected_present=expected.section_declared,
        section_expected=None if isinstance(expected.section, Absent) else expected.section,
        quote=expected.quote,
        served=(expected.source, expected.paragraph) in served,
        response=response,
        latency_ms=latency,
    )
    recorder.add(
        lane="citation",
        endpoint=contract.CITATIONS,
        item_index=index,
        outcome=check["outcome"],
        latency_ms=latency,
        http_status=status,
        error=check.get("message"),
    )
    return check
