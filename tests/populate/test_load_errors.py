"""Every way ``load`` can fail ends in one line naming the fix, with the documented
exit code, and no token in any output. The reference server on loopback plays
the server; ``httpx.MockTransport`` only the faults it cannot produce (a revision
that keeps moving, a server echoing the token)."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.paths import DATA
from support.readback import expected_of, read_back
from support.refserver import capped_server

import taguru_eval
from taguru_eval.cli.main import main
from taguru_eval.errors import RunError
from taguru_eval.populate.load import load_folders
from taguru_eval.run.console import Console
from taguru_refserver.serve import running_server

WRITE_TOKEN = "load-write-secret-7f3a"
READ_TOKEN = "load-read-secret-91c2"
WRONG_TOKEN = "load-wrong-secret-55d0"
TOKENS = (WRITE_TOKEN, READ_TOKEN, WRONG_TOKEN)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["load", *args])
    captured = capsys.readouterr()
    for token in TOKENS:
        assert token not in captured.out + captured.err
    return code, captured.out, captured.err


def _error_line(err: str) -> str:
    """The one error line after ``load → URL`` (when the server was named)."""
    lines = [line for line in err.splitlines() if not line.startswith("load → ")]
    assert len(lines) == 1, err
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_exit_1_naming_the_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = _closed_port()
    code, out, err = _run(capsys, str(DATA / "sake"), "--url", f"http://127.0.0.1:{port}")
    assert (code, out) == (1, "")
    line = _error_line(err)
    assert line.startswith(f"taguru: evaluate: http://127.0.0.1:{port} cannot be reached (")
    assert line.endswith("start the server, or point --url (or TAGURU_ADDR) at it")


@pytest.mark.parametrize(
    ("token", "hint"),
    [
        (None, "the server needs a bearer token: set TAGURU_API_TOKEN"),
        (WRONG_TOKEN, "the server does not accept the token in TAGURU_API_TOKEN"),
    ],
)
def test_a_401_says_whether_a_token_was_sent(
    token: str | None,
    hint: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if token is not None:
        monkeypatch.setenv("TAGURU_API_TOKEN", token)
    with running_server(None, token=WRITE_TOKEN, read_token=READ_TOKEN) as url:
        code, out, err = _run(capsys, str(DATA / "sake"), "--url", url)
        listed = httpx.get(f"{url}/contexts", headers={"Authorization": f"Bearer {WRITE_TOKEN}"})
    assert (code, out) == (1, "")
    line = _error_line(err)
    assert line.startswith("taguru: evaluate: GET /contexts/sake answered 401 unauthorized: ")
    assert hint in line
    assert listed.json()["result"]["contexts"] == []


def test_a_read_only_token_is_a_403_naming_the_write_role(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAGURU_API_TOKENS", f"ci:{READ_TOKEN}")
    with running_server(None, token=WRITE_TOKEN, read_token=READ_TOKEN) as url:
        code, out, err = _run(capsys, str(DATA / "sake"), "--url", url)
    assert (code, out) == (1, "")
    line = _error_line(err)
    assert line.startswith("taguru: evaluate: PUT /contexts/sake answered 403 forbidden: ")
    assert "give load a key with the write role on the context" in line


def test_a_token_from_a_config_file_loads_and_is_never_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_server(None, token=WRITE_TOKEN) as url:
        config = tmp_path / "taguru.env"
        config.write_text(
            f"TAGURU_API_TOKEN={WRITE_TOKEN}\nTAGURU_ADDR={url.removeprefix('http://')}\n"
            "TAGURU_TYPO=1\n",
            encoding="utf-8",
        )
        code, out, err = _run(capsys, str(DATA / "sake"), "--config", str(config))
        assert code == 0, err
        assert err.splitlines() == [
            "taguru: config: TAGURU_TYPO is not a variable taguru reads (typo?)",
            f"load → {url}",
        ]
        assert out.startswith("  sake: created from ")
        assert read_back(url, "sake", WRITE_TOKEN) == expected_of(DATA / "sake")


def _broken_copy(tmp_path: Path, change: Callable[[Path], None]) -> Path:
    folder = tmp_path / "sake"
    shutil.copytree(DATA / "sake", folder)
    change(folder)
    return folder


def _heavy_weight(folder: Path) -> None:
    file = folder / "associations.jsonl"
    lines = file.read_text(encoding="utf-8").split("\n")
    item = json.loads(lines[11])
    item["weight"] = 1e9
    lines[11] = json.dumps(item, ensure_ascii=False)
    file.write_text("\n".join(lines), encoding="utf-8")


def _long_section(folder: Path) -> None:
    file = folder / "corpus" / "water.md"
    file.write_text(f"---\nsection: {'x' * 600}\n---\nbody\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("change", "where", "route", "held"),
    [
        (
            _heavy_weight,
            "associations.jsonl:12",
            "POST /contexts/sake/associations answered 400 invalid_argument: ",
            "holds part of the folder (7 of 7 source(s), 0 of 47 association(s) and 0 alias",
        ),
        (
            _long_section,
            "corpus/water.md:2",
            "POST /contexts/sake/sources answered 400 invalid_argument: ",
            "holds nothing of the folder yet — fix it and load again",
        ),
    ],
)
def test_a_refused_item_is_named_by_file_and_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[Path], None],
    where: str,
    route: str,
    held: str,
) -> None:
    folder = _broken_copy(tmp_path, change)
    with running_server(None) as url:
        code, out, err = _run(capsys, str(folder), "--url", url)
    assert (code, out) == (1, "")
    line = _error_line(err)
    assert line.startswith(f"taguru: evaluate: {folder / where}: {route}")
    assert held in line


def _many_sources(folder: Path, count: int, size: int) -> None:
    (folder / "docs").mkdir(parents=True)
    (folder / "context.json").write_text('{"description": "generated"}', encoding="utf-8")
    for index in range(count):
        body = f"# Document {index}\n\n" + f"word{index} " * (size // 8)
        (folder / "docs" / f"{index:05d}.md").write_text(body, encoding="utf-8")


class Statuses(httpx.BaseTransport):
    """Sends every request on, keeping each answer's status."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.seen: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        self.seen.append(response.status_code)
        return response

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("told", [False, True])
def test_a_body_over_the_server_s_cap_is_split_until_it_fits(tmp_path: Path, told: bool) -> None:
    folder = tmp_path / "generated"
    _many_sources(folder, 60, 600)
    statuses = Statuses()
    env = {"TAGURU_MAX_BODY_BYTES": "4096"} if told else {}
    with capped_server(4096) as url:
        result = taguru_eval.load(folder, url=url, env=env, transport=statuses)
        assert read_back(url, "generated") == expected_of(folder)
    stores = result.writes.filter(result.writes["route"] == "POST /contexts/generated/sources")
    assert stores["items"].sum() == 60
    assert stores.height >= 10
    assert stores["bytes"].max() <= 4096
    # Told the cap (a config file shared with the server), no request is refused;
    # else the first 413s halve the budget until the bodies fit.
    assert (413 in statuses.seen) is not told
    assert set(statuses.seen) <= {200, 404, 413}


