"""``serve DIR`` over real loopback HTTP: the corpus folder format, the CLI and its errors."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.paths import DATA, PROJECT_ROOT

from taguru_eval.cli.serve import main, parse_args
from taguru_eval.errors import InputError
from taguru_refserver.corpus import load_corpus_dir
from taguru_refserver.serve import running_server
from taguru_refserver.state import ServerState

BREWERY = """---
tags: 蔵, 歴史
date: 2024-05-01
section: 沿革
---
青嶺酒造は1897年に創業した。

二代目が蔵を広げた。
"""
PROCESS = """\ufeff# 仕込み

仕込み水は霧沢の湧き水を使う。

## 麹

麹室で二晩かけて麹を育てる。
"""


def write_corpus(root: Path) -> Path:
    kura = root / "kura"
    (kura / "corpus").mkdir(parents=True)
    (kura / "context.json").write_text(json.dumps({"description": "蔵の資料"}), encoding="utf-8")
    (kura / "corpus" / "brewery.md").write_text(BREWERY, encoding="utf-8")
    (kura / "corpus" / "process.md").write_text(PROCESS, encoding="utf-8")
    (kura / "README.md").write_text("# not a source\n", encoding="utf-8")
    (kura / "eval.jsonl").write_text("{}\n", encoding="utf-8")
    associations = [
        {
            "subject": "青嶺酒造",
            "label": "創業",
            "object": "1897年",
            "weight": 1.0,
            "source": "corpus/brewery.md",
            "paragraph": 0,
        },
        {
            "subject": "青嶺酒造",
            "label": "仕込み水",
            "object": "霧沢の湧き水",
            "weight": 1.0,
            "source": "corpus/process.md",
            "paragraph": 1,
        },
    ]
    lines = [json.dumps(a, ensure_ascii=False) for a in associations]
    (kura / "associations.jsonl").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    (kura / "aliases.json").write_text(
        json.dumps({"concepts": {"青嶺": "青嶺酒造"}}, ensure_ascii=False), encoding="utf-8"
    )
    (root / ".hidden").mkdir()
    return root


def test_serve_a_corpus_folder_over_loopback(tmp_path: Path) -> None:
    with running_server(write_corpus(tmp_path)) as url, httpx.Client(base_url=url) as client:
        assert url.startswith("http://127.0.0.1:")
        assert client.get("/health").json()["status"] == "ok"
        listing = client.get("/contexts").json()["result"]
        assert [c["name"] for c in listing["contexts"]] == ["kura"]
        entry = client.get("/contexts/kura").json()["result"]
        assert entry["description"] == "蔵の資料"
        # 2 sources in one store; 2 associations + 1 alias through the write path
        assert entry["revision"] == {"graph": 3, "passages": 2, "config": 0}
        sources = client.get("/contexts/kura/sources", params={"limit": 1000}).json()["result"]
        assert sources["sources"] == ["corpus/brewery.md", "corpus/process.md"]
        brewery = sources["entries"][0]
        assert brewery["tags"] == ["歴史", "蔵"]
        assert brewery["date"] == 1714521600
        first = client.post(
            "/contexts/kura/citations", json={"source": "corpus/brewery.md", "paragraph": 0}
        ).json()["result"]
        assert first == {
            "locator": None,
            "section": "沿革",
            "source": "corpus/brewery.md",
            "text": "青嶺酒造は1897年に創業した。",
        }
        koji = client.post(
            "/contexts/kura/citations", json={"source": "corpus/process.md", "paragraph": 3}
        ).json()["result"]
        assert (koji["section"], koji["text"]) == ("麹", "麹室で二晩かけて麹を育てる。")
        heading = client.post(
            "/contexts/kura/citations", json={"source": "corpus/process.md", "paragraph": 0}
        ).json()["result"]
        assert heading["text"] == "# 仕込み"  # the BOM is gone
        filtered = client.post(
            "/contexts/kura/sources/search",
            json={"query": "青嶺酒造", "tags": ["蔵"], "since": 1714521600, "until": 1714521601},
        ).json()["result"]
        assert [h["source"] for h in filtered["hits"]] == ["corpus/brewery.md"]
        assert filtered["plan"]["contexts"][0]["filter"] == {
            "eligible_sources": 1,
            "total_sources": 2,
        }
        resolved = client.post("/contexts/kura/resolve", json={"cue": "青嶺", "limit": 5}).json()
        assert resolved["result"][0]["name"] == "青嶺酒造"
        assert resolved["result"][0]["kind"] == "alias"
        query = client.post(
            "/contexts/kura/query",
            json={"subject": "青嶺", "label": "仕込み水", "object": "霧沢の湧き水", "limit": 1},
        ).json()["result"]
        assert query["total"] == 1
        assert query["matches"][0]["attributions"][0]["section"] == "仕込み"


def test_serve_an_empty_folder_then_create_over_http(tmp_path: Path) -> None:
    with running_server(tmp_path) as url, httpx.Client(base_url=url) as client:
        assert client.get("/contexts").json()["result"] == {"contexts": [], "total": 0}
        assert client.put("/contexts/new", json={"description": "d"}).json()["result"] is True
        stored = client.post("/contexts/new/sources", json={"passages": {"a.md": "本文。"}})
        assert stored.json()["result"]["stored"] == 1
        assert client.get("/contexts/new").json()["result"]["revision"]["passages"] == 1


def test_serve_with_tokens_over_loopback(tmp_path: Path) -> None:
    with (
        running_server(tmp_path, token="w", read_token="r") as url,
        httpx.Client(base_url=url) as client,
    ):
        refused = client.get("/contexts")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        read = {"Authorization": "Bearer r"}
        assert client.get("/contexts", headers=read).status_code == 200
        assert client.put("/contexts/x", headers=read).status_code == 403
        assert client.put("/contexts/x", headers={"Authorization": "Bearer w"}).status_code == 200


@pytest.mark.skipif(not (DATA / "sake").is_dir(), reason="demo data not present")
def test_the_demo_data_folder_loads() -> None:
    state = ServerState()
    names = load_corpus_dir(state, DATA)
    assert "sake" in names
    sake = state.contexts["sake"]
    assert sake.revision.passages >= 1
    assert "corpus/brewery.md" in sake.passages


# -- corpus format errors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "text", "message"),
    [
        ("c/a.md", "---\ntitle: x\n---\nbody\n", "c/a.md:2: front matter line must be"),
        ("c/a.md", "---\ntags: a\nbody\n", "c/a.md:1: front matter opened with '---'"),
        ("c/a.md", "---\ndate: 2024-13-40\n---\nbody\n", "c/a.md:2: date must be"),
        ("c/associations.jsonl", '{"subject": "a"}\nnot json\n', "associations.jsonl:2: not valid"),
        (
            "c/associations.jsonl",
            '{"subject":"a","label":"b","object":"c","weight":1}\n\n'
            '{"subject":"","label":"b","object":"c","weight":1}\n',
            "associations.jsonl:3:",
        ),
        ("c/aliases.json", '{"concepts": {"x": "unknown"}}', "aliases.json:1: applied 0 of 1"),
        (
            "c/aliases.json",
            '{"concepts": {\n  "x": "unknown"\n},\n"labels": {}}',
            "aliases.json:2: applied 0 of 1",
        ),
        ("c/a.md", f"---\nsection: {'x' * 600}\n---\nbody\n", "c/a.md:2: "),
        ("c/a.md", f"---\ntags: a, {'t' * 200}\n---\nbody\n", "c/a.md:2: "),
        ("c/context.json", "{", "context.json: not valid JSON"),
        ("c/context.json", '{"description": 5}', "context.json: Failed to deserialize"),
    ],
)
def test_corpus_errors_name_file_and_line(
    tmp_path: Path, relative: str, text: str, message: str
) -> None:
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_corpus_dir(ServerState(), tmp_path)
    assert message in str(caught.value)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("c/context.json", '{"x":' + _nested(100_000) + "}"),
        ("c/aliases.json", '{"concepts":{"a":' + _nested(100_000) + "}}"),
        ("c/associations.jsonl", "\n" + _nested(100_000) + "\n"),
    ],
)
def test_deeply_nested_corpus_json_is_one_stderr_line_exit_2(
    tmp_path: Path, relative: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    assert main([str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    line = "2" if relative.endswith(".jsonl") else ""
    where = f"{target}:{line}" if line else str(target)
    assert err == f"taguru_eval serve: {where}: not valid JSON: recursion limit exceeded\n"


def test_a_huge_front_matter_date_is_refused_naming_the_line(tmp_path: Path) -> None:
    target = tmp_path / "c" / "corpus" / "a.md"
    target.parent.mkdir(parents=True)
    target.write_text(f"---\ndate: {'9' * 5000}\n---\nbody\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"a\.md:2: date must be epoch seconds or YYYY-MM-DD"):
        load_corpus_dir(ServerState(), tmp_path)


def test_corpus_json_nesting_follows_serde_s_limit(tmp_path: Path) -> None:
    # 127 containers in all (the object and 126 arrays) is what serde reads; one
    # more is refused, far short of Python's stack, whatever loads the file.
    target = tmp_path / "c" / "context.json"
    target.parent.mkdir(parents=True)
    target.write_text('{"x":' + _nested(126) + "}", encoding="utf-8")
    assert load_corpus_dir(ServerState(), tmp_path) == ["c"]
    target.write_text('{"x":' + _nested(127) + "}", encoding="utf-8")
    with pytest.raises(InputError, match=r"context\.json: not valid JSON: recursion limit"):
        load_corpus_dir(ServerState(), tmp_path)


# -- the command line -----------------------------------------------------------------


def test_bad_dir_is_one_stderr_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("taguru_eval serve: ") and "not a directory" in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["a", "b"],
        ["d", "--port", "x"],
        ["d", "--port", "70000"],
        ["d", "--port", "9" * 5000],
        ["d", "--bogus"],
        ["d", "--token"],
        ["d", "--host", "h", "--host", "h"],
    ],
)
def test_bad_flags_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_parse_args_defaults_and_help() -> None:
    options = parse_args(["data", "--port=9000", "--read-token", "r"])
    assert options is not None
    assert (options.host, options.port, options.token, options.read_token) == (
        "127.0.0.1",
        9000,
        None,
        "r",
    )
    assert parse_args(["--help"]) is None


@contextlib.contextmanager
def serve_process(corpus: Path) -> Iterator[str]:
    """``python -m taguru_eval serve CORPUS --port 0`` in a child process; yields the
    line it announces itself with."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "taguru_eval", "serve", str(corpus), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("taguru_eval serve: listening on http://127.0.0.1:"), line
        yield line
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_serve_process_prints_its_url_and_answers(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    with serve_process(tmp_path) as line:
        url = line.split("listening on ")[1].split(" ")[0]
        assert "(contexts: kura)" in line
        health = httpx.get(url + "/health", timeout=10)
        assert health.json() == {"status": "ok", "version": "0.9.7"}


def test_serve_escapes_a_folder_name_s_control_characters(tmp_path: Path) -> None:
    # A context is named after its folder, and a folder name may hold anything
    # but '/': printed raw it would colour the terminal or forge a line.
    (tmp_path / "ok\x1b[31mRED\nFAKE: all good").mkdir()
    with serve_process(tmp_path) as line:
        assert line.endswith(" (contexts: ok\\u{1b}[31mRED\\nFAKE: all good)\n"), line


def test_cannot_listen_escapes_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from taguru_refserver import serve

    def refuse(host: str, port: int, *rest: object) -> object:
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(serve, "bind_socket", refuse)
    assert main([str(tmp_path), "--host", "h\x1b[31m\nFAKE", "--port", "1"]) == 1
    assert capsys.readouterr().err == (
        "taguru_eval serve: cannot listen on h\\u{1b}[31m\\nFAKE:1: Address already in use\n"
    )
