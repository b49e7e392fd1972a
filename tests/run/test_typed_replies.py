"""A reply decoded straight from the body equals what the generic path makes of it.

A lane that names its type (``post(…, into=Kind)``) gets the payload decoded by
msgspec from the body's bytes; any body the generic path (decode, redact, parse,
unwrap, ``msgspec.convert``) could read differently must take that path instead.
The reference server's answers to the demo (plain and ``--assembly``) are
recorded once; each example serves one of them, intact or corrupted (a node
replaced by a hostile value, a key dropped or duplicated, invalid UTF-8, a
BOM, a NaN, a lone surrogate escape, an echoed token), to the same client
with and without ``into``: both calls must agree.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fuzz import EXAMPLES
from support.loopback import Response, ScriptedServer

from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_eval.pipeline import execute
from taguru_eval.run.console import Console
from taguru_eval.run.http import CallFailure, Reply, TaguruClient
from taguru_eval.run.lanes.evidence import Package
from taguru_eval.run.lanes.passage import _SearchPage
from taguru_eval.run.lanes.structural import _Candidates, _MatchPage
from taguru_eval.run.lanes.wire import Citation
from taguru_refserver.serve import running_server

TOKEN = "typed-secret-token-41"
KINDS: dict[str, Any] = {
    "search": _SearchPage,
    "resolve": _Candidates,
    "resolve_label": _Candidates,
    "query": _MatchPage,
    "citations": Citation,
    "evidence": Package,
}
"""The type each lane route's payload is decoded into, by the route's last segment."""

HOSTILE: tuple[object, ...] = (
    None, True, 0, -1, 2**31, 2**63, 2**64 - 1, 2**64, 10**30, 1e308, -0.0, 0.5, "",
    "\x1b[31m", "ü", [], {}, [None], [[[[[[]]]]]],
)  # fmt: skip


class _Recording(httpx.AsyncBaseTransport):
    def __init__(self, answers: list[tuple[str, bytes]]) -> None:
        self.inner, self.answers = httpx.AsyncHTTPTransport(), answers

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        route = request.url.path.rsplit("/", 1)[-1]
        if route in KINDS and response.status_code == 200:
            self.answers.append((route, body))
        return httpx.Response(response.status_code, content=body, request=request)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, bytes]]:
    """(route, body) of every 200 lane answer of the demo, plain and --assembly."""
    answers: list[tuple[str, bytes]] = []
    out = tmp_path_factory.mktemp("typed") / "evaluation.json"
    with running_server(demo_data_dir()) as url:
        for assembly in (False, True):
            options = RunOptions(
                eval_path=str(demo_data_dir() / DEMO_CONTEXT / "eval.jsonl"),
                context=DEMO_CONTEXT,
                url=url,
                out=str(out),
                assembly=assembly,
                no_store=True,
            )
            console = Console(stdout=io.StringIO(), stderr=io.StringIO())
            prepared = prepare_run(options, {}, stderr=console.err)
            execute(prepared, console=console, transport=_Recording(answers))
    assert {route for route, _ in answers} == set(KINDS)
    return answers


def _outcome(result: Reply | CallFailure, kind: Any) -> tuple[Any, ...]:
    """What the lane gets: the payload as ``kind``, its "did not parse" failure, or the
    failure."""
    if isinstance(result, CallFailure):
        return ("failure", result.message, result.status)
    client = TaguruClient("http://typed.test", TOKEN, transport=httpx.MockTransport(httpx.Response))
    try:
        return ("payload", client.payload_as(result, kind, "route"))
    except CallFailure as failure:
        return ("does not fit", failure.message)


async def _both(
    body: bytes, kind: Any, token: str | None
) -> tuple[Reply | CallFailure, Reply | CallFailure]:
    """The same body through ``post(…, into=kind)`` and through the generic path."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body)

    results: list[Reply | CallFailure] = []
    async with TaguruClient(
        "http://typed.test", token, transport=httpx.MockTransport(answer)
    ) as client:
        for into in (kind, None):
            try:
                results.append(await client.post(["x"], {}, into=into))
            except CallFailure as failure:
                results.append(failure)
    return results[0], results[1]