def test_one_source_over_the_cap_names_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "generated"
    _many_sources(folder, 3, 100)
    big = folder / "docs" / "00001.md"
    big.write_text("x" * 9000, encoding="utf-8")
    with capped_server(4096) as url:
        code, out, err = _run(capsys, str(folder), "--url", url)
    assert (code, out) == (1, "")
    line = _error_line(err)
    assert line.startswith(
        f"taguru: evaluate: {big}: POST /contexts/generated/sources answered 413 "
        "payload_too_large to a "
    )
    assert "-byte body holding this one item: raise the server's TAGURU_MAX_BODY_BYTES" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "load takes exactly one FOLDER (got 0): a context folder, or a root of them"),
        (["a", "b"], "load takes exactly one FOLDER (got 2): a context folder, or a root of them"),
        (["a", "--bogus"], "unknown flag '--bogus' for load"),
        (["a", "--context"], "--context needs a name"),
        (["a", "--replace", "--replace"], "--replace given twice"),
    ],
)
def test_usage_errors_are_one_line_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, *args)
    assert (code, out) == (2, "")
    assert err == (f"taguru: evaluate: {message} — try 'python -m taguru_eval load --help'\n")


@pytest.mark.parametrize(
    ("env", "url", "message"),
    [
        ({}, "http://user:pw@127.0.0.1:9", "the URL must not carry credentials"),
        ({}, "http://1.2.3.256", "the --url value could not be parsed as a URL"),
        ({"TAGURU_API_TOKEN": "line\nbreak"}, "http://127.0.0.1:9", "contains a control"),
    ],
)
def test_bad_urls_and_unsendable_tokens_are_exit_2_before_any_request(
    env: dict[str, str],
    url: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, err = _run(capsys, str(DATA / "sake"), "--url", url)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err
    assert "user:pw" not in err and "line\nbreak" not in err


def test_a_bad_folder_file_is_exit_2_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "associations.jsonl").write_text('{"subject": "a"}\nnot json\n', encoding="utf-8")
    port = _closed_port()  # nothing listens: a request would be exit 1
    code, out, err = _run(capsys, str(folder), "--url", f"http://127.0.0.1:{port}")
    assert (code, out) == (2, "")
    assert err.startswith(f"taguru: evaluate: {folder / 'associations.jsonl'}:2: not valid JSON")


# -- faults the reference server cannot produce ----------------------------------------


