"""Malformed requests get taguru's error envelope and status — never a traceback.

Covers framework rejections (HTTP.md §4.3: broken JSON 400, wrong content type
415, wrong JSON types 422, oversized bodies 413), semantic refusals (400
invalid_argument / over_limit), unknown contexts (404 on every route), huge
limits (clamped, not refused), unknown paths and methods, auth failures
(§5), and a handler crash (500 ``internal``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import EXAMPLES, WIRE
from support.refserver import Server, context_path, in_process, load_fixture, seed_smoke

from taguru_refserver.auth import ApiKey
from taguru_refserver.state import ServerState

CODES = set(load_fixture(WIRE / "shapes.json")["enums"]["response.code"])
NAME = "sake"


def assert_envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["status"] == "error"
    assert body["code"] == code
    assert code in CODES
    assert isinstance(body["error"], str) and body["error"]
    assert isinstance(body["time"], float)
    return body


async def raw(
    server: Server,
    method: str,
    path: str,
    content: bytes | None,
    content_type: str | None = "application/json",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = dict(headers or {})
    if content_type is not None:
        sent["Content-Type"] = content_type
    return await server.client.request(method, path, content=content, headers=sent)


# (id, method, path suffix, raw body, content type, status, code)
FRAMEWORK: list[tuple[str, str, str, bytes | None, str | None, int, str]] = [
    (
        "broken-json",
        "POST",
        "/sources/search",
        b'{"query": ',
        "application/json",
        400,
        "malformed_request",
    ),
    (
        "nan-literal",
        "POST",
        "/resolve",
        b'{"cue": "x", "dice_floor": NaN}',
        "application/json",
        400,
        "malformed_request",
    ),
    (
        "not-utf8",
        "POST",
        "/resolve",
        b'{"cue": "\xff"}',
        "application/json",
        400,
        "malformed_request",
    ),
    ("empty-body", "POST", "/query", b"", "application/json", 400, "malformed_request"),
    (
        "text-plain",
        "POST",
        "/sources/search",
        b'{"query": "x"}',
        "text/plain",
        415,
        "malformed_request",
    ),
    (
        "no-content-type",
        "POST",
        "/citations",
        b'{"source": "a", "paragraph": 0}',
        None,
        415,
        "malformed_request",
    ),
    ("put-not-json", "PUT", "", b"description=x", "text/plain", 400, "malformed_request"),
]

# (id, method, path suffix, JSON body, status, code)
TYPED: list[tuple[str, str, str, Any, int, str]] = [
    ("query-not-string", "POST", "/sources/search", {"query": 42}, 422, "malformed_request"),
    ("query-missing", "POST", "/sources/search", {"limit": 3}, 422, "malformed_request"),
    ("search-array-body", "POST", "/sources/search", ["q"], 422, "malformed_request"),
    (
        "limit-string",
        "POST",
        "/sources/search",
        {"query": "x", "limit": "10"},
        422,
        "malformed_request",
    ),
    (
        "limit-negative",
        "POST",
        "/sources/search",
        {"query": "x", "limit": -1},
        422,
        "malformed_request",
    ),
    ("limit-float", "POST", "/resolve", {"cue": "x", "limit": 1.5}, 422, "malformed_request"),
    ("limit-past-u64", "POST", "/resolve", {"cue": "x", "limit": 2**70}, 422, "malformed_request"),
    ("cue-number", "POST", "/resolve_label", {"cue": 42}, 422, "malformed_request"),
    (
        "tags-string",
        "POST",
        "/sources/search",
        {"query": "x", "tags": "蔵"},
        422,
        "malformed_request",
    ),
    (
        "since-negative",
        "POST",
        "/sources/search",
        {"query": "x", "since": -5},
        422,
        "malformed_request",
    ),
    (
        "paragraph-negative",
        "POST",
        "/citations",
        {"source": "a", "paragraph": -1},
        422,
        "malformed_request",
    ),
    (
        "paragraph-string",
        "POST",
        "/citations",
        {"source": "a", "paragraph": "0"},
        422,
        "malformed_request",
    ),
    ("paragraph-missing", "POST", "/citations", {"source": "a"}, 422, "malformed_request"),
    (
        "query-after-unknown-key",
        "POST",
        "/query",
        {
            "subject": "a",
            "after": {"weight": 1, "subject": "a", "label": "b", "object": "c", "x": 1},
        },
        422,
        "malformed_request",
    ),
    (
        "associations-object-body",
        "POST",
        "/associations",
        {"subject": "a"},
        422,
        "malformed_request",
    ),
    (
        "association-weight-missing",
        "POST",
        "/associations",
        [{"subject": "a", "label": "b", "object": "c"}],
        422,
        "malformed_request",
    ),
    (
        "association-weight-string",
        "POST",
        "/associations",
        [{"subject": "a", "label": "b", "object": "c", "weight": "1"}],
        422,
        "malformed_request",
    ),
    ("passages-not-map", "POST", "/sources", {"passages": ["a"]}, 422, "malformed_request"),
    ("passage-text-number", "POST", "/sources", {"passages": {"a": 1}}, 422, "malformed_request"),
    ("put-description-number", "PUT", "", {"description": 5}, 422, "malformed_request"),
    ("aliases-not-map", "POST", "/aliases", {"concepts": ["a"]}, 422, "malformed_request"),
    # semantic refusals
    (
        "since-not-before-until",
        "POST",
        "/sources/search",
        {"query": "x", "since": 10, "until": 10},
        400,
        "invalid_argument",
    ),
    ("empty-tag", "POST", "/sources/search", {"query": "x", "tags": [""]}, 400, "invalid_argument"),
    (
        "tags-1001",
        "POST",
        "/sources/search",
        {"query": "x", "tags": ["t"] * 1001},
        400,
        "over_limit",
    ),
    (
        "tags-33-distinct",
        "POST",
        "/sources/search",
        {"query": "x", "tags": [f"t{i}" for i in range(33)]},
        400,
        "over_limit",
    ),
    ("query-1001-subjects", "POST", "/query", {"subject": ["x"] * 1001}, 400, "over_limit"),
    ("query-unpinned", "POST", "/query", {"subject": "", "label": []}, 400, "invalid_argument"),
    (
        "passages-1001",
        "POST",
        "/sources",
        {"passages": {f"s{i}": "t" for i in range(1001)}},
        400,
        "over_limit",
    ),
    (
        "associations-10001",
        "POST",
        "/associations",
        [{"subject": "a", "label": "b", "object": "c", "weight": 1}] * 10001,
        400,
        "over_limit",
    ),
    (
        "association-empty-subject",
        "POST",
        "/associations",
        [{"subject": "", "label": "b", "object": "c", "weight": 1}],
        400,
        "invalid_argument",
    ),
    (
        "association-weight-range",
        "POST",
        "/associations",
        [{"subject": "a", "label": "b", "object": "c", "weight": 1e7}],
        400,
        "invalid_argument",
    ),
    (
        "section-unknown-source",
        "POST",
        "/sources",
        {"passages": {"a": "x"}, "sections": {"b": [{"paragraph": 0, "section": "s"}]}},
        400,
        "invalid_argument",
    ),
    (
        "citation-empty-source",
        "POST",
        "/citations",
        {"source": "", "paragraph": 0},
        400,
        "invalid_argument",
    ),
    (
        "citation-no-source",
        "POST",
        "/citations",
        {"source": "ghost", "paragraph": 0},
        404,
        "no_source",
    ),
    (
        "citation-no-paragraph",
        "POST",
        "/citations",
        {"source": "corpus/brewery.md", "paragraph": 4294967295},
        404,
        "no_paragraph",
    ),
    ("aliases-remove-empty", "DELETE", "/aliases", {}, 400, "invalid_argument"),
    ("aliases-remove-unknown", "DELETE", "/aliases", {"concepts": ["nobody"]}, 409, "conflict"),
    ("create-existing", "PUT", "", {"description": "again"}, 409, "already_exists"),
]


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with in_process() as running:
        await seed_smoke(running, NAME)
        yield running


@pytest.mark.parametrize(
    ("method", "suffix", "content", "content_type", "status", "code"),
    [pytest.param(*case[1:], id=case[0]) for case in FRAMEWORK],
)
async def test_framework_rejection(
    server: Server,
    method: str,
    suffix: str,
    content: bytes | None,
    content_type: str | None,
    status: int,
    code: str,
) -> None:
    path = context_path("fresh" if method == "PUT" else NAME, suffix)
    response = await raw(server, method, path, content, content_type)
    assert_envelope(response, status, code)


@pytest.mark.parametrize(
    ("method", "suffix", "body", "status", "code"),
    [pytest.param(*case[1:], id=case[0]) for case in TYPED],
)
async def test_refusal(
    server: Server, method: str, suffix: str, body: Any, status: int, code: str
) -> None:
    response = await server.call(method, context_path(NAME, suffix), body)
    assert_envelope(response, status, code)


async def test_type_rejection_names_the_field(server: Server) -> None:
    response = await server.call(
        "POST", context_path(NAME, "/citations"), {"source": "a", "paragraph": -1}
    )
    body = assert_envelope(response, 422, "malformed_request")
    assert body["error"] == (
        "Failed to deserialize the JSON body into the target type: "
        "paragraph: invalid value: integer `-1`, expected u32"
    )


async def test_store_refusal_lists_issues_and_writes_nothing(server: Server) -> None:
    body = {
        "passages": {"": "x", "ok.md": "y"},
        "tags": {"ok.md": ["", "t" * 129]},
        "sections": {"ok.md": [{"paragraph": 0, "section": ""}]},
    }
    response = await server.call("POST", context_path(NAME, "/sources"), body)
    payload = assert_envelope(response, 400, "invalid_argument")
    assert payload["integrity"] == "nothing_written"
    assert payload["retryable_after_correction"] is True
    paths = [issue["path"] for issue in payload["issues"]]
    assert paths == [
        "passages['']",
        "sections['ok.md'][0].section",
        "tags['ok.md'][0]",
        "tags['ok.md'][1]",
    ]
    assert payload["issues_total"] == 4
    assert {issue["kind"] for issue in payload["issues"]} == {"empty", "too_long"}
    listing = await server.ok("GET", context_path(NAME, "/sources"))
    assert listing["sources"] == ["corpus/brewery.md"]


async def test_since_until_message_is_verbatim(server: Server) -> None:
    response = await server.call(
        "POST", context_path(NAME, "/sources/search"), {"query": "x", "since": 20, "until": 10}
    )
    body = assert_envelope(response, 400, "invalid_argument")
    assert body["error"] == (
        "since 20 is not before until 10 — the window is half-open [since, until) "
        "and this one selects nothing"
    )


# Every /contexts/{name}/... route: 404 no_context for an unknown name.
CONTEXT_ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "", None),
    ("GET", "/embeddings", None),
    ("GET", "/sources", None),
    ("GET", "/labels", None),
    ("GET", "/aliases", None),
    ("PATCH", "", {"pinned": True}),
    ("POST", "/sources/search", {"query": "x", "limit": 0}),
    ("POST", "/sources/search", {"query": "。。"}),
    ("POST", "/resolve", {"cue": ""}),
    ("POST", "/resolve_label", {"cue": "x"}),
    ("POST", "/query", {"subject": "x"}),
    ("POST", "/citations", {"source": "a", "paragraph": 0}),
    ("POST", "/sources", {"passages": {}}),
    ("POST", "/associations", []),
    ("POST", "/aliases", {}),
    ("DELETE", "/aliases", {"concepts": ["a"]}),
    ("POST", "/sources/retract", {"source": "a"}),
    ("POST", "/associations/retract", {"subject": "a", "label": "b", "object": "c"}),
]


@pytest.mark.parametrize(("method", "suffix", "body"), CONTEXT_ROUTES)
async def test_unknown_context_is_no_context(
    server: Server, method: str, suffix: str, body: Any
) -> None:
    response = await server.call(method, context_path("does-not-exist", suffix), body)
    payload = assert_envelope(response, 404, "no_context")
    assert payload["error"] == "context 'does-not-exist' not found"


@pytest.mark.parametrize(
    ("suffix", "body"),
    [
        ("/sources/search", {"query": "青嶺", "limit": 10**12}),
        ("/resolve", {"cue": "青嶺", "limit": 2**64 - 1}),
        ("/query", {"subject": "青嶺酒造", "limit": 10**9}),
    ],
)
async def test_huge_limits_are_clamped_not_refused(server: Server, suffix: str, body: Any) -> None:
    result = await server.ok("POST", context_path(NAME, suffix), body)
    assert result  # the smoke corpus answers each of these with one item


async def test_huge_query_string_limit_is_clamped_and_garbage_refused(server: Server) -> None:
    listing = await server.ok("GET", context_path(NAME, "/sources?limit=99999999999999999999"))
    assert listing["sources"] == ["corpus/brewery.md"]
    response = await server.call("GET", context_path(NAME, "/sources?limit=ten"))
    assert_envelope(response, 400, "malformed_request")
    response = await server.call("GET", context_path(NAME, "/sources?after=" + "a" * 1033))
    assert_envelope(response, 400, "invalid_argument")


async def test_unknown_path_and_wrong_method(server: Server) -> None:
    response = await server.call("GET", "/nothing/here?x=1")
    body = assert_envelope(response, 404, "unknown_path")
    assert body["error"] == "no route for GET /nothing/here?x=1; GET /protocol lists the API"
    response = await server.call("GET", context_path(NAME, "/resolve"))
    body = assert_envelope(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "POST"
    assert body["error"] == (
        f"GET is not supported on /contexts/{NAME}/resolve; GET /protocol lists the API"
    )
    response = await server.call("DELETE", context_path(NAME, "/sources"))
    assert_envelope(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "GET,HEAD,POST"  # taguru 0.9.7's, measured
    response = await server.call("GET", "/contexts/")
    assert_envelope(response, 404, "unknown_path")


async def test_path_segment_that_is_not_utf8(server: Server) -> None:
    response = await server.call("GET", "/contexts/%FF%FE")
    assert_envelope(response, 400, "malformed_request")


async def test_context_name_limits(server: Server) -> None:
    response = await server.call("PUT", context_path("n" * 65))
    assert_envelope(response, 400, "invalid_argument")
    response = await server.call("PUT", context_path("x"), {"description": "d" * 4097})
    assert_envelope(response, 400, "invalid_argument")
    # a name with "/" travels as %2F inside one segment
    await server.create("a/b")
    entry = await server.entry("a/b")
    assert entry["name"] == "a/b"


async def test_put_body_is_parsed_whatever_the_content_type(server: Server) -> None:
    response = await raw(
        server, "PUT", context_path("plain"), b'{"description": "x"}', "text/plain"
    )
    assert response.status_code == 200
    assert (await server.entry("plain"))["description"] == "x"
    response = await raw(server, "PUT", context_path("empty"), b"", None)
    assert response.status_code == 200


async def test_oversized_body_is_413() -> None:
    async with in_process(max_body_bytes=1024) as server:
        await server.create(NAME)
        big = json.dumps({"passages": {"a.md": "x" * 2048}}).encode()
        response = await raw(server, "POST", context_path(NAME, "/sources"), big)
        assert_envelope(response, 413, "payload_too_large")

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"passages": {"a.md": "'
            for _ in range(8):
                yield b"y" * 256
            yield b'"}}'

        # no Content-Length: the cap is enforced while reading the stream
        response = await server.client.post(
            context_path(NAME, "/sources"),
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        assert_envelope(response, 413, "payload_too_large")
        assert (await server.entry(NAME))["revision"]["passages"] == 0


# -- auth ---------------------------------------------------------------------------


@pytest.fixture
async def guarded() -> AsyncIterator[Server]:
    async with in_process(token="write-secret", read_token="read-secret") as running:
        await running.create(NAME, token="write-secret")
        yield running


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic d3JpdGUtc2VjcmV0"},
        {"Authorization": "Bearer"},
    ],
    ids=["missing", "unknown", "basic", "empty"],
)
async def test_unauthorized_shape(guarded: Server, headers: dict[str, str]) -> None:
    response = await guarded.client.get("/contexts", headers=headers)
    body = assert_envelope(response, 401, "unauthorized")
    expected = load_fixture(EXAMPLES / "error_unauthorized.json")["response"]
    assert body["error"] == expected["error"]
    assert response.headers["www-authenticate"] == "Bearer"


async def test_repeated_authorization_header_is_refused(guarded: Server) -> None:
    headers = [("Authorization", "Bearer read-secret"), ("Authorization", "Bearer read-secret")]
    response = await guarded.client.get("/contexts", headers=headers)
    assert_envelope(response, 401, "unauthorized")


async def test_read_key_reads_but_cannot_write(guarded: Server) -> None:
    entry = await guarded.ok("GET", context_path(NAME), token="read-secret")
    assert entry["name"] == NAME
    await guarded.ok(
        "POST", context_path(NAME, "/sources/search"), {"query": "x"}, token="read-secret"
    )
    response = await guarded.call(
        "POST", context_path(NAME, "/sources"), {"passages": {}}, token="read-secret"
    )
    body = assert_envelope(response, 403, "forbidden")
    assert (
        body["error"]
        == "key 'read' has role 'read', but POST /contexts/{name}/sources needs 'write'"
    )
    # the scheme is case-insensitive and may be followed by several spaces
    lower = await guarded.client.get("/contexts", headers={"Authorization": "bearer   read-secret"})
    assert lower.status_code == 200


async def test_write_key_writes_and_exempt_routes_need_no_token(guarded: Server) -> None:
    await guarded.ok("POST", context_path(NAME, "/sources"), {"passages": {}}, token="write-secret")
    assert (await guarded.call("GET", "/health")).status_code == 200
    assert (await guarded.call("GET", "/version")).status_code == 200


async def test_named_read_key_role_message() -> None:
    async with in_process(keys=[ApiKey("ci", "t", "read")]) as server:
        response = await server.call("PUT", context_path(NAME), {"description": "d"}, token="t")
    body = assert_envelope(response, 403, "forbidden")
    assert body["error"] == "key 'ci' has role 'read', but PUT /contexts/{name} needs 'write'"


# -- crashes and fuzz ------------------------------------------------------------------


class ExplodingState(ServerState):
    def context(self, name: str) -> Any:
        raise RuntimeError("secret internals /home/user/file.py line 3")


async def test_a_handler_crash_is_the_internal_envelope() -> None:
    async with in_process(state=ExplodingState()) as server:
        response = await server.call("GET", context_path(NAME))
    body = assert_envelope(response, 500, "internal")
    assert "secret internals" not in response.text
    assert body["error"] == "internal error: the request could not be completed"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "query",
                    "cue",
                    "limit",
                    "tags",
                    "since",
                    "until",
                    "subject",
                    "label",
                    "object",
                    "source",
                    "paragraph",
                    "passages",
                    "weight",
                    "after",
                    "concepts",
                    "labels",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=12,
)
POST_ROUTES = [
    "/sources/search",
    "/resolve",
    "/resolve_label",
    "/query",
    "/citations",
    "/sources",
    "/associations",
    "/aliases",
    "/sources/retract",
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(route=st.sampled_from(POST_ROUTES), body=JSON)
async def test_fuzzed_bodies_never_crash(route: str, body: Any) -> None:
    async with in_process() as server:
        await seed_smoke(server, NAME)
        response = await server.call("POST", context_path(NAME, route), body)
    assert response.status_code != 500, response.text
    assert "Traceback" not in response.text
    payload = response.json()
    if response.status_code == 200:
        assert payload["status"] == "ok" and "result" in payload
    else:
        assert payload["status"] == "error" and payload["code"] in CODES
