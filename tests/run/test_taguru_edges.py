"""taguru's client edges and one-line messages (issue 12, items 3, 7 and 10).

A lone surrogate escape in a server body, control characters in eval.jsonl,
an unknown ``TAGURU_*`` key in a config file, a 5,000-digit integer and an OS
error in the run store: each behaves as taguru does and prints one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from support.loopback import Request, Response, ScriptedServer, context_entry, envelope
from support.paths import PROJECT_ROOT
from support.run import run_args

from taguru_eval.cli.main import main
from taguru_eval.errors import InputError, RunError
from taguru_eval.inputs.config import apply_config_file
from taguru_eval.inputs.dataset import load_eval_text
from taguru_eval.store import RunOrigin, write_run

ENTRY = context_entry("x")
LONE = b"\\ud800"  # the six characters of a JSON escape naming half a surrogate pair


def surrogate_server(request: Request) -> Response:
    if request.path == "/health":
        return Response.of_json(200, {"status": "ok", "version": "0.9.3"})
    if request.path.endswith("/sources"):
        return envelope({"sources": [] if "after" in request.query else ["a.md"]})
    if request.path.endswith("/sources/search"):
        body = b'{"result": {"hits": [{"source": "' + LONE + b'", "paragraph": 0}]}}'
        return Response(200, body, {"Content-Type": "application/json"})
    if request.path.endswith("/resolve"):
        body = b'{"status": "error", "error": "bad ' + LONE + b' cue"}'
        return Response(500, body, {"Content-Type": "application/json"})
    if request.path.endswith("/citations"):
        body = b'{"result": {"source": "a.md", "text": "' + LONE + b'"}}'
        return Response(200, body, {"Content-Type": "application/json"})
    return envelope(ENTRY)


def test_a_lone_surrogate_in_a_body_is_a_failed_lane_not_a_crash(tmp_path: Path) -> None:
    eval_path = tmp_path / "eval.jsonl"
    case = {
        "case_id": "s",
        "query": "q",
        "expected_sources": [{"source": "a.md"}],
        "expected_concepts": ["c"],
        "expected_citations": [{"source": "a.md", "paragraph": 0, "quote": "x"}],
    }
    eval_path.write_text('{"taguru_eval": 1}\n' + json.dumps(case) + "\n", encoding="utf-8")
    out = tmp_path / "evaluation.json"
    err = io.StringIO()
    with ScriptedServer(surrogate_server) as url, contextlib.redirect_stderr(err):
        code = main(
            ["run", *run_args(eval_path, "x", url), "--out", str(out),
             "--store", str(tmp_path / "runs")]
        )  # fmt: skip
    assert code == 0, err.getvalue()
    block = json.loads(out.read_text(encoding="utf-8"))["cases"][0]
    # serde refuses the escape, so the whole body is "not a taguru response" …
    assert block["passage"] == {
        "outcome": "failed",
        "message": f"{url}/contexts/x/sources/search: not a taguru response: "
        '{"result": {"hits": [{"source": "\\ud800", "paragraph": 0}]}}',
        "latency_ms": block["passage"]["latency_ms"],
    }
    # … and a refusal's message is the body itself, escape and all.
    assert block["structural"]["cues"][0]["error"] == (
        f'{url}/contexts/x/resolve answered 500: {{"status": "error", "error": "bad \\ud800 cue"}}'
    )
    assert block["citations"]["checks"][0]["outcome"] == "unresolved"
    stored = pl.read_parquet(next((tmp_path / "runs").rglob("calls.parquet")))
    assert stored.filter(pl.col("outcome") == "failed").height == 1


def run_subprocess(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taguru_eval", *args],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


CONTROL = "a\nb\rc\x1b[2J\x1b]0;pwned\x07d\u2028e"
ESCAPED = "a\\nb\\rc\\u{1b}[2J\\u{1b}]0;pwned\\u{7}d\\u{2028}e"


@pytest.mark.parametrize(
    ("case_line", "expected"),
    [
        (
            json.dumps({"case_id": CONTROL, "query": "q", "options": {"limit": 0}}),
            f"taguru: evaluate: eval.jsonl: line 2: case '{ESCAPED}': options.limit: "
            "must be 1..=1000, got 0",
        ),
        (
            json.dumps({"case_id": "c", "query": "q", CONTROL: 1}),
            f"unknown field `{ESCAPED}`",
        ),
        (
            json.dumps({"case_id": CONTROL, "query": "q"})
            + "\n"
            + json.dumps({"case_id": CONTROL, "query": "q"}),
            ESCAPED,
        ),
    ],
    ids=["case-id-in-limit-error", "unknown-key", "duplicate-case-id"],
)
def test_control_characters_in_eval_jsonl_keep_stderr_to_one_line(
    tmp_path: Path, case_line: str, expected: str
) -> None:
    (tmp_path / "eval.jsonl").write_text(
        '{"taguru_eval": 1}\n' + case_line + "\n", encoding="utf-8"
    )
    result = run_subprocess(
        tmp_path, "--eval", "eval.jsonl", "--context", "x", "--url", "http://127.0.0.1:9"
    )
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.split("\n")[:-1]  # exactly one line, newline-terminated
    assert "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert expected in line


def test_an_unknown_taguru_key_in_a_config_file_is_flagged_as_a_typo(tmp_path: Path) -> None:
    path = tmp_path / "taguru.env"
    path.write_text(
        "TAGURU_ADRR=h:1\nTAGURU_API_TOKEN=t\nHOME_ISH=1\nTAGURU_\x1b[2JX=1\nTAGURU_ADRR=h:2\n",
        encoding="utf-8",
    )
    warnings: list[str] = []
    merged = apply_config_file(str(path), {}, warnings.append)
    assert merged["TAGURU_ADRR"] == "h:2"
    assert warnings == [
        "taguru: config: TAGURU_ADRR is not a variable taguru reads (typo?)",
        "taguru: config: TAGURU_\\u{1b}[2JX is not a variable taguru reads (typo?)",
        "taguru: config: TAGURU_ADRR is not a variable taguru reads (typo?)",
        "taguru: config: TAGURU_ADRR appears more than once in the file; the last value wins",
    ]


def test_a_5000_digit_integer_gets_serdes_words_not_pythons_advice() -> None:
    text = '{"taguru_eval": 1}\n{"case_id": "c", "query": "q", "options": {"limit": ' + (
        "7" * 5000 + "}}\n"
    )
    with pytest.raises(InputError) as caught:
        load_eval_text(text, "eval.jsonl")
    assert caught.value.message == (
        f"eval.jsonl: line 2: not JSON: number out of range: {'7' * 40}…"
    )
    assert "set_int_max_str_digits" not in caught.value.message


def test_an_os_error_in_the_run_store_reads_like_the_rest(tmp_path: Path) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("not a directory", encoding="utf-8")
    with pytest.raises(RunError) as caught:
        write_run(
            blocker, "ctx", "20260101T000000.000000Z-aaaaaa", {}, "{}", origin=RunOrigin("run")
        )
    assert caught.value.message.endswith(": Not a directory (os error 20)")
    assert "[Errno" not in caught.value.message


def test_taguru_negative_zero_survives_ingest_as_written(tmp_path: Path) -> None:
    """Nothing read back is re-scored: taguru's -0.0 nDCG stays -0.0 in the store."""
    from support.documents import evaluation_document, write_document

    from taguru_eval.analyst.ingest import ingest

    document = evaluation_document(step=1)
    document["cases"][0]["recall"]["ndcg"] = -0.0
    path = write_document(tmp_path / "evaluation.json", document)
    assert '"ndcg": -0.0' in path.read_text(encoding="utf-8")
    stored = ingest(path, tmp_path / "runs").path
    ndcg = pl.read_parquet(stored / "cases.parquet")["ndcg"][0]
    assert ndcg == 0.0 and math.copysign(1.0, ndcg) == -1.0
