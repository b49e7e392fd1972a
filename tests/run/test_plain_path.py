"""The client's plain-HTTP path (``run/plainhttp.py``) over real loopback connections.

It must send the very bytes aiohttp sends, keep connections alive as a pool
does, read every framing HTTP/1.1 allows, answer as the aiohttp path does for
the failures both can see, and word a response it cannot read in its own
words without ever crashing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from support.loopback import RawServer, Scripted

from taguru_eval.run import client as client_module
from taguru_eval.run import plainhttp
from taguru_eval.run.client import CallFailure, Reply, TaguruClient

TOKEN = "canary-token-plain-41c"
BODY = json.dumps({"result": {"hits": [1, 2]}, "status": "ok", "time": 0.0}).encode()
PAYLOAD = {"hits": [1, 2]}


def ok(body: bytes = BODY, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(body: bytes, cut: int = 0) -> bytes:
    pieces = [body[:7], body[7:]]
    chunks = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    whole = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    whole += b"0\r\nX-Trailer: yes\r\n\r\n"
    return whole[: len(whole) - cut] if cut else whole


def serve(answer: bytes, **options: Any) -> RawServer:
    return RawServer(lambda request: Scripted(answer, **options))


class Spy:
    """Counts the exchanges the plain path carried."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = plainhttp.PlainPool.exchange

        async def counted(*args: Any) -> plainhttp.PlainResponse:
            self.calls += 1
            return await original(*args)

        monkeypatch.setattr(plainhttp.PlainPool, "exchange", staticmethod(counted))


def outcome(result: Reply | CallFailure, url: str) -> tuple[Any, ...]:
    if isinstance(result, Reply):
        return ("reply", result.payload, result.status)
    return ("failure", str(result).replace(url, "URL"), result.status)


async def call(
    url: str,
    *,
    plain: bool = True,
    times: int = 1,
    timeout_s: float = 5.0,
    pause_s: float = 0.0,
    post: bool = False,
) -> list[tuple[Any, ...]]:
    """``times`` sequential calls through the plain path (or, ``plain=False``,
    the aiohttp path), each outcome with the URL replaced by ``URL``."""
    outcomes = []
    async with TaguruClient(url, TOKEN, timeout_s=timeout_s) as client:
        assert client._plain is not None
        if not plain:
            client._plain = None
        for _ in range(times):
            try:
                result: Reply | CallFailure = await (
                    client.post(["contexts", "c d", "search"], {"query": "é", "limit": 3})
                    if post
                    else client.get(["x"], [("after", "a b")])
                )
            except CallFailure as failure:
                result = failure
            outcomes.append(outcome(result, f"{url}/x?after=a+b"))
            await asyncio.sleep(pause_s)
    return outcomes


def test_the_plain_path_sends_the_bytes_aiohttp_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)
    sent: dict[bool, list[bytes]] = {}
    for plain in (True, False):
        server = serve(ok())
        with server as url:
            asyncio.run(call(url, plain=plain))
            asyncio.run(call(url, plain=plain, post=True))
        sent[plain] = [raw.replace(str(server.port).encode(), b"PORT") for raw in server.raw]
    assert spy.calls == 2  # the plain run's two calls, none of the other's
    assert sent[True] == sent[False]
    assert sent[True][0].startswith(b"GET /x?after=a+b HTTP/1.1\r\nhost: 127.0.0.1:PORT\r\n")
    assert b"authorization: Bearer " + TOKEN.encode() in sent[True][0]
    assert sent[True][1].endswith(b'\r\n\r\n{"query":"\xc3\xa9","limit":3}')


def test_keep_alive_one_connection_for_sequential_calls() -> None:
    server = serve(ok())
    with server as url:
        assert asyncio.run(call(url, times=5)) == [("reply", PAYLOAD, 200)] * 5
    assert server.connections == 1


@pytest.mark.parametrize("apart", [False, True], ids=["same-write", "later-write"])
def test_bytes_past_a_response_retire_its_connection(apart: bool) -> None:
    """Whatever a server sends past a complete response (with it, or a moment later)
    is nobody's answer: the connection is not reused, and the next call reads its own."""
    junk = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    if apart:
        server = RawServer(lambda request: Scripted(ok(), hang_s=0.01, then=junk))
    else:
        server = serve(ok() + junk)
    with server as url:
        assert asyncio.run(call(url, times=3, pause_s=0.1)) == [("reply", PAYLOAD, 200)] * 3
    assert server.connections == 3


