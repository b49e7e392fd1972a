"""``refusal-bands`` (ABSTENTION.md §3.12): the two bands, the gap or the overlap; never a gate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from support.paths import DATA

from taguru_eval.cli.refusal_bands import main
from taguru_eval.refserver.serve import running_server
from taguru_eval.run.lanes.bands import SWEEP_HITS_SCHEMA
from taguru_eval.score.bands import bands
from taguru_eval.tables.schemas import EXPECTED


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
