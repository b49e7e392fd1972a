"""Whatever a server answers, a run ends as documented: never a traceback (issue 29).

The reference server's answers to one demo run (plain and ``--assembly``) are
recorded once; each example then replays the demo with some of those answers
corrupted — a node of the JSON replaced by a hostile value (huge or negative
integers, lone surrogates, control characters, deep nesting, wrong types), a
key dropped or added, the text truncated, made invalid UTF-8, given a BOM, a
NaN, or random bytes, the status changed. A run either completes (an exit
code and a written artifact) or stops with one of the project's errors (exit 1
or 2, one printable line) and writes nothing. ``httpx.MockTransport`` serves
the corruptions: no real server can be made to produce them on demand.
``TAGURU_EVAL_FUZZ_EXAMPLES`` raises the example count (``benchmarks/fuzz_long.py``),
and ``TAGURU_EVAL_FUZZ_REPORT`` names a file that gets the number of corrupted
bodies served.
"""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fuzz import EXAMPLES, NASTY_CHARACTERS, assert_one_printable_line

from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
from taguru_eval.errors import LinesError, TaguruEvalError
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_eval.pipeline import execute
from taguru_eval.run.console import Console
from taguru_refserver.serve import running_server

Key = tuple[str, str, bytes]
Answers = dict[Key, tuple[int, bytes]]
URL = "http://fuzz.test:9"
SERVED = {"corrupted": 0, "bodies": 0}

HOSTILE: tuple[object, ...] = (
    None, True, 0, -1, 2**31, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**400, 1e308, -0.0,
    0.5, "", " ", "\ud800", "\udfff", NASTY_CHARACTERS, "a" * 5000, "\x1b[31m", [], {}, [None],
    {"": None}, [[[[[[[[[[]]]]]]]]]],
)  # fmt: skip


def _key(request: httpx.Request) -> Key:
    return (request.method, unquote(request.url.raw_path.decode("ascii")), request.content)


class _Recording(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, answers: Answers) -> None:
        self.inner, self.answers = inner, answers

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        self.answers[_key(request)] = (response.status_code, body)
        return httpx.Response(response.status_code, content=body, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _options(out: Path, url: str, assembly: bool) -> RunOptions:
    return RunOptions(
        eval_path=str(demo_data_dir() / DEMO_CONTEXT / "eval.jsonl"),
        context=DEMO_CONTEXT,
        url=url,
        out=str(out),
        assembly=assembly,
        no_store=True,
        concurrency=1,  # one order of requests, so an example replays the same way
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Answers:
    answers: Answers = {}
    out = tmp_path_factory.mktemp("recording") / "evaluation.json"
    with running_server(demo_data_dir()) as url:
        for assembly in (False, True):
            console = Console(stdout=io.StringIO(), stderr=io.StringIO())
            prepared = prepare_run(_options(out, url, assembly), {}, stderr=console.err)
            execute(
                prepared, console=console, transport=_Recording(httpx.AsyncHTTPTransport(), answers)
            )
    return answers


def _nodes(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _nodes(item, (*path, index))
    return found


def _replace(document: object, path: tuple[object, ...], new: object) -> object:
    if not path:
        return new
    parent: Any = document
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return document


def _corrupt_json(document: object, chance: random.Random) -> bytes:
    nodes = _nodes(document)
    path = chance.choice(nodes)
    move = chance.randrange(4)
    if move == 0:
        document = _replace(document, path, chance.choice(HOSTILE))
    elif move == 1 and path:
        parent: Any = document
        for step in path[:-1]:
            parent = parent[step]
        del parent[path[-1]]
    elif move == 2:
        target: Any = document
        for step in path:
            target = target[step]
        if isinstance(target, dict):
            target[chance.choice(["unknown", "", "\ud800", "result"])] = chance.choice(HOSTILE)
        else:
            document = _replace(document, path, [target, target])
    else:
        deep: object = 1
        for _ in range(chance.choice([50, 1000, 5000])):
            deep = [deep]
        document = _replace(document, path, deep)
    return json.dumps(document).encode()


def _corrupt_text(body: bytes, chance: random.Random) -> bytes:
    move = chance.randrange(6)
    if move == 0:
        return body[: chance.randrange(max(1, len(body)))]
    if move == 1:
        at = chance.randrange(len(body) + 1)
        return body[:at] + chance.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + body[at:]
    if move == 2:
        return "\ufeff".encode() + body
    if move == 3:
        return body.replace(b"0", b"NaN", 1) if b"0" in body else b"NaN"
    if move == 4:
        return bytes(chance.randrange(256) for _ in range(chance.randrange(64)))
    return body.replace(b"{", b'{"result": 1, ', 1)  # a repeated key


def corrupted(status: int, body: bytes, chance: random.Random) -> tuple[int, bytes]:
    """One hostile answer made from a recorded one."""
    move = chance.randrange(10)
    if move < 6:
        try:
            document = json.loads(body)
        except ValueError:
            return status, _corrupt_text(body, chance)
        return status, _corrupt_json(document, chance)
    if move < 9:
        return status, _corrupt_text(body, chance)
    return chance.choice([204, 301, 400, 404, 409, 429, 500, 503]), body


def hostile_server(answers: Answers, seed: int, rate: float) -> httpx.MockTransport:
    chance = random.Random(seed)

    def handler(request: httpx.Request) -> httpx.Response:
        status, body = answers.get(_key(request), (404, b'{"status":"error","error":"no"}'))
        SERVED["bodies"] += 1
        preflight = request.url.path in ("/health", f"/contexts/{DEMO_CONTEXT}")
        if chance.random() < (rate / 8 if preflight else rate):
            SERVED["corrupted"] += 1
            status, body = corrupted(status, body, chance)
        return httpx.Response(status, content=body, headers={"Content-Type": "application/json"})

    return httpx.MockTransport(handler)


@settings(
    max_examples=max(10, EXAMPLES // 20),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    rate=st.sampled_from([0.1, 0.5, 1.0]),
    assembly=st.booleans(),
)
def test_a_run_against_hostile_answers_ends_as_documented(
    recorded: Answers, tmp_path: Path, seed: int, rate: float, assembly: bool
) -> None:
    out = tmp_path / f"evaluation-{seed}-{assembly}.json"
    out.unlink(missing_ok=True)
    console = Console(stdout=io.StringIO(), stderr=io.StringIO())
    prepared = prepare_run(_options(out, URL, assembly), {}, stderr=console.err)
    try:
        result = execute(prepared, console=console, transport=hostile_server(recorded, seed, rate))
    except TaguruEvalError as stopped:
        assert stopped.exit_code in (1, 2)
        if not isinstance(stopped, LinesError):
            assert_one_printable_line(str(stopped))
        assert not out.exists()
        return
    assert result.exit_code in (0, 1, 3)
    json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module", autouse=True)
def _report() -> Any:
    yield
    report = os.environ.get("TAGURU_EVAL_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps(SERVED), encoding="utf-8")
