"""Every kind of answer a server can give, over loopback, through the client's one engine.

A real HTTP server answers each kind once: the client must give the payload,
or the exact failure message, status and code taguru would record — the
wording lives in the client, so it is the same whichever transport carries
the bytes (httpx's own pool is held to it too, where its transport's words
do not enter the message).
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

from taguru_eval.run.http import CallFailure, Reply, TaguruClient

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


def _outcome(result: Reply | CallFailure) -> tuple[Any, ...]:
    if isinstance(result, Reply):
        return ("reply", result.payload, result.status, result.url)
    return ("failure", str(result), result.status, result.code)


async def _call(url: str, path: str, transport: httpx.AsyncBaseTransport | None = None) -> Any:
    async with TaguruClient(url, TOKEN, transport=transport, timeout_s=0.5) as client:
        try:
            result: Reply | CallFailure = await client.get([path])
        except CallFailure as failure:
            result = failure
    return _outcome(result)


OUTCOMES: dict[str, tuple[Any, ...]] = {
    "ok": ("reply", {"hits": [1, 2]}, 200, "{url}/ok"),
    "missing": (
        "failure",
        "{url}/missing answered 404: no paragraph 9 in a.md",
        404,
        "no_paragraph",
    ),
    "echo": ("failure", "{url}/echo answered 500: rejected Bearer [REDACTED]", 500, None),
    "busy": ("failure", "{url}/busy answered 503: try later (Retry-After: 7)", 503, None),
    "moved": ("reply", {"hits": [1, 2]}, 200, "{url}/moved"),
    "loop": ("failure", "{url}/loop: too many redirects", None, None),
    "gzip": ("reply", {"hits": [1, 2]}, 200, "{url}/gzip"),
    "not-json": (
        "failure",
        "{url}/not-json: not a taguru response: <html>proxy error</html>",
        200,
        None,
    ),
    "slow": ("failure", "{url}/slow: timed out after 0.5 s", None, None),
}
"""What the client makes of each answer; ``{url}`` is the server's base URL."""


@pytest.mark.parametrize("path", sorted(OUTCOMES))
@pytest.mark.parametrize("transport", ["engine", "httpx-pool"])
def test_each_answer_gives_taguru_s_outcome(server: str, path: str, transport: str) -> None:
    inner = None if transport == "engine" else httpx.AsyncHTTPTransport(retries=0)
    outcome = asyncio.run(_call(server, path, inner))
    kind, value, status, extra = OUTCOMES[path]
    expected = (
        kind,
        value.format(url=server) if isinstance(value, str) else value,
        status,
        extra.format(url=server) if isinstance(extra, str) and "{url}" in extra else extra,
    )
    assert outcome == expected
    assert TOKEN not in repr(outcome)


def test_a_body_cut_short_is_unreadable(server: str) -> None:
    kind, message, status, code = asyncio.run(_call(server, "truncated"))
    assert (kind, status, code) == ("failure", 200, None)
    assert message.startswith(f"{server}/truncated: unreadable response: ")


def test_a_refused_connection_names_the_url() -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    kind, message, status, code = asyncio.run(_call(url, "ok"))
    assert (kind, status, code) == ("failure", None, None)
    assert message.startswith(f"{url}/ok: ")
    assert len(message) > len(f"{url}/ok: ")