def test_a_connection_idle_too_long_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plainhttp, "MAX_IDLE_S", 0.05)
    server = serve(ok())
    with server as url:
        assert asyncio.run(call(url, times=3, pause_s=0.2)) == [("reply", PAYLOAD, 200)] * 3
    assert server.connections == 3


@pytest.mark.parametrize(
    ("answer", "close"),
    [
        # said, and the server leaves the connection open: the client must not reuse it
        (ok(BODY, "Connection: keep-alive, close"), False),
        (ok(BODY), True),  # closed by the server without saying so
        (b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY), False),
        (b"HTTP/1.1 200 OK\r\n\r\n" + BODY, True),  # the body runs to the connection's end
    ],
    ids=["connection-close", "silent-close", "http-1.0", "until-close"],
)
def test_a_connection_that_cannot_carry_another_call_is_replaced(
    answer: bytes, close: bool
) -> None:
    server = serve(answer, close=close)
    with server as url:
        outcomes = asyncio.run(call(url, times=3, pause_s=0.05))
    assert outcomes == [("reply", PAYLOAD, 200)] * 3
    assert server.connections == 3


@pytest.mark.parametrize(
    "answer",
    [
        chunked(BODY),
        b"HTTP/1.1 100 Continue\r\n\r\n" + ok(),
        b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nX-Empty:\r\n\r\n%s" % (len(BODY), BODY),
        ok(BODY, f"Content-Length: {len(BODY)}"),  # repeated, but the same
    ],
    ids=["chunked", "interim-100", "empty-header", "same-length-twice"],
)
def test_every_framing_reads_the_same_payload(answer: bytes) -> None:
    with serve(answer) as url:
        assert asyncio.run(call(url, times=2)) == [("reply", PAYLOAD, 200)] * 2


@pytest.mark.parametrize(
    ("answer", "close"),
    [
        (b"", True),
        (ok()[:-20], True),
        (ok(b'{"error":"gone"}').replace(b"200 OK", b"404 Not Found"), False),
        (ok(b"busy", "Retry-After: 7").replace(b"200 OK", b"503 Busy"), False),
        (b"HTTP/1.1 204 No Content\r\n\r\n", False),
        (ok(b"<html>proxy</html>"), False),
        (ok(), False),
    ],
    ids=[
        "nothing",
        "cut-body",
        "404",
        "503-retry-after",
        "204",
        "not-json",
        "ok",
    ],
)
def test_what_both_paths_can_see_is_answered_alike(answer: bytes, close: bool) -> None:
    outcomes = []
    for plain in (True, False):
        with serve(answer, close=close) as url:
            outcomes.append(asyncio.run(call(url, plain=plain)))
    assert outcomes[0] == outcomes[1]


def test_a_cut_body_is_worded_as_aiohttp_words_it() -> None:
    with serve(ok()[:-20], close=True) as url:
        [failure] = asyncio.run(call(url))
    assert failure == (
        "failure",
        "URL: unreadable response: Response payload is not completed: <ContentLengthError: "
        f"400, message='Not enough data to satisfy content length header (received "
        f"{len(BODY) - 20} of {len(BODY)} bytes).'>",
        200,
    )


@pytest.mark.parametrize(
    ("answer", "message", "status"),
    [
        # aiohttp words this one as the repr of its half-parsed message
        (b"HTTP/1.1 200 OK\r\nContent-Le", "URL: Server disconnected", None),
        (b"garbage\r\n\r\n", "URL: malformed response: bad status line", None),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "URL: malformed response: bad header line", None),
        (
            ok(BODY, "Content-Length: 3"),
            "URL: unreadable response: malformed response: bad Content-Length",
            200,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "URL: unreadable response: malformed response: bad Content-Length",
            200,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "URL: unreadable response: malformed response: bad chunk size",
            200,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
            "URL: unreadable response: malformed response: bad chunk end",
            200,
        ),
        (
            chunked(BODY, cut=12),
            "URL: unreadable response: Response payload is not completed: "
            "<TransferEncodingError: 400, message='Not enough data to satisfy transfer length "
            "header.'>",
            200,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000,
            "URL: malformed response: head too long",
            None,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: " + b"y" * 70_000,
            "URL: unreadable response: malformed response: trailer too long",
            200,
        ),
    ],
    ids=[
        "cut-head",
        "status-line",
        "header-line",
        "two-lengths",
        "negative-length",
        "chunk-size",
        "chunk-end",
        "cut-chunks",
        "endless-head",
        "endless-trailer",
    ],
)
def test_an_unreadable_response_fails_the_call_in_the_plain_paths_words(
    answer: bytes, message: str, status: int | None
) -> None:
    server = serve(answer, close=True)
    with server as url:
        [failure] = asyncio.run(call(url))
    assert failure == ("failure", message, status)


