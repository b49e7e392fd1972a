"""Bounded walks and bounded bodies (issue 12, item 2).

A server whose source listing never ends stops the run with exit 1 and one
line, in bounded memory; a body is refused as soon as it is known to pass the
cap; and only one body at a time may grow past the small-body size, whatever
the concurrency.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from support.loopback import Request, Response, ScriptedServer, context_entry, envelope
from support.run import run_args

from taguru_eval.errors import RunError
from taguru_eval.run import preflight
from taguru_eval.run.http import CallFailure, TaguruClient
from taguru_eval.run.http import bodies as client_module

ENTRY = context_entry("ctx")
PAGE = 1000


def endless(names_per_page: int, name_length: int = 12) -> ScriptedServer:
    """A server whose every sources page advances past the cursor with new names."""

    def answer(request: Request) -> Response:
        if request.path == "/health":
            return Response.of_json(200, {"status": "ok", "version": "0.9.3"})
        if request.path.endswith("/sources"):
            after = request.query.get("after")
            start = 0 if after is None else int(after.split("-")[1]) + 1
            width = name_length - 4
            names = [f"src-{n:0{width}d}" for n in range(start, start + names_per_page)]
            return envelope({"total": 0, "sources": names})
        if request.path.endswith("/embeddings"):
            return envelope({"provider_model": None})
        return envelope(ENTRY)

    return ScriptedServer(answer)


CHILD = """
import json, resource, sys
from taguru_eval.cli.main import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
code = main(sys.argv[2:])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open(sys.argv[1], "w") as handle:
    json.dump({"code": code, "growth_kib": after - before}, handle)
