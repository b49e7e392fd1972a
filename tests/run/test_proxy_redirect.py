"""Proxies and redirects as taguru's ureq client does them (issue 12, item 6; ERRATA (13b)).

Proxy settings come from ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (either
case) minus ``NO_PROXY``; up to 10 redirects are followed and the
``Authorization`` header never follows one. Checked against real loopback
servers: a forward proxy, a redirecting server and the reference server.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.loopback import ForwardProxy, Request, Response, ScriptedServer, envelope
from support.paths import DATA

import taguru_eval
from taguru_eval.inputs.proxy import NoProxyEntry, parse_proxy_url, proxy_config
from taguru_eval.run.http import CallFailure, TaguruClient, build_url
from taguru_refserver.serve import running_server

TOKEN = "proxy-test-token-77"

# --------------------------------------------------------------------------- settings


def test_each_scheme_takes_its_own_variable_before_all_proxy() -> None:
    config = proxy_config(
        {"HTTP_PROXY": "http://h:1", "https_proxy": "p:2", "ALL_PROXY": "http://all:3"}
    )
    assert config.proxy_for("http", "x") == "http://h:1"
    assert config.proxy_for("https", "x") == "http://p:2"  # no scheme means http://
    only_all = proxy_config({"all_proxy": "http://all:3"})
    assert only_all.proxy_for("http", "x") == only_all.proxy_for("https", "x") == "http://all:3"
    assert not proxy_config({}).active


def test_upper_case_wins_and_a_bad_value_falls_through_to_the_next_variable() -> None:
    config = proxy_config(
        {"HTTP_PROXY": "ftp://nope:1", "http_proxy": "", "ALL_PROXY": "http://all:3"}
    )
    assert config.proxy_for("http", "x") == "http://all:3"
    assert proxy_config({"HTTP_PROXY": "http://A:1", "http_proxy": "http://b:2"}).http == (
        "http://A:1"
    )
    assert parse_proxy_url("user:pw@proxy.corp:3128") == "http://user:pw@proxy.corp:3128"
    assert parse_proxy_url("socks5://s:1080") == "socks5://s:1080"
    assert parse_proxy_url("http://") is None


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*", ["anything", "127.0.0.1"], []),
        ("localhost", ["localhost", "LOCALHOST"], ["mylocalhost", "localhost.x"]),
        ("*.corp.example", ["a.corp.example", "b.a.corp.example"], ["corp.example"]),
        (".corp.example", ["a.corp.example"], ["corp.example"]),
        ("10.1.*", ["10.1.2.3"], ["10.10.2.3"]),
        (" localhost", [], ["localhost"]),  # taken verbatim, as ureq does
    ],
)
def test_no_proxy_patterns(pattern: str, matches: list[str], misses: list[str]) -> None:
    entry = NoProxyEntry.parse(pattern)
    assert all(entry.matches(host) for host in matches)
    assert not any(entry.matches(host) for host in misses)


def test_the_first_no_proxy_variable_set_wins_even_when_empty() -> None:
    config = proxy_config({"HTTP_PROXY": "http://p:1", "NO_PROXY": "", "no_proxy": "h"})
    assert config.proxy_for("http", "h") == "http://p:1"
    bypass = proxy_config({"HTTP_PROXY": "http://p:1", "no_proxy": "a,h"})
    assert bypass.proxy_for("http", "h") is None
    assert bypass.proxy_for("http", "other") == "http://p:1"


# --------------------------------------------------------------------------- proxies


async def test_requests_go_through_the_proxy_of_the_environment() -> None:
    served: list[str | None] = []

    def answer(request: Request) -> Response:
        served.append(request.headers.get("authorization"))
        return envelope({"path": request.path})

    proxy = ForwardProxy()
    with ScriptedServer(answer) as url, proxy as proxy_url:
        proxies = proxy_config({"http_proxy": proxy_url})
        async with TaguruClient(url, TOKEN, proxies=proxies) as client:
            reply = await client.get(["contexts", "x"], [("limit", "1")])
            bare = await client.get_bare(["health"])
    assert reply.payload == {"path": "/contexts/x"}
    assert bare.status == 200
    # A plain http:// target is forwarded in absolute form (a CONNECT tunnel for https://).
    assert ("GET", f"{url}/contexts/x?limit=1") in proxy.seen
    assert served == [f"Bearer {TOKEN}", f"Bearer {TOKEN}"]


def _run_sake(url: str, work: Path, env: dict[str, str]) -> taguru_eval.Run:
    work.mkdir()
    return taguru_eval.run(
        DATA / "sake" / "eval.jsonl",
        "sake",
        url=url,
        out=work / "evaluation.json",
        no_store=True,
        env=env,
    )


def _without_latency(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: _without_latency(item)
            for key, item in value.items()
            if key not in ("latency_ms", "generated_at", "out") and not key.startswith("latency.")
        }
    if isinstance(value, list):
        return [_without_latency(item) for item in value]
    return value


def test_a_whole_run_through_a_proxy_equals_a_direct_one(tmp_path: Path) -> None:
    proxy = ForwardProxy()
    with running_server(DATA) as url, proxy as proxy_url:
        through = _run_sake(url, tmp_path / "proxied", {"HTTP_PROXY": proxy_url})
        seen = len(proxy.seen)
        bypassed = _run_sake(
            url, tmp_path / "bypassed", {"HTTP_PROXY": proxy_url, "NO_PROXY": "127.0.0.1"}
        )
        direct = _run_sake(url, tmp_path / "direct", {})
    assert seen >= 1 + 1 + 1 + 2 + 2 * len(through.doc["cases"])  # health … every search
    assert len(proxy.seen) == seen  # NO_PROXY: not one request through the proxy
    assert all(method in ("GET", "POST") for method, _ in proxy.seen)
    expected = _without_latency(direct.doc)
    assert _without_latency(through.doc) == expected
    assert _without_latency(bypassed.doc) == expected


async def test_a_socks_proxy_is_a_call_failure_not_a_crash() -> None:
    proxies = proxy_config({"ALL_PROXY": "socks5://127.0.0.1:1"})
    async with TaguruClient("http://127.0.0.1:9", proxies=proxies) as client:
        with pytest.raises(CallFailure) as caught:
            await client.get(["x"])
    assert caught.value.message == (
        "http://127.0.0.1:9/x: proxy scheme 'socks5' is not supported "
        "(only http:// and https:// proxies)"
    )


# --------------------------------------------------------------------------- redirects


def redirector(status: int = 302, final: str = "/final") -> ScriptedServer:
    """``/r/N`` redirects to ``/r/N-1`` … ``/r/0`` to ``final``; ``final`` answers 200."""

    def answer(request: Request) -> Response:
        if request.path.startswith("/r/"):
            left = int(request.path.removeprefix("/r/"))
            target = final if left == 0 else f"/r/{left - 1}"
            return Response(status, headers={"Location": target})
        return envelope({"method": request.method, "body": request.body.decode()})

    return ScriptedServer(answer)


async def test_redirects_are_followed_without_the_token() -> None:
    server = redirector()
    with server as url:
        async with TaguruClient(url, TOKEN) as client:
            reply = await client.get(["r", "2"])
    assert reply.payload == {"method": "GET", "body": ""}
    assert [r.path for r in server.requests] == ["/r/2", "/r/1", "/r/0", "/final"]
    assert [r.headers.get("authorization") for r in server.requests] == [
        f"Bearer {TOKEN}", None, None, None,
    ]  # fmt: skip


async def test_ten_redirects_are_followed_and_the_eleventh_fails() -> None:
    with redirector() as url:
        async with TaguruClient(url) as client:
            assert (await client.get(["r", "9"])).payload["method"] == "GET"
            with pytest.raises(CallFailure) as caught:
                await client.get(["r", "10"])
    assert caught.value.message == f"{url}/r/10: too many redirects"


async def test_a_post_follows_303_as_a_get_and_refuses_307() -> None:
    with redirector(status=303) as url:
        async with TaguruClient(url, TOKEN) as client:
            moved = await client.post(["r", "0"], {"query": "q"})
    assert moved.payload == {"method": "GET", "body": ""}
    with redirector(status=307) as url:
        async with TaguruClient(url) as client:
            kept = await client.get(["r", "0"])
            with pytest.raises(CallFailure) as caught:
                await client.post(["r", "0"], {"query": "q"})
    assert kept.payload["method"] == "GET"
    assert caught.value.message == f"{url}/r/0: redirect failed"


async def test_a_redirect_to_another_host_never_carries_the_token() -> None:
    elsewhere = ScriptedServer(lambda request: envelope("moved"))
    with elsewhere as other:
        front = ScriptedServer(
            lambda request: Response(308, headers={"Location": f"{other}/landing"})
        )
        with front as url:
            async with TaguruClient(url, TOKEN) as client:
                reply = await client.get(["contexts", "x"])
    assert reply.payload == "moved"
    assert [r.headers.get("authorization") for r in front.requests] == [f"Bearer {TOKEN}"]
    assert [r.headers.get("authorization") for r in elsewhere.requests] == [None]


async def test_a_redirect_without_location_is_a_protocol_failure() -> None:
    with ScriptedServer(lambda request: Response(301)) as url:
        async with TaguruClient(url) as client:
            with pytest.raises(CallFailure) as caught:
                await client.get(["x"])
    assert caught.value.message == f"{url}/x: protocol: missing a location header"


MALFORMED = "protocol: location header is malformed: http://[::1"


@pytest.mark.parametrize(
    ("engine", "status", "reason"),
    [
        # The run's own engine: the client reads every 3xx's Location, in ureq's words.
        ("aiohttp", 302, MALFORMED),
        ("aiohttp", 300, MALFORMED),
        # Over an httpx transport, httpx refuses a redirect status' malformed Location
        # itself, in its words, and leaves any other 3xx to the client's own reading.
        ("httpx", 302, "Invalid URL in location header: Invalid port: ':1'."),
        ("httpx", 300, MALFORMED),
    ],
)
async def test_a_malformed_location_fails_the_call(engine: str, status: int, reason: str) -> None:
    answer = Response(status, headers={"Location": "http://[::1"})
    transport = httpx.AsyncHTTPTransport(retries=0) if engine == "httpx" else None
    with ScriptedServer(lambda request: answer) as url:
        async with TaguruClient(url, TOKEN, transport=transport) as client:
            with pytest.raises(CallFailure) as caught:
                await client.get(["x"])
    assert caught.value.message == f"{url}/x: {reason}"


# --------------------------------------------------------------------------- --url query


def test_a_query_in_the_base_url_is_kept_and_extended() -> None:
    assert build_url("http://h:1/?k=v", ["health"]) == "http://h:1/health?k=v"
    assert build_url("http://h:1/?k=v", ["contexts", "c", "sources"], [("limit", "1000")]) == (
        "http://h:1/contexts/c/sources?k=v&limit=1000"
    )
    assert build_url("http://h:1/api?a b=1#frag", ["x"]) == "http://h:1/api/x?a%20b=1#frag"
    assert build_url("http://h:1", ["x"], [("a", "1")]) == "http://h:1/x?a=1"


async def test_the_base_url_query_reaches_the_server() -> None:
    server = ScriptedServer(lambda request: envelope(request.target))
    with server as url:
        async with TaguruClient(f"{url}/?tenant=a") as client:
            reply = await client.get(["contexts", "x"])
    assert reply.payload == "/contexts/x?tenant=a"
    assert reply.url == f"{url}/contexts/x?tenant=a"
