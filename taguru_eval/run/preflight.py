"""The preflight (EVALUATE.md §3.1) and the closing context read (§3.2).

Health, the first context read, the embedding identity, the source walk and
the expected-source check, in the reference's order; a failure becomes the
exit code the spec gives it.

The source walk is the run's one paginated read. taguru walks until an empty
page; a server that never sends one would grow the walk without end, so it
stops with exit 1 at :data:`MAX_SOURCE_PAGES` pages, :data:`MAX_SOURCE_NAMES`
names or :data:`MAX_SOURCE_NAME_BYTES` bytes of names, whichever comes first
(each far above any real corpus: taguru pages 1,000 names at a time).
Server text that ends up in a message or the artifact goes through the
client's redaction first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.suggest import did_you_mean
from taguru_eval._base.text import one_line, truncate_utf8
from taguru_eval._base.wire import U64, convert
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_RUN_FAILED,
    PREFIX,
    LinesError,
    RunError,
    TaguruEvalError,
)
from taguru_eval.inputs.config import scheme_hint
from taguru_eval.inputs.dataset import EvalSet
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.run.http import CallFailure, TaguruClient

SOURCES_PAGE_LIMIT = 1000
MAX_SOURCE_PAGES = 10_000
MAX_SOURCE_NAMES = 1_000_000
MAX_SOURCE_NAME_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """What evaluate reads from a ``DirectoryEntry``: the revision and last write."""

    revision: dict[str, int]
    last_write_epoch: int


@dataclass(frozen=True, slots=True)
class PassageSidecar:
    """The embeddings status's ``passages`` sidecar (HTTP.md §6.10): which model
    embedded the paragraphs, and how many rows exist."""

    model: str | None
    rows: int


@dataclass(frozen=True, slots=True)
class Preflight:
    """Results of §3.1: the first context read, the embedding identity, the sources.

    ``passages`` is the passage-vector sidecar the same embeddings read
    reported (None: absent, or the GET failed); the must-refuse probes read it.
    """

    before: ContextEntry
    embeddings: dict[str, str | None] | None  # None: the embeddings GET failed (key omitted)
    sources: frozenset[str]
    passages: PassageSidecar | None = None


class _Usage(msgspec.Struct, frozen=True, gc=False):
    reads: U64 = 0
    empty_reads: U64 = 0
    writes: U64 = 0
    last_read_epoch: U64 = 0
    last_write_epoch: U64 = 0


class _Revision(msgspec.Struct, frozen=True, gc=False):
    graph: U64 = 0
    passages: U64 = 0
    config: U64 = 0


class _DirectoryEntry(msgspec.Struct, frozen=True, gc=False):
    name: str
    description: str
    pinned: bool
    loaded: bool
    stats: dict[str, Any]
    usage: _Usage
    # Absent or null: all zeros (serde default).
    revision: _Revision | None = None


class _SourcesPage(msgspec.Struct, frozen=True, gc=False):
    sources: list[str]


def read_context_entry(payload: object) -> ContextEntry:
    """Decode a ``DirectoryEntry`` the way the reference does; raises JsonShapeError."""
    entry = convert(payload, _DirectoryEntry)
    revision = entry.revision or _Revision()
    return ContextEntry(
        revision=msgspec.structs.asdict(revision), last_write_epoch=entry.usage.last_write_epoch
    )


def _said(failure: CallFailure) -> str:
    """A failed preflight call's message cut at 200 bytes, as a lane records one
    (EVALUATE.md §0.3): an error page is not printed whole to stderr."""
    return truncate_utf8(failure.message)


async def check_health(client: TaguruClient, masked_url: str, url_flag: str | None = None) -> None:
    """§3.1.1: ``GET /health`` must answer 200, else exit 1 (with the fix when
    ``--url`` lacked its scheme: ``localhost:8080`` parses with scheme ``localhost``)."""
    try:
        await client.get_bare(["health"])
    except CallFailure as failure:
        raise RunError(
            f"server at {masked_url} is not reachable: {_said(failure)}",
            hint=scheme_hint(url_flag) if failure.status is None else None,
        ) from None


async def read_context(
    client: TaguruClient, context: str, token_source: str | None = None
) -> ContextEntry:
    """§3.1.2: the first context read (404 → exit 2, other failures → exit 1).

    taguru's line is kept; the fix follows it as a hint: on a 404 the server's
    own contexts (one more ``GET /contexts``), on a 401/403 whether a token was
    sent and from which variable (``token_source``)."""
    seen: list[CallFailure] = []

    def failed(failure: CallFailure) -> TaguruEvalError:
        seen.append(failure)
        code = EXIT_INPUT if failure.status == 404 else EXIT_RUN_FAILED
        return TaguruEvalError(_said(failure), exit_code=code)

    try:
        return await _context_entry(client, context, failed, "unreadable context entry")
    except TaguruEvalError as error:
        status = seen[0].status if seen else None
        hint = None
        if status == 404:
            hint = await contexts_hint(client, context)
        elif status in (401, 403):
            hint = auth_hint(status, token_source, context)
        if hint:
            error.add_hint(hint)
        raise


MAX_LISTED_CONTEXTS = 10
"""How many of the server's contexts an unknown-context hint names."""


