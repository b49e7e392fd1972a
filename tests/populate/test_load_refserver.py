"""``load`` against the reference server on loopback: what goes in reads back, and a
server filled by ``load`` answers the evaluator exactly as ``serve DIR`` does."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from support.loopback import ForwardProxy
from support.paths import DATA
from support.readback import expected_of, read_back

import taguru_eval
from taguru_eval.cli.main import main
from taguru_eval.errors import InputError, UsageError
from taguru_refserver.serve import running_server

DEMO = ("handbook", "sake")
VOLATILE = frozenset({"time", "stored_at", "last_read_epoch", "last_write_epoch"})
"""Clocks: the only values two servers holding the same corpus may disagree on."""


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """``serve data``: the corpus loaded in-process, as the demo serves it."""
    with running_server(DATA) as url:
        yield url


@pytest.fixture(scope="module")
def loaded() -> Iterator[tuple[str, taguru_eval.Loaded]]:
    """An empty ``serve`` filled over HTTP by ``load data``."""
    with running_server(None) as url:
        yield url, taguru_eval.load(DATA, url=url)


def test_the_demo_folders_go_in_and_read_back_as_the_folders_say(
    loaded: tuple[str, taguru_eval.Loaded],
) -> None:
    url, result = loaded
    for name in DEMO:
        assert read_back(url, name) == expected_of(DATA / name)
    assert [(c.name, c.action, c.folder) for c in result.contexts] == [
        (name, "created", DATA / name) for name in DEMO
    ]


def test_the_library_returns_each_request_and_each_context_s_revision(
    loaded: tuple[str, taguru_eval.Loaded],
) -> None:
    url, result = loaded
    writes = result.writes
    assert writes.columns == ["context", "route", "items", "bytes", "applied"]
    sake = writes.filter(pl.col("context") == "sake").to_dicts()
    assert [row["route"] for row in sake] == [
        "PUT /contexts/sake",
        "POST /contexts/sake/sources",
        "POST /contexts/sake/associations",
        "POST /contexts/sake/aliases",
    ]
    assert [row["items"] for row in sake] == [0, 7, 47, 15]
    assert [row["applied"] for row in sake] == [None, 7, 47, 15]
    assert all(row["bytes"] > 0 for row in sake[1:])
    (context,) = [c for c in result.contexts if c.name == "sake"]
    assert (context.sources, context.associations, context.aliases) == (7, 47, 15)
    assert dict(context.revision) == {"graph": 62, "passages": 7, "config": 0}
    entry = httpx.get(f"{url}/contexts/sake").json()["result"]
    assert entry["revision"] == dict(context.revision)
    assert result.url == url
    # A quiet library call keeps the lines the command line prints.
    assert result.output[0] == f"load → {url}"
    assert [line.split(":")[0] for line in result.output[1:]] == ["  handbook", "  sake"]
    assert "'sake' (created, 7 sources)" in repr(result)


# -- serve DIR and load DIR answer the evaluator alike -----------------------------------


class Recording(httpx.AsyncBaseTransport):
    """Sends every request on, keeping (method, path with query, body) of each."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests: list[tuple[str, str, bytes]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.requests.append((request.method, request.url.raw_path.decode("ascii"), body))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _evaluator_requests(tmp_path: Path) -> list[tuple[str, str, bytes]]:
    """Every distinct request the evaluator makes on the demo sets, in order:
    baseline with the must-refuse and answers files, and --assembly with a budget."""
    recording = Recording()
    with running_server(DATA) as url:
        for name in DEMO:
            modes: list[dict[str, Any]] = [
                {"must_refuse": DATA / name / "must_refuse.jsonl"},
                {"assembly": True, "max_items": 5},
            ]
            for number, mode in enumerate(modes):
                taguru_eval.run(
                    DATA / name / "eval.jsonl",
                    name,
                    url=url,
                    out=tmp_path / f"{name}-{number}.json",
                    no_store=True,
                    transport=recording,
                    **mode,
                )
    return list(dict.fromkeys(recording.requests))


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (0 if k in VOLATILE else _masked(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


def _answer(client: httpx.Client, method: str, path: str, body: bytes) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"} if body else {}
    response = client.request(method, path, content=body or None, headers=headers)
    try:
        document = response.json()
    except json.JSONDecodeError:
        document = response.text
    return response.status_code, _masked(document)


def test_serve_dir_and_load_dir_answer_every_evaluator_request_alike(tmp_path: Path) -> None:
    requests = _evaluator_requests(tmp_path)
    routes = {(method, path.split("?")[0]) for method, path, _body in requests}
    called = [("GET", "/health")] + [
        (method, "/contexts/sake" + rest)
        for method, rest in [
            ("GET", ""),
            ("GET", "/embeddings"),
            ("GET", "/sources"),
            ("POST", "/sources/search"),
            ("POST", "/resolve"),
            ("POST", "/resolve_label"),
            ("POST", "/query"),
            ("POST", "/citations"),
            ("POST", "/evidence"),
        ]
    ]
    assert set(called) <= routes
    with running_server(DATA) as served_url, running_server(None) as loaded_url:
        taguru_eval.load(DATA, url=loaded_url)
        with (
            httpx.Client(base_url=served_url, timeout=60) as served,
            httpx.Client(base_url=loaded_url, timeout=60) as loaded,
        ):
            differences = [
                (method, path)
                for method, path, body in requests
                if _answer(served, method, path, body) != _answer(loaded, method, path, body)
            ]
    assert len(requests) > 150
    assert differences == []


# -- what is already there ----------------------------------------------------------------


def _entry(url: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = httpx.get(f"{url}/contexts/{name}").json()["result"]
    return result


def test_a_context_holding_data_is_refused_without_replace_and_nothing_is_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with running_server(DATA) as url:
        before = _entry(url, "sake")
        assert main(["load", str(DATA), "--url", url]) == 2
        captured = capsys.readouterr()
        (line,) = captured.err.splitlines()[1:]
        assert line.startswith("taguru: evaluate: context 'handbook' on ")
        assert "already holds 4 source(s)" in line
        assert "(and 1 more context(s) of the folder)" in line
        assert "pass --replace" in line
        assert captured.out == ""
        after = _entry(url, "sake")
        assert after["revision"] == before["revision"]
        assert after["usage"]["writes"] == before["usage"]["writes"]


def test_replace_deletes_the_context_and_loads_it_afresh() -> None:
    with running_server(DATA) as url:
        httpx.post(
            f"{url}/contexts/sake/sources", json={"passages": {"stray.md": "not in the folder"}}
        ).raise_for_status()
        result = taguru_eval.load(DATA / "sake", url=url, replace=True)
        assert [c.action for c in result.contexts] == ["replaced"]
        assert result.writes["route"][0] == "DELETE /contexts/sake"
        assert read_back(url, "sake") == expected_of(DATA / "sake")


def test_an_existing_empty_context_is_filled_and_takes_the_folder_s_settings() -> None:
    with running_server(None) as url:
        httpx.put(f"{url}/contexts/sake", json={"description": "made by hand"}).raise_for_status()
        result = taguru_eval.load(DATA / "sake", url=url)
        (context,) = result.contexts
        assert context.action == "filled"
        assert list(result.writes["route"][:1]) == ["PATCH /contexts/sake"]
        snapshot = read_back(url, "sake")
        expected = expected_of(DATA / "sake")
        assert snapshot["description"] == expected["description"] != "made by hand"
        assert snapshot["revision"]["config"] == 1  # the PATCH changed the description
        assert {k: v for k, v in snapshot.items() if k != "revision"} == {
            k: v for k, v in expected.items() if k != "revision"
        }


# -- FOLDER: one context, or a root of them -----------------------------------------------


def test_a_single_folder_may_be_renamed_and_a_root_may_not(tmp_path: Path) -> None:
    with running_server(None) as url:
        result = taguru_eval.load(DATA / "handbook", url=url, context="手引き")
        assert [c.name for c in result.contexts] == ["手引き"]
        assert read_back(url, "手引き")["sources"] == expected_of(DATA / "handbook")["sources"]
        with pytest.raises(UsageError, match=r"--context renames one context folder, but .* root"):
            taguru_eval.load(DATA, url=url, context="x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"neither a context folder .* nor a root"):
        taguru_eval.load(tmp_path / "empty", url="http://127.0.0.1:9")
    with pytest.raises(InputError, match=r"not a directory"):
        taguru_eval.load(tmp_path / "missing", url="http://127.0.0.1:9")


def test_a_root_loads_every_sub_folder_as_serve_does(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for name in DEMO:
        shutil.copytree(DATA / name, root / name)
    (root / ".hidden").mkdir()
    with running_server(None) as url:
        result = taguru_eval.load(root, url=url)
        assert [c.name for c in result.contexts] == list(DEMO)
        listed = httpx.get(f"{url}/contexts").json()["result"]["contexts"]
        assert sorted(entry["name"] for entry in listed) == list(DEMO)


def test_the_command_line_prints_one_line_per_context(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with running_server(None) as url:
        assert main(["load", str(DATA / "sake"), "--url", url + "/"]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"load → {url}\n"
    assert captured.out == (
        f"  sake: created from {DATA / 'sake'} — 7 source(s), 47 association(s), "
        "15 alias(es); revision graph 62, passages 7, config 0\n"
    )


def test_load_goes_through_the_proxy_run_mode_would_use() -> None:
    proxy = ForwardProxy()
    with running_server(None) as url, proxy as proxy_url:
        taguru_eval.load(DATA / "handbook", url=url, env={"HTTP_PROXY": proxy_url})
        methods = [method for method, _target in proxy.seen]
        assert methods[:2] == ["GET", "PUT"] and methods.count("POST") == 3
        assert all(target.startswith(f"{url}/contexts/handbook") for _m, target in proxy.seen)
        proxy.seen.clear()
        taguru_eval.load(
            DATA / "sake", url=url, env={"HTTP_PROXY": proxy_url, "NO_PROXY": "127.0.0.1"}
        )
        assert proxy.seen == []
        assert read_back(url, "sake") == expected_of(DATA / "sake")
