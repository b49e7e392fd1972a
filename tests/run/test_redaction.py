"""Server text never carries a secret into any output (issue 12, item 1).

A hostile server on loopback echoes the ``Authorization`` header it received,
the other configured token and a URL with userinfo into every kind of answer
(JSON errors, a 404 with a code, plain-text 502s, plan reasons, a parse
failure, a hit's source name, the version probe). Every file a run, a report
and an ingest write, and every line they print, is then searched for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from support.loopback import Request, Response, ScriptedServer, context_entry, envelope
from support.run import run_args

from taguru_eval._base.redact import REDACTED, Redactor
from taguru_eval.cli.main import main

TOKEN = "tok-9f3c2a71-canary"
OTHER = "ring-55aa-second"
PASSWORD = "hunter2-userinfo"
SECRETS = (TOKEN, OTHER, PASSWORD)
CONTEXT = "ctx"

ENTRY = context_entry(CONTEXT)


def echoed(request: Request) -> str:
    """What a careless server says back: the header it got, a peer's key, a userinfo URL."""
    auth = request.headers.get("authorization", "")
    return f"rejected credentials {auth} (keys: ci:{OTHER}) via http://admin:{PASSWORD}@up:9/"


def write_eval(path: Path) -> Path:
    cases = [
        {
            "case_id": "c500",
            "query": "q-500",
            "cues": ["zzz"],
            "expected_sources": [{"source": "a.md", "relevance": 1}],
            "expected_concepts": ["x"],
            "expected_citations": [{"source": "a.md", "paragraph": 0}],
        },
        {
            "case_id": "ctyped",
            "query": "q-typed",
            "cues": ["nolabel"],
            "expected_sources": [{"source": "a.md", "relevance": 2}],
            "expected_labels": ["y"],
            "expected_associations": [{"subject": "subj", "label": "lab", "object": "obj"}],
        },
        {"case_id": "ctext", "query": "q-text", "expected_sources": [{"source": "b.md"}]},
        {"case_id": "chit", "query": "q-hit", "expected_sources": [{"source": "b.md"}]},
    ]
    lines = [json.dumps({"taguru_eval": 1, "name": "hostile"})]
    lines += [json.dumps(case) for case in cases]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def typed_page(request: Request, source: str) -> Response:
    lane = {"ran": False, "reason": f"lane off: {echoed(request)}"}
    plan = {"context": CONTEXT, "lanes": {"bm25": {"ran": True}, "vector": lane}}
    page = {
        "plan": {"contexts": [plan]},
        "hits": [
            {"source": source, "paragraph": 0, "score": 1.0, "text": "t", "lanes": {}},
        ],
    }
    return envelope(page)


def lane_echo(request: Request) -> Response:
    """Preflight answers enough to run; every lane echoes secrets somewhere."""
    path, body = request.path, request.json() or {}
    if path == "/health":
        return Response.of_json(200, {"status": "ok", "version": f"0.5.0 {echoed(request)}"})
    if path == f"/contexts/{CONTEXT}":
        return envelope(ENTRY)
    if path.endswith("/embeddings"):
        return Response.of_json(500, {"status": "error", "error": echoed(request)})
    if path.endswith("/sources"):
        return envelope({"sources": [] if "after" in request.query else ["a.md", "b.md"]})
    if path.endswith("/sources/search"):
        query = body.get("query")
        if query == "q-500":
            return Response.of_json(500, {"status": "error", "error": echoed(request)})
        if query == "q-text":
            return Response.of_text(200, f"gateway says {echoed(request)}")
        # The token itself as a hit's source name: only the exact token is replaced.
        source = request.headers.get("authorization", "").removeprefix("Bearer ")
        return typed_page(request, source if query == "q-hit" else "a.md")
    if path.endswith("/resolve"):
        if body.get("cue") in ("subj", "obj"):
            return envelope([{"name": body["cue"], "score": 1.0, "tier": "lexical"}])
        return Response.of_json(
            404, {"status": "error", "code": "no_concept", "error": echoed(request)}
        )
    if path.endswith("/resolve_label"):
        if body.get("cue") == "lab":
            return envelope([{"name": "lab", "score": 1.0, "tier": "lexical"}])
        return Response.of_text(502, f"bad gateway\n{echoed(request)}\n")
    if path.endswith("/query"):
        return envelope({"total": request.headers.get("authorization", ""), "matches": []})
    if path.endswith("/citations"):
        return Response.of_json(
            404, {"status": "error", "code": "no_source", "error": echoed(request)}
        )
    return Response.of_json(404, {"status": "error", "error": echoed(request)})


