"""A token a server spells with JSON escapes is redacted in every output (issue 29).

Redaction of the raw body text only sees the token written plainly. A server
may write the same string as ``sk\\/live…`` or ``\\u0073\\u006b…``, which
decodes to the token itself, so the decoded strings are redacted once more.
A hostile server on loopback echoes the configured token as a hit's source, a
listed source, an evidence item's source and inside failure text, in every
spelling below (``\\/``, ``\\uXXXX`` in either case, mixed escapes, and the
token split between a plain and an escaped part at every position). Every
file a plain run, an ``--assembly`` run, ``report``, ``ingest``,
``export --trec`` and ``compare`` write (the stored artifact decompressed,
every Parquet table decoded) and everything they print is searched for it,
escaped or not.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from support.loopback import Request, Response, ScriptedServer, context_entry, envelope
from support.run import evidence_package, passage_item, run_args

from taguru_eval._base.redact import REDACTED, Redactor
from taguru_eval.cli.main import main
from taguru_eval.store_artifact import artifact_bytes, is_compressed

TOKEN = "sk/live+Q7hunter2pass/Zx="
CONTEXT = "ctx"
_SHORT = {"/": "\\/", '"': '\\"', "\\": "\\\\"}


def escaped(char: str, upper: bool = False) -> str:
    return f"\\u{ord(char):04X}" if upper else f"\\u{ord(char):04x}"


def mixed(text: str) -> str:
    ways: list[Callable[[str], str]] = [
        lambda c: c,
        lambda c: escaped(c, upper=True),
        lambda c: _SHORT.get(c, escaped(c)),
    ]
    return "".join(ways[index % 3](char) for index, char in enumerate(text))


def spellings(token: str) -> dict[str, str]:
    """JSON string contents (without quotes) that all decode to ``token``."""
    spelled = {
        "slash": token.replace("/", "\\/"),
        "u-lower": "".join(escaped(char) for char in token),
        "u-upper": "".join(escaped(char, upper=True) for char in token),
        "mixed": mixed(token),
    }
    for cut in range(1, len(token)):
        head, tail = token[:cut], token[cut:]
        spelled[f"plain-then-escaped-{cut}"] = head + "".join(escaped(c) for c in tail)
        spelled[f"escaped-then-plain-{cut}"] = "".join(escaped(c) for c in head) + tail
    for name, text in spelled.items():
        assert json.loads(f'"{text}"') == token, name
    return spelled


SPELLINGS = spellings(TOKEN)
QUERIES = {f"q-{index}": spelling for index, spelling in enumerate(SPELLINGS.values())}


def raw_json(document: object, spelling: str) -> bytes:
    """``document`` as JSON with every ``"@TOKEN@"`` string written as ``spelling``."""
    text = json.dumps(document, ensure_ascii=False).replace('"@TOKEN@"', f'"{spelling}"')
    return text.encode("utf-8")


def enveloped(result: object, spelling: str) -> Response:
    body = raw_json({"result": result, "status": "ok", "time": 0.0}, spelling)
    return Response(200, body, {"Content-Type": "application/json"})


def search_page() -> dict[str, object]:
    lanes = {"bm25": {"ran": True}, "vector": {"ran": False, "reason": "@TOKEN@"}}
    hits = [
        {"source": "@TOKEN@", "paragraph": 0, "score": 2.0, "text": "t", "lanes": {}},
        {"source": "a.md", "paragraph": 0, "score": 1.0, "text": "t", "lanes": {}},
    ]
    return {"plan": {"contexts": [{"context": CONTEXT, "lanes": lanes}]}, "hits": hits}


def hostile(request: Request) -> Response:
    """Enough to run; every answer spells the token with the escapes its query names."""
    path, body = request.path, request.json() or {}
    spelling = QUERIES.get(str(body.get("query", "")), SPELLINGS["slash"])
    if path == "/health":
        return Response.of_json(200, {"status": "ok", "version": "0.9.3"})
    if path == f"/contexts/{CONTEXT}":
        return envelope(context_entry(CONTEXT))
    if path.endswith("/embeddings"):
        return Response.of_json(404, {"status": "error", "error": "no embedder"})
    if path.endswith("/sources"):
        listed = [] if "after" in request.query else ["a.md", "@TOKEN@"]
        return enveloped({"sources": listed}, spelling)
    if path.endswith("/sources/search"):
        if body.get("query") == "q-text":  # not JSON: the raw text reaches a message
            return Response.of_text(200, f'{{"source": "{SPELLINGS["mixed"]}"')
        if body.get("query") == "q-500":
            text = f'{{"status": "error", "error": "bad key \\"{SPELLINGS["u-upper"]}\\""}}'
            return Response(500, text.encode(), {"Content-Type": "application/json"})
        return enveloped(search_page(), spelling)
    if path.endswith("/evidence"):
        items = [passage_item("@TOKEN@", 0, 1, context=CONTEXT), passage_item("a.md", 0, 2)]
        return enveloped(evidence_package(items), spelling)
    return Response.of_json(404, {"status": "error", "error": "not here"})


def write_eval(path: Path) -> Path:
    queries = [*QUERIES, "q-text", "q-500"]
    cases = [
        {"case_id": f"c{index}", "query": query, "expected_sources": [{"source": "a.md"}]}
        for index, query in enumerate(queries)
    ]
    lines = [json.dumps({"taguru_eval": 1, "name": "escaped"})]
    lines += [json.dumps(case) for case in cases]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_cli(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue() + err.getvalue()


_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)")


def unescaped(text: str) -> str:
    """``text`` with JSON escapes read, so an escaped token shows as the token."""

    def read(match: re.Match[str]) -> str:
        if match.group(1):
            return chr(int(match.group(1), 16))
        return {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(
            match.group(2), match.group(2)
        )

    return _JSON_ESCAPE.sub(read, text)


def every_output(root: Path) -> list[str]:
    """Every file under ``root`` (stored artifacts decompressed), every table decoded."""
    blobs = []
    for path in root.rglob("*"):
        if path.is_file():
            data = artifact_bytes(path) if is_compressed(path) else path.read_bytes()
            blobs.append(data.decode("latin-1"))
    blobs += [pl.read_parquet(path).write_ndjson() for path in root.rglob("*.parquet")]
    return blobs


def assert_no_token(blobs: list[str]) -> None:
    for blob in blobs:
        assert TOKEN not in blob
        assert TOKEN not in unescaped(blob)


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAGURU_API_TOKEN", TOKEN)
    for name in ("TAGURU_API_TOKENS", "TAGURU_ADDR", "TAGURU_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_an_escaped_token_reaches_no_output(token: None, tmp_path: Path) -> None:
    eval_path = write_eval(tmp_path / "eval.jsonl")
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(
        '{"taguru_evaluate_thresholds": 1, "aggregate": {"recall.mrr": {"min": 0.99}}}',
        encoding="utf-8",
    )
    store = tmp_path / "runs"
    printed: list[str] = []
    server = ScriptedServer(hostile)
    with server as url:
        for name, more in (("plain", []), ("assembly", ["--assembly"])):
            code, text = run_cli(
                ["run", *run_args(eval_path, CONTEXT, url, *more),
                 "--out", str(tmp_path / f"{name}.json"), "--thresholds", str(thresholds),
                 "--junit", str(tmp_path / f"{name}.xml"),
                 "--summary", str(tmp_path / f"{name}.md"), "--store", str(store)]
            )  # fmt: skip
            assert code == 3, text
            printed.append(text)
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {TOKEN}"}

    plain = json.loads((tmp_path / "plain.json").read_text(encoding="utf-8"))
    cases = plain["cases"]
    # Each spelling decoded to the token, and each became the marker, nothing else.
    assert [case["passage"]["hits"][0]["source"] for case in cases[: len(QUERIES)]] == (
        [REDACTED] * len(QUERIES)
    )
    assert all(REDACTED in json.dumps(case["passage"]) for case in cases[len(QUERIES) :])
    assembly = json.loads((tmp_path / "assembly.json").read_text(encoding="utf-8"))
    assert REDACTED in json.dumps(assembly["cases"][0])

    runs = sorted(store.glob("context=*/run=*"))
    assert len(runs) == 2
    commands = [
        ["report", str(runs[0]), "-o", str(tmp_path / "report.html")],
        ["ingest", str(tmp_path / "plain.json"), "--store", str(tmp_path / "ingested")],
        ["export", str(runs[1]), "--trec", str(tmp_path / "trec")],
        ["export", str(tmp_path / "plain.json"), "--trec", str(tmp_path / "trec-plain")],
        ["compare", str(tmp_path / "plain.json"), str(tmp_path / "assembly.json"),
         "--out", str(tmp_path / "changes.jsonl")],
    ]  # fmt: skip
    for command in commands:
        code, text = run_cli(command)
        assert code == 0, (command, text)
        printed.append(text)
    assert (tmp_path / "changes.jsonl").is_file()
    assert REDACTED in (tmp_path / "trec-plain" / "run.trec").read_text(encoding="utf-8")

    assert_no_token([*printed, *every_output(tmp_path)])


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_the_redactor_reads_every_spelling(name: str) -> None:
    redactor = Redactor([TOKEN])
    spelling = SPELLINGS[name]
    raw = f'{{"{spelling}": ["{spelling}", {{"k": "x{spelling}y"}}], "n": 1}}'
    assert redactor.may_hide_escaped(raw)
    decoded = redactor.payload(json.loads(raw))
    assert decoded == {REDACTED: [REDACTED, {"k": f"x{REDACTED}y"}], "n": 1}
    # A message carrying the raw text (a body that did not decode) is cut the same way.
    assert redactor.message(f"not a taguru response: {raw}") == (
        f'not a taguru response: {{"{REDACTED}": ["{REDACTED}", {{"k": "x{REDACTED}y"}}], "n": 1}}'
    )


def test_the_decoded_walk_is_skipped_when_no_escape_can_hide_a_token() -> None:
    plain = Redactor(["tok-plain-123456"])
    assert not plain.may_hide_escaped('{"a": "b\\/c"}')  # no secret has a '/'
    assert plain.may_hide_escaped('{"a": "\\u0074ok"}')
    assert not plain.may_hide_escaped('{"a": "tok-plain-123456"}')  # body() sees it
    assert not Redactor().may_hide_escaped('{"a": "\\u0074"}')
    slashed = Redactor([TOKEN])
    assert slashed.may_hide_escaped('{"a": "b\\/c"}')


def test_a_token_beyond_the_bmp_is_read_from_a_surrogate_pair() -> None:
    secret = "key-\U0001f511-value"
    raw = json.dumps({"s": secret})  # ensure_ascii: the emoji as \\ud83d\\udd11
    assert "\\ud83d\\udd11" in raw
    redactor = Redactor([secret])
    assert redactor.payload(json.loads(raw)) == {"s": REDACTED}
    assert redactor.message(raw) == f'{{"s": "{REDACTED}"}}'
    upper_hex = raw.replace("\\ud83d\\udd11", "\\uD83D\\uDD11")
    assert redactor.message(upper_hex) == f'{{"s": "{REDACTED}"}}'
    assert redactor.message(raw.replace("key", "KEY")) == raw.replace("key", "KEY")
