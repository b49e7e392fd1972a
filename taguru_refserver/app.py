"""The ASGI app: one route table, auth, body reading and taguru's rejections.

Routing is done here on the **raw** path rather than by Starlette's router
because a context name may contain ``/`` sent as ``%2F`` inside one segment
(HTTP.md §1); Starlette decodes the path before matching and would split it.
Every request, matched or not, answers with one of taguru's three response
families; nothing escapes as a framework page or a traceback.

Handlers run on a worker thread (``run_in_threadpool``) so one heavy search
does not hold the event loop; shared state is guarded by ``ServerState.lock``,
which every handler already takes around its reads and writes. The
auth-exempt probes (``/health``, ``/live``, ``/version``) touch no state and
answer on the loop, so a saturated thread pool never delays them.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote_to_bytes

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from taguru_refserver.auth import (
    ApiKey,
    KeyRing,
    keys_from_tokens,
    require_grant,
    require_role,
)
from taguru_refserver.envelope import ApiError, Enveloped, bare, error_response, ok
from taguru_refserver.evidence import EVIDENCE_ROUTES
from taguru_refserver.routes_client import CLIENT_ROUTES
from taguru_refserver.routes_common import Call, RouteSpec
from taguru_refserver.routes_read import READ_ROUTES
from taguru_refserver.routes_write import WRITE_ROUTES
from taguru_refserver.state import ServerState

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # taguru's default body cap (HTTP.md §4.2)


def live(call: Call) -> object:
    """``GET /live``: plain ``ok`` while the process serves."""
    return PlainTextResponse("ok")


def protocol(call: Call) -> object:
    """``GET /protocol``: the routes this server answers, as markdown."""
    lines = ["# taguru_eval reference server", "", "http_contract 1. Routes:", ""]
    lines += [
        f"- `{route.method} {route.template}` — {route.role or 'no token needed'}"
        for route in ROUTES
    ]
    return PlainTextResponse("\n".join(lines) + "\n", media_type="text/markdown")


SERVICE_ROUTES: list[RouteSpec] = [
    RouteSpec("GET", "/live", None, live, enveloped=False),
    RouteSpec("GET", "/protocol", "read", protocol, enveloped=False),
]

ROUTES: list[RouteSpec] = [
    *SERVICE_ROUTES,
    *READ_ROUTES,
    *EVIDENCE_ROUTES,
    *WRITE_ROUTES,
    *CLIENT_ROUTES,
]

_log = logging.getLogger("taguru_refserver")


@dataclass(frozen=True)
class _Prepared:
    """A routed, authorised request whose body is read but not yet parsed."""

    method: str
    name: str
    raw_body: bytes | None
    query_string: bytes
    key: ApiKey | None


class _Dispatcher:
    """Matches a request against the route table and runs it under taguru's rules."""

    def __init__(
        self,
        state: ServerState,
        keys: KeyRing,
        routes: Sequence[RouteSpec],
        max_body_bytes: int,
    ) -> None:
        self.state = state
        self.keys = keys
        self.routes = list(routes)
        self.max_body_bytes = max_body_bytes
        self.exempt_paths = {r.segments for r in self.routes if r.role is None}

    async def __call__(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            spec, prepared = await self._prepare(request)
            if spec.role is None:  # the stateless probes: cheap, and never queued
                return self._respond(spec, prepared, started)
            return await run_in_threadpool(self._respond, spec, prepared, started)
        except ApiError as error:
            return error_response(error, time.perf_counter() - started)
        except Exception:  # the catch-all: taguru's internal envelope, never a traceback
            _log.exception("unhandled error on %s %s", request.method, request.url.path)
            return internal_error(time.perf_counter() - started)

    def _respond(self, spec: RouteSpec, prepared: _Prepared, started: float) -> Response:
        """Parse the body, read the query, run the handler and render its answer.

        Runs on a worker thread for every route that touches state: parsing a
        body of up to 8 MiB and rendering a large answer are CPU work too.
        """
        body = None if prepared.raw_body is None else self._parse_body(spec, prepared.raw_body)
        query = _decode_query(prepared.query_string)
        call = Call(self.state, prepared.method, prepared.name, body, query, prepared.key)
        result = spec.handler(call)
        if isinstance(result, Response):  # text routes (/live, /protocol)
            return result
        if not spec.enveloped:
            return bare(result)
        if isinstance(result, Enveloped):
            return ok(result.result, time.perf_counter() - started, result.extra())
        return ok(result, time.perf_counter() - started)

    async def _prepare(self, request: Request) -> tuple[RouteSpec, _Prepared]:
        method = request.method.upper()
        raw_path: bytes = request.scope.get("raw_path") or request.url.path.encode("utf-8")
        segments = _decode_segments(raw_path.split(b"?", 1)[0])
        if tuple(segments) not in self.exempt_paths:
            key = self.keys.authenticate(request.headers.getlist("authorization"))
        else:
            key = None
        candidates = [(r, n) for r in self.routes if (n := _match(r, segments)) is not None]
        if not candidates:
            uri = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            raise ApiError(
                "unknown_path", f"no route for {method} {uri}; GET /protocol lists the API"
            )
        wanted = "GET" if method == "HEAD" else method  # a GET route answers HEAD too, as in axum
        chosen = next(((r, n) for r, n in candidates if r.method == wanted), None)
        if chosen is None:
            raise ApiError(
                "method_not_allowed",
                f"{method} is not supported on {request.url.path}; GET /protocol lists the API",
                headers={"Allow": _allow_header(r.method for r, _ in candidates)},
            )
        spec, name = chosen
        if spec.role is not None:
            require_role(key, spec.role, method, spec.template)
            if name:
                require_grant(key, name)
        raw_body = await self._read_body(request, spec)
        query_string: bytes = request.scope.get("query_string", b"")
        return spec, _Prepared(method, name, raw_body, query_string, key)

    @staticmethod
    def _parse_body(spec: RouteSpec, raw: bytes) -> object | None:
        if spec.body == "optional" and not raw.strip():
            return None
        return parse_json(raw)

    async def _read_body(self, request: Request, spec: RouteSpec) -> bytes | None:
        """The raw body (None on body-less routes); parsing waits for the worker thread."""
        if spec.body == "none":
            return None
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _too_large()
        if spec.body == "json" and not _is_json_content_type(request.headers.get("content-type")):
            raise ApiError(
                "malformed_request",
                "Expected request with `Content-Type: application/json`",
                status=415,
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _too_large()
            chunks.append(chunk)
        return b"".join(chunks)


def _allow_header(methods: Iterable[str]) -> str:
    """axum's ``Allow`` value: the route's methods in table order, ``HEAD`` after
    ``GET`` (a GET route answers it), comma-separated without spaces."""
    allowed: list[str] = []
    for method in methods:
        for name in (method, "HEAD") if method == "GET" else (method,):
            if name not in allowed:
                allowed.append(name)
    return ",".join(allowed)


def _too_large() -> ApiError:
    return ApiError("payload_too_large", "Failed to buffer the request body: length limit exceeded")


def _reject_constant(token: str) -> object:
    raise ValueError(f"{token} is not valid JSON")


# A \u escape of a UTF-16 surrogate: the only way a JSON text that is valid
# UTF-8 can still decode to a string that is not (json.loads accepts a lone
# "\ud800"; serde_json, taguru's parser, refuses it as a syntax error).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def parse_json(raw: bytes) -> object:
    """Strict JSON: no NaN/Infinity, UTF-8 only, no lone surrogates.

    Anything else is a 400 ``malformed_request``, as serde_json's syntax errors are.
    """
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ApiError(
            "malformed_request", f"Failed to parse the request body as JSON: {error}"
        ) from None
    # The scan is a cheap filter (a regex over bytes); only a body that spells a
    # surrogate escape, paired or not, pays for the walk over its strings.
    if _SURROGATE_ESCAPE.search(raw) and not _all_strings_encode(value):
        raise ApiError(
            "malformed_request",
            "Failed to parse the request body as JSON: a \\u escape is a lone surrogate, "
            "which is not a Unicode scalar value",
        )
    return value


def _all_strings_encode(value: object) -> bool:
    """True when every string (keys included) in a parsed JSON value is valid Unicode.

    Iterative, because json.loads nests deeper than Python's recursion limit allows.
    """
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            strings: list[str] = [item]
        elif isinstance(item, dict):
            strings = list(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            strings = []
            pending.extend(item)
        else:
            continue
        for text in strings:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def internal_error(elapsed: float) -> Response:
    """taguru's 500 ``internal`` envelope, with a fixed text that leaks nothing."""
    internal = ApiError("internal", "internal error: the request could not be completed")
    return error_response(internal, elapsed)


def _is_json_content_type(value: str | None) -> bool:
    """axum's rule: ``application/json`` or any ``application/*+json``."""
    if value is None:
        return False
    mime = value.split(";", 1)[0].strip().lower()
    kind, _, subtype = mime.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _decode_segments(raw_path: bytes) -> list[str]:
    """Percent-decode each path segment on its own; non-UTF-8 is a 400 (HTTP.md §4.3)."""
    parts = raw_path.decode("latin-1").strip("/").split("/") if raw_path.strip(b"/") else []
    segments: list[str] = []
    for part in parts:
        try:
            segments.append(unquote_to_bytes(part).decode("utf-8"))
        except UnicodeDecodeError:
            raise ApiError(
                "malformed_request", "a path segment is not valid UTF-8 after percent-decoding"
            ) from None
    if raw_path.endswith(b"/") and len(raw_path) > 1:
        segments.append("")  # "/contexts/" names no route
    return segments


def _match(spec: RouteSpec, segments: list[str]) -> str | None:
    """The ``{name}`` value when ``segments`` fit the template ("" when it has none)."""
    pattern = spec.segments if spec.template != "/" else ()
    if len(pattern) != len(segments):
        return None
    name = ""
    for expected, actual in zip(pattern, segments, strict=True):
        if expected == "{name}":
            if not actual:
                return None
            name = actual
        elif expected != actual:
            return None
    return name


def _decode_query(query_string: bytes) -> dict[str, str]:
    text = query_string.decode("latin-1")
    try:
        pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise ApiError(
            "malformed_request", "Failed to deserialize query string: invalid UTF-8"
        ) from None
    return dict(pairs)


def create_app(
    state: ServerState | None = None,
    *,
    token: str | None = None,
    read_token: str | None = None,
    keys: Sequence[ApiKey] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """A taguru-compatible ASGI app over ``state`` (a fresh empty one by default).

    ``token`` is a read-write (admin) key, ``read_token`` a read-only key; with
    neither (and no ``keys``) auth is off, as in taguru. ``keys`` adds named keys
    with explicit roles and optional context grants (used by tests reproducing
    taguru's 403 texts). The toy vector lane and reranker are options of
    ``ServerState``.
    """
    ring = KeyRing([*keys_from_tokens(token, read_token), *(keys or ())])
    dispatcher = _Dispatcher(state or ServerState(), ring, ROUTES, max_body_bytes)

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        try:
            response = await dispatcher(Request(scope, receive))
        except Exception:
            # Last resort: the dispatcher's own error rendering failed (an error
            # text that cannot be encoded, say). Logged so a test sees the bug;
            # the client still gets the JSON envelope, not Starlette's text page.
            _log.exception("unrenderable answer on %s %s", scope.get("method"), scope.get("path"))
            response = internal_error(time.perf_counter() - started)
        await response(scope, receive, send)

    # No Starlette routes: every HTTP request falls through to the dispatcher,
    # whatever its method (Starlette's own 404/405 pages never answer).
    app = Starlette()
    app.router.default = asgi
    app.state.taguru = dispatcher.state
    return app