async def contexts_hint(client: TaguruClient, context: str) -> str | None:
    """What the server has instead of ``context`` (``GET /contexts``): the closest
    name and up to :data:`MAX_LISTED_CONTEXTS` names, or ``None`` when the list
    cannot be read."""
    try:
        reply = await client.get(["contexts"])
    except CallFailure:
        return None
    payload = reply.payload
    listed = payload.get("contexts") if isinstance(payload, dict) else None
    if not isinstance(listed, list):
        return None
    names = sorted(
        client.redact(entry["name"])
        for entry in listed
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    )
    if not names:
        return "the server has no context yet: create one and load its sources first"
    shown = ", ".join(names[:MAX_LISTED_CONTEXTS])
    more = len(names) - MAX_LISTED_CONTEXTS
    listing = f"the server's contexts: {shown}" + (f" (and {more} more)" if more > 0 else "")
    guess = did_you_mean(context, names)
    return f"{guess} {listing[0].upper()}{listing[1:]}" if guess else listing


def auth_hint(status: int, token_source: str | None, context: str) -> str:
    """Whether a token was sent, from which variable, and what to change."""
    if token_source is None:
        return (
            "no token was sent: set TAGURU_API_TOKEN (or TAGURU_API_TOKENS) to one of "
            "the server's keys"
        )
    if status == 401:
        return (
            f"a token was sent (from {token_source}) and the server did not accept it: "
            "set it to one of the server's keys"
        )
    return (
        f"a token was sent (from {token_source}) and accepted, but its key may not read "
        f"context '{context}': use a key with the read role and a grant on it "
        "(the server's TAGURU_KEY_SCOPES)"
    )


async def read_context_after(client: TaguruClient, context: str) -> ContextEntry:
    """§3.2: the second context read; any failure (404 included) → exit 1."""

    def failed(failure: CallFailure) -> TaguruEvalError:
        return RunError(f"{context}: could not re-read the context after the run: {_said(failure)}")

    return await _context_entry(client, context, failed, "unreadable context entry after the run")


async def _context_entry(
    client: TaguruClient,
    context: str,
    failed: Callable[[CallFailure], TaguruEvalError],
    unreadable: str,
) -> ContextEntry:
    """``GET /contexts/{context}`` decoded; a failed call raises ``failed(failure)``,
    an entry that does not decode exits 1 with ``{context}: {unreadable}: …``."""
    try:
        reply = await client.get(["contexts", context])
    except CallFailure as failure:
        raise failed(failure) from None
    try:
        return read_context_entry(reply.payload)
    except js.JsonShapeError as exc:
        raise RunError(f"{context}: {unreadable}: {client.redact(exc.detail)}") from None


async def read_embeddings(
    client: TaguruClient, context: str, stderr: Callable[[str], None]
) -> tuple[dict[str, str | None] | None, PassageSidecar | None]:
    """§3.1.3: ``{provider_model}`` and the passage sidecar, or (None, None)
    (stderr note) when the GET fails."""
    try:
        reply = await client.get(["contexts", context, "embeddings"])
    except CallFailure as failure:
        stderr(
            one_line(
                f"{PREFIX}{context}: could not read embedding status (recording none): "
                f"{_said(failure)}"
            )
        )
        return None, None
    payload = reply.payload
    model = payload.get("provider_model") if isinstance(payload, dict) else None
    redacted = client.redact(model) if isinstance(model, str) else None
    sidecar = passage_sidecar(payload)
    if sidecar is not None and sidecar.model is not None:
        # Compared with the (redacted) provider model, so redacted the same way.
        sidecar = PassageSidecar(model=client.redact(sidecar.model), rows=sidecar.rows)
    return {"provider_model": redacted}, sidecar