class FakeServer:
    """A taguru stand-in answering the loader's calls; ``revisions`` yields the
    revision each context read reports, ``echo`` is put in every error body."""

    def __init__(self, revisions: Callable[[int], dict[str, int]], echo: str = "") -> None:
        self.revisions = revisions
        self.echo = echo
        self.reads = 0
        self.created = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path == "/contexts/c":
            if not self.created:
                return httpx.Response(
                    404, json={"status": "error", "code": "no_context", "error": self.echo}
                )
            self.reads += 1
            return _ok({"revision": self.revisions(self.reads), "stats": {}})
        if request.method == "GET" and path == "/contexts/c/sources":
            return _ok({"total": 1, "sources": ["a.md"], "entries": []})
        if request.method == "PUT":
            self.created = True
            return _ok(True)
        if path == "/contexts/c/sources":
            if self.echo:
                return httpx.Response(
                    500, json={"status": "error", "code": "internal", "error": self.echo}
                )
            return _ok({"stored": 1})
        raise AssertionError(f"unexpected {request.method} {path}")


def _ok(result: Any) -> httpx.Response:
    return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})


def _one_source(tmp_path: Path) -> Path:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "a.md").write_text("text\n", encoding="utf-8")
    return folder


def _load(folder: Path, server: FakeServer, env: dict[str, str] | None = None) -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    load_folders(
        folder,
        url="http://taguru.test",
        context=None,
        replace=False,
        config=None,
        env=env or {},
        console=Console(stdout=_Null(), stderr=_Null()),
        transport=httpx.MockTransport(server),
        clock=lambda: now[0],
        sleep=sleep,
    )


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def test_a_revision_that_keeps_moving_is_waited_for_then_refused(tmp_path: Path) -> None:
    server = FakeServer(lambda read: {"graph": 0, "passages": 1, "config": read})
    with pytest.raises(RunError, match=r"context 'c' still changes 30 s after the load"):
        _load(_one_source(tmp_path), server)
    assert server.reads > 100  # read again every 0.2 s of the (fake) clock


def test_a_revision_that_settles_late_is_waited_for(tmp_path: Path) -> None:
    server = FakeServer(lambda read: {"graph": 0, "passages": 1, "config": min(read, 5)})
    _load(_one_source(tmp_path), server)
    assert server.reads == 6


def test_a_revision_other_than_the_writes_made_is_refused(tmp_path: Path) -> None:
    server = FakeServer(lambda read: {"graph": 3, "passages": 1, "config": 0})
    with pytest.raises(RunError, match=r"expected graph 0, passages 1: another client wrote"):
        _load(_one_source(tmp_path), server)


def test_a_server_echoing_the_token_has_it_redacted(tmp_path: Path) -> None:
    server = FakeServer(lambda read: {}, echo=f"bad header Bearer {WRITE_TOKEN} ({WRITE_TOKEN})")
    with pytest.raises(RunError) as caught:
        _load(_one_source(tmp_path), server, env={"TAGURU_API_TOKEN": WRITE_TOKEN})
    assert WRITE_TOKEN not in str(caught.value)
    assert "500 internal: bad header Bearer [REDACTED] ([REDACTED]);" in str(caught.value)


def _handler_load(tmp_path: Path, handler: Callable[[httpx.Request], httpx.Response]) -> None:
    load_folders(
        _one_source(tmp_path),
        url="http://taguru.test",
        context=None,
        replace=False,
        config=None,
        env={},
        console=Console(stdout=_Null(), stderr=_Null()),
        transport=httpx.MockTransport(handler),
    )


def test_a_server_that_stops_answering_mid_load_is_told_with_what_was_written(
    tmp_path: Path,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404, json={"status": "error", "code": "no_context", "error": ""})
        if request.method == "PUT":
            return _ok(True)
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(RunError) as caught:
        _handler_load(tmp_path, handler)
    assert str(caught.value) == (
        "http://taguru.test did not answer within 300 s (ReadTimeout: timed out): is the "
        "server overloaded? try again when it is idle; context 'c' holds nothing of the "
        "folder yet — fix it and load again"
    )


def test_a_redirect_is_not_followed_and_names_where_it_points(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(308, headers={"Location": "https://taguru.test/api/contexts/c"})

    with pytest.raises(RunError, match=r"GET /contexts/c answered 308: a redirect to https://"):
        _handler_load(tmp_path, handler)


def test_the_reference_server_s_vector_lane_key_is_dropped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _one_source(tmp_path)
    (folder / "context.json").write_text('{"vector_lane": true}', encoding="utf-8")
    with running_server(None) as url:
        code, out, err = _run(capsys, str(folder), "--url", url)
        assert httpx.get(f"{url}/contexts/c").json()["result"]["description"] == ""
    assert code == 0, err
    assert err.splitlines()[1] == (
        f"taguru: evaluate: warning: {folder / 'context.json'}: vector_lane is the reference "
        "server's own key; no route sends it (a server's vector lane is its embedding provider)"
    )
    assert out.startswith("  c: created from ")
