"""The run's wire engine (run/http/wire.py) on real sockets: the bytes it writes,
the connections it keeps, the bodies it reads, and what it leaves to aiohttp."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable

import pytest
from support.loopback import RawServer, Request, Scripted

from taguru_eval.run.http import CallFailure, TaguruClient
from taguru_eval.run.http import bodies as bodies_module

DOCUMENT = {"result": {"hits": [1, 2]}, "status": "ok", "time": 0.0}
ENVELOPE = json.dumps(DOCUMENT).encode()


def answer(body: bytes = ENVELOPE, *headers: str, length: bool = True) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", *headers]
    if length:
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def always(scripted: Scripted) -> Callable[[Request], Scripted]:
    return lambda request: scripted


async def test_a_request_goes_out_as_build_url_wrote_it() -> None:
    server = RawServer(always(Scripted(answer())))
    with server as url:
        async with TaguruClient(url, "tok-1") as client:
            await client.get(["contexts", "a/b"], [("after", "corpus/x y.md")])
            await client.post(["contexts", "c", "sources", "search"], {"query": "青嶺", "limit": 3})
    get, post = server.raw
    head = get.decode("latin-1").split("\r\n")
    # %2F stays %2F in the path and the query, as taguru's client sends it.
    assert head[0] == "GET /contexts/a%2Fb?after=corpus%2Fx+y.md HTTP/1.1"
    assert head[1] == f"Host: {url.removeprefix('http://')}"
    assert "Authorization: Bearer tok-1" in head
    assert not any(line.lower().startswith("content-length") for line in head)
    post_head, _, body = post.partition(b"\r\n\r\n")
    lines = post_head.decode("latin-1").split("\r\n")
    assert lines[0] == "POST /contexts/c/sources/search HTTP/1.1"
    assert "Content-Type: application/json" in lines
    assert f"Content-Length: {len(body)}" in lines
    assert body == '{"query":"青嶺","limit":3}'.encode()


async def test_calls_share_one_keep_alive_connection() -> None:
    server = RawServer(always(Scripted(answer())))
    with server as url:
        async with TaguruClient(url, max_connections=4) as client:
            for _ in range(5):
                assert (await client.get(["x"])).payload == {"hits": [1, 2]}
    assert server.connections == 1


async def test_a_connection_the_server_closes_is_not_used_again() -> None:
    closing = Scripted(answer(ENVELOPE, "Connection: close"), close=True)
    server = RawServer(always(closing))
    with server as url:
        async with TaguruClient(url) as client:
            for _ in range(3):
                assert (await client.get(["x"])).payload == {"hits": [1, 2]}
    assert server.connections == 3


async def test_the_pool_opens_at_most_max_connections() -> None:
    slow = Scripted(b"", hang_s=0.05, then=answer())
    server = RawServer(always(slow))
    with server as url:
        async with TaguruClient(url, max_connections=2) as client:
            replies = await asyncio.gather(*(client.get(["x"]) for _ in range(8)))
    assert all(reply.payload == {"hits": [1, 2]} for reply in replies)
    assert server.connections == 2


@pytest.mark.parametrize(
    "raw",
    [
        # chunked, in three pieces
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(
            b"%x\r\n%s\r\n" % (len(p), p) for p in (ENVELOPE[:5], ENVELOPE[5:9], ENVELOPE[9:])
        )
        + b"0\r\n\r\n",
        # no length: the body ends when the server closes
        answer(ENVELOPE, length=False),
        # gzip, as the run's Accept-Encoding offers
        answer(gzip.compress(ENVELOPE), "Content-Encoding: gzip"),
    ],
    ids=["chunked", "until-close", "gzip"],
)
async def test_every_framing_reads_the_whole_body(raw: bytes) -> None:
    with RawServer(always(Scripted(raw, close=True))) as url:
        async with TaguruClient(url) as client:
            assert (await client.get(["x"])).payload == {"hits": [1, 2]}


async def test_a_body_past_the_small_size_takes_the_slot_and_is_read_whole() -> None:
    hits = ["x" * 1000] * 3000  # about 3 MB, past SMALL_BODY_BYTES
    big = json.dumps({"result": {"hits": hits}, "status": "ok", "time": 0.0}).encode()
    assert len(big) > bodies_module.SMALL_BODY_BYTES
    with RawServer(always(Scripted(answer(big)))) as url:
        async with TaguruClient(url) as client:
            assert (await client.get(["x"])).payload == {"hits": hits}


async def test_a_body_past_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies_module, "SMALL_BODY_BYTES", 1024)
    monkeypatch.setattr(bodies_module, "BODY_CAP_BYTES", 64 * 1024)
    big = b'{"result":"' + b"x" * 100_000 + b'"}'
    with RawServer(always(Scripted(answer(big)))) as url:
        async with TaguruClient(url) as client:
            with pytest.raises(CallFailure) as caught:
                await client.get(["x"])
    assert caught.value.message == f"{url}/x: unreadable response: the body exceeds the 0 MiB cap"


async def test_a_call_past_its_deadline_drops_its_connection() -> None:
    calls = iter([Scripted(answer()[:20], hang_s=1.0, then=answer()[20:]), Scripted(answer())])
    server = RawServer(lambda request: next(calls))
    with server as url:
        async with TaguruClient(url, timeout_s=0.2) as client:
            with pytest.raises(CallFailure) as caught:
                await client.get(["x"])
            assert caught.value.message == f"{url}/x: timed out after 0.2 s"
            # The half-read response is never taken for the next call's.
            assert (await client.get(["x"])).payload == {"hits": [1, 2]}
    assert server.connections == 2


async def test_a_cut_short_body_is_a_peer_disconnect() -> None:
    cut = Scripted(answer()[:-5], close=True)
    with RawServer(always(cut)) as url:
        async with TaguruClient(url) as client:
            with pytest.raises(CallFailure) as caught:
                await client.get(["x"])
    assert caught.value.message == f"{url}/x: unreadable response: io: Peer disconnected"


async def test_a_dot_segment_is_left_to_aiohttp() -> None:
    # The URL standard removes a dot segment; the wire leaves that rewriting to
    # aiohttp's URL parser, so the request is the one aiohttp always sent.
    server = RawServer(always(Scripted(answer())))
    with server as url:
        async with TaguruClient(url) as client:
            await client.get(["contexts", "..", "x"])
    assert server.raw[0].split(b"\r\n", 1)[0] == b"GET /x HTTP/1.1"


async def test_bytes_after_a_response_retire_its_connection() -> None:
    # A response followed by bytes nobody asked for: the next call opens a new
    # connection rather than read them as its own answer.
    calls = iter([Scripted(answer(), then=b"HTTP/1.1 200 OK\r\n"), Scripted(answer())])
    server = RawServer(lambda request: next(calls))
    with server as url:
        async with TaguruClient(url) as client:
            assert (await client.get(["x"])).payload == {"hits": [1, 2]}
            await asyncio.sleep(0.2)  # the stray bytes arrive while the connection is idle
            assert (await client.get(["x"])).payload == {"hits": [1, 2]}
    assert server.connections == 2