def passage_sidecar(payload: object) -> PassageSidecar | None:
    """The ``passages`` object of an embeddings status, read leniently (a
    malformed one counts as absent: it only informs a report)."""
    sidecar = payload.get("passages") if isinstance(payload, dict) else None
    if not isinstance(sidecar, dict):
        return None
    model = sidecar.get("model")
    rows = sidecar.get("rows")
    return PassageSidecar(
        model=model if isinstance(model, str) else None,
        rows=rows if isinstance(rows, int) and not isinstance(rows, bool) else 0,
    )


async def walk_sources(client: TaguruClient, context: str) -> frozenset[str]:
    """§3.1.4: keyset-walk ``GET …/sources`` until an empty page; failures → exit 1.

    Bounded: past :data:`MAX_SOURCE_PAGES` pages, :data:`MAX_SOURCE_NAMES`
    names or :data:`MAX_SOURCE_NAME_BYTES` bytes of names the walk stops with
    exit 1 (a server whose pages keep advancing forever).
    """
    names: set[str] = set()
    name_bytes = 0
    cursor: str | None = None
    for _page_number in range(MAX_SOURCE_PAGES):
        query = [("limit", str(SOURCES_PAGE_LIMIT))]
        if cursor is not None:
            query.append(("after", cursor))
        try:
            reply = await client.get(["contexts", context, "sources"], query)
        except CallFailure as failure:
            raise RunError(_said(failure)) from None
        page = _sources_page(reply.payload, context)
        if not page:
            return frozenset(names)
        if cursor is not None and page[0] <= cursor:
            raise RunError(
                f"{context}: the server's sources page did not advance past "
                f"'{client.redact(cursor)}'"
            )
        names.update(page)
        name_bytes += sum(len(name.encode("utf-8")) for name in page)
        if len(names) > MAX_SOURCE_NAMES or name_bytes > MAX_SOURCE_NAME_BYTES:
            raise RunError(_walk_too_long(context, f"{len(names):,} names"))
        cursor = page[-1]
    raise RunError(_walk_too_long(context, f"{MAX_SOURCE_PAGES:,} pages"))


def _sources_page(payload: object, context: str) -> list[str]:
    """A page's source names; exit 1 when it is not a page of strings."""
    try:
        return msgspec.convert(payload, _SourcesPage).sources
    except msgspec.ValidationError:
        listed = isinstance(payload, dict) and isinstance(payload.get("sources"), list)
        what = "a sources entry is not a string" if listed else "not a taguru sources page"
        raise RunError(f"{context}: {what}") from None


def _walk_too_long(context: str, reached: str) -> str:
    return (
        f"{context}: the sources listing passed {reached} without an empty page — the walk "
        f"stops at {MAX_SOURCE_PAGES:,} pages, {MAX_SOURCE_NAMES:,} names or "
        f"{MAX_SOURCE_NAME_BYTES // (1024 * 1024)} MiB of names"
    )


def check_expected_sources(eval_set: EvalSet, context: str, sources: frozenset[str]) -> None:
    """§3.1.5: every expected source must be carried by the context, else exit 2."""
    lines = [
        f"{PREFIX}case '{case.case_id}': expected_sources names '{entry.source}', "
        f"which '{context}' does not carry"
        for case in eval_set.cases
        for entry in case.expected_sources
        if entry.source not in sources
    ]
    if lines:
        # The CLI prints a message that already starts with "taguru: " verbatim,
        # so every offending entry keeps its own prefixed line.
        raise LinesError(lines)


async def preflight(
    client: TaguruClient, prepared: PreparedRun, stderr: Callable[[str], None]
) -> Preflight:
    """§3.1 in order: health, context entry, embeddings, source walk, expected sources."""
    context = prepared.options.context
    await check_health(client, prepared.masked_url, prepared.options.url)
    before = await read_context(client, context, prepared.token_source)
    embeddings, passages = await read_embeddings(client, context, stderr)
    sources = await walk_sources(client, context)
    check_expected_sources(prepared.eval_set, context, sources)
    return Preflight(before=before, embeddings=embeddings, sources=sources, passages=passages)