def test_a_declared_length_over_the_cap_fails_at_once() -> None:
    announced = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (
        client_module.BODY_CAP_BYTES + 1
    )
    with serve(announced, hang_s=3.0) as url:
        [failure] = asyncio.run(call(url, timeout_s=2.0))
    assert failure == (
        "failure",
        "URL: unreadable response: the body exceeds the 256 MiB cap",
        200,
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"", "URL: timed out after 0.5 s"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 90\r\n\r\n{",
            "URL: unreadable response: timed out after 0.5 s",
        ),
    ],
    ids=["silent", "head-then-silent"],
)
def test_the_one_deadline_is_worded_as_on_the_aiohttp_path(answer: bytes, message: str) -> None:
    outcomes = []
    for plain in (True, False):
        with serve(answer, hang_s=1.5) as url:
            outcomes.append(asyncio.run(call(url, plain=plain, timeout_s=0.5)))
    assert outcomes[0] == outcomes[1] == [("failure", message, None)]


def test_only_one_large_body_grows_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "SMALL_BODY_BYTES", 4096)
    growing: set[int] = set()
    most = 0
    original_grow: Callable[..., None] = plainhttp.PlainConnection._grow
    original_response = plainhttp.PlainConnection.response

    def grow(self: plainhttp.PlainConnection, data: bytes | bytearray) -> None:
        nonlocal most
        original_grow(self, data)
        if self._slot_held:
            growing.add(id(self))
            most = max(most, len(growing))
        else:
            assert len(self._body) <= 4096 + len(data)

    def response(self: plainhttp.PlainConnection) -> plainhttp.PlainResponse:
        answer = original_response(self)
        growing.discard(id(self))
        return answer

    monkeypatch.setattr(plainhttp.PlainConnection, "_grow", grow)
    monkeypatch.setattr(plainhttp.PlainConnection, "response", response)
    big = json.dumps({"result": "x" * 200_000, "status": "ok", "time": 0}).encode()

    async def many(url: str) -> list[Reply | BaseException]:
        async with TaguruClient(url, max_connections=8) as client:
            return await asyncio.gather(
                *(client.get(["x"]) for _ in range(8)), return_exceptions=True
            )

    with serve(ok(big)) as url:
        results = asyncio.run(many(url))
    assert all(isinstance(result, Reply) and result.payload == "x" * 200_000 for result in results)
    assert most == 1


def test_the_reference_server_is_served_by_the_plain_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole demo run over the plain path writes what the aiohttp path writes
    (latencies aside)."""
    from taguru_eval.demo.data import demo_data_dir
    from taguru_eval.refserver.serve import running_server

    spy = Spy(monkeypatch)

    async def search(url: str, plain: bool) -> Any:
        async with TaguruClient(url) as client:
            if not plain:
                client._plain = None
            reply = await client.post(
                ["contexts", "sake", "sources", "search"], {"query": "杜氏", "limit": 5}
            )
            return reply.payload

    with running_server(demo_data_dir()) as url:
        plain_payload = asyncio.run(search(url, True))
        aiohttp_payload = asyncio.run(search(url, False))
    assert spy.calls == 1
    assert plain_payload == aiohttp_payload
    assert plain_payload["hits"]


def test_requests_aiohttp_would_refuse_or_cannot_serve_are_left_to_it() -> None:
    route = plainhttp.PlainRoute.of
    headers = {"host": "h:1", "accept": "*/*"}
    assert route("GET", "https", "h", 1, False, "/x", headers) is None
    assert route("GET", "http", "h", 1, True, "/x", headers) is None
    assert route("GET", "http", "h", 1, False, "/x", {**headers, "x": "a\nb"}) is None
    served = route("GET", "http", "h", 1, False, "/x", headers)
    assert served is not None and served.request(None) == (
        b"GET /x HTTP/1.1\r\nhost: h:1\r\naccept: */*\r\n\r\n"
    )
    posted = route("POST", "http", "h", 1, False, "/x", {**headers, "content-length": "0"})
    assert posted is not None and posted.request(b"{}") == (
        b"POST /x HTTP/1.1\r\nhost: h:1\r\naccept: */*\r\ncontent-length: 2\r\n"
        b"Content-Type: application/octet-stream\r\n\r\n{}"
    )