def _assert_agree(body: bytes, kind: Any, token: str | None = TOKEN) -> Reply | CallFailure:
    typed, generic = asyncio.run(_both(body, kind, token))
    assert not (isinstance(generic, Reply) and generic.typed)
    if isinstance(typed, Reply) and typed.typed:
        # Decoded straight from the bytes: the generic path reads the same value.
        assert _outcome(generic, kind) == ("payload", typed.payload)
    else:
        assert _outcome(typed, kind) == _outcome(generic, kind)
    return typed


def test_every_real_answer_is_decoded_straight_from_its_bytes(
    recorded: list[tuple[str, bytes]],
) -> None:
    for route, body in recorded:
        typed = _assert_agree(body, KINDS[route], token=None)
        assert isinstance(typed, Reply) and typed.typed, route
        # With a token, a body whose text holds a \u escape (an evidence item's
        # candidate id) could spell it: read the generic way, redacted.
        with_token = _assert_agree(body, KINDS[route])
        assert isinstance(with_token, Reply)
        assert with_token.typed == (b"\\u" not in body), route


def _corrupted(document: Any, chance: random.Random) -> bytes:
    """The document with one node replaced, removed or doubled, then maybe its text spoiled."""
    nodes: list[tuple[Any, Any]] = []
    stack: list[Any] = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            nodes += [(value, key) for key in value]
            stack += list(value.values())
        elif isinstance(value, list):
            nodes += [(value, index) for index in range(len(value))]
            stack += value
    if nodes:
        parent, key = chance.choice(nodes)
        move = chance.randrange(3)
        if move == 0:
            parent[key] = chance.choice(HOSTILE)
        elif move == 1 and isinstance(parent, dict):
            del parent[key]
        elif move == 1:
            parent.pop(key)
        elif isinstance(parent[key], str):
            parent[key] = chance.choice([f"Bearer {TOKEN}", TOKEN, "\\u00e9", "é"])
    text = json.dumps(document, ensure_ascii=chance.random() < 0.3)
    spoil = chance.randrange(10)
    if spoil == 0:
        return text.encode()[: chance.randrange(len(text) + 1)]
    if spoil == 1:
        return b"\xef\xbb\xbf" + text.encode()
    if spoil == 2:
        return text.replace("0.", 'NaN, "x": 0.', 1).encode()
    if spoil == 3:
        return text.replace('"', '"\\ud800', 1).encode()
    if spoil == 4:
        return text.encode()[:-1] + b"\xff}"
    if spoil == 5 and text.startswith("{"):
        return ('{"result": 1, ' + text[1:]).encode()  # a repeated key: the last one wins
    if spoil == 6:  # the token spelled with an escape
        escaped = TOKEN[:5] + f"\\u{ord(TOKEN[5]):04x}" + TOKEN[6:]
        return text.replace(TOKEN, escaped, 1).encode()
    return text.encode()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_a_corrupted_answer_reads_the_same_either_way(
    recorded: list[tuple[str, bytes]], chance: random.Random
) -> None:
    route, body = chance.choice(recorded)
    _assert_agree(_corrupted(json.loads(body), chance), KINDS[route])


def test_a_body_holding_the_token_is_redacted_not_decoded_straight() -> None:
    citation = {"text": f"see Bearer {TOKEN}", "source": "a.md", "section": None}
    for body in (
        json.dumps({"result": citation}).encode(),
        json.dumps({"result": citation}).replace(TOKEN[:3], "\\u0074" + TOKEN[1:3]).encode(),
    ):
        typed = _assert_agree(body, Citation)
        assert isinstance(typed, Reply) and not typed.typed
        assert TOKEN not in repr(typed.payload)


def test_the_run_engine_decodes_straight_over_loopback(
    recorded: list[tuple[str, bytes]],
) -> None:
    """aiohttp's engine hands the same bytes to the same decoder."""
    body = next(body for route, body in recorded if route == "search")
    with ScriptedServer(lambda request: Response(200, body)) as url:

        async def call() -> Reply:
            async with TaguruClient(url) as client:
                return await client.post(["x"], {}, into=_SearchPage)

        reply = asyncio.run(call())
    assert reply.typed
    assert reply.payload == msgspec.convert(
        json.loads(body)["result"], _SearchPage, dec_hook=lambda kind, value: kind(value)
    )