def run_cli(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue() + err.getvalue()


def every_output(root: Path) -> list[str]:
    """Every file under ``root`` as text (raw bytes), and every Parquet table decoded."""
    blobs = [path.read_bytes().decode("latin-1") for path in root.rglob("*") if path.is_file()]
    blobs += [pl.read_parquet(path).write_ndjson() for path in root.rglob("*.parquet")]
    return blobs


def assert_no_secret(blobs: list[str]) -> None:
    for blob in blobs:
        for secret in SECRETS:
            assert secret not in blob


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAGURU_API_TOKEN", TOKEN)
    monkeypatch.setenv("TAGURU_API_TOKENS", f"ci:{OTHER}")
    for name in ("TAGURU_ADDR", "TAGURU_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_a_run_report_and_ingest_never_carry_an_echoed_secret(tokens: None, tmp_path: Path) -> None:
    eval_path = write_eval(tmp_path / "eval.jsonl")
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(
        '{"taguru_evaluate_thresholds": 1, "aggregate": {"recall.recall_at_k": {"min": 0.99}}}',
        encoding="utf-8",
    )
    out = tmp_path / "evaluation.json"
    server = ScriptedServer(lane_echo)
    with server as url:
        code, printed = run_cli(
            ["run", *run_args(eval_path, CONTEXT, url),
             "--out", str(out), "--thresholds", str(thresholds),
             "--store", str(tmp_path / "runs")]
        )  # fmt: skip
    assert code == 3, printed
    # The server really was sent the token and really echoed it everywhere.
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {TOKEN}"}
    doc = json.loads(out.read_text(encoding="utf-8"))
    text = out.read_text(encoding="utf-8")
    assert text.count(REDACTED) >= 8
    assert "warning: this CLI is 0.9.7" in printed and REDACTED in printed
    assert doc["cases"][3]["passage"]["hits"][0]["source"] == REDACTED
    (run_dir,) = (tmp_path / "runs").glob("context=*/run=*")

    report_code, report_printed = run_cli(["report", str(run_dir), "-o", str(tmp_path / "r.html")])
    assert report_code == 0, report_printed
    assert "c500" in (tmp_path / "r.html").read_text(encoding="utf-8")
    ingest_code, ingest_printed = run_cli(
        ["ingest", str(out), "--store", str(tmp_path / "ingested")]
    )
    assert ingest_code == 0, ingest_printed

    assert_no_secret([printed, report_printed, ingest_printed, *every_output(tmp_path)])


@pytest.mark.parametrize(
    "answer",
    [
        lambda r: Response.of_json(500, {"status": "error", "error": echoed(r)}),
        lambda r: Response.of_json(404, {"status": "error", "code": "no_x", "error": echoed(r)}),
        lambda r: Response.of_text(502, f"<html>{echoed(r)}</html>"),
    ],
    ids=["500-json", "404-json", "502-text"],
)
def test_a_server_refusing_everything_never_puts_a_secret_on_stderr(
    tokens: None, tmp_path: Path, answer: Any
) -> None:
    eval_path = write_eval(tmp_path / "eval.jsonl")
    with ScriptedServer(answer) as url:
        code, printed = run_cli(
            ["run", *run_args(eval_path, CONTEXT, url),
             "--out", str(tmp_path / "evaluation.json"), "--no-store"]
        )  # fmt: skip
    assert code == 1
    assert f"{url}/health answered" in printed and REDACTED in printed
    assert len(printed.strip().splitlines()) == 2  # the target line, then one error line
    assert_no_secret([printed, *every_output(tmp_path)])


def test_the_redactor_replaces_only_credentials() -> None:
    redactor = Redactor([TOKEN, "short", None])
    assert redactor.body(f"x{TOKEN}y Bearer abc") == f"x{REDACTED}y Bearer abc"
    assert redactor.message("Authorization: Bearer abc.def-1") == (
        f"Authorization: Bearer {REDACTED}"
    )
    assert redactor.message("Basic dXNlcjpwYXNz, then") == f"Basic {REDACTED}, then"
    assert redactor.message("via https://u:p@h:1/x and mailto:a@b") == (
        f"via https://{REDACTED}@h:1/x and mailto:a@b"
    )
    # taguru's own 401 text stays readable; a too-short token is not searched for.
    unauthorized = "missing or invalid bearer token (send Authorization: Bearer <token>)"
    assert redactor.message(unauthorized) == unauthorized
    assert redactor.message("a short word") == "a short word"


def test_the_client_hands_lanes_server_prose_already_redacted() -> None:
    """A plan reason reaches the lane redacted whichever way the client read it (straight
    from the bytes, or parsed then converted by ``payload_as``); a payload that does not
    fit is the client's own failure, its message redacted too."""
    from taguru_eval.run.http import CallFailure, Reply, TaguruClient
    from taguru_eval.run.lanes.passage import _SearchPage

    said = f"lane off: Bearer abc.def via http://admin:{PASSWORD}@up:9/"
    lane = {"ran": False, "reason": said}
    page = {
        "plan": {"contexts": [{"context": CONTEXT, "lanes": {"bm25": lane, "vector": lane}}]},
        "hits": [],
    }
    body = json.dumps({"result": page}).encode()
    client = TaguruClient("http://prose.test", transport=httpx.MockTransport(
        lambda request: httpx.Response(200, content=body)
    ))  # fmt: skip
    expected = f"lane off: Bearer {REDACTED} via http://{REDACTED}@up:9/"
    typed = asyncio.run(client.post(["x"], {}, into=_SearchPage))
    generic = asyncio.run(client.post(["x"], {}))
    assert typed.typed and not generic.typed
    for reply in (typed, generic):
        decoded = client.payload_as(reply, _SearchPage, "search")
        reasons = {
            decoded.plan.contexts[0].lanes.vector.reason,
            decoded.plan.contexts[0].lanes.bm25.reason,
        }
        assert reasons == {expected}
    unfit = Reply(payload={**page, "hits": [{"source": said}]}, status=200, latency_ms=3, url="")
    with pytest.raises(CallFailure) as refused:
        client.payload_as(unfit, _SearchPage, "search")
    assert refused.value.message.startswith("search response did not parse: hits[0]")
    assert (refused.value.status, refused.value.latency_ms) == (200, 3)
    lane_reason = {**lane, "reason": 7}
    wrong = {
        **page,
        "plan": {
            "contexts": [{"context": CONTEXT, "lanes": {"bm25": lane_reason, "vector": lane}}]
        },
    }
    with pytest.raises(CallFailure) as not_text:
        client.payload_as(
            Reply(payload=wrong, status=200, latency_ms=0, url=""), _SearchPage, "search"
        )
    assert not_text.value.message == (
        "search response did not parse: plan.contexts[0].lanes.bm25.reason: "
        "invalid type: integer `7`, expected a string"
    )
