"""The run-mode HTTP client: URLs, headers, envelope, failure messages, faults."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taguru_eval.run.http import (
    CallFailure,
    TaguruClient,
    build_url,
    encode_form,
    probe_version,
    skew_warning,
)
from taguru_eval.run.http import bodies as client_module

BASE = "http://127.0.0.1:8248"
TOKEN = "canary-token-5f1e"
Handler = Callable[[httpx.Request], Any]


def mock_client(handler: Handler, token: str | None = None, **kwargs: Any) -> TaguruClient:
    return TaguruClient(BASE, token, transport=httpx.MockTransport(handler), **kwargs)


def envelope(result: object) -> httpx.Response:
    return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})


async def failure_of(client: TaguruClient, segments: list[str]) -> CallFailure:
    with pytest.raises(CallFailure) as caught:
        await client.get(segments)
    return caught.value


# --------------------------------------------------------------------------- URLs


def test_segments_are_encoded_one_by_one() -> None:
    url = build_url(BASE, ["contexts", "a/b?c#d%e f", "日本"])
    assert url == ("http://127.0.0.1:8248/contexts/a%2Fb%3Fc%23d%25e%20f/%E6%97%A5%E6%9C%AC")


def test_base_path_is_kept_and_query_is_form_encoded() -> None:
    url = build_url("http://h:1/api", ["contexts", "x", "sources"], [("after", "a b/ä")])
    assert url == "http://h:1/api/contexts/x/sources?after=a+b%2F%C3%A4"
    assert encode_form([("limit", "1000")]) == "limit=1000"


# --------------------------------------------------------------------------- success path


async def test_envelope_is_unwrapped_and_headers_sent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return envelope({"hits": []})

    async with mock_client(handler, TOKEN) as client:
        reply = await client.post(["contexts", "sake", "sources", "search"], {"query": "青嶺"})
        await client.get_bare(["health"])
    assert reply.payload == {"hits": []}
    assert reply.status == 200
    assert isinstance(reply.latency_ms, int) and reply.latency_ms >= 0
    post, health = seen
    assert post.headers["content-type"] == "application/json"
    assert json.loads(post.content) == {"query": "青嶺"}
    assert b" " not in post.content  # compact JSON
    assert post.headers["authorization"] == f"Bearer {TOKEN}"
    assert health.headers["authorization"] == f"Bearer {TOKEN}"


async def test_no_token_means_no_authorization_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return envelope(True)

    async with mock_client(handler) as client:
        await client.get(["contexts", "x"])
    assert "authorization" not in seen[0].headers


async def test_result_may_be_any_json_value() -> None:
    async with mock_client(lambda r: envelope([1, 2])) as client:
        assert (await client.get(["x"])).payload == [1, 2]


# --------------------------------------------------------------------------- failure messages


async def test_non_200_uses_the_error_field_and_keeps_a_404_code() -> None:
    body = {"status": "error", "code": "no_context", "error": "context 'nope' not found"}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json=body)

    async with mock_client(handler) as client:
        failure = await failure_of(client, ["contexts", "nope"])
    assert failure.message == (
        "http://127.0.0.1:8248/contexts/nope answered 404: context 'nope' not found"
    )
    assert failure.status == 404
    assert failure.code == "no_context"


async def test_a_non_404_code_is_not_kept() -> None:
    body = {"status": "error", "code": "over_limit", "error": "too many"}
    async with mock_client(lambda r: httpx.Response(400, json=body)) as client:
        failure = await failure_of(client, ["x"])
    assert failure.code is None
    assert failure.message.endswith("answered 400: too many")


async def test_non_json_error_body_is_trimmed_whole() -> None:
    async with mock_client(lambda r: httpx.Response(502, text="\u3000 bad gateway \n")) as client:
        failure = await failure_of(client, ["x"])
    assert failure.message == "http://127.0.0.1:8248/x answered 502: bad gateway"


async def test_retry_after_is_echoed_never_acted_on() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(
            503,
            headers={"Retry-After": "7"},
            json={"status": "error", "code": "unhealthy", "error": "flush failed"},
        )

    async with mock_client(handler) as client:
        failure = await failure_of(client, ["x"])
    assert failure.message == "http://127.0.0.1:8248/x answered 503: flush failed (Retry-After: 7)"
    assert calls == 1  # no retries


@pytest.mark.parametrize(
    "body",
    ['{"status": "ok"}', "[1,2]", "not json", '{"result": NaN}', '{"result": 1'],
    ids=["no-result", "array", "text", "nan", "truncated"],
)
async def test_200_that_is_not_an_envelope(body: str) -> None:
    async with mock_client(lambda r: httpx.Response(200, text=f"  {body} ")) as client:
        failure = await failure_of(client, ["x"])
    assert failure.message == f"http://127.0.0.1:8248/x: not a taguru response: {body}"
    assert failure.status == 200


async def test_invalid_utf8_is_unreadable() -> None:
    async with mock_client(lambda r: httpx.Response(200, content=b"\xff\xfe{")) as client:
        failure = await failure_of(client, ["x"])
    assert failure.message.startswith("http://127.0.0.1:8248/x: unreadable response: ")


async def test_transport_failure_message() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    async with mock_client(handler) as client:
        failure = await failure_of(client, ["health"])
    assert failure.message == "http://127.0.0.1:8248/health: connection refused"
    assert failure.status is None and failure.code is None


async def test_library_timeout_is_a_transport_failure() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    async with mock_client(handler) as client:
        failure = await failure_of(client, ["x"])
    assert failure.message == "http://127.0.0.1:8248/x: timed out"


async def test_overall_deadline_covers_the_whole_exchange() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return envelope(1)

    async with mock_client(handler, timeout_s=0.05) as client:
        failure = await failure_of(client, ["x"])
    assert failure.message == "http://127.0.0.1:8248/x: timed out after 0.05 s"
    assert failure.latency_ms >= 40


class _DroppingStream(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"result": '
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


async def test_connection_dropped_mid_body_is_unreadable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_DroppingStream())

    async with mock_client(handler) as client:
        failure = await failure_of(client, ["x"])
    assert failure.message == (
        "http://127.0.0.1:8248/x: unreadable response: "
        "peer closed connection without sending complete body"
    )


async def test_body_over_the_cap_is_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "BODY_CAP_BYTES", 16)
    async with mock_client(lambda r: envelope("x" * 64)) as client:
        failure = await failure_of(client, ["x"])
    assert "unreadable response: the body exceeds the" in failure.message


async def test_token_never_appears_in_failures() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"status": "error", "code": "unauthorized", "error": "no"})

    async with mock_client(handler, TOKEN) as client:
        failure = await failure_of(client, ["x"])
    assert TOKEN not in failure.message
    assert TOKEN not in repr(failure)


# --------------------------------------------------------------------------- version probe


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("ok", "answers /health as a pre-0.5 server"),
        ('{"status": "ok", "version": "0.5.0-rc.1"}', "runs 0.5.0-rc.1"),
        ('{"status": "ok", "version": "0.9.7"}', None),
        ('{"status": "ok", "version": "0.5-rc.1"}', None),
        ('{"status": "ok"}', None),
        ("garbage", None),
    ],
)
def test_skew_warning(body: str, expected: str | None) -> None:
    warning = skew_warning(body, BASE)
    if expected is None:
        assert warning is None
    else:
        assert warning is not None
        assert warning.startswith(
            f"taguru: evaluate: warning: this CLI is 0.9.7 but the server at {BASE} "
        )
        assert expected in warning
        assert warning.endswith("continuing anyway")


async def test_probe_is_silent_on_failure() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    async with mock_client(handler) as client:
        assert await probe_version(client) is None
    async with mock_client(lambda r: httpx.Response(503, text="x")) as client:
        assert await probe_version(client) is None


# --------------------------------------------------------------------------- real loopback


async def test_default_transport_over_loopback() -> None:
    """The aiohttp transport against a real socket: success, a 404, and a refusal."""
    from aiohttp import web

    received: list[str | None] = []

    async def handle(request: web.Request) -> web.Response:
        received.append(request.headers.get("Authorization"))
        if request.path == "/contexts/nope":
            return web.json_response(
                {"status": "error", "code": "no_context", "error": "context 'nope' not found"},
                status=404,
            )
        return web.json_response({"result": {"auth": request.headers.get("Authorization")}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with TaguruClient(f"http://127.0.0.1:{port}", TOKEN) as client:
            reply = await client.get(["contexts", "sake"])
            assert received == [f"Bearer {TOKEN}"]
            # The server echoed the header back: the token is redacted on the way in.
            assert reply.payload == {"auth": "Bearer [REDACTED]"}
            with pytest.raises(CallFailure) as caught:
                await client.get(["contexts", "nope"])
            assert caught.value.code == "no_context"
            assert caught.value.message == (
                f"http://127.0.0.1:{port}/contexts/nope answered 404: context 'nope' not found"
            )
    finally:
        await runner.cleanup()
    async with TaguruClient(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(CallFailure) as refused:
            await client.get_bare(["health"])
    assert refused.value.message.startswith(f"http://127.0.0.1:{port}/health: ")
    assert refused.value.status is None


@pytest.mark.parametrize(
    ("base", "reason"),
    [
        (
            "ftp://127.0.0.1:1",
            "unsupported or invalid URL (only http:// and https:// can be reached)",
        ),
        # Base URLs are checked at resolution; a redirect can still lead to such a host,
        # and then the transport's own reason says more than the sentence.
        ("http://127.1:9", "invalid URL: 127.1 - is not a canonical IPv4 address"),
    ],
)
async def test_a_url_the_transport_refuses_reads_as_a_sentence(base: str, reason: str) -> None:
    async with TaguruClient(base) as client:
        with pytest.raises(CallFailure) as caught:
            await client.get_bare(["health"])
    assert caught.value.message == f"{base}/health: {reason}"


@pytest.mark.parametrize("pool", ["engine", "httpx-pool"])
async def test_misbehaving_server_over_loopback(pool: str) -> None:
    """Malformed HTTP and a body cut short become failures, never crashes (httpx's
    own pool is held to it too: the client, not the transport, words a failure)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if head.split(b" ")[1] == b"/short":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"result"'
            )
        else:
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    try:
        transport = None if pool == "engine" else httpx.AsyncHTTPTransport(retries=0)
        async with TaguruClient(base, transport=transport) as client:
            short = await failure_of(client, ["short"])
            garbage = await failure_of(client, ["garbage"])
    finally:
        server.close()
        await server.wait_closed()
    assert short.message.startswith(f"{base}/short: unreadable response: ")
    assert garbage.message.startswith(f"{base}/garbage: ")
    assert "\n" not in garbage.message


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2.5e-3}',
        '[1e400, -0.0, 123456789012345678901234567890, "\\u00e9\\ud83d\\ude00"]',
        "\ufeff{}",
        '{"a": NaN}',
        "-Infinity",
        '{"a": 1',
        "",
    ],
    ids=["repeated-key", "numbers-and-escapes", "bom", "nan", "infinity", "truncated", "empty"],
)
def test_parse_json_reads_as_json_loads_without_constants(text: str) -> None:
    def reject(name: str) -> object:
        raise ValueError(f"{name} is not a JSON value")

    try:
        wanted: object = json.loads(text, parse_constant=reject)
    except ValueError as error:
        with pytest.raises(type(error), match=re.escape(str(error))):
            client_module.parse_json(text)
    else:
        assert repr(client_module.parse_json(text)) == repr(wanted)


_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text()
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), _JSON_VALUES, max_size=6))
def test_a_request_body_is_the_bytes_the_stdlib_writer_wrote(body: dict[str, object]) -> None:
    """msgspec writes the requests now: the same bytes as before, floats included
    (``1e-05``, ``1e+22``, not msgspec's ``1e-5``), strings unescaped."""
    try:
        wanted = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            client_module.compact_json(body)
        return
    assert client_module.compact_json(body) == wanted
