"""``load`` against the real taguru 0.9.7 on loopback: the demo folders go in and read
back as the folders say, the evaluation on them equals the one on ``serve DIR``,
and every error path (a token missing, wrong or read-only, a refused item, data
already there, a body over taguru's cap) ends in one line naming the fix, the
token never printed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.paths import DATA
from support.readback import expected_of, read_back
from support.taguru import RealTaguru, populate

import taguru_eval
from taguru_eval.cli.main import main
from taguru_refserver.serve import running_server

ADMIN_TOKEN = "taguru-admin-secret-8e1f"
WRITE_TOKEN = "taguru-write-secret-2b7c"
READ_TOKEN = "taguru-read-secret-6d40"
TOKENS = (ADMIN_TOKEN, WRITE_TOKEN, READ_TOKEN)
SCOPED = {
    "TAGURU_API_TOKENS": f"admin:{ADMIN_TOKEN},bot:{WRITE_TOKEN},ci:{READ_TOKEN}",
    "TAGURU_KEY_SCOPES": json.dumps({"bot": "write", "ci": "read"}),
}
"""Three keys on one server: an admin, a write-only bot and a read-only CI key."""

Start = Callable[..., RealTaguru]


def _load(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["load", *args])
    captured = capsys.readouterr()
    for token in TOKENS:
        assert token not in captured.out + captured.err
    return code, captured.out, captured.err


def _error(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("load → ")]
    assert len(lines) == 1, err
    return lines[0]


def test_the_demo_folders_go_in_and_read_back_equal(
    real_taguru: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    server = real_taguru()
    code, out, err = _load(capsys, str(DATA), "--url", server.url)
    assert code == 0, err
    assert [line.split(":")[0] for line in out.splitlines()] == ["  handbook", "  sake"]
    for name in ("handbook", "sake"):
        assert read_back(server.url, name) == expected_of(DATA / name)


def test_with_a_token_the_folder_goes_in_and_the_token_stays_out_of_the_output(
    real_taguru: Start, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = real_taguru(token=ADMIN_TOKEN)
    monkeypatch.setenv("TAGURU_API_TOKEN", ADMIN_TOKEN)
    code, out, err = _load(capsys, str(DATA / "sake"), "--url", server.url)
    assert code == 0, err
    assert out.startswith("  sake: created from ")
    assert read_back(server.url, "sake", ADMIN_TOKEN) == expected_of(DATA / "sake")
    assert populate(server.url, DATA / "handbook", "手引き", token=ADMIN_TOKEN) == "手引き"
    assert (
        read_back(server.url, "手引き", ADMIN_TOKEN)["sources"]
        == (expected_of(DATA / "handbook")["sources"])
    )


# -- the same evaluation as on serve DIR ---------------------------------------------------

_CLOCKS = ("generated_at", "last_write_epoch_before", "last_write_epoch_after", "latency_ms")


def _comparable(document: Any) -> Any:
    """An artifact without latencies, clocks and where the run went (URL, --out)."""
    if isinstance(document, dict):
        return {
            key: _comparable(value)
            for key, value in document.items()
            if key not in _CLOCKS and not key.startswith("latency.") and key not in ("url", "out")
        }
    if isinstance(document, list):
        return [_comparable(item) for item in document]
    return document


@pytest.mark.parametrize("name", ["sake", "handbook"])
def test_our_run_on_a_loaded_taguru_equals_our_run_on_serve_dir(
    real_taguru: Start, tmp_path: Path, name: str
) -> None:
    server = real_taguru()
    taguru_eval.load(DATA / name, url=server.url)
    modes: list[dict[str, Any]] = [
        {
            "must_refuse": DATA / name / "must_refuse.jsonl",
            "thresholds": DATA / name / "thresholds.json",
        },
        {"assembly": True, "max_items": 5},
    ]
    with running_server(DATA) as reference:
        for number, mode in enumerate(modes):
            runs = {
                where: taguru_eval.run(
                    DATA / name / "eval.jsonl",
                    name,
                    url=url,
                    out=tmp_path / f"{where}-{number}.json",
                    no_store=True,
                    **mode,
                )
                for where, url in (("taguru", server.url), ("reference", reference))
            }
            assert runs["taguru"].exit_code == runs["reference"].exit_code
            artifacts = {
                where: json.loads((tmp_path / f"{where}-{number}.json").read_text("utf-8"))
                for where in runs
            }
            assert artifacts["taguru"]["corpus"]["stable"] is True
            assert _comparable(artifacts["taguru"]) == _comparable(artifacts["reference"])


# -- error paths -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "hint"),
    [
        (None, "the server needs a bearer token: set TAGURU_API_TOKEN"),
        ("taguru-not-a-key-0000", "the server does not accept the token in TAGURU_API_TOKEN"),
    ],
)
def test_a_401_with_and_without_a_token(
    real_taguru: Start,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    token: str | None,
    hint: str,
) -> None:
    server = real_taguru(token=ADMIN_TOKEN)
    if token is not None:
        monkeypatch.setenv("TAGURU_API_TOKEN", token)
    code, out, err = _load(capsys, str(DATA / "sake"), "--url", server.url)
    assert (code, out) == (1, "")
    line = _error(err)
    assert line.startswith("taguru: evaluate: GET /contexts/sake answered 401 unauthorized: ")
    assert hint in line
    assert token is None or token not in err


def test_a_read_only_key_is_a_403_and_a_write_key_may_not_replace(
    real_taguru: Start, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = real_taguru(env=SCOPED)
    monkeypatch.setenv("TAGURU_API_TOKEN", READ_TOKEN)
    code, out, err = _load(capsys, str(DATA / "sake"), "--url", server.url)
    assert (code, out) == (1, "")
    line = _error(err)
    assert line.startswith("taguru: evaluate: PUT /contexts/sake answered 403 forbidden: ")
    assert "key 'ci' has role 'read'" in line and "a key with the write role" in line

    monkeypatch.setenv("TAGURU_API_TOKEN", WRITE_TOKEN)
    assert _load(capsys, str(DATA / "sake"), "--url", server.url)[0] == 0
    code, out, err = _load(capsys, str(DATA / "sake"), "--url", server.url, "--replace")
    assert (code, out) == (1, "")
    line = _error(err)
    assert line.startswith(
        "taguru: evaluate: --replace deletes context 'sake' first, and DELETE /contexts/sake "
        "answered 403 forbidden: key 'bot' has role 'write'"
    )
    assert line.endswith(
        "with the admin role on the context (the server's TAGURU_KEY_SCOPES); "
        "the context was left as it was"
    )

    monkeypatch.setenv("TAGURU_API_TOKEN", ADMIN_TOKEN)
    code, out, err = _load(capsys, str(DATA / "sake"), "--url", server.url, "--replace")
    assert code == 0, err
    assert out.startswith("  sake: replaced from ")
    assert read_back(server.url, "sake", ADMIN_TOKEN) == expected_of(DATA / "sake")


def test_a_context_holding_sources_is_refused_without_replace(
    real_taguru: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    server = real_taguru()
    assert _load(capsys, str(DATA / "sake"), "--url", server.url)[0] == 0
    before = httpx.get(f"{server.url}/contexts/sake").json()["result"]
    code, out, err = _load(capsys, str(DATA / "sake"), "--url", server.url)
    assert (code, out) == (2, "")
    line = _error(err)
    assert line.startswith(
        f"taguru: evaluate: context 'sake' on {server.url} already holds 7 source(s), "
    )
    assert "pass --replace" in line
    after = httpx.get(f"{server.url}/contexts/sake").json()["result"]
    assert (after["revision"], after["usage"]["writes"]) == (
        before["revision"],
        before["usage"]["writes"],
    )


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "sake"
    shutil.copytree(DATA / "sake", folder)
    return folder


def test_refused_items_are_named_by_file_and_line(
    real_taguru: Start, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = real_taguru()
    folder = _copy(tmp_path)
    associations = folder / "associations.jsonl"
    lines = associations.read_text(encoding="utf-8").split("\n")
    item = json.loads(lines[20])
    del item["object"]
    lines[20] = json.dumps(item, ensure_ascii=False)
    associations.write_text("\n".join(lines), encoding="utf-8")
    code, out, err = _load(capsys, str(folder), "--url", server.url)
    assert (code, out) == (1, "")
    assert _error(err).startswith(
        f"taguru: evaluate: {associations}:21: POST /contexts/sake/associations answered "
        "400 invalid_argument: associations[20].object: expected a non-empty string, got absent;"
    )

    aliases = folder / "aliases.json"
    aliases.write_text(
        '{\n  "concepts": {\n    "青嶺酒造株式会社": "青嶺酒造",\n'
        '    "Zzz": "no such concept"\n  }\n}\n',
        encoding="utf-8",
    )
    shutil.copy(DATA / "sake" / "associations.jsonl", associations)
    code, out, err = _load(capsys, str(folder), "--url", server.url, "--context", "sake2")
    assert (code, out) == (1, "")
    line = _error(err)
    assert line.startswith(
        f"taguru: evaluate: {aliases}:4: POST /contexts/sake2/aliases answered 409 conflict: "
    )
    assert "'Zzz'" in line and "47 of 47 association(s)" in line


def _generated(folder: Path, count: int) -> None:
    (folder / "docs").mkdir(parents=True)
    (folder / "context.json").write_text('{"description": "generated"}', encoding="utf-8")
    for index in range(count):
        text = f"# Document {index}\n\n" + f"token{index} alpha beta gamma " * 30
        (folder / "docs" / f"{index:04d}.md").write_text(text, encoding="utf-8")


@pytest.mark.parametrize("told", [False, True])
def test_bodies_over_taguru_s_cap_are_split(real_taguru: Start, tmp_path: Path, told: bool) -> None:
    server = real_taguru(env={"TAGURU_MAX_BODY_BYTES": "16384"})
    folder = tmp_path / "generated"
    _generated(folder, 120)
    env = {"TAGURU_MAX_BODY_BYTES": "16384"} if told else {}
    result = taguru_eval.load(folder, url=server.url, env=env)
    stores = result.writes.filter(result.writes["route"] == "POST /contexts/generated/sources")
    assert stores["items"].sum() == 120
    assert stores.height > 1
    assert stores["bytes"].max() <= 16384
    assert read_back(server.url, "generated") == expected_of(folder)


def test_a_source_alone_over_taguru_s_cap_names_its_file(
    real_taguru: Start, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = real_taguru(env={"TAGURU_MAX_BODY_BYTES": "16384"})
    folder = tmp_path / "generated"
    _generated(folder, 5)
    big = folder / "docs" / "0003.md"
    big.write_text("long " * 5000, encoding="utf-8")
    code, out, err = _load(capsys, str(folder), "--url", server.url)
    assert (code, out) == (1, "")
    line = _error(err)
    assert line.startswith(
        f"taguru: evaluate: {big}: POST /contexts/generated/sources answered 413 "
        "payload_too_large to a "
    )
    assert "raise the server's TAGURU_MAX_BODY_BYTES" in line