"""


def test_an_endless_listing_ends_with_exit_1_one_line_and_bounded_memory(tmp_path: Path) -> None:
    eval_path = tmp_path / "eval.jsonl"
    eval_path.write_text('{"taguru_eval": 1}\n{"case_id": "c", "query": "q"}\n', encoding="utf-8")
    report = tmp_path / "child.json"
    server = endless(PAGE)
    with server as url:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(report), "run", *run_args(eval_path, "ctx", url),
             "--out", str(tmp_path / "e.json"), "--no-store"],
            capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip
    result = json.loads(report.read_text(encoding="utf-8"))
    assert result["code"] == 1, child.stderr
    target, error = child.stderr.splitlines()  # the target line, then exactly one error line
    assert target == f"evaluate → {url}"
    assert error == (
        "taguru: evaluate: ctx: the sources listing passed 1,001,000 names without an empty "
        "page — the walk stops at 10,000 pages, 1,000,000 names or 256 MiB of names"
    )
    walked = [r for r in server.requests if r.path.endswith("/sources")]
    assert len(walked) == preflight.MAX_SOURCE_NAMES // PAGE + 1
    # A million short names and their set, not gigabytes (today: unbounded).
    assert result["growth_kib"] < 320 * 1024, result
    assert not (tmp_path / "e.json").exists()


async def test_the_page_and_byte_ceilings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "MAX_SOURCE_PAGES", 25)
    with endless(1) as url:
        async with TaguruClient(url) as client:
            with pytest.raises(RunError) as pages:
                await preflight.walk_sources(client, "ctx")
    assert "passed 25 pages without an empty page" in pages.value.message
    assert pages.value.exit_code == 1

    monkeypatch.setattr(preflight, "MAX_SOURCE_NAME_BYTES", 5_000)
    with endless(100, name_length=30) as url:
        async with TaguruClient(url) as client:
            with pytest.raises(RunError) as size:
                await preflight.walk_sources(client, "ctx")
    assert "passed 200 names without an empty page" in size.value.message


class CountingStream(httpx.AsyncByteStream):
    """A body of ``chunks`` × ``size`` bytes that records how far it was read."""

    live: set[int] = set()  # noqa: RUF012 - shared across the streams of one test
    most_past_small = 0

    def __init__(self, key: int, chunks: int, size: int, small: int) -> None:
        self.key, self.chunks, self.size, self.small = key, chunks, size, small
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _index in range(self.chunks):
            self.pulled += 1
            # A stream past small + one chunk holds more than a small body's worth.
            if self.pulled * self.size > self.small + self.size:
                CountingStream.live.add(self.key)
                CountingStream.most_past_small = max(
                    CountingStream.most_past_small, len(CountingStream.live)
                )
            await asyncio.sleep(0)
            yield b"x" * self.size
        CountingStream.live.discard(self.key)


async def test_only_one_large_body_is_read_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "SMALL_BODY_BYTES", 4096)
    streams: list[CountingStream] = []

    def handler(request: httpx.Request) -> httpx.Response:
        stream = CountingStream(len(streams), chunks=64, size=1024, small=4096)
        streams.append(stream)
        return httpx.Response(200, stream=stream)

    async with TaguruClient("http://x.test", transport=httpx.MockTransport(handler)) as client:
        results = await asyncio.gather(
            *(client.get_bare(["health"]) for _ in range(16)), return_exceptions=True
        )
    assert all(not isinstance(result, BaseException) for result in results), results
    assert all(len(result.text) == 64 * 1024 for result in results)  # type: ignore[union-attr]
    assert CountingStream.most_past_small == 1


async def test_a_declared_length_over_the_cap_is_refused_past_the_small_size() -> None:
    """Not read on to the cap: refused once it is past the small-body size."""
    size = client_module.SMALL_BODY_BYTES // 2
    stream = CountingStream(0, chunks=600, size=size, small=1 << 40)

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Length": str(client_module.BODY_CAP_BYTES + 1)}
        return httpx.Response(200, headers=headers, stream=stream)

    async with TaguruClient("http://x.test", transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(CallFailure) as caught:
            await client.get(["x"])
    assert caught.value.message == (
        "http://x.test/x: unreadable response: the body exceeds the 256 MiB cap"
    )
    assert stream.pulled == 3


def _bodies_kept_by(failure: BaseException, at_least: int) -> list[int]:
    """Sizes of the bytes-like objects a failure keeps through its exception chain
    and the locals of its tracebacks' frames in the package (containers one level
    deep; the test's own frame holds the body it served)."""
    found: list[int] = []
    chain: list[BaseException] = [failure]
    while chain:
        exc = chain.pop()
        chain += [link for link in (exc.__context__, exc.__cause__) if link is not None]
        found += [
            len(value) for value in vars(exc).values() if isinstance(value, (bytes, bytearray))
        ]
        traceback = exc.__traceback__
        while traceback is not None:
            frame = traceback.tb_frame
            traceback = traceback.tb_next
            # The package's frames by module name (a checkout may itself be named taguru_eval).
            if not str(frame.f_globals.get("__name__", "")).startswith("taguru_eval."):
                continue
            for value in frame.f_locals.values():
                values = list(value) if isinstance(value, (list, tuple)) else [value]
                found += [len(v) for v in values if isinstance(v, (bytes, bytearray, memoryview))]
    return [size for size in found if size >= at_least]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"result": "' + b"x" * (3 << 20) + b'"}', "the body exceeds the 1 MiB cap"),
        (b"\xff" * (512 << 10), "invalid start byte"),
    ],
    ids=["over-the-cap", "not-utf-8"],
)
async def test_a_failed_body_is_released_when_its_call_fails(
    monkeypatch: pytest.MonkeyPatch, body: bytes, reason: str
) -> None:
    """Nothing a failure keeps (its context, its frames) holds the body it read: a
    run keeps failures, and each used to keep its body, up to the cap."""
    monkeypatch.setattr(client_module, "BODY_CAP_BYTES", 1 << 20)
    monkeypatch.setattr(client_module, "SMALL_BODY_BYTES", 8 << 20)
    monkeypatch.setattr(client_module.BodyTooLarge, "__init__", _one_mib_cap)
    answer = Response(200, body, {"Content-Type": "application/json"})
    with ScriptedServer(lambda request: answer) as url:
        async with TaguruClient(url) as client:
            with pytest.raises(CallFailure) as caught:
                await client.get(["x"])
    failure = caught.value
    assert reason in failure.message
    assert failure.__context__ is None
    assert _bodies_kept_by(failure, at_least=64 << 10) == []


def _one_mib_cap(self: Exception) -> None:
    Exception.__init__(self, "the body exceeds the 1 MiB cap")
