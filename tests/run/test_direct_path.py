"""The client's plain and direct aiohttp paths answer exactly as its httpx path.

With the plain aiohttp transport the client speaks plain HTTP over its own
connections (``run/plainhttp.py``), or, without that, sends to the transport's
own aiohttp session (``_DirectAiohttp``); with any other transport every call
goes through httpx. All three must give the same outcome for every kind of
answer a well-behaved server can give: the same payload, or the same failure
message, status and code. A real HTTP server over loopback answers each kind
once per path.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from taguru_eval.run.client import CallFailure, Reply, TaguruClient, make_transport

TOKEN = "canary-token-direct-7d2"
ENVELOPE = json.dumps({"result": {"hits": [1, 2]}, "status": "ok", "time": 0.0}).encode()


class _Answers(BaseHTTPRequestHandler):
    """One kind of answer per path."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        # The client may have given up already (the timed-out call): nothing to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(status)
            self.send_header("Content-Length", headers.pop("length", str(len(body))))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path
        if path == "/ok":
            self._send(200, ENVELOPE, Content_Type="application/json")
        elif path == "/missing":
            self._send(404, b'{"error":"no paragraph 9 in a.md","code":"no_paragraph"}')
        elif path == "/echo":
            echoed = f'{{"error":"rejected {self.headers.get("Authorization")}"}}'
            self._send(500, echoed.encode())
        elif path == "/busy":
            self._send(503, b"try later", Retry_After="7")
        elif path == "/moved":
            self._send(301, b"", Location="/ok")
        elif path == "/loop":
            self._send(302, b"", Location="/loop")
        elif path == "/gzip":
            self._send(200, gzip.compress(ENVELOPE), Content_Encoding="gzip")
        elif path == "/not-json":
            self._send(200, b"<html>proxy error</html>")
        elif path == "/truncated":
            self._send(200, ENVELOPE[:10], length=str(len(ENVELOPE)))
            self.close_connection = True
        elif path == "/slow":
            time.sleep(1.5)
            self._send(200, ENVELOPE)
        else:
            self._send(404, b'{"error":"no such route"}')


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class _Wrapped(httpx.AsyncBaseTransport):
    """The same aiohttp transport, but not one the direct path serves."""

    def __init__(self) -> None:
        self._inner = make_transport("aiohttp", 4)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _outcome(result: Reply | CallFailure) -> tuple[Any, ...]:
    if isinstance(result, Reply):
        return ("reply", result.payload, result.status, result.url)
    return ("failure", str(result), result.status, result.code)


async def _outcomes(url: str, path: str) -> list[tuple[Any, ...]]:
    """The outcome of one call on the plain path, the direct path and the httpx path."""
    outcomes = []
    for transport, plain in ((None, True), (None, False), (_Wrapped(), False)):
        async with TaguruClient(url, TOKEN, transport=transport, timeout_s=0.5) as client:
            assert (client._direct is not None) is (transport is None)
            assert (client._plain is not None) is (transport is None)
            if not plain:
                client._plain = None
            try:
                result: Reply | CallFailure = await client.get([path])
            except CallFailure as failure:
                result = failure
        outcomes.append(_outcome(result))
    return outcomes


@pytest.mark.parametrize(
    "path",
    [
        "ok",
        "missing",
        "echo",
        "busy",
        "moved",
        "loop",
        "gzip",
        "not-json",
        "truncated",
        "slow",
    ],
)
def test_the_direct_and_plain_paths_answer_as_the_httpx_path(server: str, path: str) -> None:
    plain, direct, through_httpx = asyncio.run(_outcomes(server, path))
    assert plain == direct == through_httpx
    assert TOKEN not in repr(direct)


def test_a_refused_connection_fails_alike() -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    plain, direct, through_httpx = asyncio.run(_outcomes(url, "ok"))
    assert direct[0] == "failure"
    assert plain == direct == through_httpx
