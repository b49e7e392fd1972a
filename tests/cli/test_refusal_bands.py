"""``refusal-bands`` (ABSTENTION.md §3.12): the two bands, the gap or the overlap; never a gate."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from support.loopback import Request, Response, ScriptedServer, context_entry, envelope
from support.paths import DATA

from taguru_eval.cli.refusal_bands import main
from taguru_eval.run.lanes.bands import SWEEP_HITS_SCHEMA
from taguru_eval.score.bands import bands
from taguru_eval.tables import EXPECTED
from taguru_refserver.serve import running_server


def hits(rows: list[tuple[str, int, int, str, int, float | None]]) -> pl.DataFrame:
    """(population, case_index, rank, source, paragraph, vector cosine) rows."""
    return pl.DataFrame(
        [
            {
                "population": population,
                "case_index": index,
                "case_id": f"{population}-{index}",
                "rank": rank,
                "source": source,
                "paragraph": paragraph,
                "vector_score": cosine,
            }
            for population, index, rank, source, paragraph, cosine in rows
        ],
        schema=SWEEP_HITS_SCHEMA,
    )


def expected(rows: list[tuple[int, str, int | None, int]]) -> pl.DataFrame:
    """(case_index, source, paragraph or None, relevance) expected-source rows."""
    return pl.DataFrame(
        [
            {
                "case_id": f"eval-{index}",
                "case_index": index,
                "kind": "source",
                "source": source,
                "paragraph": paragraph,
                "relevance": relevance,
            }
            for index, source, paragraph, relevance in rows
        ],
        schema={
            name: EXPECTED[name]
            for name in ("case_id", "case_index", "kind", "source", "paragraph", "relevance")
        },
    )


def searched(count: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"case_index": list(range(count)), "case_id": [f"eval-{i}" for i in range(count)]},
        schema={"case_index": pl.Int32, "case_id": pl.String},
    )


def test_the_upper_band_reads_the_best_ranked_expected_hit() -> None:
    frame = hits(
        [
            ("eval", 0, 0, "a.md", 1, 0.9),  # not expected (wrong paragraph)
            ("eval", 0, 1, "a.md", 2, 0.6),  # the best-ranked expected hit
            ("eval", 0, 2, "b.md", 0, 0.8),  # expected too, but ranked lower
            ("eval", 1, 0, "c.md", 5, None),  # expected, no vector lane even at the sweep
            ("must_refuse", 0, 0, "a.md", 1, 0.3),
            ("must_refuse", 0, 1, "b.md", 0, 0.4),
            ("must_refuse", 1, 0, "a.md", 1, None),
        ]
    )
    wanted = expected(
        [(0, "a.md", 2, 3), (0, "b.md", None, 1), (1, "c.md", None, 2), (2, "z.md", None, 1)]
    )
    found = bands(frame, wanted, searched(3), must_refuse=2)
    assert found.upper.to_dicts() == [{"case_id": "eval-0", "cosine": pytest.approx(0.6)}]
    assert found.lower.to_dicts() == [{"case_id": "must_refuse-0", "cosine": pytest.approx(0.4)}]
    assert (found.below_sweep, found.not_served) == (("eval-1",), ("eval-2",))
    assert found.gap == pytest.approx(0.2)
    assert found.suggestion == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("upper", "lower", "gap", "suggestion"),
    [
        (0.61, 0.40, 0.21, 0.51),  # midpoint 0.505 rounds inside the gap
        (0.4098, 0.4, 0.0098, 0.4049),  # 0.40 is not inside (0.4, 0.4098): keep the midpoint
        (0.30, 0.45, -0.15, None),  # an overlap suggests nothing
    ],
)
def test_gap_and_suggestion(
    upper: float, lower: float, gap: float, suggestion: float | None
) -> None:
    frame = hits([("eval", 0, 0, "a.md", 0, upper), ("must_refuse", 0, 0, "a.md", 0, lower)])
    found = bands(frame, expected([(0, "a.md", 0, 1)]), searched(1), must_refuse=1)
    assert found.gap == pytest.approx(gap, abs=1e-6)
    if suggestion is None:
        assert found.suggestion is None
    else:
        assert found.suggestion == pytest.approx(suggestion, abs=1e-4)


def test_no_sample_means_no_gap() -> None:
    frame = hits([("eval", 0, 0, "a.md", 0, 0.7)])
    found = bands(frame, expected([(0, "a.md", None, 1)]), searched(1), must_refuse=3)
    assert (found.lower_max, found.gap, found.suggestion) == (None, None, None)


def _run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_reports_and_exits_by_what_it_found(tmp_path: Path) -> None:
    args = [
        "--eval", str(DATA / "sake" / "eval.jsonl"),
        "--must-refuse", str(DATA / "sake" / "must_refuse.jsonl"),
        "--context", "sake", "--out", str(tmp_path / "bands.json"),
    ]  # fmt: skip
    with running_server(DATA, vector_lane=True) as url:
        code, out, err = _run([*args, "--url", url])
    assert code == 0, err
    report = json.loads((tmp_path / "bands.json").read_text("utf-8"))
    assert len(report["upper"]) + len(report["below_sweep"]) + len(report["not_served"]) == 16
    assert report["gap"] == pytest.approx(
        min(row["cosine"] for row in report["upper"])
        - max(row["cosine"] for row in report["lower"])
    )
    verdict = "overlap: " if report["gap"] <= 0 else "gap: "
    assert any(line.startswith(f"  {verdict}") for line in out.splitlines())
    assert "setting semantic_floor moves both" in out
    with running_server(DATA) as url:
        code, out, err = _run([*args, "--url", url])
    assert (code, out) == (1, "")
    assert err == (
        "taguru: evaluate: refusal-bands: the server ran no vector lane (no embedding provider "
        "is configured): nothing to measure\n"
    )


def _failing_search_server(fails: Callable[[str], bool]) -> ScriptedServer:
    """Preflight answered; a search whose query ``fails`` gets a 500, the others
    one hit of a.md with a vector lane."""

    def answer(request: Request) -> Response:
        if request.path == "/health":
            return Response.of_json(200, {"status": "ok", "version": "0.9.3"})
        if request.path.endswith("/sources"):
            return envelope({"total": 1, "sources": [] if "after" in request.query else ["a.md"]})
        if request.path.endswith("/sources/search"):
            if fails(request.json()["query"]):
                return Response.of_json(500, {"status": "error", "error": "index offline"})
            lanes = {"bm25": {"ran": True}, "vector": {"ran": True}}
            hit = {"source": "a.md", "paragraph": 0, "score": 0.5, "text": "t",
                   "lanes": {"vector": {"rank": 1, "score": 0.5}}}  # fmt: skip
            plan = {"contexts": [{"context": "ctx", "lanes": lanes}]}
            return envelope({"hits": [hit], "plan": plan})
        return envelope(context_entry("ctx"))

    return ScriptedServer(answer)


def _band_files(tmp_path: Path) -> list[str]:
    eval_path = tmp_path / "eval.jsonl"
    eval_path.write_text(
        '{"taguru_eval": 1}\n'
        + "".join(
            json.dumps({"case_id": f"a{n}", "query": f"ok {n}",
                        "expected_sources": [{"source": "a.md", "relevance": 1}]}) + "\n"
            for n in range(3)
        ),
        "utf-8",
    )  # fmt: skip
    refuse_path = tmp_path / "must_refuse.jsonl"
    refuse_path.write_text(
        '{"taguru_eval_must_refuse": 1}\n'
        '{"case_id": "r0", "query": "bad r0", "kind": "out_of_corpus", "why": "w"}\n',
        "utf-8",
    )
    return ["--eval", str(eval_path), "--must-refuse", str(refuse_path), "--context", "ctx"]


def test_failed_sweep_searches_are_reported_as_failures(tmp_path: Path) -> None:
    args = _band_files(tmp_path)
    with _failing_search_server(lambda query: True) as url:
        code, out, err = _run([*args, "--url", url])
    assert (code, out) == (1, "")
    assert err.startswith("taguru: evaluate: refusal-bands: every sweep search failed (4 of 4; ")
    assert "answered 500: index offline" in err and "no vector lane" not in err
    # Some failed: they are left out of both bands and counted apart, not "not served".
    with _failing_search_server(lambda query: query in ("ok 1", "bad r0")) as url:
        code, out, err = _run([*args, "--url", url, "--out", str(tmp_path / "b.json")])
    assert code == 0, err
    report = json.loads((tmp_path / "b.json").read_text("utf-8"))
    assert (report["failed"], report["not_served"]) == (["a1", "r0"], [])
    assert [row["case_id"] for row in report["upper"]] == ["a0", "a2"]
    assert "  upper band (answerable, best expected hit): 2 of 2 case(s)" in out
    assert "lower band (must-refuse, best hit): 0 of 0 case(s)" in out
    assert "  2 case(s) whose sweep search failed, left out of both bands" in out


def test_an_expected_source_the_context_does_not_carry_is_exit_2(tmp_path: Path) -> None:
    text = (DATA / "sake" / "eval.jsonl").read_text("utf-8")
    misspelled = tmp_path / "eval.jsonl"
    misspelled.write_text(text.replace("corpus/rice.md", "corpus/rice.markdown"), "utf-8")
    args = [
        "--eval", str(misspelled),
        "--must-refuse", str(DATA / "sake" / "must_refuse.jsonl"),
        "--context", "sake",
    ]  # fmt: skip
    with running_server(DATA, vector_lane=True) as url:
        code, out, err = _run([*args, "--url", url])
    assert (code, out) == (2, "")
    lines = err.splitlines()
    unknown = "expected_sources names 'corpus/rice.markdown', which 'sake' does not carry"
    assert lines and all(
        line.startswith("taguru: evaluate: case '") and line.endswith(unknown) for line in lines
    ), err


def test_usage() -> None:
    code, _out, err = _run(["--eval", "e"])
    assert code == 2 and "--must-refuse is required" in err
    code, _out, err = _run(["--eval", "e", "--must-refuse", "m", "--context", "c", "--limit", "0"])
    assert code == 2 and "--limit needs an integer within 1..=1000" in err
    code, out, _err = _run(["--help"])
    assert code == 0 and "never gates" in out
