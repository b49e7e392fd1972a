"""Helpers shared by the reference-server tests: an in-process client, seeding, blanking."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from taguru_refserver.app import create_app
from taguru_refserver.auth import ApiKey
from taguru_refserver.state import ServerState

SHAPES_VOLATILE = ("time", "server", "version", "last_read_epoch", "last_write_epoch")
BLANKS: dict[str, Any] = {
    "time": 0.0,
    "server": "0.0.0",
    "version": "0.0.0",
    "last_read_epoch": 0,
    "last_write_epoch": 0,
}


def load_fixture(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def blank(value: Any, volatile: tuple[str, ...] = SHAPES_VOLATILE) -> Any:
    """``value`` with every volatile key set to the blank the fixtures use."""
    if isinstance(value, dict):
        return {
            key: (BLANKS.get(key, 0) if key in volatile else blank(item, volatile))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [blank(item, volatile) for item in value]
    return value


def context_path(name: str, rest: str = "") -> str:
    return "/contexts/" + quote(name, safe="") + rest


def route_path(route: str, name: str) -> str:
    """A fixture ``route`` (``/contexts/{name}/x?q``) with ``name`` percent-encoded in."""
    return route.replace("{name}", quote(name, safe=""))


class Server:
    """One in-process reference server and an httpx client speaking to it."""

    def __init__(self, client: httpx.AsyncClient, state: ServerState) -> None:
        self.client = client
        self.state = state

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        if body is None:
            return await self.client.request(method, path, headers=sent)
        return await self.client.request(method, path, json=body, headers=sent)

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        """Call and return ``result``, failing the test on anything but 200."""
        response = await self.call(method, path, body, **kw)
        assert response.status_code == 200, response.text
        return response.json()["result"]

    async def create(self, name: str, body: Any = None, **kw: Any) -> None:
        await self.ok("PUT", context_path(name), body, **kw)

    async def store(self, name: str, body: Any, **kw: Any) -> Any:
        return await self.ok("POST", context_path(name, "/sources"), body, **kw)

    async def associate(self, name: str, items: list[dict[str, Any]], **kw: Any) -> Any:
        return await self.ok("POST", context_path(name, "/associations"), items, **kw)

    async def entry(self, name: str, **kw: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.ok("GET", context_path(name), **kw)
        return result


@asynccontextmanager
async def in_process(
    *,
    state: ServerState | None = None,
    token: str | None = None,
    read_token: str | None = None,
    keys: list[ApiKey] | None = None,
    max_body_bytes: int | None = None,
) -> AsyncIterator[Server]:
    """An app over ``state`` reached through ``httpx.ASGITransport``."""
    state = state or ServerState()
    extra: dict[str, Any] = {} if max_body_bytes is None else {"max_body_bytes": max_body_bytes}
    app = create_app(state, token=token, read_token=read_token, keys=keys, **extra)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://refserver") as client:
        yield Server(client, state)


# The seed corpora named in contract/examples/README.md and wire/README.md.
SMOKE_PASSAGES = {"passages": {"corpus/brewery.md": "青嶺は青嶺酒造が造る銘柄です。"}}
SMOKE_ASSOCIATIONS = [
    {
        "subject": "青嶺酒造",
        "label": "醸造元",
        "object": "蔵元",
        "weight": 1.0,
        "source": "corpus/brewery.md",
        "paragraph": 0,
    }
]
OFFLINE_PASSAGES = {
    "passages": {
        "corpus/brewery.md": "青嶺は青嶺酒造が造る銘柄です。",
        "corpus/filter-a.md": "共通見出し語句。蔵元の説明文はここにある。",
        "corpus/filter-b.md": "共通見出し語句。原料米の説明文はここにある。",
        "corpus/ledger.md": "杜氏見習いの日誌帳を几帳面につける。",
        "corpus/unrelated.md": "梅雨明けの空に入道雲が広がった。",
    },
    "tags": {"corpus/filter-a.md": ["蔵"], "corpus/filter-b.md": ["原料"]},
    "sections": {"corpus/brewery.md": [{"paragraph": 0, "section": "由来"}]},
}
BASIC_ASSOCIATIONS = [
    {
        "subject": "alpha",
        "label": "connects_to",
        "object": "beta",
        "weight": 2.0,
        "source": "doc.md",
        "paragraph": 0,
    }
]
BASIC_PASSAGES = {
    "passages": {"doc.md": "alpha connects to beta."},
    "locators": {"doc.md": [{"paragraph": 0, "locator": {"kind": "page", "value": "1"}}]},
}


async def seed_smoke(server: Server, name: str = "sake") -> None:
    await server.create(name, {"description": "d"})
    await server.store(name, SMOKE_PASSAGES)
    await server.associate(name, SMOKE_ASSOCIATIONS)


async def seed_offline(server: Server, name: str = "sake") -> None:
    await server.create(name, {"description": "#278 offline fixture"})
    await server.store(name, OFFLINE_PASSAGES)
    await server.associate(name, SMOKE_ASSOCIATIONS)


async def seed_basic(server: Server, name: str = "corpus-a") -> None:
    """The corpus of wire/contexts_list.json, including its one retrieval read.

    Upstream's read was a ``/recall``, which this server does not serve; a
    ``/query`` for the same subject is the same kind of (non-empty) read.
    """
    await server.create(name, {"description": "wire-contract corpus"})
    await server.associate(name, BASIC_ASSOCIATIONS)
    await server.store(name, BASIC_PASSAGES)
    await server.ok("POST", context_path(name, "/query"), {"subject": "alpha"})


async def seed_ambiguity(server: Server, name: str = "sake") -> None:
    await server.create(name)
    await server.associate(
        name,
        [
            {"subject": "京都", "label": "位置", "object": "関西", "weight": 1.0},
            {"subject": "東京都", "label": "分類", "object": "日本の首都", "weight": 1.0},
        ],
    )


@contextmanager
def capped_server(max_body_bytes: int, state: ServerState | None = None) -> Iterator[str]:
    """The reference server with its request body cap lowered to ``max_body_bytes``,
    on a loopback port (``running_server`` serves taguru's default 8 MiB); yields its URL."""
    import threading
    import time

    import uvicorn

    from taguru_refserver.serve import LOOPBACK, bind_socket, socket_url

    app = create_app(state or ServerState(), max_body_bytes=max_body_bytes)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    )
    # The server's own listening socket (a bare one answers each request ~45 ms late).
    sock = bind_socket(LOOPBACK, 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        # A flag uvicorn sets once it serves the socket (not a timing guess).
        while not server.started:
            assert thread.is_alive(), "the capped reference server did not start"
            time.sleep(0.005)
        yield socket_url(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
