"""taguru 0.9.7's outputs, byte for byte (ERRATA §3 rows 19–22, 25, 26).

Each test runs taguru's own ``evaluate`` and ``python -m taguru_eval`` on the
same live taguru 0.9.7 server, each in a folder of its own holding the same
inputs (so every relative path they print is the same), and compares exit
codes, stdout, stderr and evaluation.json as ``support.differential.assert_same``
does (numbers as spelt, so the sign of every zero counts).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import httpx
from support.differential import OUT, Outcome, assert_same, run_ours, run_taguru
from support.loopback import Request, Response, ScriptedServer
from support.paths import DATA
from support.taguru import RealTaguru, populate, require_taguru

from taguru_eval.inputs.config import KNOWN_KEYS


def _folders(tmp_path: Path, files: Mapping[str, str]) -> tuple[Path, Path]:
    """Two folders holding the same ``files`` (name -> text)."""
    folders = (tmp_path / "taguru", tmp_path / "ours")
    for folder in folders:
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
    return folders


def _both(tmp_path: Path, files: Mapping[str, str], args: list[str]) -> tuple[Outcome, Outcome]:
    """Both tools with ``args`` (``--out evaluation.json`` added) in folders of their
    own holding ``files``; asserts they did the same and returns what they did."""
    theirs_folder, ours_folder = _folders(tmp_path, files)
    theirs = run_taguru(require_taguru(), args, theirs_folder)
    ours = run_ours(args, ours_folder)
    assert_same(theirs, ours)
    return theirs, ours


def _case(case_id: str, **fields: object) -> str:
    return json.dumps({"case_id": case_id, **fields}, ensure_ascii=False)


def _failing_eval() -> str:
    """sake cases that fail on a real server: five passage searches over an empty
    window, four cases of three unresolved citations (one with no code), and a
    case whose expected sources are all missed (nDCG -0.0)."""
    lines = ['{"taguru_eval": 1, "name": "failures"}', ""]
    for index in range(5):
        window = {"since": 200, "until": 100 - index}
        source = {"source": "corpus/brewery.md", "relevance": 1}
        lines += [_case(f"window-{index}", query="sake rice polishing", options=window,
                        expected_sources=[source]), ""]  # fmt: skip
    for index in range(4):
        citations = [
            {"source": "nope.md", "paragraph": index},
            {"source": "corpus/brewery.md", "paragraph": 900 + index},
            {"source": "x" * 1100, "paragraph": 0},
        ]
        lines.append(_case(f"cite-{index}", query="koji", expected_citations=citations))
    missed = {"source": "corpus/brewery.md", "paragraphs": [999], "relevance": 2}
    lines.append(_case("missed", query="koji", expected_sources=[missed]))
    return "\n".join(lines) + "\n"


def test_failed_cases_wrote_line_and_negative_zero(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """Rows 20, 21 and 25: the failed cases by lane, capped at three, the new
    ``wrote`` line, and an all-missed nDCG written, averaged and gated as -0.0."""
    server = real_taguru()
    populate(server.url, DATA / "sake")
    # A bound spelt so that taguru reads it with two roundings (ERRATA row 24): its
    # value reaches evaluation.json's violations.
    thresholds = (
        '{"taguru_evaluate_thresholds": 1, "aggregate": {"recall.ndcg": {"min": 0.5}, '
        '"recall.recall_at_k": {"max": -0.9134015924715543}}, '
        '"cases": {"default": {"recall.ndcg": {"min": 0.25}}}}'
    )
    files = {"eval.jsonl": _failing_eval(), "thresholds.json": thresholds}
    args = ["--eval", "eval.jsonl", "--context", "sake", "--url", server.url]

    theirs, ours = _both(tmp_path / "plain", files, args)
    assert theirs.exit_code == 0
    lines = theirs.stdout.splitlines()
    assert lines[2].startswith("    passage failed — case 'window-0': ")
    assert "    ... and 2 more passage failure(s) (every one is in evaluation.json)" in lines
    assert "    ... and 9 more citation failure(s) (every one is in evaluation.json)" in lines
    assert any(": no code: " in line for line in lines if "citation failed" in line)
    assert lines[-1].startswith(f"  wrote {OUT} — per-case failures under cases[].passage.message")
    [recall] = [line for line in lines if line.startswith("  recall over")]
    assert recall.endswith("mean nDCG -0.000")
    assert ours.artifact is not None and '"ndcg": -0.0' in ours.artifact

    theirs, ours = _both(tmp_path / "gated", files, [*args, "--thresholds", "thresholds.json"])
    assert theirs.exit_code == 3
    assert "-0.000000 < min 0.500000" in theirs.stdout
    assert "-0.000000 < min 0.250000" in theirs.stdout
    assert "0.000000 > max -0.913402" in theirs.stdout
    assert ours.artifact is not None and '"threshold": -0.9134015924715544' in ours.artifact


def test_an_out_of_range_limit_names_the_file_and_physical_line(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """Row 19: the file as given and the case's line, blank lines counted; the
    first offending case; a problem later in the file still wins (it is loaded
    first)."""
    server = real_taguru()
    header = '{"taguru_eval": 1}'
    limits = "\n".join(
        [
            "",
            header,
            "",
            _case("fine", query="q", options={"limit": 10}),
            "",
            _case("zero", query="q", options={"limit": 0}),
            _case("huge", query="q", options={"limit": 1001}),
        ]
    )
    later = "\n".join(
        [header, _case("zero", query="q", options={"limit": 0}), _case("zero", query="again")]
    )
    files = {"limits.jsonl": limits + "\n", "later.jsonl": later + "\n"}
    expected = {
        "limits.jsonl": "taguru: evaluate: ./limits.jsonl: line 6: case 'zero': "
        "options.limit: must be 1..=1000, got 0\n",
        "later.jsonl": "taguru: evaluate: ./later.jsonl: line 3: ",
    }
    for name, stderr in expected.items():
        args = ["--eval", f"./{name}", "--context", "sake", "--url", server.url]
        theirs, _ = _both(tmp_path / name, files, args)
        assert (theirs.exit_code, theirs.stdout) == (2, "")
        assert theirs.stderr.startswith(stderr)
        assert ("options.limit" in theirs.stderr) is (name == "limits.jsonl")


def test_every_known_config_key_is_quiet_and_an_unknown_one_is_flagged(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """Row 22: a config file naming each of the 73 keys taguru 0.9.7 knows (the
    extraction keys new in 0.9.4–0.9.7 among them) earns no "typo?" note; a
    misspelt one does, from both tools alike, on a run that then completes."""
    server = real_taguru()
    populate(server.url, DATA / "sake")
    assert len(KNOWN_KEYS) == 73
    entries = [f"{key}=1" for key in sorted(KNOWN_KEYS)]
    entries += ["TAGURU_EXTRACT_REDACTT=1", "TAGURU_EXTRACT_CANDIDATE=5", "NOT_OURS=1"]
    files = {
        "eval.jsonl": (DATA / "sake" / "eval.jsonl").read_text(encoding="utf-8"),
        "taguru.env": "\n".join(entries) + "\n",
    }
    args = ["--eval", "eval.jsonl", "--context", "sake", "--url", server.url,
            "--config", "taguru.env"]  # fmt: skip
    theirs, _ = _both(tmp_path, files, args)
    assert theirs.exit_code == 0
    flagged = [line for line in theirs.stderr.splitlines() if line.endswith("(typo?)")]
    assert flagged == [
        "taguru: config: TAGURU_EXTRACT_REDACTT is not a variable taguru reads (typo?)",
        "taguru: config: TAGURU_EXTRACT_CANDIDATE is not a variable taguru reads (typo?)",
    ]


def _reporting(version: str, upstream: str) -> Callable[[Request], Awaitable[Response]]:
    """A handler relaying every request to ``upstream`` (over one client, made in
    the server's own event loop), except that ``/health`` reports ``version``."""
    clients: list[httpx.AsyncClient] = []

    async def handle(request: Request) -> Response:
        if request.path == "/health":
            return Response.of_json(200, {"status": "ok", "version": version})
        if not clients:
            clients.append(httpx.AsyncClient(base_url=upstream, timeout=60))
        answer = await clients[0].request(
            request.method,
            request.target,
            content=request.body,
            headers={"content-type": request.headers.get("content-type", "")},
        )
        return Response(answer.status_code, answer.content, {"Content-Type": "application/json"})

    return handle


def test_the_skew_probe_speaks_for_097(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """Row 26: no warning against taguru 0.9.7 itself; against a server that
    reports another minor version, the warning names 0.9.7 as the CLI's."""
    server = real_taguru()
    populate(server.url, DATA / "sake")
    files = {"eval.jsonl": (DATA / "sake" / "eval.jsonl").read_text(encoding="utf-8")}
    args = ["--eval", "eval.jsonl", "--context", "sake"]
    theirs, _ = _both(tmp_path / "same", files, [*args, "--url", server.url])
    assert "warning" not in theirs.stderr
    with ScriptedServer(_reporting("0.8.4", server.url)) as url:
        theirs, _ = _both(tmp_path / "older", files, [*args, "--url", url])
    assert theirs.exit_code == 0
    assert (
        f"taguru: evaluate: warning: this CLI is 0.9.7 but the server at {url} runs 0.8.4 — "
        "minor versions differ"
    ) in theirs.stderr


def test_the_demo_data_runs_alike(real_taguru: Callable[..., RealTaguru], tmp_path: Path) -> None:
    """Both bundled data sets, baseline and --assembly: the summary (no failure
    lines where nothing failed) and the artifact are taguru's."""
    server = real_taguru()
    for name in ("sake", "handbook"):
        populate(server.url, DATA / name)
        files = {"eval.jsonl": (DATA / name / "eval.jsonl").read_text(encoding="utf-8")}
        for mode in ([], ["--assembly", "--max-tokens", "300"]):
            args = ["--eval", "eval.jsonl", "--context", name, "--url", server.url, *mode]
            theirs, _ = _both(tmp_path / f"{name}{len(mode)}", files, args)
            assert theirs.exit_code == 0
            assert "  wrote evaluation.json — per-case failures under " in theirs.stdout
            assert " failed — case " not in theirs.stdout


def test_must_refuse_failures_stay_out_of_tagurus_lines(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """Row 20's lines walk ``cases[]`` only: with ``--must-refuse`` (a flag taguru
    has not) and a probe that fails, our stdout is taguru's plus the project's own
    must-refuse lines, which come after taguru's lines and before ``wrote``."""
    server = real_taguru()
    populate(server.url, DATA / "sake")
    refusals = (DATA / "sake" / "must_refuse.jsonl").read_text(encoding="utf-8").rstrip("\n")
    refusals += "\n" + _case(
        "mr-window", query="sake", kind="adjacent", options={"since": 9, "until": 1}
    )
    files = {"eval.jsonl": _failing_eval(), "must_refuse.jsonl": refusals + "\n"}
    args = ["--eval", "eval.jsonl", "--context", "sake", "--url", server.url]
    theirs_folder, ours_folder = _folders(tmp_path, files)
    theirs = run_taguru(require_taguru(), args, theirs_folder)
    ours = run_ours([*args, "--must-refuse", "must_refuse.jsonl"], ours_folder)
    assert (ours.exit_code, theirs.exit_code) == (0, 0)
    own = ("  must-refuse over ", "  answerability over ", "    must-refuse failed — ")
    ours_lines = ours.stdout.splitlines()
    assert [line for line in ours_lines if not line.startswith(own)] == theirs.stdout.splitlines()
    added = [index for index, line in enumerate(ours_lines) if line.startswith(own)]
    assert added == list(range(len(ours_lines) - 1 - len(added), len(ours_lines) - 1))
    assert ours_lines[added[-1]] == (
        "    must-refuse failed — case 'mr-window': request_failed: "
        f"{server.url}/contexts/sake/sources/search answered 400: since 9 is not before "
        "until 1 — the window is half-open [since, until) and this one selects nothing"
    )
    assert "mr-window" not in "\n".join(ours_lines[: added[0]])


def test_a_floor_is_read_as_taguru_reads_it(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """Row 24 in eval.jsonl: taguru reads this floor as 1.0 (two roundings) and runs
    the case; read as its nearest double it would be 1.0000001 and refused."""
    server = real_taguru()
    populate(server.url, DATA / "sake")
    case = _case("c", query="koji", options={"floor": "FLOOR"}).replace(
        '"FLOOR"', "1.0000000596046449"
    )
    args = ["--eval", "eval.jsonl", "--context", "sake", "--url", server.url]
    theirs, _ = _both(tmp_path, {"eval.jsonl": '{"taguru_eval": 1}\n' + case + "\n"}, args)
    assert theirs.exit_code == 0
